// Package gateway serves the Kafka wire protocol in front of a
// disbackend.Backend: the listener, one reader and one writer goroutine per
// connection, the API dispatch table (one file per API key), metadata and
// topic admin, the produce and fetch paths, and the Kafka error mapping.
//
// It does not hand-encode Kafka structs (kmsg does) and does not import a
// backend implementation.
package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/groupcoord"
	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/internal/metrics"
	"github.com/disgw/disgw/kafkawire"
	"github.com/disgw/disgw/kafkawire/batch"
)

// Config is the gateway's own configuration. Zero values are replaced by
// the defaults of DefaultConfig.
type Config struct {
	// Listen is the TCP address to bind, HOST:PORT, of the single
	// PLAINTEXT listener used when Listeners is empty. Default
	// 127.0.0.1:9092.
	Listen string
	// Advertise is the HOST:PORT given to clients in Metadata. Empty means
	// the address actually bound (never 0.0.0.0, never port 0: an
	// unspecified host advertises 127.0.0.1).
	Advertise string
	// Listeners are the named listeners (Kafka listeners,
	// advertised.listeners, listener.security.protocol.map); empty means
	// one PLAINTEXT listener on Listen, advertising Advertise.
	Listeners []Listener
	// TLS is the certificate and client verification of the SSL and
	// SASL_SSL listeners.
	TLS TLSConfig
	// SASL is the authentication of the SASL_PLAINTEXT and SASL_SSL
	// listeners.
	SASL SASLConfig
	// NodeID is this broker's node id in Metadata. Default 0.
	NodeID int32
	// ClusterID is the cluster id in Metadata and DescribeCluster; empty
	// means the backend's (disbackend.Backend.ClusterID), which never
	// changes for its data.
	ClusterID string
	// MaxFrameBytes caps one request frame, in bytes (Kafka
	// socket.request.max.bytes). A larger frame closes the connection.
	// Default 100 MiB.
	MaxFrameBytes int32
	// IdleTimeout closes a connection with no request for this long
	// (Kafka connections.max.idle.ms). Default 10 minutes.
	IdleTimeout time.Duration
	// FrameReadTimeout bounds reading one request frame once its size has
	// arrived (and again once the request budget had room for it): a
	// client that starts a frame and stalls is closed after this, not
	// after IdleTimeout. Default 30 s.
	FrameReadTimeout time.Duration
	// QueuedMaxRequestBytes bounds the memory of requests being read,
	// decoded and answered across all connections, in bytes (Kafka
	// queued.max.request.bytes): a request takes kafkawire.RequestCost
	// before its body is read and gives it back once answered; a reader
	// waits for room. The last eighth is kept for small requests. Must be
	// at least MaxFrameBytes·8/7. Default 128 MiB.
	QueuedMaxRequestBytes int64
	// MaxConnections bounds the open client connections (Kafka
	// max.connections); one more is closed at once. Default 4096.
	MaxConnections int
	// MaxConnectionsPerIP bounds the open connections from one client
	// address (Kafka max.connections.per.ip). Default 1024.
	MaxConnectionsPerIP int
	// WriteTimeout bounds writing one response. Default 30 s.
	WriteTimeout time.Duration
	// MaxInFlight is how many requests of one connection may wait for their
	// responses at once; further reads wait (backpressure). Default 64.
	MaxInFlight int
	// MetadataRefresh is how often the topic cache is brought in line with
	// the backend's streams (one ListStreams), and so the bound on how long
	// a stream created, deleted or scaled by others (in DIS) takes to show
	// in Metadata; failed listings back off up to 2 minutes. 0 (the
	// default) never refreshes: topics are then only found when a client
	// names them.
	MetadataRefresh time.Duration
	// AutoCreateTopics lets Metadata create unknown requested topics
	// (Kafka auto.create.topics.enable). Default true.
	AutoCreateTopics bool
	// DefaultPartitions is the partition count of auto-created topics and of
	// CreateTopics with -1 (Kafka num.partitions). Default 1.
	DefaultPartitions int32
	// DefaultRetention is retention.ms for new topics that do not set it.
	// Default 168 hours (the embedded store's default). Negative = unlimited.
	DefaultRetention time.Duration
	// MaxPartitions is the most partitions a topic may have; CreateTopics
	// and CreatePartitions asking for more get INVALID_PARTITIONS. Default
	// 10000.
	MaxPartitions int32
	// FetchMaxBytes caps one Fetch response's record bytes whatever the
	// client asks (Kafka fetch.max.bytes); the first batch is still
	// returned whole when it is larger (KIP-74). Default 55 MiB (Kafka's).
	FetchMaxBytes int32
	// MaxMessageBytes is max.message.bytes for new topics: the largest
	// record batch, in bytes. Default 1048588 (Kafka's).
	MaxMessageBytes int32
	// DefaultRecordFormat is what DescribeConfigs shows as
	// dis.record.format of topics that do not set it: the DIS backend's
	// dis_record_format. Default "auto".
	DefaultRecordFormat string
	// RequestOverhead is added to a request's own timeout to bound its
	// handling. Default 5 s.
	RequestOverhead time.Duration
	// ShutdownGrace is how long Shutdown waits for in-flight requests before
	// closing connections. Default 10 s.
	ShutdownGrace time.Duration
	// GroupInitialRebalanceDelay is how long a new consumer group waits for
	// more members before its first rebalance (Kafka
	// group.initial.rebalance.delay.ms). Default 3 s; negative means none.
	GroupInitialRebalanceDelay time.Duration
	// GroupMinSessionTimeout and GroupMaxSessionTimeout bound the session
	// timeouts JoinGroup accepts (Kafka group.min.session.timeout.ms,
	// group.max.session.timeout.ms). Defaults 6 s and 30 min.
	GroupMinSessionTimeout time.Duration
	GroupMaxSessionTimeout time.Duration
	// OffsetsRetention deletes the committed offsets of a group that has
	// been empty this long (Kafka offsets.retention.minutes). Default 7 days;
	// negative keeps them forever.
	OffsetsRetention time.Duration
	// Limits bounds what one request may ask for (limits.go).
	Limits RequestLimits
	// DecompressionBudgetBytes bounds the decompressed bytes all
	// connections hold at once (decompress.go); a batch waits for room
	// until its request's timeout (then REQUEST_TIMED_OUT). Default
	// DefaultDecompressionBudgetBytes (256 MiB).
	DecompressionBudgetBytes int64
	// MaxDecompressedMessageBytes is max.decompressed.message.bytes of
	// topics that do not set it: the most bytes a batch's records may
	// decompress to (else INVALID_RECORD). Default
	// DefaultMaxDecompressedMessageBytes (100 MiB); at most 128 MiB and the
	// budget are used.
	MaxDecompressedMessageBytes int64
	// Authorizer turns on authorization with Kafka's ACL model (Kafka
	// authorizer.class.name=...StandardAuthorizer, authorize.go): every
	// request is checked against the ACLs kept in the backend (which must
	// be a disbackend.ACLStore). Off (the default), everything is allowed
	// and the ACL APIs answer SECURITY_DISABLED.
	Authorizer bool
	// SuperUsers may do anything (Kafka super.users), e.g. "User:admin".
	SuperUsers []string
	// AllowEveryoneIfNoACL allows an operation on a resource no ACL names
	// (Kafka allow.everyone.if.no.acl.found). Default false.
	AllowEveryoneIfNoACL bool
	// ACLRefreshInterval is how often the ACLs are read again from the
	// backend, so that changes made through another node apply here
	// within it. Default 10 s.
	ACLRefreshInterval time.Duration
	// Metrics receives the request, produce, fetch, connection and
	// consumer-group metrics (internal/metrics); nil counts nothing.
	Metrics *metrics.Metrics
}

// DefaultQueuedMaxRequestBytes is QueuedMaxRequestBytes's default: 128 MiB.
const DefaultQueuedMaxRequestBytes = 128 << 20

// MinQueuedMaxRequestBytes is the smallest request budget that still takes
// a Produce frame of maxFrameBytes: its large requests may use seven
// eighths of it.
func MinQueuedMaxRequestBytes(maxFrameBytes int32) int64 {
	return (int64(maxFrameBytes)*8 + 6) / 7
}

// DefaultConfig returns the defaults listed on Config.
func DefaultConfig() Config {
	return Config{
		Listen:           "127.0.0.1:9092",
		TLS:              TLSConfig{ClientAuth: "none"},
		SASL:             SASLConfig{Mechanisms: []string{MechanismPlain, disbackend.ScramSHA256, disbackend.ScramSHA512}},
		MaxFrameBytes:    kafkawire.DefaultMaxFrameBytes,
		IdleTimeout:      10 * time.Minute,
		FrameReadTimeout: 30 * time.Second,
		WriteTimeout:     30 * time.Second,

		QueuedMaxRequestBytes: DefaultQueuedMaxRequestBytes,
		MaxConnections:        4096,
		MaxConnectionsPerIP:   1024,

		MaxInFlight:         64,
		AutoCreateTopics:    true,
		DefaultPartitions:   1,
		DefaultRetention:    168 * time.Hour,
		MaxMessageBytes:     1048588,
		DefaultRecordFormat: disbackend.RecordFormatAuto,
		MaxPartitions:       10000,
		FetchMaxBytes:       55 << 20,
		RequestOverhead:     5 * time.Second,
		ShutdownGrace:       10 * time.Second,

		GroupInitialRebalanceDelay: 3 * time.Second,
		GroupMinSessionTimeout:     6 * time.Second,
		GroupMaxSessionTimeout:     30 * time.Minute,
		OffsetsRetention:           7 * 24 * time.Hour,
		Limits:                     DefaultRequestLimits(),

		DecompressionBudgetBytes:    DefaultDecompressionBudgetBytes,
		MaxDecompressedMessageBytes: DefaultMaxDecompressedMessageBytes,
		ACLRefreshInterval:          10 * time.Second,
	}
}

func (c *Config) fill() {
	d := DefaultConfig()
	if c.Listen == "" {
		c.Listen = d.Listen
	}
	if c.MaxFrameBytes <= 0 {
		c.MaxFrameBytes = d.MaxFrameBytes
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = d.IdleTimeout
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = d.WriteTimeout
	}
	if c.FrameReadTimeout <= 0 {
		c.FrameReadTimeout = d.FrameReadTimeout
	}
	if c.QueuedMaxRequestBytes <= 0 {
		c.QueuedMaxRequestBytes = max(d.QueuedMaxRequestBytes, MinQueuedMaxRequestBytes(c.MaxFrameBytes))
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = d.MaxConnections
	}
	if c.MaxConnectionsPerIP <= 0 {
		c.MaxConnectionsPerIP = d.MaxConnectionsPerIP
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = d.MaxInFlight
	}
	if c.DefaultPartitions <= 0 {
		c.DefaultPartitions = d.DefaultPartitions
	}
	if c.DefaultRetention == 0 {
		c.DefaultRetention = d.DefaultRetention
	}
	if c.DefaultRecordFormat == "" {
		c.DefaultRecordFormat = d.DefaultRecordFormat
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = d.MaxMessageBytes
	}
	if c.MaxPartitions <= 0 {
		c.MaxPartitions = d.MaxPartitions
	}
	if c.FetchMaxBytes <= 0 {
		c.FetchMaxBytes = d.FetchMaxBytes
	}
	if c.RequestOverhead <= 0 {
		c.RequestOverhead = d.RequestOverhead
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = d.ShutdownGrace
	}
	c.Limits.fill()
	if c.ACLRefreshInterval <= 0 {
		c.ACLRefreshInterval = d.ACLRefreshInterval
	}
	if c.DecompressionBudgetBytes <= 0 {
		c.DecompressionBudgetBytes = d.DecompressionBudgetBytes
	}
	if c.MaxDecompressedMessageBytes <= 0 {
		c.MaxDecompressedMessageBytes = d.MaxDecompressedMessageBytes
	}
}

// Server is one gateway node.
type Server struct {
	cfg     Config
	backend disbackend.Backend
	// disAuth checks PLAIN's AK/SK against DIS in the dis authentication
	// mode (SASLConfig.PlainDIS); nil otherwise. Set by initSASL.
	disAuth disbackend.CredentialVerifier
	// storesRecords: the backend stores records, not batches
	// (disbackend.RecordLog), so Produce hands it the decoded records.
	storesRecords bool
	log           *zap.Logger
	topics        *topicCache
	groups        *groupcoord.Coordinator // consumer groups and committed offsets
	limits        *limiter                // per-request limits, auto-create bucket

	listeners []*listener   // bound by Listen; the first is Addr's
	closing   chan struct{} // closed when Shutdown starts
	closeOnce sync.Once

	budget   *requestBudget
	limitLog *limitLog

	mu          sync.Mutex
	conns       map[*conn]struct{} // guarded by mu
	connsByIP   map[string]int     // guarded by mu; open connections per client address
	nextID      uint64             // guarded by mu
	wg          sync.WaitGroup     // connection goroutines
	bgWG        sync.WaitGroup     // the metadata refresher
	refreshOnce sync.Once

	refusedConns atomic.Int64 // connections closed at accept by MaxConnections or MaxConnectionsPerIP

	// creds keeps SCRAM credentials (the backend's, or in memory);
	// plainUsers are the PLAIN users of SASLConfig.Users, name to password.
	creds      disbackend.CredentialStore
	plainUsers map[string]string

	// decomp is the decompression budget every connection shares.
	decomp *batch.Budget
	// authz checks every request (authorize.go); nil with no authorizer.
	authz *acl.Authorizer
	// acceptHook, set only by tests (export_test.go), runs on each accepted
	// connection before its goroutines start.
	acceptHook atomic.Pointer[func(*conn)]
}

// New returns a server over backend. It loads the topic list from the
// backend. Call Listen, then Serve.
func New(cfg Config, backend disbackend.Backend, log *zap.Logger) (*Server, error) {
	cfg.fill()
	if log == nil {
		log = zap.NewNop()
	}
	s := &Server{
		cfg:           cfg,
		backend:       backend,
		storesRecords: disbackend.StoresRecords(backend),
		decomp:        batch.NewBudget(cfg.DecompressionBudgetBytes),
		log:           log.Named("gateway"),
		closing:       make(chan struct{}),
		conns:         make(map[*conn]struct{}),
		connsByIP:     make(map[string]int),
		budget:        newRequestBudget(cfg.QueuedMaxRequestBytes),
	}
	if max := cfg.QueuedMaxRequestBytes - cfg.QueuedMaxRequestBytes/8; int64(cfg.MaxFrameBytes) > max {
		return nil, fmt.Errorf("gateway: queued max request bytes %d takes frames of at most %d bytes, less than max frame bytes %d", cfg.QueuedMaxRequestBytes, max, cfg.MaxFrameBytes)
	}
	s.limits = newLimiter(s.cfg.Limits, s.log)
	s.limitLog = s.limits.events
	if s.cfg.ClusterID == "" {
		id, err := backend.ClusterID(context.Background())
		if err != nil {
			return nil, fmt.Errorf("gateway: cluster id: %w", err)
		}
		s.cfg.ClusterID = id
	}
	tc, err := newTopicCache(context.Background(), backend)
	if err != nil {
		return nil, fmt.Errorf("gateway: load topics: %w", err)
	}
	s.topics = tc
	if cfg.Authorizer {
		store, ok := backend.(disbackend.ACLStore)
		if !ok {
			return nil, fmt.Errorf("gateway: the authorizer needs a backend that keeps ACLs; %T does not", backend)
		}
		a, err := acl.New(context.Background(), store, acl.Options{SuperUsers: cfg.SuperUsers,
			AllowEveryoneIfNoACL: cfg.AllowEveryoneIfNoACL, RefreshInterval: cfg.ACLRefreshInterval, Logger: s.log.Named("acl")})
		if err != nil {
			return nil, fmt.Errorf("gateway: load acls: %w", err)
		}
		s.authz = a
	}
	s.groups = newGroupCoordinator(cfg, backend, s, log)
	if err := s.cfg.checkListeners(); err != nil {
		return nil, err
	}
	if err := s.initSASL(context.Background()); err != nil {
		return nil, err
	}
	return s, nil
}

// Listen binds every listener (cfg.Listeners, or cfg.Listen alone) and
// fixes their advertised addresses.
func (s *Server) Listen() error {
	// SSL listeners verify client certificates as TLS.ClientAuth says;
	// SASL_SSL listeners do not ask for them, as Kafka ignores a
	// broker-wide ssl.client.auth on SASL_SSL (KIP-684).
	tlsConfs := map[string]*tls.Config{}
	for _, l := range s.cfg.listeners() {
		if l.usesTLS() && tlsConfs[l.SecurityProtocol] == nil {
			cfg := s.cfg.TLS
			if l.SecurityProtocol == ProtocolSASLSSL {
				cfg.ClientAuth = "none"
			}
			c, err := newTLSConfig(cfg, s.log)
			if err != nil {
				return err
			}
			tlsConfs[l.SecurityProtocol] = c
		}
	}
	var bound []*listener
	for _, l := range s.cfg.listeners() {
		b, err := bind(l, tlsConfs[l.SecurityProtocol])
		if err != nil {
			for _, b := range bound {
				b.ln.Close()
			}
			return err
		}
		bound = append(bound, b)
	}
	s.listeners = bound
	return nil
}

// Addr returns the bound address of the first listener (after Listen).
func (s *Server) Addr() net.Addr { return s.listeners[0].ln.Addr() }

// AdvertisedAddr returns HOST:PORT of the first listener as clients are
// told in Metadata.
func (s *Server) AdvertisedAddr() string { return s.listeners[0].advertised() }

// ListenerAddr returns the advertised HOST:PORT of the listener named
// name, or "" when there is none.
func (s *Server) ListenerAddr(name string) string {
	for _, l := range s.listeners {
		if l.Name == name {
			return l.advertised()
		}
	}
	return ""
}

func (l *listener) advertised() string {
	return net.JoinHostPort(l.advHost, strconv.Itoa(int(l.advPort)))
}

// Serve accepts connections on every listener until Shutdown. It returns
// nil after Shutdown, or the first listener's accept error.
func (s *Server) Serve() error {
	if s.listeners == nil {
		if err := s.Listen(); err != nil {
			return err
		}
	}
	if s.cfg.MetadataRefresh > 0 {
		s.refreshOnce.Do(func() {
			s.bgWG.Add(1)
			go s.refreshTopics(s.cfg.MetadataRefresh)
		})
	}
	errs := make(chan error, len(s.listeners))
	for _, l := range s.listeners {
		s.log.Info("listening", zap.String("listener", l.Name), zap.String("security_protocol", l.SecurityProtocol),
			zap.String("listen", l.ln.Addr().String()), zap.String("advertise", l.advertised()))
		go func() { errs <- s.serve(l) }()
	}
	var first error
	for range s.listeners {
		if err := <-errs; err != nil && first == nil {
			first = err
			s.closeListeners()
		}
	}
	return first
}

func (s *Server) closeListeners() {
	for _, l := range s.listeners {
		l.ln.Close()
	}
}

func (s *Server) serve(l *listener) error {
	var backoff time.Duration
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			select {
			case <-s.closing:
				return nil
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return nil // another listener failed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, errTooManyFiles) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed, backing off", zap.Error(err), zap.Duration("backoff", backoff))
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("gateway: accept on listener %s: %w", l.Name, err)
		}
		backoff = 0
		if !s.startConn(nc, l) {
			nc.Close()
		}
	}
}

// clientIP is the address part of a connection's remote address, the key
// of MaxConnectionsPerIP.
func clientIP(nc net.Conn) string {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		return nc.RemoteAddr().String()
	}
	return host
}

// startConn starts a connection's goroutines, or returns false (the caller
// closes nc) when shutting down or when MaxConnections or
// MaxConnectionsPerIP is reached.
func (s *Server) startConn(nc net.Conn, l *listener) bool {
	ip := clientIP(nc)
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closing:
		return false
	default:
	}
	if len(s.conns) >= s.cfg.MaxConnections {
		n := s.refusedConns.Add(1)
		s.limitLog.hit("max_connections", "connection refused: too many connections",
			zap.String("remote_addr", nc.RemoteAddr().String()), zap.Int("max_connections", s.cfg.MaxConnections), zap.Int64("refused_total", n))
		return false
	}
	if s.connsByIP[ip] >= s.cfg.MaxConnectionsPerIP {
		n := s.refusedConns.Add(1)
		s.limitLog.hit("max_connections_per_ip", "connection refused: too many connections from this address",
			zap.String("remote_addr", nc.RemoteAddr().String()), zap.Int("max_connections_per_ip", s.cfg.MaxConnectionsPerIP), zap.Int64("refused_total", n))
		return false
	}
	s.nextID++
	if l.tls != nil {
		nc = tls.Server(nc, l.tls)
	}
	c := newConn(s, nc, s.nextID)
	c.ip = ip
	if h := s.acceptHook.Load(); h != nil {
		(*h)(c)
	}
	c.lst = l
	c.listener = l.Name
	s.conns[c] = struct{}{}
	s.connsByIP[ip]++
	s.cfg.Metrics.ConnOpened()
	s.wg.Add(2)
	go c.readLoop()
	go c.writeLoop()
	return true
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.cfg.Metrics.ConnClosed()
	if s.connsByIP[c.ip]--; s.connsByIP[c.ip] <= 0 {
		delete(s.connsByIP, c.ip)
	}
	s.mu.Unlock()
}

// RequestBytesInUse returns the bytes of QueuedMaxRequestBytes taken now by
// requests being read, decoded and answered.
func (s *Server) RequestBytesInUse() int64 { return s.budget.inUse() }

// RefusedConnections returns how many connections were closed at accept
// because MaxConnections or MaxConnectionsPerIP was reached.
func (s *Server) RefusedConnections() int64 { return s.refusedConns.Load() }

// Shutdown stops accepting, stops reading new requests, lets in-flight
// requests finish and their responses be written (up to ctx or
// cfg.ShutdownGrace), then closes every connection. It does not close the
// backend.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeOnce.Do(func() { close(s.closing) })
	s.closeListeners()
	s.mu.Lock()
	for c := range s.conns {
		c.stopReading()
	}
	s.mu.Unlock()
	// Answer parked JoinGroup/SyncGroup requests (NOT_COORDINATOR) so the
	// writers waiting on them can finish.
	s.groups.Close()
	if s.authz != nil {
		s.authz.Close()
	}
	s.bgWG.Wait()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	grace := time.NewTimer(s.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	case <-grace.C:
	}
	s.mu.Lock()
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	<-done
	return ctx.Err()
}
