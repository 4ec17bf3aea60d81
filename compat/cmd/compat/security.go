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
	"path/filepath"
	"time"

	"github.com/disgw/disgw/compat/internal/scen"
)

// The SASL and TLS rows of the matrix: the same scenario as the client's
// plain row, against a disgw whose only listener is spec.Protocol
// (listeners=PROTOCOL://127.0.0.1:0), TLS from a certificate made for the
// run, and one user of spec.Mechanism in its sasl_users_file.

const (
	compatSASLUser     = "compat-user"
	compatSASLPassword = "compat-password-not-logged"
)

// setupSecurity writes a CA, a server certificate for 127.0.0.1 and a
// users file (0600) to dir and returns the Security the scenario uses
// (spec with the user, password and CA filled in) and disgw serve's
// environment for it.
func setupSecurity(dir string, spec scen.Security) (scen.Security, []string, error) {
	ca, cert, key, err := writeCerts(dir)
	if err != nil {
		return spec, nil, err
	}
	users := filepath.Join(dir, "users")
	if err := os.WriteFile(users, []byte(fmt.Sprintf("%s %s %s\n", spec.Mechanism, compatSASLUser, compatSASLPassword)), 0o600); err != nil {
		return spec, nil, err
	}
	spec.Username, spec.Password, spec.CAFile = compatSASLUser, compatSASLPassword, ca
	env := []string{"DISGW_LISTENERS=" + spec.Protocol + "://127.0.0.1:0",
		"DISGW_TLS_CERT_FILE=" + cert, "DISGW_TLS_KEY_FILE=" + key, "DISGW_SASL_USERS_FILE=" + users}
	return spec, env, nil
}

// writeCerts writes a CA and a server certificate for 127.0.0.1 and
// localhost signed by it (PEM, 0600) and returns their paths.
func writeCerts(dir string) (ca, cert, key string, err error) {
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err == nil {
			err = os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
		}
		return p
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "disgw compat CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", "", err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", "", "", err
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
	if err != nil {
		return "", "", "", err
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return "", "", "", err
	}
	ca, cert, key = write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", der), write("server.key", "EC PRIVATE KEY", kb)
	return ca, cert, key, err
}
