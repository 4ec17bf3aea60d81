package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writeTestCerts writes a CA and a server certificate for 127.0.0.1 (PEM,
// 0600) to dir and returns the CA, certificate and key paths.
func writeTestCerts(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "disgw test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(k)
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", der), write("server.key", "EC PRIVATE KEY", kb)
}

// startSASLSSL starts the binary with a SASL_SSL listener (its ready
// address) and a PLAINTEXT one, TLS from generated certificates, and
// users from a 0600 users file; extraEnv is added to its environment.
func startSASLSSL(t *testing.T, dir string, extraEnv ...string) (p *proc, addr, ca string) {
	t.Helper()
	ca, cert, key := writeTestCerts(t, dir)
	users := filepath.Join(dir, "users")
	if err := os.WriteFile(users, []byte("PLAIN admin admin-secret\nSCRAM-SHA-512 kc kcat-secret-512\nSCRAM-SHA-256 py python-secret-256\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Its data in dir, where TestJavaToolsSASLSSL starts it again.
	gw := startGateway(t, gatewayOpts{listeners: "SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0", data: filepath.Join(dir, "data"),
		ready: filepath.Join(dir, "ready"),
		env:   append([]string{"DISGW_TLS_CERT_FILE=" + cert, "DISGW_TLS_KEY_FILE=" + key, "DISGW_SASL_USERS_FILE=" + users}, extraEnv...)})
	return gw.proc, gw.addr, ca
}

// TestKcatSASLSSLScram512: kcat (librdkafka) with security.protocol
// SASL_SSL and SCRAM-SHA-512 produces and consumes through the binary; the
// wrong password fails.
func TestKcatSASLSSLScram512(t *testing.T) {
	t.Parallel()
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed")
	}
	dir := t.TempDir()
	p, addr, ca := startSASLSSL(t, dir)
	opts := func(pass string) []string {
		return []string{"-b", addr, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
			"-X", "sasl.username=kc", "-X", "sasl.password=" + pass, "-X", "ssl.ca.location=" + ca}
	}
	cmd := exec.Command(kcat, append(opts("kcat-secret-512"), "-P", "-t", "kcat-sasl")...)
	cmd.Stdin = strings.NewReader("one\ntwo\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat produce: %v\n%s", err, out)
	}
	out, err := exec.Command(kcat, append(opts("kcat-secret-512"), "-C", "-t", "kcat-sasl", "-o", "beginning", "-c", "2", "-e")...).Output()
	if err != nil || string(out) != "one\ntwo\n" {
		t.Fatalf("kcat consume: %v: %q", err, out)
	}
	bad := exec.Command(kcat, append(opts("wrong"), "-L", "-m", "10")...)
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "uthentication") {
		t.Fatalf("kcat with a wrong password: %v\n%s", err, out)
	}
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if strings.Contains(p.output(t), "kcat-secret-512") {
		t.Error("the log holds a password")
	}
}

// TestConfluentPythonScram256: confluent-kafka-python (the compat venv's)
// with SCRAM-SHA-256 over SASL_SSL produces and consumes.
func TestConfluentPythonScram256(t *testing.T) {
	t.Parallel()
	home, _ := os.UserHomeDir()
	py := filepath.Join(home, ".cache", "disgw-compat", "venv", "bin", "python")
	if err := exec.Command(py, "-c", "import confluent_kafka").Run(); err != nil {
		t.Skip("confluent-kafka-python not installed in the compat venv")
	}
	dir := t.TempDir()
	_, addr, ca := startSASLSSL(t, dir)
	script := fmt.Sprintf(`
import sys
from confluent_kafka import Producer, Consumer
conf = {"bootstrap.servers": %q, "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-256",
        "sasl.username": "py", "sasl.password": "python-secret-256", "ssl.ca.location": %q}
p = Producer(conf)
for i in range(3):
    p.produce("py-sasl", value=b"v%%d" %% i)
assert p.flush(30) == 0, "unflushed"
c = Consumer(dict(conf, **{"group.id": "py-sasl", "auto.offset.reset": "earliest"}))
c.subscribe(["py-sasl"])
got = []
import time
end = time.time() + 30
while len(got) < 3 and time.time() < end:
    m = c.poll(1)
    if m is None:
        continue
    if m.error():
        print(m.error(), file=sys.stderr)
        continue
    got.append(m.value())
c.close()
assert got == [b"v0", b"v1", b"v2"], got
print("ok")
`, addr, ca)
	out, err := exec.Command(py, "-c", script).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("confluent-kafka-python: %v\n%s", err, out)
	}
}
