package configs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/auth"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/auth/provider"
)

const fileSecret = "file-secret-key-never-shown"

// writeCreds writes text to a credentials file of mode perm and returns its
// path.
func writeCreds(t *testing.T, text string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(p, []byte(text), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // not narrowed by the umask
		t.Fatal(err)
	}
	return p
}

// fields shows every field of c, secrets included (%v shows none).
func fields(c DISCredentials) string {
	return fmt.Sprintf("%q", []string{c.AK, c.SK, c.SecurityToken, c.Token, c.ProjectID, c.Source, c.File, c.Warning})
}

// disConfig is a valid backend dis configuration without credentials.
func disConfig() Config {
	c := Default()
	c.Backend, c.DISEndpoint = BackendDIS, "https://dis.example"
	return c
}

func TestDISCredentialsFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		text      string
		projectID string // dis_project_id
		want      DISCredentials
		errs      []string // substrings of the error; none = no error
	}{
		{name: "the SDK's example", text: `
[basic]
ak = file-ak
sk = ` + fileSecret + `
project_id = file-project
security_token = file-sts-token
iam_endpoint = https://iam.example

[global]
ak = global-ak
sk = global-sk
domain_id = d
`, want: DISCredentials{AK: "file-ak", SK: fileSecret, SecurityToken: "file-sts-token", ProjectID: "file-project"}},
		{name: "dis_project_id wins", text: "[basic]\nak=a\nsk=" + fileSecret + "\nproject_id=file-project\n", projectID: "cfg-project",
			want: DISCredentials{AK: "a", SK: fileSecret, ProjectID: "cfg-project"}},
		{name: "no project_id, dis_project_id set", text: "; comment\n[basic]\nak = a\nsk = \"" + fileSecret + "\"\n", projectID: "cfg-project",
			want: DISCredentials{AK: "a", SK: fileSecret, ProjectID: "cfg-project"}},
		{name: "no project id anywhere", text: "[basic]\nak=a\nsk=" + fileSecret + "\n",
			errs: []string{"has no project_id and dis_project_id is not set"}},
		{name: "empty", text: "", errs: []string{"has no [basic] section"}},
		{name: "only global", text: "[global]\nak=a\nsk=" + fileSecret + "\n", errs: []string{"has no [basic] section"}},
		{name: "section names are case-sensitive, as for the SDK", text: "[Basic]\nak=a\nsk=" + fileSecret + "\n",
			errs: []string{"has no [basic] section"}},
		{name: "no keys", text: "[basic]\nproject_id = p\n", errs: []string{"[basic] has no ak and sk"}},
		{name: "ak without sk", text: "[basic]\nak = a\nproject_id = p\n", errs: []string{"[basic] has ak but no sk"}},
		{name: "sk without ak", text: "[basic]\nsk = " + fileSecret + "\n", errs: []string{"[basic] has sk but no ak"}},
		{name: "federated", text: "[basic]\nidp_id = i\nid_token_file = /t\nproject_id = p\n", errs: []string{"federated identity"}},
		{name: "not INI; the line with the secret is not quoted", text: "[basic]\nak = a\nsk " + fileSecret + "\n",
			errs: []string{"not in the INI format", "may quote a secret"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := disConfig()
			c.DISProjectID = tc.projectID
			c.DISCredentialsFile = writeCreds(t, tc.text, 0o600)
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			got, err := c.DISCredentials()
			if len(tc.errs) > 0 {
				if err == nil {
					t.Fatalf("DISCredentials() = %v, want an error", got)
				}
				msg := err.Error()
				if strings.Contains(msg, fileSecret) || strings.Contains(msg, "\n") {
					t.Fatalf("error %q has the secret or more than one line", msg)
				}
				for _, w := range append(tc.errs, "dis_credentials_file "+c.DISCredentialsFile+": ") {
					if !strings.Contains(msg, w) {
						t.Errorf("error %q does not contain %q", msg, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("DISCredentials() = %v", err)
			}
			tc.want.Source, tc.want.File = CredentialsFromFile, c.DISCredentialsFile
			if got != tc.want {
				t.Fatalf("got  %s\nwant %s", fields(got), fields(tc.want))
			}
		})
	}
}

// The file is read as the SDK's own reader reads it
// (provider.BasicCredentialProfileProvider, pointed at the file by
// HUAWEICLOUD_SDK_CREDENTIALS_FILE). Not parallel: t.Setenv.
func TestDISCredentialsFileAsTheSDKReadsIt(t *testing.T) {
	for i, text := range []string{
		"[basic]\nak = a1\nsk = s1\nproject_id = p1\nsecurity_token = t1\n",
		"# comment\n[global]\nak = g\nsk = g\n\n[basic]\r\nak=a2\r\nsk=\"s=2#x\"\r\nproject_id=p2\r\n",
		"\ufeff[basic]\n  ak   =   a3  \n  sk:s3\niam_endpoint = https://iam.example\nproject_id = `p3`\n",
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			path := writeCreds(t, text, 0o600)
			t.Setenv("HUAWEICLOUD_SDK_CREDENTIALS_FILE", path)
			ic, err := provider.BasicCredentialProfileProvider().GetCredentials()
			if err != nil {
				t.Fatalf("SDK: %v", err)
			}
			sdk := ic.(*auth.BasicCredentials)
			c := disConfig()
			c.DISCredentialsFile = path
			got, err := c.DISCredentials()
			if err != nil {
				t.Fatal(err)
			}
			if got.AK != sdk.AK || got.SK != sdk.SK || got.SecurityToken != sdk.SecurityToken || got.ProjectID != sdk.ProjectId {
				t.Fatalf("disgw read ak %q sk %q token %q project %q; the SDK ak %q sk %q token %q project %q",
					got.AK, got.SK, got.SecurityToken, got.ProjectID, sdk.AK, sdk.SK, sdk.SecurityToken, sdk.ProjectId)
			}
		})
	}
}

func TestDISCredentialsFileErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := disConfig()
	c.DISProjectID = "p"

	c.DISCredentialsFile = filepath.Join(dir, "missing")
	_, err := c.DISCredentials()
	if !errors.Is(err, os.ErrNotExist) || err.Error() != "dis_credentials_file "+c.DISCredentialsFile+": no such file or directory" {
		t.Errorf("missing file: %v", err)
	}

	c.DISCredentialsFile = dir
	if _, err := c.DISCredentials(); err == nil || err.Error() != "dis_credentials_file "+dir+": is a directory" {
		t.Errorf("directory: %v", err)
	}

	big := writeCreds(t, "[basic]\nak=a\nsk=s\n"+strings.Repeat("#", maxCredentialsFileBytes), 0o600)
	c.DISCredentialsFile = big
	if _, err := c.DISCredentials(); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("large file: %v", err)
	}

	if os.Geteuid() != 0 { // root reads a file of mode 0
		c.DISCredentialsFile = writeCreds(t, "[basic]\nak=a\nsk=s\n", 0)
		if _, err := c.DISCredentials(); !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), c.DISCredentialsFile) {
			t.Errorf("unreadable file: %v", err)
		}
	}
}

// A file open to group or others is read, with a warning (SSH refuses
// such a key; disgw only warns).
func TestDISCredentialsFileMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		perm os.FileMode
		warn bool
	}{{0o600, false}, {0o400, false}, {0o640, true}, {0o644, true}, {0o602, true}} {
		c := disConfig()
		c.DISCredentialsFile = writeCreds(t, "[basic]\nak=a\nsk="+fileSecret+"\nproject_id=p\n", tc.perm)
		got, err := c.DISCredentials()
		if err != nil {
			t.Fatalf("mode %04o: %v", tc.perm, err)
		}
		if (got.Warning != "") != tc.warn {
			t.Errorf("mode %04o: warning %q, want one: %v", tc.perm, got.Warning, tc.warn)
		}
		if tc.warn && (!strings.Contains(got.Warning, c.DISCredentialsFile) || !strings.Contains(got.Warning, fmt.Sprintf("%04o", tc.perm)) ||
			strings.Contains(got.Warning, fileSecret)) {
			t.Errorf("mode %04o: warning %q should name the file and mode, never the secret", tc.perm, got.Warning)
		}
	}
}

// dis_ak/dis_sk and dis_token, from the environment, win over the file,
// which is then not read (here it does not exist).
func TestDISCredentialsPrecedence(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	file := writeCreds(t, "[basic]\nak=file-ak\nsk=file-sk\nproject_id=file-project\n", 0o600)
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		flag string // --dis-credentials-file
		want DISCredentials
	}{
		{name: "env AK/SK over the file", yaml: "dis_credentials_file: " + missing + "\ndis_project_id: p\n",
			env:  map[string]string{"DISGW_DIS_AK": "env-ak", "DISGW_DIS_SK": "env-sk"},
			want: DISCredentials{AK: "env-ak", SK: "env-sk", ProjectID: "p", Source: CredentialsFromAK, File: missing}},
		{name: "env token over the file", env: map[string]string{"DISGW_DIS_TOKEN": "tok", "DISGW_DIS_PROJECT_ID": "p",
			"DISGW_DIS_CREDENTIALS_FILE": missing},
			want: DISCredentials{Token: "tok", ProjectID: "p", Source: CredentialsFromToken, File: missing}},
		{name: "file from the environment", env: map[string]string{"DISGW_DIS_CREDENTIALS_FILE": file},
			want: DISCredentials{AK: "file-ak", SK: "file-sk", ProjectID: "file-project", Source: CredentialsFromFile, File: file}},
		{name: "flag over env", env: map[string]string{"DISGW_DIS_CREDENTIALS_FILE": missing}, flag: file,
			want: DISCredentials{AK: "file-ak", SK: "file-sk", ProjectID: "file-project", Source: CredentialsFromFile, File: file}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := Load(writeFile(t, "backend: dis\ndis_endpoint: https://dis.example\n"+tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.ApplyEnv(envMap(tc.env)); err != nil {
				t.Fatal(err)
			}
			if tc.flag != "" {
				if err := c.Set("dis_credentials_file", tc.flag); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			got, err := c.DISCredentials()
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got  %s\nwant %s", fields(got), fields(tc.want))
			}
		})
	}
}

// String and GoString, hence %v, %+v and %#v, never show a secret.
func TestDISCredentialsString(t *testing.T) {
	t.Parallel()
	c := DISCredentials{AK: "ak", SK: fileSecret, SecurityToken: fileSecret, Token: fileSecret, Source: CredentialsFromFile, File: "/f"}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(verb, c); strings.Contains(s, fileSecret) || !strings.Contains(s, "/f") {
			t.Errorf("%s: %q", verb, s)
		}
	}
}
