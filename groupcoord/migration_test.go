package groupcoord

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/groupcoord/consumer"
)

// classicSubscription is a ConsumerProtocol v1 subscription to t1.
func classicSubscription() string {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version, m.Topics = 1, []string{"t1"}
	return string(m.AppendTo(nil))
}

// stableClassicConsumers brings two classic members subscribed to t1
// (range) into a Stable group, the leader giving each two partitions; it
// returns their ids and the generation.
func (h *harness) stableClassicConsumers(group string) ([]string, int32) {
	h.t.Helper()
	j := joinReq{group: group, protocols: protos("range", classicSubscription())}
	a, cha := h.newMember(j)
	b, chb := h.newMember(j)
	h.advanceUntilAnswered(cha)
	ra, rb := h.recvJoin(cha), h.recvJoin(chb)
	if ra.ErrorCode != 0 || rb.ErrorCode != 0 {
		h.t.Fatalf("joins: %d %d", ra.ErrorCode, rb.ErrorCode)
	}
	assign := map[string]string{
		a: string(consumer.EncodeAssignment(map[string][]int32{"t1": {0, 1}}, []byte{0, 1})),
		b: string(consumer.EncodeAssignment(map[string][]int32{"t1": {2, 3}}, []byte{0, 1})),
	}
	leader, follower := a, b
	if ra.LeaderID == b {
		leader, follower = b, a
	}
	chf := h.syncAsync(group, follower, ra.Generation, nil)
	if r := h.recvSync(h.syncAsync(group, leader, ra.Generation, assign)); r.ErrorCode != 0 {
		h.t.Fatalf("leader's sync: %d", r.ErrorCode)
	}
	if r := h.recvSync(chf); r.ErrorCode != 0 {
		h.t.Fatalf("follower's sync: %d", r.ErrorCode)
	}
	return []string{a, b}, ra.Generation
}

// TestOnlineUpgradeRefused: a policy without upgrades, or a classic group
// of another protocol type, refuses a consumer-protocol join with
// GROUP_ID_NOT_FOUND and Kafka's message; the classic group goes on.
func TestOnlineUpgradeRefused(t *testing.T) {
	for _, policy := range []string{consumer.MigrationDowngrade, consumer.MigrationDisabled} {
		h := newHarness(t, func(c *Config) { c.Consumer.MigrationPolicy = policy })
		ids, gen := h.stableClassicConsumers("g")
		r := h.cgHeartbeat("g", &cgMember{id: "new"})
		if r.ErrorCode != kerr.GroupIDNotFound.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "online upgrade is disabled") {
			t.Fatalf("%s: consumer join to a classic group: %v %v", policy, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
		}
		if code := h.heartbeat("g", ids[0], gen, nil); code != 0 {
			t.Fatalf("%s: classic heartbeat after the refusal: %v", policy, kerr.ErrorForCode(code))
		}
	}
	h := newHarness(t)
	j := joinReq{group: "connect", protocolType: "connect", protocols: protos("default", "x")}
	_, ch := h.newMember(j)
	h.advanceUntilAnswered(ch)
	if r := h.recvJoin(ch); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	r := h.cgHeartbeat("connect", &cgMember{id: "new"})
	if r.ErrorCode != kerr.GroupIDNotFound.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "does not use the consumer embedded protocol") {
		t.Fatalf("consumer join to a connect group: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
}

// TestOnlineMigration: a consumer-protocol member upgrades a classic group
// of two (one save replaces the classic state); the classic members are
// told to rejoin, which survives a restart; one that does not rejoin within
// its rebalance timeout is fenced; the consumer-protocol member leaving
// downgrades the group to a classic group (saved as one) that rebalances,
// and its last member rejoins into a Stable classic group with its target
// assignment.
func TestOnlineMigration(t *testing.T) {
	h := newHarness(t)
	apps := &statesApps{memApps: h.apps, states: map[string][]byte{}}
	h.restart(apps)
	ids, gen := h.stableClassicConsumers("g")
	c := &cgMember{id: "consumer-member"}
	if r := h.cgHeartbeat("g", c); r.ErrorCode != 0 || r.MemberEpoch != gen+1 {
		t.Fatalf("consumer join: %v epoch %d, want %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch, gen+1)
	}
	if !consumer.IsConsumerGroupState(apps.states["g"]) {
		t.Fatal("the upgraded group was not saved as a consumer group")
	}
	for _, id := range ids {
		if code := h.heartbeat("g", id, gen, nil); code != kerr.RebalanceInProgress.Code {
			t.Fatalf("classic heartbeat after the upgrade: %v", kerr.ErrorForCode(code))
		}
	}

	h.restart(apps)
	if code := h.heartbeat("g", ids[0], gen, nil); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("classic heartbeat after a restart: %v", kerr.ErrorForCode(code))
	}
	// ids[0] rejoins (eager: owning nothing) and syncs; ids[1] never
	// rejoins and is fenced after its rebalance timeout.
	jr := h.recvJoin(h.joinAsync(joinReq{group: "g", member: ids[0], protocols: protos("range", classicSubscription())}))
	if jr.ErrorCode != 0 || jr.Generation <= gen || len(jr.Members) != 0 || jr.LeaderID != "" {
		t.Fatalf("classic rejoin: %+v", jr)
	}
	sr := h.recvSync(h.syncAsync("g", ids[0], jr.Generation, nil))
	if sr.ErrorCode != 0 {
		t.Fatalf("classic sync: %v", kerr.ErrorForCode(sr.ErrorCode))
	}
	// Everyone heartbeats (ids[1] is told to rebalance each time) until
	// ids[1]'s join timer, armed by its first REBALANCE_IN_PROGRESS,
	// fences it.
	fenced := false
	for range (testRebalance + 5*time.Second) / (5 * time.Second) {
		h.advance(5 * time.Second)
		h.cgHeartbeat("g", c)
		switch code := h.heartbeat("g", ids[1], gen, nil); code {
		case kerr.RebalanceInProgress.Code:
		case kerr.UnknownMemberID.Code:
			fenced = true
		default:
			t.Fatalf("heartbeat of the member that does not rejoin: %v", kerr.ErrorForCode(code))
		}
		if code := h.heartbeat("g", ids[0], jr.Generation, nil); code != 0 && !fenced {
			t.Fatalf("heartbeat of the rejoined classic member: %v", kerr.ErrorForCode(code))
		}
	}
	if !fenced {
		t.Fatal("the classic member that did not rejoin was not fenced")
	}
	// Its partitions move: ids[0] is told to rejoin, and does.
	if code := h.heartbeat("g", ids[0], jr.Generation, nil); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat after the fence: %v", kerr.ErrorForCode(code))
	}
	jr = h.recvJoin(h.joinAsync(joinReq{group: "g", member: ids[0], protocols: protos("range", classicSubscription())}))
	if sr := h.recvSync(h.syncAsync("g", ids[0], jr.Generation, nil)); jr.ErrorCode != 0 || sr.ErrorCode != 0 {
		t.Fatalf("second rejoin: %v %v", kerr.ErrorForCode(jr.ErrorCode), kerr.ErrorForCode(sr.ErrorCode))
	}
	h.cgHeartbeat("g", c)
	if code := h.heartbeat("g", ids[0], jr.Generation, nil); code != 0 {
		t.Fatalf("heartbeat after the second rejoin: %v", kerr.ErrorForCode(code))
	}

	// The consumer-protocol member leaves: a classic group again.
	leave := &cgMember{id: c.id, epoch: consumer.LeaveEpoch}
	if r := h.cgHeartbeat("g", leave); r.ErrorCode != 0 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if consumer.IsConsumerGroupState(apps.states["g"]) {
		t.Fatal("the downgraded group is still saved as a consumer group")
	}
	if s := h.state("g"); s != PreparingRebalance {
		t.Fatalf("state after the downgrade: %v", s)
	}
	ch := h.joinAsync(joinReq{group: "g", member: ids[0], protocols: protos("range", classicSubscription())})
	h.advanceUntilAnswered(ch)
	jr2 := h.recvJoin(ch)
	if jr2.ErrorCode != 0 || jr2.LeaderID != ids[0] || len(jr2.Members) != 1 {
		t.Fatalf("rejoin of the classic group: %+v", jr2)
	}
	assign := string(consumer.EncodeAssignment(map[string][]int32{"t1": {0, 1, 2, 3}}, []byte{0, 1}))
	if r := h.recvSync(h.syncAsync("g", ids[0], jr2.Generation, map[string]string{ids[0]: assign})); r.ErrorCode != 0 || string(r.MemberAssignment) != assign {
		t.Fatalf("sync of the classic group: %+v", r)
	}
	if s := h.state("g"); s != Stable {
		t.Fatalf("state: %v", s)
	}
}
