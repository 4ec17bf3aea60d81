package groupcoord

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"

	"github.com/disgw/disgw/disbackend"
)

// owners places groups on nodes for the tests of several nodes: a group
// not set is node 0's.
type owners struct {
	mu sync.Mutex
	m  map[string]int
}

func (o *owners) set(group string, node int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[string]int{}
	}
	o.m[group] = node
}

func (o *owners) owns(node int) func(string) bool {
	return func(group string) bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.m[group] == node
	}
}

// readerApps is statesApps that reads one group's state
// (disbackend.GroupStateReader), counting the reads; while gate is set,
// reads of states wait for it.
type readerApps struct {
	*statesApps
	gmu   sync.Mutex
	gate  chan struct{}
	reads int
}

func (a *readerApps) wait(ctx context.Context) error {
	a.gmu.Lock()
	gate := a.gate
	a.gmu.Unlock()
	if gate == nil {
		return nil
	}
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *readerApps) GroupState(ctx context.Context, group string) ([]byte, error) {
	if err := a.wait(ctx); err != nil {
		return nil, err
	}
	a.gmu.Lock()
	a.reads++
	a.gmu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.states[group], nil
}

func (a *readerApps) GroupStates(ctx context.Context) (map[string][]byte, error) {
	if err := a.wait(ctx); err != nil {
		return nil, err
	}
	return a.statesApps.GroupStates(ctx)
}

// close arms the gate (reads wait) and returns what opens it.
func (a *readerApps) close() func() {
	a.gmu.Lock()
	defer a.gmu.Unlock()
	a.gate = make(chan struct{})
	gate := a.gate
	return func() {
		a.gmu.Lock()
		a.gate = nil
		a.gmu.Unlock()
		close(gate)
	}
}

var _ disbackend.GroupStateReader = (*readerApps)(nil)

// clusterNode is node n of several: a harness whose coordinator owns the
// groups o places on n, over apps (shared by the nodes) and clock.
func clusterNode(t *testing.T, clock *fakeClock, apps *readerApps, o *owners, n int, mutate ...func(*Config)) *harness {
	t.Helper()
	cfg := Config{Clock: clock, Logger: zaptest.NewLogger(t).Named("node" + string(rune('0'+n))),
		InitialRebalanceDelay: testDelay, Owns: o.owns(n)}
	for _, m := range mutate {
		m(&cfg)
	}
	h := &harness{t: t, clock: clock, apps: apps.memApps, ctx: context.Background()}
	h.c = New(cfg, apps, memTopics{})
	t.Cleanup(h.c.Close)
	select {
	case <-h.c.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("coordinator did not load")
	}
	return h
}

func newReaderApps(clock Clock) *readerApps {
	return &readerApps{statesApps: &statesApps{memApps: newMemApps(clock), states: map[string][]byte{}}}
}

// inMemory reports whether the group is in the coordinator's memory.
func (h *harness) inMemory(id string) bool {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return h.c.groups[id] != nil
}

// until retries f while it answers COORDINATOR_LOAD_IN_PROGRESS and
// returns its first other answer.
func until(t *testing.T, f func() int16) int16 {
	t.Helper()
	for range 5000 {
		if code := f(); code != kerr.CoordinatorLoadInProgress.Code {
			return code
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("still COORDINATOR_LOAD_IN_PROGRESS")
	return 0
}

// load has the coordinator load groups (their first request answers
// COORDINATOR_LOAD_IN_PROGRESS until it holds them).
func (h *harness) load(ids ...string) {
	h.t.Helper()
	for _, id := range ids {
		until(h.t, func() int16 { return h.describeCode(id) })
	}
}

// eventuallyListed waits until ListGroups v5 answers want (a group's
// goroutine updates what ListGroups reads after it ran its messages).
func (h *harness) eventuallyListed(what string, want map[string]string) {
	h.t.Helper()
	var got map[string]string
	for range 5000 {
		got = h.listed(&kmsg.ListGroupsRequest{Version: 5})
		same := len(got) == len(want)
		for k, v := range want {
			same = same && got[k] == v
		}
		if same {
			return
		}
		time.Sleep(time.Millisecond)
	}
	h.t.Fatalf("%s: %v, want %v", what, got, want)
}

// describeCode is DescribeGroups' error code for one group.
func (h *harness) describeCode(id string) int16 {
	return h.c.DescribeGroups(h.ctx, &kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{id}}).Groups[0].ErrorCode
}

// TestGroupElsewhereNotCoordinator: every group request for a group
// another node coordinates answers NOT_COORDINATOR, as Kafka's coordinator
// answers for a group it does not own (OffsetFetch and DescribeGroups
// included), and writes nothing; ListGroups lists only the groups this
// node coordinates.
func TestGroupElsewhereNotCoordinator(t *testing.T) {
	clock := newFakeClock()
	apps := newReaderApps(clock)
	o := &owners{}
	h := clusterNode(t, clock, apps, o, 0)
	if code := until(t, func() int16 { return commitCode(h, "mine", "", -1) }); code != 0 {
		t.Fatalf("commit to an owned group: %d", code)
	}
	h.load("mine-stable")
	h.stableGroup("mine-stable", 1)
	if _, err := apps.CreateApp(h.ctx, disbackend.App{Name: "other-app", GroupID: "other"}); err != nil {
		t.Fatal(err)
	}
	o.set("other", 1)
	h.c.ViewChanged()
	commits := apps.commitCalls()

	nc := kerr.NotCoordinator.Code
	check := func(api string, code int16) {
		t.Helper()
		if code != nc {
			t.Errorf("%s for a group elsewhere: error %d, want NOT_COORDINATOR", api, code)
		}
	}
	check("JoinGroup", h.c.JoinGroup(h.ctx, Client{ID: "c"}, joinReq{group: "other"}.kmsg()).ErrorCode)
	check("JoinGroup with a member id", h.c.JoinGroup(h.ctx, Client{ID: "c"}, joinReq{group: "other", member: "m"}.kmsg()).ErrorCode)
	sreq := kmsg.NewPtrSyncGroupRequest()
	sreq.Version = 5
	sreq.Group, sreq.MemberID, sreq.Generation = "other", "m", 1
	pt, p := "consumer", "range"
	sreq.ProtocolType, sreq.Protocol = &pt, &p
	check("SyncGroup", h.c.SyncGroup(h.ctx, sreq).ErrorCode)
	check("Heartbeat", h.heartbeat("other", "m", 1, nil))
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = "m"
	check("LeaveGroup", h.c.LeaveGroup(h.ctx, "other", []kmsg.LeaveGroupRequestMember{lm}).ErrorCode)
	check("OffsetCommit", commitCode(h, "other", "", -1))
	check("OffsetFetch", h.fetch("other", nil).ErrorCode)
	check("OffsetFetch of topics", h.fetch("other", map[string][]int32{"t1": {0}}).ErrorCode)
	check("DescribeGroups", h.describeCode("other"))
	check("DeleteGroups", h.c.DeleteGroups(h.ctx, &kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"other"}}).Groups[0].ErrorCode)
	oreq := kmsg.NewPtrOffsetDeleteRequest()
	oreq.Group = "other"
	rt := kmsg.NewOffsetDeleteRequestTopic()
	rt.Topic = "t1"
	rt.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}
	oreq.Topics = append(oreq.Topics, rt)
	check("OffsetDelete", h.c.OffsetDelete(h.ctx, oreq).ErrorCode)
	if apps.commitCalls() != commits || h.inMemory("other") {
		t.Fatal("a request for a group elsewhere wrote offsets or brought the group into memory")
	}
	if _, err := apps.DescribeApp(h.ctx, "other-app"); err != nil {
		t.Fatalf("the app of a group elsewhere: %v", err)
	}
	// The owned groups are served as before.
	if code := commitCode(h, "mine", "", -1); code != 0 {
		t.Fatalf("commit to an owned group: %d", code)
	}
	h.eventuallyListed("ListGroups", map[string]string{"mine": "Empty/", "mine-stable": "Stable/consumer"})
}

// TestGroupMovesAway: when a group moves to another node it leaves memory
// at once: a parked JoinGroup and a parked SyncGroup are answered
// NOT_COORDINATOR, so are its members' next requests. When it comes back
// it is loaded from the saved state (its Stable generation), and its
// offsets cache starts empty (an unchanged offset is written again).
func TestGroupMovesAway(t *testing.T) {
	clock := newFakeClock()
	apps := newReaderApps(clock)
	o := &owners{}
	h := clusterNode(t, clock, apps, o, 0)
	h.load("joining", "syncing")
	ids, gen := h.stableGroup("joining", 2)
	if code := commitCode(h, "joining", ids[0], gen); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	if code := commitCode(h, "joining", ids[0], gen); code != 0 || apps.commitCalls() != 1 {
		t.Fatalf("commit of an unchanged offset: %d, %d writes; want it skipped", code, apps.commitCalls())
	}
	// The leader rejoins: its JoinGroup waits for the other member.
	var leader string
	h.inspect("joining", func(g *group) { leader = g.leader })
	join := h.joinAsync(joinReq{group: "joining", member: leader})
	h.parked(join)

	// "syncing": the join phase is over; a follower's SyncGroup waits for
	// the leader's.
	var chs []<-chan *kmsg.JoinGroupResponse
	var sids []string
	for range 2 {
		id, ch := h.newMember(joinReq{group: "syncing"})
		sids, chs = append(sids, id), append(chs, ch)
	}
	h.advanceUntilAnswered(chs[0])
	var follower string
	var sgen int32
	for i, ch := range chs {
		r := h.recvJoin(ch)
		if r.LeaderID != sids[i] {
			follower = sids[i]
		}
		sgen = r.Generation
	}
	sync := h.syncAsync("syncing", follower, sgen, nil)
	h.flush()
	if len(sync) > 0 {
		t.Fatal("the follower's SyncGroup was answered before the leader's")
	}

	o.set("joining", 1)
	o.set("syncing", 1)
	h.c.ViewChanged()
	if r := h.recvJoin(join); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("parked JoinGroup of a group that moved away: error %d, want NOT_COORDINATOR", r.ErrorCode)
	}
	if r := h.recvSync(sync); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("parked SyncGroup of a group that moved away: error %d, want NOT_COORDINATOR", r.ErrorCode)
	}
	if h.inMemory("joining") || h.inMemory("syncing") {
		t.Fatal("a group that moved away is still in memory")
	}
	if code := h.heartbeat("joining", ids[1], gen, nil); code != kerr.NotCoordinator.Code {
		t.Fatalf("heartbeat after the group moved away: error %d, want NOT_COORDINATOR", code)
	}
	if code := commitCode(h, "joining", ids[0], gen); code != kerr.NotCoordinator.Code {
		t.Fatalf("commit after the group moved away: error %d, want NOT_COORDINATOR", code)
	}
	h.c.mu.Lock()
	_, held := h.c.held["joining"]
	_, cached := h.c.offsets["joining"]
	h.c.mu.Unlock()
	if held || cached {
		t.Fatal("what the node kept of a group that moved away is not forgotten")
	}

	// Back: loaded from the state saved when it was Stable.
	o.set("joining", 0)
	h.c.ViewChanged()
	if code := until(t, func() int16 { return h.heartbeat("joining", ids[1], gen, nil) }); code != 0 {
		t.Fatalf("heartbeat after the group came back: error %d", code)
	}
	if code := commitCode(h, "joining", ids[0], gen); code != 0 || apps.commitCalls() != 2 {
		t.Fatalf("commit after the group came back: %d, %d writes; want the offset written again (empty cache)", code, apps.commitCalls())
	}
}

// TestGroupMovesHere: a group another node made Stable moves here: until
// its saved state is loaded its requests answer
// COORDINATOR_LOAD_IN_PROGRESS; then its members heartbeat, sync and
// commit with the generation they have, without a rebalance, and the old
// node answers NOT_COORDINATOR. Members that do not come expire here.
func TestGroupMovesHere(t *testing.T) {
	clock := newFakeClock()
	apps := newReaderApps(clock)
	o := &owners{}
	a := clusterNode(t, clock, apps, o, 0)
	b := clusterNode(t, clock, apps, o, 1)
	a.load("g")
	ids, gen := a.stableGroup("g", 2)
	if code := commitCode(a, "g", ids[0], gen); code != 0 {
		t.Fatalf("commit: %d", code)
	}

	open := apps.close()
	o.set("g", 1)
	a.c.ViewChanged()
	b.c.ViewChanged()
	if code := a.heartbeat("g", ids[0], gen, nil); code != kerr.NotCoordinator.Code {
		t.Fatalf("old coordinator: heartbeat error %d, want NOT_COORDINATOR", code)
	}
	for _, code := range []int16{b.heartbeat("g", ids[0], gen, nil), commitCode(b, "g", ids[0], gen), b.describeCode("g")} {
		if code != kerr.CoordinatorLoadInProgress.Code {
			t.Fatalf("new coordinator while loading: error %d, want COORDINATOR_LOAD_IN_PROGRESS", code)
		}
	}
	open()
	if code := until(t, func() int16 { return b.heartbeat("g", ids[0], gen, nil) }); code != 0 {
		t.Fatalf("heartbeat at the new coordinator: error %d", code)
	}
	if r := b.recvSync(b.syncAsync("g", ids[1], gen, nil)); r.ErrorCode != 0 || string(r.MemberAssignment) != "assignment-"+ids[1] {
		t.Fatalf("SyncGroup at the new coordinator: %+v", r)
	}
	if code := commitCode(b, "g", ids[1], gen); code != 0 {
		t.Fatalf("commit at the new coordinator: error %d", code)
	}
	if b.generation("g") != gen {
		t.Fatalf("generation %d at the new coordinator, want %d", b.generation("g"), gen)
	}
	// Only ids[0] goes on: ids[1]'s session ends at the new coordinator.
	for range 4 {
		b.advance(testSession / 3)
		b.heartbeat("g", ids[0], gen, nil)
	}
	if s := b.state("g"); s != PreparingRebalance {
		t.Fatalf("a member that did not come: %v, want PreparingRebalance", s)
	}
}

// TestGainedGroupsLoadedAtViewChange: ViewChanged loads the gained groups
// that have a saved state without waiting for a request (ListGroups shows
// them); the restore at start takes only the owned groups.
func TestGainedGroupsLoadedAtViewChange(t *testing.T) {
	clock := newFakeClock()
	apps := newReaderApps(clock)
	o := &owners{}
	a := clusterNode(t, clock, apps, o, 0)
	a.load("g1", "g2")
	a.stableGroup("g1", 1)
	a.stableGroup("g2", 1)

	o.set("g2", 1)
	b := clusterNode(t, clock, apps, o, 1) // starts: restores only g2
	if !b.inMemory("g2") || b.inMemory("g1") {
		t.Fatal("the restore at start did not take exactly the owned groups")
	}
	apps.gmu.Lock()
	reads0 := apps.reads
	apps.gmu.Unlock()
	o.set("g1", 1)
	a.c.ViewChanged()
	b.c.ViewChanged()
	for i := 0; i < 5000 && !b.inMemory("g1"); i++ {
		time.Sleep(time.Millisecond)
	}
	b.eventuallyListed("new coordinator", map[string]string{"g1": "Stable/consumer", "g2": "Stable/consumer"})
	sameListing(t, "old coordinator", a.listed(&kmsg.ListGroupsRequest{Version: 5}), nil)
	apps.gmu.Lock()
	reads := apps.reads
	apps.gmu.Unlock()
	if reads != reads0 {
		t.Fatalf("%d reads of single groups; want the loads of ViewChanged only", reads-reads0)
	}
}

// TestRetentionOwnedGroupsOnly: the offsets retention sweep deletes the
// expired offsets of the groups this node coordinates only.
func TestRetentionOwnedGroupsOnly(t *testing.T) {
	clock := newFakeClock()
	apps := newReaderApps(clock)
	o := &owners{}
	h := clusterNode(t, clock, apps, o, 0, func(c *Config) {
		c.OffsetsRetention, c.RetentionCheckInterval = time.Hour, 100*time.Hour // the test sweeps
	})
	for _, g := range []string{"mine", "other"} {
		if code := until(t, func() int16 { return commitCode(h, g, "", -1) }); code != 0 {
			t.Fatalf("commit %s: %d", g, code)
		}
	}
	o.set("other", 1)
	h.c.ViewChanged()
	clock.Advance(2 * time.Hour)
	deleted, err := h.c.ExpireOffsets(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(deleted)
	if len(deleted) != 1 || deleted[0] != "mine" {
		t.Fatalf("deleted %v, want [mine]", deleted)
	}
	apps.mu.Lock()
	n := len(apps.apps)
	apps.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d apps left, want the other node's group's", n)
	}
}

// TestEmptyGroupMovesWithItsType: a group emptied at one node is Empty
// with its protocol type at the node it moves to (its saved state).
func TestEmptyGroupMovesWithItsType(t *testing.T) {
	clock := newFakeClock()
	apps := newReaderApps(clock)
	o := &owners{}
	a := clusterNode(t, clock, apps, o, 0)
	b := clusterNode(t, clock, apps, o, 1)
	a.load("g")
	ids, _ := a.stableGroup("g", 1)
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = ids[0]
	a.c.LeaveGroup(a.ctx, "g", []kmsg.LeaveGroupRequestMember{lm})
	a.flush()
	apps.mu.Lock()
	var sg savedGroup
	err := json.Unmarshal(apps.states["g"], &sg)
	apps.mu.Unlock()
	if err != nil || len(sg.Members) != 0 {
		t.Fatalf("saved state of the emptied group: %+v, %v", sg, err)
	}
	o.set("g", 1)
	a.c.ViewChanged()
	b.c.ViewChanged()
	if code := until(t, func() int16 { return b.describeCode("g") }); code != 0 {
		t.Fatalf("DescribeGroups at the new coordinator: %d", code)
	}
	dg := b.c.DescribeGroups(b.ctx, &kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{"g"}}).Groups[0]
	if dg.State != "Empty" || dg.ProtocolType != "consumer" {
		t.Fatalf("an emptied group that moved: %s/%s, want Empty/consumer", dg.State, dg.ProtocolType)
	}
}

// TestSyncGroupSaveRefused: a rebalance whose assignment the backend
// refuses to save because this node no longer coordinates the group (a
// node paused past its lease answers from a stale view) hands the
// assignment to nobody: every parked SyncGroup, the leader's included, is
// answered NOT_COORDINATOR and the group rebalances, as Kafka's
// coordinator does when its write to __consumer_offsets is refused. Any
// other failure to save leaves the group Stable, as before.
func TestSyncGroupSaveRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		code  int16
		state State
	}{
		{"not coordinator", fmt.Errorf("fence: %w", disbackend.ErrNotCoordinator), kerr.NotCoordinator.Code, PreparingRebalance},
		{"other failure", errTest, 0, Stable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			apps := &statesApps{memApps: h.apps, states: map[string][]byte{}}
			h.restart(apps)
			id0, ch0 := h.newMember(joinReq{group: "g"})
			id1, ch1 := h.newMember(joinReq{group: "g"})
			h.advanceUntilAnswered(ch0)
			r0, r1 := h.recvJoin(ch0), h.recvJoin(ch1)
			if r0.ErrorCode != 0 || r1.ErrorCode != 0 {
				t.Fatalf("joins: %d, %d", r0.ErrorCode, r1.ErrorCode)
			}
			leader, follower := id0, id1
			if r0.LeaderID == id1 {
				leader, follower = id1, id0
			}
			apps.mu.Lock()
			apps.refuse = tc.err
			apps.mu.Unlock()
			fch := h.syncAsync("g", follower, r0.Generation, nil)
			lch := h.syncAsync("g", leader, r0.Generation, map[string]string{id0: "a0", id1: "a1"})
			for who, ch := range map[string]<-chan *kmsg.SyncGroupResponse{"leader": lch, "follower": fch} {
				r := h.recvSync(ch)
				if r.ErrorCode != tc.code {
					t.Errorf("%s's SyncGroup: error %d, want %d", who, r.ErrorCode, tc.code)
				}
				if tc.code != 0 && len(r.MemberAssignment) != 0 {
					t.Errorf("%s's SyncGroup handed out %q", who, r.MemberAssignment)
				}
			}
			if s := h.state("g"); s != tc.state {
				t.Fatalf("state %v, want %v", s, tc.state)
			}
			if apps.saved("g") {
				t.Fatal("a refused state was saved")
			}
		})
	}
}
