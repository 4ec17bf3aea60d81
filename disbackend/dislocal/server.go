// Package dislocal is a Huawei Cloud DIS REST API v2 emulator: an HTTP
// server that speaks DIS's paths, query and JSON field names (and the
// SDKs' protobuf bodies of PutRecords and GetRecords), status codes and
// DIS.xxxx error bodies over a disbackend.Backend (the embedded
// localstore), checks AK/SK signatures (or an IAM token), and optionally
// applies DIS's per-partition flow control and injected faults. It is
// shipped as `disgw dislocal` so that DIS applications run offline, and it
// is what disgw's DIS backend (disrest) is tested against.
//
// It owns the DIS view of the store: PutRecords builds one Kafka record
// batch (magic 2) per partition per request and appends it; GetRecords reads
// batches back and answers one DIS record per Kafka record, the sequence
// number being the Kafka offset. What the Backend interface does not hold
// (stream type, data type, tags, scaling history, partitions left DELETED by
// a scale-down) lives in a small JSON state file. Cursors are stateless.
//
// It does not run dump tasks or collect metrics: those endpoints answer
// documented DIS errors.
package dislocal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
)

// Options configure New. The zero value serves without authentication.
type Options struct {
	// ProjectID, when set, is the only project id accepted in paths
	// (others get DIS.4117); empty accepts any.
	ProjectID string
	// AK and SK, when AK is set, require every request to carry a valid
	// SDK-HMAC-SHA256 (or V11-HMAC-SHA256, sign.go) signature with this key
	// pair (or, when Token is set, the token).
	AK, SK string
	// Keys are further key pairs accepted beside AK and SK (AK → SK): a
	// request signed with any of them is served, and its AK counted
	// (Stats.AccessKeys) and kept in the call log.
	Keys map[string]string
	// Deny maps an AK to stream name prefixes it may not touch: a request
	// signed with it that names such a stream (in its path, query or
	// PutRecords body), or addresses one by stream_id, gets 403 DIS.4116,
	// as DIS's IAM answers.
	Deny map[string][]string
	// CallLog, when > 0, keeps the last CallLog PutRecords (at most
	// 100,000) with their AK, stream and records' data, served at GET
	// /dislocal/calls (Calls).
	CallLog int
	// Token, when set, is accepted as X-Auth-Token.
	Token string
	// MaxClockSkew bounds |X-Sdk-Date - now|; 0 means 15 minutes.
	MaxClockSkew time.Duration
	// StateFile is where stream types, tags, scaling history and partition
	// statuses are kept (JSON, replaced atomically); empty keeps them in
	// memory only.
	StateFile string
	// FlowControl meters each partition at its stream type's DIS limits
	// (COMMON: write 1 MB/s or 1,000 records/s, read 2 MB/s; ADVANCED: 5 MB/s,
	// 2,000 records/s, 10 MB/s).
	FlowControl bool
	// RetentionUnit is the length of one data_duration "hour": 0 means
	// time.Hour; tests set time.Minute (or less) so that retention and the
	// expiry of partitions left by a scale-down happen in minutes.
	RetentionUnit time.Duration
	// NoScalingLimits lifts DIS's limits on UpdatePartitionCount (5 per
	// stream per hour, none for an hour after a success).
	NoScalingLimits bool
	// GroupSessionTimeout is how long a consumer-group member (see
	// groups.go) lives without a JoinGroup, SyncGroup or Heartbeat; 0 means
	// DefaultGroupSessionTimeout (1 minute, DIS's "about 1 minute").
	GroupSessionTimeout time.Duration
	// GroupSyncDelay is a consumer group's join window: how long after a
	// rebalance starts dislocal waits for members to join before it
	// assigns, answered to each JoinGroup as syncDelayedTimeMs (what is
	// left of it). 0 means the largest rebalanceTimeoutMs the members sent,
	// or 20 s (the adapter's rebalance.timeout.ms default) when none did;
	// tests set a few milliseconds.
	GroupSyncDelay time.Duration
	// NoGroupFencing turns off the check of a CommitCheckpoint carrying
	// client_id and generation_id against the app's group (DIS.4701-4703):
	// such commits are then taken like any other. For tests of clients
	// that must refuse a DIS that does not fence stale group members
	// (disrest's cluster mode, docs/cluster.md).
	NoGroupFencing bool
	// Faults are injected into DIS operations (not into /dislocal/ paths).
	Faults Faults
	// Now is the clock for signatures, cursors, flow control and scaling;
	// nil means time.Now. Give localstore the same clock.
	Now func() time.Time
	// Logger is named "dislocal"; nil means zap.NewNop().
	Logger *zap.Logger
}

// Faults describe injected failures, for testing clients' retries.
type Faults struct {
	// Latency is added before each DIS operation is served.
	Latency time.Duration
	// Jitter adds a further uniformly random delay in [0, Jitter) before
	// each DIS operation, so that consecutive requests of one client see
	// different delays (as over a real network).
	Jitter time.Duration
	// DelayOps, when set, limits Latency and Jitter to these operations
	// (their names in Stats, e.g. "SendRecords" for PutRecords).
	DelayOps []string
	// ErrorRate is the fraction (0-1) of requests answered 500 DIS.5000.
	ErrorRate float64
	// DropRate is the fraction (0-1) of requests whose connection is closed
	// without an answer, before they are served.
	DropRate float64
	// LostRate is the fraction (0-1) of requests that are served (a
	// PutRecords writes its records) and whose connection is then closed
	// without the answer: a client cannot tell them from dropped ones.
	LostRate float64
}

const (
	maxBodyBytes = 8 << 20 // a PutRecords of 5 MB (ADVANCED) in Base64, plus keys
	defaultSkew  = 15 * time.Minute
)

// Server is the DIS REST emulator; it is an http.Handler. Safe for
// concurrent use.
type Server struct {
	b    disbackend.Backend
	opts Options
	now  func() time.Time
	log  *zap.Logger

	// mu guards state (and its file).
	mu    sync.Mutex
	state *state

	flow *flowControl

	// groups are the apps' consumer groups (groups.go), in memory only.
	groups groups

	// faultMu guards rng.
	faultMu sync.Mutex
	rng     *rand.Rand

	countMu  sync.Mutex
	requests map[string]int64
	failures map[string]int64
	// byAK counts requests by AK, then operation; calls is the call log.
	byAK     map[string]map[string]int64
	calls    []Call
	inFlight atomic.Int64
	// maxInFlight is the most DIS operations in flight at once (see Stats).
	maxInFlight atomic.Int64
}

// New returns a Server over b, loading its state file if there is one.
// Errors: an unreadable or corrupt state file.
func New(b disbackend.Backend, opts Options) (*Server, error) {
	if opts.MaxClockSkew <= 0 {
		opts.MaxClockSkew = defaultSkew
	}
	if opts.RetentionUnit <= 0 {
		opts.RetentionUnit = time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	st, err := loadState(opts.StateFile)
	if err != nil {
		return nil, err
	}
	s := &Server{
		b: b, opts: opts, now: opts.Now, log: opts.Logger.Named("dislocal"),
		state:    st,
		rng:      rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7)),
		requests: map[string]int64{},
		failures: map[string]int64{},
		byAK:     map[string]map[string]int64{},
	}
	s.flow = newFlowControl(opts.Now)
	s.groups.m = map[string]*group{}
	return s, nil
}

// disError is a DIS error answer: HTTP status and {"errorCode","message"}.
type disError struct {
	Status  int
	Code    string
	Message string
}

func (e *disError) Error() string { return e.Code + " " + e.Message }

func errf(status int, code, format string, args ...any) *disError {
	return &disError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// DIS error messages, as the error code table words them.
func errStreamNotFound(name string) *disError {
	return errf(400, disapi.CodeStreamNotFound, "Stream does not exist. [%s]", name)
}
func errPartitionNotFound(id string) *disError {
	return errf(400, disapi.CodePartitionNotFound, "Partition does not exist. [%s]", id)
}
func errInvalid(format string, args ...any) *disError {
	return errf(400, disapi.CodeInvalidRequest, "Invalid request. ["+format+"]", args...)
}
func errAppNotFound(name string) *disError {
	return errf(400, disapi.CodeAppNotFound, "App does not exist. [%s]", name)
}

// backendError maps a backend failure to a DIS error.
func backendError(err error, stream, partition, app string) *disError {
	var de *disError
	switch {
	case errors.As(err, &de):
		return de
	case errors.Is(err, disbackend.ErrStreamNotFound):
		return errStreamNotFound(stream)
	case errors.Is(err, disbackend.ErrPartitionNotFound):
		return errPartitionNotFound(partition)
	case errors.Is(err, disbackend.ErrAppNotFound):
		return errAppNotFound(app)
	case errors.Is(err, disbackend.ErrAppExists), errors.Is(err, disbackend.ErrNameCollision) && app != "":
		return errf(400, disapi.CodeAppExists, "App already exists. [%s]", app)
	case errors.Is(err, disbackend.ErrStreamExists), errors.Is(err, disbackend.ErrNameCollision):
		return errf(400, disapi.CodeStreamExists, "Stream already exists. [%s]", stream)
	case errors.Is(err, disbackend.ErrOffsetOutOfRange):
		return errf(400, disapi.CodeSequenceNumberOutOfRange, "Sequence number out of range. [%v]", err)
	case errors.Is(err, disbackend.ErrInvalidName), errors.Is(err, disbackend.ErrInvalidConfig),
		errors.Is(err, disbackend.ErrInvalidPartitionCount):
		return errInvalid("%v", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errf(500, disapi.CodeSystemError, "System error. [%v]", err)
	}
	return errf(500, disapi.CodeSystemError, "System error. [%v]", err)
}

// route is one DIS operation: method, path pattern relative to
// /v2/{project_id} (or /v3/...), and its handler.
type route struct {
	op      string // Go SDK name, the key of the request counts
	method  string
	version string   // "v2" or "v3"
	pattern []string // literal segments, "{x}" for a variable
	handle  func(s *Server, r *http.Request, vars map[string]string, body []byte) (int, any, *disError)
}

var routes []route

func init() {
	add := func(op, method, version, pattern string, h func(*Server, *http.Request, map[string]string, []byte) (int, any, *disError)) {
		var segs []string
		if pattern != "" {
			segs = strings.Split(pattern, "/")
		}
		routes = append(routes, route{op: op, method: method, version: version, pattern: segs, handle: h})
	}
	add("SendRecords", "POST", "v2", "records", (*Server).putRecords)
	add("ConsumeRecords", "GET", "v2", "records", (*Server).getRecords)
	add("ShowCursor", "GET", "v2", "cursors", (*Server).getCursor)
	add("CreateStream", "POST", "v2", "streams", (*Server).createStream)
	add("ListStreams", "GET", "v2", "streams", (*Server).listStreams)
	add("ShowStream", "GET", "v2", "streams/{stream_name}", (*Server).describeStream)
	add("DeleteStream", "DELETE", "v2", "streams/{stream_name}", (*Server).deleteStream)
	add("UpdatePartitionCount", "PUT", "v2", "streams/{stream_name}", (*Server).updatePartitionCount)
	add("UpdateStream", "PUT", "v3", "streams/{stream_name}", (*Server).updateStream)
	add("ListPolicies", "GET", "v2", "streams/{stream_name}/policies", (*Server).listPolicies)
	add("CreateApp", "POST", "v2", "apps", (*Server).createApp)
	add("ListApp", "GET", "v2", "apps", (*Server).listApps)
	add("ShowApp", "GET", "v2", "apps/{app_name}", (*Server).describeApp)
	add("DeleteApp", "DELETE", "v2", "apps/{app_name}", (*Server).deleteApp)
	// The consumer-group coordinator of the DIS Kafka Adapter (groups.go).
	add("JoinGroup", "POST", "v2", "apps/{app_name}/consumers", (*Server).joinGroup)
	add("SyncGroup", "POST", "v2", "apps/{app_name}/consumers/{client_id}/partitions", (*Server).syncGroup)
	add("Heartbeat", "POST", "v2", "apps/{app_name}/consumers/{client_id}/heartbeats", (*Server).heartbeat)
	add("LeaveGroup", "DELETE", "v2", "apps/{app_name}/consumers/{client_id}", (*Server).leaveGroup)
	add("ShowConsumerState", "GET", "v2", "apps/{app_name}/streams/{stream_name}", (*Server).consumerState)
	add("CommitCheckpoint", "POST", "v2", "checkpoints", (*Server).commitCheckpoint)
	add("ShowCheckpoint", "GET", "v2", "checkpoints", (*Server).getCheckpoint)
	add("DeleteCheckpoint", "DELETE", "v2", "checkpoints", (*Server).deleteCheckpoint)
	add("ListTags", "GET", "v2", "stream/tags", (*Server).listAllTags)
	add("ListResourcesByTags", "POST", "v2", "stream/resource_instances/action", (*Server).resourcesByTags)
	add("ShowStreamTags", "GET", "v2", "stream/{stream_id}/tags", (*Server).streamTags)
	add("CreateTag", "POST", "v2", "stream/{stream_id}/tags", (*Server).createTag)
	add("BatchCreateTags", "POST", "v2", "stream/{stream_id}/tags/action", (*Server).batchTags)
	add("DeleteTag", "DELETE", "v2", "stream/{stream_id}/tags/{key}", (*Server).deleteTag)
	// Dump tasks and metrics are not emulated: they answer DIS errors.
	add("ListTransferTasks", "GET", "v2", "streams/{stream_name}/transfer-tasks", (*Server).listTransferTasks)
	add("CreateTransferTask", "POST", "v2", "streams/{stream_name}/transfer-tasks", (*Server).createTransferTask)
	add("TransferTaskAction", "POST", "v2", "streams/{stream_name}/transfer-tasks/action", (*Server).transferTaskMissing)
	add("ShowTransferTask", "GET", "v2", "streams/{stream_name}/transfer-tasks/{task_name}", (*Server).transferTaskMissing)
	add("DeleteTransferTask", "DELETE", "v2", "streams/{stream_name}/transfer-tasks/{task_name}", (*Server).transferTaskMissing)
	add("ShowStreamMetrics", "GET", "v2", "streams/{stream_name}/metrics", (*Server).metrics)
	add("ShowPartitionMetrics", "GET", "v2", "streams/{stream_name}/partitions/{partition_id}/metrics", (*Server).metrics)
}

// match finds the route of method and the path segments after the project
// id. It returns the route, its variables, and whether some route had the
// path with another method.
func match(method, version string, segs []string) (*route, map[string]string, bool) {
	pathFound := false
	for i := range routes {
		rt := &routes[i]
		if rt.version != version || len(rt.pattern) != len(segs) {
			continue
		}
		vars := map[string]string{}
		ok := true
		for j, p := range rt.pattern {
			if strings.HasPrefix(p, "{") {
				vars[strings.Trim(p, "{}")] = segs[j]
			} else if p != segs[j] {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		pathFound = true
		if rt.method == method {
			return rt, vars, true
		}
	}
	return nil, nil, pathFound
}

// ServeHTTP serves DIS operations under /v2/{project_id}/ and
// /v3/{project_id}/ (with or without a trailing slash), in JSON, and
// PutRecords and GetRecords also in protobuf (Content-Type
// application/x-protobuf); request bodies may be compressed as the Java
// SDK's body.compress.enabled does (Content-Encoding lz4, snappy, zstd;
// see bodies.go). It also serves the request counts (Stats, as JSON) at
// GET /dislocal/stats, and the call log (Options.CallLog, Calls) at GET
// /dislocal/calls. All are authenticated alike: with Options.AK, Keys or
// Token set, a request without a valid signature or token gets DIS's 441
// error ({"errorCode","message"}).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/dislocal/stats" && r.Method == http.MethodGet {
		s.serveStats(w, r, func() any { return s.Stats() })
		return
	}
	if r.URL.Path == "/dislocal/calls" && r.Method == http.MethodGet {
		s.serveStats(w, r, func() any { return s.Calls() })
		return
	}
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(segs) < 2 || (segs[0] != "v2" && segs[0] != "v3") {
		writeError(w, errf(404, disapi.CodeInvalidRequest, "Invalid request. [no DIS operation at %s %s]", r.Method, r.URL.Path))
		return
	}
	rt, vars, pathFound := match(r.Method, segs[0], segs[2:])
	op := "Unknown"
	if rt != nil {
		op = rt.op
	}
	s.count(op, false)
	status, resp, derr := s.serve(w, r, segs[1], rt, vars, pathFound)
	if derr == nil && status == 0 {
		return // connection dropped
	}
	if rt != nil && s.loseAnswer() {
		hangUp(w)
		return
	}
	if derr != nil {
		s.count(op, true)
		if derr.Status >= 500 {
			s.log.Warn("request failed", zap.String("op", op), zap.String("code", derr.Code), zap.String("message", derr.Message))
		} else {
			s.log.Debug("request refused", zap.String("op", op), zap.String("code", derr.Code), zap.String("message", derr.Message))
		}
		writeError(w, derr)
		return
	}
	switch m := resp.(type) {
	case nil:
		w.WriteHeader(status)
	case proto.Message:
		writeProto(w, status, m)
	default:
		writeJSON(w, status, resp)
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, project string, rt *route, vars map[string]string, pathFound bool) (int, any, *disError) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return 400, nil, errf(400, disapi.CodeBodyError, "Request body error. [%v]", err)
	}
	if len(body) > maxBodyBytes {
		return 413, nil, errf(413, disapi.CodeBodyError, "Request body error. [larger than %d bytes]", maxBodyBytes)
	}
	ak, derr := s.authenticate(r, body)
	if derr != nil {
		return derr.Status, nil, derr
	}
	r = r.WithContext(withAccessKey(r.Context(), ak))
	// The signature covers the body as sent, compressed or not.
	body, derr = decodeContentEncoding(r.Header, body)
	if derr != nil {
		return derr.Status, nil, derr
	}
	if s.opts.ProjectID != "" {
		if project != s.opts.ProjectID {
			return 400, nil, errf(400, disapi.CodeProjectIDInvalid, "Invalid project ID. [%s]", project)
		}
		if h := r.Header.Get("X-Project-Id"); h != "" && h != s.opts.ProjectID {
			return 400, nil, errf(400, disapi.CodeProjectIDInvalid, "Invalid project ID. [X-Project-Id %s]", h)
		}
	}
	if rt == nil {
		if pathFound {
			return 405, nil, errf(405, disapi.CodeInvalidRequest, "Invalid request. [method %s not allowed on %s]", r.Method, r.URL.Path)
		}
		return 404, nil, errf(404, disapi.CodeInvalidRequest, "Invalid request. [no DIS operation at %s %s]", r.Method, r.URL.Path)
	}
	if ak != "" {
		s.countAK(ak, rt.op)
	}
	if derr := s.deniedRoute(r, vars); derr != nil {
		return derr.Status, nil, derr
	}
	if s.injectFault(w) {
		return 0, nil, nil
	}
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for m := s.maxInFlight.Load(); n > m && !s.maxInFlight.CompareAndSwap(m, n); m = s.maxInFlight.Load() {
	}
	if d := s.opts.Faults.Latency + s.jitter(); d > 0 && (len(s.opts.Faults.DelayOps) == 0 || slices.Contains(s.opts.Faults.DelayOps, rt.op)) {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
	}
	return rt.handle(s, r, vars, body)
}

// serveStats answers GET /dislocal/stats (and /dislocal/calls) with what
// answer returns, once the request is authenticated as a DIS operation
// would be. It is not counted.
func (s *Server) serveStats(w http.ResponseWriter, r *http.Request, answer func() any) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil || len(body) > maxBodyBytes {
		writeError(w, errf(400, disapi.CodeBodyError, "Request body error. [unreadable or larger than %d bytes]", maxBodyBytes))
		return
	}
	if _, derr := s.authenticate(r, body); derr != nil {
		s.log.Debug("request refused", zap.String("op", r.URL.Path), zap.String("code", derr.Code), zap.String("message", derr.Message))
		writeError(w, derr)
		return
	}
	writeJSON(w, http.StatusOK, answer())
}

// authenticate checks the token or the signature, when configured, and
// returns the AK the request was signed with ("" for a token or none).
func (s *Server) authenticate(r *http.Request, body []byte) (string, *disError) {
	if !s.signing() && s.opts.Token == "" {
		return "", nil
	}
	if _, ok := r.Header["X-Auth-Token"]; ok || !s.signing() {
		tok := r.Header.Get("X-Auth-Token")
		switch {
		case tok == "":
			return "", errf(441, disapi.CodeTokenEmpty, "Empty X-Auth-Token header.")
		case s.opts.Token == "" || tok != s.opts.Token:
			return "", errf(441, disapi.CodeTokenInvalid, "Invalid X-Auth-Token header.")
		}
		return "", nil
	}
	// The key pair of the AK the header names; an unknown AK is checked
	// against Options.AK, which refuses it (DIS.4107) after the header's
	// other checks, as before.
	ak, sk := s.opts.AK, s.opts.SK
	if a, ok := parseAuthorization(r.Header.Get("Authorization")); ok {
		if k, found := s.secretOf(a.AK); found {
			ak, sk = a.AK, k
		}
	}
	if ak == "" {
		ak = "\x00no such key" // only Keys are set: refuse unknown AKs
	}
	if derr := verifySignature(r, body, ak, sk, s.now(), s.opts.MaxClockSkew); derr != nil {
		return "", derr
	}
	return ak, nil
}

// countAK counts a request signed with ak (Stats.AccessKeys).
func (s *Server) countAK(ak, op string) {
	s.countMu.Lock()
	m := s.byAK[ak]
	if m == nil {
		m = map[string]int64{}
		s.byAK[ak] = m
	}
	m[op]++
	s.countMu.Unlock()
}

// jitter draws the Faults.Jitter delay of one request.
func (s *Server) jitter() time.Duration {
	if s.opts.Faults.Jitter <= 0 {
		return 0
	}
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	return time.Duration(s.rng.Int64N(int64(s.opts.Faults.Jitter)))
}

// loseAnswer draws whether this request's answer is lost (Faults.LostRate).
func (s *Server) loseAnswer() bool {
	if s.opts.Faults.LostRate <= 0 {
		return false
	}
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	return s.rng.Float64() < s.opts.Faults.LostRate
}

// hangUp closes the request's connection without an answer.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			_ = c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler) // HTTP/2: abort the stream
}

// injectFault answers 500 DIS.5000 or drops the connection at the
// configured rates; true when it answered.
func (s *Server) injectFault(w http.ResponseWriter) bool {
	f := s.opts.Faults
	if f.ErrorRate <= 0 && f.DropRate <= 0 {
		return false
	}
	s.faultMu.Lock()
	x := s.rng.Float64()
	s.faultMu.Unlock()
	switch {
	case x < f.DropRate:
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
				return true
			}
		}
		panic(http.ErrAbortHandler) // HTTP/2: abort the stream
	case x < f.DropRate+f.ErrorRate:
		writeError(w, errf(500, disapi.CodeSystemError, "System error. [injected fault]"))
		return true
	}
	return false
}

func (s *Server) count(op string, failed bool) {
	s.countMu.Lock()
	if failed {
		s.failures[op]++
	} else {
		s.requests[op]++
	}
	s.countMu.Unlock()
}

// Stats are the request counts since New, by operation (the Go SDK's
// names: SendRecords, ConsumeRecords, ShowCursor, ...).
type Stats struct {
	// Requests counts every request routed to an operation (after the path
	// was matched; "Unknown" for unmatched paths).
	Requests map[string]int64 `json:"requests"`
	// Errors counts the requests answered with a DIS error.
	Errors map[string]int64 `json:"errors"`
	// MaxInFlight is the most DIS operations served at once since New,
	// injected latency included.
	MaxInFlight int64 `json:"max_in_flight"`
	// AccessKeys counts the signed requests routed to an operation by
	// the AK they were signed with, then by operation.
	AccessKeys map[string]map[string]int64 `json:"access_keys,omitempty"`
}

// Stats returns a copy of the request counts.
func (s *Server) Stats() Stats {
	s.countMu.Lock()
	defer s.countMu.Unlock()
	st := Stats{Requests: make(map[string]int64, len(s.requests)), Errors: make(map[string]int64, len(s.failures)), MaxInFlight: s.maxInFlight.Load()}
	for k, v := range s.requests {
		st.Requests[k] = v
	}
	for k, v := range s.failures {
		st.Errors[k] = v
	}
	if len(s.byAK) > 0 {
		st.AccessKeys = make(map[string]map[string]int64, len(s.byAK))
		for ak, m := range s.byAK {
			st.AccessKeys[ak] = maps.Clone(m)
		}
	}
	return st
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = 500
		buf.Reset()
		fmt.Fprintf(&buf, `{"errorCode":"%s","message":"System error. [encoding the answer: %s]"}`, disapi.CodeSystemError, strings.ReplaceAll(err.Error(), `"`, `'`))
	}
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func writeError(w http.ResponseWriter, e *disError) {
	writeJSON(w, e.Status, struct {
		ErrorCode string `json:"errorCode"`
		Message   string `json:"message"`
	}{e.Code, e.Message})
}

func decodeBody(body []byte, v any) *disError {
	if len(bytes.TrimSpace(body)) == 0 {
		return errf(400, disapi.CodeEmptyRequest, "Empty request.")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return errf(400, disapi.CodeBodyError, "Request body error. [%v]", err)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
