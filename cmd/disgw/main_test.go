package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

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
	p := startGateway(t, gatewayOpts{data: data, ready: ready, env: []string{"DISGW_LISTEN=not-an-address"}, args: []string{"--config", cfgFile}})
	addr := p.addr
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

	p = p.restart(t)
	addr = p.addr
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
