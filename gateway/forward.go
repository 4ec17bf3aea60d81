package gateway

// Admin writes with several nodes (docs/cluster.md §7): the controller
// alone applies CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
// IncrementalAlterConfigs, CreateAcls, DeleteAcls and
// AlterUserScramCredentials (the rows controllerOnly marks). A node that is
// not the controller authorizes such a request itself (its refused entries
// answered here, as always), then forwards what is left to the controller
// as KRaft brokers do: an EnvelopeRequest (API key 58, v0) carrying the
// request's header and body, the principal (Kafka's DefaultPrincipalData,
// version-prefixed) and the client's address, over one Kafka connection
// per controller address to the controller's advertised address on
// Config.ClusterListener. It answers the client with the response the
// envelope carries, then reads the topics it changed again from the
// backend (and, for ACLs, the ACLs), so that its own answers show the
// change at once. The controller, before it answers a write it applied
// (sent to it or forwarded), tells every other node of its view to read
// what it changed again (tellNodes: a change notice, an envelope the other
// way whose inner request is a Metadata or DescribeAcls request), waiting
// at most tellTimeout; a node it could not tell sees the change at its
// next metadata refresh.
//
// The controller serves an envelope only from a node of its view,
// authenticated: the envelope carries, in tagged field envelopeAuthTag,
// the sender's node id, the time it was sent (Unix ms) and an HMAC-SHA256
// of those and the envelope's three fields under Config.ClusterKey, a key
// every node holds alike (cmd/disgw derives it from the DIS credentials
// the nodes share). A MAC that does not verify, a time more than
// envelopeMaxSkew away from the controller's clock, or a sender that is not
// a member of its view gets CLUSTER_AUTHORIZATION_FAILED; the envelope
// needs no SASL on a SASL listener, the MAC being its authentication. The
// controller then authorizes the inner request again under the forwarded
// principal and client address (with the same ACLs, refused entries stay
// refused) and answers it in the envelope's response. An envelope reaching
// a node that is no longer the controller gets NOT_CONTROLLER; one with an
// API other than those above, INVALID_REQUEST. Envelopes are served only
// with several nodes: on one node key 58 is unknown, as before, and
// ApiVersions never lists it.
//
// When the request cannot be forwarded, the client gets NOT_CONTROLLER on
// every entry, which every client retries after refreshing Metadata: no
// ClusterKey, a connection in the dis authentication mode (its DIS
// credentials sign the backend's calls and are never sent to another
// node), no Ready view, a controller without an address on the listener,
// a connection that fails before the envelope is sent, or an envelope
// answered NOT_CONTROLLER (the controller moved). A connection that fails
// after it was sent gets REQUEST_TIMED_OUT: the controller may have
// applied it. Forwarding is not retried.

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

const (
	apiKeyEnvelope = 58
	// envelopeAuthTag is the tagged field of an EnvelopeRequest that
	// carries the sender's node id (4 bytes), the time it was sent (Unix
	// ms, 8 bytes) and the HMAC-SHA256 (32 bytes) authenticating it. Kafka
	// defines no tag of EnvelopeRequest; a Kafka controller ignores it.
	envelopeAuthTag = 0x6467
	envelopeAuthLen = 4 + 8 + sha256.Size
	// envelopeMaxSkew is how far an envelope's time may be from the
	// controller's clock: a captured envelope cannot be replayed later
	// than this.
	envelopeMaxSkew = 2 * time.Minute
)

// controllerAPI is the controller-only column of an API's row
// (controllerOnly): how to answer it when it cannot be forwarded and what
// the other nodes read again once the controller applied it.
type controllerAPI struct {
	// refuse answers the whole request with code on every entry.
	refuse func(r kmsg.Request, code int16) kmsg.Response
	// changed is what the controller's answer resp changed; nil for
	// nothing the nodes keep.
	changed func(resp kmsg.Response) changes
}

// changes is what an admin write changed that every node keeps: topics
// (created, deleted, scaled or reconfigured) and the ACLs.
type changes struct {
	topics []string
	acls   bool
}

func (ch changes) none() bool { return len(ch.topics) == 0 && !ch.acls }

// controllerOnly marks key's row (registered before) as an admin write the
// controller alone applies with several nodes; its API file calls it
// from init. refuse answers the whole request with a code; changed (nil
// for nothing) names what the controller's answer changed, which the
// forwarding node reads again after the answer, and which the controller
// tells the other nodes to read again (tellNodes).
func controllerOnly[R kmsg.Request](key int16, refuse func(r R, code int16) kmsg.Response, changed func(resp kmsg.Response) changes) {
	e := lookupAPI(key)
	if e == nil {
		panic("gateway: controllerOnly before registerAPI of key " + strconv.Itoa(int(key)))
	}
	e.controller = &controllerAPI{refuse: func(r kmsg.Request, code int16) kmsg.Response { return refuse(r.(R), code) }, changed: changed}
}

// changesOf is what api's answer resp changed (nothing when api names
// none).
func (api *apiEntry) changesOf(resp kmsg.Response) changes {
	if api.controller == nil || api.controller.changed == nil || resp == nil {
		return changes{}
	}
	return api.controller.changed(resp)
}

// handleOrForward runs api's handler, or forwards the request to the
// controller when api is a controller-only write and this node is not the
// controller. The controller, having applied a write a client sent it,
// tells the other nodes what it changed before it answers (tellNodes).
func (c *conn) handleOrForward(api *apiEntry, req *kafkawire.Request) reply {
	if api.controller == nil || c.s.cluster == nil || c.forwarded {
		return api.handle(c, req)
	}
	if c.s.isController() {
		return c.s.tellingNodes(api, api.handle(c, req), c.complete, -1)
	}
	return reply{req: req, finish: func() (kmsg.Response, error) {
		if c.s.isController() { // became the controller meanwhile
			return c.complete(c.s.tellingNodes(api, api.handle(c, req), c.complete, -1))
		}
		ctx, cancel := c.requestContext(requestTimeout(req.Body))
		defer cancel()
		resp, code, err := c.s.fwd.forward(ctx, c, req)
		if code != 0 {
			c.log.Info("admin write not forwarded to the controller", zap.String("api", api.name), zap.Int16("error_code", code), zapErr(err))
			return api.controller.refuse(req.Body, code), nil
		}
		c.s.readChanges(ctx, api.changesOf(resp))
		return resp, nil
	}}
}

// requestTimeout is a request's own timeout in ms (kmsg.TimeoutRequest),
// 0 when it has none.
func requestTimeout(r kmsg.Request) int32 {
	if t, ok := r.(kmsg.TimeoutRequest); ok {
		return t.Timeout()
	}
	return 0
}

// forwarder keeps the connections a node forwards admin writes over, one
// per controller address.
type forwarder struct {
	s   *Server
	key []byte // Config.ClusterKey; empty: no forwarding

	mu    sync.Mutex
	conns map[string]*fwdConn // by address; guarded by mu
}

// fwdConn is one connection to a controller; mu serializes its requests.
type fwdConn struct {
	mu       sync.Mutex
	nc       net.Conn // nil until dialled, and after a failure
	br       *bufio.Reader
	corr     int32
	lastUsed time.Time
}

func newForwarder(s *Server) *forwarder {
	return &forwarder{s: s, key: s.cfg.ClusterKey, conns: make(map[string]*fwdConn)}
}

// close closes every connection; nil-safe.
func (f *forwarder) close() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fc := range f.conns {
		fc.mu.Lock()
		if fc.nc != nil {
			fc.nc.Close()
			fc.nc = nil
		}
		fc.mu.Unlock()
	}
}

// clusterListener is the name of the listener admin writes are forwarded
// to (Config.ClusterListener, else the first listener).
func (s *Server) clusterListener() string {
	if s.cfg.ClusterListener != "" {
		return s.cfg.ClusterListener
	}
	return s.cfg.listeners()[0].Name
}

// errNotForwarded: the request could not be forwarded.
var errNotForwarded = errors.New("admin write not forwarded")

// forward sends req, from connection c, to the controller in an envelope
// and returns the controller's response. A non-zero code is the error to
// answer the client with instead.
func (f *forwarder) forward(ctx context.Context, c *conn, req *kafkawire.Request) (kmsg.Response, int16, error) {
	notController := kerr.NotController.Code
	switch {
	case len(f.key) == 0:
		return nil, notController, fmt.Errorf("%w: no cluster key", errNotForwarded)
	case c.disCreds.Load() != nil:
		return nil, notController, fmt.Errorf("%w: a connection of the dis authentication mode", errNotForwarded)
	}
	v := f.s.cluster.View()
	if !v.Ready {
		return nil, notController, fmt.Errorf("%w: no view", errNotForwarded)
	}
	n, ok := v.Node(v.Controller)
	addr := n.Listeners[f.s.clusterListener()]
	if !ok || addr == "" {
		return nil, notController, fmt.Errorf("%w: controller %d has no address on listener %s", errNotForwarded, v.Controller, f.s.clusterListener())
	}
	env := kmsg.NewPtrEnvelopeRequest()
	env.RequestData = appendRequest(nil, req)
	env.RequestPrincipal = encodePrincipal(c.kafkaPrincipal())
	if ip := net.ParseIP(c.ip); ip != nil {
		if ip4 := ip.To4(); ip4 != nil {
			ip = ip4
		}
		env.ClientHostAddress = ip
	}
	f.sign(env, v.Self, time.Now())
	er, sent, err := f.roundTrip(ctx, addr, env)
	if err != nil {
		if sent {
			return nil, kerr.RequestTimedOut.Code, err
		}
		return nil, notController, err
	}
	if er.ErrorCode != 0 {
		if er.ErrorCode == kerr.ClusterAuthorizationFailed.Code {
			f.s.log.Error("the controller refused a forwarded admin write: do the nodes share the cluster key?", zap.Int32("controller", v.Controller))
		}
		return nil, er.ErrorCode, fmt.Errorf("envelope refused by controller %d: %w", v.Controller, kerr.ErrorForCode(er.ErrorCode))
	}
	resp, err := decodeResponseData(req.Body, er.ResponseData)
	if err != nil {
		return nil, kerr.RequestTimedOut.Code, err
	}
	return resp, 0, nil
}

// appendRequest appends req's header (v1, or v2 for flexible versions) and
// body, without a size: an envelope's request_data.
func appendRequest(dst []byte, req *kafkawire.Request) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.Key))
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.Version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(req.CorrelationID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(req.ClientID)))
	dst = append(dst, req.ClientID...)
	if req.Body.IsFlexible() {
		dst = append(dst, 0)
	}
	return req.Body.AppendTo(dst)
}

// appendResponseData is resp with its header (correlation id, and the
// empty tag section of flexible versions), without a size: an envelope's
// response_data.
func appendResponseData(correlationID int32, resp kmsg.Response) []byte {
	frame := kafkawire.AppendResponse(nil, correlationID, resp)
	return frame[4:]
}

// decodeResponseData decodes an envelope's response_data as the response
// to r.
func decodeResponseData(r kmsg.Request, data []byte) (kmsg.Response, error) {
	rd := kbin.Reader{Src: data}
	rd.Int32() // the correlation id: the client's own, echoed
	resp := r.ResponseKind()
	resp.SetVersion(r.GetVersion())
	if resp.IsFlexible() {
		kmsg.SkipTags(&rd)
	}
	if !rd.Ok() {
		return nil, errors.New("envelope response: truncated header")
	}
	if err := resp.ReadFrom(rd.Src); err != nil {
		return nil, fmt.Errorf("envelope response: %w", err)
	}
	return resp, nil
}

// encodePrincipal is principal ("User:alice") as Kafka's
// DefaultKafkaPrincipalBuilder serializes it: DefaultPrincipalData,
// version-prefixed.
func encodePrincipal(principal string) []byte {
	typ, name, _ := strings.Cut(principal, ":")
	d := kmsg.NewDefaultPrincipalData()
	d.Type, d.Name = typ, name
	out := binary.BigEndian.AppendUint16(nil, uint16(d.Version))
	return d.AppendTo(out)
}

// decodePrincipal is encodePrincipal's inverse.
func decodePrincipal(b []byte) (string, error) {
	if len(b) < 2 {
		return "", errors.New("principal: too short")
	}
	d := kmsg.NewDefaultPrincipalData()
	d.Version = int16(binary.BigEndian.Uint16(b))
	if d.Version != 0 { // the one version Kafka defines
		return "", fmt.Errorf("principal: version %d", d.Version)
	}
	if err := d.ReadFrom(b[2:]); err != nil {
		return "", fmt.Errorf("principal: %w", err)
	}
	return d.Type + ":" + d.Name, nil
}

// envelopeMAC is the HMAC-SHA256 under key of an envelope's sender, time
// and fields, each length-prefixed.
func envelopeMAC(key []byte, sender int32, unixMS int64, env *kmsg.EnvelopeRequest) []byte {
	m := hmac.New(sha256.New, key)
	var b [12]byte
	binary.BigEndian.PutUint32(b[:], uint32(sender))
	binary.BigEndian.PutUint64(b[4:], uint64(unixMS))
	m.Write([]byte("disgw envelope v1\x00"))
	m.Write(b[:])
	for _, f := range [][]byte{env.RequestData, env.RequestPrincipal, env.ClientHostAddress} {
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(len(f)))
		m.Write(l[:])
		m.Write(f)
	}
	return m.Sum(nil)
}

// sign sets env's authentication tag for sender at now.
func (f *forwarder) sign(env *kmsg.EnvelopeRequest, sender int32, now time.Time) {
	ms := now.UnixMilli()
	tag := make([]byte, 12, envelopeAuthLen)
	binary.BigEndian.PutUint32(tag, uint32(sender))
	binary.BigEndian.PutUint64(tag[4:], uint64(ms))
	tag = append(tag, envelopeMAC(f.key, sender, ms, env)...)
	env.UnknownTags.Set(envelopeAuthTag, tag)
}

// verify checks env's authentication tag and returns its sender.
func (f *forwarder) verify(env *kmsg.EnvelopeRequest, now time.Time) (int32, error) {
	if len(f.key) == 0 {
		return 0, errors.New("no cluster key: envelopes are refused")
	}
	var tag []byte
	env.UnknownTags.Each(func(k uint32, v []byte) {
		if k == envelopeAuthTag {
			tag = v
		}
	})
	if len(tag) != envelopeAuthLen {
		return 0, errors.New("no authentication tag")
	}
	sender := int32(binary.BigEndian.Uint32(tag))
	ms := int64(binary.BigEndian.Uint64(tag[4:]))
	if !hmac.Equal(tag[12:], envelopeMAC(f.key, sender, ms, env)) {
		return sender, errors.New("the MAC does not verify")
	}
	if skew := now.Sub(time.UnixMilli(ms)); skew > envelopeMaxSkew || skew < -envelopeMaxSkew {
		return sender, fmt.Errorf("sent %v from this node's clock, more than %v", skew, envelopeMaxSkew)
	}
	return sender, nil
}

// roundTrip sends env to addr and reads its response, on the connection
// kept for addr (dialled when there is none, or when it idled for half
// IdleTimeout: the controller may have closed it). sent reports whether
// the envelope may have reached the controller.
func (f *forwarder) roundTrip(ctx context.Context, addr string, env *kmsg.EnvelopeRequest) (resp *kmsg.EnvelopeResponse, sent bool, err error) {
	f.mu.Lock()
	fc := f.conns[addr]
	if fc == nil {
		fc = &fwdConn{}
		f.conns[addr] = fc
	}
	f.mu.Unlock()
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.nc != nil && time.Since(fc.lastUsed) > f.s.cfg.IdleTimeout/2 {
		fc.nc.Close()
		fc.nc = nil
	}
	if fc.nc == nil {
		if err := f.dial(ctx, fc, addr); err != nil {
			return nil, false, err
		}
	}
	defer func() {
		if err != nil {
			fc.nc.Close()
			fc.nc = nil
		}
	}()
	stop := context.AfterFunc(ctx, func() { _ = fc.nc.SetDeadline(time.Now()) })
	defer stop()
	if d, ok := ctx.Deadline(); ok {
		_ = fc.nc.SetDeadline(d)
	} else {
		_ = fc.nc.SetDeadline(time.Time{})
	}
	fc.corr++
	frame := encodeFrame(fc.corr, "disgw-node-"+strconv.Itoa(int(f.s.nodeID())), env)
	if _, err := fc.nc.Write(frame); err != nil {
		return nil, true, fmt.Errorf("forward to %s: %w", addr, err)
	}
	n, err := kafkawire.ReadFrameSize(fc.br, f.s.cfg.MaxFrameBytes)
	if err != nil {
		return nil, true, fmt.Errorf("forward to %s: %w", addr, err)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(fc.br, body); err != nil {
		return nil, true, fmt.Errorf("forward to %s: %w", addr, err)
	}
	rd := kbin.Reader{Src: body}
	if corr := rd.Int32(); corr != fc.corr {
		return nil, true, fmt.Errorf("forward to %s: correlation id %d, want %d", addr, corr, fc.corr)
	}
	kmsg.SkipTags(&rd)
	er := kmsg.NewPtrEnvelopeResponse()
	if err := er.ReadFrom(rd.Src); err != nil || !rd.Ok() {
		return nil, true, fmt.Errorf("forward to %s: envelope response: %v", addr, err)
	}
	fc.lastUsed = time.Now()
	return er, true, nil
}

// dial connects fc to addr, with TLS when the cluster listener uses it.
func (f *forwarder) dial(ctx context.Context, fc *fwdConn, addr string) error {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("forward: dial %s: %w", addr, err)
	}
	if f.s.clusterListenerUsesTLS() {
		tc := tls.Client(nc, f.s.cfg.ClusterTLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return fmt.Errorf("forward: TLS to %s: %w", addr, err)
		}
		nc = tc
	}
	fc.nc, fc.br, fc.lastUsed = nc, bufio.NewReader(nc), time.Now()
	return nil
}

// checkClusterListener checks, with several nodes, that ClusterListener
// (when set) names a listener and that forwarding over a TLS listener has
// its client TLS configuration.
func (c *Config) checkClusterListener() error {
	name := c.ClusterListener
	if name == "" {
		name = c.listeners()[0].Name
	}
	for _, l := range c.listeners() {
		if l.Name != name {
			continue
		}
		if l.usesTLS() && len(c.ClusterKey) > 0 && c.ClusterTLS == nil {
			return fmt.Errorf("gateway: cluster listener %s (%s) needs a client TLS configuration to forward admin writes over", name, l.SecurityProtocol)
		}
		return nil
	}
	return fmt.Errorf("gateway: cluster listener %s is not a listener", name)
}

// clusterListenerUsesTLS reports whether the cluster listener is SSL or
// SASL_SSL.
func (s *Server) clusterListenerUsesTLS() bool {
	name := s.clusterListener()
	for _, l := range s.cfg.listeners() {
		if l.Name == name {
			return l.usesTLS()
		}
	}
	return false
}

// encodeFrame is a size-prefixed request frame (header v2) of body.
func encodeFrame(corr int32, clientID string, body kmsg.Request) []byte {
	out := make([]byte, 4, 64)
	out = binary.BigEndian.AppendUint16(out, uint16(body.Key()))
	out = binary.BigEndian.AppendUint16(out, uint16(body.GetVersion()))
	out = binary.BigEndian.AppendUint32(out, uint32(corr))
	out = binary.BigEndian.AppendUint16(out, uint16(len(clientID)))
	out = append(out, clientID...)
	if body.IsFlexible() {
		out = append(out, 0)
	}
	out = body.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

// handleEnvelope serves an admin write a node forwarded (the controller's
// side; see the file comment). It runs on the reader goroutine; the inner
// request's handler runs as on a connection of the forwarded principal
// and client address.
func (c *conn) handleEnvelope(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.EnvelopeRequest)
	resp := r.ResponseKind().(*kmsg.EnvelopeResponse)
	refuse := func(code int16, msg string, err error) reply {
		c.log.Info("envelope refused", zap.String("reason", msg), zap.Int16("error_code", code), zapErr(err))
		resp.ErrorCode = code
		return ready(req, resp)
	}
	v := c.s.cluster.View()
	sender, err := c.s.fwd.verify(r, time.Now())
	if err != nil {
		return refuse(kerr.ClusterAuthorizationFailed.Code, "not authenticated", err)
	}
	if _, ok := v.Node(sender); !ok || sender == v.Self {
		return refuse(kerr.ClusterAuthorizationFailed.Code, "sender is not another node of the view", fmt.Errorf("node %d", sender))
	}
	if sender == v.Controller {
		if inner, err := kafkawire.ParseRequest(r.RequestData); err == nil && (inner.Key == 3 || inner.Key == 29) {
			return c.handleChangeNotice(req, resp, inner)
		}
	}
	if inner, err := kafkawire.ParseRequest(r.RequestData); err == nil && isNodeCall(r, inner.Key) {
		return c.handleNodeCall(req, resp, inner, sender) // txn_cluster.go
	}
	if !c.s.isController() {
		return refuse(kerr.NotController.Code, "not the controller", nil)
	}
	inner, err := kafkawire.ParseRequest(r.RequestData)
	if err != nil {
		return refuse(kerr.InvalidRequest.Code, "bad inner request", err)
	}
	api := lookupAPI(inner.Key)
	if api == nil || api.controller == nil || inner.Version < api.min || inner.Version > api.max {
		return refuse(kerr.InvalidRequest.Code, "inner request is not a controller write", fmt.Errorf("%s v%d", kmsg.NameForKey(inner.Key), inner.Version))
	}
	principal, err := decodePrincipal(r.RequestPrincipal)
	if err != nil {
		return refuse(kerr.InvalidRequest.Code, "bad principal", err)
	}
	fc := c.forwardedConn(principal, net.IP(r.ClientHostAddress), sender)
	var ir reply
	if c.s.authz != nil {
		ir = fc.dispatchAuthorized(api, inner)
	} else {
		ir = api.handle(fc, inner)
	}
	ir = c.s.tellingNodes(api, ir, fc.complete, sender)
	return reply{req: req, finish: func() (kmsg.Response, error) {
		iresp, err := fc.complete(ir)
		if err != nil || iresp == nil {
			fc.log.Error("forwarded admin write failed", zap.String("api", api.name), zapErr(err))
			resp.ErrorCode = kerr.UnknownServerError.Code
			return resp, nil
		}
		resp.ResponseData = appendResponseData(inner.CorrelationID, iresp)
		return resp, nil
	}}
}

// forwardedConn is c as the connection of a forwarded request: principal,
// client address ip (when given) and a logger naming the address and the
// node that forwarded it. Its requests are never forwarded again.
func (c *conn) forwardedConn(principal string, ip net.IP, sender int32) *conn {
	fc := &conn{s: c.s, nc: c.nc, id: c.id, ip: c.ip, ctx: c.ctx, cancel: c.cancel,
		listener: c.listener, lst: c.lst, stopped: c.stopped, forwarded: true}
	if len(ip) == net.IPv4len || len(ip) == net.IPv6len {
		fc.ip = ip.String()
	}
	if principal == acl.Anonymous {
		principal = ""
	}
	if principal != "" {
		fc.principal.Store(&principal)
	}
	fc.log = c.log.With(zap.Int32("forwarded_by", sender), zap.String("client_ip", fc.ip))
	return fc
}

// codeMessage is the Kafka message of error code, for a refusal's
// error_message.
func codeMessage(code int16) *string {
	var ke *kerr.Error
	if !errors.As(kerr.ErrorForCode(code), &ke) {
		return nil
	}
	msg := ke.Description
	return &msg
}

// topicsChanged is the changed column of a topic write: each topic the
// answer names (through add) with error code 0.
func topicsChanged[P kmsg.Response](names func(r P, add func(topic string, code int16))) func(kmsg.Response) changes {
	return func(resp kmsg.Response) changes {
		var ch changes
		names(resp.(P), func(topic string, code int16) {
			if code == 0 {
				ch.topics = append(ch.topics, topic)
			}
		})
		return ch
	}
}

// aclsChanged is the changed column of an ACL write.
func aclsChanged(kmsg.Response) changes { return changes{acls: true} }

// tellingNodes wraps r, the controller's answer to an admin write of api,
// so that once it is complete the controller tells the other nodes of its
// view what it changed (tellNodes) before the answer goes out; node skip
// (the node that forwarded the write, which reads it again itself; -1 for
// none) is not told.
func (s *Server) tellingNodes(api *apiEntry, r reply, complete func(reply) (kmsg.Response, error), skip int32) reply {
	if api.controller == nil || api.controller.changed == nil {
		return r
	}
	out := r
	out.resp = nil
	out.finish = func() (kmsg.Response, error) {
		resp, err := complete(r)
		if err == nil {
			if ch := api.changesOf(resp); !ch.none() {
				s.tellNodes(ch, skip)
			}
		}
		return resp, err
	}
	return out
}

// tellTimeout bounds how long the controller waits for the other nodes to
// read a change again, and how long a node reading one may take.
const tellTimeout = 2 * time.Second

// tellNodes, on the controller, has every other node of its Ready view
// (but skip) read again at once what an admin write changed, so that a
// client that wrote through one node and reads through another sees its
// write (as a Kafka controller's metadata updates reach the brokers within
// moments): an envelope, signed as forwarded writes are, whose inner
// request is a Metadata request naming the changed topics, or a
// DescribeAcls request for the ACLs; the node reads them again from the
// backend and answers an empty envelope response. It waits for every node,
// at most tellTimeout, over the connections forwarding uses; a node not
// told (not reachable, of an older version, in another view) sees the
// change at its next metadata refresh.
func (s *Server) tellNodes(ch changes, skip int32) {
	v := s.cluster.View()
	if !v.Ready || v.Controller != v.Self || len(s.fwd.key) == 0 {
		return
	}
	var notices [][]byte
	clientID := "disgw-node-" + strconv.Itoa(int(v.Self))
	if len(ch.topics) > 0 {
		m := kmsg.NewPtrMetadataRequest()
		m.Version = changeNoticeVersion
		for _, t := range ch.topics {
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr(t)
			m.Topics = append(m.Topics, mt)
		}
		notices = append(notices, appendRequest(nil, &kafkawire.Request{Key: m.Key(), Version: m.Version, ClientID: clientID, Body: m}))
	}
	if ch.acls {
		d := kmsg.NewPtrDescribeACLsRequest()
		d.ResourceType, d.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		d.Operation, d.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		notices = append(notices, appendRequest(nil, &kafkawire.Request{Key: d.Key(), Version: d.Version, ClientID: clientID, Body: d}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), tellTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, n := range v.Nodes {
		addr := n.Listeners[s.clusterListener()]
		if n.ID == v.Self || n.ID == skip || addr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, data := range notices {
				env := kmsg.NewPtrEnvelopeRequest()
				env.RequestData = data
				env.RequestPrincipal = encodePrincipal(acl.Anonymous)
				s.fwd.sign(env, v.Self, time.Now())
				er, _, err := s.fwd.roundTrip(ctx, addr, env)
				if err == nil && er.ErrorCode != 0 {
					err = kerr.ErrorForCode(er.ErrorCode)
				}
				if err != nil {
					s.log.Info("a node was not told of an admin write at once; it reads it at its next metadata refresh",
						zap.Int32("node", n.ID), zapErr(err))
					return
				}
			}
		}()
	}
	wg.Wait()
}

// changeNoticeVersion is the Metadata version of a change notice.
const changeNoticeVersion = 12

// handleChangeNotice serves, on a node that is not the controller, the
// notice of its view's controller that an admin write changed topics (an
// inner Metadata request naming them) or the ACLs (an inner DescribeAcls
// request): it reads them again from the backend, then answers an empty
// envelope response.
func (c *conn) handleChangeNotice(req *kafkawire.Request, resp *kmsg.EnvelopeResponse, inner *kafkawire.Request) reply {
	return reply{req: req, finish: func() (kmsg.Response, error) {
		ctx, cancel := context.WithTimeout(c.ctx, tellTimeout)
		defer cancel()
		var ch changes
		switch b := inner.Body.(type) {
		case *kmsg.MetadataRequest:
			for _, t := range b.Topics {
				if t.Topic != nil {
					ch.topics = append(ch.topics, *t.Topic)
				}
			}
		case *kmsg.DescribeACLsRequest:
			ch.acls = true
		}
		c.s.readChanges(ctx, ch)
		return resp, nil
	}}
}

// readChanges reads again from the backend what an admin write of the
// controller changed.
func (s *Server) readChanges(ctx context.Context, ch changes) {
	s.refreshNamedTopics(ctx, ch.topics)
	if ch.acls {
		s.refreshACLs(ctx)
	}
}

// refreshNamedTopics reads topics again from the backend after the controller
// changed them: a topic found replaces the cached one, a topic gone is
// dropped; a failed read leaves the cache as it is (the refresh or the
// next lookup brings it in line).
func (s *Server) refreshNamedTopics(ctx context.Context, topics []string) {
	for _, topic := range topics {
		if topic == "" || topic == offsetsTopic {
			continue
		}
		name, err := disbackend.StreamNameFor(s.backend, topic)
		if err != nil {
			continue
		}
		st, err := s.backend.DescribeStream(ctx, name)
		switch {
		case err == nil && st.TopicName == topic:
			s.topics.put(&st)
		case errors.Is(err, disbackend.ErrStreamNotFound), err == nil:
			s.topics.remove(topic)
		}
	}
}

// refreshACLs reads the ACLs again after the controller changed them.
func (s *Server) refreshACLs(ctx context.Context) {
	if s.authz == nil {
		return
	}
	if err := s.authz.Refresh(ctx); err != nil {
		s.log.Warn("ACLs not read again after a forwarded change", zapErr(err))
	}
}
