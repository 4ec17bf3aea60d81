package gateway

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// selfSigned returns the PEM of a self-signed certificate and its key.
func selfSigned(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(k)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// TestTLSReloadLogged: a certificate pair or CA file that changes is
// logged once when it loads (info) and once when it does not (warn, the
// last good one kept), never at every handshake.
func TestTLSReloadLogged(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(core)
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem"), filepath.Join(dir, "ca.pem")
	write := func(path string, b []byte, age time.Duration) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(age)
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	c1, k1 := selfSigned(t, "one")
	write(certFile, c1, -time.Hour)
	write(keyFile, k1, -time.Hour)
	write(caFile, c1, -time.Hour)
	kp := &keyPair{certFile: certFile, keyFile: keyFile, log: log}
	cas := &caPool{file: caFile, log: log}
	get := func() {
		t.Helper()
		if _, err := kp.get(); err != nil {
			t.Fatal(err)
		}
		if _, err := cas.get(); err != nil {
			t.Fatal(err)
		}
	}
	count := func(msg string) int { return logs.FilterMessage(msg).Len() }
	get()
	get()
	if logs.Len() != 0 {
		t.Fatalf("first loads logged %d lines", logs.Len())
	}
	// A new certificate without its key, and a CA file that is no PEM.
	c2, k2 := selfSigned(t, "two")
	write(certFile, c2, -time.Minute)
	write(caFile, []byte("not pem"), -time.Minute)
	get()
	get()
	if n := count("TLS certificate or key file changed but the pair does not load; the last good pair stays in use"); n != 1 {
		t.Errorf("mismatched pair warned %d times, want 1", n)
	}
	if n := count("TLS client CA file changed but cannot be read; the last good CAs stay in use"); n != 1 {
		t.Errorf("bad CA file warned %d times, want 1", n)
	}
	write(keyFile, k2, 0)
	write(caFile, c2, 0)
	get()
	get()
	if n := count("TLS certificate reloaded"); n != 1 {
		t.Errorf("reload logged %d times, want 1", n)
	}
	if n := count("TLS client CA file reloaded"); n != 1 {
		t.Errorf("CA reload logged %d times, want 1", n)
	}
}
