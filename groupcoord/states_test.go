package groupcoord

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{Empty: "Empty", PreparingRebalance: "PreparingRebalance",
		CompletingRebalance: "CompletingRebalance", Stable: "Stable", Dead: "Dead", State(42): "Unknown"} {
		if got := s.String(); got != want {
			t.Errorf("%d: %q, want %q", s, got, want)
		}
	}
}

// TestJoinValidation: the answers a JoinGroup gets before it can park.
func TestJoinValidation(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MinSessionTimeout, c.MaxSessionTimeout = 6*time.Second, 30*time.Minute })
	tests := []struct {
		name string
		req  joinReq
		want int16
	}{
		{"empty group id", joinReq{group: ""}, kerr.InvalidGroupID.Code},
		{"session below min", joinReq{group: "g", session: 5 * time.Second}, kerr.InvalidSessionTimeout.Code},
		{"session above max", joinReq{group: "g", session: 31 * time.Minute}, kerr.InvalidSessionTimeout.Code},
		{"known member id, unknown group", joinReq{group: "nope", member: "m-1"}, kerr.UnknownMemberID.Code},
		{"no protocols", joinReq{group: "g2", protocols: []kmsg.JoinGroupRequestProtocol{}}, kerr.InconsistentGroupProtocol.Code},
		{"v4 new member", joinReq{group: "g3", version: 4}, kerr.MemberIDRequired.Code},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req.kmsg()
			if tc.req.protocols != nil {
				req.Protocols = tc.req.protocols
			}
			r := h.c.JoinGroup(h.ctx, Client{ID: "c"}, req)
			if r.ErrorCode != tc.want {
				t.Fatalf("error %d, want %d", r.ErrorCode, tc.want)
			}
			if tc.want == kerr.MemberIDRequired.Code && r.MemberID == "" {
				t.Fatal("MEMBER_ID_REQUIRED without a member id")
			}
		})
	}
}

// TestInitialRebalance: Empty → PreparingRebalance (initial delay, extended
// by each member that joins meanwhile) → CompletingRebalance → Stable.
func TestInitialRebalance(t *testing.T) {
	h := newHarness(t)
	a, chA := h.newMember(joinReq{group: "g", protocols: protos("range", "meta-a")})
	h.parked(chA)
	if s := h.state("g"); s != PreparingRebalance {
		t.Fatalf("state %v, want PreparingRebalance", s)
	}
	h.advance(testDelay - time.Millisecond)
	h.parked(chA)
	b, chB := h.newMember(joinReq{group: "g", protocols: protos("range", "meta-b")})
	h.advance(time.Millisecond) // the first delay ends; b's arrival extends it
	h.parked(chA)
	h.parked(chB)
	h.advance(testDelay)
	ra, rb := h.recvJoin(chA), h.recvJoin(chB)
	if ra.ErrorCode != 0 || rb.ErrorCode != 0 {
		t.Fatalf("errors %d %d", ra.ErrorCode, rb.ErrorCode)
	}
	if ra.Generation != 1 || rb.Generation != 1 || ra.LeaderID != a || rb.LeaderID != a {
		t.Fatalf("generation %d/%d leader %q/%q, want 1 and %q", ra.Generation, rb.Generation, ra.LeaderID, rb.LeaderID, a)
	}
	if *ra.Protocol != "range" || *ra.ProtocolType != "consumer" {
		t.Fatalf("protocol %q type %q", *ra.Protocol, *ra.ProtocolType)
	}
	if len(ra.Members) != 2 || len(rb.Members) != 0 {
		t.Fatalf("leader got %d members, follower %d", len(ra.Members), len(rb.Members))
	}
	want := map[string]string{a: "meta-a", b: "meta-b"}
	for _, m := range ra.Members {
		if string(m.ProtocolMetadata) != want[m.MemberID] {
			t.Errorf("member %s metadata %q, want %q", m.MemberID, m.ProtocolMetadata, want[m.MemberID])
		}
	}
	if s := h.state("g"); s != CompletingRebalance {
		t.Fatalf("state %v, want CompletingRebalance", s)
	}
	// The follower's SyncGroup waits for the leader's.
	syncB := h.syncAsync("g", b, 1, nil)
	h.flush()
	select {
	case r := <-syncB:
		t.Fatalf("follower sync answered early: %+v", r)
	default:
	}
	assignA, assignB := []byte{0, 1, 2, 0xff}, []byte("bytes for b")
	syncA := h.syncAsync("g", a, 1, map[string]string{a: string(assignA), b: string(assignB)})
	if r := h.recvSync(syncA); r.ErrorCode != 0 || !bytes.Equal(r.MemberAssignment, assignA) {
		t.Fatalf("leader sync: %d %q", r.ErrorCode, r.MemberAssignment)
	}
	if r := h.recvSync(syncB); r.ErrorCode != 0 || !bytes.Equal(r.MemberAssignment, assignB) || *r.Protocol != "range" {
		t.Fatalf("follower sync: %d %q", r.ErrorCode, r.MemberAssignment)
	}
	if s := h.state("g"); s != Stable {
		t.Fatalf("state %v, want Stable", s)
	}
	// A SyncGroup in Stable returns the member's assignment again.
	if r := h.recvSync(h.syncAsync("g", b, 1, nil)); r.ErrorCode != 0 || !bytes.Equal(r.MemberAssignment, assignB) {
		t.Fatalf("sync in Stable: %d %q", r.ErrorCode, r.MemberAssignment)
	}
}

// TestInitialDelayCappedByRebalanceTimeout: arrivals extend the initial
// delay only up to the rebalance timeout.
func TestInitialDelayCappedByRebalanceTimeout(t *testing.T) {
	h := newHarness(t)
	_, ch := h.newMember(joinReq{group: "g", rebalance: 5 * time.Second})
	for range 10 {
		h.newMember(joinReq{group: "g", rebalance: 5 * time.Second})
		h.advance(testDelay)
		select {
		case r := <-ch:
			if r.ErrorCode != 0 {
				t.Fatalf("error %d", r.ErrorCode)
			}
			return
		default:
		}
	}
	t.Fatal("the initial delay never ended")
}

// TestSyncErrors: SyncGroup's answers for bad member ids, generations,
// protocols and states.
func TestSyncErrors(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 2)
	pt, consumer, rng := "connect", "consumer", "range"
	tests := []struct {
		name   string
		member string
		gen    int32
		ptype  *string
		want   int16
	}{
		{"unknown member", "nobody", gen, &consumer, kerr.UnknownMemberID.Code},
		{"old generation", ids[0], gen - 1, &consumer, kerr.IllegalGeneration.Code},
		{"other protocol type", ids[0], gen, &pt, kerr.InconsistentGroupProtocol.Code},
		// From v5 the protocol type and name are mandatory: Kafka answers
		// INCONSISTENT_GROUP_PROTOCOL before it looks at the group.
		{"v5 without protocol type", ids[0], gen, nil, kerr.InconsistentGroupProtocol.Code},
		{"v5 unknown member without protocol type", "nobody", gen, nil, kerr.InconsistentGroupProtocol.Code},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrSyncGroupRequest()
			req.Version, req.Group, req.MemberID, req.Generation, req.ProtocolType = 5, "g", tc.member, tc.gen, tc.ptype
			if tc.ptype != nil {
				req.Protocol = &rng
			}
			if r := h.c.SyncGroup(h.ctx, req); r.ErrorCode != tc.want {
				t.Fatalf("error %d, want %d", r.ErrorCode, tc.want)
			}
		})
	}
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID = "unknown-group", "m"
	if r := h.c.SyncGroup(h.ctx, req); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown group: %d", r.ErrorCode)
	}
	// In PreparingRebalance, SyncGroup says REBALANCE_IN_PROGRESS.
	h.newMember(joinReq{group: "g"})
	if s := h.state("g"); s != PreparingRebalance {
		t.Fatalf("state %v", s)
	}
	if r := h.recvSync(h.syncAsync("g", ids[1], gen, nil)); r.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("sync while preparing: %d", r.ErrorCode)
	}
}

// TestHeartbeat covers Stable (ok), an old generation, an unknown member
// and group, and PreparingRebalance.
func TestHeartbeat(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 2)
	if code := h.heartbeat("g", ids[0], gen, nil); code != 0 {
		t.Fatalf("heartbeat: %d", code)
	}
	if code := h.heartbeat("g", ids[0], gen-1, nil); code != kerr.IllegalGeneration.Code {
		t.Fatalf("old generation: %d", code)
	}
	if code := h.heartbeat("g", "nobody", gen, nil); code != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %d", code)
	}
	if code := h.heartbeat("nope", ids[0], gen, nil); code != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown group: %d", code)
	}
	if code := h.heartbeat("", ids[0], gen, nil); code != kerr.InvalidGroupID.Code {
		t.Fatalf("empty group: %d", code)
	}
	h.newMember(joinReq{group: "g"})
	if code := h.heartbeat("g", ids[0], gen, nil); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("preparing: %d", code)
	}
	// An old generation during a rebalance is still ILLEGAL_GENERATION.
	if code := h.heartbeat("g", ids[0], gen-1, nil); code != kerr.IllegalGeneration.Code {
		t.Fatalf("old generation while preparing: %d", code)
	}
}

// TestSessionExpiry: a member that stops heartbeating is removed after its
// session timeout; the rest rebalance without it, and the join phase ends
// as soon as every remaining member rejoined.
func TestSessionExpiry(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 3)
	for range 3 {
		h.advance(testSession / 2)
		for _, id := range ids[:2] {
			if code := h.heartbeat("g", id, gen, nil); code != 0 && code != kerr.RebalanceInProgress.Code {
				t.Fatalf("heartbeat %s: %d", id, code)
			}
		}
	}
	if s := h.state("g"); s != PreparingRebalance {
		t.Fatalf("state %v, want PreparingRebalance after the third member expired", s)
	}
	if code := h.heartbeat("g", ids[2], gen, nil); code != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member heartbeat: %d", code)
	}
	if code := h.heartbeat("g", ids[0], gen, nil); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("survivor heartbeat: %d", code)
	}
	ch0 := h.joinAsync(joinReq{group: "g", member: ids[0]})
	h.parked(ch0)
	ch1 := h.joinAsync(joinReq{group: "g", member: ids[1]})
	r0, r1 := h.recvJoin(ch0), h.recvJoin(ch1)
	if r0.Generation != gen+1 || r1.Generation != gen+1 {
		t.Fatalf("generations %d %d, want %d", r0.Generation, r1.Generation, gen+1)
	}
	leader := r0
	if r1.LeaderID == r1.MemberID {
		leader = r1
	}
	if len(leader.Members) != 2 {
		t.Fatalf("leader sees %d members, want 2", len(leader.Members))
	}
}

// TestJoinDuringCompletingRebalance: a new member arriving after the join
// phase ended sends the group back to PreparingRebalance; the parked
// SyncGroups are told REBALANCE_IN_PROGRESS and everyone rejoins.
func TestJoinDuringCompletingRebalance(t *testing.T) {
	h := newHarness(t)
	a, chA := h.newMember(joinReq{group: "g"})
	b, chB := h.newMember(joinReq{group: "g"})
	h.advanceUntilAnswered(chA)
	ra, _ := h.recvJoin(chA), h.recvJoin(chB)
	if s := h.state("g"); s != CompletingRebalance {
		t.Fatalf("state %v", s)
	}
	follower := b
	if ra.LeaderID == b {
		follower = a
	}
	syncF := h.syncAsync("g", follower, ra.Generation, nil)
	h.flush()
	// A commit now is refused: the member has its generation but no assignment.
	if code := commitCode(h, "g", follower, ra.Generation); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("commit in CompletingRebalance: %d", code)
	}
	c, chC := h.newMember(joinReq{group: "g"})
	if r := h.recvSync(syncF); r.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("parked sync: %d, want REBALANCE_IN_PROGRESS", r.ErrorCode)
	}
	if s := h.state("g"); s != PreparingRebalance {
		t.Fatalf("state %v, want PreparingRebalance", s)
	}
	h.parked(chC)
	chA2 := h.joinAsync(joinReq{group: "g", member: a})
	chB2 := h.joinAsync(joinReq{group: "g", member: b})
	for _, ch := range []<-chan *kmsg.JoinGroupResponse{chA2, chB2, chC} {
		r := h.recvJoin(ch)
		if r.ErrorCode != 0 || r.Generation != ra.Generation+1 {
			t.Fatalf("rejoin: error %d generation %d", r.ErrorCode, r.Generation)
		}
		if r.MemberID == r.LeaderID && len(r.Members) != 3 {
			t.Fatalf("leader sees %d members", len(r.Members))
		}
	}
	_ = c
}

// TestRejoinInCompletingRebalanceSameMetadata: a member that lost its
// JoinGroup answer and asks again with the same metadata gets it again.
func TestRejoinInCompletingRebalanceSameMetadata(t *testing.T) {
	h := newHarness(t)
	a, chA := h.newMember(joinReq{group: "g"})
	h.advance(testDelay)
	first := h.recvJoin(chA)
	again := h.recvJoin(h.joinAsync(joinReq{group: "g", member: a}))
	if again.ErrorCode != 0 || again.Generation != first.Generation || len(again.Members) != 1 {
		t.Fatalf("repeat join: %+v", again)
	}
	if s := h.state("g"); s != CompletingRebalance {
		t.Fatalf("state %v", s)
	}
}

// TestStableRejoin: a follower rejoining with the same metadata gets the
// current generation without a rebalance; the leader or a changed
// subscription triggers one.
func TestStableRejoin(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 2)
	r := h.recvJoin(h.joinAsync(joinReq{group: "g", member: ids[1]}))
	if r.ErrorCode != 0 || r.Generation != gen || h.state("g") != Stable {
		t.Fatalf("follower rejoin: %+v state %v", r, h.state("g"))
	}
	ch := h.joinAsync(joinReq{group: "g", member: ids[1], protocols: protos("range", "new subscription")})
	h.parked(ch)
	if s := h.state("g"); s != PreparingRebalance {
		t.Fatalf("state %v after changed metadata", s)
	}
}

// TestProtocolSelection: the protocol every member supports with the most
// first-choice votes wins; a member sharing no protocol, or another
// protocol type, is refused.
func TestProtocolSelection(t *testing.T) {
	h := newHarness(t)
	_, ch1 := h.newMember(joinReq{group: "g", protocols: protos("range", "", "roundrobin", "")})
	_, ch2 := h.newMember(joinReq{group: "g", protocols: protos("roundrobin", "", "range", "")})
	_, ch3 := h.newMember(joinReq{group: "g", protocols: protos("sticky", "", "roundrobin", "", "range", "")})
	r := h.recvJoin(h.joinAsync(joinReq{group: "g", protocols: protos("cooperative", "")}))
	if r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("no common protocol: %d", r.ErrorCode)
	}
	r = h.recvJoin(h.joinAsync(joinReq{group: "g", protocolType: "connect", protocols: protos("range", "")}))
	if r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("other protocol type: %d", r.ErrorCode)
	}
	h.advanceUntilAnswered(ch1)
	for _, ch := range []<-chan *kmsg.JoinGroupResponse{ch1, ch2, ch3} {
		if r := h.recvJoin(ch); *r.Protocol != "roundrobin" {
			t.Fatalf("protocol %q, want roundrobin (2 votes of 3)", *r.Protocol)
		}
	}
}

// TestRebalanceTimeout: a member that does not rejoin during
// PreparingRebalance is removed when the rebalance timeout ends.
func TestRebalanceTimeout(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 2)
	ch := h.joinAsync(joinReq{group: "g", member: ids[0]}) // the leader asks for a rebalance
	h.parked(ch)
	for range 5 { // ids[1] stays alive but never rejoins
		h.advance(5 * time.Second)
		h.heartbeat("g", ids[0], gen, nil)
		h.heartbeat("g", ids[1], gen, nil)
	}
	h.parked(ch)
	h.advance(testRebalance - 25*time.Second)
	r := h.recvJoin(ch)
	if r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("after rebalance timeout: %+v", r)
	}
	if code := h.heartbeat("g", ids[1], gen, nil); code != kerr.UnknownMemberID.Code {
		t.Fatalf("removed member: %d", code)
	}
}

// TestSyncTimeout: members that got their JoinGroup answer but send no
// SyncGroup within the rebalance timeout are removed and the group
// rebalances.
func TestSyncTimeout(t *testing.T) {
	h := newHarness(t)
	a, chA := h.newMember(joinReq{group: "g"})
	b, chB := h.newMember(joinReq{group: "g"})
	h.advanceUntilAnswered(chA)
	ra, _ := h.recvJoin(chA), h.recvJoin(chB)
	if ra.LeaderID != a {
		t.Fatalf("leader %s", ra.LeaderID)
	}
	h.recvSync(h.syncAsync("g", a, ra.Generation, map[string]string{a: "x", b: "y"}))
	if s := h.state("g"); s != Stable {
		t.Fatalf("state %v", s)
	}
	for range 6 { // b never syncs; a keeps heartbeating
		h.advance(testRebalance / 6)
		h.heartbeat("g", a, ra.Generation, nil)
	}
	if s := h.state("g"); s != PreparingRebalance {
		t.Fatalf("state %v, want PreparingRebalance after b missed its SyncGroup", s)
	}
	if code := h.heartbeat("g", b, ra.Generation, nil); code != kerr.UnknownMemberID.Code {
		t.Fatalf("b: %d", code)
	}
}

// TestLeave: leaving rebalances the rest; the last member leaving empties
// the group, which then leaves memory (Dead) since it has no offsets.
func TestLeave(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 2)
	leave := func(members ...kmsg.LeaveGroupRequestMember) *kmsg.LeaveGroupResponse {
		return h.c.LeaveGroup(h.ctx, "g", members)
	}
	m := func(id string, inst *string) kmsg.LeaveGroupRequestMember {
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID, lm.InstanceID = id, inst
		return lm
	}
	r := leave(m(ids[1], nil), m("nobody", nil))
	if r.ErrorCode != 0 || len(r.Members) != 2 || r.Members[0].ErrorCode != 0 || r.Members[1].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("leave: %+v", r)
	}
	if s := h.state("g"); s != PreparingRebalance {
		t.Fatalf("state %v", s)
	}
	ch := h.joinAsync(joinReq{group: "g", member: ids[0]})
	if r := h.recvJoin(ch); r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("rejoin: %+v", r)
	}
	if r := leave(m(ids[0], nil)); r.Members[0].ErrorCode != 0 {
		t.Fatalf("last leave: %+v", r)
	}
	h.flush()
	if s := h.waitDead("g"); s != Dead {
		t.Fatalf("state %v, want Dead (gone from memory)", s)
	}
	if r := h.c.LeaveGroup(h.ctx, "g", []kmsg.LeaveGroupRequestMember{m(ids[0], nil)}); r.Members[0].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("leave of unknown group: %+v", r)
	}
	if r := h.c.LeaveGroup(h.ctx, "", nil); r.ErrorCode != kerr.InvalidGroupID.Code {
		t.Fatalf("empty group id: %d", r.ErrorCode)
	}
}

// TestLeavePendingMember: a member id handed out with MEMBER_ID_REQUIRED
// holds the join phase until it joins, expires or leaves.
func TestLeavePendingMember(t *testing.T) {
	h := newHarness(t)
	ids, _ := h.stableGroup("g", 1)
	pending := h.recvJoin(h.joinAsync(joinReq{group: "g", version: 4})).MemberID
	ch := h.joinAsync(joinReq{group: "g", member: ids[0]}) // leader rejoins: rebalance
	h.parked(ch)                                           // waits for the pending member
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = pending
	if r := h.c.LeaveGroup(h.ctx, "g", []kmsg.LeaveGroupRequestMember{lm}); r.Members[0].ErrorCode != 0 {
		t.Fatalf("leave pending: %+v", r)
	}
	if r := h.recvJoin(ch); r.ErrorCode != 0 {
		t.Fatalf("join: %d", r.ErrorCode)
	}
}

// TestPendingMemberExpires: an unused MEMBER_ID_REQUIRED id expires after
// the session timeout and stops holding the rebalance.
func TestPendingMemberExpires(t *testing.T) {
	h := newHarness(t)
	ids, _ := h.stableGroup("g", 1)
	h.recvJoin(h.joinAsync(joinReq{group: "g", version: 4}))
	ch := h.joinAsync(joinReq{group: "g", member: ids[0]})
	h.parked(ch)
	h.advance(testSession)
	if r := h.recvJoin(ch); r.ErrorCode != 0 || len(r.Members) != 1 {
		t.Fatalf("join: %+v", r)
	}
}

// TestNewMemberJoinTimeout: a new member parked in its first JoinGroup
// longer than NewMemberJoinTimeout is removed (its client may be gone).
func TestNewMemberJoinTimeout(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.NewMemberJoinTimeout = 10 * time.Second })
	ids, gen := h.stableGroup("g", 1)
	_, ch := h.newMember(joinReq{group: "g", rebalance: time.Minute})
	h.advance(5 * time.Second)
	h.heartbeat("g", ids[0], gen, nil) // REBALANCE_IN_PROGRESS, but alive
	h.advance(5 * time.Second)
	if r := h.recvJoin(ch); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("expired new member: %d", r.ErrorCode)
	}
}

// TestCloseAnswersParked: Close answers parked requests with
// NOT_COORDINATOR and later requests too.
func TestCloseAnswersParked(t *testing.T) {
	h := newHarness(t)
	_, ch := h.newMember(joinReq{group: "g"})
	h.parked(ch)
	h.c.Close()
	if r := h.recvJoin(ch); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("parked join: %d", r.ErrorCode)
	}
	if code := h.heartbeat("g", "m", 1, nil); code != kerr.NotCoordinator.Code {
		t.Fatalf("after close: %d", code)
	}
}

// TestLoadInProgress: until the backend has answered, group requests get
// COORDINATOR_LOAD_IN_PROGRESS; a failing backend is retried.
func TestLoadInProgress(t *testing.T) {
	clock := newFakeClock()
	apps := newMemApps(clock)
	gate := make(chan struct{})
	apps.listGate, apps.failList = gate, errTest
	c := New(Config{Clock: clock}, apps, memTopics{})
	defer c.Close()
	req := joinReq{group: "g"}.kmsg()
	if r := c.JoinGroup(t.Context(), Client{}, req); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("join while loading: %d", r.ErrorCode)
	}
	fetch := kmsg.NewOffsetFetchRequestGroup()
	fetch.Group = "g"
	if sg := c.FetchOffsets(t.Context(), fetch); sg.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("fetch while loading: %d", sg.ErrorCode)
	}
	close(gate) // ListApps now fails at once; the loader backs off
	apps.mu.Lock()
	apps.failList = nil
	apps.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-c.Ready():
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("never loaded")
		}
		clock.Advance(time.Second) // the loader's backoff runs on the fake clock
		time.Sleep(time.Millisecond)
	}
}
