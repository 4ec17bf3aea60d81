package groupcoord

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/groupcoord/consumer"
)

// cgTopics is a consumer.Topics of topic "t1" with 4 partitions (as
// memTopics knows it), id {1}.
type cgTopics struct{}

func (cgTopics) Partitions(t string) (int32, bool) { return 4, t == "t1" }
func (cgTopics) ID(t string) ([16]byte, bool)      { return [16]byte{1}, t == "t1" }
func (cgTopics) Name(id [16]byte) (string, bool)   { return "t1", id == [16]byte{1} }
func (cgTopics) Names() []string                   { return []string{"t1"} }

// cgMember is a consumer-protocol member as a test drives it.
type cgMember struct {
	id    string
	epoch int32
	owned []int32
}

func (h *harness) cgHeartbeat(group string, m *cgMember) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = 1, group, m.id, m.epoch, -1
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if m.epoch == consumer.JoinEpoch {
		req.RebalanceTimeoutMillis, req.SubscribedTopicNames = 30000, []string{"t1"}
	} else {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: [16]byte{1}, Partitions: m.owned}}
	}
	resp := h.c.ConsumerGroupHeartbeat(h.ctx, Client{ID: "c", Host: "/127.0.0.1"}, cgTopics{}, req)
	if resp.ErrorCode == 0 {
		m.epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			m.owned = nil
			for _, t := range resp.Assignment.Topics {
				m.owned = append(m.owned, t.Partitions...)
			}
		}
	}
	return resp
}

func (h *harness) cgSettle(group string, ms ...*cgMember) {
	h.t.Helper()
	for range 6 {
		for _, m := range ms {
			if r := h.cgHeartbeat(group, m); r.ErrorCode != 0 {
				h.t.Fatalf("%s: heartbeat: %v", m.id, kerr.ErrorForCode(r.ErrorCode))
			}
		}
	}
	seen := map[int32]bool{}
	for _, m := range ms {
		for _, p := range m.owned {
			if seen[p] {
				h.t.Fatalf("partition %d owned twice", p)
			}
			seen[p] = true
		}
	}
}

// TestConsumerGroupCoordinator: two consumer-protocol members share t1;
// their group survives a restart (saved state: same epochs, no rejoin), a
// member whose session expires is fenced and the other takes all; commits
// are checked against member epochs; a heartbeat whose save fails is
// refused and undone; a classic JoinGroup is refused; DeleteGroups refuses
// the group while it has members.
func TestConsumerGroupCoordinator(t *testing.T) {
	h := newHarness(t)
	apps := &statesApps{memApps: h.apps, states: map[string][]byte{}}
	h.restart(apps)
	a, b := &cgMember{id: "member-a"}, &cgMember{id: "member-b"}
	h.cgSettle("g", a, b)
	if len(a.owned) != 2 || len(b.owned) != 2 {
		t.Fatalf("owned %v and %v", a.owned, b.owned)
	}
	if !consumer.IsConsumerGroupState(apps.states["g"]) {
		t.Fatal("the consumer group's state was not saved")
	}

	h.restart(apps)
	epochA := a.epoch
	if r := h.cgHeartbeat("g", a); r.ErrorCode != 0 || r.MemberEpoch != epochA {
		t.Fatalf("heartbeat after a restart: %v epoch %d (was %d)", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch, epochA)
	}

	// Commits: the member's epoch passes, a newer one is STALE_MEMBER_EPOCH.
	commit := func(member string, epoch int32, part int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.MemberID, req.Generation = 9, "g", member, epoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t1"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = part, 5
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return h.c.CommitOffsets(h.ctx, req).Topics[0].Partitions[0].ErrorCode
	}
	if code := commit(a.id, a.epoch, a.owned[0]); code != 0 {
		t.Fatalf("commit at the member's epoch: %v", kerr.ErrorForCode(code))
	}
	if code := commit(a.id, a.epoch+1, a.owned[0]); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("commit with a newer epoch: %v", kerr.ErrorForCode(code))
	}
	if code := commit("nobody", 3, 0); code != kerr.UnknownMemberID.Code {
		t.Fatalf("commit of an unknown member: %v", kerr.ErrorForCode(code))
	}

	// A classic member whose subscription does not decode may not join
	// (INCONSISTENT_GROUP_PROTOCOL, as Kafka, whose refusal carries no
	// member id); the group may not be deleted.
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "g", "consumer", 10000, 10000
	join.MemberID = "classic-member"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	if r := h.c.JoinGroup(h.ctx, Client{}, join); r.ErrorCode != kerr.InconsistentGroupProtocol.Code || r.MemberID != "" || r.Generation != -1 {
		t.Fatalf("classic join: %v, member id %q, generation %d", kerr.ErrorForCode(r.ErrorCode), r.MemberID, r.Generation)
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g"}
	if r := h.c.DeleteGroups(h.ctx, del); r.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete: %v", kerr.ErrorForCode(r.Groups[0].ErrorCode))
	}

	// A save that fails: the heartbeat is refused and nothing changed.
	c := &cgMember{id: "member-c"}
	apps.mu.Lock()
	apps.refuse = disbackend.ErrUnavailable
	apps.mu.Unlock()
	if r := h.cgHeartbeat("g", c); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("join whose save fails: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	apps.mu.Lock()
	apps.refuse = nil
	apps.mu.Unlock()
	h.inspect("g", func(g *group) {
		if _, ok := g.cg.Members[c.id]; ok || len(g.cg.Members) != 2 {
			t.Errorf("the refused join was kept: members %v", slices.Collect(maps.Keys(g.cg.Members)))
		}
	})

	// b stops heartbeating: its session expires, a takes all four.
	for range 10 {
		h.advance(consumer.DefaultConfig().SessionTimeout / 5)
		h.cgHeartbeat("g", a)
	}
	h.cgSettle("g", a)
	if len(a.owned) != 4 {
		t.Fatalf("after b's session expired a owns %v", a.owned)
	}
	if r := h.cgHeartbeat("g", b); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("b after its session expired: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// A heartbeat that is not a join to a group that does not exist.
	if r := h.cgHeartbeat("nope", &cgMember{id: "x", epoch: 3}); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("heartbeat to a missing group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// The last member leaves: the group stays, Empty, as Kafka keeps it,
	// until DeleteGroups deletes it (its offsets and its saved state).
	a.epoch = consumer.LeaveEpoch
	if r := h.cgHeartbeat("g", a); r.ErrorCode != 0 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	h.flush()
	list := kmsg.NewPtrListGroupsRequest()
	list.Version = 5
	lr := h.c.ListGroups(h.ctx, list)
	if len(lr.Groups) != 1 || lr.Groups[0].GroupType != "consumer" || lr.Groups[0].GroupState != "Empty" {
		t.Fatalf("listed after the last member left: %+v", lr.Groups)
	}
	desc := kmsg.NewPtrConsumerGroupDescribeRequest()
	desc.Groups = []string{"g"}
	if d := h.c.ConsumerGroupDescribe(h.ctx, cgTopics{}, desc).Groups[0]; d.ErrorCode != 0 || d.State != "Empty" {
		t.Fatalf("described after the last member left: %+v", d)
	}
	if r := h.c.DeleteGroups(h.ctx, del); r.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete of the empty consumer group: %v", kerr.ErrorForCode(r.Groups[0].ErrorCode))
	}
	if s := h.waitDead("g"); s != Dead {
		t.Fatalf("deleted consumer group in memory: %v", s)
	}
	apps.mu.Lock()
	_, kept := apps.states["g"]
	apps.mu.Unlock()
	if kept {
		t.Fatal("the deleted consumer group's state is still saved")
	}
}

// TestConsumerGroupRetention: the offsets sweep expires a consumer
// group's offsets one by one by Kafka's rule (docs/consumer-protocol.md
// §9.3): an offset of a subscribed topic stays however old, one of a topic
// no member subscribes to goes once it is the retention old; when the last
// member left, every old offset goes at once (not a retention after the
// group became empty, as for a classic group) and the group with them; an
// empty consumer group without offsets is forgotten.
func TestConsumerGroupRetention(t *testing.T) {
	const retention = 24 * time.Hour
	h := newHarness(t, func(c *Config) {
		c.OffsetsRetention, c.RetentionCheckInterval = retention, 1000*time.Hour
		c.Consumer.SessionTimeout = 1000 * time.Hour // the member lives through the retention
	})
	sweep := func(want ...string) {
		t.Helper()
		deleted, err := h.c.ExpireOffsets(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(deleted, ",") != strings.Join(want, ",") {
			t.Fatalf("deleted %v, want %v", deleted, want)
		}
	}
	a := &cgMember{id: "member-a"}
	h.cgSettle("live", a)
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 9, "live", a.id, a.epoch
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t1"
	rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}
	other := kmsg.NewOffsetCommitRequestTopic() // a topic the member does not subscribe to
	other.Topic = "a.b"
	other.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: 1, Offset: 7}}
	req.Topics = append(req.Topics, rt, other)
	for _, rt := range h.c.CommitOffsets(h.ctx, req).Topics {
		if code := rt.Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("commit to %s: %v", rt.Topic, kerr.ErrorForCode(code))
		}
	}
	checkpoints := func() map[string]bool {
		t.Helper()
		app, _ := disbackend.AppNameForGroup("live")
		cps, err := h.apps.Checkpoints(h.ctx, app, "")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, cp := range cps {
			out[cp.Stream] = true
		}
		return out
	}
	for range 9 { // most of a retention, heartbeating
		h.advance(retention / 10)
		h.cgHeartbeat("live", a)
	}
	sweep()
	if cps := checkpoints(); !cps["t1"] || !cps["a_b"] {
		t.Fatalf("checkpoints before the retention: %v", cps)
	}
	for range 11 {
		h.advance(retention / 10)
		h.cgHeartbeat("live", a)
	}
	sweep()
	if cps := checkpoints(); !cps["t1"] || cps["a_b"] {
		t.Fatalf("checkpoints after the retention: %v, want t1's kept (subscribed), a.b's expired", cps)
	}
	a.epoch = consumer.LeaveEpoch
	h.cgHeartbeat("live", a)
	sweep("live")

	b := &cgMember{id: "member-b"}
	h.cgSettle("bare", b) // no commits
	b.epoch = consumer.LeaveEpoch
	h.cgHeartbeat("bare", b)
	sweep()
	if s := h.waitDead("bare"); s != Dead {
		t.Fatalf("an empty consumer group without offsets after the sweep: %v", s)
	}
}

// TestEmptyConsumerGroupTakenByClassic: a consumer group whose members
// left takes a classic member's join as a classic group (Kafka tombstones
// the empty consumer group, docs/consumer-protocol.md §8.2): the member's
// commits are accepted at its generation and DescribeGroups shows it
// Stable with its member; the consumer group's committed offsets stay.
// (Found by a newcomer's kcat run: the group took the join but refused the
// member's commits with UNKNOWN_MEMBER_ID and was described Dead.)
func TestEmptyConsumerGroupTakenByClassic(t *testing.T) {
	h := newHarness(t)
	a := &cgMember{id: "member-a"}
	h.cgSettle("g", a)
	commit := func(member string, gen int32, offset int64) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.MemberID, req.Generation = 9, "g", member, gen
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t1"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return h.c.CommitOffsets(h.ctx, req).Topics[0].Partitions[0].ErrorCode
	}
	if code := commit(a.id, a.epoch, 7); code != 0 {
		t.Fatalf("the consumer member's commit: %v", kerr.ErrorForCode(code))
	}
	a.epoch = consumer.LeaveEpoch
	if r := h.cgHeartbeat("g", a); r.ErrorCode != 0 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	ids, gen := h.stableGroup("g", 1)
	if code := commit(ids[0], gen, 9); code != 0 {
		t.Fatalf("the classic member's commit: %v", kerr.ErrorForCode(code))
	}
	if d := h.describe("g"); d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != 1 {
		t.Fatalf("described: %+v", d)
	}
	h.inspect("g", func(g *group) {
		if g.cg != nil {
			t.Errorf("still a consumer group: %+v", g.cg)
		}
	})
	if f := h.fetch("g", map[string][]int32{"t1": {0}}); f.Topics[0].Partitions[0].Offset != 9 {
		t.Fatalf("offset after the classic commit: %+v", f.Topics[0].Partitions[0])
	}
}

// TestReservedGroupID: a group id that starts as the GROUP configs' keys
// in the group state store do is refused (INVALID_GROUP_ID), so that its
// state can never be saved over another group's configs (a newcomer's
// review: a heartbeat to "\x00group-config\x00victim" erased victim's
// overrides).
func TestReservedGroupID(t *testing.T) {
	h := newHarness(t)
	apps := &statesApps{memApps: h.apps, states: map[string][]byte{}}
	h.restart(apps)
	if err := h.c.SetGroupConfig(h.ctx, "victim", GroupConfig{ConsumerHeartbeatIntervalConfig: 7000}); err != nil {
		t.Fatal(err)
	}
	bad := disbackend.GroupConfigStateKey("victim")
	if r := h.cgHeartbeat(bad, &cgMember{id: "member-x"}); r.ErrorCode != kerr.InvalidGroupID.Code {
		t.Fatalf("consumer heartbeat to %q: %v", bad, kerr.ErrorForCode(r.ErrorCode))
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = bad, "consumer", 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	if r := h.c.JoinGroup(h.ctx, Client{}, join); r.ErrorCode != kerr.InvalidGroupID.Code {
		t.Fatalf("classic join to %q: %v", bad, kerr.ErrorForCode(r.ErrorCode))
	}
	if got, err := h.c.GroupConfig(h.ctx, "victim"); err != nil || got[ConsumerHeartbeatIntervalConfig] != 7000 {
		t.Fatalf("victim's configs after the requests to %q: %v, %v", bad, got, err)
	}
}
