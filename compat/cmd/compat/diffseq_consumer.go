package main

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// seqConsumerGroups drives a KIP-848 consumer group (ConsumerGroupHeartbeat,
// ConsumerGroupDescribe; docs/consumer-protocol.md) through the same
// heartbeats on both servers: two members joining with the range assignor
// (its assignment is exact, so it is compared; uniform's may differ and is
// not used here), the revocation of a partition before it is assigned to
// the other member, the errors a heartbeat can get, offsets committed and
// fetched with member epochs, the group described, listed and left. The
// member ids are the client's (KIP-1082: v1 requires one; at v0 Kafka
// generates its own, kept as any generated member id, and the sequence
// goes on with each server's).
func seqConsumerGroups(t *diffTarget, p string) {
	if t.v(68) < 0 {
		return
	}
	ct, g := p+"ct", p+"cg"
	createTopic(t, "", ct, 3, nil)
	produce(t, "Produce 5 records to ct[0]", produceReq(ct, 0, recordBatch(5, -1, -1, -1)))
	t.do("FindCoordinator cg", waitCoordinator(t, g))
	ctID := topicID(t, ct)
	owned := func(parts ...int32) []kmsg.ConsumerGroupHeartbeatRequestTopic {
		if len(parts) == 0 {
			return []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		return []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: ctID, Partitions: parts}}
	}
	waitAssignable(t, p+"probe", ct)
	ids := map[string]string{}
	heartbeat := func(label, member string, epoch int32, mod func(*kmsg.ConsumerGroupHeartbeatRequest)) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = g, member, epoch
		if id, ok := ids[member]; ok {
			req.MemberID = id
		}
		if epoch == 0 {
			req.RebalanceTimeoutMillis = 10000
			req.SubscribedTopicNames = []string{ct}
			req.ServerAssignor = ptr("range")
			req.Topics = owned()
		}
		if mod != nil {
			mod(req)
		}
		resp := t.do(label, req)
		if resp == nil {
			return nil
		}
		r := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
		if epoch == 0 && r.ErrorCode == 0 && r.MemberID != nil {
			ids[member] = *r.MemberID
		}
		return r
	}
	epochOf := func(r *kmsg.ConsumerGroupHeartbeatResponse) int32 {
		if r == nil {
			return -1
		}
		return r.MemberEpoch
	}
	const m1, m2 = "AAAAAAAAAAAAAAAAAAAAAQ", "AAAAAAAAAAAAAAAAAAAAAg"

	// Refused before the group: each is Kafka's INVALID_REQUEST or
	// UNSUPPORTED_ASSIGNOR, with nothing joined.
	heartbeat("ConsumerGroupHeartbeat join without a rebalance timeout", m1, 0, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 })
	heartbeat("ConsumerGroupHeartbeat join owning partitions", m1, 0, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Topics = owned(0) })
	heartbeat("ConsumerGroupHeartbeat join with an unknown assignor", m1, 0, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = ptr("nope") })
	heartbeat("ConsumerGroupHeartbeat epoch -3", m1, -3, nil)
	heartbeat("ConsumerGroupHeartbeat unknown member, epoch 5", "AAAAAAAAAAAAAAAAAAAAAw", 5, nil)
	if t.v(68) >= 1 {
		heartbeat("ConsumerGroupHeartbeat join with an invalid regex", m1, 0, func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.SubscribedTopicNames, r.SubscribedTopicRegex = nil, ptr("(")
		})
	}

	// m1 joins: every partition of ct.
	r1 := heartbeat("ConsumerGroupHeartbeat m1 joins (range)", m1, 0, nil)
	e1 := epochOf(r1)
	heartbeat("ConsumerGroupHeartbeat m1 owns its assignment", m1, e1, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Topics = owned(0, 1, 2) })
	heartbeat("ConsumerGroupHeartbeat m1 at a later epoch (fenced)", m1, e1+5, nil)

	// m2 joins: range gives it ct[2], which m1 must revoke first.
	r2 := heartbeat("ConsumerGroupHeartbeat m2 joins", m2, 0, nil)
	e2 := epochOf(r2)
	r1 = heartbeat("ConsumerGroupHeartbeat m1, still owning ct[0-2]: revoke ct[2]", m1, e1, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Topics = owned(0, 1, 2) })
	r1 = heartbeat("ConsumerGroupHeartbeat m1 revoked ct[2]", m1, epochOf(r1), func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Topics = owned(0, 1) })
	e1 = epochOf(r1)
	r2 = heartbeat("ConsumerGroupHeartbeat m2: ct[2] released", m2, e2, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Topics = owned() })
	e2 = epochOf(r2)
	heartbeat("ConsumerGroupHeartbeat m2 owns ct[2]", m2, e2, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Topics = owned(2) })

	describe := func(label string) {
		if t.v(69) < 0 {
			return
		}
		d := kmsg.NewPtrConsumerGroupDescribeRequest()
		d.Groups = []string{g, p + "nogroup"}
		d.IncludeAuthorizedOperations = true
		t.do(label, d)
	}
	describe("ConsumerGroupDescribe cg (Stable) and an unknown group")
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{g}
	t.do("DescribeGroups cg (a consumer group)", dg)
	if t.v(16) >= 5 {
		lg := kmsg.NewPtrListGroupsRequest()
		lg.TypesFilter = []string{"consumer"}
		t.do("ListGroups of type consumer", lg)
	}

	// Offsets with member epochs: the generation is the member epoch.
	commit := func(label, member string, epoch int32) {
		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Group, oc.Generation, oc.MemberID = g, epoch, ids[member]
		oc.RetentionTimeMillis = -1
		oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: ct, TopicID: ctID, Partitions: []kmsg.OffsetCommitRequestTopicPartition{
			{Partition: 0, Offset: 5, LeaderEpoch: -1}}}}
		t.do(label, oc)
	}
	if t.v(8) >= 2 { // v0 has no generation: Kafka 3.x kept v0 commits apart from the group
		commit("OffsetCommit cg by m1 at its epoch", m1, e1)
		commit("OffsetCommit cg by m1 at a stale epoch", m1, e1-1)
		commit("OffsetCommit cg by m1 at a later epoch", m1, e1+1)
	}
	if t.v(9) >= 9 {
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: g, MemberID: ptr(ids[m1]), MemberEpoch: e1,
			Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: ct, TopicID: ctID, Partitions: []int32{0, 1}}}}}
		t.do("OffsetFetch cg by m1 at its epoch", of)
		of.Groups[0].MemberEpoch = e1 + 1
		t.do("OffsetFetch cg by m1 at a later epoch", of)
	}

	// A classic JoinGroup to the group while it has consumer members
	// (Kafka takes the member into the group, docs/consumer-protocol.md
	// §8) is the consumer-migration sequence's (diffseq_migration.go).

	// Both leave: the group is empty, its offsets kept.
	heartbeat("ConsumerGroupHeartbeat m2 leaves", m2, -1, nil)
	heartbeat("ConsumerGroupHeartbeat m2 after it left", m2, e2, nil)
	heartbeat("ConsumerGroupHeartbeat m1 leaves", m1, -1, nil)
	describe("ConsumerGroupDescribe cg after the members left")
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group = g
	of.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: ct, Partitions: []int32{0}}}
	of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: g, MemberEpoch: -1,
		Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: ct, TopicID: ctID, Partitions: []int32{0}}}}}
	t.do("OffsetFetch cg after the members left", of)
	dl := kmsg.NewPtrDeleteGroupsRequest()
	dl.Groups = []string{g}
	t.do("DeleteGroups cg (empty)", dl)
	describe("ConsumerGroupDescribe cg after DeleteGroups")
}

// waitAssignable waits (up to 30 s, not compared) until a member of group
// probe, subscribed to topic with the range assignor, is assigned its
// partitions, then leaves: Kafka's group coordinator learns a topic from
// its metadata image a moment after CreateTopics answers, and a member
// joining before that is assigned nothing.
func waitAssignable(t *diffTarget, probe, topic string) {
	const member = "AAAAAAAAAAAAAAAAAAAAAA"
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = probe, member, 0
		req.RebalanceTimeoutMillis, req.SubscribedTopicNames, req.ServerAssignor = 10000, []string{topic}, ptr("range")
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp, _, err := t.send(req)
		if err != nil {
			return
		}
		r := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
		assigned := r.ErrorCode == 0 && r.Assignment != nil && len(r.Assignment.Topics) > 0
		if r.ErrorCode == 0 {
			leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			leave.Group, leave.MemberID, leave.MemberEpoch = probe, member, -1
			_, _, _ = t.send(leave)
		}
		if assigned {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}
