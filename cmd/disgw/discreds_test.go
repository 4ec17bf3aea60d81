package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	credsAK      = "creds-access-key"
	credsSK      = "creds-secret-key-not-logged"
	credsProject = "credsproject"
)

// credsAccount is the account of the dislocal of the credentials tests.
var credsAccount = disAccount{credsAK, credsSK, credsProject}

// writeCredsFile writes an SDK credentials file of mode perm and returns its
// path.
func writeCredsFile(t *testing.T, text string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(p, []byte(text), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
	return p
}

// roundTrip produces one record to topic through addr and consumes it back.
func roundTrip(t *testing.T, addr, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("from a credentials file")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume: %v", ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s[%d]: %v", topic, p, err) })
		if rs := fs.Records(); len(rs) > 0 {
			if r := rs[0]; r.Offset != 0 || string(r.Key) != "k" || string(r.Value) != "from a credentials file" {
				t.Fatalf("consumed offset %d key %q value %q", r.Offset, r.Key, r.Value)
			}
			return
		}
	}
}

// logLines returns the JSON log lines of out with message msg.
func logLines(t *testing.T, out, msg string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(out, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg {
			lines = append(lines, m)
		}
	}
	return lines
}

// TestServeOnDISCredentialsFile: `disgw serve --backend dis` whose only
// credentials are the SDK's credentials file (dis_credentials_file), in front
// of dislocal checking signatures.
func TestServeOnDISCredentialsFile(t *testing.T) {
	t.Parallel()

	// Only the file: ak, sk, project_id and security_token all come from
	// it; the gateway produces and consumes, and no secret is in its output.
	t.Run("file only", func(t *testing.T) {
		t.Parallel()
		d := startDISLocal(t, disLocalOpts{account: credsAccount})
		const stsToken = "security-token-not-logged" // sent as X-Security-Token, signed; dislocal ignores it
		file := writeCredsFile(t, "# disgw e2e\n[basic]\nak = "+credsAK+"\nsk = "+credsSK+"\nproject_id = "+credsProject+
			"\nsecurity_token = "+stsToken+"\n", 0o600)
		gw := startGateway(t, gatewayOpts{dis: d, ownCredentials: true, env: []string{"DISGW_DIS_CREDENTIALS_FILE=" + file}})
		roundTrip(t, gw.addr, "creds.file")
		if code := gw.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("serve exit code after SIGTERM = %d", code)
		}
		out := gw.output(t)
		if strings.Contains(out, credsSK) || strings.Contains(out, stsToken) {
			t.Fatal("a secret from the credentials file is in the gateway's output")
		}
		if f := gw.logLine(t, "started"); f["dis_credentials"] != file {
			t.Fatalf("started line: dis_credentials = %v, want %s", f["dis_credentials"], file)
		}
		if strings.Contains(out, `"level":"warn"`) {
			t.Fatalf("a warning for a file of mode 0600:\n%s", out)
		}
	})

	// A wrong secret in the file: as with a wrong DISGW_DIS_SK, the gateway
	// does not start (exit 1) and logs one error line naming DIS.4100.
	t.Run("wrong secret", func(t *testing.T) {
		t.Parallel()
		d := startDISLocal(t, disLocalOpts{account: credsAccount})
		const wrong = "wrong-file-secret-not-logged"
		file := writeCredsFile(t, "[basic]\nak = "+credsAK+"\nsk = "+wrong+"\n", 0o600)
		gw := startGateway(t, gatewayOpts{dis: d, ownCredentials: true,
			args: []string{"--dis-project-id", credsProject, "--dis-credentials-file", file}, noWait: true})
		if code := gw.wait(t); code != exitError {
			t.Fatalf("serve with a wrong secret in the file: exit code %d, want %d", code, exitError)
		}
		lines := disAuthLines(t, gw.output(t), "DIS.4100", wrong)
		if len(lines) != 1 || lines[0]["level"] != "error" || !strings.Contains(lines[0]["error"].(string), "credentials") {
			t.Fatalf("want one error line naming DIS.4100 and the credentials, got %v", lines)
		}
		if _, err := os.Stat(gw.ready); err == nil {
			t.Fatal("ready file written")
		}
	})

	// DISGW_DIS_AK and DISGW_DIS_SK win over the file, which is not read
	// (its secret is wrong); an info line says so.
	t.Run("environment over file", func(t *testing.T) {
		t.Parallel()
		d := startDISLocal(t, disLocalOpts{account: credsAccount})
		const wrong = "wrong-file-secret-not-logged"
		file := writeCredsFile(t, "[basic]\nak = "+credsAK+"\nsk = "+wrong+"\n", 0o644)
		// The account's DISGW_DIS_AK, DISGW_DIS_SK and --dis-project-id.
		gw := startGateway(t, gatewayOpts{dis: d, env: []string{"DISGW_DIS_CREDENTIALS_FILE=" + file}})
		roundTrip(t, gw.addr, "creds.env")
		if code := gw.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("serve exit code after SIGTERM = %d", code)
		}
		out := gw.output(t)
		if strings.Contains(out, credsSK) || strings.Contains(out, wrong) {
			t.Fatal("a secret key is in the gateway's output")
		}
		if f := gw.logLine(t, "started"); f["dis_credentials"] != "dis_ak" {
			t.Fatalf("started line: dis_credentials = %v, want dis_ak", f["dis_credentials"])
		}
		if l := logLines(t, out, "dis_credentials_file not read: dis_ak takes precedence"); len(l) != 1 || l[0]["dis_credentials_file"] != file {
			t.Fatalf("want one info line saying the file was not read, got %v", l)
		}
		if strings.Contains(out, `"level":"warn"`) {
			t.Fatalf("a warning about a file not read:\n%s", out)
		}
	})

	// A file readable by group and others is used, with a warning naming it
	// (SSH would refuse such a key).
	t.Run("open to others", func(t *testing.T) {
		t.Parallel()
		d := startDISLocal(t, disLocalOpts{account: credsAccount})
		file := writeCredsFile(t, "[basic]\nak = "+credsAK+"\nsk = "+credsSK+"\n", 0o644)
		gw := startGateway(t, gatewayOpts{dis: d, ownCredentials: true,
			env: []string{"DISGW_DIS_CREDENTIALS_FILE=" + file, "DISGW_DIS_PROJECT_ID=" + credsProject}})
		roundTrip(t, gw.addr, "creds.open")
		if code := gw.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("serve exit code after SIGTERM = %d", code)
		}
		out := gw.output(t)
		if strings.Contains(out, credsSK) {
			t.Fatal("the secret key is in the gateway's output")
		}
		var warns []string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, `"level":"warn"`) {
				warns = append(warns, l)
			}
		}
		if len(warns) != 1 || !strings.Contains(warns[0], file) || !strings.Contains(warns[0], "0644") {
			t.Fatalf("want one warning naming the file and its mode 0644, got %q", warns)
		}
	})
}

// TestServeOnDISCredentialsFileErrors: a credentials file that cannot give
// credentials stops the start before DIS is contacted: exit 1 and exactly
// one error line naming the file and the problem, never a secret.
func TestServeOnDISCredentialsFileErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const secret = "secret-in-a-bad-file-not-logged"
	tests := []struct {
		name string
		file string
		want string
	}{
		{"missing", filepath.Join(dir, "missing"), "no such file or directory"},
		{"directory", dir, "is a directory"},
		{"no keys", writeCredsFile(t, "[basic]\nproject_id = "+credsProject+"\n", 0o600), "[basic] has no ak and sk"},
		{"no sk", writeCredsFile(t, "[basic]\nak = "+credsAK+"\n", 0o600), "[basic] has ak but no sk"},
		{"no [basic]", writeCredsFile(t, "[global]\nak = "+credsAK+"\nsk = "+secret+"\n", 0o600), "has no [basic] section"},
		{"not INI", writeCredsFile(t, "[basic]\nak = "+credsAK+"\nsk "+secret+"\n", 0o600), "not in the INI format"},
		{"no project id", writeCredsFile(t, "[basic]\nak = "+credsAK+"\nsk = "+secret+"\n", 0o600),
			"[basic] has no project_id and dis_project_id is not set"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Nothing listens at the endpoint: the start fails before DIS is contacted.
			gw := startGateway(t, gatewayOpts{disEndpoint: "http://127.0.0.1:1", env: []string{"DISGW_DIS_CREDENTIALS_FILE=" + tc.file}, noWait: true})
			if code := gw.wait(t); code != exitError {
				t.Fatalf("exit code %d, want %d", code, exitError)
			}
			out := strings.TrimSpace(gw.output(t))
			if strings.Contains(out, secret) {
				t.Fatal("a secret from the file is in the output")
			}
			var line map[string]any
			if strings.Contains(out, "\n") || json.Unmarshal([]byte(out), &line) != nil {
				t.Fatalf("want exactly one JSON line, got:\n%s", out)
			}
			msg, _ := line["error"].(string)
			if line["level"] != "error" || line["msg"] != "failed" || !strings.HasPrefix(msg, "dis_credentials_file "+tc.file+": "+tc.want) {
				t.Fatalf("got %v, want an error line \"dis_credentials_file %s: %s...\"", line, tc.file, tc.want)
			}
		})
	}
}
