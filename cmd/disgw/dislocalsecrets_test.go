//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/auth/basic"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/config"
	dis "github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"
)

// disClient is an official SDK client of the dislocal at addr.
func disClient(t *testing.T, addr, ak, sk, project string) *dis.DisClient {
	t.Helper()
	cred, err := basic.NewCredentialsBuilder().WithAk(ak).WithSk(sk).WithProjectId(project).SafeBuild()
	if err != nil {
		t.Fatal(err)
	}
	hc, err := dis.DisClientBuilder().WithEndpoints([]string{"http://" + addr}).WithCredential(cred).
		WithHttpConfig(config.DefaultHttpConfig().WithTimeout(10 * time.Second).WithRetries(0)).SafeBuild()
	if err != nil {
		t.Fatal(err)
	}
	return dis.NewDisClient(hc)
}

// TestDislocalSecretFlagsRefused: --sk and --token, in any spelling, are
// usage errors naming where the secret goes, without echoing it.
func TestDislocalSecretFlagsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ak", "a", "--sk", "s3cr3t"}, "DISGW_DISLOCAL_SK"},
		{[]string{"-sk=s3cr3t", "--ak", "a"}, "DISGW_DISLOCAL_SK"},
		{[]string{"--sk"}, "--credentials-file"},
		{[]string{"--token=s3cr3t"}, "DISGW_DISLOCAL_TOKEN"},
	} {
		var stderr bytes.Buffer
		getenv := func(string) string { return "" }
		// Should the flag be accepted, the bad --listen ends the run at once.
		args := append([]string{"--data", t.TempDir(), "--listen", "no-port"}, tc.args...)
		if code := dislocalCmd(args, getenv, &stderr); code != exitUsage {
			t.Errorf("%q: exit code %d, want %d", tc.args, code, exitUsage)
		}
		if out := stderr.String(); !strings.Contains(out, tc.want) || !strings.Contains(out, "no longer accepted") || strings.Contains(out, "s3cr3t") {
			t.Errorf("%q: stderr %q, want a refusal naming %s, without the value", tc.args, out, tc.want)
		}
	}
	var stderr bytes.Buffer
	env := map[string]string{"DISGW_DISLOCAL_SK": "s3cr3t"}
	if code := dislocalCmd([]string{"--data", t.TempDir(), "--listen", "no-port"}, func(k string) string { return env[k] }, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "DISGW_DISLOCAL_SK needs --ak") {
		t.Errorf("SK without AK: exit code %d, stderr %q", code, stderr.String())
	}
}

// TestDislocalSKFlagNeverStarts starts the binary with --sk: it must exit
// with a usage error instead of serving with the key in its command line.
func TestDislocalSKFlagNeverStarts(t *testing.T) {
	t.Parallel()
	const sk = "flag-sk-do-not-show"
	p := startDISLocal(t, disLocalOpts{account: disAccount{ak: "ak"}, args: []string{"--sk", sk}, noWait: true})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.done:
			if code := p.wait(t); code != exitUsage {
				t.Fatalf("exit code %d, want %d", code, exitUsage)
			}
			if out := p.output(t); !strings.Contains(out, "DISGW_DISLOCAL_SK") || strings.Contains(out, sk) {
				t.Fatalf("output %q: want the refusal naming DISGW_DISLOCAL_SK, without the key", out)
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
		if _, err := os.Stat(p.ready); err == nil {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.cmd.Process.Pid))
			t.Fatalf("dislocal started with --sk: its secret key is in /proc/PID/cmdline %q", cmdline)
		}
		if time.Now().After(deadline) {
			t.Fatal("dislocal --sk neither exited nor started within 60s")
		}
	}
}

// TestDislocalCredentials starts `disgw dislocal` with its AK/SK from the
// environment, then from a credentials file (with the project id), and
// checks that the SDK signed with them is served, a wrong SK is refused,
// and the secret key is not in /proc/PID/cmdline.
func TestDislocalCredentials(t *testing.T) {
	t.Parallel()
	const ak, sk, project = "cred-ak", "cred-sk-do-not-show", "cred-project"
	dir := t.TempDir()
	credsFile := filepath.Join(dir, "credentials")
	creds := fmt.Sprintf("[basic]\nak = %s\nsk = %s\nproject_id = %s\n", ak, sk, project)
	if err := os.WriteFile(credsFile, []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"env", []string{"DISGW_DISLOCAL_SK=" + sk}, []string{"--ak", ak, "--project-id", project}},
		{"env only", []string{"DISGW_DISLOCAL_AK=" + ak, "DISGW_DISLOCAL_SK=" + sk}, []string{"--project-id", project}},
		{"file", nil, []string{"--credentials-file", credsFile}},
		{"file from env", []string{"DISGW_DISLOCAL_CREDENTIALS_FILE=" + credsFile}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The account only as tc gives it.
			p := startDISLocal(t, disLocalOpts{env: tc.env, args: tc.args})
			addr := p.addr
			cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.cmd.Process.Pid))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(cmdline, []byte(sk)) {
				t.Fatalf("the secret key is in /proc/PID/cmdline: %q", cmdline)
			}
			if !bytes.Contains(cmdline, []byte("dislocal")) {
				t.Fatalf("/proc/PID/cmdline %q is not dislocal's", cmdline)
			}
			if !p.logLine(t, "dislocal started")["signatures"].(bool) {
				t.Fatal("dislocal started without signatures")
			}
			if _, err := disClient(t, addr, ak, sk, project).ListStreams(&model.ListStreamsRequest{}); err != nil {
				t.Fatalf("ListStreams signed with the configured AK/SK: %v", err)
			}
			if _, err := disClient(t, addr, ak, "wrong-"+sk, project).ListStreams(&model.ListStreamsRequest{}); err == nil ||
				!strings.Contains(err.Error(), "DIS.4100") {
				t.Fatalf("ListStreams with a wrong SK: %v, want DIS.4100", err)
			}
			if code := p.stop(t, syscall.SIGTERM); code != 0 {
				t.Fatalf("exit code %d", code)
			}
			if strings.Contains(p.output(t), sk) {
				t.Fatal("the secret key is in dislocal's output")
			}
		})
	}
}

// TestDataFileModes runs `disgw serve` (embedded store) and `disgw
// dislocal` with umask 0, so that only the modes the binaries ask for
// count, writes through both, and finds every file of their data
// directories (and the ready files) 0600 and every directory 0700. Not
// parallel: the umask is the process's, inherited by the binaries.
func TestDataFileModes(t *testing.T) {
	binary(t) // build before the umask changes
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	readyMode := func(path string) {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("ready file %s: mode %v, want 0600", path, fi.Mode())
		}
	}

	gwData, gwReady := filepath.Join(dir, "gw", "data"), filepath.Join(dir, "gw.ready")
	g := startGateway(t, gatewayOpts{data: gwData, ready: gwReady})
	addr := g.addr
	readyMode(gwReady)
	produce(t, addr)
	consume(t, addr)
	if code := g.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("disgw serve exit code %d", code)
	}

	disData := filepath.Join(dir, "dis", "data")
	d := startDISLocal(t, disLocalOpts{account: disAccount{ak: "ak", sk: "sk"}, data: disData})
	c := disClient(t, d.addr, "ak", "sk", "p")
	readyMode(d.ready)
	name := "modes"
	if _, err := c.CreateStream(&model.CreateStreamRequest{Body: &model.CreateStreamReq{StreamName: name, PartitionCount: 1}}); err != nil {
		t.Fatal(err)
	}
	data := "aGVsbG8=" // "hello"
	if _, err := c.SendRecords(&model.SendRecordsRequest{Body: &model.PutRecordsRequest{StreamName: name,
		Records: []model.PutRecordsRequestEntry{{Data: data}}}}); err != nil {
		t.Fatal(err)
	}
	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("disgw dislocal exit code %d", code)
	}

	for _, root := range []string{filepath.Dir(gwData), filepath.Dir(disData)} {
		var bad []string
		n := 0
		err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
			if err != nil || path == root {
				return err // root is the test's own directory
			}
			fi, err := e.Info()
			if err != nil {
				return err
			}
			n++
			want := fs.FileMode(0o600)
			if fi.IsDir() {
				want = 0o700
			}
			if fi.Mode().Perm() != want {
				bad = append(bad, fmt.Sprintf("%s %v", path, fi.Mode()))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n < 5 {
			t.Fatalf("%s holds %d entries: nothing was written?", root, n)
		}
		if len(bad) > 0 {
			t.Errorf("modes other than 0600 (files) and 0700 (directories) under %s:\n%s", root, strings.Join(bad, "\n"))
		}
	}
	if _, err := os.Stat(filepath.Join(disData, "dislocal.json")); err != nil {
		t.Errorf("dislocal wrote no state file: %v", err)
	}
}
