package gateway_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/localstore"
	"github.com/disgw/disgw/gateway"
	"github.com/disgw/disgw/kafkawire"
)

// testGateway is a gateway on 127.0.0.1:0 over a localstore in a temp dir.
type testGateway struct {
	srv   *gateway.Server
	store *localstore.Store
	addr  string
	dir   string
	// stop shuts the server down and closes the store, once.
	stop    func(t testing.TB)
	stopped bool
}

func startGateway(t testing.TB, mutate ...func(*gateway.Config)) *testGateway {
	t.Helper()
	dir := t.TempDir()
	return startGatewayAt(t, dir, mutate...)
}

func startGatewayAt(t testing.TB, dir string, mutate ...func(*gateway.Config)) *testGateway {
	t.Helper()
	return startGatewayWrapped(t, dir, nil, mutate...)
}

// startGatewayWrapped is startGatewayAt with the gateway over wrap(store)
// when wrap is not nil (a test's backend around the localstore).
func startGatewayWrapped(t testing.TB, dir string, wrap func(*localstore.Store) disbackend.Backend, mutate ...func(*gateway.Config)) *testGateway {
	t.Helper()
	return startGatewayLogging(t, dir, zapcore.DebugLevel, wrap, mutate...)
}

// startGatewayLogging is startGatewayWrapped logging at level (Info for
// tests that measure memory as the default configuration uses it).
func startGatewayLogging(t testing.TB, dir string, level zapcore.Level, wrap func(*localstore.Store) disbackend.Backend, mutate ...func(*gateway.Config)) *testGateway {
	t.Helper()
	return startGatewayStore(t, dir, localstore.Options{Logger: zaptest.NewLogger(t, zaptest.Level(level))}, wrap, mutate...)
}

// startGatewayStore is startGatewayLogging with the store's options
// (their Logger is the gateway's too; nil: a test logger at debug).
func startGatewayStore(t testing.TB, dir string, opts localstore.Options, wrap func(*localstore.Store) disbackend.Backend, mutate ...func(*gateway.Config)) *testGateway {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = zaptest.NewLogger(t)
	}
	log := opts.Logger
	store, err := localstore.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	var backend disbackend.Backend = store
	if wrap != nil {
		backend = wrap(store)
	}
	cfg := gateway.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	for _, m := range mutate {
		m(&cfg)
	}
	srv, err := gateway.New(cfg, backend, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	g := &testGateway{srv: srv, store: store, addr: srv.AdvertisedAddr(), dir: dir}
	g.stop = func(t testing.TB) {
		if g.stopped {
			return
		}
		g.stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if err := store.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	}
	t.Cleanup(func() { g.stop(t) })
	return g
}

func (g *testGateway) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(g.addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// rawConn speaks the wire directly, for exact versions and bad input.
type rawConn struct {
	t    testing.TB
	c    net.Conn
	corr int32
}

func (g *testGateway) raw(t testing.TB) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", g.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

func (r *rawConn) sendFrame(frame []byte) {
	r.t.Helper()
	out := binary.BigEndian.AppendUint32(nil, uint32(len(frame)))
	if _, err := r.c.Write(append(out, frame...)); err != nil {
		r.t.Fatal(err)
	}
}

func encodeRequest(key, version int16, corr int32, body kmsg.Request) []byte {
	body.SetVersion(version)
	out := binary.BigEndian.AppendUint16(nil, uint16(key))
	out = binary.BigEndian.AppendUint16(out, uint16(version))
	out = binary.BigEndian.AppendUint32(out, uint32(corr))
	out = binary.BigEndian.AppendUint16(out, 4)
	out = append(out, "test"...)
	if body.IsFlexible() {
		out = append(out, 0)
	}
	return body.AppendTo(out)
}

// send writes req at version and returns its correlation id.
func (r *rawConn) send(version int16, req kmsg.Request) int32 {
	r.corr++
	r.sendFrame(encodeRequest(req.Key(), version, r.corr, req))
	return r.corr
}

// recv reads one response frame: correlation id and body bytes after the
// header (flexible headers' tag byte skipped).
func (r *rawConn) recv(key, version int16) (int32, []byte, error) {
	_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	frame, err := kafkawire.ReadFrame(r.c, 1<<30)
	if err != nil {
		return 0, nil, err
	}
	corr := int32(binary.BigEndian.Uint32(frame))
	body := frame[4:]
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	if resp.IsFlexible() && key != 18 {
		body = body[1:]
	}
	return corr, body, nil
}

// roundTrip sends req at version and decodes the response.
func (r *rawConn) roundTrip(version int16, req kmsg.Request) kmsg.Response {
	r.t.Helper()
	corr := r.send(version, req)
	got, body, err := r.recv(req.Key(), version)
	if err != nil {
		r.t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), version, err)
	}
	if got != corr {
		r.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	resp := kmsg.ResponseForKey(req.Key())
	resp.SetVersion(version)
	if err := resp.ReadFrom(body); err != nil {
		r.t.Fatalf("decode %s v%d response: %v", kmsg.NameForKey(req.Key()), version, err)
	}
	return resp
}

// expectClosed asserts the server closes the connection.
func (r *rawConn) expectClosed() {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 1)
	_, err := r.c.Read(buf)
	if err != io.EOF {
		var ne net.Error
		if err == nil || (isTimeout(err, &ne)) {
			r.t.Fatalf("connection not closed by the server: %v", err)
		}
	}
}

func isTimeout(err error, ne *net.Error) bool {
	n, ok := err.(net.Error)
	if ok {
		*ne = n
	}
	return ok && n.Timeout()
}

// requireTool returns the path of an external client, skipping the test
// when it is missing, except under CI=true, where a missing client fails.
func requireTool(t testing.TB, path string, probe ...string) string {
	t.Helper()
	if _, err := os.Stat(path); err == nil {
		if len(probe) == 0 || exec.Command(path, probe...).Run() == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s %v is required under CI=true but is not usable; .ci/run installs it", path, probe)
	}
	t.Skipf("%s not available", path)
	return ""
}
