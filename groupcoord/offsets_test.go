package groupcoord

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
)

type offset struct {
	topic     string
	partition int32
	offset    int64
	metadata  *string
}

func commitReq(group, member string, gen int32, offs ...offset) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group, req.MemberID, req.Generation = group, member, gen
	for _, o := range offs {
		var t *kmsg.OffsetCommitRequestTopic
		for i := range req.Topics {
			if req.Topics[i].Topic == o.topic {
				t = &req.Topics[i]
			}
		}
		if t == nil {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = o.topic
			req.Topics = append(req.Topics, rt)
			t = &req.Topics[len(req.Topics)-1]
		}
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.Metadata = o.partition, o.offset, o.metadata
		t.Partitions = append(t.Partitions, p)
	}
	return req
}

// commitCode commits t1/0 and returns the (single) error code.
func commitCode(h *harness, group, member string, gen int32) int16 {
	h.t.Helper()
	r := h.c.CommitOffsets(h.ctx, commitReq(group, member, gen, offset{"t1", 0, 1, nil}))
	return r.Topics[0].Partitions[0].ErrorCode
}

func (h *harness) fetch(group string, topics map[string][]int32) kmsg.OffsetFetchResponseGroup {
	h.t.Helper()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	if topics != nil {
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
		for t, ps := range topics {
			rt := kmsg.NewOffsetFetchRequestGroupTopic()
			rt.Topic, rt.Partitions = t, ps
			rg.Topics = append(rg.Topics, rt)
		}
	}
	return h.c.FetchOffsets(h.ctx, rg)
}

func fetched(sg kmsg.OffsetFetchResponseGroup) map[string]int64 {
	out := map[string]int64{}
	for _, t := range sg.Topics {
		for _, p := range t.Partitions {
			out[t.Topic+"/"+string(rune('0'+p.Partition))] = p.Offset
		}
	}
	return out
}

// TestStandaloneCommit: generation -1 and no member id commits to a group
// that does not exist (creating its app), or that is Empty; the offset is
// stored unchanged as a LAST_READ checkpoint with its metadata.
func TestStandaloneCommit(t *testing.T) {
	h := newHarness(t)
	meta := "hello"
	r := h.c.CommitOffsets(h.ctx, commitReq("simple.group", "", -1,
		offset{"t1", 0, 42, &meta}, offset{"a.b", 1, 7, nil}, offset{"t1", 9, 1, nil}, offset{"nope", 0, 1, nil}))
	codes := map[string]int16{}
	for _, rt := range r.Topics {
		for _, p := range rt.Partitions {
			codes[rt.Topic+"/"+string(rune('0'+p.Partition))] = p.ErrorCode
		}
	}
	want := map[string]int16{"t1/0": 0, "t1/9": kerr.UnknownTopicOrPartition.Code, "a.b/1": 0, "nope/0": kerr.UnknownTopicOrPartition.Code}
	for k, v := range want {
		if codes[k] != v {
			t.Errorf("%s: %d, want %d", k, codes[k], v)
		}
	}
	app, _ := disbackend.AppNameForGroup("simple.group")
	a, err := h.apps.DescribeApp(h.ctx, app)
	if err != nil || a.GroupID != "simple.group" {
		t.Fatalf("app: %+v %v", a, err)
	}
	cps, _ := h.apps.Checkpoints(h.ctx, app, "")
	if len(cps) != 2 || cps[0].Stream != "a_b" || cps[0].SequenceNumber != 7 || cps[1].Stream != "t1" || cps[1].SequenceNumber != 42 || cps[1].Metadata != "hello" {
		t.Fatalf("checkpoints %+v", cps)
	}
	got := fetched(h.fetch("simple.group", map[string][]int32{"t1": {0, 1}, "a.b": {1}}))
	if got["t1/0"] != 42 || got["t1/1"] != -1 || got["a.b/1"] != 7 {
		t.Fatalf("fetched %v", got)
	}
	// Null topics: every committed partition.
	all := h.fetch("simple.group", nil)
	if got := fetched(all); len(got) != 2 || got["t1/0"] != 42 || got["a.b/1"] != 7 {
		t.Fatalf("fetch all: %v", got)
	}
	if all.Topics[0].TopicID != ([16]byte{2}) {
		t.Fatalf("topic id not filled: %v", all.Topics[0].TopicID)
	}
}

// TestFetchUnknownGroup: offsets of a group that does not exist read as -1
// with no error (librdkafka relies on it).
func TestFetchUnknownGroup(t *testing.T) {
	h := newHarness(t)
	sg := h.fetch("never-committed", map[string][]int32{"t1": {0, 3}, "unknown-topic": {0}})
	if sg.ErrorCode != 0 {
		t.Fatalf("error %d", sg.ErrorCode)
	}
	for _, tp := range sg.Topics {
		for _, p := range tp.Partitions {
			if p.Offset != -1 || p.ErrorCode != 0 || p.LeaderEpoch != -1 {
				t.Fatalf("%s/%d: %+v", tp.Topic, p.Partition, p)
			}
		}
	}
	if sg := h.fetch("never-committed", nil); sg.ErrorCode != 0 || len(sg.Topics) != 0 {
		t.Fatalf("fetch all of unknown group: %+v", sg)
	}
	if sg := h.fetch("", map[string][]int32{"t1": {0}}); sg.ErrorCode != 0 || sg.Topics[0].Partitions[0].Offset != -1 {
		t.Fatalf("empty group id: %+v", sg)
	}
}

// TestCommitValidation: member commits need the member id and current
// generation; standalone commits are refused while the group has members.
func TestCommitValidation(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 2)
	tests := []struct {
		name   string
		member string
		gen    int32
		want   int16
	}{
		{"member, current generation", ids[0], gen, 0},
		{"member, old generation", ids[0], gen - 1, kerr.IllegalGeneration.Code},
		{"unknown member", "nobody", gen, kerr.UnknownMemberID.Code},
		{"standalone into a live group", "", -1, kerr.UnknownMemberID.Code},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if code := commitCode(h, "g", tc.member, tc.gen); code != tc.want {
				t.Fatalf("error %d, want %d", code, tc.want)
			}
		})
	}
	// v0 carries no generation or member id: Kafka 3.x stored it in
	// ZooKeeper without checking the group, so a live group takes it.
	v0 := commitReq("g", "", -1, offset{"t1", 0, 4, nil})
	v0.Version = 0
	if r := h.c.CommitOffsets(h.ctx, v0); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("v0 commit into a live group: %+v", r)
	}
	if got := fetched(h.fetch("g", map[string][]int32{"t1": {0}})); got["t1/0"] != 4 {
		t.Fatalf("after the v0 commit: %v", got)
	}
	if code := commitCode(h, "other", "m", 3); code != kerr.UnknownMemberID.Code {
		t.Fatalf("member commit to unknown group: %d", code)
	}
	if code := commitCode(h, "", "", -1); code != kerr.InvalidGroupID.Code {
		t.Fatalf("empty group id: %d", code)
	}
	long := strings.Repeat("é", disbackend.MaxCheckpointMetadataLen+1)
	ok := strings.Repeat("é", disbackend.MaxCheckpointMetadataLen)
	r := h.c.CommitOffsets(h.ctx, commitReq("g", ids[0], gen, offset{"t1", 0, 5, &long}, offset{"t1", 1, 5, &ok}))
	if c0, c1 := r.Topics[0].Partitions[0].ErrorCode, r.Topics[0].Partitions[1].ErrorCode; c0 != kerr.OffsetMetadataTooLarge.Code || c1 != 0 {
		t.Fatalf("metadata sizes: %d %d", c0, c1)
	}
	// In PreparingRebalance a member may still commit for its generation.
	h.newMember(joinReq{group: "g"})
	if code := commitCode(h, "g", ids[1], gen); code != 0 {
		t.Fatalf("commit while preparing: %d", code)
	}
}

// TestUnchangedOffsetsNotRewritten: committing the same offsets again does
// not write the backend; a changed offset or metadata does.
func TestUnchangedOffsetsNotRewritten(t *testing.T) {
	h := newHarness(t)
	ids, gen := h.stableGroup("g", 1)
	req := func(o int64, meta string) *kmsg.OffsetCommitRequest {
		return commitReq("g", ids[0], gen, offset{"t1", 0, o, &meta}, offset{"t1", 1, 3, nil})
	}
	for _, step := range []struct {
		o      int64
		meta   string
		writes int
	}{{10, "", 1}, {10, "", 1}, {11, "", 2}, {11, "x", 3}, {11, "x", 3}} {
		r := h.c.CommitOffsets(h.ctx, req(step.o, step.meta))
		if r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("commit: %+v", r)
		}
		if got := h.apps.commitCalls(); got != step.writes {
			t.Fatalf("after committing %d %q: %d backend writes, want %d", step.o, step.meta, got, step.writes)
		}
	}
	// A standalone committer's group leaves memory between commits; what it
	// wrote is still remembered.
	for i, want := range []int{4, 4, 5} {
		o := int64(1)
		if i == 2 {
			o = 2
		}
		h.c.CommitOffsets(h.ctx, commitReq("standalone", "", -1, offset{"t1", 0, o, nil}))
		h.flush()
		if got := h.apps.commitCalls(); got != want {
			t.Fatalf("standalone commit %d: %d backend writes, want %d", i, got, want)
		}
	}
}

// TestDescribeListDelete: a group with commits and no members is Empty in
// DescribeGroups and ListGroups; DeleteGroups refuses a live group and
// deletes an empty one with its offsets.
func TestDescribeListDelete(t *testing.T) {
	h := newHarness(t)
	if code := commitCode(h, "idle", "", -1); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	ids, _ := h.stableGroup("live", 2)
	desc := h.c.DescribeGroups(h.ctx, &kmsg.DescribeGroupsRequest{Version: 6, Groups: []string{"idle", "live", "ghost"}, IncludeAuthorizedOperations: true})
	idle, live, ghost := desc.Groups[0], desc.Groups[1], desc.Groups[2]
	if idle.State != "Empty" || idle.ErrorCode != 0 || len(idle.Members) != 0 {
		t.Fatalf("idle: %+v", idle)
	}
	if live.State != "Stable" || live.Protocol != "range" || live.ProtocolType != "consumer" || len(live.Members) != 2 ||
		string(live.Members[0].MemberAssignment) != "assignment-"+ids[0] || string(live.Members[0].ProtocolMetadata) != "meta-"+ids[0] {
		t.Fatalf("live: %+v", live)
	}
	if live.AuthorizedOperations != groupOps {
		t.Fatalf("authorized operations %d", live.AuthorizedOperations)
	}
	if ghost.State != "Dead" || ghost.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ghost: %+v", ghost)
	}
	list := h.c.ListGroups(h.ctx, &kmsg.ListGroupsRequest{Version: 5})
	got := map[string]string{}
	for _, g := range list.Groups {
		got[g.Group] = g.GroupState
		if g.GroupType != "classic" {
			t.Fatalf("type %q", g.GroupType)
		}
	}
	if len(got) != 2 || got["idle"] != "Empty" || got["live"] != "Stable" {
		t.Fatalf("list: %v", got)
	}
	list = h.c.ListGroups(h.ctx, &kmsg.ListGroupsRequest{Version: 5, StatesFilter: []string{"empty"}})
	if len(list.Groups) != 1 || list.Groups[0].Group != "idle" {
		t.Fatalf("filtered list: %+v", list.Groups)
	}
	list = h.c.ListGroups(h.ctx, &kmsg.ListGroupsRequest{Version: 5, TypesFilter: []string{"consumer"}})
	if len(list.Groups) != 0 {
		t.Fatalf("consumer-type list: %+v", list.Groups)
	}
	del := h.c.DeleteGroups(h.ctx, &kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"live", "idle", "ghost"}})
	if c0, c1, c2 := del.Groups[0].ErrorCode, del.Groups[1].ErrorCode, del.Groups[2].ErrorCode; c0 != kerr.NonEmptyGroup.Code || c1 != 0 || c2 != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete: %d %d %d", c0, c1, c2)
	}
	if got := fetched(h.fetch("idle", map[string][]int32{"t1": {0}})); got["t1/0"] != -1 {
		t.Fatalf("offsets survived deletion: %v", got)
	}
}

// TestOffsetDelete: an Empty group loses the offsets asked for; a live
// consumer group only those of topics it does not subscribe to.
func TestOffsetDelete(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.SubscribedTopics = func(pt string, meta []byte) ([]string, bool) { return []string{string(meta)}, pt == "consumer" }
	})
	h.c.CommitOffsets(h.ctx, commitReq("g", "", -1, offset{"t1", 0, 1, nil}, offset{"t1", 1, 1, nil}, offset{"a.b", 0, 1, nil}))
	del := func(topic string, ps ...int32) *kmsg.OffsetDeleteResponse {
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = "g"
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = topic
		for _, p := range ps {
			rp := kmsg.NewOffsetDeleteRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		return h.c.OffsetDelete(h.ctx, req)
	}
	if r := del("t1", 0); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("delete from empty group: %+v", r)
	}
	if got := fetched(h.fetch("g", nil)); len(got) != 2 || got["t1/1"] != 1 {
		t.Fatalf("after delete: %v", got)
	}
	// A live group subscribed to t1 (its metadata names it).
	_, ch := h.newMember(joinReq{group: "g", protocols: protos("range", "t1")})
	h.advance(testDelay)
	h.recvJoin(ch)
	if r := del("t1", 1); r.Topics[0].Partitions[0].ErrorCode != kerr.GroupSubscribedToTopic.Code {
		t.Fatalf("subscribed topic: %+v", r)
	}
	if r := del("a.b", 0); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("unsubscribed topic: %+v", r)
	}
	if r := del("nope", 0); r.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %+v", r)
	}
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "ghost"
	if r := h.c.OffsetDelete(h.ctx, req); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("unknown group: %d", r.ErrorCode)
	}
}

// TestOffsetRetention: the offsets of a group empty for OffsetsRetention
// are deleted with its app; a group with members keeps them, and a group
// that just became empty gets the full retention again.
func TestOffsetRetention(t *testing.T) {
	const retention = 24 * time.Hour
	h := newHarness(t, func(c *Config) { c.OffsetsRetention, c.RetentionCheckInterval = retention, 1000*time.Hour })
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
	commitCode(h, "old", "", -1)
	commitCode(h, "busy", "", -1)
	h.advance(retention / 2)
	commitCode(h, "recent", "", -1)
	h.advance(retention/2 + time.Minute)
	ids, _ := h.stableGroup("busy", 1)
	sweep("old") // busy has a member, recent is young
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = ids[0]
	h.c.LeaveGroup(h.ctx, "busy", []kmsg.LeaveGroupRequestMember{lm})
	h.advance(retention / 2)
	sweep("recent") // busy has been empty only half the retention
	h.advance(retention/2 + time.Minute)
	sweep("busy")
	if got := fetched(h.fetch("busy", map[string][]int32{"t1": {0}})); got["t1/0"] != -1 {
		t.Fatalf("offsets of an expired group: %v", got)
	}
}

// TestRetentionSweepRunsOnTimer: the sweeper runs every
// RetentionCheckInterval on the coordinator's clock.
func TestRetentionSweepRunsOnTimer(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.OffsetsRetention, c.RetentionCheckInterval = time.Hour, time.Minute })
	commitCode(h, "old", "", -1)
	h.advance(time.Hour + time.Minute)
	app, _ := disbackend.AppNameForGroup("old")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := h.apps.DescribeApp(h.ctx, app); err != nil {
			return // deleted
		}
		if time.Now().After(deadline) {
			t.Fatal("the sweeper did not delete the expired group")
		}
		h.clock.Advance(time.Minute)
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCommittedLeaderEpoch: the committed leader epoch (OffsetCommit v6+)
// is kept with the offset and returned, as Kafka 4.4 answers (checked
// against it): -1 when the commit had none or was below v6 (whose requests
// have no epoch), any other value as given; the same offset with another
// epoch is written again.
func TestCommittedLeaderEpoch(t *testing.T) {
	h := newHarness(t)
	commit := func(version int16, epoch int32, o int64) {
		t.Helper()
		req := commitReq("g", "", -1, offset{"t1", 0, o, nil})
		req.Version = version
		req.Topics[0].Partitions[0].LeaderEpoch = epoch
		if r := h.c.CommitOffsets(h.ctx, req); r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("commit v%d: %+v", version, r)
		}
	}
	epoch := func(what string, want int32, writes int) {
		t.Helper()
		for _, topics := range []map[string][]int32{{"t1": {0}}, nil} {
			sg := h.fetch("g", topics)
			if len(sg.Topics) != 1 || sg.Topics[0].Partitions[0].LeaderEpoch != want {
				t.Fatalf("%s: fetched %+v, want leader epoch %d", what, sg.Topics, want)
			}
		}
		if got := h.apps.commitCalls(); got != writes {
			t.Fatalf("%s: %d backend writes, want %d", what, got, writes)
		}
	}
	commit(8, 7, 1)
	epoch("v8 with epoch 7", 7, 1)
	commit(8, 7, 1)
	epoch("the same again", 7, 1)
	commit(8, -1, 1)
	epoch("the same offset without an epoch", -1, 2)
	commit(8, 3, 1)
	epoch("the same offset with epoch 3", 3, 3)
	commit(5, 9, 1) // v5 has no epoch: the field is not sent
	epoch("v5", -1, 4)
	commit(9, -5, 2)
	epoch("epoch -5 (Kafka keeps it)", -5, 5)
}
