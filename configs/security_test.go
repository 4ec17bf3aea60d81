package configs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListenersParse(t *testing.T) {
	c := Default()
	c.ListenersList = "PLAINTEXT://127.0.0.1:9092, external://0.0.0.0:9093,SASL_SSL://:9094"
	c.AdvertisedListeners = "EXTERNAL://broker.example.com:19093"
	c.ListenerSecurityProtocolMap = "EXTERNAL:SASL_PLAINTEXT"
	ls, err := c.Listeners()
	if err != nil {
		t.Fatal(err)
	}
	want := []ListenerSpec{
		{Name: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Listen: "127.0.0.1:9092"},
		{Name: "EXTERNAL", SecurityProtocol: "SASL_PLAINTEXT", Listen: "0.0.0.0:9093", Advertise: "broker.example.com:19093"},
		{Name: "SASL_SSL", SecurityProtocol: "SASL_SSL", Listen: ":9094"},
	}
	if len(ls) != len(want) {
		t.Fatalf("%+v", ls)
	}
	for i := range want {
		if ls[i] != want[i] {
			t.Errorf("listener %d: %+v, want %+v", i, ls[i], want[i])
		}
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "tls_cert_file") {
		t.Errorf("SASL_SSL without a certificate: %v", err)
	}
	for _, bad := range []Config{
		{ListenersList: "INTERNAL://127.0.0.1:1"},                                       // no protocol
		{ListenersList: "PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2"},              // twice
		{ListenersList: "PLAINTEXT://x"},                                                // no port
		{ListenersList: "PLAINTEXT://:1", AdvertisedListeners: "OTHER://h:1"},           // unknown
		{ListenersList: "PLAINTEXT://:1", AdvertisedListeners: "PLAINTEXT://0.0.0.0:1"}, // unspecified
		{ListenersList: "A://:1", ListenerSecurityProtocolMap: "A:TLS"},                 // bad protocol
	} {
		if _, err := bad.Listeners(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestSASLUsersFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "users")
	body := "# users\nPLAIN alice pass with spaces\n\nscram-sha-512 bob b0b\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c := Default()
	c.SASLUsersFile = path
	users, err := c.SASLUsers()
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 2 || users[0] != (SASLUserSpec{"PLAIN", "alice", "pass with spaces"}) || users[1] != (SASLUserSpec{"SCRAM-SHA-512", "bob", "b0b"}) {
		t.Fatalf("%+v", users)
	}
	_ = os.Chmod(path, 0o644)
	if _, err := c.SASLUsers(); err == nil || strings.Contains(err.Error(), "b0b") {
		t.Errorf("world-readable users file: %v", err)
	}
	_ = os.WriteFile(path, []byte("GSSAPI carol secret-xyz\n"), 0o600)
	_ = os.Chmod(path, 0o600)
	if _, err := c.SASLUsers(); err == nil || strings.Contains(err.Error(), "secret-xyz") {
		t.Errorf("bad mechanism: %v (must not show the password)", err)
	}
}
