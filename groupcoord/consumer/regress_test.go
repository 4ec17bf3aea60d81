package consumer

// Regressions a review found (a newcomer's tests, kept): each failed, or
// panicked, before the fix it guards.

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A static member that changes its instance id on a rejoin (epoch 0, same
// member id) leaves the old instance id in g.static; once it leaves, a new
// member joining with the old instance id finds g.static[old] pointing at
// a member that does not exist: nil dereference in Group.member.
func TestRegressStaleStaticIndexPanics(t *testing.T) {
	topics := fakeTopics{"t": 2}
	g := NewGroup("g")
	cfg := DefaultConfig()
	i1, i2 := "I1", "I2"
	a := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}, instance: &i1}
	a.mustHeartbeat()
	// Rejoin with the same member id under another instance id.
	a.epoch, a.owned, a.instance = 0, nil, &i2
	a.mustHeartbeat()
	t.Logf("static index after the instance id change: %v", g.static)
	// Leave for good (-1) under the new instance id.
	a.epoch = LeaveEpoch
	if _, _, err := a.heartbeat(); err != nil {
		t.Fatal(err)
	}
	t.Logf("static index after leaving: %v, members %d", g.static, len(g.Members))
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("a new member with instance id I1 panicked the group: %v", r)
		}
	}()
	b := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}, instance: &i1}
	b.mustHeartbeat()
}

// The same stale index reached through the static leave path (-2) and the
// regular heartbeat path (epoch > 0): both dereference g.Members[g.static[..]].
func TestRegressStaleStaticIndexLeavePanics(t *testing.T) {
	topics := fakeTopics{"t": 2}
	g := NewGroup("g")
	cfg := DefaultConfig()
	i1, i2 := "I1", "I2"
	a := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}, instance: &i1}
	a.mustHeartbeat()
	a.epoch, a.owned, a.instance = 0, nil, &i2
	a.mustHeartbeat()
	id := a.id
	g.Fence(id) // session expired
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("a -2 leave naming the stale instance id panicked: %v", r)
		}
	}()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = 1, "g", id, StaticLeaveEpoch, &i1
	if err := ValidateHeartbeat(cfg, req); err != nil {
		t.Fatal(err)
	}
	_, _, err := g.Heartbeat(cfg, topics, req, "c", "h")
	t.Logf("err %v", err)
}

// docs/consumer-protocol.md §3: "The replacement does not bump the group
// epoch by itself". With the replaced member's ServerAssignor counted twice
// (old id not skipped: member.ID is already the new id), the preferred
// assignor seems to change and the epoch is bumped.
func TestRegressStaticReplaceAssignorDoubleCount(t *testing.T) {
	topics := fakeTopics{"t": 6}
	g := NewGroup("g")
	cfg := DefaultConfig()
	rng, uni := "range", "uniform"
	inst := "s"
	join := func(id string, instance *string, assignor *string) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = 1, "g", id, 0, instance
		req.RebalanceTimeoutMillis, req.SubscribedTopicNames, req.ServerAssignor = 1000, []string{"t"}, assignor
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if err := ValidateHeartbeat(cfg, req); err != nil {
			t.Fatal(err)
		}
		resp, _, err := g.Heartbeat(cfg, topics, req, "c", "h")
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	join("s1", &inst, &rng)
	join("u1", nil, &uni)
	join("u2", nil, &uni)
	// s1 leaves for a restart.
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = 1, "g", "s1", StaticLeaveEpoch, &inst
	if _, _, err := g.Heartbeat(cfg, topics, req, "c", "h"); err != nil {
		t.Fatal(err)
	}
	before := g.Epoch
	join("s2", &inst, nil) // comes back under a new id, same subscription, same assignor
	if g.Epoch != before {
		t.Fatalf("static replacement bumped the group epoch %d -> %d (spec §3: no bump)", before, g.Epoch)
	}
}

// §2.7: "a new member whose subscription is empty ([] and no regex) and who
// names no assignor joins without a bump". The first member of a new group
// bumps it: MetadataHash starts at 0 and the hash of nothing is FNV's
// offset basis.
func TestRegressEmptySubscriptionFirstMemberBumps(t *testing.T) {
	topics := fakeTopics{"t": 2}
	g := NewGroup("g")
	cfg := DefaultConfig()
	a := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{}}
	a.mustHeartbeat()
	if g.Epoch != 1 {
		t.Fatalf("a member subscribed to nothing bumped a new group to epoch %d (spec §2.7: no bump; a new group is at 1)", g.Epoch)
	}
}

// §2.2 step 1: Kafka 4.4 starts a new consumer group at group epoch 1 and
// assignment epoch 1 (ModernGroup, TargetAssignmentMetadata.INITIAL), so
// its first member joins at epoch 2 ("Bumped group epoch to 2" in a Kafka
// 4.4 broker's log, where disgw said 1 before; kafka-diff's
// consumer-groups sequence found it too).
func TestRegressNewGroupStartsAtEpochOne(t *testing.T) {
	topics := fakeTopics{"t": 2}
	g := NewGroup("g")
	if g.Epoch != 1 || g.AssignmentEpoch != 1 || g.State() != Empty {
		t.Fatalf("new group: epochs %d/%d, state %s; want 1/1, Empty", g.Epoch, g.AssignmentEpoch, g.State())
	}
	cfg := DefaultConfig()
	a := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}}
	a.mustHeartbeat()
	if g.Epoch != 2 || g.AssignmentEpoch != 2 || a.epoch != 2 {
		t.Fatalf("first join: group epochs %d/%d, member epoch %d; want 2", g.Epoch, g.AssignmentEpoch, a.epoch)
	}
	if d := g.Describe(cfg, topics); d.Epoch != 2 || d.AssignmentEpoch != 2 {
		t.Fatalf("describe after the first join: %+v", d)
	}
}

// §2.9: fencing recomputes the metadata hash without the member, then bumps
// once. Fence does not recompute MetadataHash, so the next heartbeat of a
// remaining member bumps a second time.
func TestRegressFenceThenHeartbeatDoubleBump(t *testing.T) {
	topics := fakeTopics{"t": 2, "u": 2}
	g := NewGroup("g")
	cfg := DefaultConfig()
	a := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}}
	b := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"u"}}
	a.mustHeartbeat()
	settle(t, g, 5, a, b)
	e := g.Epoch
	g.Fence(b.id)
	if g.Epoch != e+1 {
		t.Fatalf("fence: epoch %d, want %d", g.Epoch, e+1)
	}
	a.mustHeartbeat()
	if g.Epoch != e+1 {
		t.Fatalf("a's heartbeat after b was fenced bumped the group epoch again: %d, want %d (spec §2.9: the hash is recomputed at the fence)", g.Epoch, e+1)
	}
}

// Errors must leave the group unchanged: a failed heartbeat of many kinds.
func TestRegressFailedHeartbeatsChangeNothing(t *testing.T) {
	topics := fakeTopics{"t": 4}
	g := NewGroup("g")
	cfg := DefaultConfig()
	inst := "i"
	a := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}, instance: &inst}
	b := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}}
	a.mustHeartbeat()
	b.mustHeartbeat()
	snap := func() string {
		d, err := g.MarshalState()
		if err != nil {
			t.Fatal(err)
		}
		return string(d)
	}
	before := snap()
	cases := []func(){
		func() { c := *a; c.epoch = a.epoch + 5; c.heartbeat() },
		func() { c := *b; c.epoch = b.epoch + 5; c.subs = []string{"x"}; c.heartbeat() },
		func() { c := *a; c.id = "other"; c.epoch = 0; c.owned = nil; c.heartbeat() },                      // unreleased instance
		func() { c := *a; c.id = "other"; c.epoch = 3; c.heartbeat() },                                     // fenced instance
		func() { c := &client{t: t, g: g, cfg: cfg, topics: topics, id: "nope", epoch: 4}; c.heartbeat() }, // unknown
	}
	for i, f := range cases {
		f()
		if after := snap(); after != before {
			t.Fatalf("case %d: a failed heartbeat changed the group:\n%s\n%s", i, before, after)
		}
	}
}

// LoadGroup's "coherent" check does not cover two members holding the same
// partition: it loads, the owners index keeps whichever member came last in
// the file, and the FuzzLoadGroup property (load, save, load gives the same
// group) fails because MarshalState sorts members by id.
func TestRegressLoadGroupSharedPartition(t *testing.T) {
	data := `{"type":"consumer","version":1,"id":"g","epoch":5,"assignment_epoch":5,"members":[` +
		`{"id":"b","member_epoch":5,"topics":["t"],"assigned":{"t":{"0":5}}},` +
		`{"id":"a","member_epoch":3,"topics":["t"],"assigned":{"t":{"0":3}}}]}`
	g, err := LoadGroup([]byte(data))
	if err != nil {
		t.Logf("refused (good): %v", err)
		return
	}
	again, _ := g.MarshalState()
	g2, err := LoadGroup(again)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, g2) {
		t.Errorf("t/0 held by a and b loads; round trip differs: owners %v then %v", g.owners, g2.owners)
	}
}

// A rebalance timeout of more than ~292 years in ms overflows
// time.Duration: the round trip changes the value.
func TestRegressLoadGroupTimeoutOverflow(t *testing.T) {
	data := `{"type":"consumer","version":1,"id":"g","members":[{"id":"a","rebalance_timeout_ms":9223372036855}]}`
	g, err := LoadGroup([]byte(data))
	if err != nil {
		t.Logf("refused (good): %v", err)
		return
	}
	again, _ := g.MarshalState()
	g2, err := LoadGroup(again)
	if err != nil {
		t.Fatalf("loaded, but its saved form does not load: %v (%s)", err, again)
	}
	if !reflect.DeepEqual(g, g2) {
		t.Errorf("round trip changed the group: timeout %v then %v (%s)", g.Members["a"].RebalanceTimeout, g2.Members["a"].RebalanceTimeout, again)
	}
}

// A join with RebalanceTimeoutMs -5 passes ValidateHeartbeat (only -1 is
// refused, as in Kafka) and is stored; MarshalState writes it and LoadGroup
// refuses the result ("a negative timeout"): the group's saved state no
// longer loads.
func TestRegressNegativeRebalanceTimeoutUnloadable(t *testing.T) {
	topics := fakeTopics{"t": 2}
	g := NewGroup("g")
	cfg := DefaultConfig()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, "g", "m", 0
	req.RebalanceTimeoutMillis, req.SubscribedTopicNames = -5, []string{"t"}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if err := ValidateHeartbeat(cfg, req); err != nil {
		t.Logf("refused at validation: %v", err)
		return
	}
	if _, _, err := g.Heartbeat(cfg, topics, req, "c", "h"); err != nil {
		t.Fatal(err)
	}
	data, err := g.MarshalState()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadGroup(data); err != nil {
		t.Fatalf("a heartbeat the group accepted left a state that does not load: %v", err)
	}
}

// idTopics is a Topics whose ids change when a topic is created again.
type idTopics struct {
	n   map[string]int32
	ids map[string][16]byte
}

func (f *idTopics) Partitions(t string) (int32, bool) { n, ok := f.n[t]; return n, ok }
func (f *idTopics) ID(t string) ([16]byte, bool)      { id, ok := f.ids[t]; return id, ok }
func (f *idTopics) Names() []string {
	var out []string
	for t := range f.n {
		out = append(out, t)
	}
	return out
}
func (f *idTopics) Name(id [16]byte) (string, bool) {
	for t, i := range f.ids {
		if i == id {
			return t, true
		}
	}
	return "", false
}

// A topic deleted and created again (same name, a new topic id, as
// localstore.newTopicID gives) between two heartbeats: the group keys
// partitions by name and its metadata hash is name + partition count, so
// nothing changes for it; the member keeps "holding" t/0-1 and the response
// carries no assignment, while the client holds partitions of the old
// topic id. The new topic's partitions are consumed by no one. Kafka's
// hash covers the topic id (§10.2, computeTopicHash): a bump, and the
// member is sent the new topic id.
func TestRegressTopicRecreatedSameName(t *testing.T) {
	topics := &idTopics{n: map[string]int32{"t": 2}, ids: map[string][16]byte{"t": {1}}}
	g := NewGroup("g")
	cfg := DefaultConfig()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, "g", "m", 0
	req.RebalanceTimeoutMillis, req.SubscribedTopicNames = 1000, []string{"t"}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp, _, err := g.Heartbeat(cfg, topics, req, "c", "h")
	if err != nil || resp.Assignment == nil || len(resp.Assignment.Topics) != 1 {
		t.Fatalf("join: %v %+v", err, resp)
	}
	epoch := resp.MemberEpoch
	// Deleted and created again.
	topics.ids["t"] = [16]byte{2}
	req = kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = 1, "g", "m", epoch, -1
	rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
	rt.TopicID, rt.Partitions = [16]byte{1}, []int32{0, 1} // what the client holds: the old id
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{rt}
	resp, _, err = g.Heartbeat(cfg, topics, req, "c", "h")
	if err != nil {
		t.Fatal(err)
	}
	if resp.Assignment == nil {
		t.Fatalf("topic t re-created with a new id: group epoch %d, member epoch %d, no assignment sent; the member still holds %v by name", g.Epoch, resp.MemberEpoch, g.Members["m"].Assigned)
	}
}
