package groupcoord

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestGroupConfigOverrides: a group's consumer.heartbeat.interval.ms and
// consumer.session.timeout.ms (GROUP configs) replace the broker's for it
// alone, as Kafka 4.4 reads them per heartbeat: its heartbeat answers give
// its interval, a silent member is fenced after its session timeout, not
// the broker's; the overrides are stored (read back, listed) and come
// back after a restart; setting none deletes them.
func TestGroupConfigOverrides(t *testing.T) {
	h := newHarness(t)
	apps := &statesApps{memApps: h.apps, states: map[string][]byte{}}
	h.restart(apps)
	cfg := GroupConfig{ConsumerHeartbeatIntervalConfig: 6000, ConsumerSessionTimeoutConfig: 60000}
	if err := h.c.SetGroupConfig(h.ctx, "g", cfg); err != nil {
		t.Fatal(err)
	}
	if got, err := h.c.GroupConfig(h.ctx, "g"); err != nil || len(got) != 2 || got[ConsumerSessionTimeoutConfig] != 60000 {
		t.Fatalf("read back: %v, %v", got, err)
	}
	if gs, err := h.c.ConfiguredGroups(h.ctx); err != nil || len(gs) != 1 || gs[0] != "g" {
		t.Fatalf("configured groups: %q, %v", gs, err)
	}

	h.restart(apps) // the overrides come back from the store
	a, b := &cgMember{id: "member-a"}, &cgMember{id: "member-b"}
	h.cgSettle("g", a, b)
	if r := h.cgHeartbeat("g", a); r.HeartbeatIntervalMillis != 6000 {
		t.Fatalf("heartbeat interval %d ms, want the group's 6000", r.HeartbeatIntervalMillis)
	}
	other := &cgMember{id: "member-o"}
	if r := h.cgHeartbeat("other", other); r.ErrorCode != 0 || r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("another group: %v, interval %d ms, want the broker's 5000", kerr.ErrorForCode(r.ErrorCode), r.HeartbeatIntervalMillis)
	}

	// b stops heartbeating: 50 s (past the broker's 45 s) it is still a
	// member; past the group's 60 s it is fenced.
	for range 10 {
		h.advance(5 * time.Second)
		h.cgHeartbeat("g", a)
	}
	h.flush()
	h.inspect("g", func(g *group) {
		if _, ok := g.cg.Members[b.id]; !ok {
			t.Errorf("b fenced after 50 s: the broker's session timeout was used")
		}
	})
	for range 3 {
		h.advance(5 * time.Second)
		h.cgHeartbeat("g", a)
	}
	if r := h.cgHeartbeat("g", b); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("b after the group's session timeout: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	if err := h.c.SetGroupConfig(h.ctx, "g", nil); err != nil {
		t.Fatal(err)
	}
	if r := h.cgHeartbeat("g", a); r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("heartbeat interval %d ms after the overrides were deleted, want 5000", r.HeartbeatIntervalMillis)
	}
	apps.mu.Lock()
	_, kept := apps.states[configKey("g")]
	apps.mu.Unlock()
	if kept {
		t.Fatal("deleted overrides still stored")
	}
}

// TestGroupConfigKeyOfAGroup: a group's state stored under a configs key
// (by a gateway before such group ids were refused, TestReservedGroupID)
// is not taken as configs at a restart, nor listed; the group id itself
// is refused.
func TestGroupConfigKeyOfAGroup(t *testing.T) {
	h := newHarness(t)
	apps := &statesApps{memApps: h.apps, states: map[string][]byte{}}
	h.restart(apps)
	odd := configKey("x")
	a := &cgMember{id: "member-a"}
	h.cgSettle("y", a)
	apps.mu.Lock()
	saved := apps.states["y"]
	apps.states[odd] = saved
	apps.mu.Unlock()
	if len(saved) == 0 {
		t.Fatal("no saved state of group y")
	}
	h.restart(apps)
	if r := h.cgHeartbeat(odd, a); r.ErrorCode != kerr.InvalidGroupID.Code {
		t.Fatalf("heartbeat of the group %q after a restart: %v", odd, kerr.ErrorForCode(r.ErrorCode))
	}
	if gs, err := h.c.ConfiguredGroups(h.ctx); err != nil || len(gs) != 0 {
		t.Fatalf("configured groups: %q, %v", gs, err)
	}
	if cfg, err := h.c.GroupConfig(h.ctx, "x"); err != nil || cfg != nil {
		t.Fatalf("configs of x: %v, %v", cfg, err)
	}
}
