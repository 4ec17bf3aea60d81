package groupcoord

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/disgw/disgw/disbackend"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a Clock that moves only when told to. Due timers run in
// Advance's goroutine, in time order.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	at      time.Time
	f       func()
	stopped bool
	fired   bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.stopped || t.fired {
		return false
	}
	t.stopped = true
	return true
}

// Advance moves the clock by d, running every timer due on the way.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	for {
		var next *fakeTimer
		live := c.timers[:0]
		for _, t := range c.timers {
			if t.stopped || t.fired {
				continue
			}
			live = append(live, t)
			if !t.at.After(target) && (next == nil || t.at.Before(next.at)) {
				next = t
			}
		}
		c.timers = live
		if next == nil {
			break
		}
		next.fired = true
		if next.at.After(c.now) {
			c.now = next.at
		}
		c.mu.Unlock()
		next.f()
		c.mu.Lock()
	}
	c.now = target
	c.mu.Unlock()
}

// memApps is an in-memory disbackend.Apps with call counting and fault
// injection.
type memApps struct {
	mu       sync.Mutex
	clock    Clock
	apps     map[string]disbackend.App
	cps      map[string]map[tp]disbackend.Checkpoint
	commits  int           // CommitCheckpoints calls
	listGate chan struct{} // if set, ListApps waits for it
	failList error
}

func newMemApps(clock Clock) *memApps {
	return &memApps{clock: clock, apps: map[string]disbackend.App{}, cps: map[string]map[tp]disbackend.Checkpoint{}}
}

func (a *memApps) CreateApp(_ context.Context, app disbackend.App) (disbackend.App, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if old, ok := a.apps[app.Name]; ok {
		if old.GroupID == app.GroupID {
			return old, disbackend.ErrAppExists
		}
		return disbackend.App{}, disbackend.ErrNameCollision
	}
	app.CreatedAt = a.clock.Now()
	a.apps[app.Name] = app
	a.cps[app.Name] = map[tp]disbackend.Checkpoint{}
	return app, nil
}

func (a *memApps) DeleteApp(_ context.Context, name string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.apps[name]; !ok {
		return disbackend.ErrAppNotFound
	}
	delete(a.apps, name)
	delete(a.cps, name)
	return nil
}

func (a *memApps) DescribeApp(_ context.Context, name string) (disbackend.App, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	app, ok := a.apps[name]
	if !ok {
		return disbackend.App{}, disbackend.ErrAppNotFound
	}
	return app, nil
}

func (a *memApps) ListApps(ctx context.Context) ([]disbackend.App, error) {
	a.mu.Lock()
	gate, fail := a.listGate, a.failList
	a.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if fail != nil {
		return nil, fail
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []disbackend.App
	for _, app := range a.apps {
		out = append(out, app)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (a *memApps) CommitCheckpoints(_ context.Context, app string, cps []disbackend.Checkpoint) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	m, ok := a.cps[app]
	if !ok {
		return disbackend.ErrAppNotFound
	}
	a.commits++
	for _, cp := range cps {
		if utf8.RuneCountInString(cp.Metadata) > disbackend.MaxCheckpointMetadataLen {
			return disbackend.ErrInvalidConfig
		}
	}
	for _, cp := range cps {
		m[tp{cp.Stream, cp.Partition}] = cp
	}
	return nil
}

func (a *memApps) Checkpoints(_ context.Context, app, stream string) ([]disbackend.Checkpoint, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m, ok := a.cps[app]
	if !ok {
		return nil, disbackend.ErrAppNotFound
	}
	var out []disbackend.Checkpoint
	for k, cp := range m {
		if stream == "" || k.stream == stream {
			out = append(out, cp)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Stream != out[j].Stream {
			return out[i].Stream < out[j].Stream
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

func (a *memApps) DeleteCheckpoints(_ context.Context, app, stream string, partitions []int32) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	m, ok := a.cps[app]
	if !ok {
		return disbackend.ErrAppNotFound
	}
	for k := range m {
		if k.stream != stream {
			continue
		}
		if partitions == nil {
			delete(m, k)
			continue
		}
		for _, p := range partitions {
			if k.partition == p {
				delete(m, k)
			}
		}
	}
	return nil
}

func (a *memApps) commitCalls() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.commits
}

var _ disbackend.Apps = (*memApps)(nil)

// memTopics knows topics "t1" (stream t1, 4 partitions) and "a.b" (stream
// a_b, 2 partitions).
type memTopics struct{}

var testTopics = []TopicInfo{
	{Topic: "t1", Stream: "t1", ID: [16]byte{1}, Partitions: 4},
	{Topic: "a.b", Stream: "a_b", ID: [16]byte{2}, Partitions: 2},
}

func (memTopics) Topic(_ context.Context, name string) (TopicInfo, bool) {
	for _, t := range testTopics {
		if t.Topic == name {
			return t, true
		}
	}
	return TopicInfo{}, false
}

func (memTopics) Stream(_ context.Context, stream string) (TopicInfo, bool) {
	for _, t := range testTopics {
		if t.Stream == stream {
			return t, true
		}
	}
	return TopicInfo{}, false
}

// harness is a coordinator on a fake clock and in-memory apps.
type harness struct {
	t     *testing.T
	c     *Coordinator
	clock *fakeClock
	apps  *memApps
	ctx   context.Context
}

const (
	testDelay     = 3 * time.Second
	testSession   = 10 * time.Second
	testRebalance = 30 * time.Second
)

func newHarness(t *testing.T, mutate ...func(*Config)) *harness {
	t.Helper()
	clock := newFakeClock()
	apps := newMemApps(clock)
	cfg := Config{Clock: clock, Logger: zaptest.NewLogger(t), InitialRebalanceDelay: testDelay}
	for _, m := range mutate {
		m(&cfg)
	}
	h := &harness{t: t, clock: clock, apps: apps, ctx: context.Background()}
	h.c = New(cfg, apps, memTopics{})
	t.Cleanup(h.c.Close)
	select {
	case <-h.c.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("coordinator did not load")
	}
	return h
}

// flush waits until every group goroutine has run what was posted so far
// (timer expiries included).
func (h *harness) flush() {
	h.t.Helper()
	for range 3 { // messages may post timers whose expiry posts again
		h.c.mu.Lock()
		var gs []*group
		for _, g := range h.c.groups {
			gs = append(gs, g)
		}
		h.c.mu.Unlock()
		for _, g := range gs {
			done := make(chan struct{})
			if g.post(message{run: func(*group) { close(done) }, abort: func() { close(done) }}) {
				<-done
			}
		}
	}
}

// advance moves the fake clock once the groups are idle, then waits for the
// expiries it caused.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	h.flush()
	h.clock.Advance(d)
	h.flush()
}

// inspect runs fn on the group's goroutine; false if it is not in memory.
func (h *harness) inspect(id string, fn func(g *group)) bool {
	h.t.Helper()
	done := make(chan struct{})
	found, err := h.c.send(id, false, func(g *group) { fn(g); close(done) }, func() { close(done) })
	if err != nil || !found {
		return false
	}
	<-done
	return true
}

// waitDead waits until the group has left memory: its goroutine removes
// it after its last message ran, so right after flush it may still be
// there, Empty.
func (h *harness) waitDead(id string) State {
	h.t.Helper()
	s := h.state(id)
	for i := 0; i < 1000 && s != Dead; i++ {
		time.Sleep(time.Millisecond)
		s = h.state(id)
	}
	return s
}

func (h *harness) state(id string) State {
	h.t.Helper()
	s := Dead
	h.inspect(id, func(g *group) { s = g.state })
	return s
}

// describe is the group as DescribeGroups shows it.
func (h *harness) describe(id string) kmsg.DescribeGroupsResponseGroup {
	h.t.Helper()
	var dg kmsg.DescribeGroupsResponseGroup
	h.inspect(id, func(g *group) { dg = g.describe() })
	return dg
}

func (h *harness) generation(id string) int32 {
	h.t.Helper()
	var gen int32 = -1
	h.inspect(id, func(g *group) { gen = g.generation })
	return gen
}

type joinReq struct {
	group, member string
	instance      *string
	version       int16
	protocolType  string
	protocols     []kmsg.JoinGroupRequestProtocol
	session       time.Duration
	rebalance     time.Duration
}

func protos(nameMeta ...string) []kmsg.JoinGroupRequestProtocol {
	var out []kmsg.JoinGroupRequestProtocol
	for i := 0; i+1 < len(nameMeta); i += 2 {
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = nameMeta[i], []byte(nameMeta[i+1])
		out = append(out, p)
	}
	return out
}

func (j joinReq) kmsg() *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = j.version
	if r.Version == 0 {
		r.Version = 9
	}
	r.Group, r.MemberID, r.InstanceID = j.group, j.member, j.instance
	r.ProtocolType = j.protocolType
	if r.ProtocolType == "" {
		r.ProtocolType = "consumer"
	}
	r.Protocols = j.protocols
	if r.Protocols == nil {
		r.Protocols = protos("range", "meta-"+j.member)
	}
	s, rb := j.session, j.rebalance
	if s == 0 {
		s = testSession
	}
	if rb == 0 {
		rb = testRebalance
	}
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = int32(s/time.Millisecond), int32(rb/time.Millisecond)
	return r
}

// joinAsync posts a JoinGroup (after the public API's checks) and returns
// where its answer will arrive; the request is queued when it returns.
func (h *harness) joinAsync(j joinReq) <-chan *kmsg.JoinGroupResponse {
	h.t.Helper()
	req := j.kmsg()
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	if code := h.c.notReady(); code != 0 {
		h.t.Fatalf("not ready: %d", code)
	}
	found, err := h.c.send(req.Group, req.MemberID == "", func(g *group) {
		g.join(Client{ID: "client", Host: "/127.0.0.1", Topics: cgTopics{}}, req, func(r *kmsg.JoinGroupResponse) { ch <- r })
	}, nil)
	if err != nil || !found {
		h.t.Fatalf("join %+v: found %v err %v", j, found, err)
	}
	return ch
}

// newMember joins with MEMBER_ID_REQUIRED and returns the member id and the
// parked second join.
func (h *harness) newMember(j joinReq) (string, <-chan *kmsg.JoinGroupResponse) {
	h.t.Helper()
	r := h.recvJoin(h.joinAsync(j))
	if r.ErrorCode != kerr.MemberIDRequired.Code {
		h.t.Fatalf("first join: error %d, want MEMBER_ID_REQUIRED", r.ErrorCode)
	}
	j.member = r.MemberID
	return r.MemberID, h.joinAsync(j)
}

// advanceUntilAnswered advances the clock by the initial delay until ch has
// its answer (each member that joined during a delay extends it).
func (h *harness) advanceUntilAnswered(ch <-chan *kmsg.JoinGroupResponse) {
	h.t.Helper()
	for range 50 {
		h.advance(testDelay)
		if len(ch) > 0 {
			return
		}
	}
	h.t.Fatal("the join phase never ended")
}

func (h *harness) recvJoin(ch <-chan *kmsg.JoinGroupResponse) *kmsg.JoinGroupResponse {
	h.t.Helper()
	h.flush()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		h.t.Fatal("no JoinGroup answer")
		return nil
	}
}

func (h *harness) parked(ch <-chan *kmsg.JoinGroupResponse) {
	h.t.Helper()
	h.flush()
	select {
	case r := <-ch:
		h.t.Fatalf("JoinGroup answered while it should wait: %+v", r)
	default:
	}
}

func (h *harness) syncAsync(gid, member string, gen int32, assign map[string]string) <-chan *kmsg.SyncGroupResponse {
	h.t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.Generation = gid, member, gen
	for id, a := range assign {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = id, []byte(a)
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	found, err := h.c.send(gid, false, func(g *group) { g.syncGroup(req, func(r *kmsg.SyncGroupResponse) { ch <- r }) }, nil)
	if err != nil || !found {
		h.t.Fatalf("sync: found %v err %v", found, err)
	}
	return ch
}

func (h *harness) recvSync(ch <-chan *kmsg.SyncGroupResponse) *kmsg.SyncGroupResponse {
	h.t.Helper()
	h.flush()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		h.t.Fatal("no SyncGroup answer")
		return nil
	}
}

func (h *harness) heartbeat(group, member string, gen int32, instance *string) int16 {
	h.t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.MemberID, req.Generation, req.InstanceID = group, member, gen, instance
	return h.c.Heartbeat(h.ctx, req).ErrorCode
}

// stableGroup brings members (by client name) into a Stable group and
// returns their member ids in join order and the generation.
func (h *harness) stableGroup(group string, n int) ([]string, int32) {
	h.t.Helper()
	var ids []string
	var chs []<-chan *kmsg.JoinGroupResponse
	for range n {
		id, ch := h.newMember(joinReq{group: group})
		ids = append(ids, id)
		chs = append(chs, ch)
	}
	h.advanceUntilAnswered(chs[0])
	var gen int32
	var leader string
	for _, ch := range chs {
		r := h.recvJoin(ch)
		if r.ErrorCode != 0 {
			h.t.Fatalf("join: error %d", r.ErrorCode)
		}
		gen, leader = r.Generation, r.LeaderID
	}
	assign := map[string]string{}
	for _, id := range ids {
		assign[id] = "assignment-" + id
	}
	var syncs []<-chan *kmsg.SyncGroupResponse
	for _, id := range ids {
		if id != leader {
			syncs = append(syncs, h.syncAsync(group, id, gen, nil))
		}
	}
	syncs = append(syncs, h.syncAsync(group, leader, gen, assign))
	for _, ch := range syncs {
		if r := h.recvSync(ch); r.ErrorCode != 0 {
			h.t.Fatalf("sync: error %d", r.ErrorCode)
		}
	}
	if s := h.state(group); s != Stable {
		h.t.Fatalf("state %v, want Stable", s)
	}
	return ids, gen
}

var errTest = errors.New("test failure")
