package gateway_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/disgw/disgw/disbackend/localstore"
	"github.com/disgw/disgw/gateway"
	"github.com/disgw/disgw/kafkawire"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, written as PEM files (0600) to a temp dir.
type testPKI struct {
	dir                           string
	caFile, certFile, keyFile     string
	clientCertFile, clientKeyFile string
	pool                          *x509.CertPool
	caCert                        *x509.Certificate
	caKey                         *ecdsa.PrivateKey
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	dir := t.TempDir()
	p := &testPKI{dir: dir, caFile: filepath.Join(dir, "ca.pem"), certFile: filepath.Join(dir, "server.pem"),
		keyFile: filepath.Join(dir, "server.key"), clientCertFile: filepath.Join(dir, "client.pem"), clientKeyFile: filepath.Join(dir, "client.key")}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "disgw test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	p.caCert, _ = x509.ParseCertificate(der)
	p.caKey = caKey
	writePEM(t, p.caFile, "CERTIFICATE", der)
	p.pool = x509.NewCertPool()
	p.pool.AddCert(p.caCert)
	p.issue(t, p.certFile, p.keyFile, pkix.Name{CommonName: "127.0.0.1"}, 2, x509.ExtKeyUsageServerAuth)
	p.issue(t, p.clientCertFile, p.clientKeyFile, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}}, 3, x509.ExtKeyUsageClientAuth)
	return p
}

func (p *testPKI) issue(t testing.TB, certFile, keyFile string, subj pkix.Name, serial int64, usage x509.ExtKeyUsage) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: subj,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	writePEM(t, keyFile, "EC PRIVATE KEY", kb)
	writePEM(t, certFile, "CERTIFICATE", der)
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (p *testPKI) clientTLS(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: p.pool, ServerName: "127.0.0.1"}
	if withCert {
		kp, err := tls.LoadX509KeyPair(p.clientCertFile, p.clientKeyFile)
		if err != nil {
			panic(err)
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c
}

var testUsers = []gateway.SASLUser{
	{Mechanism: "PLAIN", Name: "alice", Password: "alice-plain-secret"},
	{Mechanism: "SCRAM-SHA-256", Name: "bob", Password: "bob-scram256-secret"},
	{Mechanism: "SCRAM-SHA-512", Name: "carol", Password: "carol-scram512-secret"},
}

// saslConfig makes the first listener protocol (on 127.0.0.1:0) with the
// test users and every mechanism, and a second PLAINTEXT listener.
func saslConfig(pki *testPKI, protocol string) func(*gateway.Config) {
	return func(c *gateway.Config) {
		c.Listeners = []gateway.Listener{
			{Name: "SECURE", SecurityProtocol: protocol, Listen: "127.0.0.1:0"},
			{Name: "PLAIN_LISTENER", SecurityProtocol: gateway.ProtocolPlaintext, Listen: "127.0.0.1:0"},
		}
		if pki != nil {
			c.TLS = gateway.TLSConfig{CertFile: pki.certFile, KeyFile: pki.keyFile, ClientCAFile: pki.caFile, ClientAuth: "requested"}
		}
		c.SASL = gateway.SASLConfig{Mechanisms: []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}, Users: testUsers}
	}
}

var produceConsumeN atomic.Int64

func produceConsume(t *testing.T, opts ...kgo.Opt) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A topic of its own per call: a test calling it twice on one server
	// would otherwise read the first call's record too (from the start).
	topic := fmt.Sprintf("sasl-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), produceConsumeN.Add(1))
	cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic), kgo.ConsumeTopics(topic), kgo.AllowAutoTopicCreation())...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "hello" {
		t.Fatalf("consumed %d records, want the one produced", len(recs))
	}
}

// TestSASLPlainOverTLS: franz-go with SASL/PLAIN over TLS (SASL_SSL)
// produces and consumes; the wrong password gets
// SASL_AUTHENTICATION_FAILED.
func TestSASLPlainOverTLS(t *testing.T) {
	pki := newTestPKI(t)
	g := startGateway(t, saslConfig(pki, gateway.ProtocolSASLSSL))
	produceConsume(t, kgo.SeedBrokers(g.addr), kgo.DialTLSConfig(pki.clientTLS(false)),
		kgo.SASL(plain.Auth{User: "alice", Pass: "alice-plain-secret"}.AsMechanism()))

	cl, _ := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.DialTLSConfig(pki.clientTLS(false)),
		kgo.SASL(plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism()), kgo.RequestRetries(0))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// TestSASLScram: SCRAM-SHA-256 and SCRAM-SHA-512 users of the config
// authenticate on SASL_PLAINTEXT; a wrong password and an unknown user are
// refused.
func TestSASLScram(t *testing.T) {
	g := startGateway(t, saslConfig(nil, gateway.ProtocolSASLPlaintext))
	t.Run("sha256", func(t *testing.T) {
		produceConsume(t, kgo.SeedBrokers(g.addr), kgo.SASL(scram.Auth{User: "bob", Pass: "bob-scram256-secret"}.AsSha256Mechanism()))
	})
	t.Run("sha512", func(t *testing.T) {
		produceConsume(t, kgo.SeedBrokers(g.addr), kgo.SASL(scram.Auth{User: "carol", Pass: "carol-scram512-secret"}.AsSha512Mechanism()))
	})
	for name, m := range map[string]kgo.Opt{
		"wrong password": kgo.SASL(scram.Auth{User: "carol", Pass: "nope"}.AsSha512Mechanism()),
		"unknown user":   kgo.SASL(scram.Auth{User: "mallory", Pass: "x"}.AsSha256Mechanism()),
		"wrong mech":     kgo.SASL(scram.Auth{User: "bob", Pass: "bob-scram256-secret"}.AsSha512Mechanism()),
	} {
		t.Run(name, func(t *testing.T) {
			cl, _ := kgo.NewClient(kgo.SeedBrokers(g.addr), m, kgo.RequestRetries(0))
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			if !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("%v, want SASL_AUTHENTICATION_FAILED", err)
			}
		})
	}
}

func rawAt(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

func handshake(t *testing.T, r *rawConn, mech string) {
	t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = mech
	if resp := r.roundTrip(1, hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		t.Fatalf("handshake: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

func authenticate(t *testing.T, r *rawConn, version int16, token []byte) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	a := kmsg.NewPtrSASLAuthenticateRequest()
	a.SASLAuthBytes = token
	return r.roundTrip(version, a).(*kmsg.SASLAuthenticateResponse)
}

// TestSASLRawWire: before authentication ApiVersions is served and a
// Produce or Metadata closes the connection; a wrong PLAIN password gets
// SASL_AUTHENTICATION_FAILED, then a close; an unknown mechanism
// UNSUPPORTED_SASL_MECHANISM; SaslAuthenticate without handshake
// ILLEGAL_SASL_STATE; the PLAINTEXT listener needs no authentication.
func TestSASLRawWire(t *testing.T) {
	g := startGateway(t, saslConfig(nil, gateway.ProtocolSASLPlaintext))
	t.Run("produce before auth", func(t *testing.T) {
		r := rawAt(t, g.addr)
		if resp := r.roundTrip(2, kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
			t.Fatalf("ApiVersions: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		p := kmsg.NewPtrProduceRequest()
		p.Acks, p.TimeoutMillis = 1, 1000
		r.send(7, p)
		r.expectClosed()
	})
	t.Run("metadata after handshake only", func(t *testing.T) {
		r := rawAt(t, g.addr)
		handshake(t, r, "PLAIN")
		r.send(9, kmsg.NewPtrMetadataRequest())
		r.expectClosed()
	})
	// Each gets SASL_AUTHENTICATION_FAILED and a close. xdg-go/scram
	// panics on the malformed SCRAM client-first message; scramStep turns
	// that into a failed authentication.
	for _, c := range []struct {
		name, mech string
		version    int16
		token      string
	}{
		{"wrong password", "PLAIN", 2, "\x00alice\x00wrong"},
		{"malformed plain", "PLAIN", 0, "alice"},
		{"malformed scram", "SCRAM-SHA-256", 2, ",,,"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := rawAt(t, g.addr)
			handshake(t, r, c.mech)
			if resp := authenticate(t, r, c.version, []byte(c.token)); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
				t.Fatalf("error %v, want SASL_AUTHENTICATION_FAILED", kerr.ErrorForCode(resp.ErrorCode))
			}
			r.expectClosed()
		})
	}
	t.Run("unsupported mechanism", func(t *testing.T) {
		r := rawAt(t, g.addr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = "GSSAPI"
		resp := r.roundTrip(1, hs).(*kmsg.SASLHandshakeResponse)
		if resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(resp.SupportedMechanisms, ",") != "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" {
			t.Fatalf("error %v mechanisms %v", kerr.ErrorForCode(resp.ErrorCode), resp.SupportedMechanisms)
		}
		r.expectClosed()
	})
	t.Run("authenticate without handshake", func(t *testing.T) {
		r := rawAt(t, g.addr)
		if resp := authenticate(t, r, 1, []byte("\x00alice\x00alice-plain-secret")); resp.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("error %v, want ILLEGAL_SASL_STATE", kerr.ErrorForCode(resp.ErrorCode))
		}
		r.expectClosed()
	})
	t.Run("plain ok", func(t *testing.T) {
		r := rawAt(t, g.addr)
		handshake(t, r, "PLAIN")
		if resp := authenticate(t, r, 2, []byte("alice\x00alice\x00alice-plain-secret")); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != 0 {
			t.Fatalf("error %v lifetime %d", kerr.ErrorForCode(resp.ErrorCode), resp.SessionLifetimeMillis)
		}
		md := r.roundTrip(9, kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
		if len(md.Brokers) != 1 || net.JoinHostPort(md.Brokers[0].Host, itoa(md.Brokers[0].Port)) != g.addr {
			t.Fatalf("brokers %+v, want the SASL listener %s", md.Brokers, g.addr)
		}
		if l, ok := gateway.Principals(g.srv)["User:alice"]; !ok || l != "SECURE" {
			t.Fatalf("principals %v, want User:alice on SECURE", gateway.Principals(g.srv))
		}
	})
	t.Run("plaintext listener", func(t *testing.T) {
		addr := g.srv.ListenerAddr("PLAIN_LISTENER")
		r := rawAt(t, addr)
		md := r.roundTrip(9, kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
		if len(md.Brokers) != 1 || net.JoinHostPort(md.Brokers[0].Host, itoa(md.Brokers[0].Port)) != addr {
			t.Fatalf("brokers %+v, want the PLAINTEXT listener %s", md.Brokers, addr)
		}
	})
}

func itoa(p int32) string { return big.NewInt(int64(p)).String() }

// TestListenersAdvertised: Metadata and FindCoordinator answer the
// advertised address of the listener the request came in on.
func TestListenersAdvertised(t *testing.T) {
	g := startGateway(t, func(c *gateway.Config) {
		c.Listeners = []gateway.Listener{
			{Name: "INTERNAL", SecurityProtocol: "PLAINTEXT", Listen: "127.0.0.1:0"},
			{Name: "EXTERNAL", SecurityProtocol: "PLAINTEXT", Listen: "127.0.0.1:0", Advertise: "broker.example.com:19092"},
		}
	})
	for name, want := range map[string]string{"INTERNAL": g.srv.ListenerAddr("INTERNAL"), "EXTERNAL": "broker.example.com:19092"} {
		r := rawAt(t, g.srv.BoundAddr(name))
		md := r.roundTrip(9, kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
		if got := net.JoinHostPort(md.Brokers[0].Host, itoa(md.Brokers[0].Port)); got != want {
			t.Errorf("%s: Metadata broker %s, want %s", name, got, want)
		}
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey = "g"
		fr := r.roundTrip(2, fc).(*kmsg.FindCoordinatorResponse)
		if got := net.JoinHostPort(fr.Host, itoa(fr.Port)); got != want {
			t.Errorf("%s: FindCoordinator %s, want %s", name, got, want)
		}
	}
}

// TestTLSListener: an SSL listener requiring client certificates refuses
// a client without one and serves one with one; TLS below 1.2 is refused;
// a replaced certificate file is served to new connections, and a CA
// added to the client CA file is trusted by new connections.
func TestTLSListener(t *testing.T) {
	pki := newTestPKI(t)
	g := startGateway(t, func(c *gateway.Config) {
		c.Listeners = []gateway.Listener{{Name: "SSL", SecurityProtocol: "SSL", Listen: "127.0.0.1:0"}}
		c.TLS = gateway.TLSConfig{CertFile: pki.certFile, KeyFile: pki.keyFile, ClientCAFile: pki.caFile, ClientAuth: "required"}
	})
	produceConsume(t, kgo.SeedBrokers(g.addr), kgo.DialTLSConfig(pki.clientTLS(true)))
	tc, err := tls.Dial("tcp", g.addr, pki.clientTLS(true))
	if err != nil {
		t.Fatal(err)
	}
	r := &rawConn{t: t, c: tc}
	r.roundTrip(9, kmsg.NewPtrMetadataRequest())
	if l, ok := gateway.Principals(g.srv)["User:CN=alice,OU=eng"]; !ok || l != "SSL" {
		t.Fatalf("principals %v, want User:CN=alice,OU=eng on SSL", gateway.Principals(g.srv))
	}
	tc.Close()

	cl, _ := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.DialTLSConfig(pki.clientTLS(false)), kgo.RequestRetries(0))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	old := pki.clientTLS(true)
	old.MaxVersion = tls.VersionTLS11
	if c, err := tls.Dial("tcp", g.addr, old); err == nil {
		c.Close()
		t.Fatal("TLS 1.1 accepted")
	}

	// Reload: a new server certificate with another subject.
	pki.issue(t, pki.certFile, pki.keyFile, pkix.Name{CommonName: "127.0.0.1", Organization: []string{"reloaded"}}, 9, x509.ExtKeyUsageServerAuth)
	future := time.Now().Add(time.Minute)
	_ = os.Chtimes(pki.certFile, future, future)
	_ = os.Chtimes(pki.keyFile, future, future)
	c, err := tls.Dial("tcp", g.addr, pki.clientTLS(true))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if org := c.ConnectionState().PeerCertificates[0].Subject.Organization; len(org) != 1 || org[0] != "reloaded" {
		t.Fatalf("server certificate organization %v after the files changed, want the reloaded one", org)
	}

	// Reload of the client CA file: a client certificate of another CA is
	// refused until that CA is added to the file.
	other := newTestPKI(t)
	otherTLS := other.clientTLS(true)
	otherTLS.RootCAs = pki.pool
	metadata := func() error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.DialTLSConfig(otherTLS), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		return err
	}
	if metadata() == nil {
		t.Fatal("a client certificate of a CA not in the CA file was served")
	}
	cas, err := os.ReadFile(pki.caFile)
	if err != nil {
		t.Fatal(err)
	}
	more, err := os.ReadFile(other.caFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pki.caFile, append(cas, more...), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(pki.caFile, future, future)
	if err := metadata(); err != nil {
		t.Fatalf("after its CA was added to the CA file, a client certificate was refused: %v", err)
	}
}

// TestScramCredentialsAdmin: kadm's AlterUserSCRAMs creates a user that
// then authenticates, also after a restart over the same store;
// DescribeUserSCRAMs lists mechanisms and iterations; Kafka's errors for
// bad alterations.
func TestScramCredentialsAdmin(t *testing.T) {
	dir := t.TempDir()
	g := startGatewayAt(t, dir, saslConfig(nil, gateway.ProtocolSASLPlaintext))
	admin := kadm.NewClient(g.client(t, kgo.SASL(plain.Auth{User: "alice", Pass: "alice-plain-secret"}.AsMechanism())))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "dave", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "dave-secret"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("alter: %v %v", err, res.Error())
	}
	produceConsume(t, kgo.SeedBrokers(g.addr), kgo.SASL(scram.Auth{User: "dave", Pass: "dave-secret"}.AsSha512Mechanism()))

	desc, err := admin.DescribeUserSCRAMs(ctx)
	if err != nil || desc.Error() != nil {
		t.Fatalf("describe: %v %v", err, desc.Error())
	}
	if d := desc["dave"]; len(d.CredInfos) != 1 || d.CredInfos[0].Mechanism != kadm.ScramSha512 || d.CredInfos[0].Iterations != 8192 {
		t.Fatalf("dave: %+v", d)
	}
	if d := desc["bob"]; len(d.CredInfos) != 1 || d.CredInfos[0].Mechanism != kadm.ScramSha256 || d.CredInfos[0].Iterations != 4096 {
		t.Fatalf("bob (from the config): %+v", d)
	}
	one, _ := admin.DescribeUserSCRAMs(ctx, "nobody")
	if !errors.Is(one["nobody"].Err, kerr.ResourceNotFound) {
		t.Fatalf("describe unknown user: %v, want RESOURCE_NOT_FOUND", one["nobody"].Err)
	}

	// Kafka's errors.
	raw := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	raw.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		{Name: "few", Mechanism: 1, Iterations: 1000, Salt: []byte("s"), SaltedPassword: []byte("p")},
		{Name: "dup", Mechanism: 1, Iterations: 4096, Salt: []byte("s"), SaltedPassword: []byte("p")},
		{Name: "dup", Mechanism: 1, Iterations: 4096, Salt: []byte("s"), SaltedPassword: []byte("p")},
		{Name: "mech", Mechanism: 3, Iterations: 4096, Salt: []byte("s"), SaltedPassword: []byte("p")},
	}
	raw.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "ghost", Mechanism: 2}}
	resp, err := raw.RequestWith(ctx, g.client(t, kgo.SASL(plain.Auth{User: "alice", Pass: "alice-plain-secret"}.AsMechanism())))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*kerr.Error{"few": kerr.UnacceptableCredential, "dup": kerr.DuplicateResource, "mech": kerr.UnsupportedSaslMechanism, "ghost": kerr.ResourceNotFound}
	for _, r := range resp.Results {
		if r.ErrorCode != want[r.User].Code {
			t.Errorf("%s: %v, want %v", r.User, kerr.ErrorForCode(r.ErrorCode), want[r.User])
		}
		delete(want, r.User)
	}
	if len(want) != 0 {
		t.Errorf("no result for %v", want)
	}

	g.stop(t)
	g2 := startGatewayAt(t, dir, saslConfig(nil, gateway.ProtocolSASLPlaintext))
	produceConsume(t, kgo.SeedBrokers(g2.addr), kgo.SASL(scram.Auth{User: "dave", Pass: "dave-secret"}.AsSha512Mechanism()))

	// Deleting the credential: dave is refused.
	admin2 := kadm.NewClient(g2.client(t, kgo.SASL(plain.Auth{User: "alice", Pass: "alice-plain-secret"}.AsMechanism())))
	if res, err := admin2.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "dave", Mechanism: kadm.ScramSha512}}, nil); err != nil || res.Error() != nil {
		t.Fatalf("delete: %v %v", err, res.Error())
	}
	cl, _ := kgo.NewClient(kgo.SeedBrokers(g2.addr), kgo.SASL(scram.Auth{User: "dave", Pass: "dave-secret"}.AsSha512Mechanism()), kgo.RequestRetries(0))
	defer cl.Close()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("deleted user: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// TestSASLReauthentication (KIP-368): SaslAuthenticate v1 answers the
// session lifetime; franz-go re-authenticates and keeps working past it;
// a raw connection that does not re-authenticate is closed at its next
// request after the session ended.
func TestSASLReauthentication(t *testing.T) {
	const lifetime = 1500 * time.Millisecond
	g := startGateway(t, saslConfig(nil, gateway.ProtocolSASLPlaintext), func(c *gateway.Config) { c.SASL.MaxReauth = lifetime })
	r := rawAt(t, g.addr)
	handshake(t, r, "PLAIN")
	if resp := authenticate(t, r, 1, []byte("\x00alice\x00alice-plain-secret")); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != lifetime.Milliseconds() {
		t.Fatalf("error %v lifetime %d, want %d", kerr.ErrorForCode(resp.ErrorCode), resp.SessionLifetimeMillis, lifetime.Milliseconds())
	}
	r.roundTrip(9, kmsg.NewPtrMetadataRequest())

	cl := g.client(t, kgo.SASL(scram.Auth{User: "bob", Pass: "bob-scram256-secret"}.AsSha256Mechanism()), kgo.DefaultProduceTopic("reauth"), kgo.AllowAutoTopicCreation())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deadline := time.Now().Add(3 * lifetime)
	n := 0
	for time.Now().Before(deadline) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce %d across re-authentications: %v", n, err)
		}
		n++
		time.Sleep(100 * time.Millisecond)
	}

	// The raw connection never re-authenticated: its session is over.
	r.send(9, kmsg.NewPtrMetadataRequest())
	r.expectClosed()
}

// TestSASLSecretsNotLogged: over full PLAIN and SCRAM exchanges, good
// and bad, no log message or field holds a password, a SCRAM proof, a
// salt or a key (zap observer at debug).
func TestSASLSecretsNotLogged(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	dir := t.TempDir()
	store, err := localstore.Open(dir, localstore.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cfg := gateway.DefaultConfig()
	saslConfig(nil, gateway.ProtocolSASLPlaintext)(&cfg)
	srv, err := gateway.New(cfg, store, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}()
	addr := srv.AdvertisedAddr()
	secrets := []string{"alice-plain-secret", "bob-scram256-secret", "carol-scram512-secret", "wrong-secret-xyz", "dave-new-secret"}

	produceConsume(t, kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-plain-secret"}.AsMechanism()))
	produceConsume(t, kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: "carol", Pass: "carol-scram512-secret"}.AsSha512Mechanism()))
	for _, m := range []kgo.Opt{
		kgo.SASL(plain.Auth{User: "alice", Pass: "wrong-secret-xyz"}.AsMechanism()),
		kgo.SASL(scram.Auth{User: "bob", Pass: "wrong-secret-xyz"}.AsSha256Mechanism()),
	} {
		cl, _ := kgo.NewClient(kgo.SeedBrokers(addr), m, kgo.RequestRetries(0))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, _ = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		cancel()
		cl.Close()
	}
	admin := kadm.NewClient(func() *kgo.Client {
		cl, _ := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-plain-secret"}.AsMechanism()))
		return cl
	}())
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "dave", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "dave-new-secret"}}); err != nil {
		t.Fatal(err)
	}

	// A SCRAM exchange by hand, to know its proof and nonce.
	r := rawAt(t, addr)
	handshake(t, r, "SCRAM-SHA-256")
	client, _ := xscram.SHA256.NewClient("bob", "bob-scram256-secret", "")
	conv := client.NewConversation()
	first, _ := conv.Step("")
	sf := authenticate(t, r, 2, []byte(first))
	final, err := conv.Step(string(sf.SASLAuthBytes))
	if err != nil {
		t.Fatal(err)
	}
	if resp := authenticate(t, r, 2, []byte(final)); resp.ErrorCode != 0 {
		t.Fatalf("hand SCRAM: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	_, proof, _ := strings.Cut(final, ",p=")
	secrets = append(secrets, proof, first, final, string(sf.SASLAuthBytes))

	if logs.Len() == 0 {
		t.Fatal("nothing logged")
	}
	sawAuth := false
	for _, e := range logs.All() {
		text := e.Message
		for k, v := range e.ContextMap() {
			text += " " + k + "=" + toString(v)
		}
		if strings.Contains(e.Message, "SASL authenticated") {
			sawAuth = true
		}
		for _, s := range secrets {
			if s != "" && strings.Contains(text, s) {
				t.Errorf("log entry %q holds a secret", text)
			}
		}
	}
	if !sawAuth {
		t.Error("no \"SASL authenticated\" entry: the observer saw nothing of the exchanges")
	}
}

func toString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	default:
		return strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(fmtAny(v), "\n", " "), "\t", " "))
	}
}

func fmtAny(v any) string { return fmt.Sprint(v) }

// TestSASLSSLIgnoresClientAuth: tls_client_auth required applies to the
// SSL listener only; a SASL_SSL client without a certificate
// authenticates with SASL, as Kafka ignores a broker-wide ssl.client.auth
// on SASL_SSL listeners (KIP-684).
func TestSASLSSLIgnoresClientAuth(t *testing.T) {
	pki := newTestPKI(t)
	g := startGateway(t, func(c *gateway.Config) {
		saslConfig(pki, gateway.ProtocolSASLSSL)(c)
		c.Listeners = append(c.Listeners, gateway.Listener{Name: "MTLS", SecurityProtocol: gateway.ProtocolSSL, Listen: "127.0.0.1:0"})
		c.TLS.ClientAuth = "required"
	})
	produceConsume(t, kgo.SeedBrokers(g.srv.BoundAddr("SECURE")), kgo.DialTLSConfig(pki.clientTLS(false)),
		kgo.SASL(scram.Auth{User: "carol", Pass: "carol-scram512-secret"}.AsSha512Mechanism()))

	cl, err := kgo.NewClient(kgo.SeedBrokers(g.srv.BoundAddr("MTLS")), kgo.DialTLSConfig(pki.clientTLS(false)), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err == nil {
		t.Fatal("the SSL listener served a client without a certificate")
	}
}

// TestSASLRawTokensAfterV0Handshake: after a v0 SaslHandshake the tokens
// come as raw frames (Kafka < 1.0 clients: kafka-python 2.0): PLAIN's
// token is answered by an empty raw frame, then requests are served; a
// wrong password closes the connection without an answer; a Produce
// instead of the token closes it too.
func TestSASLRawTokensAfterV0Handshake(t *testing.T) {
	g := startGateway(t, saslConfig(nil, gateway.ProtocolSASLPlaintext))
	handshake := func() *rawConn {
		r := g.raw(t)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = "PLAIN"
		if resp := r.roundTrip(0, hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
			t.Fatalf("handshake v0: error %d", resp.ErrorCode)
		}
		return r
	}
	r := handshake()
	r.sendFrame([]byte("\x00alice\x00alice-plain-secret"))
	_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if frame, err := kafkawire.ReadFrame(r.c, 1<<20); err != nil || len(frame) != 0 {
		t.Fatalf("raw PLAIN answer: %q, %v; want an empty frame", frame, err)
	}
	if md := r.roundTrip(9, kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse); len(md.Brokers) != 1 {
		t.Fatalf("Metadata after raw PLAIN: %d brokers", len(md.Brokers))
	}

	r = handshake()
	r.sendFrame([]byte("\x00alice\x00wrong"))
	r.expectClosed()

	r = handshake()
	r.send(9, kmsg.NewPtrProduceRequest())
	r.expectClosed()
}
