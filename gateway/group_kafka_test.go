package gateway_test

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/gateway"
)

// The answers these tests expect are Kafka 4.4's (a one-node KRaft broker
// asked the same requests, 2026-12-02).

func noInitialDelay(c *gateway.Config) { c.GroupInitialRebalanceDelay = -1 }

func ptrTo(s string) *string { return &s }

func syncRaw(t *testing.T, rc *rawConn, v int16, group, member string, gen int32, instance *string, assign map[string][]byte) *kmsg.SyncGroupResponse {
	t.Helper()
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Group, sr.MemberID, sr.Generation, sr.InstanceID = group, member, gen, instance
	pt, pn := "consumer", "range"
	sr.ProtocolType, sr.Protocol = &pt, &pn
	for id, a := range assign {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = id, a
		sr.GroupAssignment = append(sr.GroupAssignment, ga)
	}
	return rc.roundTrip(v, sr).(*kmsg.SyncGroupResponse)
}

// TestGroupRebalanceTimeoutZero: a member that joins with a rebalance
// timeout of 0 gets its JoinGroup answer, but the SyncGroup deadline (the
// rebalance timeout) has passed by the time its SyncGroup arrives: it is
// removed and gets UNKNOWN_MEMBER_ID, and so does its heartbeat, as Kafka
// 4.4 answers (completeClassicGroupJoin schedules the pending-sync
// expiry after group.rebalanceTimeoutMs()).
func TestGroupRebalanceTimeoutZero(t *testing.T) {
	g := startGateway(t, noInitialDelay)
	rc := g.raw(t)
	req := joinReq("rt0", "", "consumer", proto("range", []byte{0, 1}))
	req.RebalanceTimeoutMillis = 0
	j := joinRaw(t, rc, 5, req)
	if j.ErrorCode != 0 || j.Generation != 1 || j.LeaderID != j.MemberID {
		t.Fatalf("join: %+v", j)
	}
	time.Sleep(50 * time.Millisecond)
	if s := syncRaw(t, rc, 3, "rt0", j.MemberID, j.Generation, nil, map[string][]byte{j.MemberID: {9}}); s.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("sync: error %d, want UNKNOWN_MEMBER_ID", s.ErrorCode)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "rt0", j.MemberID, j.Generation
	if r := rc.roundTrip(3, hb).(*kmsg.HeartbeatResponse); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("heartbeat: error %d, want UNKNOWN_MEMBER_ID", r.ErrorCode)
	}
}

// TestGroupStaticRejoinWire: two static members (JoinGroup v9) form a
// Stable group; the follower restarts (unknown member id, same instance)
// with changed metadata of the same protocol: same generation, no
// rebalance, its new metadata shown by DescribeGroups and its assignment
// kept; the leader restarts at v9: SkipAssignment with every member's
// metadata (KIP-814), no rebalance; at v5: told the old leader id leads.
func TestGroupStaticRejoinWire(t *testing.T) {
	g := startGateway(t, func(c *gateway.Config) { c.GroupInitialRebalanceDelay = 300 * time.Millisecond })
	const group = "static-wire"
	c0, c1 := g.raw(t), g.raw(t)
	join := func(rc *rawConn, v int16, inst *string, meta string) *kmsg.JoinGroupResponse {
		req := joinReq(group, "", "consumer", proto("range", []byte(meta)))
		req.InstanceID = inst
		return rc.roundTrip(v, req).(*kmsg.JoinGroupResponse)
	}
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { ch <- join(c1, 9, ptrTo("ia"), "ma") }()
	ja := join(c0, 9, ptrTo("ib"), "mb")
	jb := <-ch
	ja, jb = jb, ja // ja is ia's answer (on c1), jb ib's (on c0)
	if ja.ErrorCode != 0 || jb.ErrorCode != 0 || ja.Generation != 1 || jb.Generation != 1 || ja.LeaderID != jb.LeaderID {
		t.Fatalf("joins: %+v %+v", ja, jb)
	}
	// The leader is i1, the follower i0, whichever joined first.
	lead, fol, i1, i0, lc, fc, m1 := ja, jb, "ia", "ib", c1, c0, "ma"
	if jb.LeaderID == jb.MemberID {
		lead, fol, i1, i0, lc, fc, m1 = jb, ja, "ib", "ia", c0, c1, "mb"
	}
	done := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { done <- syncRaw(t, fc, 5, group, fol.MemberID, 1, &i0, nil) }()
	s1 := syncRaw(t, lc, 5, group, lead.MemberID, 1, &i1, map[string][]byte{fol.MemberID: []byte("a0"), lead.MemberID: []byte("a1")})
	if s0 := <-done; s0.ErrorCode != 0 || s1.ErrorCode != 0 {
		t.Fatalf("syncs: %d %d", s0.ErrorCode, s1.ErrorCode)
	}
	j1 := lead

	c2 := g.raw(t)
	r := join(c2, 9, &i0, "changed")
	if r.ErrorCode != 0 || r.Generation != 1 || r.LeaderID != j1.MemberID || r.SkipAssignment || len(r.Members) != 0 {
		t.Fatalf("follower rejoin with changed metadata: %+v", r)
	}
	if s := syncRaw(t, c2, 5, group, r.MemberID, 1, &i0, nil); s.ErrorCode != 0 || string(s.MemberAssignment) != "a0" {
		t.Fatalf("follower sync after its rejoin: %+v", s)
	}
	desc := c2.roundTrip(5, &kmsg.DescribeGroupsRequest{Groups: []string{group}}).(*kmsg.DescribeGroupsResponse).Groups[0]
	metas := map[string]string{}
	for _, m := range desc.Members {
		metas[*m.InstanceID] = string(m.ProtocolMetadata)
	}
	if desc.State != "Stable" || metas[i0] != "changed" || metas[i1] != m1 {
		t.Fatalf("describe: state %s metadata %v", desc.State, metas)
	}

	c3 := g.raw(t)
	r = join(c3, 9, &i1, "changed-lead")
	if r.ErrorCode != 0 || r.Generation != 1 || r.LeaderID != r.MemberID || !r.SkipAssignment || len(r.Members) != 2 {
		t.Fatalf("leader rejoin v9: %+v", r)
	}
	c4 := g.raw(t)
	old := r.MemberID
	r = join(c4, 5, &i1, "changed-lead-5")
	if r.ErrorCode != 0 || r.Generation != 1 || r.LeaderID != old || len(r.Members) != 0 {
		t.Fatalf("leader rejoin v5: %+v (old leader id %s)", r, old)
	}
	if s := syncRaw(t, c4, 5, group, r.MemberID, 1, &i1, nil); s.ErrorCode != 0 || string(s.MemberAssignment) != "a1" {
		t.Fatalf("leader sync after its rejoin: %+v", s)
	}
}

// TestGroupListProtocolTypeWire: ListGroups over the wire at v0, v4 and v5
// shows "consumer" for a Stable group and for an Empty one whose member
// left, "" for a group that only committed offsets; the states filter
// matches case-insensitively.
func TestGroupListProtocolTypeWire(t *testing.T) {
	g := startGateway(t, noInitialDelay)
	cl := g.client(t)
	ctx := context.Background()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "lg.t"); err != nil {
		t.Fatal(err)
	}
	rc := g.raw(t)
	j := joinRaw(t, rc, 5, joinReq("lg-stable", "", "consumer", proto("range", nil)))
	if s := syncRaw(t, rc, 3, "lg-stable", j.MemberID, j.Generation, nil, nil); s.ErrorCode != 0 {
		t.Fatalf("sync: %d", s.ErrorCode)
	}
	j = joinRaw(t, rc, 5, joinReq("lg-left", "", "consumer", proto("range", nil)))
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Group, lv.MemberID = "lg-left", j.MemberID
	if r := rc.roundTrip(2, lv).(*kmsg.LeaveGroupResponse); r.ErrorCode != 0 {
		t.Fatalf("leave: %d", r.ErrorCode)
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "lg.t", Partition: 0, At: 0, LeaderEpoch: -1})
	if r, err := kadm.NewClient(cl).CommitOffsets(ctx, "lg-offsets", offs); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	want := map[string][2]string{"lg-stable": {"Stable", "consumer"}, "lg-left": {"Empty", "consumer"}, "lg-offsets": {"Empty", ""}}
	for _, v := range []int16{0, 4, 5} {
		r := rc.roundTrip(v, kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse)
		if r.ErrorCode != 0 || len(r.Groups) != len(want) {
			t.Fatalf("v%d: %+v", v, r)
		}
		for _, lg := range r.Groups {
			w := want[lg.Group]
			state := w[0]
			if v < 4 {
				state = ""
			}
			if lg.ProtocolType != w[1] || lg.GroupState != state {
				t.Fatalf("v%d: %s: state %q type %q, want %q %q", v, lg.Group, lg.GroupState, lg.ProtocolType, state, w[1])
			}
		}
	}
	req := kmsg.NewPtrListGroupsRequest()
	req.StatesFilter = []string{"empty"}
	if r := rc.roundTrip(4, req).(*kmsg.ListGroupsResponse); len(r.Groups) != 2 {
		t.Fatalf("states filter empty: %+v", r.Groups)
	}
}

// TestGroupOffsetLeaderEpochWire: OffsetCommit v9 with leader epochs,
// OffsetFetch at v5 and v8 returns them, v4 (no such field) reads -1 on
// the wire; a commit at v5 (no epoch) makes it -1.
func TestGroupOffsetLeaderEpochWire(t *testing.T) {
	g := startGateway(t, noInitialDelay)
	cl := g.client(t)
	if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, 1, nil, "ep.t"); err != nil {
		t.Fatal(err)
	}
	rc := g.raw(t)
	commit := func(v int16, epoch int32) {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = "ep", -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "ep.t"
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Offset, p.LeaderEpoch = 0, epoch
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
		if r := rc.roundTrip(v, req).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("commit v%d: %+v", v, r)
		}
	}
	fetch := func(v int16) int32 {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "ep.t", []int32{0}
		if v >= 8 {
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group, rg.Topics = "ep", []kmsg.OffsetFetchRequestGroupTopic{{Topic: "ep.t", Partitions: []int32{0}}}
			req.Groups = append(req.Groups, rg)
			r := rc.roundTrip(v, req).(*kmsg.OffsetFetchResponse)
			return r.Groups[0].Topics[0].Partitions[0].LeaderEpoch
		}
		req.Group, req.Topics = "ep", []kmsg.OffsetFetchRequestTopic{rt}
		r := rc.roundTrip(v, req).(*kmsg.OffsetFetchResponse)
		return r.Topics[0].Partitions[0].LeaderEpoch
	}
	commit(9, 7)
	for v, want := range map[int16]int32{4: -1, 5: 7, 8: 7} {
		if got := fetch(v); got != want {
			t.Fatalf("fetch v%d after a commit with epoch 7: %d, want %d", v, got, want)
		}
	}
	commit(5, 7) // v5 carries no epoch
	if got := fetch(8); got != -1 {
		t.Fatalf("fetch after a v5 commit: %d, want -1", got)
	}
}

// TestGroupStaticConsumersRestart: two kgo consumers (cooperative-sticky)
// with group.instance.id share a topic; one is closed (a static member does not leave) and a new
// client with the same instance id takes its place. Its JoinGroup carries
// other metadata bytes (cooperative-sticky's owned partitions and
// generation), but the protocol is the same, so, as in Kafka, the group
// does not rebalance: the other consumer is not revoked or assigned
// anything again and the new one gets the old one's partitions.
func TestGroupStaticConsumersRestart(t *testing.T) {
	g := startGateway(t, func(c *gateway.Config) { c.GroupInitialRebalanceDelay = 300 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic, group = "static.kgo", "static-kgo"
	if _, err := kadm.NewClient(g.client(t)).CreateTopic(ctx, 4, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	events := map[string]int{}
	owned := map[string]map[int32]bool{}
	consumer := func(inst string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.InstanceID(inst), kgo.SessionTimeout(10*time.Second),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				events[inst]++
				if owned[inst] == nil {
					owned[inst] = map[int32]bool{}
				}
				for _, p := range m[topic] {
					owned[inst][p] = true
				}
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				events[inst]++
				for _, p := range m[topic] {
					delete(owned[inst], p)
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for ctx.Err() == nil && !cl.PollFetches(ctx).IsClientClosed() {
			}
		}()
		return cl
	}
	waitOwned := func(what string, want map[string]int) {
		t.Helper()
		for ctx.Err() == nil {
			mu.Lock()
			ok := true
			for inst, n := range want {
				ok = ok && len(owned[inst]) == n
			}
			mu.Unlock()
			if ok {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("%s: owned %v, want counts %v", what, owned, want)
	}
	// a joins first and owns everything; b's joins then carry a
	// generation (and, for a, owned partitions), so b's last metadata
	// differs from a fresh client's.
	a := consumer("a")
	defer a.Close()
	waitOwned("a alone", map[string]int{"a": 4})
	b := consumer("b")
	waitOwned("both joined", map[string]int{"a": 2, "b": 2})
	time.Sleep(500 * time.Millisecond) // no further rebalance under way
	_, gen := a.GroupMetadata()
	mu.Lock()
	aEvents := events["a"]
	bParts := maps.Clone(owned["b"])
	mu.Unlock()
	b.Close()

	b2 := consumer("b")
	defer b2.Close()
	for ctx.Err() == nil {
		mu.Lock()
		n := len(owned["b"])
		mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second) // a rebalance, if any, would reach a now
	if _, now := a.GroupMetadata(); now != gen {
		t.Fatalf("generation %d after the static member's restart, want %d (no rebalance)", now, gen)
	}
	mu.Lock()
	defer mu.Unlock()
	if events["a"] != aEvents {
		t.Fatalf("the other consumer saw %d partition events after the static member's restart, want none", events["a"]-aEvents)
	}
	if len(owned["a"]) != 2 || len(owned["b"]) != 2 {
		t.Fatalf("owned after the restart: %v", owned)
	}
	for p := range bParts {
		if !owned["b"][p] {
			t.Fatalf("the restarted member owns %v, want the old one's %v", owned["b"], bParts)
		}
	}
}
