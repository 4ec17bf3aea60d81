package admin_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/disgw/disgw/admin"
	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/localstore"
	"github.com/disgw/disgw/gateway"
	"github.com/disgw/disgw/internal/metrics"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startAdmin runs a gateway over a fresh embedded store and an admin
// listener on a free port; everything stops at cleanup.
func startAdmin(t *testing.T, mutate func(*admin.Options)) (*admin.Server, *gateway.Server) {
	t.Helper()
	return startAdminOn(t, nil, mutate)
}

// startAdminOn is startAdmin with the gateway and admin listener over
// wrap(store) (nil: the store itself).
func startAdminOn(t *testing.T, wrap func(*localstore.Store) disbackend.Backend, mutate func(*admin.Options)) (*admin.Server, *gateway.Server) {
	t.Helper()
	store, err := localstore.Open(t.TempDir(), localstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var backend disbackend.Backend = store
	if wrap != nil {
		backend = wrap(store)
	}
	m := metrics.New(metrics.Options{})
	cfg := gateway.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Metrics = m
	gw, err := gateway.New(cfg, backend, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- gw.Serve() }()
	opts := admin.Options{Listen: "127.0.0.1:0", Gateway: gw, Backend: backend, Metrics: m, LagInterval: 50 * time.Millisecond,
		Config: []admin.KV{{Key: "dis_sk", Value: "******"}}, Version: "test"}
	if mutate != nil {
		mutate(&opts)
	}
	s, err := admin.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	adminServed := make(chan error, 1)
	go func() { adminServed <- s.Serve() }()
	t.Cleanup(func() {
		s.SetShuttingDown()
		_ = gw.Shutdown(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if err := <-adminServed; err != nil {
			t.Error(err)
		}
		<-served
		store.Close()
	})
	return s, gw
}

func get(t *testing.T, c *http.Client, url string, auth ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(auth) == 2 {
		req.SetBasicAuth(auth[0], auth[1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAdminEndpointsAndShutdown: /healthz and /readyz answer, every
// console page and fragment renders, /metrics serves the registry; once
// shutting down /readyz is 503; the collector and server goroutines end
// (goleak).
func TestAdminEndpointsAndShutdown(t *testing.T) {
	s, _ := startAdmin(t, nil)
	base := "http://" + s.Addr().String()
	c := http.DefaultClient
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/", "/topics", "/groups", "/dis", "/errors", "/config",
		"/fragment/overview", "/fragment/groups", "/static/console.css", "/static/console.js"} {
		if code, body := get(t, c, base+p); code != http.StatusOK {
			t.Errorf("GET %s: %d %s", p, code, body)
		}
	}
	if code, _ := get(t, c, base+"/static/layout.html"); code != http.StatusNotFound {
		t.Errorf("the template is served as a static file: %d", code)
	}
	if _, body := get(t, c, base+"/config"); !strings.Contains(body, "******") {
		t.Errorf("the config page does not show the masked value")
	}
	s.SetShuttingDown()
	if code, body := get(t, c, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Errorf("/readyz while shutting down: %d %q", code, body)
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestAdminBasicAuth: with an Auth hook, the console and /metrics need a
// user it accepts (401 with a WWW-Authenticate challenge otherwise), while
// the probes stay open.
func TestAdminBasicAuth(t *testing.T) {
	s, _ := startAdmin(t, func(o *admin.Options) { o.Auth = admin.StaticAuth("ops", "s3cret") })
	base := "http://" + s.Addr().String()
	c := &http.Client{}
	defer c.CloseIdleConnections()
	for _, p := range []string{"/", "/metrics", "/fragment/groups", "/static/console.js"} {
		if code, _ := get(t, c, base+p); code != http.StatusUnauthorized {
			t.Errorf("GET %s without credentials: %d, want 401", p, code)
		}
		if code, _ := get(t, c, base+p, "ops", "wrong"); code != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong password: %d, want 401", p, code)
		}
		if code, _ := get(t, c, base+p, "ops", "s3cret"); code != http.StatusOK {
			t.Errorf("GET %s with the password: %d, want 200", p, code)
		}
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, _ := get(t, c, base+p); code != http.StatusOK {
			t.Errorf("GET %s without credentials: %d, want 200", p, code)
		}
	}
}

// TestAdminTLS: with a certificate and key the listener speaks HTTPS only.
func TestAdminTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	pool := writeSelfSigned(t, certFile, keyFile)
	s, _ := startAdmin(t, func(o *admin.Options) { o.TLSCertFile, o.TLSKeyFile = certFile, keyFile })
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	c := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	if code, body := get(t, c, "https://"+s.Addr().String()+"/healthz"); code != http.StatusOK {
		t.Fatalf("https /healthz: %d %s", code, body)
	}
	plain := &http.Client{Transport: &http.Transport{}}
	if code, _ := get(t, plain, "http://"+s.Addr().String()+"/healthz"); code != http.StatusBadRequest {
		t.Errorf("plain HTTP to the TLS listener: %d, want 400", code)
	}
	plain.CloseIdleConnections()
}

func writeSelfSigned(t *testing.T, certFile, keyFile string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

// TestErrorRingBounded: the ring keeps the last n warnings and errors,
// newest first, and nothing below Warn.
func TestErrorRingBounded(t *testing.T) {
	ring := admin.NewErrorRing(3)
	log := zap.New(ring.Core(zapcore.NewNopCore()))
	log.Info("not kept")
	for i := range 5 {
		log.With(zap.Int("i", i)).Warn("w" + string(rune('0'+i)))
	}
	e := ring.Entries()
	if len(e) != 3 || e[0].Message != "w4" || e[2].Message != "w2" || !strings.Contains(e[0].Fields, `"i":4`) {
		t.Fatalf("entries %+v", e)
	}
}

// storageState is a store whose StorageNotReady the test sets.
type storageState struct {
	*localstore.Store
	why atomic.Pointer[string]
}

func (s *storageState) StorageNotReady() string {
	if p := s.why.Load(); p != nil {
		return *p
	}
	return ""
}

// TestReadyzStorage: /readyz answers 503 with the backend's reason while
// its storage refuses writes (the embedded store's full disk), 200 again
// once it takes them.
func TestReadyzStorage(t *testing.T) {
	var st *storageState
	s, _ := startAdminOn(t, func(ls *localstore.Store) disbackend.Backend { st = &storageState{Store: ls}; return st }, nil)
	c := &http.Client{Timeout: 5 * time.Second}
	url := "http://" + s.Addr().String() + "/readyz"
	if code, body := get(t, c, url); code != http.StatusOK {
		t.Fatalf("/readyz: %d %q", code, body)
	}
	why := "disk full: 1048576 bytes free, below storage_min_free_bytes 268435456"
	st.why.Store(&why)
	if code, body := get(t, c, url); code != http.StatusServiceUnavailable || !strings.Contains(body, "not ready: storage: "+why) {
		t.Fatalf("/readyz with the disk full: %d %q", code, body)
	}
	st.why.Store(nil)
	if code, body := get(t, c, url); code != http.StatusOK {
		t.Fatalf("/readyz with space back: %d %q", code, body)
	}
}
