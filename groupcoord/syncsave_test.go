package groupcoord

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/disgw/disgw/disbackend"
)

// failSaveApps is readerApps whose next saves of a group's state fail with
// the errors queued by failNext, one each; the saves that fail store
// nothing.
type failSaveApps struct {
	*readerApps
	fmu  sync.Mutex
	fail []error
}

func (a *failSaveApps) failNext(errs ...error) {
	a.fmu.Lock()
	defer a.fmu.Unlock()
	a.fail = append(a.fail, errs...)
}

func (a *failSaveApps) SaveGroupState(ctx context.Context, group string, state []byte) error {
	a.fmu.Lock()
	var err error
	if len(a.fail) > 0 {
		err, a.fail = a.fail[0], a.fail[1:]
	}
	a.fmu.Unlock()
	if err != nil {
		return fmt.Errorf("save group %q: %w", group, err)
	}
	return a.readerApps.SaveGroupState(ctx, group, state)
}

// savedState decodes the state saved for group; ok is false without one.
func (a *failSaveApps) savedState(t *testing.T, group string) (sg savedGroup, ok bool) {
	t.Helper()
	a.mu.Lock()
	b := a.states[group]
	a.mu.Unlock()
	if b == nil {
		return sg, false
	}
	if err := json.Unmarshal(b, &sg); err != nil {
		t.Fatalf("saved state of %s: %v", group, err)
	}
	return sg, true
}

// failSaveNode is a coordinator over apps; owns is Config.Owns (nil: one
// node). It logs to the test and, when given, to core too.
func failSaveNode(t *testing.T, apps *failSaveApps, owns func(string) bool, core ...zapcore.Core) *harness {
	t.Helper()
	clock := apps.clock.(*fakeClock)
	logger := zaptest.NewLogger(t)
	if len(core) > 0 {
		logger = logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, core[0]) }))
	}
	cfg := Config{Clock: clock, Logger: logger, InitialRebalanceDelay: testDelay, Owns: owns}
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

func newFailSaveApps() *failSaveApps {
	return &failSaveApps{readerApps: newReaderApps(newFakeClock())}
}

// rejoin sends a JoinGroup of each known member and returns the answers
// in the same order, once the join phase has ended.
func (h *harness) rejoin(group string, ids []string) []*kmsg.JoinGroupResponse {
	h.t.Helper()
	var chs []<-chan *kmsg.JoinGroupResponse
	for _, id := range ids {
		chs = append(chs, h.joinAsync(joinReq{group: group, member: id}))
	}
	var out []*kmsg.JoinGroupResponse
	for _, ch := range chs {
		r := h.recvJoin(ch)
		if r.ErrorCode != 0 {
			h.t.Fatalf("rejoin: error %d", r.ErrorCode)
		}
		out = append(out, r)
	}
	return out
}

// TestSyncSaveFailureRebalances: with several nodes, when the state of a
// completed rebalance cannot be saved, the group does not become Stable,
// as Kafka's coordinator answers when it cannot write the group's
// assignment (resetAndPropagateAssignmentWithError): the leader's and the
// parked followers' SyncGroups answer the mapped error and no assignment,
// a member's SyncGroup that comes later answers REBALANCE_IN_PROGRESS, the
// saved state is still the previous generation's, and the group prepares
// a rebalance. The members rejoin; the next SyncGroup succeeds and the
// state saved is the new generation's, with its assignment.
func TestSyncSaveFailureRebalances(t *testing.T) {
	apps := newFailSaveApps()
	o := &owners{}
	h := failSaveNode(t, apps, o.owns(0))
	h.load("g")
	ids, gen := h.stableGroup("g", 2)
	if sg, ok := apps.savedState(t, "g"); !ok || sg.Generation != gen {
		t.Fatalf("saved state %+v (%v), want generation %d", sg, ok, gen)
	}

	// A third member joins: the others rejoin, a new generation starts.
	third, ch := h.newMember(joinReq{group: "g"})
	ids = append(ids, third)
	answers := h.rejoin("g", ids[:2])
	r3 := h.recvJoin(ch)
	if r3.ErrorCode != 0 {
		t.Fatalf("new member's join: error %d", r3.ErrorCode)
	}
	gen2, leader := answers[0].Generation, answers[0].LeaderID
	if gen2 != gen+1 {
		t.Fatalf("generation %d, want %d", gen2, gen+1)
	}
	var follower string
	for _, id := range ids[:2] {
		if id != leader {
			follower = id
		}
	}

	// The follower parks; the leader's save fails: the group moved away,
	// or this node's lease lapsed.
	apps.failNext(disbackend.ErrNotCoordinator)
	fch := h.syncAsync("g", follower, gen2, nil)
	assign := map[string]string{}
	for _, id := range ids {
		assign[id] = "lost-" + id
	}
	lch := h.syncAsync("g", leader, gen2, assign)
	for who, ch := range map[string]<-chan *kmsg.SyncGroupResponse{"leader": lch, "follower": fch} {
		r := h.recvSync(ch)
		if r.ErrorCode != kerr.NotCoordinator.Code || len(r.MemberAssignment) != 0 {
			t.Fatalf("%s's SyncGroup after a failed save: error %d, assignment %q; want NOT_COORDINATOR and none",
				who, r.ErrorCode, r.MemberAssignment)
		}
	}
	if s := h.state("g"); s != PreparingRebalance {
		t.Fatalf("state after a failed save: %v, want PreparingRebalance", s)
	}
	if r := h.recvSync(h.syncAsync("g", third, gen2, nil)); r.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("a later SyncGroup of the failed generation: error %d, want REBALANCE_IN_PROGRESS", r.ErrorCode)
	}
	if code := h.heartbeat("g", follower, gen2, nil); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat after a failed save: error %d, want REBALANCE_IN_PROGRESS", code)
	}
	if dg := h.describe("g"); dg.State != "PreparingRebalance" {
		t.Fatalf("DescribeGroups after a failed save: %q, want PreparingRebalance", dg.State)
	}
	if sg, _ := apps.savedState(t, "g"); sg.Generation != gen {
		t.Fatalf("saved generation %d after a failed save, want still %d", sg.Generation, gen)
	}

	// Everyone rejoins: the next rebalance completes and is saved.
	answers = h.rejoin("g", ids)
	gen3, leader := answers[0].Generation, answers[0].LeaderID
	if gen3 != gen2+1 {
		t.Fatalf("generation after the rejoin %d, want %d", gen3, gen2+1)
	}
	for _, id := range ids {
		assign[id] = "new-" + id
	}
	var syncs []<-chan *kmsg.SyncGroupResponse
	var order []string
	for _, id := range ids {
		if id != leader {
			syncs = append(syncs, h.syncAsync("g", id, gen3, nil))
			order = append(order, id)
		}
	}
	syncs = append(syncs, h.syncAsync("g", leader, gen3, assign))
	order = append(order, leader)
	for i, ch := range syncs {
		r := h.recvSync(ch)
		if r.ErrorCode != 0 || string(r.MemberAssignment) != "new-"+order[i] {
			t.Fatalf("SyncGroup of %s after the rejoin: error %d, assignment %q", order[i], r.ErrorCode, r.MemberAssignment)
		}
	}
	if s := h.state("g"); s != Stable {
		t.Fatalf("state after the rejoin: %v, want Stable", s)
	}
	sg, ok := apps.savedState(t, "g")
	if !ok || sg.Generation != gen3 || sg.Leader != leader || len(sg.Members) != 3 {
		t.Fatalf("saved state after the rejoin: %+v (%v), want generation %d, leader %s, 3 members", sg, ok, gen3, leader)
	}
	for _, m := range sg.Members {
		if string(m.Assignment) != "new-"+m.ID {
			t.Fatalf("saved assignment of %s: %q, want %q", m.ID, m.Assignment, "new-"+m.ID)
		}
	}
	for _, id := range ids {
		if code := h.heartbeat("g", id, gen3, nil); code != 0 {
			t.Fatalf("heartbeat of %s after the rejoin: error %d", id, code)
		}
	}
}

// TestSyncSaveFailureCodes: the code a failed save answers the
// rebalance's SyncGroups with, as Kafka maps a failed write of the
// group's assignment (appendGroupMetadataErrorToResponseError): a lost
// group NOT_COORDINATOR, storage unavailable or too slow
// COORDINATOR_NOT_AVAILABLE, anything else UNKNOWN_SERVER_ERROR, logged
// at Error (the mapped ones at Warn). Each time the group prepares a
// rebalance, and the member expires if it does not rejoin.
func TestSyncSaveFailureCodes(t *testing.T) {
	cases := []struct {
		err   error
		code  int16
		level zapcore.Level
	}{
		{disbackend.ErrNotCoordinator, kerr.NotCoordinator.Code, zapcore.WarnLevel},
		{disbackend.ErrNotLeader, kerr.NotCoordinator.Code, zapcore.WarnLevel},
		{disbackend.ErrClosed, kerr.NotCoordinator.Code, zapcore.WarnLevel},
		{disbackend.ErrUnavailable, kerr.CoordinatorNotAvailable.Code, zapcore.WarnLevel},
		{context.DeadlineExceeded, kerr.CoordinatorNotAvailable.Code, zapcore.WarnLevel},
		{disbackend.ErrStreamNotFound, kerr.CoordinatorNotAvailable.Code, zapcore.WarnLevel},
		{disbackend.ErrInvalidRecord, kerr.UnknownServerError.Code, zapcore.ErrorLevel},
		{errTest, kerr.UnknownServerError.Code, zapcore.ErrorLevel},
	}
	for _, tc := range cases {
		t.Run(tc.err.Error(), func(t *testing.T) {
			apps := newFailSaveApps()
			o := &owners{}
			core, logs := observer.New(zapcore.WarnLevel)
			h := failSaveNode(t, apps, o.owns(0), core)
			h.load("g")
			id, ch := h.newMember(joinReq{group: "g"})
			h.advanceUntilAnswered(ch)
			jr := h.recvJoin(ch)
			if jr.ErrorCode != 0 || jr.LeaderID != id {
				t.Fatalf("join: %+v", jr)
			}
			apps.failNext(tc.err)
			r := h.recvSync(h.syncAsync("g", id, jr.Generation, map[string]string{id: "a"}))
			if r.ErrorCode != tc.code || len(r.MemberAssignment) != 0 {
				t.Fatalf("SyncGroup: error %d, assignment %q; want %d and none", r.ErrorCode, r.MemberAssignment, tc.code)
			}
			if s := h.state("g"); s != PreparingRebalance {
				t.Fatalf("state %v, want PreparingRebalance", s)
			}
			if _, ok := apps.savedState(t, "g"); ok {
				t.Fatal("a failed save left a saved state")
			}
			var levels []zapcore.Level
			for _, e := range logs.All() {
				levels = append(levels, e.Level)
			}
			if len(levels) != 1 || levels[0] != tc.level {
				t.Fatalf("logged at %v, want once at %v", levels, tc.level)
			}
			// The member does not rejoin: its session ends and the group
			// is Empty.
			h.advance(testSession)
			if s := h.waitDead("g"); s != Dead && s != Empty {
				t.Fatalf("a member that does not rejoin: group %v, want Empty", s)
			}
		})
	}
}

// TestSyncSaveFailureOneNode: on one node (no Config.Owns) a failed save
// of a completed rebalance is logged and the group becomes Stable as
// before: only a restart of this node would read the state back, and
// then its members rejoin.
func TestSyncSaveFailureOneNode(t *testing.T) {
	apps := newFailSaveApps()
	h := failSaveNode(t, apps, nil)
	id, ch := h.newMember(joinReq{group: "g"})
	h.advanceUntilAnswered(ch)
	jr := h.recvJoin(ch)
	apps.failNext(disbackend.ErrUnavailable)
	r := h.recvSync(h.syncAsync("g", id, jr.Generation, map[string]string{id: "a"}))
	if r.ErrorCode != 0 || string(r.MemberAssignment) != "a" {
		t.Fatalf("SyncGroup on one node after a failed save: error %d, assignment %q", r.ErrorCode, r.MemberAssignment)
	}
	if s := h.state("g"); s != Stable {
		t.Fatalf("state %v, want Stable", s)
	}
	if _, ok := apps.savedState(t, "g"); ok {
		t.Fatal("a failed save left a saved state")
	}
}

// TestSyncSaveFailureSessionRestarts: a member answered by a failed save
// has its session timer started again, as Kafka's propagateAssignment
// reschedules it: a static member whose session ran out while its
// SyncGroup was parked (its expiry then ignored) and that does not rejoin
// is removed one session later, and the rebalance completes without it.
func TestSyncSaveFailureSessionRestarts(t *testing.T) {
	apps := newFailSaveApps()
	o := &owners{}
	h := failSaveNode(t, apps, o.owns(0))
	h.load("g")
	leader, lch := h.newMember(joinReq{group: "g"})
	inst := "f"
	fch := h.joinAsync(joinReq{group: "g", instance: &inst})
	h.advanceUntilAnswered(lch)
	lr, fr := h.recvJoin(lch), h.recvJoin(fch)
	if lr.ErrorCode != 0 || fr.ErrorCode != 0 || lr.LeaderID != leader {
		t.Fatalf("joins: %+v, %+v", lr, fr)
	}
	follower, gen := fr.MemberID, lr.Generation
	sch := h.syncAsync("g", follower, gen, nil)
	// The follower's session runs out while it waits for the leader, who
	// heartbeats.
	for range 4 {
		h.advance(testSession / 3)
		if code := h.heartbeat("g", leader, gen, nil); code != 0 {
			t.Fatalf("leader's heartbeat: error %d", code)
		}
	}
	apps.failNext(disbackend.ErrUnavailable)
	if r := h.recvSync(h.syncAsync("g", leader, gen, map[string]string{leader: "a", follower: "b"})); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("leader's SyncGroup: error %d, want COORDINATOR_NOT_AVAILABLE", r.ErrorCode)
	}
	if r := h.recvSync(sch); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("follower's SyncGroup: error %d, want COORDINATOR_NOT_AVAILABLE", r.ErrorCode)
	}
	rch := h.joinAsync(joinReq{group: "g", member: leader})
	h.parked(rch)
	h.advance(testSession)
	r := h.recvJoin(rch)
	if r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 1 || r.Members[0].MemberID != leader {
		t.Fatalf("the leader's rejoin one session after the failed save: %+v; want generation %d with the leader alone", r, gen+1)
	}
}
