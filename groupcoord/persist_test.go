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
}

func (a *statesApps) SaveGroupState(_ context.Context, group string, state []byte) error {
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
