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

// fakeTopics is a Topics of fixed partition counts; topic ids are the
// name's first bytes.
type fakeTopics map[string]int32

func (f fakeTopics) Partitions(t string) (int32, bool) { n, ok := f[t]; return n, ok }

func (f fakeTopics) Names() []string { return slices.Collect(maps.Keys(f)) }

func (f fakeTopics) ID(t string) ([16]byte, bool) {
	var id [16]byte
	_, ok := f[t]
	copy(id[:], t)
	return id, ok
}

func (f fakeTopics) Name(id [16]byte) (string, bool) {
	for t := range f {
		if tid, _ := f.ID(t); tid == id {
			return t, true
		}
	}
	return "", false
}

// client is one consumer's side of the protocol, as the Java and kgo
// consumers behave: it sends its owned partitions, and revokes at once
// what the assignment no longer holds.
type client struct {
	t        *testing.T
	g        *Group
	cfg      Config
	topics   fakeTopics
	id       string
	instance *string
	epoch    int32
	subs     []string
	owned    map[string][]int32
}

func (c *client) heartbeat() (*kmsg.ConsumerGroupHeartbeatResponse, Timers, error) {
	if c.id == "" {
		c.id = NewMemberID() // v1: the client makes its member id (KIP-1082)
	}
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = c.g.ID, c.id, c.epoch, c.instance
	req.RebalanceTimeoutMillis = -1
	if c.epoch == JoinEpoch {
		req.RebalanceTimeoutMillis = 300000
		req.SubscribedTopicNames = c.subs
	}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if c.owned == nil && c.epoch != JoinEpoch {
		req.Topics = nil // not sent
	}
	for _, t := range slices.Sorted(maps.Keys(c.owned)) {
		if c.epoch == JoinEpoch {
			break
		}
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID, _ = c.topics.ID(t)
		rt.Partitions = c.owned[t]
		req.Topics = append(req.Topics, rt)
	}
	if err := ValidateHeartbeat(c.cfg, req); err != nil {
		return nil, Timers{}, err
	}
	resp, timers, err := c.g.Heartbeat(c.cfg, c.topics, req, "client-"+c.id, "/127.0.0.1")
	if err != nil {
		return nil, timers, err
	}
	c.id, c.epoch = *resp.MemberID, resp.MemberEpoch
	if resp.Assignment != nil {
		c.owned = map[string][]int32{}
		for _, at := range resp.Assignment.Topics {
			name, ok := c.topics.Name(at.TopicID)
			if !ok {
				c.t.Fatalf("assignment of unknown topic id %x", at.TopicID)
			}
			c.owned[name] = at.Partitions
		}
	}
	return resp, timers, nil
}

func (c *client) mustHeartbeat() Timers {
	c.t.Helper()
	_, timers, err := c.heartbeat()
	if err != nil {
		c.t.Fatalf("%s: heartbeat: %v", c.id, err)
	}
	return timers
}

func count(owned map[string][]int32) int {
	n := 0
	for _, ps := range owned {
		n += len(ps)
	}
	return n
}

// settle heartbeats every client in turn until the group is Stable, and
// fails if that takes more than rounds rounds.
func settle(t *testing.T, g *Group, rounds int, cs ...*client) {
	t.Helper()
	for range rounds {
		for _, c := range cs {
			c.mustHeartbeat()
		}
		if g.State() == StableState {
			return
		}
	}
	t.Fatalf("not stable after %d rounds: state %s, epoch %d/%d", rounds, g.State(), g.Epoch, g.AssignmentEpoch)
}

// checkOwnership fails unless the clients own every partition of the
// topics exactly once between them.
func checkOwnership(t *testing.T, topics fakeTopics, cs ...*client) {
	t.Helper()
	seen := map[tp]string{}
	for _, c := range cs {
		for topic, ps := range c.owned {
			for _, p := range ps {
				if o, dup := seen[tp{topic, p}]; dup {
					t.Fatalf("%s/%d owned by %s and %s", topic, p, o, c.id)
				}
				seen[tp{topic, p}] = c.id
			}
		}
	}
	for topic, n := range topics {
		for p := range n {
			if _, ok := seen[tp{topic, p}]; !ok {
				t.Fatalf("%s/%d owned by no one", topic, p)
			}
		}
	}
}

func TestGroupJoinRebalanceLeave(t *testing.T) {
	topics := fakeTopics{"t": 4}
	g := NewGroup("g")
	cfg := DefaultConfig()
	a := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}}
	resp, timers, err := a.heartbeat()
	if err != nil {
		t.Fatal(err)
	}
	if a.id == "" || a.epoch != 2 || count(a.owned) != 4 || resp.HeartbeatIntervalMillis != 5000 || !slices.Equal(timers.Session, []string{a.id}) {
		t.Fatalf("first member: id %q epoch %d owned %v interval %d timers %+v", a.id, a.epoch, a.owned, resp.HeartbeatIntervalMillis, timers)
	}
	if g.State() != StableState {
		t.Fatalf("state %s, want Stable", g.State())
	}

	// b joins: the group epoch moves to 3; b waits for a's partitions.
	b := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}}
	b.mustHeartbeat()
	if g.Epoch != 3 || b.epoch != 3 || count(b.owned) != 0 || g.State() != Reconciling {
		t.Fatalf("b joined: group epoch %d, b epoch %d owned %v, state %s", g.Epoch, b.epoch, b.owned, g.State())
	}
	if m := g.Members[b.id]; m.State != UnreleasedPartitions {
		t.Fatalf("b: state %s, want unreleased_partitions", m.State)
	}

	// a's heartbeat, still owning all four: it must revoke two first,
	// at its epoch; a rebalance timer starts.
	a.owned = map[string][]int32{"t": {0, 1, 2, 3}}
	resp, timers, err = a.heartbeat()
	if err != nil {
		t.Fatal(err)
	}
	if resp.Assignment == nil {
		t.Fatal("a's assignment shrank but the response has none")
	}
	if a.epoch != 2 || count(a.owned) != 2 || len(timers.Rebalance) != 1 || timers.Rebalance[0].Epoch != 2 || timers.Rebalance[0].Timeout != 5*time.Minute {
		t.Fatalf("a revoking: epoch %d owned %v timers %+v", a.epoch, a.owned, timers)
	}
	if m := g.Members[a.id]; m.State != UnrevokedPartitions || len(m.PendingRevocation["t"]) != 2 {
		t.Fatalf("a: %+v", m.Member)
	}
	// Revoked (the client reports two): a moves to epoch 3.
	a.mustHeartbeat()
	if a.epoch != 3 || g.Members[a.id].State != Stable {
		t.Fatalf("a after revoking: epoch %d state %s", a.epoch, g.Members[a.id].State)
	}
	// b gets the released two.
	b.mustHeartbeat()
	if count(b.owned) != 2 || g.State() != StableState {
		t.Fatalf("b: owned %v, group %s", b.owned, g.State())
	}
	checkOwnership(t, topics, a, b)

	// a leaves: epoch 4; b takes everything at its next heartbeats.
	a.epoch = LeaveEpoch
	resp, timers, err = a.heartbeat()
	if err != nil || resp.MemberEpoch != LeaveEpoch || !slices.Equal(timers.Cancel, []string{a.id}) {
		t.Fatalf("leave: %v, %+v, %+v", err, resp, timers)
	}
	if _, ok := g.Members[a.id]; ok || g.Epoch != 4 {
		t.Fatalf("after leave: members %v, epoch %d", slices.Collect(maps.Keys(g.Members)), g.Epoch)
	}
	settle(t, g, 3, b)
	if count(b.owned) != 4 || b.epoch != 4 {
		t.Fatalf("b alone: epoch %d owned %v", b.epoch, b.owned)
	}

	// b fenced (session expired): the group is empty at epoch 5, its
	// target assignment epoch too.
	if timers := g.Fence(b.id); !slices.Equal(timers.Cancel, []string{b.id}) || g.State() != Empty || g.Epoch != 5 || g.AssignmentEpoch != 5 {
		t.Fatalf("fence: %+v, state %s, epochs %d/%d", timers, g.State(), g.Epoch, g.AssignmentEpoch)
	}
	if _, _, err := b.heartbeat(); !errors.Is(err, kerr.UnknownMemberID) {
		t.Fatalf("heartbeat after fencing: %v, want UNKNOWN_MEMBER_ID", err)
	}
}

func TestGroupManyMembers(t *testing.T) {
	topics := fakeTopics{"a": 7, "b": 5}
	g := NewGroup("g")
	cfg := DefaultConfig()
	var cs []*client
	for i := range 5 {
		c := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"a", "b"}}
		cs = append(cs, c)
		settle(t, g, 10, cs...)
		checkOwnership(t, topics, cs...)
		for _, c := range cs {
			if n := count(c.owned); n < 12/(i+1) || n > 12/(i+1)+1 {
				t.Fatalf("%d members: %s owns %d", i+1, c.id, n)
			}
		}
	}
	// Two leave, one changes its subscription to b only.
	for _, c := range cs[:2] {
		c.epoch = LeaveEpoch
		if _, _, err := c.heartbeat(); err != nil {
			t.Fatal(err)
		}
	}
	cs = cs[2:]
	cs[0].subs = []string{"b"}
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis, req.SubscribedTopicNames = "g", cs[0].id, cs[0].epoch, -1, []string{"b"}
	for topic, ps := range cs[0].owned {
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID, _ = topics.ID(topic)
		rt.Partitions = ps
		req.Topics = append(req.Topics, rt)
	}
	if _, _, err := g.Heartbeat(cfg, topics, req, "c", "h"); err != nil {
		t.Fatal(err)
	}
	if m := g.Members[cs[0].id]; len(m.Assigned["a"]) != 0 || (len(m.PendingRevocation["a"]) == 0 && len(cs[0].owned["a"]) > 0) {
		t.Fatalf("unsubscribed from a: %+v", m.Member)
	}
	// The client drops what the server no longer assigns it.
	cs[0].owned = map[string][]int32{"b": cs[0].owned["b"]}
	settle(t, g, 10, cs...)
	checkOwnership(t, topics, cs...)
	if len(cs[0].owned["a"]) != 0 {
		t.Fatalf("the member subscribed to b only owns %v", cs[0].owned)
	}
}

func TestGroupEpochFencing(t *testing.T) {
	topics := fakeTopics{"t": 2}
	g := NewGroup("g")
	cfg := DefaultConfig()
	a := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}}
	a.mustHeartbeat()
	b := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}}
	settle(t, g, 5, a, b)
	c3 := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}}
	settle(t, g, 5, a, b, c3)
	m := g.Members[a.id]
	if m.MemberEpoch != 4 || m.PreviousMemberEpoch != 3 {
		t.Fatalf("a: epoch %d, previous %d: want 4, 3", m.MemberEpoch, m.PreviousMemberEpoch)
	}

	for _, tc := range []struct {
		name  string
		epoch int32
		owned map[string][]int32
		want  error
	}{
		{"greater epoch", m.MemberEpoch + 1, a.owned, kerr.FencedMemberEpoch},
		{"older epoch, not the previous one", m.MemberEpoch - 2, a.owned, kerr.FencedMemberEpoch},
		{"previous epoch owning a partition no longer assigned", m.PreviousMemberEpoch, map[string][]int32{"t": {0, 1}}, kerr.FencedMemberEpoch},
		{"previous epoch, owned partitions not sent", m.PreviousMemberEpoch, nil, kerr.FencedMemberEpoch},
		{"previous epoch, owned partitions assigned (lost response)", m.PreviousMemberEpoch, a.owned, nil},
		{"current epoch", m.MemberEpoch, a.owned, nil},
	} {
		c := *a
		c.epoch, c.owned = tc.epoch, tc.owned
		_, _, err := c.heartbeat()
		if !errors.Is(err, tc.want) && !(err == nil && tc.want == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	c := &client{t: t, g: g, cfg: cfg, topics: topics, id: "nobody", epoch: 3}
	if _, _, err := c.heartbeat(); !errors.Is(err, kerr.UnknownMemberID) {
		t.Errorf("unknown member: %v", err)
	}
}

func TestGroupStaticMembers(t *testing.T) {
	topics := fakeTopics{"t": 4}
	g := NewGroup("g")
	cfg := DefaultConfig()
	inst := "i1"
	a := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}, instance: &inst}
	b := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}}
	a.mustHeartbeat()
	settle(t, g, 5, a, b)
	before, epoch := a.owned, g.Epoch

	// Another process with the same instance id while a is there.
	dup := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}, instance: &inst}
	if _, _, err := dup.heartbeat(); !errors.Is(err, kerr.UnreleasedInstanceID) {
		t.Fatalf("second instance: %v, want UNRELEASED_INSTANCE_ID", err)
	}
	// a leaves for a restart (-2): no rebalance, its partitions held.
	a.epoch = StaticLeaveEpoch
	if resp, _, err := a.heartbeat(); err != nil || resp.MemberEpoch != StaticLeaveEpoch {
		t.Fatalf("static leave: %v %+v", err, resp)
	}
	if g.Epoch != epoch {
		t.Fatalf("static leave bumped the epoch to %d", g.Epoch)
	}
	b.mustHeartbeat()
	if count(b.owned) != 2 {
		t.Fatalf("b took a's partitions while a restarts: %v", b.owned)
	}
	// a comes back under a new member id: same partitions, no rebalance.
	back := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}, instance: &inst}
	_, timers, err := back.heartbeat()
	if err != nil {
		t.Fatal(err)
	}
	if back.id == a.id || !maps.EqualFunc(back.owned, before, slices.Equal) || g.Epoch != epoch || !slices.Contains(timers.Cancel, a.id) {
		t.Fatalf("rejoined: id %s (was %s), owned %v (was %v), epoch %d (was %d), timers %+v", back.id, a.id, back.owned, before, g.Epoch, epoch, timers)
	}
	if _, ok := g.Members[a.id]; ok {
		t.Fatal("the replaced member id is still in the group")
	}
	// The old member id is fenced out.
	a.epoch = back.epoch
	if _, _, err := a.heartbeat(); !errors.Is(err, kerr.FencedInstanceID) {
		t.Fatalf("old member id: %v, want FENCED_INSTANCE_ID", err)
	}
	checkOwnership(t, topics, back, b)
}

func TestGroupRebalanceTimeout(t *testing.T) {
	topics := fakeTopics{"t": 2}
	g := NewGroup("g")
	cfg := DefaultConfig()
	a := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}}
	a.mustHeartbeat()
	b := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}}
	b.mustHeartbeat()
	timers := a.mustHeartbeat() // must revoke one
	if len(timers.Rebalance) != 1 {
		t.Fatalf("timers %+v", timers)
	}
	rt := timers.Rebalance[0]
	if got := g.RebalanceExpired(rt.MemberID, rt.Epoch-1); len(got.Cancel) != 0 {
		t.Fatal("a timer of another epoch fenced the member")
	}
	if got := g.RebalanceExpired(rt.MemberID, rt.Epoch); !slices.Equal(got.Cancel, []string{a.id}) {
		t.Fatalf("expired: %+v", got)
	}
	settle(t, g, 3, b)
	if count(b.owned) != 2 {
		t.Fatalf("b after a was fenced: %v", b.owned)
	}
}

func TestGroupMaxSizeAndAssignors(t *testing.T) {
	topics := fakeTopics{"t": 6}
	g := NewGroup("g")
	cfg := DefaultConfig()
	cfg.MaxSize = 1
	a := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}}
	a.mustHeartbeat()
	b := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}}
	if _, _, err := b.heartbeat(); !errors.Is(err, kerr.GroupMaxSizeReached) {
		t.Fatalf("second member of a group of 1: %v", err)
	}

	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberEpoch, req.RebalanceTimeoutMillis, req.SubscribedTopicNames = "g", 0, 1000, []string{"t"}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	bad := "sticky"
	req.ServerAssignor = &bad
	if err := ValidateHeartbeat(cfg, req); !errors.Is(err, kerr.UnsupportedAssignor) {
		t.Fatalf("assignor %q: %v", bad, err)
	}
	for _, tc := range []struct {
		name string
		edit func(r *kmsg.ConsumerGroupHeartbeatRequest)
	}{
		{"v1 without member id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Version = 1 }},
		{"blank group", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = " " }},
		{"join without rebalance timeout", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }},
		{"join owning partitions", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.Topics = make([]kmsg.ConsumerGroupHeartbeatRequestTopic, 1)
		}},
		{"join without subscription", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }},
		{"static leave without instance id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch, r.MemberID = -2, "m" }},
		{"epoch -3", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch, r.MemberID = -3, "m" }},
	} {
		r := *req
		r.ServerAssignor = nil
		tc.edit(&r)
		if err := ValidateHeartbeat(cfg, &r); !errors.Is(err, kerr.InvalidRequest) {
			t.Errorf("%s: %v, want INVALID_REQUEST", tc.name, err)
		}
	}

	// A member naming range makes it the group's assignor: the epoch moves.
	cfg.MaxSize = 10
	epoch := g.Epoch
	rng := "range"
	req = kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis, req.ServerAssignor = "g", a.id, a.epoch, -1, &rng
	if _, _, err := g.Heartbeat(cfg, topics, req, "c", "h"); err != nil {
		t.Fatal(err)
	}
	if g.Epoch != epoch+1 || g.preferredAssignor(cfg, nil, nil) != "range" {
		t.Fatalf("epoch %d (was %d), assignor %s", g.Epoch, epoch, g.preferredAssignor(cfg, nil, nil))
	}
}

func TestGroupTopicGrows(t *testing.T) {
	topics := fakeTopics{"t": 2}
	g := NewGroup("g")
	cfg := DefaultConfig()
	a := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t", "later"}}
	settle(t, g, 3, a)
	epoch := g.Epoch
	topics["t"] = 3
	topics["later"] = 1
	settle(t, g, 3, a)
	if g.Epoch != epoch+1 || count(a.owned) != 4 {
		t.Fatalf("after the topics changed: epoch %d (was %d), owned %v", g.Epoch, epoch, a.owned)
	}
}

func TestGroupRegexSubscription(t *testing.T) {
	topics := fakeTopics{"orders-eu": 2, "orders-us": 2, "payments": 2}
	g := NewGroup("g")
	cfg := DefaultConfig()
	a := &client{t: t, g: g, cfg: cfg, topics: topics}
	re := "orders-.*"
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.RebalanceTimeoutMillis, req.SubscribedTopicRegex = 1, "g", "member-a", 30000, &re
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if err := ValidateHeartbeat(cfg, req); err != nil {
		t.Fatal(err)
	}
	resp, _, err := g.Heartbeat(cfg, topics, req, "c", "h")
	if err != nil {
		t.Fatal(err)
	}
	a.id, a.epoch = *resp.MemberID, resp.MemberEpoch
	a.owned = map[string][]int32{}
	for _, at := range resp.Assignment.Topics {
		name, _ := topics.Name(at.TopicID)
		a.owned[name] = at.Partitions
	}
	if count(a.owned) != 4 || len(a.owned["payments"]) != 0 {
		t.Fatalf("regex %q: owned %v", re, a.owned)
	}
	if d := g.Describe(cfg, topics); d.Members[0].SubscribedTopicRegex == nil || *d.Members[0].SubscribedTopicRegex != re {
		t.Fatalf("describe: %+v", d.Members[0])
	}
	// A topic created later that matches is picked up at the next
	// heartbeat; one that does not, not; "orders" alone does not match
	// the whole-name pattern.
	topics["orders-asia"] = 3
	topics["orders"] = 1
	topics["archive-orders-x"] = 1 // matches only if not anchored
	topics["other"] = 1
	epoch := g.Epoch
	settle(t, g, 3, a)
	if g.Epoch != epoch+1 || count(a.owned) != 7 || len(a.owned["orders"]) != 0 || len(a.owned["archive-orders-x"]) != 0 {
		t.Fatalf("after new topics: epoch %d (was %d), owned %v", g.Epoch, epoch, a.owned)
	}

	// An invalid regular expression.
	bad := "orders-("
	req2 := *req
	req2.MemberID, req2.SubscribedTopicRegex = "member-b", &bad
	if _, _, err := g.Heartbeat(cfg, topics, &req2, "c", "h"); !errors.Is(err, kerr.InvalidRegularExpression) {
		t.Fatalf("invalid regex: %v", err)
	}
	if _, ok := g.Members["member-b"]; ok {
		t.Fatal("the refused member joined")
	}

	// The member drops its regex for a name: the others are revoked.
	empty := ""
	req3 := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req3.Version, req3.Group, req3.MemberID, req3.MemberEpoch, req3.RebalanceTimeoutMillis = 1, "g", a.id, a.epoch, -1
	req3.SubscribedTopicRegex, req3.SubscribedTopicNames = &empty, []string{"payments"}
	if _, _, err := g.Heartbeat(cfg, topics, req3, "c", "h"); err != nil {
		t.Fatal(err)
	}
	a.owned = map[string][]int32{} // the client revoked what it was told
	settle(t, g, 4, a)
	if count(a.owned) != 2 || len(a.owned["payments"]) != 2 {
		t.Fatalf("after dropping the regex: %v", a.owned)
	}
	if len(g.regexes) != 0 {
		t.Fatalf("a regex no member uses is kept: %v", g.regexes)
	}
}
