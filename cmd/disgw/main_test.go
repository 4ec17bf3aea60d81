package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// buildFlags are extra flags for building the binary; race_test.go adds
// -race when the tests themselves run with the race detector.
var buildFlags []string

const testVersion = "v0.0.0-e2e"

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// binary builds disgw once per test run and returns its path.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "disgw-bin-")
		if buildErr != nil {
			return
		}
		args := append([]string{"build"}, buildFlags...)
		args = append(args, "-ldflags", "-X main.version="+testVersion, "-o", filepath.Join(buildDir, "disgw"), ".")
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "disgw")
}

// environ is the test's environment without DISGW_* variables, plus extra.
func environ(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DISGW_") {
			env = append(env, kv)
		}
	}
	// Gateways of parallel tests must not share the admin listener's
	// default port; a later DISGW_ADMIN_LISTEN in extra wins.
	env = append(env, "DISGW_ADMIN_LISTEN=127.0.0.1:0")
	return append(env, extra...)
}

// proc is one running disgw.
type proc struct {
	cmd    *exec.Cmd
	stderr string // path of the file holding its stderr
	done   chan struct{}
	err    error // of cmd.Wait, set before done closes
}

func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	stderr := filepath.Join(t.TempDir(), "stderr")
	f, err := os.Create(stderr)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t), args...)
	cmd.Env = env
	cmd.Stderr = f
	cmd.Stdout = f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatal(err)
	}
	f.Close()
	p := &proc{cmd: cmd, stderr: stderr, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("disgw %s output:\n%s", strings.Join(args, " "), p.output(t))
		}
	})
	return p
}

func (p *proc) output(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(p.stderr)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitReady waits for the ready file and returns the address in it.
func (p *proc) waitReady(t *testing.T, readyFile string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(readyFile); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b))
		}
		select {
		case <-p.done:
			t.Fatalf("disgw exited before it was ready: %v", p.err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("disgw did not write its ready file within 60s")
	return ""
}

// stop sends sig and returns the exit code.
func (p *proc) stop(t *testing.T, sig os.Signal) int {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	return p.wait(t)
}

func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatal("disgw did not exit within 60s")
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return 0
}

// logLine returns the fields of the first JSON log line with message msg.
func (p *proc) logLine(t *testing.T, msg string) map[string]any {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(p.output(t)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	t.Fatalf("no log line with msg %q", msg)
	return nil
}

const (
	topic    = "e2e.events"
	nRecords = 5
)

func produce(t *testing.T, addr string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rs []*kgo.Record
	for i := range nRecords {
		rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "value %d", i)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// consume reads the topic from the start until it has nRecords and checks
// them. The client is closed at cleanup, so it may stay connected while the
// gateway shuts down.
func consume(t *testing.T, addr string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < nRecords {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(got), nRecords, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s[%d]: %v", topic, p, err) })
		got = append(got, fs.Records()...)
	}
	if len(got) != nRecords {
		t.Fatalf("consumed %d records, want %d", len(got), nRecords)
	}
	for i, r := range got {
		if r.Offset != int64(i) || string(r.Key) != fmt.Sprintf("k%d", i) || string(r.Value) != fmt.Sprintf("value %d", i) {
			t.Errorf("record %d: offset %d key %q value %q", i, r.Offset, r.Key, r.Value)
		}
	}
}

// TestServeRestart starts the binary, produces and consumes, stops it with
// SIGTERM, starts it again on the same data directory, reads the records
// back and stops it with SIGINT.
func TestServeRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	ready := filepath.Join(dir, "ready")
	cfgFile := filepath.Join(dir, "disgw.yaml")
	// The file's data and the environment's listen are overridden by flags;
	// the file's shutdown_grace is used.
	if err := os.WriteFile(cfgFile, []byte("data: /nonexistent/from-file\nshutdown_grace: 7s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := environ("DISGW_LISTEN=not-an-address")
	args := []string{"serve", "--config", cfgFile, "--listen", "127.0.0.1:0", "--data", data, "--ready-file", ready}

	p := start(t, env, args...)
	addr := p.waitReady(t, ready)
	started := p.logLine(t, "started")
	for k, want := range map[string]string{"listen": addr, "advertise": addr, "data": data, "backend": "local", "version": testVersion} {
		if started[k] != want {
			t.Errorf("started log line: %s = %v, want %q", k, started[k], want)
		}
	}
	produce(t, addr)
	consume(t, addr)
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}
	if g := p.logLine(t, "shutting down")["grace"]; g != "7s" {
		t.Errorf("shutting down log line: grace = %v, want 7s (from the config file)", g)
	}
	p.logLine(t, "stopped")
	if _, err := os.Stat(ready); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ready file left after exit: %v", err)
	}

	p = start(t, env, args...)
	addr = p.waitReady(t, ready)
	consume(t, addr)
	if code := p.stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("exit code after SIGINT = %d, want 0", code)
	}
	p.logLine(t, "stopped")
}

func TestVersion(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(binary(t), "version").CombinedOutput()
	if err != nil {
		t.Fatalf("disgw version: %v\n%s", err, out)
	}
	for _, want := range []string{"disgw " + testVersion + "\n", "go: go1."} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("disgw version printed %q, want it to contain %q", out, want)
		}
	}
}

// TestHelp: -h, --help and help list the commands, a line each, then
// serve's flags, and exit 0.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"serve", "-h"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			out, err := exec.Command(binary(t), args...).CombinedOutput()
			if err != nil {
				t.Fatalf("disgw %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			for _, want := range []string{"\n  disgw [serve] [flags] ", "\n  disgw dislocal [flags] ", "\n  disgw version ", "\n  -listen HOST:PORT\n"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("output does not contain %q:\n%s", want, out)
				}
			}
		})
	}
}

// TestHelpDislocalAndVersionFlag: help dislocal prints dislocal's flags;
// --version and -version print the version.
func TestHelpDislocalAndVersionFlag(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(binary(t), "help", "dislocal").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "-fault-lost-rate") || !strings.Contains(string(out), "-group-session-timeout") {
		t.Fatalf("disgw help dislocal: %v\n%s", err, out)
	}
	want, err := exec.Command(binary(t), "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--version", "-version"} {
		out, err := exec.Command(binary(t), flag).Output()
		if err != nil || string(out) != string(want) {
			t.Fatalf("disgw %s = %q, %v; want %q", flag, out, err, want)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		env   []string
		args  []string
		wants []string
	}{
		{"unknown command", nil, []string{"frobnicate"}, []string{`unknown command "frobnicate"`}},
		{"unknown flag", nil, []string{"serve", "--nope"}, []string{"flag provided but not defined: -nope"}},
		{"every bad value", []string{"DISGW_IDLE_TIMEOUT=soon"},
			[]string{"--listen", "nope", "--advertise", "0.0.0.0:9092", "--backend", "kafka", "--log-level", "loud"},
			[]string{"DISGW_IDLE_TIMEOUT", "listen:", "advertise:", "backend:", "log_level:"}},
		{"dis without settings", []string{"DISGW_DIS_AK=ak"}, []string{"--backend", "dis"},
			[]string{"dis_endpoint:", "dis_project_id:", "dis_ak: dis_ak and dis_sk go together"}},
		{"missing config file", nil, []string{"--config", "/nonexistent/disgw.yaml"}, []string{"no such file"}},
		{"dislocal bad group timings", nil, []string{"dislocal", "--group-session-timeout", "0s", "--group-sync-delay", "-1s"},
			[]string{"--group-session-timeout must be > 0", "--group-sync-delay must be >= 0"}},
		{"dislocal bad keys and denials", []string{"DISGW_DISLOCAL_KEYS=ak1:sk1,nocolon"}, []string{"dislocal", "--deny", "nocolon", "--call-log", "-1"},
			[]string{"invalid value \"nocolon\" for flag -deny: want AK:PREFIX"}},
		{"dislocal bad keys", []string{"DISGW_DISLOCAL_KEYS=ak1:sk1,nocolon"}, []string{"dislocal", "--call-log", "-1"},
			[]string{"DISGW_DISLOCAL_KEYS: item 2 is not AK:SK", "--call-log must be >= 0"}},
		{"dis mode on the local backend", []string{"DISGW_SASL_PLAIN_AUTHENTICATION=dis", "DISGW_LISTENERS=SASL_PLAINTEXT://127.0.0.1:0"}, nil,
			[]string{"sasl_plain_authentication: dis needs backend dis"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := start(t, environ(tc.env...), tc.args...)
			if code := p.wait(t); code != exitUsage {
				t.Errorf("exit code = %d, want %d", code, exitUsage)
			}
			out := p.output(t)
			for _, w := range tc.wants {
				if !strings.Contains(out, w) {
					t.Errorf("output does not contain %q:\n%s", w, out)
				}
			}
		})
	}
}
