package consumer

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func subscription(version int16, topics []string, owned map[string][]int32) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version, m.Topics = version, topics
	for t, ps := range owned {
		o := kmsg.NewConsumerMemberMetadataOwnedPartition()
		o.Topic, o.Partitions = t, ps
		m.OwnedPartitions = append(m.OwnedPartitions, o)
	}
	return m.AppendTo(nil)
}

func assignment(parts map[string][]int32, userData []byte) []byte {
	b := EncodeAssignment(parts, []byte{0, 1})
	if userData == nil {
		return b
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		panic(err)
	}
	a.UserData = userData
	return a.AppendTo(nil)
}

func decodeAssignment(t *testing.T, b []byte) map[string][]int32 {
	t.Helper()
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	out := map[string][]int32{}
	for _, at := range a.Topics {
		out[at.Topic] = at.Partitions
	}
	return out
}

func classicMembers(topics []string) []ClassicMember {
	return []ClassicMember{
		{ID: "a", ClientID: "ca", SessionTimeout: 10 * time.Second, RebalanceTimeout: 20 * time.Second,
			Protocols:  []ClassicProtocol{{Name: "range", Metadata: subscription(1, topics, nil)}},
			Assignment: assignment(map[string][]int32{"t": {0, 1}}, nil)},
		{ID: "b", ClientID: "cb", SessionTimeout: 10 * time.Second, RebalanceTimeout: 20 * time.Second,
			Protocols:  []ClassicProtocol{{Name: "range", Metadata: subscription(1, topics, nil)}},
			Assignment: assignment(map[string][]int32{"t": {2, 3}}, nil)},
	}
}

// TestClassicUpgradeAndBack walks a classic group of two through an
// upgrade (FromClassic), a consumer-protocol member joining, the classic
// members catching up through Heartbeat, JoinGroup and SyncGroup, and the
// consumer-protocol member leaving (CanDowngrade, DowngradeMembers).
func TestClassicUpgradeAndBack(t *testing.T) {
	topics := fakeTopics{"t": 4}
	cfg := DefaultConfig()
	cfg.Assignors = cfg.Assignors[1:] // range: an exact assignment
	g, err := FromClassic(topics, "g", 5, "range", classicMembers([]string{"t"}))
	if err != nil {
		t.Fatal(err)
	}
	if g.Epoch != 5 || g.AssignmentEpoch != 5 || g.State() != StableState || len(g.Members) != 2 {
		t.Fatalf("upgraded: epoch %d, assignment epoch %d, state %s, %d members", g.Epoch, g.AssignmentEpoch, g.State(), len(g.Members))
	}
	if a := g.Members["a"]; a.MemberEpoch != 5 || a.Classic == nil || a.Classic.SessionTimeout != 10*time.Second || len(a.Assigned["t"]) != 2 {
		t.Fatalf("member a: %+v", a)
	}
	// Saved and loaded, the classic metadata stays.
	b, err := g.MarshalState()
	if err != nil {
		t.Fatal(err)
	}
	if g, err = LoadGroup(b); err != nil || !g.IsClassic("a") || g.SessionTimeout(cfg, "a") != 10*time.Second {
		t.Fatalf("loaded: %v", err)
	}

	// A consumer-protocol member joins: the classic members are told to
	// join again.
	c := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}, id: "c"} // after a and b: range gives it partition 3
	c.mustHeartbeat()
	if g.Epoch != 6 || g.AssignmentEpoch != 6 {
		t.Fatalf("after the join: epoch %d, assignment epoch %d", g.Epoch, g.AssignmentEpoch)
	}
	if rebalance, err := g.ClassicHeartbeat("a", "", 5); err != nil || !rebalance {
		t.Fatalf("heartbeat of a: %v %v", rebalance, err)
	}
	if _, err := g.ClassicHeartbeat("a", "", 4); !errors.Is(err, kerr.IllegalGeneration) {
		t.Fatalf("heartbeat at an old generation: %v", err)
	}
	if _, err := g.ClassicHeartbeat("x", "", 5); !errors.Is(err, kerr.UnknownMemberID) {
		t.Fatalf("heartbeat of an unknown member: %v", err)
	}
	if _, err := g.ClassicSync("a", "", 5, nil, nil); !IsRebalanceInProgress(err) {
		t.Fatalf("sync before the join: %v", err)
	}
	if _, err := g.ClassicHeartbeat(c.id, "", c.epoch); !errors.Is(err, kerr.UnknownMemberID) {
		t.Fatalf("classic heartbeat of a consumer-protocol member: %v", err)
	}

	// a joins again owning nothing (eager): it moves to epoch 6 with its
	// share of range.
	join := func(id string, owned map[string][]int32) ClassicJoinResult {
		t.Helper()
		res, _, err := g.ClassicJoin(cfg, topics, ClassicJoinRequest{MemberID: id, ProtocolType: "consumer",
			Protocols:      []ClassicProtocol{{Name: "range", Metadata: subscription(1, []string{"t"}, owned)}},
			SessionTimeout: 10 * time.Second, RebalanceTimeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := join("a", nil); res.Generation != 6 || res.Protocol != "range" {
		t.Fatalf("a's join: %+v", res)
	}
	got, err := g.ClassicSync("a", "", 6, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := g.Target["a"]
	if p := decodeAssignment(t, got); !slices.Equal(p["t"], want["t"]) {
		t.Fatalf("a's assignment %v, target %v", p, want)
	}
	// b joins owning what it had (cooperative): it keeps its epoch
	// while it revokes what is no longer its.
	res := join("b", map[string][]int32{"t": {2, 3}})
	if b := g.Members["b"]; b.State != UnrevokedPartitions || res.Generation != 5 {
		t.Fatalf("b after its join: state %v, generation %d", b.State, res.Generation)
	}
	if _, err := g.ClassicSync("b", "", 5, nil, nil); err != nil {
		t.Fatalf("b's sync while revoking: %v", err)
	}
	if rebalance, err := g.ClassicHeartbeat("b", "", 5); err != nil || !rebalance {
		t.Fatalf("b's heartbeat while revoking: %v %v", rebalance, err)
	}
	if res := join("b", map[string][]int32{"t": g.Target["b"]["t"]}); res.Generation != 6 {
		t.Fatalf("b after revoking: %+v", res)
	}

	// Offsets: a classic member commits at any OffsetCommit version; its
	// errors are ILLEGAL_GENERATION.
	if _, err := g.ValidateOffsetCommit("a", nil, 6, false, 2); err != nil {
		t.Fatalf("commit v2 of a classic member: %v", err)
	}
	if _, err := g.ValidateOffsetCommit("a", nil, 7, false, 9); !errors.Is(err, kerr.IllegalGeneration) {
		t.Fatalf("commit ahead of a classic member: %v", err)
	}
	if err := g.ValidateOffsetFetch(ptr("a"), 5); !errors.Is(err, kerr.IllegalGeneration) {
		t.Fatalf("fetch at another epoch: %v", err)
	}

	// The consumer-protocol member leaving leaves only classic members.
	if g.CanDowngrade(cfg, nil) || !g.CanDowngrade(cfg, []string{c.id}) {
		t.Fatal("CanDowngrade")
	}
	down := cfg
	down.MigrationPolicy = MigrationUpgrade
	if g.CanDowngrade(down, []string{c.id}) {
		t.Fatal("downgrade allowed by policy upgrade")
	}
	ms := g.DowngradeMembers([]string{c.id})
	if len(ms) != 2 || ms[0].ID != "a" || ms[1].ID != "b" || !slices.Equal(ms[0].Target["t"], g.Target["a"]["t"]) {
		t.Fatalf("downgrade members: %+v", ms)
	}
}

func ptr[T any](v T) *T { return &v }

// TestClassicRefusals: the upgrade's and a classic join's refusals, with
// Kafka's codes.
func TestClassicRefusals(t *testing.T) {
	topics := fakeTopics{"t": 4}
	cfg := DefaultConfig()
	for _, tc := range []struct {
		policy, protocolType string
		size                 int
		ok                   bool
	}{
		{"", "consumer", 2, true}, {MigrationUpgrade, "consumer", 2, true},
		{MigrationDowngrade, "consumer", 2, false}, {MigrationDisabled, "consumer", 2, false},
		{"", "connect", 2, false}, {"", "consumer", 3, false},
	} {
		c := cfg
		c.MigrationPolicy, c.MaxSize = tc.policy, 2
		err := ValidateUpgrade(c, "g", tc.protocolType, tc.size)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, kerr.GroupIDNotFound)) {
			t.Errorf("%+v: %v", tc, err)
		}
	}
	withUserData := classicMembers([]string{"t"})
	withUserData[1].Assignment = assignment(map[string][]int32{"t": {2}}, []byte("custom"))
	if _, err := FromClassic(topics, "g", 3, "range", withUserData); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("an assignment with user data: %v", err)
	}
	malformed := classicMembers([]string{"t"})
	malformed[0].Protocols[0].Metadata = []byte{0, 1, 0}
	if _, err := FromClassic(topics, "g", 3, "range", malformed); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("a malformed subscription: %v", err)
	}

	g, err := FromClassic(topics, "g", 3, "range", classicMembers([]string{"t"}))
	if err != nil {
		t.Fatal(err)
	}
	req := ClassicJoinRequest{ProtocolType: "consumer", Protocols: []ClassicProtocol{{Name: "roundrobin", Metadata: subscription(0, []string{"t"}, nil)}},
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second, MemberID: "c"}
	if _, _, err := g.ClassicJoin(cfg, topics, req); !errors.Is(err, kerr.InconsistentGroupProtocol) {
		t.Fatalf("a protocol the other classic members lack: %v", err)
	}
	req.Protocols[0].Name = "range"
	disabled := cfg
	disabled.MigrationPolicy = MigrationDisabled
	if _, _, err := g.ClassicJoin(disabled, topics, req); !errors.Is(err, kerr.InconsistentGroupProtocol) {
		t.Fatalf("migration disabled: %v", err)
	}
	req.MemberID, req.RequireKnownMemberID = "", true
	if res, _, err := g.ClassicJoin(cfg, topics, req); err != nil || !res.MemberIDRequired || res.MemberID == "" || len(g.Members) != 2 {
		t.Fatalf("v4+ without a member id: %+v %v", res, err)
	}
	if _, err := g.ClassicSync("a", "", 3, ptr("consumer"), ptr("roundrobin")); !errors.Is(err, kerr.InconsistentGroupProtocol) {
		t.Fatalf("sync with another protocol name: %v", err)
	}
	out, fence := g.ClassicLeave([]kmsg.LeaveGroupRequestMember{{MemberID: "a"}, {MemberID: "zz"}})
	if len(out) != 2 || out[0].ErrorCode != 0 || out[1].ErrorCode != kerr.UnknownMemberID.Code || !slices.Equal(fence, []string{"a"}) {
		t.Fatalf("leave: %+v %v", out, fence)
	}
}

// TestClassicStaticReplaced: static members roll too: a consumer-protocol
// member with a classic static member's instance id takes its place at
// once (a classic member sends no leave when it restarts), and a classic
// static member taking back the last consumer-protocol member's place
// leaves a group that can downgrade.
func TestClassicStaticReplaced(t *testing.T) {
	topics := fakeTopics{"t": 4}
	cfg := DefaultConfig()
	ms := classicMembers([]string{"t"})
	ms[0].InstanceID, ms[1].InstanceID = "i-a", "i-b"
	g, err := FromClassic(topics, "g", 2, "range", ms)
	if err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}, id: "c", instance: ptr("i-a")}
	if _, _, err := c.heartbeat(); err != nil {
		t.Fatalf("a consumer-protocol member with a classic static member's instance id: %v", err)
	}
	if g.Members["a"] != nil || g.IsClassic("c") || g.Members["c"] == nil || g.Members["c"].InstanceID != "i-a" {
		t.Fatalf("after the replacement: members %v", slices.Sorted(maps.Keys(g.Members)))
	}
	if g.CanDowngrade(cfg, nil) {
		t.Fatal("CanDowngrade with a consumer-protocol member")
	}
	res, timers, err := g.ClassicJoin(cfg, topics, ClassicJoinRequest{InstanceID: "i-a", ProtocolType: "consumer",
		Protocols:      []ClassicProtocol{{Name: "range", Metadata: subscription(1, []string{"t"}, nil)}},
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second})
	if err != nil || !res.Replaced || !slices.Contains(timers.Cancel, "c") || !g.IsClassic(res.MemberID) {
		t.Fatalf("a classic static member taking the place back: %+v %+v %v", res, timers, err)
	}
	if !g.CanDowngrade(cfg, nil) {
		t.Fatal("only classic members left, yet no downgrade")
	}
}

// TestClassicOnlyGroupReassigns: with a policy that does not downgrade, a
// consumer group left with classic members only still moves a fenced
// member's partitions: the classic members' heartbeats tell them to join
// again while the target assignment is stale, and their JoinGroup
// computes it. (Found by a newcomer: with Kafka 4.4's rule alone, the
// partitions stayed unowned.)
func TestClassicOnlyGroupReassigns(t *testing.T) {
	topics := fakeTopics{"t": 4}
	cfg := DefaultConfig()
	cfg.MigrationPolicy = MigrationUpgrade
	g, err := FromClassic(topics, "g", 2, "range", classicMembers([]string{"t"}))
	if err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}, id: "c"}
	c.mustHeartbeat()
	for _, id := range []string{"a", "b"} { // both catch up with the consumer-protocol member
		if _, _, err := g.ClassicJoin(cfg, topics, ClassicJoinRequest{MemberID: id, ProtocolType: "consumer",
			Protocols:      []ClassicProtocol{{Name: "range", Metadata: subscription(1, []string{"t"}, nil)}},
			SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		c.mustHeartbeat()
	}
	if g.CanDowngrade(cfg, []string{c.id}) {
		t.Fatal("policy upgrade allows a downgrade")
	}
	g.Fence(c.id)
	epoch := g.Members["a"].MemberEpoch
	rebalance, err := g.ClassicHeartbeat("a", "", epoch)
	if err != nil || !rebalance {
		t.Fatalf("heartbeat of a classic member after the fence: rebalance %v, %v", rebalance, err)
	}
	if _, _, err := g.ClassicJoin(cfg, topics, ClassicJoinRequest{MemberID: "a", ProtocolType: "consumer",
		Protocols:      []ClassicProtocol{{Name: "range", Metadata: subscription(1, []string{"t"}, nil)}},
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if g.AssignmentEpoch != g.Epoch {
		t.Fatalf("target assignment epoch %d, group epoch %d", g.AssignmentEpoch, g.Epoch)
	}
	assigned := 0
	for _, ps := range g.Target {
		assigned += len(ps["t"])
	}
	if assigned != 4 || len(g.Target) != 2 {
		t.Fatalf("target after the join: %v", g.Target)
	}
}
