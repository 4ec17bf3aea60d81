package dislocal

// DIS's server-side consumer groups: the undocumented coordinator API that
// the DIS Kafka Adapter's DISKafkaConsumer.subscribe() drives (adapter
// Coordinator.java and InnerDisClient.java; request and response classes in
// the Java SDK's iface/coordinator). The server, not a client leader,
// assigns the partitions:
//
//	JoinGroup  POST   /v2/{project_id}/apps/{app}/consumers/
//	SyncGroup  POST   /v2/{project_id}/apps/{app}/consumers/{client}/partitions/
//	Heartbeat  POST   /v2/{project_id}/apps/{app}/consumers/{client}/heartbeats/
//	LeaveGroup DELETE /v2/{project_id}/apps/{app}/consumers/{client}/
//
// Bodies are camelCase JSON (Jackson's names of the SDK's getters; null
// fields left out). Answers carry a "state" with HTTP 200, DIS errors only
// for malformed requests (the adapter throws on any HTTP error).
//
// A group is the app's set of live members; it lives in memory only (DIS's
// groups are ephemeral, checkpoints are what persists). It is advanced
// lazily, on each request of the group, with the server's clock: no
// goroutine, timer or background sweep is started, so there is nothing to
// stop when the server goes away.
//
// A rebalance starts when a member joins (also when it rejoins), leaves, or
// is dropped. It waits for every member to join again: JoinGroup answers
// syncDelayedTimeMs, the rest of the rebalance's join window, which the
// client sleeps before its SyncGroup ("Waiting [..ms] for other clients to
// join group", Coordinator.doJoinGroup). When the window has passed and
// every member has joined, the generation goes up by one and the
// partitions are assigned. A member that does not join is dropped when its
// session expires, or when its own rebalanceTimeoutMs (sent in its last
// JoinGroup; adapter 1.2.15+; else the session timeout) has passed since
// the rebalance started, even if it goes on heartbeating.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
)

const (
	// DefaultGroupSessionTimeout is how long a group member lives without a
	// request (join, sync or heartbeat): DIS's docs give "about 1 minute".
	DefaultGroupSessionTimeout = time.Minute
	// defaultRebalanceTimeout is the join window when neither
	// Options.GroupSyncDelay nor a member's rebalanceTimeoutMs sets it: the
	// adapter's rebalance.timeout.ms default (DisConsumerConfig), and the
	// "about 20 s" assignment wait of DIS's docs.
	defaultRebalanceTimeout = 20 * time.Second
	// maxClientIDLen bounds client ids (the adapter's default is
	// "consumer-" and a UUID).
	maxClientIDLen = 256
)

// Coordinator answer states (the SDK's JoinGroupResponseState,
// SyncGroupResponseState and HeartBeatResponseState).
const (
	stateOK              = "OK"
	stateError           = "ERROR"
	stateRejoin          = "REJOIN"
	stateErrSubscription = "ERR_SUBSCRIPTION"
	stateGroupNotExist   = "GROUP_NOT_EXIST"
	stateWaiting         = "WAITING"
	stateJoining         = "JOINING"
	stateSyncing         = "SYNCING"
	stateStable          = "STABLE"
)

// groupPhase is a group's place in its rebalance cycle.
type groupPhase int

const (
	// phaseRebalancing: waiting for members to (re)join; SyncGroup answers
	// WAITING to joined members.
	phaseRebalancing groupPhase = iota
	// phaseStable: the current generation's assignment is made.
	phaseStable
)

func (p groupPhase) String() string {
	switch p {
	case phaseRebalancing:
		return "Rebalancing"
	case phaseStable:
		return "Stable"
	}
	return "Unknown"
}

// subscription is what a member asked for in its JoinGroup.
type subscription struct {
	names   []string // interestedStream
	ids     []string // interestedStreamIdList
	pattern string   // streamPattern (Java regex, matched whole)
	re      *regexp.Regexp
}

// streamRef is one subscribed stream: key is how the member named it (the
// stream name, or the stream_id for an ID subscription) and is the key of
// its assignment; name is the stream's name.
type streamRef struct{ key, name string }

// member is one consumer of a group. Guarded by groups.mu.
type member struct {
	clientID         string
	sub              subscription
	rebalanceTimeout time.Duration // 0: not sent
	lastSeen         time.Time
	// joined: the member has joined the group's current rebalance.
	joined bool
	// assignment is the member's share of the current generation, keyed
	// by streamRef.key.
	assignment map[string][]int32
}

// group is one app's consumer group. Guarded by groups.mu.
type group struct {
	app        string
	phase      groupPhase
	generation int64 // of the last assignment; 0 before the first
	members    map[string]*member
	// rebalanceStart and windowEnd bound the current rebalance.
	rebalanceStart, windowEnd time.Time
}

// groups holds every consumer group of the server.
type groups struct {
	mu sync.Mutex
	m  map[string]*group // by app name
}

// sessionTimeout is Options.GroupSessionTimeout or its default.
func (s *Server) sessionTimeout() time.Duration {
	if s.opts.GroupSessionTimeout > 0 {
		return s.opts.GroupSessionTimeout
	}
	return DefaultGroupSessionTimeout
}

// joinWindow is how long a rebalance starting now waits for members to
// join: Options.GroupSyncDelay, else the largest rebalanceTimeoutMs of the
// group's members, else defaultRebalanceTimeout.
func (s *Server) joinWindow(g *group) time.Duration {
	if s.opts.GroupSyncDelay > 0 {
		return s.opts.GroupSyncDelay
	}
	var w time.Duration
	for _, m := range g.members {
		w = max(w, m.rebalanceTimeout)
	}
	if w == 0 {
		w = defaultRebalanceTimeout
	}
	return w
}

// startRebalance puts g into a new rebalance at now. Call with groups.mu held.
func (s *Server) startRebalance(g *group, now time.Time, why string) {
	g.phase = phaseRebalancing
	g.rebalanceStart = now
	g.windowEnd = now.Add(s.joinWindow(g))
	for _, m := range g.members {
		m.joined = false
	}
	s.log.Debug("group rebalancing", zap.String("group", g.app), zap.Int64("generation", g.generation),
		zap.String("reason", why), zap.Time("window_end", g.windowEnd))
}

// advance brings g up to now: it drops expired members (starting a
// rebalance when a stable group loses one) and completes a rebalance that
// is due. It reports whether g still exists. Call with groups.mu held.
func (s *Server) advance(ctx context.Context, g *group, now time.Time) bool {
	session := s.sessionTimeout()
	dropped := false
	for id, m := range g.members {
		wait := m.rebalanceTimeout
		if wait == 0 {
			wait = session
		}
		late := g.phase == phaseRebalancing && !m.joined && !now.Before(g.rebalanceStart.Add(wait))
		if now.Sub(m.lastSeen) > session || late {
			delete(g.members, id)
			dropped = true
			s.log.Debug("group member dropped", zap.String("group", g.app), zap.String("member_id", id),
				zap.Bool("session_expired", !late))
		}
	}
	if len(g.members) == 0 {
		delete(s.groups.m, g.app)
		return false
	}
	if dropped && g.phase == phaseStable {
		s.startRebalance(g, now, "member dropped")
	}
	if g.phase == phaseRebalancing && !now.Before(g.windowEnd) {
		for _, m := range g.members {
			if !m.joined {
				return true
			}
		}
		s.assign(ctx, g)
	}
	return true
}

// assign completes g's rebalance: a new generation, and the readable
// partitions of every subscribed stream shared round-robin over the
// members, in order of (stream name, partition) and of client id, each
// partition to the next member that subscribes to its stream. Call with
// groups.mu held.
func (s *Server) assign(ctx context.Context, g *group) {
	ids := sortedKeys(g.members)
	refs := make(map[string]map[string]string, len(ids)) // member -> stream name -> key
	streams := map[string][]int32{}
	var all []disbackend.Stream
	for _, id := range ids {
		m := g.members[id]
		rs, _, err := s.resolve(ctx, m.sub, &all)
		if err != nil {
			s.log.Warn("group subscription unresolved", zap.String("group", g.app), zap.String("member_id", id), zap.Error(err))
		}
		refs[id] = map[string]string{}
		for _, r := range rs {
			refs[id][r.name] = r.key
			streams[r.name] = nil
		}
	}
	names := sortedKeys(streams)
	s.mu.Lock()
	for _, name := range names {
		bs, ss, derr := s.streamOf(ctx, name)
		if derr != nil {
			continue // deleted since the join
		}
		for p := int32(0); p < bs.PartitionCount; p++ {
			if s.partitionStatus(bs, ss, p) != statusExpired {
				streams[name] = append(streams[name], p)
			}
		}
	}
	s.mu.Unlock()

	g.generation++
	g.phase = phaseStable
	for _, id := range ids {
		g.members[id].assignment = map[string][]int32{}
		g.members[id].joined = false
	}
	next := 0
	for _, name := range names {
		for _, p := range streams[name] {
			for k := range ids {
				id := ids[(next+k)%len(ids)]
				key, ok := refs[id][name]
				if !ok {
					continue
				}
				m := g.members[id]
				m.assignment[key] = append(m.assignment[key], p)
				next = (next + k + 1) % len(ids)
				break
			}
		}
	}
	s.log.Debug("group assigned", zap.String("group", g.app), zap.Int64("generation", g.generation), zap.Int("members", len(ids)))
}

// resolve turns a subscription into streams. missing names a stream that
// does not exist (the JoinGroup's ERR_SUBSCRIPTION); all caches
// ListStreams across calls. A name or ID given twice counts once.
func (s *Server) resolve(ctx context.Context, sub subscription, all *[]disbackend.Stream) (refs []streamRef, missing string, err error) {
	list := func() ([]disbackend.Stream, error) {
		if *all == nil {
			l, err := s.b.ListStreams(ctx)
			if err != nil {
				return nil, err
			}
			*all = l
		}
		return *all, nil
	}
	seen := map[string]bool{}
	if sub.re != nil {
		l, err := list()
		if err != nil {
			return nil, "", err
		}
		for _, bs := range l {
			if sub.re.MatchString(bs.Name) && !seen[bs.Name] {
				seen[bs.Name] = true
				refs = append(refs, streamRef{key: bs.Name, name: bs.Name})
			}
		}
	}
	for _, name := range sub.names {
		if seen[name] {
			continue
		}
		if _, err := s.b.DescribeStream(ctx, name); err != nil {
			if errors.Is(err, disbackend.ErrStreamNotFound) {
				return refs, name, nil
			}
			return refs, "", err
		}
		seen[name] = true
		refs = append(refs, streamRef{key: name, name: name})
	}
	if len(sub.ids) > 0 {
		l, err := list()
		if err != nil {
			return nil, "", err
		}
		byID := make(map[string]string, len(l))
		for _, bs := range l {
			byID[streamID(bs.TopicID)] = bs.Name
		}
		for _, id := range sub.ids {
			name, ok := byID[id]
			if !ok {
				return refs, id, nil
			}
			if seen[name] {
				// The same stream by name and by ID: the adapter's log
				// names this case of ERR_SUBSCRIPTION.
				return refs, id, nil
			}
			seen[name] = true
			refs = append(refs, streamRef{key: id, name: name})
		}
	}
	return refs, "", nil
}

// groupFor returns the app's group after advancing it to now, nil when
// there is none. Call with groups.mu held.
func (s *Server) groupFor(ctx context.Context, app string, now time.Time) *group {
	g := s.groups.m[app]
	if g == nil || !s.advance(ctx, g, now) {
		return nil
	}
	return g
}

// appExists checks the group's app; false also drops the app's group (an
// app deleted while its consumers ran).
func (s *Server) appExists(r *http.Request, app string) (bool, *disError) {
	if _, err := s.b.DescribeApp(r.Context(), app); err != nil {
		if errors.Is(err, disbackend.ErrAppNotFound) {
			s.groups.mu.Lock()
			delete(s.groups.m, app)
			s.groups.mu.Unlock()
			return false, nil
		}
		return false, backendError(err, "", "", app)
	}
	return true, nil
}

func checkClientID(id string) *disError {
	if id == "" || len(id) > maxClientIDLen {
		return errInvalid("clientId must be 1-%d characters", maxClientIDLen)
	}
	return nil
}

// joinGroupRequest is the SDK's JoinGroupRequest (iface/coordinator/request).
type joinGroupRequest struct {
	ProjectID               string   `json:"projectId"`
	GroupID                 string   `json:"groupId"`
	ClientID                string   `json:"clientId"`
	InterestedStream        []string `json:"interestedStream"`
	InterestedStreamIDList  []string `json:"interestedStreamIdList"`
	StreamPattern           *string  `json:"streamPattern"`
	AccelerateAssignEnabled *bool    `json:"accelerateAssignEnabled"`
	RebalanceTimeoutMs      *int64   `json:"rebalanceTimeoutMs"`
}

// joinGroupResponse is the SDK's JoinGroupResponse.
type joinGroupResponse struct {
	State             string   `json:"state"`
	SyncDelayedTimeMs *int64   `json:"syncDelayedTimeMs,omitempty"`
	Subscription      []string `json:"subscription,omitempty"`
}

// joinGroup is JoinGroup, POST /v2/{project_id}/apps/{app}/consumers/: the
// member (body clientId) joins the app's group with its subscription (the
// stream names interestedStream, the Java regex streamPattern, or the
// stream ids interestedStreamIdList), starting a rebalance unless one is
// under way. Answers (HTTP 200) state OK with syncDelayedTimeMs (ms to wait
// before SyncGroup) and subscription (the stream keys subscribed: names,
// and the ids of an ID subscription); GROUP_NOT_EXIST when the app does
// not exist; ERR_SUBSCRIPTION for no stream, a missing stream or one
// named both by name and by ID; ERROR for a pattern that Go's regexp
// cannot compile. A body that is not JSON or lacks clientId gets DIS.4300
// or DIS.4200.
func (s *Server) joinGroup(r *http.Request, vars map[string]string, body []byte) (int, any, *disError) {
	app := vars["app_name"]
	var req joinGroupRequest
	if derr := decodeBody(body, &req); derr != nil {
		return 0, nil, derr
	}
	if derr := checkClientID(req.ClientID); derr != nil {
		return 0, nil, derr
	}
	var timeout time.Duration
	if req.RebalanceTimeoutMs != nil {
		if *req.RebalanceTimeoutMs < 0 || *req.RebalanceTimeoutMs > int64(24*time.Hour/time.Millisecond) {
			return 0, nil, errInvalid("rebalanceTimeoutMs %d must be 0-86400000", *req.RebalanceTimeoutMs)
		}
		timeout = time.Duration(*req.RebalanceTimeoutMs) * time.Millisecond
	}
	ok, derr := s.appExists(r, app)
	if derr != nil {
		return 0, nil, derr
	}
	if !ok {
		return http.StatusOK, joinGroupResponse{State: stateGroupNotExist}, nil
	}
	sub := subscription{names: req.InterestedStream, ids: req.InterestedStreamIDList}
	if req.StreamPattern != nil {
		sub.pattern = *req.StreamPattern
		re, err := regexp.Compile(`^(?:` + sub.pattern + `)$`)
		if err != nil {
			s.log.Debug("group pattern refused", zap.String("group", app), zap.String("member_id", req.ClientID), zap.Error(err))
			return http.StatusOK, joinGroupResponse{State: stateError}, nil
		}
		sub.re = re
	}
	if sub.re == nil && len(sub.names) == 0 && len(sub.ids) == 0 {
		return http.StatusOK, joinGroupResponse{State: stateErrSubscription}, nil
	}
	var all []disbackend.Stream
	refs, missing, err := s.resolve(r.Context(), sub, &all)
	if err != nil {
		return 0, nil, backendError(err, "", "", app)
	}
	if missing != "" {
		s.log.Debug("group subscription refused", zap.String("group", app), zap.String("member_id", req.ClientID), zap.String("stream", missing))
		return http.StatusOK, joinGroupResponse{State: stateErrSubscription}, nil
	}

	now := s.now()
	s.groups.mu.Lock()
	defer s.groups.mu.Unlock()
	g := s.groupFor(r.Context(), app, now)
	if g == nil {
		g = &group{app: app, phase: phaseStable, members: map[string]*member{}}
		s.groups.m[app] = g
	}
	m := g.members[req.ClientID]
	if m == nil {
		m = &member{clientID: req.ClientID}
		g.members[req.ClientID] = m
	}
	m.sub, m.rebalanceTimeout, m.lastSeen = sub, timeout, now
	if g.phase == phaseStable {
		s.startRebalance(g, now, "member joined")
	}
	m.joined = true
	s.advance(r.Context(), g, now) // the window may be 0
	delay := max(g.windowEnd.Sub(now), 0).Milliseconds()
	keys := make([]string, 0, len(refs))
	for _, ref := range refs {
		keys = append(keys, ref.key)
	}
	return http.StatusOK, joinGroupResponse{State: stateOK, SyncDelayedTimeMs: &delay, Subscription: keys}, nil
}

// memberRequest is the SDK's SyncGroupRequest and HeartbeatRequest.
type memberRequest struct {
	ProjectID  string `json:"projectId"`
	GroupID    string `json:"groupId"`
	ClientID   string `json:"clientId"`
	Generation *int64 `json:"generation"`
}

// syncGroupResponse is the SDK's SyncGroupResponse.
type syncGroupResponse struct {
	State      string             `json:"state"`
	Generation *int64             `json:"generation,omitempty"`
	Assignment map[string][]int32 `json:"assignment,omitempty"`
}

// decodeMember reads a SyncGroup or Heartbeat body (which may be empty);
// the member is the path's {client_id}.
func decodeMember(vars map[string]string, body []byte) (string, int64, *disError) {
	var req memberRequest
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return "", 0, errf(400, disapi.CodeBodyError, "Request body error. [%v]", err)
		}
	}
	id := vars["client_id"]
	if derr := checkClientID(id); derr != nil {
		return "", 0, derr
	}
	gen := int64(-1)
	if req.Generation != nil {
		gen = *req.Generation
	}
	return id, gen, nil
}

// syncGroup is SyncGroup, POST
// /v2/{project_id}/apps/{app}/consumers/{client}/partitions/ (body
// generation: the member's current one, -1 before its first). Answers
// state OK with generation and assignment ({stream key: [partition, ...]},
// partitions as ints) once the group's rebalance is complete; WAITING
// while it is not (the client retries after 500 ms, 5 s in adapter 1.2.2);
// REJOIN for a member the group does not know or that has not joined the
// current rebalance; GROUP_NOT_EXIST when the app does not exist.
func (s *Server) syncGroup(r *http.Request, vars map[string]string, body []byte) (int, any, *disError) {
	app := vars["app_name"]
	id, _, derr := decodeMember(vars, body)
	if derr != nil {
		return 0, nil, derr
	}
	ok, derr := s.appExists(r, app)
	if derr != nil {
		return 0, nil, derr
	}
	if !ok {
		return http.StatusOK, syncGroupResponse{State: stateGroupNotExist}, nil
	}
	now := s.now()
	s.groups.mu.Lock()
	defer s.groups.mu.Unlock()
	g := s.groupFor(r.Context(), app, now)
	var m *member
	if g != nil {
		m = g.members[id]
	}
	switch {
	case m == nil:
		return http.StatusOK, syncGroupResponse{State: stateRejoin}, nil
	case g.phase == phaseRebalancing && !m.joined:
		m.lastSeen = now
		return http.StatusOK, syncGroupResponse{State: stateRejoin}, nil
	case g.phase == phaseRebalancing:
		m.lastSeen = now
		return http.StatusOK, syncGroupResponse{State: stateWaiting}, nil
	}
	m.lastSeen = now
	gen := g.generation
	a := m.assignment
	if a == nil {
		a = map[string][]int32{}
	}
	return http.StatusOK, struct {
		State      string             `json:"state"`
		Generation int64              `json:"generation"`
		Assignment map[string][]int32 `json:"assignment"`
	}{stateOK, gen, a}, nil
}

// heartbeat is Heartbeat, POST
// /v2/{project_id}/apps/{app}/consumers/{client}/heartbeats/ (body
// generation). Answers state STABLE when the member holds the group's
// current generation; SYNCING when the group has an assignment, or a
// rebalance the member has joined, that the member has yet to fetch with
// SyncGroup; JOINING for a member the group does not know (also a new
// consumer's first heartbeat, with generation -1) or one that has not
// joined the current rebalance; GROUP_NOT_EXIST when the app does not
// exist.
func (s *Server) heartbeat(r *http.Request, vars map[string]string, body []byte) (int, any, *disError) {
	app := vars["app_name"]
	id, gen, derr := decodeMember(vars, body)
	if derr != nil {
		return 0, nil, derr
	}
	ok, derr := s.appExists(r, app)
	if derr != nil {
		return 0, nil, derr
	}
	if !ok {
		return http.StatusOK, map[string]string{"state": stateGroupNotExist}, nil
	}
	now := s.now()
	s.groups.mu.Lock()
	defer s.groups.mu.Unlock()
	g := s.groupFor(r.Context(), app, now)
	var m *member
	if g != nil {
		m = g.members[id]
	}
	state := stateJoining
	switch {
	case m == nil:
	case g.phase == phaseRebalancing && !m.joined:
		m.lastSeen = now
	case g.phase == phaseRebalancing:
		m.lastSeen = now
		state = stateSyncing
	case gen == g.generation:
		m.lastSeen = now
		state = stateStable
	default:
		m.lastSeen = now
		state = stateSyncing
	}
	return http.StatusOK, map[string]string{"state": state}, nil
}

// leaveGroup is LeaveGroup, DELETE /v2/{project_id}/apps/{app}/consumers/{client}/
// (no body; the adapter sends it from unsubscribe(), not from close()):
// the member leaves and the others rebalance. Answers 200 {"state":"OK"}
// (the SDK's LeaveGroupResponse; the adapter reads no answer), also for a
// member the group does not know; DIS.4332 when the app does not exist.
func (s *Server) leaveGroup(r *http.Request, vars map[string]string, _ []byte) (int, any, *disError) {
	app, id := vars["app_name"], vars["client_id"]
	if derr := checkClientID(id); derr != nil {
		return 0, nil, derr
	}
	if _, err := s.b.DescribeApp(r.Context(), app); err != nil {
		return 0, nil, backendError(err, "", "", app)
	}
	now := s.now()
	s.groups.mu.Lock()
	defer s.groups.mu.Unlock()
	if g := s.groupFor(r.Context(), app, now); g != nil && g.members[id] != nil {
		delete(g.members, id)
		if len(g.members) == 0 {
			delete(s.groups.m, app)
		} else if g.phase == phaseStable {
			s.startRebalance(g, now, "member left")
		} else {
			s.advance(r.Context(), g, now) // the leaver may have been the last awaited
		}
	}
	return http.StatusOK, map[string]string{"state": stateOK}, nil
}

// checkGroupCommit checks a CommitCheckpoint sent by a group member
// (client_id and generation_id, adapter 1.2.x in subscribe mode since
// 1.2.13): DIS.4702 when the app's group does not know the member,
// DIS.4701 while the group rebalances, DIS.4703 when generation is not
// the group's current one.
func (s *Server) checkGroupCommit(ctx context.Context, app, clientID string, generation int64) *disError {
	now := s.now()
	s.groups.mu.Lock()
	defer s.groups.mu.Unlock()
	g := s.groupFor(ctx, app, now)
	if g == nil || g.members[clientID] == nil {
		return errf(400, disapi.CodeGroupMemberNotFound, "Consumer member does not exist. [%s in %s]", clientID, app)
	}
	if g.phase == phaseRebalancing {
		return errf(400, disapi.CodeGroupRebalancing, "Consumer group is rebalancing. [%s]", app)
	}
	if generation != g.generation {
		return errf(400, disapi.CodeGroupIllegalGeneration, "Illegal consumer group generation. [%d, current %d]", generation, g.generation)
	}
	return nil
}
