package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

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
}

// conn is one client connection: readLoop decodes requests and applies
// them in order (a produce is enqueued to the backend before the next
// request is read, so one connection's writes keep their order); writeLoop
// completes them in the same order and writes the responses.
type conn struct {
	s      *Server
	nc     net.Conn
	id     uint64
	log    *zap.Logger
	ctx    context.Context // cancelled when the connection ends
	cancel context.CancelFunc

	replies  chan reply // reader → writer, capacity cfg.MaxInFlight
	stopOnce sync.Once
	stopped  chan struct{} // closed by stopReading (shutdown)

	// fetchBuf holds the record batches of the fetch response being built;
	// owned by the writer goroutine and reused, since each response is
	// encoded before the next is built.
	fetchBuf []byte
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
	br := bufio.NewReaderSize(c.nc, 8<<10)
	for {
		select {
		case <-c.stopped:
			return
		default:
		}
		_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
		frame, err := kafkawire.ReadFrame(br, c.s.cfg.MaxFrameBytes)
		if err != nil {
			c.readFailed(err)
			return
		}
		req, err := kafkawire.ParseRequest(frame)
		if err != nil && !(errors.Is(err, kafkawire.ErrUnsupportedVersion) && req.Key == apiKeyApiVersions) {
			c.log.Info("bad request, closing connection", zap.Error(err))
			c.nc.Close()
			return
		}
		r, ok := c.dispatch(req)
		if !ok {
			c.nc.Close()
			return
		}
		select {
		case c.replies <- r:
		case <-c.ctx.Done():
			return
		}
	}
}

func (c *conn) readFailed(err error) {
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		c.log.Debug("connection closed by client")
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
	return api.handle(c, req), true
}

// requestContext bounds a request by its own timeout plus the configured
// overhead, or by the overhead alone.
func (c *conn) requestContext(timeoutMillis int32) (context.Context, context.CancelFunc) {
	d := c.s.cfg.RequestOverhead
	if timeoutMillis > 0 {
		d += time.Duration(timeoutMillis) * time.Millisecond
	}
	return context.WithTimeout(c.ctx, d)
}

func (c *conn) writeLoop() {
	defer c.s.wg.Done()
	defer c.s.removeConn(c)
	defer c.cancel()
	defer c.nc.Close()
	var bw *bufio.Writer // allocated at the first response
	var buf []byte
	for r := range c.replies {
		resp, err := c.complete(r)
		if err != nil {
			if !errors.Is(err, errCloseConn) {
				c.log.Error("request failed, closing connection", zap.Error(err))
			}
			return
		}
		if resp == nil {
			continue
		}
		buf = kafkawire.AppendResponse(buf[:0], r.req.CorrelationID, resp)
		if bw == nil {
			bw = bufio.NewWriterSize(c.nc, 16<<10)
		}
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
		if _, err := bw.Write(buf); err != nil {
			c.log.Debug("write failed, closing connection", zap.Error(err))
			return
		}
		// Flush when nothing else is ready, so pipelined responses share a
		// syscall.
		if len(c.replies) == 0 {
			if err := bw.Flush(); err != nil {
				c.log.Debug("write failed, closing connection", zap.Error(err))
				return
			}
		}
		if cap(buf) > 8<<20 {
			buf = nil
		}
		if cap(c.fetchBuf) > 8<<20 {
			c.fetchBuf = nil
		}
	}
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
