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

// TestSASLPlainAuthentication: sasl_plain_authentication dis is refused
// without backend dis, without PLAIN or without a SASL listener; users
// and dis are the only values.
func TestSASLPlainAuthentication(t *testing.T) {
	dis := func(mod func(*Config)) Config {
		c := Default()
		c.Backend, c.DISEndpoint, c.DISProjectID, c.DISAK, c.DISSK = BackendDIS, "https://dis.example.com", "p", "ak", "sk"
		c.ListenersList = "SASL_PLAINTEXT://127.0.0.1:9092"
		c.SASLPlainAuthentication = SASLPlainDIS
		mod(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		c    Config
		bad  bool
	}{
		{"dis", dis(func(*Config) {}), false},
		{"users on local", func() Config { c := Default(); c.SASLPlainAuthentication = SASLPlainUsers; return c }(), false},
		{"dis on local", dis(func(c *Config) { c.Backend = BackendLocal }), true},
		{"dis without PLAIN", dis(func(c *Config) { c.SASLEnabledMechanisms = "SCRAM-SHA-256" }), true},
		{"dis without a SASL listener", dis(func(c *Config) { c.ListenersList = "PLAINTEXT://127.0.0.1:9092" }), true},
		{"unknown value", dis(func(c *Config) { c.SASLPlainAuthentication = "iam" }), true},
		{"no principal clients", dis(func(c *Config) { c.DISPrincipalClients = 0 }), true},
		{"no principal ttl", dis(func(c *Config) { c.DISPrincipalTTL = 0 }), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			got := err != nil && (strings.Contains(err.Error(), "sasl_plain_authentication") || strings.Contains(err.Error(), "dis_principal_"))
			if got != tc.bad {
				t.Errorf("Validate: %v; want a sasl_plain_authentication or dis_principal_* problem: %v", err, tc.bad)
			}
		})
	}
}
