package groupcoord

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func ptr(s string) *string { return &s }

// staticGroup makes a Stable group of static members i0, i1, ...
func (h *harness) staticGroup(group string, n int) ([]string, int32, string) {
	h.t.Helper()
	var chs []<-chan *kmsg.JoinGroupResponse
	for i := range n {
		inst := ptr("i" + string(rune('0'+i)))
		chs = append(chs, h.joinAsync(joinReq{group: group, instance: inst, protocols: protos("range", "meta-"+*inst)}))
	}
	h.advanceUntilAnswered(chs[0])
	ids := make([]string, n)
	var gen int32
	var leader string
	for i, ch := range chs {
		r := h.recvJoin(ch)
		if r.ErrorCode != 0 {
			h.t.Fatalf("static join: %d", r.ErrorCode)
		}
		ids[i], gen, leader = r.MemberID, r.Generation, r.LeaderID
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
		h.recvSync(ch)
	}
	return ids, gen, leader
}

// TestStaticRejoinNoRebalance: a static member that comes back with an
// unknown member id and unchanged metadata replaces its old id and keeps its
// assignment, with no rebalance; the old id is fenced.
func TestStaticRejoinNoRebalance(t *testing.T) {
	h := newHarness(t)
	ids, gen, leader := h.staticGroup("g", 2)
	follower, inst := ids[1], ptr("i1")
	if leader == ids[1] {
		follower, inst = ids[0], ptr("i0")
	}
	r := h.recvJoin(h.joinAsync(joinReq{group: "g", instance: inst, protocols: protos("range", "meta-"+*inst)}))
	if r.ErrorCode != 0 || r.Generation != gen || r.MemberID == follower || r.LeaderID != leader || r.SkipAssignment {
		t.Fatalf("static rejoin: %+v", r)
	}
	if s := h.state("g"); s != Stable {
		t.Fatalf("state %v, want Stable (no rebalance)", s)
	}
	if s := h.recvSync(h.syncAsync("g", r.MemberID, gen, nil)); s.ErrorCode != 0 || string(s.MemberAssignment) != "assignment-"+follower {
		t.Fatalf("sync after rejoin: %d %q", s.ErrorCode, s.MemberAssignment)
	}
	if code := h.heartbeat("g", follower, gen, inst); code != kerr.FencedInstanceID.Code {
		t.Fatalf("old member id: %d, want FENCED_INSTANCE_ID", code)
	}
	if code := h.heartbeat("g", r.MemberID, gen, inst); code != 0 {
		t.Fatalf("new member id: %d", code)
	}
	// A duplicate instance joining with a wrong member id is fenced.
	dup := h.recvJoin(h.joinAsync(joinReq{group: "g", member: follower, instance: inst}))
	if dup.ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("duplicate instance: %d", dup.ErrorCode)
	}
	if code := h.heartbeat("g", follower, gen, ptr("unknown-instance")); code != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown instance: %d", code)
	}
}

// TestStaticLeaderSkipAssignment: a rejoining static leader gets
// SkipAssignment and the members at v9 (KIP-814), and at older versions is
// told the old id leads, so it computes no assignment.
func TestStaticLeaderSkipAssignment(t *testing.T) {
	for _, v := range []int16{9, 5} {
		h := newHarness(t)
		ids, gen, leader := h.staticGroup("g", 2)
		inst := ptr("i0")
		if leader == ids[1] {
			inst = ptr("i1")
		}
		r := h.recvJoin(h.joinAsync(joinReq{group: "g", version: v, instance: inst, protocols: protos("range", "meta-"+*inst)}))
		if r.ErrorCode != 0 || r.Generation != gen {
			t.Fatalf("v%d: %+v", v, r)
		}
		if v >= 9 && (!r.SkipAssignment || r.LeaderID != r.MemberID || len(r.Members) != 2) {
			t.Fatalf("v9: skip %v leader %q member %q members %d", r.SkipAssignment, r.LeaderID, r.MemberID, len(r.Members))
		}
		if v < 9 && (r.SkipAssignment || r.LeaderID != leader || len(r.Members) != 0) {
			t.Fatalf("v%d: skip %v leader %q (old %q) members %d", v, r.SkipAssignment, r.LeaderID, leader, len(r.Members))
		}
		if s := h.state("g"); s != Stable {
			t.Fatalf("v%d: state %v", v, s)
		}
		if s := h.recvSync(h.syncAsync("g", r.MemberID, gen, nil)); string(s.MemberAssignment) != "assignment-"+leader {
			t.Fatalf("v%d: assignment %q", v, s.MemberAssignment)
		}
	}
}

// TestStaticRejoinChangedMetadata: a static member that rejoins with an
// unknown member id and changed metadata of the same protocol does not
// rebalance, as in Kafka (updateStaticMemberThenRebalanceOrCompleteJoin
// compares only the protocol the group would select; Kafka 4.4 answers
// the same generation, group Stable): its new metadata replaces the old
// and it keeps its assignment. A rejoin that changes the selected protocol
// rebalances.
func TestStaticRejoinChangedMetadata(t *testing.T) {
	h := newHarness(t)
	ids, gen, leader := h.staticGroup("g", 2)
	follower, inst := ids[1], ptr("i1")
	if leader == ids[1] {
		follower, inst = ids[0], ptr("i0")
	}
	r := h.recvJoin(h.joinAsync(joinReq{group: "g", instance: inst, protocols: protos("range", "changed")}))
	if r.ErrorCode != 0 || r.Generation != gen || r.LeaderID != leader || len(r.Members) != 0 {
		t.Fatalf("static rejoin with changed metadata: %+v", r)
	}
	if s := h.state("g"); s != Stable {
		t.Fatalf("state %v, want Stable (no rebalance)", s)
	}
	var meta string
	for _, m := range h.describe("g").Members {
		if m.MemberID == r.MemberID {
			meta = string(m.ProtocolMetadata)
		}
	}
	if meta != "changed" {
		t.Fatalf("described metadata %q, want the rejoin's", meta)
	}
	if s := h.recvSync(h.syncAsync("g", r.MemberID, gen, nil)); s.ErrorCode != 0 || string(s.MemberAssignment) != "assignment-"+follower {
		t.Fatalf("sync after rejoin: %d %q", s.ErrorCode, s.MemberAssignment)
	}

	// One static member that now prefers another protocol: the group's
	// selected protocol changes, so it rebalances.
	h2 := newHarness(t)
	h2.staticGroup("p", 1)
	ch := h2.joinAsync(joinReq{group: "p", instance: ptr("i0"), protocols: protos("roundrobin", "x", "range", "y")})
	r = h2.recvJoin(ch)
	if r.ErrorCode != 0 || r.Generation != 2 || r.Protocol == nil || *r.Protocol != "roundrobin" {
		t.Fatalf("rejoin with a change of protocol: %+v", r)
	}
	if s := h2.state("p"); s != CompletingRebalance {
		t.Fatalf("state %v, want CompletingRebalance", s)
	}
}

// TestStaticMemberKeptUntilSession: a static member that does not rejoin
// during a rebalance stays (until its session ends) instead of being
// dropped at the rebalance timeout like a dynamic one; batch LeaveGroup by
// instance id removes it.
func TestStaticMemberKeptUntilSession(t *testing.T) {
	h := newHarness(t)
	ids, gen, leader := h.staticGroup("g", 2)
	other, otherInst := ids[1], ptr("i1")
	leaderInst := ptr("i0")
	if leader == ids[1] {
		other, otherInst, leaderInst = ids[0], ptr("i0"), ptr("i1")
	}
	ch := h.joinAsync(joinReq{group: "g", member: leader, instance: leaderInst, protocols: protos("range", "meta-"+*leaderInst)})
	h.parked(ch)
	for range 3 { // the other keeps heartbeating (REBALANCE_IN_PROGRESS) but never rejoins
		h.advance(9 * time.Second)
		h.heartbeat("g", other, gen, otherInst)
		h.heartbeat("g", leader, gen, leaderInst)
	}
	h.parked(ch)
	h.advance(testRebalance - 27*time.Second)
	r := h.recvJoin(ch)
	if r.ErrorCode != 0 || len(r.Members) != 2 {
		t.Fatalf("join: %+v (the static member should still be listed)", r)
	}
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.InstanceID = otherInst
	lr := h.c.LeaveGroup(h.ctx, "g", []kmsg.LeaveGroupRequestMember{lm})
	if lr.Members[0].ErrorCode != 0 {
		t.Fatalf("leave by instance: %+v", lr)
	}
	if code := h.heartbeat("g", other, r.Generation, otherInst); code != kerr.UnknownMemberID.Code {
		t.Fatalf("after leave: %d", code)
	}
}
