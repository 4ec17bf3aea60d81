package groupcoord

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/groupcoord/consumer"
)

// message is one unit of work for a group's goroutine. abort answers the
// request instead when the coordinator closes before run could be called.
type message struct {
	run   func(*group)
	abort func()
}

// parkedJoin is a JoinGroup waiting for the join phase to end.
type parkedJoin struct {
	version int16
	reply   func(*kmsg.JoinGroupResponse)
}

// parkedSync is a SyncGroup waiting for the leader's assignment.
type parkedSync struct {
	version int16
	reply   func(*kmsg.SyncGroupResponse)
}

// member is one member of a group. Owned by the group's goroutine.
type member struct {
	id           string
	instanceID   *string // static membership (KIP-345)
	client       Client
	protocolType string
	protocols    []kmsg.JoinGroupRequestProtocol // in the member's preference order; metadata opaque
	session      time.Duration
	rebalance    time.Duration
	assignment   []byte // opaque, from the leader's SyncGroup
	// isNew: joined but never got a JoinGroup response; such a member
	// expires after NewMemberJoinTimeout even while parked.
	isNew bool
	seq   uint64 // join order: leader choice and listing order

	join *parkedJoin // non-nil while a JoinGroup is parked
	sync *parkedSync // non-nil while a SyncGroup is parked

	hb    Timer  // session expiry
	hbSeq uint64 // bumped on every re-arm; a stale expiry is ignored
}

// pendingMember is a member id handed out with MEMBER_ID_REQUIRED (KIP-394)
// that has not joined with it yet.
type pendingMember struct {
	timer Timer
}

// tp names one partition of a stream.
type tp struct {
	stream    string
	partition int32
}

// committed is a checkpoint this group instance wrote (or skipped as
// unchanged), used to skip writing an unchanged offset again.
type committed struct {
	offset      int64
	metadata    string
	leaderEpoch int32
	topicID     [16]byte // a topic deleted and created again has a new id (and no checkpoints)
	seq         uint64   // the commit that wrote it
}

// summary is what ListGroups reads without visiting the group's goroutine.
type summary struct {
	state        State
	protocolType string
	// consumerState, for a consumer group (consumergroup.go), is its
	// state as ListGroups shows it.
	consumerState string
}

// group is one consumer group in memory. Fields below the mutex are owned by
// the group's goroutine (run) and touched only there.
type group struct {
	c   *Coordinator
	id  string
	app string // DIS app name (disbackend.AppNameForGroup)
	log *zap.Logger

	wake chan struct{} // capacity 1: the queue is not empty
	// gone: the group moved to another node (ViewChanged removed it from
	// the coordinator's map); its goroutine drops it at its next wake.
	gone atomic.Bool

	mu      sync.Mutex
	queue   []message // guarded by mu
	closed  bool      // guarded by mu: the goroutine ended; post fails
	summary summary   // guarded by mu

	state        State
	generation   int32
	protocolType string
	protocol     string
	leader       string
	members      map[string]*member
	pending      map[string]*pendingMember
	static       map[string]string // group.instance.id → member id
	awaiting     int               // members with a parked JoinGroup
	pendingSync  map[string]bool   // members that got a JoinGroup response but sent no SyncGroup yet
	joinTimer    Timer
	syncTimer    Timer
	timerSeq     uint64 // bumped when the join or sync timer is re-armed; stale expiries are ignored
	initial      bool   // this rebalance started from Empty: the initial delay applies
	newAdded     bool   // a member joined during the initial delay
	nextSeq      uint64
	hadMembers   bool
	saved        bool // its membership is saved in the backend (persist.go)

	offsetState
	inflight int // commits validated here whose backend write has not been applied yet

	// cg, when set, makes the group a consumer group (KIP-848,
	// consumergroup.go); cgTimers are its members' timers.
	cg       *consumer.Group
	cgTimers map[string]*cgTimers
}

// offsetState remembers what a group committed, to skip writing unchanged
// offsets again. It outlives the group's stay in memory (Coordinator.offsets).
type offsetState struct {
	cache     map[tp]committed
	commitSeq uint64        // numbers commits, so a late write does not overwrite a newer cache entry
	latest    map[tp]uint64 // partition → the last commit that started writing it
}

func newGroup(c *Coordinator, id string) *group {
	app, _ := disbackend.AppNameForGroup(id) // id is never empty here
	return &group{
		c:           c,
		id:          id,
		app:         app,
		log:         c.log.With(zap.String("group", id)),
		wake:        make(chan struct{}, 1),
		members:     make(map[string]*member),
		pending:     make(map[string]*pendingMember),
		static:      make(map[string]string),
		pendingSync: make(map[string]bool),
		offsetState: c.takeOffsets(id),
	}
}

// post queues m for the group's goroutine; false if the goroutine has ended
// (the caller looks the group up again).
func (g *group) post(m message) bool {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return false
	}
	g.queue = append(g.queue, m)
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
	return true
}

// run is the group's goroutine: it runs queued messages in order until the
// group may leave memory (Empty, nothing pending) or the coordinator closes.
func (g *group) run() {
	defer g.c.wg.Done()
	for {
		select {
		case <-g.wake:
		case <-g.c.quit:
			g.shutdown()
			return
		}
		for {
			g.mu.Lock()
			q := g.queue
			g.queue = nil
			g.mu.Unlock()
			if len(q) == 0 {
				break
			}
			for i, m := range q {
				if g.gone.Load() {
					g.drop(q[i:])
					return
				}
				m.run(g)
			}
		}
		if g.gone.Load() {
			g.drop(nil)
			return
		}
		if g.cg != nil {
			g.consumerSummary()
		} else {
			g.mu.Lock()
			g.summary = summary{state: g.state, protocolType: g.protocolType}
			g.mu.Unlock()
		}
		if g.maybeRemove() {
			return
		}
	}
}

// maybeRemove drops the group from memory when it holds nothing worth
// keeping: no members, no pending member ids, no commit being written. Its
// offsets stay in the backend; a later request starts a new Empty group.
func (g *group) maybeRemove() bool {
	if g.state != Empty || len(g.members) > 0 || len(g.pending) > 0 || g.inflight > 0 || g.cg != nil {
		return false
	}
	c := g.c
	c.mu.Lock()
	defer c.mu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) > 0 {
		return false // run again first
	}
	if c.groups[g.id] == g {
		delete(c.groups, g.id)
		if len(g.cache) > 0 {
			c.offsets[g.id] = g.offsetState
		}
	}
	g.closed = true
	g.state = Dead
	g.stopTimers()
	return true
}

// shutdown answers everything waiting on the group with NOT_COORDINATOR
// (the coordinator is closing).
func (g *group) shutdown() { g.drop(nil) }

// drop ends the group in memory (the coordinator closes, or the group moved
// to another node): everything waiting on it, the messages of q not run
// yet included, is answered NOT_COORDINATOR, and its timers stop.
func (g *group) drop(q []message) {
	g.mu.Lock()
	g.closed = true
	q = append(q, g.queue...)
	g.queue = nil
	g.state = Dead
	g.summary = summary{state: Dead}
	g.mu.Unlock()
	for _, m := range q {
		if m.abort != nil {
			m.abort()
		}
	}
	for _, m := range g.members {
		g.replyJoinError(m, kerr.NotCoordinator.Code)
		g.replySyncError(m, kerr.NotCoordinator.Code)
	}
	g.stopTimers()
}

func (g *group) stopTimers() {
	for _, m := range g.members {
		if m.hb != nil {
			m.hb.Stop()
		}
	}
	for _, p := range g.pending {
		p.timer.Stop()
	}
	g.cancelJoinTimer()
	g.cancelSyncTimer()
	g.stopConsumerTimers()
}

// after runs fn on the group's goroutine after d (if the group is still in
// memory then). Timer expiry is a message like any request, so one goroutine
// owns the state.
func (g *group) after(d time.Duration, fn func()) Timer {
	return g.c.clock.AfterFunc(d, func() {
		g.post(message{run: func(*group) { fn() }})
	})
}

// newMemberID returns a member id as Kafka makes them: the client id (or the
// group.instance.id of a static member), '-', and a random UUID.
func newMemberID(clientID string, instanceID *string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	uuid := h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	prefix := clientID
	if instanceID != nil {
		prefix = *instanceID
	}
	return prefix + "-" + uuid
}

// validateMember is Kafka's ClassicGroup.validateMember: a static member's
// instance id must map to this member id (else FENCED_INSTANCE_ID, or
// UNKNOWN_MEMBER_ID if the instance is unknown), and the member must exist.
func (g *group) validateMember(memberID string, instanceID *string) int16 {
	if instanceID != nil {
		known, ok := g.static[*instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if known != memberID {
			return kerr.FencedInstanceID.Code
		}
	}
	if _, ok := g.members[memberID]; !ok {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

// sortedMembers returns the members in join order.
func (g *group) sortedMembers() []*member {
	out := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

// supportsProtocols is Kafka's ClassicGroup.supportsProtocols: an Empty group
// takes any non-empty protocol type and list; otherwise the type must match
// and one of the protocols must be supported by every member.
func (g *group) supportsProtocols(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if len(g.members) == 0 {
		return protocolType != "" && len(protocols) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		if g.supportedByAll(p.Name) {
			return true
		}
	}
	return false
}

func (g *group) supportedByAll(name string) bool {
	for _, m := range g.members {
		if !m.supports(name) {
			return false
		}
	}
	return true
}

func (m *member) supports(name string) bool {
	for _, p := range m.protocols {
		if p.Name == name {
			return true
		}
	}
	return false
}

func (m *member) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// matches reports whether protocols are the member's, names and metadata
// bytes alike, in the same order (Kafka ClassicGroupMember.matches).
func (m *member) matches(protocols []kmsg.JoinGroupRequestProtocol) bool {
	return sameProtocols(m.protocols, protocols)
}

func sameProtocols(a, b []kmsg.JoinGroupRequestProtocol) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !bytes.Equal(a[i].Metadata, b[i].Metadata) {
			return false
		}
	}
	return true
}

// selectProtocol picks the protocol by vote, as Kafka does: among the
// protocols every member supports, each member votes for the first in its
// own preference order; most votes wins (ties: the earliest member's
// preference).
func (g *group) selectProtocol() string {
	members := g.sortedMembers()
	votes := make(map[string]int)
	for _, m := range members {
		for _, p := range m.protocols {
			if g.supportedByAll(p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best, bestVotes := "", 0
	if len(members) > 0 {
		for _, p := range members[0].protocols {
			if v := votes[p.Name]; v > bestVotes {
				best, bestVotes = p.Name, v
			}
		}
	}
	return best
}

// rebalanceTimeout is the largest rebalance timeout of the members.
func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalance)
	}
	return d
}

// armHeartbeat (re)starts m's session timer for d.
func (g *group) armHeartbeat(m *member, d time.Duration) {
	if m.hb != nil {
		m.hb.Stop()
	}
	m.hbSeq++
	seq := m.hbSeq
	m.hb = g.after(d, func() {
		if g.members[m.id] != m || m.hbSeq != seq {
			return // stale: re-armed or removed since
		}
		g.expireMember(m)
	})
}

// expireMember runs when m's session timer fires (Kafka
// expireClassicGroupMemberHeartbeat): a new member is removed even while
// parked; a member parked in JoinGroup or SyncGroup is kept (its rebalance
// bounds it); any other member is removed and the group rebalances.
func (g *group) expireMember(m *member) {
	if !m.isNew && (m.join != nil || m.sync != nil) {
		return
	}
	g.log.Info("member session expired", zap.String("member_id", m.id), zap.Int32("generation", g.generation))
	g.removeMember(m, kerr.UnknownMemberID.Code)
	switch g.state {
	case Stable, CompletingRebalance:
		g.maybePrepareRebalanceOrCompleteJoin("member session expired")
	case PreparingRebalance:
		if g.allJoined() {
			g.completeJoin()
		}
	}
}

// removeMember drops m, answering a parked JoinGroup or SyncGroup of it with
// code. It does not rebalance.
func (g *group) removeMember(m *member, code int16) {
	g.replyJoinError(m, code)
	g.replySyncError(m, code)
	if m.hb != nil {
		m.hb.Stop()
	}
	delete(g.members, m.id)
	delete(g.pendingSync, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
		if rest := g.sortedMembers(); len(rest) > 0 {
			g.leader = rest[0].id
		}
	}
}

func (g *group) replyJoinError(m *member, code int16) {
	if m.join == nil {
		return
	}
	p := m.join
	m.join = nil
	g.awaiting--
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = p.version
	r.ErrorCode = code
	r.Generation = -1
	if code != kerr.UnknownMemberID.Code {
		r.MemberID = m.id
	}
	p.reply(r)
}

func (g *group) replySyncError(m *member, code int16) {
	if m.sync == nil {
		return
	}
	p := m.sync
	m.sync = nil
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = p.version
	r.ErrorCode = code
	p.reply(r)
}

// becameEmpty records when a group that had members lost its last one, for
// offset retention.
func (g *group) becameEmpty() {
	g.state = Empty
	g.protocol = ""
	g.saveEmpty()
	if !g.hadMembers {
		return
	}
	g.hadMembers = false
	c := g.c
	c.mu.Lock()
	if c.groups[g.id] == g { // not moved away meanwhile (ViewChanged)
		c.emptySince[g.id] = c.clock.Now()
	}
	c.mu.Unlock()
	g.log.Info("group is empty", zap.Int32("generation", g.generation))
}
