package main

// What a newcomer meets on a first run: the started line, an empty
// DISGW_ADMIN_LISTEN, a typo in the config file, a data directory that is
// not a store, a port already taken.

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// failedLine waits for p to exit with exitError and returns the error of
// its output's one line, {"level":"error","msg":"failed"}.
func failedLine(t *testing.T, p *proc) string {
	t.Helper()
	if code := p.wait(t); code != exitError {
		t.Fatalf("exit code %d, want %d", code, exitError)
	}
	out := strings.TrimSpace(p.output(t))
	var line map[string]any
	if strings.Contains(out, "\n") || json.Unmarshal([]byte(out), &line) != nil {
		t.Fatalf("want exactly one JSON line, got:\n%s", out)
	}
	if line["level"] != "error" || line["msg"] != "failed" {
		t.Fatalf("got %v, want a failed line at level error", line)
	}
	msg, _ := line["error"].(string)
	return msg
}

// TestServeStartedLine: the started line names the version, listener,
// backend, data directory and admin address, and not the whole
// configuration, which is a debug line of its own ("configuration"). An
// empty DISGW_ADMIN_LISTEN turns the admin listener off.
func TestServeStartedLine(t *testing.T) {
	t.Parallel()
	t.Run("info", func(t *testing.T) {
		t.Parallel()
		gw := startGateway(t, gatewayOpts{})
		started := gw.logLine(t, "started")
		for _, k := range []string{"version", "listen", "advertise", "backend", "data", "admin_listen"} {
			if s, _ := started[k].(string); s == "" {
				t.Errorf("started line has no %s: %v", k, started)
			}
		}
		if _, ok := started["config"]; ok {
			t.Errorf("started line carries the whole configuration: %v", started)
		}
		b, _ := json.Marshal(started)
		if len(b) > 512 {
			t.Errorf("started line is %d bytes, want it short: %s", len(b), b)
		}
		if strings.Contains(gw.output(t), `"msg":"configuration"`) {
			t.Error("the configuration line is logged at info")
		}
		if code := gw.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("exit code %d", code)
		}
	})
	t.Run("debug, admin off", func(t *testing.T) {
		t.Parallel()
		// The fixture's DISGW_ADMIN_LISTEN=127.0.0.1:0 is overridden by
		// the later empty one.
		gw := startGateway(t, gatewayOpts{env: []string{"DISGW_ADMIN_LISTEN=", "DISGW_LOG_LEVEL=debug"}})
		if a, ok := gw.logLine(t, "started")["admin_listen"]; ok {
			t.Errorf("an empty DISGW_ADMIN_LISTEN left the admin listener on %v", a)
		}
		cfg, _ := gw.logLine(t, "configuration")["config"].(map[string]any)
		if cfg == nil || cfg["admin_listen"] != "" || cfg["log_level"] != "debug" {
			t.Errorf("configuration line: admin_listen %q, log_level %q; want \"\" and debug", cfg["admin_listen"], cfg["log_level"])
		}
		if len(cfg) < 50 {
			t.Errorf("configuration line has %d keys, want every key", len(cfg))
		}
		if code := gw.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("exit code %d", code)
		}
	})
}

// TestServeConfigTypo: a misspelt key in the config file is a usage error
// that names the key it is near, not every key.
func TestServeConfigTypo(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "disgw.yaml")
	if err := os.WriteFile(file, []byte("admin-listen: 127.0.0.1:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, environ(), "serve", "--config", file)
	if code := p.wait(t); code != exitUsage {
		t.Fatalf("exit code %d, want %d", code, exitUsage)
	}
	out := p.output(t)
	if !strings.Contains(out, `line 1: unknown key "admin-listen" (did you mean "admin_listen"?)`) || strings.Contains(out, "shutdown_grace") {
		t.Fatalf("output %q: want the suggestion alone", out)
	}
}

// TestServeForeignDataDir: a non-empty data directory that holds no disgw
// store is refused, and left as it was.
func TestServeForeignDataDir(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "notes")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "todo.txt"), []byte("buy milk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, gatewayOpts{data: data, noWait: true})
	if msg := failedLine(t, gw.proc); !strings.Contains(msg, "data directory "+data+" is not a disgw store: it holds todo.txt") {
		t.Fatalf("error %q does not say the directory is not a store", msg)
	}
	names, err := os.ReadDir(data)
	if err != nil || len(names) != 1 {
		t.Fatalf("the directory holds %v (%v) after the refused start, want todo.txt alone", names, err)
	}
}

// TestCheckDataDir: missing, empty and store directories are taken,
// others refused.
func TestCheckDataDir(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		entries []string // a trailing / makes a directory
		ok      bool
	}{
		{"missing", nil, true},
		{"empty", []string{}, true},
		{"store", []string{"meta/", "segments/"}, true},
		{"store with notes", []string{"meta/", "notes.txt"}, true},
		{"segments only", []string{"segments/"}, true},
		{"hidden and lost+found", []string{".DS_Store", "lost+found/"}, true},
		{"notes", []string{"notes.txt"}, false},
		{"a file named meta", []string{"meta"}, false},
		{"a lock file alone", []string{"LOCK"}, false},
		{"a project", []string{"go.mod", "main.go", "README.md", "docs/"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "data")
			if tc.entries != nil {
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			for _, e := range tc.entries {
				var err error
				if name, isDir := strings.CutSuffix(e, "/"); isDir {
					err = os.Mkdir(filepath.Join(dir, name), 0o700)
				} else {
					err = os.WriteFile(filepath.Join(dir, e), nil, 0o600)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			err := checkDataDir(dir)
			if (err == nil) != tc.ok {
				t.Fatalf("checkDataDir = %v, want ok %v", err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "is not a disgw store") {
				t.Errorf("error %q does not say the directory is not a store", err)
			}
		})
	}
}

// TestServeBusyPortBeforeStore: a start whose Kafka or admin port another
// process holds fails with one error line that names the port and how to
// move it, before the data directory is created.
func TestServeBusyPortBeforeStore(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() }) // after the parallel subtests
	addr := busy.Addr().String()
	for _, tc := range []struct {
		name, want string
		o          gatewayOpts
	}{
		{"kafka", "Kafka listener PLAINTEXT on " + addr + ": ", gatewayOpts{listen: addr}},
		{"admin", "admin listener on " + addr + ": ", gatewayOpts{env: []string{"DISGW_ADMIN_LISTEN=" + addr}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.o.data = filepath.Join(t.TempDir(), "data")
			tc.o.noWait = true
			gw := startGateway(t, tc.o)
			msg := failedLine(t, gw.proc)
			if !strings.HasPrefix(msg, tc.want) || !strings.Contains(msg, "address already in use") || !strings.Contains(msg, "give another with") {
				t.Fatalf("error %q, want %q..., address already in use, and how to move it", msg, tc.want)
			}
			if _, err := os.Stat(tc.o.data); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the data directory exists after a start that failed on a busy port: %v", err)
			}
		})
	}
}
