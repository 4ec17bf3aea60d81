package main

import (
	"net/http"
	"syscall"
	"testing"
)

// TestAdminBasicAuthSASLUsers: with SASL users, the admin listener asks
// for HTTP basic authentication with the same users: a PLAIN user's and a
// SCRAM user's password are accepted, a wrong one or none gets 401, and
// the probes stay open.
func TestAdminBasicAuthSASLUsers(t *testing.T) {
	t.Parallel()
	p, _, _ := startSASLSSL(t, t.TempDir())
	get := adminGet(t, p)
	for _, c := range []struct {
		path, user, pass string
		want             int
	}{
		{"/metrics", "", "", 401},
		{"/", "", "", 401},
		{"/metrics", "admin", "admin-secret", 200}, // PLAIN user
		{"/metrics", "kc", "kcat-secret-512", 200}, // SCRAM-SHA-512 user
		{"/", "py", "python-secret-256", 200},      // SCRAM-SHA-256 user
		{"/metrics", "kc", "wrong", 401},
		{"/metrics", "admin", "wrong", 401},
		{"/metrics", "nobody", "admin-secret", 401},
		{"/healthz", "", "", 200},
		{"/readyz", "", "", 200},
	} {
		if got := get(c.path, c.user, c.pass); got != c.want {
			t.Errorf("GET %s as %q/%q: %d, want %d", c.path, c.user, c.pass, got, c.want)
		}
	}
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// adminGet returns a GET of p's admin listener as user (basic
// authentication; "" for none) that gives the status code.
func adminGet(t *testing.T, p *proc) func(path, user, pass string) int {
	base := "http://" + p.logLine(t, "started")["admin_listen"].(string)
	return func(path, user, pass string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
}

// TestAdminBasicAuthSuperUsers: with the authorizer on, the admin listener
// (which shows every topic and group) takes only super users: another
// user with the right password gets 401, as a wrong password does.
func TestAdminBasicAuthSuperUsers(t *testing.T) {
	t.Parallel()
	p, _, _ := startSASLSSL(t, t.TempDir(), "DISGW_AUTHORIZER=true", "DISGW_SUPER_USERS=User:admin")
	get := adminGet(t, p)
	for _, c := range []struct {
		path, user, pass string
		want             int
	}{
		{"/metrics", "admin", "admin-secret", 200},
		{"/", "admin", "admin-secret", 200},
		{"/metrics", "kc", "kcat-secret-512", 401},
		{"/", "py", "python-secret-256", 401},
		{"/metrics", "admin", "wrong", 401},
		{"/healthz", "", "", 200},
	} {
		if got := get(c.path, c.user, c.pass); got != c.want {
			t.Errorf("GET %s as %q/%q: %d, want %d", c.path, c.user, c.pass, got, c.want)
		}
	}
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}
