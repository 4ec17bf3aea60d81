// Package admin is disgw's admin HTTP listener: /healthz and /readyz for
// load balancers and Kubernetes probes, Prometheus /metrics
// (internal/metrics' registry plus the lag collector's kafka_exporter
// metrics) and a read-only, server-rendered web console at /. Nothing it
// serves changes topics, groups or offsets: only GET and HEAD are served.
//
// The lag collector reads the backend and the group coordinator every
// LagInterval into a Snapshot; scrapes and console pages read the latest
// snapshot, so they never call DIS.
package admin

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/gateway"
	"github.com/disgw/disgw/internal/metrics"
)

// Options configure New. Gateway, Backend and Metrics are required.
type Options struct {
	// Listen is the HOST:PORT to bind (port 0: a free port).
	Listen string
	// TLSCertFile and TLSKeyFile, both set, serve HTTPS with this PEM
	// certificate chain and key.
	TLSCertFile, TLSKeyFile string
	// Auth, when set, is HTTP basic authentication: every request but
	// /healthz and /readyz needs a user and password it accepts (else 401).
	// nil serves without authentication.
	Auth func(user, password string) bool
	// Gateway is the Kafka server: readiness and the group coordinator.
	Gateway *gateway.Server
	// Backend is the gateway's backend: topics, offsets, DIS apps.
	Backend disbackend.Backend
	// BackendName is shown on the console: "local" or "dis".
	BackendName string
	// Metrics is the registry /metrics serves; the lag collector adds its
	// metrics to it.
	Metrics *metrics.Metrics
	// LagInterval is how often the snapshot is refreshed. Default 15 s.
	LagInterval time.Duration
	// Config is the effective configuration shown on the console, secrets
	// already masked.
	Config []KV
	// Errors is the ring of recent warnings and errors; nil shows none.
	Errors *ErrorRing
	// Version is shown on the console.
	Version string
	// Logger is named "admin"; nil means no logs.
	Logger *zap.Logger
}

// readyProbeTTL is how long a backend probe's answer is reused by /readyz,
// so probes do not multiply backend calls.
const readyProbeTTL = time.Second

// Server is the admin HTTP listener.
type Server struct {
	opts Options
	log  *zap.Logger
	ln   net.Listener
	hs   *http.Server

	snap       atomic.Pointer[Snapshot]
	refreshNow chan struct{}
	stop       chan struct{}
	stopOnce   sync.Once
	wg         sync.WaitGroup
	shutting   atomic.Bool
	probeMu    sync.Mutex
	probeAt    time.Time
	probeErr   error
}

// New checks opts and registers the lag collector's metrics. Call Listen,
// then Serve.
func New(opts Options) (*Server, error) {
	if opts.Gateway == nil || opts.Backend == nil || opts.Metrics == nil {
		return nil, errors.New("admin: Gateway, Backend and Metrics are required")
	}
	if opts.LagInterval <= 0 {
		opts.LagInterval = 15 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	s := &Server{opts: opts, log: opts.Logger.Named("admin"), refreshNow: make(chan struct{}, 1), stop: make(chan struct{})}
	if err := opts.Metrics.Register(lagCollector{s}); err != nil {
		return nil, fmt.Errorf("admin: register lag metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", s.healthz)
	mux.HandleFunc("/readyz", s.readyz)
	mux.Handle("/metrics", s.authed(promhttp.HandlerFor(opts.Metrics.Registry, promhttp.HandlerOpts{})))
	s.consoleRoutes(mux)
	s.hs = &http.Server{Handler: readOnly(mux), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		ErrorLog: zap.NewStdLog(s.log)}
	return s, nil
}

// Listen binds opts.Listen (with TLS when configured).
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.opts.Listen)
	if err != nil {
		return fmt.Errorf("admin: listen on %s: %w", s.opts.Listen, err)
	}
	if s.opts.TLSCertFile != "" || s.opts.TLSKeyFile != "" {
		cert, err := tls.LoadX509KeyPair(s.opts.TLSCertFile, s.opts.TLSKeyFile)
		if err != nil {
			ln.Close()
			return fmt.Errorf("admin: TLS certificate: %w", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	s.ln = ln
	return nil
}

// Addr is the bound address (after Listen).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// TLS reports whether the listener serves HTTPS.
func (s *Server) TLS() bool { return s.opts.TLSCertFile != "" }

// Serve starts the lag collector and serves HTTP until Shutdown; it
// returns nil after Shutdown.
func (s *Server) Serve() error {
	s.wg.Add(1)
	go s.collect()
	err := s.hs.Serve(s.ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// SetShuttingDown makes /readyz answer 503 from now on (call it when the
// gateway starts shutting down, before its listener closes).
func (s *Server) SetShuttingDown() { s.shutting.Store(true) }

// Shutdown stops the collector and the HTTP server (in-flight requests
// finish within ctx).
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutting.Store(true)
	s.stopOnce.Do(func() { close(s.stop) })
	err := s.hs.Shutdown(ctx)
	s.wg.Wait()
	return err
}

// collect refreshes the snapshot every LagInterval (and at once when
// asked through refreshNow).
func (s *Server) collect() {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	// Groups are read once the coordinator has loaded them.
	select {
	case <-s.opts.Gateway.Coordinator().Ready():
	case <-s.stop:
		return
	}
	var prev *Snapshot
	var traffic map[metrics.PartitionKey]metrics.PartitionTraffic
	lastErr := ""
	t := time.NewTicker(s.opts.LagInterval)
	defer t.Stop()
	for {
		rctx, rcancel := context.WithTimeout(ctx, max(s.opts.LagInterval, 10*time.Second))
		snap, tr := s.refresh(rctx, prev, traffic)
		rcancel()
		// One line when the backend starts failing and one when it is back,
		// not one per interval.
		switch {
		case ctx.Err() != nil:
		case snap.Err != "" && lastErr == "":
			s.log.Warn("admin snapshot incomplete", zap.String("error", snap.Err))
		case snap.Err == "" && lastErr != "":
			s.log.Info("admin snapshot complete again")
		}
		lastErr = snap.Err
		if snap.Err != "" && prev != nil && len(snap.Topics) == 0 {
			// Keep showing the last good data, with the error.
			keep := *prev
			keep.Err = snap.Err
			snap = &keep
		} else {
			prev, traffic = snap, tr
		}
		s.snap.Store(snap)
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.refreshNow:
		}
	}
}

// Snapshot returns the latest snapshot (nil before the first).
func (s *Server) Snapshot() *Snapshot { return s.snap.Load() }

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// readyz answers 200 "ready" while the Kafka listener is open, the gateway
// is not shutting down, in cluster mode the node holds a usable view
// (disbackend.ClusterStatus.NotReady: not before its first view, nor with
// its lease refused or lapsed; between views it stays ready), the backend's
// storage takes writes (disbackend.StorageReporter: not the embedded
// store's full disk) and the backend answered a probe (a ListStreams,
// reused for readyProbeTTL); else 503 with the reason.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := s.ready(r.Context()); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ready:", err)
		return
	}
	fmt.Fprintln(w, "ready")
}

func (s *Server) ready(ctx context.Context) error {
	if s.shutting.Load() {
		return errors.New("shutting down")
	}
	if err := s.opts.Gateway.Ready(); err != nil {
		return err
	}
	if err := s.clusterReady(); err != nil {
		return err
	}
	if sr, ok := s.opts.Backend.(disbackend.StorageReporter); ok {
		if why := sr.StorageNotReady(); why != "" {
			return fmt.Errorf("storage: %s", why)
		}
	}
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	if time.Since(s.probeAt) >= readyProbeTTL {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := s.opts.Backend.ListStreams(pctx)
		cancel()
		if err != nil {
			err = fmt.Errorf("backend: %w", err)
		}
		s.probeAt, s.probeErr = time.Now(), err
	}
	return s.probeErr
}

// authed wraps h with basic authentication when opts.Auth is set.
func (s *Server) authed(h http.Handler) http.Handler {
	if s.opts.Auth == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok || !s.opts.Auth(user, pass) {
			w.Header().Set("WWW-Authenticate", `Basic realm="disgw", charset="UTF-8"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// readOnly refuses every method but GET and HEAD (405): the console
// changes nothing.
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the admin listener is read-only", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// equalConstantTime compares secrets without leaking their length of
// common prefix through timing (for Auth hooks built on fixed pairs).
func equalConstantTime(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// StaticAuth returns an Auth hook accepting exactly user and password (for
// a fixed admin account; the gateway's SASL users plug in the same way).
func StaticAuth(user, password string) func(string, string) bool {
	return func(u, p string) bool { return equalConstantTime(u, user) && equalConstantTime(p, password) }
}

func zapString(k, v string) zap.Field { return zap.String(k, v) }
func zapErr(err error) zap.Field      { return zap.Error(err) }
