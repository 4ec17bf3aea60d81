package groupcoord

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"
)

// statesApps is memApps that keeps group states (disbackend.GroupStateStore).
type statesApps struct {
	*memApps
	mu     sync.Mutex
	states map[string][]byte
	// refuse, when set, fails every save with it.
	refuse error
	// gate, when set, holds every save until it is closed (or the save's
	// context ends); entered gets a value as a save begins to wait.
	gate, entered chan struct{}
}

func (a *statesApps) SaveGroupState(ctx context.Context, group string, state []byte) error {
	a.mu.Lock()
	gate, entered := a.gate, a.entered
	a.mu.Unlock()
	if gate != nil {
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refuse != nil {
		return a.refuse
	}
	if state == nil {
		delete(a.states, group)
	} else {
		a.states[group] = state
	}
	return nil
}

func (a *statesApps) GroupStates(context.Context) (map[string][]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range a.states {
		out[k] = v
	}
	return out, nil
}

func (a *statesApps) saved(group string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.states[group] != nil
}

// restart closes h's coordinator and starts another over the same apps
// and clock, as a gateway restart does.
func (h *harness) restart(apps any) {
	h.t.Helper()
	h.c.Close()
	cfg := Config{Clock: h.clock, Logger: zaptest.NewLogger(h.t), InitialRebalanceDelay: testDelay}
	switch a := apps.(type) {
	case *statesApps:
		h.c = New(cfg, a, memTopics{})
	case *memApps:
		h.c = New(cfg, a, memTopics{})
	}
	h.t.Cleanup(h.c.Close)
	select {
	case <-h.c.Ready():
	case <-time.After(10 * time.Second):
		h.t.Fatal("coordinator did not load")
	}
}

// TestMembershipSurvivesRestart: with a backend that keeps group states, a
// Stable group comes back Stable after a restart: its members heartbeat,
// sync and commit with the generation they had, without a rebalance; a
// member that does not come back expires after its session; an emptied
// group is saved with no members. Without one, members must rejoin.
func TestMembershipSurvivesRestart(t *testing.T) {
	h := newHarness(t)
	apps := &statesApps{memApps: h.apps, states: map[string][]byte{}}
	h.restart(apps)
	ids, gen := h.stableGroup("g", 2)
	if !apps.saved("g") {
		t.Fatal("a Stable group's membership was not saved")
	}
	h.restart(apps)
	if s := h.state("g"); s != Stable {
		t.Fatalf("after a restart: %v, want Stable", s)
	}
	for _, id := range ids {
		if code := h.heartbeat("g", id, gen, nil); code != 0 {
			t.Fatalf("heartbeat of %s after a restart: error %d", id, code)
		}
	}
	if r := h.recvSync(h.syncAsync("g", ids[1], gen, nil)); r.ErrorCode != 0 || string(r.MemberAssignment) != "assignment-"+ids[1] {
		t.Fatalf("SyncGroup after a restart: %+v", r)
	}
	if code := commitCode(h, "g", ids[0], gen); code != 0 {
		t.Fatalf("OffsetCommit after a restart with the old generation: error %d", code)
	}
	if h.generation("g") != gen {
		t.Fatalf("generation %d after a restart, want %d (no rebalance)", h.generation("g"), gen)
	}
	// Only the first member goes on heartbeating: the other expires.
	for range 4 {
		h.advance(testSession / 3)
		h.heartbeat("g", ids[0], gen, nil)
	}
	if s := h.state("g"); s != PreparingRebalance {
		t.Fatalf("a member that did not come back: %v, want PreparingRebalance", s)
	}
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = ids[0]
	h.c.LeaveGroup(h.ctx, "g", []kmsg.LeaveGroupRequestMember{lm})
	h.flush()
	var sg savedGroup
	apps.mu.Lock()
	err := json.Unmarshal(apps.states["g"], &sg)
	apps.mu.Unlock()
	if err != nil || len(sg.Members) != 0 || sg.ProtocolType != "consumer" {
		t.Fatalf("an empty group's saved state: %+v, %v; want no members and its protocol type", sg, err)
	}

	// Without a store of group states, a restart loses the members.
	h2 := newHarness(t)
	ids, gen = h2.stableGroup("g", 1)
	h2.restart(h2.apps)
	if code := h2.heartbeat("g", ids[0], gen, nil); code != kerr.UnknownMemberID.Code {
		t.Fatalf("heartbeat after a restart without saved membership: error %d, want UNKNOWN_MEMBER_ID", code)
	}
}

// TestCloseLetsASaveUnderWayFinish: a group emptied just before the
// coordinator closes (a Connect worker stopped, then the gateway, 25 ms
// apart) is saved as empty: Close lets the save under way finish instead
// of cancelling it, so that a restart does not bring back the member that
// left (it was: "saving the empty group failed ... context canceled", and
// the group restored with its last member).
func TestCloseLetsASaveUnderWayFinish(t *testing.T) {
	h := newHarness(t)
	apps := &statesApps{memApps: h.apps, states: map[string][]byte{}}
	h.restart(apps)
	ids, _ := h.stableGroup("g", 1)
	h.flush()
	entered, gate := make(chan struct{}, 1), make(chan struct{})
	apps.mu.Lock()
	apps.entered, apps.gate = entered, gate
	apps.mu.Unlock()
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = ids[0]
	go h.c.LeaveGroup(h.ctx, "g", []kmsg.LeaveGroupRequestMember{lm})
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the emptied group's save did not begin")
	}
	closed := make(chan struct{})
	go func() { h.c.Close(); close(closed) }()
	time.Sleep(100 * time.Millisecond) // Close has begun
	close(gate)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	var sg savedGroup
	apps.mu.Lock()
	err := json.Unmarshal(apps.states["g"], &sg)
	apps.mu.Unlock()
	if err != nil || len(sg.Members) != 0 || sg.ProtocolType != "consumer" {
		t.Fatalf("saved state after Close: %+v, %v; want the empty group (no members, its protocol type)", sg, err)
	}
}
