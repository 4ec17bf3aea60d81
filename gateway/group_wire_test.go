package gateway_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func joinReq(group, member, ptype string, protos ...kmsg.JoinGroupRequestProtocol) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Group, r.MemberID, r.ProtocolType, r.Protocols = group, member, ptype, protos
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10000, 10000
	return r
}

func proto(name string, meta []byte) kmsg.JoinGroupRequestProtocol {
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = name, meta
	return p
}

// joinRaw joins at version v, following MEMBER_ID_REQUIRED once.
func joinRaw(t *testing.T, rc *rawConn, v int16, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	resp := rc.roundTrip(v, req).(*kmsg.JoinGroupResponse)
	// A server just started may still load its groups: retry, as clients
	// do, on COORDINATOR_LOAD_IN_PROGRESS (failed once in CI).
	for i := 0; resp.ErrorCode == kerr.CoordinatorLoadInProgress.Code && i < 200; i++ {
		time.Sleep(10 * time.Millisecond)
		resp = rc.roundTrip(v, req).(*kmsg.JoinGroupResponse)
	}
	if resp.ErrorCode == kerr.MemberIDRequired.Code {
		req.MemberID = resp.MemberID
		resp = rc.roundTrip(v, req).(*kmsg.JoinGroupResponse)
	}
	return resp
}

// TestGroupConnectProtocol: two Kafka Connect workers (protocol type
// "connect") at different API versions join one group; the leader gets
// both workers' metadata and each worker gets the assignment bytes the
// leader sent for it, all byte-identical; DescribeGroups shows them too.
func TestGroupConnectProtocol(t *testing.T) {
	g := startGateway(t, fastGroups)
	const group = "connect-cluster"
	meta := [][]byte{randBytes(300), randBytes(77)}
	versions := []int16{5, 2} // v5 follows MEMBER_ID_REQUIRED, v2 joins at once
	conns := []*rawConn{g.raw(t), g.raw(t)}
	joins := make([]*kmsg.JoinGroupResponse, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := joinReq(group, "", "connect", proto("sessioned", meta[i]), proto("default", []byte("older")))
			joins[i] = joinRaw(t, conns[i], versions[i], req)
		}()
	}
	wg.Wait()
	leader := -1
	for i, r := range joins {
		if r.ErrorCode != 0 || r.Generation != 1 || *r.Protocol != "sessioned" {
			t.Fatalf("worker %d: %+v", i, r)
		}
		if r.LeaderID == r.MemberID {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no leader")
	}
	follower := 1 - leader
	if len(joins[leader].Members) != 2 || len(joins[follower].Members) != 0 {
		t.Fatalf("members: leader %d, follower %d", len(joins[leader].Members), len(joins[follower].Members))
	}
	for _, m := range joins[leader].Members {
		i := 0
		if m.MemberID == joins[1].MemberID {
			i = 1
		}
		if !bytes.Equal(m.ProtocolMetadata, meta[i]) {
			t.Fatalf("metadata of worker %d changed on the way", i)
		}
	}
	assign := [][]byte{randBytes(500), randBytes(1)}
	syncs := make([]*kmsg.SyncGroupResponse, 2)
	for _, i := range []int{follower, leader} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := kmsg.NewPtrSyncGroupRequest()
			req.Group, req.MemberID, req.Generation = group, joins[i].MemberID, joins[i].Generation
			v := int16(3)
			if i == follower {
				v = 5
				pt, p := "connect", "sessioned"
				req.ProtocolType, req.Protocol = &pt, &p
			}
			if i == leader {
				for j := range 2 {
					a := kmsg.NewSyncGroupRequestGroupAssignment()
					a.MemberID, a.MemberAssignment = joins[j].MemberID, assign[j]
					req.GroupAssignment = append(req.GroupAssignment, a)
				}
			}
			syncs[i] = conns[i].roundTrip(v, req).(*kmsg.SyncGroupResponse)
		}()
		if i == follower {
			// let the follower park first
			hb := kmsg.NewPtrDescribeGroupsRequest()
			hb.Groups = []string{group}
			g.raw(t).roundTrip(0, hb)
		}
	}
	wg.Wait()
	for i := range 2 {
		if syncs[i].ErrorCode != 0 || !bytes.Equal(syncs[i].MemberAssignment, assign[i]) {
			t.Fatalf("worker %d: sync error %d, assignment identical %v", i, syncs[i].ErrorCode, bytes.Equal(syncs[i].MemberAssignment, assign[i]))
		}
	}
	if pt := syncs[follower].ProtocolType; pt == nil || *pt != "connect" {
		t.Fatalf("v5 sync protocol type %v", pt)
	}
	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Groups = []string{group}
	dg := g.raw(t).roundTrip(5, dreq).(*kmsg.DescribeGroupsResponse).Groups[0]
	if dg.State != "Stable" || dg.ProtocolType != "connect" || dg.Protocol != "sessioned" || len(dg.Members) != 2 {
		t.Fatalf("describe: %+v", dg)
	}
	for _, m := range dg.Members {
		i := 0
		if m.MemberID == joins[1].MemberID {
			i = 1
		}
		if !bytes.Equal(m.ProtocolMetadata, meta[i]) || !bytes.Equal(m.MemberAssignment, assign[i]) {
			t.Fatalf("describe: worker %d's bytes changed", i)
		}
	}
	// A consumer cannot join a connect group.
	bad := joinRaw(t, g.raw(t), 5, joinReq(group, "", "consumer", proto("sessioned", nil)))
	if bad.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("consumer joining a connect group: %d", bad.ErrorCode)
	}
	// Heartbeats at v0 and v4, then LeaveGroup at v0 and v3 (batch).
	for i, v := range []int16{0, 4} {
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Group, hb.MemberID, hb.Generation = group, joins[i].MemberID, 1
		if r := g.raw(t).roundTrip(v, hb).(*kmsg.HeartbeatResponse); r.ErrorCode != 0 {
			t.Fatalf("heartbeat v%d: %d", v, r.ErrorCode)
		}
	}
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Group, lv.MemberID = group, joins[follower].MemberID
	if r := g.raw(t).roundTrip(0, lv).(*kmsg.LeaveGroupResponse); r.ErrorCode != 0 {
		t.Fatalf("leave v0: %d", r.ErrorCode)
	}
	lv = kmsg.NewPtrLeaveGroupRequest()
	lv.Group = group
	for _, id := range []string{joins[leader].MemberID, "stranger"} {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = id
		lv.Members = append(lv.Members, m)
	}
	r := g.raw(t).roundTrip(3, lv).(*kmsg.LeaveGroupResponse)
	if r.ErrorCode != 0 || len(r.Members) != 2 || r.Members[0].ErrorCode != 0 || r.Members[1].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("leave v3: %+v", r)
	}
	lv = kmsg.NewPtrLeaveGroupRequest()
	lv.Group, lv.MemberID = group, "stranger"
	if r := g.raw(t).roundTrip(1, lv).(*kmsg.LeaveGroupResponse); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("leave v1 of an unknown member: %d", r.ErrorCode)
	}
}

func offsetFetchV8(groups map[string][]kmsg.OffsetFetchRequestGroupTopic) *kmsg.OffsetFetchRequest {
	req := kmsg.NewPtrOffsetFetchRequest()
	for id, topics := range groups {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group, rg.Topics = id, topics
		req.Groups = append(req.Groups, rg)
	}
	return req
}

// TestGroupOffsetFetchUnknownGroup: OffsetFetch of a group that does not
// exist answers offset -1 with no error at every version shape.
func TestGroupOffsetFetchUnknownGroup(t *testing.T) {
	g := startGateway(t, fastGroups)
	ctx := context.Background()
	adm := kadm.NewClient(g.client(t))
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "fetch.topic"); err != nil {
		t.Fatal(err)
	}
	td, err := adm.ListTopics(ctx, "fetch.topic")
	if err != nil {
		t.Fatal(err)
	}
	id := td["fetch.topic"].ID
	rc := g.raw(t)
	for _, v := range []int16{0, 1, 2, 5, 7} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = "no-such-group"
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "fetch.topic", []int32{0, 1}
		req.Topics = []kmsg.OffsetFetchRequestTopic{rt}
		resp := rc.roundTrip(v, req).(*kmsg.OffsetFetchResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
			t.Fatalf("v%d: %+v", v, resp)
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.Offset != -1 || p.ErrorCode != 0 {
				t.Fatalf("v%d partition %d: offset %d error %d", v, p.Partition, p.Offset, p.ErrorCode)
			}
		}
	}
	for _, v := range []int16{8, 10} {
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.TopicID, rt.Partitions = "fetch.topic", id, []int32{0, 1}
		req := offsetFetchV8(map[string][]kmsg.OffsetFetchRequestGroupTopic{"nope-1": {rt}, "nope-2": {rt}})
		resp := rc.roundTrip(v, req).(*kmsg.OffsetFetchResponse)
		if len(resp.Groups) != 2 {
			t.Fatalf("v%d: %d groups", v, len(resp.Groups))
		}
		for _, sg := range resp.Groups {
			if sg.ErrorCode != 0 || len(sg.Topics) != 1 {
				t.Fatalf("v%d %s: %+v", v, sg.Group, sg)
			}
			if v >= 10 && sg.Topics[0].TopicID != id {
				t.Fatalf("v10: topic id %v, want %v", sg.Topics[0].TopicID, id)
			}
			for _, p := range sg.Topics[0].Partitions {
				if p.Offset != -1 || p.ErrorCode != 0 {
					t.Fatalf("v%d %s/%d: offset %d error %d", v, sg.Group, p.Partition, p.Offset, p.ErrorCode)
				}
			}
		}
	}
}

// TestGroupOffsetsNullTopics: standalone commits (generation -1, kafka-python's
// OffsetCommit v2) are stored; OffsetFetch with null topics returns every
// committed partition with its metadata, by name (v2, v8) and by id (v10);
// DescribeGroups says Empty; OffsetCommit v10 names topics by id.
func TestGroupOffsetsNullTopics(t *testing.T) {
	g := startGateway(t, fastGroups)
	ctx := context.Background()
	adm := kadm.NewClient(g.client(t))
	for topic, n := range map[string]int32{"null.a": 3, "null.b": 1} {
		if _, err := adm.CreateTopic(ctx, n, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	td, err := adm.ListTopics(ctx, "null.a", "null.b")
	if err != nil {
		t.Fatal(err)
	}
	const group = "standalone"
	rc := g.raw(t)
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = group, -1
	meta := "m"
	for topic, ps := range map[string][]int32{"null.a": {0, 1, 2}, "null.b": {0}, "missing": {0}} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		for _, p := range ps {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.Metadata = p, int64(100+p), &meta
			rt.Partitions = append(rt.Partitions, rp)
		}
		commit.Topics = append(commit.Topics, rt)
	}
	cresp := rc.roundTrip(2, commit).(*kmsg.OffsetCommitResponse)
	for _, rt := range cresp.Topics {
		for _, rp := range rt.Partitions {
			want := int16(0)
			if rt.Topic == "missing" {
				want = kerr.UnknownTopicOrPartition.Code
			}
			if rp.ErrorCode != want {
				t.Fatalf("commit %s/%d: %d, want %d", rt.Topic, rp.Partition, rp.ErrorCode, want)
			}
		}
	}
	// v10 by topic id: null.b partition 0 to 7, and an unknown id.
	c10 := kmsg.NewPtrOffsetCommitRequest()
	c10.Group, c10.Generation = group, -1
	for _, tid := range [][16]byte{td["null.b"].ID, {9, 9, 9}} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.TopicID = tid
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 7
		rt.Partitions = append(rt.Partitions, rp)
		c10.Topics = append(c10.Topics, rt)
	}
	r10 := rc.roundTrip(10, c10).(*kmsg.OffsetCommitResponse)
	if len(r10.Topics) != 2 || r10.Topics[0].Partitions[0].ErrorCode != 0 || r10.Topics[0].TopicID != td["null.b"].ID ||
		r10.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("commit v10: %+v", r10)
	}
	want := map[string]int64{"null.a/0": 100, "null.a/1": 101, "null.a/2": 102, "null.b/0": 7}
	check := func(v int16, topics map[string]map[int32]int64) {
		t.Helper()
		n := 0
		for topic, ps := range topics {
			for p, o := range ps {
				n++
				if k := topic + "/" + string(rune('0'+p)); want[k] != o {
					t.Fatalf("v%d %s: %d, want %d", v, k, o, want[k])
				}
			}
		}
		if n != len(want) {
			t.Fatalf("v%d: %d partitions, want %d: %v", v, n, len(want), topics)
		}
	}
	f2 := kmsg.NewPtrOffsetFetchRequest()
	f2.Group, f2.Topics = group, nil
	r2 := rc.roundTrip(2, f2).(*kmsg.OffsetFetchResponse)
	got := map[string]map[int32]int64{}
	for _, rt := range r2.Topics {
		got[rt.Topic] = map[int32]int64{}
		for _, rp := range rt.Partitions {
			got[rt.Topic][rp.Partition] = rp.Offset
			if rt.Topic == "null.a" && (rp.Metadata == nil || *rp.Metadata != "m") {
				t.Fatalf("metadata %v", rp.Metadata)
			}
		}
	}
	check(2, got)
	for _, v := range []int16{8, 10} {
		r := rc.roundTrip(v, offsetFetchV8(map[string][]kmsg.OffsetFetchRequestGroupTopic{group: nil})).(*kmsg.OffsetFetchResponse)
		got := map[string]map[int32]int64{}
		for _, rt := range r.Groups[0].Topics {
			name := rt.Topic
			if v >= 10 {
				for n, d := range td {
					if d.ID == rt.TopicID {
						name = n
					}
				}
			}
			got[name] = map[int32]int64{}
			for _, rp := range rt.Partitions {
				got[name][rp.Partition] = rp.Offset
			}
		}
		check(v, got)
	}
	for _, v := range []int16{0, 6} {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{group, "ghost"}
		r := rc.roundTrip(v, req).(*kmsg.DescribeGroupsResponse)
		if r.Groups[0].State != "Empty" || r.Groups[0].ErrorCode != 0 || len(r.Groups[0].Members) != 0 {
			t.Fatalf("describe v%d: %+v", v, r.Groups[0])
		}
		wantGhost := int16(0)
		if v >= 6 {
			wantGhost = kerr.GroupIDNotFound.Code
		}
		if r.Groups[1].State != "Dead" || r.Groups[1].ErrorCode != wantGhost {
			t.Fatalf("describe v%d ghost: %+v", v, r.Groups[1])
		}
	}
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.StatesFilter = []string{"Empty"}
	lr := rc.roundTrip(4, lreq).(*kmsg.ListGroupsResponse)
	if len(lr.Groups) != 1 || lr.Groups[0].Group != group || lr.Groups[0].GroupState != "Empty" {
		t.Fatalf("list: %+v", lr.Groups)
	}
}

// TestGroupErrors: Kafka's answers for bad session timeouts, oversized
// metadata, deleting a live group, and the FindCoordinator shapes.
func TestGroupErrors(t *testing.T) {
	g := startGateway(t, fastGroups)
	ctx := context.Background()
	adm := kadm.NewClient(g.client(t))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "err.topic"); err != nil {
		t.Fatal(err)
	}
	rc := g.raw(t)
	jr := joinReq("g", "", "consumer", proto("range", nil))
	jr.SessionTimeoutMillis = 10
	if r := rc.roundTrip(5, jr).(*kmsg.JoinGroupResponse); r.ErrorCode != kerr.InvalidSessionTimeout.Code {
		t.Fatalf("session 10 ms: %d", r.ErrorCode)
	}
	// A live group: one member, joined and synced.
	j := joinRaw(t, rc, 9, joinReq("live", "", "consumer", proto("range", nil)))
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Group, sr.MemberID, sr.Generation = "live", j.MemberID, j.Generation
	// v5 without protocol type and name: INCONSISTENT_GROUP_PROTOCOL, as
	// Kafka 4.4 answers (checked against it).
	if r := rc.roundTrip(5, sr).(*kmsg.SyncGroupResponse); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("sync v5 without protocol type: %d", r.ErrorCode)
	}
	pt, pn := "consumer", "range"
	sr.ProtocolType, sr.Protocol = &pt, &pn
	if r := rc.roundTrip(5, sr).(*kmsg.SyncGroupResponse); r.ErrorCode != 0 {
		t.Fatalf("sync: %d", r.ErrorCode)
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"live", "never", "live"}
	dr := rc.roundTrip(3, del).(*kmsg.DeleteGroupsResponse)
	// A group named twice is answered once, as Kafka 4.4 answers.
	if len(dr.Groups) != 2 || dr.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code || dr.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete: %+v", dr.Groups)
	}
	long := strings.Repeat("x", 1001)
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.MemberID, oc.Generation = "live", j.MemberID, j.Generation
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "err.topic"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.Metadata = 0, 1, &long
	rt.Partitions = append(rt.Partitions, rp)
	oc.Topics = append(oc.Topics, rt)
	if r := rc.roundTrip(8, oc).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != kerr.OffsetMetadataTooLarge.Code {
		t.Fatalf("long metadata: %d", r.Topics[0].Partitions[0].ErrorCode)
	}
	oc.Generation = j.Generation + 5
	rp.Metadata = nil
	oc.Topics[0].Partitions[0] = rp
	if r := rc.roundTrip(8, oc).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != kerr.IllegalGeneration.Code {
		t.Fatalf("old generation: %d", r.Topics[0].Partitions[0].ErrorCode)
	}
	// FindCoordinator: one key (v0, v3), batched keys (v4+), transactions.
	for _, v := range []int16{0, 3} {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey = "live"
		r := rc.roundTrip(v, fc).(*kmsg.FindCoordinatorResponse)
		if r.ErrorCode != 0 || r.NodeID != 0 || r.Host == "" || r.Port == 0 {
			t.Fatalf("find v%d: %+v", v, r)
		}
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"a", "b", "c"}
	r := rc.roundTrip(4, fc).(*kmsg.FindCoordinatorResponse)
	if len(r.Coordinators) != 3 || r.Coordinators[2].Key != "c" || r.Coordinators[2].Port == 0 {
		t.Fatalf("find v4: %+v", r)
	}
	fc.CoordinatorType = 1 // the embedded store serves transactions (docs/transactions.md)
	if r := rc.roundTrip(6, fc).(*kmsg.FindCoordinatorResponse); r.Coordinators[0].ErrorCode != 0 || r.Coordinators[0].Port == 0 {
		t.Fatalf("transaction coordinator: %+v", r)
	}
}

// TestGroupCommitAfterTopicRecreated: a topic deleted and created again
// loses its checkpoints; committing the same offset as before writes it
// again instead of being skipped as unchanged.
func TestGroupCommitAfterTopicRecreated(t *testing.T) {
	g := startGateway(t, fastGroups)
	ctx := context.Background()
	adm := kadm.NewClient(g.client(t))
	rc := g.raw(t)
	commit := func() {
		t.Helper()
		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Group, oc.Generation = "recreate", -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "re.topic"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 5
		rt.Partitions = append(rt.Partitions, rp)
		oc.Topics = append(oc.Topics, rt)
		if r := rc.roundTrip(8, oc).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("commit: %d", r.Topics[0].Partitions[0].ErrorCode)
		}
	}
	fetch := func() int64 {
		t.Helper()
		offs, err := adm.FetchOffsets(ctx, "recreate")
		if err != nil {
			t.Fatal(err)
		}
		o, ok := offs.Lookup("re.topic", 0)
		if !ok {
			return -1
		}
		return o.At
	}
	for round := range 2 {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, "re.topic"); err != nil {
			t.Fatal(err)
		}
		commit()
		if got := fetch(); got != 5 {
			t.Fatalf("round %d: committed %d, want 5", round, got)
		}
		if _, err := adm.DeleteTopics(ctx, "re.topic"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGroupAPIsEveryVersion: every group API answers at every version it
// advertises, with a response that decodes at that version (error paths
// and success paths alike).
func TestGroupAPIsEveryVersion(t *testing.T) {
	g := startGateway(t, fastGroups)
	rc := g.raw(t)
	reqs := map[int16]func() kmsg.Request{
		8: func() kmsg.Request {
			r := kmsg.NewPtrOffsetCommitRequest()
			r.Group = "every"
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = "unknown"
			rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{kmsg.NewOffsetCommitRequestTopicPartition()}
			r.Topics = []kmsg.OffsetCommitRequestTopic{rt}
			return r
		},
		9: func() kmsg.Request {
			r := kmsg.NewPtrOffsetFetchRequest()
			r.Group = "every"
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = "every"
			r.Groups = []kmsg.OffsetFetchRequestGroup{rg}
			return r
		},
		10: func() kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.CoordinatorKey, r.CoordinatorKeys = "every", []string{"every"}
			return r
		},
		11: func() kmsg.Request { return joinReq("", "", "consumer", proto("range", nil)) },
		12: func() kmsg.Request {
			r := kmsg.NewPtrHeartbeatRequest()
			r.Group, r.MemberID = "every", "m"
			return r
		},
		13: func() kmsg.Request {
			r := kmsg.NewPtrLeaveGroupRequest()
			r.Group, r.MemberID = "every", "m"
			m := kmsg.NewLeaveGroupRequestMember()
			m.MemberID = "m"
			r.Members = []kmsg.LeaveGroupRequestMember{m}
			return r
		},
		14: func() kmsg.Request {
			r := kmsg.NewPtrSyncGroupRequest()
			r.Group, r.MemberID = "every", "m"
			return r
		},
		15: func() kmsg.Request {
			r := kmsg.NewPtrDescribeGroupsRequest()
			r.Groups = []string{"every", ""}
			return r
		},
		16: func() kmsg.Request { return kmsg.NewPtrListGroupsRequest() },
		42: func() kmsg.Request {
			r := kmsg.NewPtrDeleteGroupsRequest()
			r.Groups = []string{"every"}
			return r
		},
		47: func() kmsg.Request {
			r := kmsg.NewPtrOffsetDeleteRequest()
			r.Group = "every"
			return r
		},
	}
	// A whole join and sync of a one-member group at each JoinGroup version.
	for v := int16(0); v <= 9; v++ {
		group := fmt.Sprintf("every-%d", v)
		j := joinRaw(t, rc, v, joinReq(group, "", "consumer", proto("range", []byte{byte(v)})))
		if j.ErrorCode != 0 || j.Generation != 1 || j.LeaderID != j.MemberID || len(j.Members) != 1 || j.Members[0].ProtocolMetadata[0] != byte(v) {
			t.Fatalf("join v%d: %+v", v, j)
		}
		sr := kmsg.NewPtrSyncGroupRequest()
		sr.Group, sr.MemberID, sr.Generation = group, j.MemberID, j.Generation
		pt, pn := "consumer", "range"
		sr.ProtocolType, sr.Protocol = &pt, &pn
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID, a.MemberAssignment = j.MemberID, []byte{byte(v), 1}
		sr.GroupAssignment = append(sr.GroupAssignment, a)
		if r := rc.roundTrip(min(v, 5), sr).(*kmsg.SyncGroupResponse); r.ErrorCode != 0 || !bytes.Equal(r.MemberAssignment, a.MemberAssignment) {
			t.Fatalf("sync v%d: %+v", min(v, 5), r)
		}
	}
	for key, mk := range reqs {
		for v := int16(0); v <= mk().MaxVersion(); v++ {
			resp := rc.roundTrip(v, mk())
			if resp.GetVersion() != v {
				t.Fatalf("%s v%d answered at v%d", kmsg.NameForKey(key), v, resp.GetVersion())
			}
		}
	}
}
