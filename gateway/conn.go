package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire"
)

// errCloseConn asks the writer to close the connection without a response
// (Kafka closes the connection on an error of an acks=0 produce).
var errCloseConn = errors.New("close connection")

// reply is one request's place in the connection's response order. Either
// resp is set (ready at once), or finish runs on the writer goroutine, in
// request order, and returns the response (nil for none, as acks=0).
type reply struct {
	req    *kafkawire.Request
	resp   kmsg.Response
	finish func() (kmsg.Response, error)
	cost   int64     // bytes taken from the request budget, given back once written
	start  time.Time // when the request was dispatched (disgw_request_duration_seconds)
	// closeAfter closes the connection once the response is written
	// (failed authentication); the reader stops after queueing it.
	closeAfter bool
	// rawToken: the answer is a raw SASL token frame (rawToken bytes
	// after a 4-byte size, no response header): a token of the exchange
	// after a v0 SaslHandshake. resp is still set, for the metrics.
	rawToken []byte
	raw      bool
}

// conn is one client connection: readLoop decodes requests and applies
// them in order (a produce is enqueued to the backend before the next
// request is read, so one connection's writes keep their order); writeLoop
// completes them in the same order and writes the responses.
type conn struct {
	s      *Server
	nc     net.Conn
	id     uint64
	ip     string // the client address, as counted for MaxConnectionsPerIP
	log    *zap.Logger
	ctx    context.Context // cancelled when the connection ends
	cancel context.CancelFunc

	// Kafka principal of the connection, e.g. "User:alice"; nil means User:ANONYMOUS
	principal atomic.Pointer[string]
	// listener is the name of the listener the connection arrived on.
	listener string

	lst *listener // the listener: its advertised address, TLS, SASL
	// disCreds are the DIS AK/SK of a connection authenticated in the dis
	// mode of PLAIN (SASLConfig.PlainDIS), nil otherwise: every backend
	// call made for its requests carries them (backendCtx, Batch). Set by
	// the reader, read by both goroutines. Never logged.
	disCreds atomic.Pointer[disbackend.Credentials]
	// credsRefused: DIS refused disCreds since they authenticated (the key
	// deleted or disabled; disbackend.ErrAuthenticationFailed from a
	// backend call). The writer closes the connection instead of writing
	// the next response, so that the client authenticates again and is
	// told at SaslAuthenticate.
	credsRefused atomic.Bool
	sasl         saslState // owned by the reader goroutine
	// forwarded: the connection of a request another node forwarded
	// (forwardedConn): never forwarded again.
	forwarded bool

	replies  chan reply // reader → writer, capacity cfg.MaxInFlight
	stopOnce sync.Once
	stopped  chan struct{} // closed by stopReading (shutdown)

	// fetchBuf holds the record batches of the fetch response being built;
	// owned by the writer goroutine and reused, since each response is
	// encoded before the next is built.
	fetchBuf []byte
	// fetchCost is the request budget the Fetch response being built or
	// written holds (takeFetchBudget); owned by the writer goroutine,
	// given back once the response is written.
	fetchCost int64
}

func newConn(s *Server, nc net.Conn, id uint64) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	return &conn{
		s:       s,
		nc:      nc,
		id:      id,
		log:     s.log.With(zap.Uint64("conn_id", id), zap.String("remote_addr", nc.RemoteAddr().String())),
		ctx:     ctx,
		cancel:  cancel,
		replies: make(chan reply, s.cfg.MaxInFlight),
		stopped: make(chan struct{}),
	}
}

// stopReading makes readLoop stop after the request it is reading; queued
// replies are still written.
func (c *conn) stopReading() {
	c.stopOnce.Do(func() {
		close(c.stopped)
		_ = c.nc.SetReadDeadline(time.Now())
	})
}

func (c *conn) readLoop() {
	defer c.s.wg.Done()
	defer close(c.replies)
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("panic while reading a request, closing connection", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
			c.nc.Close()
		}
	}()
	// Small buffer: most requests are small, and a large frame is read
	// straight into its own buffer (bufio passes big reads through), so an
	// idle connection costs little memory.
	if !c.tlsHandshake() {
		return
	}
	br := bufio.NewReaderSize(c.nc, 8<<10)
	for {
		select {
		case <-c.stopped:
			return
		default:
		}
		frame, cost, err := c.readFrame(br)
		if err != nil {
			c.readFailed(err)
			return
		}
		if c.sasl.rawTokens {
			r := c.rawSASLToken(frame)
			r.start, r.cost = time.Now(), cost
			if !c.queue(r) {
				return
			}
			continue
		}
		req, err := kafkawire.ParseRequest(frame)
		if err != nil && !(errors.Is(err, kafkawire.ErrUnsupportedVersion) && req.Key == apiKeyApiVersions) {
			c.s.budget.release(cost)
			if errors.Is(err, kafkawire.ErrTooManyEntries) {
				c.s.limitLog.hit("max_request_entries", "request refused: too many entries, closing connection",
					zap.String("remote_addr", c.nc.RemoteAddr().String()), zap.Error(err))
			} else {
				c.log.Info("bad request, closing connection", zap.Error(err))
			}
			c.nc.Close()
			return
		}
		if req.Key == apiKeyProduce {
			// The head's reservation becomes the whole cost, now that the
			// partitions are counted.
			if total := c.s.budget.clamp(kafkawire.ProduceCost(len(frame), req.Entries)); total > cost {
				if err := c.s.budget.grow(c.ctx, c.stopped, cost, total); err != nil {
					c.readFailed(err)
					return
				}
				cost = total
			}
		}
		start := time.Now()
		r, ok := c.dispatch(req)
		r.start = start
		if !ok {
			c.s.budget.release(cost)
			c.nc.Close()
			return
		}
		r.cost = cost
		if !c.queue(r) {
			return
		}
	}
}

// queue hands r to the writer; false means the reader stops: the
// connection ended (r's budget is given back) or r closes it.
func (c *conn) queue(r reply) bool {
	select {
	case c.replies <- r:
	case <-c.ctx.Done():
		c.s.budget.release(r.cost)
		return false
	}
	return !r.closeAfter
}

// tlsHandshake runs the TLS handshake of a TLS listener's connection
// within FrameReadTimeout and, on an SSL listener, takes the principal
// from a verified client certificate. false closes the connection.
func (c *conn) tlsHandshake() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	_ = c.nc.SetDeadline(time.Now().Add(c.s.cfg.FrameReadTimeout))
	if err := tc.HandshakeContext(c.ctx); err != nil {
		c.log.Info("TLS handshake failed, closing connection", zap.Error(err))
		c.nc.Close()
		return false
	}
	_ = c.nc.SetDeadline(time.Time{})
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 && !c.lst.usesSASL() {
		p := certPrincipal(certs[0])
		c.principal.Store(&p)
		c.log.Debug("TLS client authenticated", zap.String("principal", p))
	}
	return true
}

// readFrame reads one request frame: its size (waiting up to IdleTimeout),
// then, within FrameReadTimeout, its API key and version, then takes the
// request's cost from the request budget (waiting for room), then reads the
// body within FrameReadTimeout again. The caller gives cost back.
//
// Errors: those of kafkawire.ReadFrameSize; errOverBudget; the read
// deadline's timeout; errStopped or the connection's context error when
// the wait for budget ended so.
func (c *conn) readFrame(br *bufio.Reader) (frame []byte, cost int64, err error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
	n, err := kafkawire.ReadFrameSize(br, c.s.cfg.MaxFrameBytes)
	if err != nil {
		return nil, 0, err
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.FrameReadTimeout))
	key, version := int16(-1), int16(-1)
	if n >= 4 {
		head, err := br.Peek(4)
		if err != nil {
			return nil, 0, frameErr(err)
		}
		key, version = int16(binary.BigEndian.Uint16(head)), int16(binary.BigEndian.Uint16(head[2:]))
	}
	if key == apiKeyProduce {
		cost = kafkawire.ProduceHeadCost(int(n))
	} else {
		cost = kafkawire.RequestCost(key, version, int(n))
	}
	// A request costing more than large requests may take runs alone;
	// one costing several times that is refused.
	var waited bool
	if c.s.budget.refuses(cost) {
		err = fmt.Errorf("%w: the request costs %d bytes, more than %d times what large requests may take", errOverBudget, cost, maxCostFactor)
	} else {
		cost = c.s.budget.clamp(cost)
		waited, err = c.s.budget.acquire(c.ctx, c.stopped, cost)
	}
	if err != nil {
		if errors.Is(err, errOverBudget) {
			c.s.limitLog.hit("queued_max_request_bytes", "request refused: larger than the request budget, closing connection",
				zap.String("remote_addr", c.nc.RemoteAddr().String()), zap.String("api", kmsg.NameForKey(key)),
				zap.Int32("frame_bytes", n), zap.Int64("cost_bytes", cost), zap.Int64("queued_max_request_bytes", c.s.cfg.QueuedMaxRequestBytes))
		}
		return nil, 0, err
	}
	if waited {
		c.s.limitLog.hit("queued_max_request_bytes_wait", "request waited for the request budget",
			zap.String("api", kmsg.NameForKey(key)), zap.Int64("cost_bytes", cost), zap.Int64("queued_max_request_bytes", c.s.cfg.QueuedMaxRequestBytes))
		_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.FrameReadTimeout))
	}
	frame = make([]byte, n)
	if _, err := io.ReadFull(br, frame); err != nil {
		c.s.budget.release(cost)
		return nil, 0, frameErr(err)
	}
	return frame, cost, nil
}

// frameErr marks a read that ended inside a frame.
func frameErr(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%w: %w", errFrameTimeout, err)
	}
	return err
}

// errFrameTimeout: a frame that had started did not arrive within
// FrameReadTimeout.
var errFrameTimeout = errors.New("request frame not complete within the frame read timeout")

func (c *conn) readFailed(err error) {
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		c.log.Debug("connection closed by client")
	case errors.Is(err, errStopped), errors.Is(err, context.Canceled):
		c.log.Debug("connection stops reading")
		if errors.Is(err, errStopped) {
			return // the writer drains and closes
		}
	case errors.Is(err, errOverBudget):
		// logged by readFrame, rate-limited
	case errors.Is(err, errFrameTimeout):
		c.s.limitLog.hit("frame_read_timeout", "request frame incomplete after the frame read timeout, closing connection",
			zap.String("remote_addr", c.nc.RemoteAddr().String()), zap.Duration("frame_read_timeout", c.s.cfg.FrameReadTimeout))
	case errors.As(err, &ne) && ne.Timeout():
		select {
		case <-c.stopped:
			c.log.Debug("connection stops reading for shutdown")
			return // the writer drains and closes
		default:
			c.log.Info("idle connection closed", zap.Duration("idle_timeout", c.s.cfg.IdleTimeout))
		}
	case errors.Is(err, kafkawire.ErrFrameTooLarge):
		c.log.Warn("request frame too large, closing connection", zap.Error(err))
	default:
		c.log.Info("read failed, closing connection", zap.Error(err))
	}
	c.nc.Close()
	// The client is gone: stop waiting for anything on its behalf (long
	// polls, parked JoinGroup/SyncGroup). Writes already enqueued to the
	// backend still complete; only the waiting for them stops.
	c.cancel()
}

// dispatch checks the version against our table and runs the handler's
// apply phase. ok=false closes the connection (unknown API key or an
// unsupported version of anything but ApiVersions, as Kafka does).
func (c *conn) dispatch(req *kafkawire.Request) (r reply, ok bool) {
	api := lookupAPI(req.Key)
	if req.Key == apiKeyApiVersions {
		return reply{req: req, resp: c.s.handleApiVersions(req)}, true
	}
	if req.Key == apiKeyEnvelope && c.s.cluster != nil && req.Version == 0 {
		// Another node's forwarded admin write, authenticated by its
		// own MAC, SASL or not (forward.go).
		return c.handleEnvelope(req), true
	}
	if !c.saslGate(req.Key) {
		return r, false
	}
	if (req.Key == apiKeyProduce || req.Key == apiKeyFetch) && c.s.resigning.Load() {
		c.log.Debug("node resigning: closing a produce or fetch connection, its client moves to the node taking over",
			zap.Int16("api_key", req.Key))
		return r, false
	}
	if api == nil {
		c.log.Info("unsupported API key, closing connection", zap.Int16("api_key", req.Key), zap.Int16("api_version", req.Version))
		return r, false
	}
	if req.Version < api.min || req.Version > api.max {
		c.log.Info("unsupported API version, closing connection",
			zap.String("api", api.name), zap.Int16("api_version", req.Version), zap.Int16("min", api.min), zap.Int16("max", api.max))
		return r, false
	}
	if ce := c.log.Check(zap.DebugLevel, "request"); ce != nil {
		ce.Write(zap.String("api", api.name), zap.Int16("api_version", req.Version),
			zap.Int32("correlation_id", req.CorrelationID), zap.String("client_id", req.ClientID))
	}
	if c.s.authz != nil {
		return c.dispatchAuthorized(api, req), true
	}
	return c.handleOrForward(api, req), true
}

// requestContext bounds a request by its own timeout plus the configured
// overhead, or by the overhead alone.
func (c *conn) requestContext(timeoutMillis int32) (context.Context, context.CancelFunc) {
	d := c.s.cfg.RequestOverhead
	if timeoutMillis > 0 {
		d += time.Duration(timeoutMillis) * time.Millisecond
	}
	return context.WithTimeout(c.backendCtx(), d)
}

// noteBackendErr marks the connection for closing when err says DIS
// refused its own credentials (credsRefused).
func (c *conn) noteBackendErr(err error) {
	if c.disCreds.Load() != nil && errors.Is(err, disbackend.ErrAuthenticationFailed) {
		c.credsRefused.Store(true)
	}
}

// backendCtx is the connection's context carrying its DIS credentials in
// the dis authentication mode (disbackend.WithCredentials), so that the
// backend calls made for its requests are signed with them.
func (c *conn) backendCtx() context.Context {
	return disbackend.WithCredentials(c.ctx, c.disCreds.Load())
}

func (c *conn) writeLoop() {
	defer func() {
		c.nc.Close()
		c.cancel()
		// The reader closes replies once it stops (the closed connection
		// and the cancelled context stop it); what it queued still gives
		// its budget back.
		for r := range c.replies {
			c.s.budget.release(r.cost)
		}
		c.s.removeConn(c)
		c.s.wg.Done()
	}()
	w := &responseWriter{c: c}
	defer func() { c.s.budget.release(c.fetchCost); c.fetchCost = 0 }()
	for r := range c.replies {
		ok := w.write(r)
		c.s.budget.release(r.cost + c.fetchCost)
		c.fetchCost = 0
		if !ok {
			return
		}
	}
}

// responseWriter is the writer goroutine's output: its buffered writer
// (allocated at the first response) and the encoding buffer it reuses.
type responseWriter struct {
	c   *conn
	bw  *bufio.Writer
	buf []byte
}

// write completes r and writes its response; false ends the connection.
func (w *responseWriter) write(r reply) bool {
	c := w.c
	resp, err := c.complete(r)
	c.s.observeRequest(r, resp, err)
	if err == nil && c.credsRefused.Load() {
		c.log.Info("DIS refused the connection's credentials since they authenticated, closing connection")
		return false
	}
	if err != nil {
		if !errors.Is(err, errCloseConn) {
			c.log.Error("request failed, closing connection", zap.Error(err))
		}
		return false
	}
	if r.raw {
		if r.closeAfter {
			return false // a failed raw exchange: closed without an answer
		}
		w.buf = binary.BigEndian.AppendUint32(w.buf[:0], uint32(len(r.rawToken)))
		w.buf = append(w.buf, r.rawToken...)
	} else if resp == nil {
		return true
	} else {
		w.buf = kafkawire.AppendResponse(w.buf[:0], r.req.CorrelationID, resp)
	}
	if w.bw == nil {
		w.bw = bufio.NewWriterSize(c.nc, 16<<10)
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
	if _, err := w.bw.Write(w.buf); err != nil {
		c.log.Debug("write failed, closing connection", zap.Error(err))
		return false
	}
	// Flush when nothing else is ready, so pipelined responses share a
	// syscall.
	if len(c.replies) == 0 {
		if err := w.bw.Flush(); err != nil {
			c.log.Debug("write failed, closing connection", zap.Error(err))
			return false
		}
	}
	if r.closeAfter {
		_ = w.bw.Flush()
		return false
	}
	if cap(w.buf) > 8<<20 {
		w.buf = nil
	}
	if cap(c.fetchBuf) > 8<<20 {
		c.fetchBuf = nil
	}
	return true
}

func (c *conn) complete(r reply) (resp kmsg.Response, err error) {
	if r.finish == nil {
		return r.resp, nil
	}
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("panic while handling a request, closing connection",
				zap.String("api", kmsg.NameForKey(r.req.Key)), zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
			resp, err = nil, fmt.Errorf("panic: %v", p)
		}
	}()
	return r.finish()
}
