package gateway_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/gateway"
)

// The gateway of these tests is node 3: the one broker a manual replica
// assignment may name.
const assignNode = 3

func errMsg(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

// TestCreatePartitionsAssignments: CreatePartitions checks a manual
// replica assignment as Kafka 4.4's controller does, in its order and
// with its messages, validate_only or not (issue 26: kafkajs'
// createPartitions "invalid broker"); a bad one changes nothing, a valid
// one ([node] per new partition) adds the partitions.
func TestCreatePartitionsAssignments(t *testing.T) {
	g := startGateway(t, func(c *gateway.Config) { c.NodeID = assignNode })
	r := g.raw(t)
	if tp := r.roundTrip(7, createTopicsReq("p", 2, nil)).(*kmsg.CreateTopicsResponse).Topics[0]; tp.ErrorCode != 0 {
		t.Fatalf("create p: %+v", tp)
	}
	partitions := func() int {
		return len(r.roundTrip(12, metadataReq("p")).(*kmsg.MetadataResponse).Topics[0].Partitions)
	}
	cases := []struct {
		name    string
		topic   string
		count   int32
		assign  [][]int32 // nil: none (null)
		want    *kerr.Error
		message string
	}{
		{"a broker that does not exist", "p", 3, [][]int32{{0}}, kerr.InvalidReplicaAssignment,
			"The manual partition assignment includes broker 0, but no such broker is registered."},
		{"the broker twice", "p", 3, [][]int32{{assignNode, assignNode}}, kerr.InvalidReplicaAssignment,
			"The manual partition assignment includes the broker 3 more than once."},
		{"brokers checked in ascending order", "p", 3, [][]int32{{assignNode, 9, 1}}, kerr.InvalidReplicaAssignment,
			"The manual partition assignment includes broker 1, but no such broker is registered."},
		{"no broker", "p", 3, [][]int32{{}}, kerr.InvalidReplicaAssignment,
			"The manual partition assignment includes an empty replica list."},
		{"the second new partition on a broker that does not exist", "p", 4, [][]int32{{assignNode}, {assignNode, 4}}, kerr.InvalidReplicaAssignment,
			"The manual partition assignment includes broker 4, but no such broker is registered."},
		{"fewer assignments than new partitions", "p", 4, [][]int32{{assignNode}}, kerr.InvalidReplicaAssignment,
			"Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."},
		{"more assignments than new partitions", "p", 3, [][]int32{{assignNode}, {assignNode}}, kerr.InvalidReplicaAssignment,
			"Attempted to add 1 additional partition(s), but only 2 assignment(s) were specified."},
		{"an empty assignment list", "p", 3, [][]int32{}, kerr.InvalidReplicaAssignment,
			"Attempted to add 1 additional partition(s), but only 0 assignment(s) were specified."},
		{"the count unchanged, before the assignment", "p", 2, [][]int32{{0}}, kerr.InvalidPartitions,
			"Topic already has 2 partition(s)."},
		{"a decrease, before the assignment", "p", 1, [][]int32{{0}}, kerr.InvalidPartitions,
			"The topic p currently has 2 partition(s); 1 would not be an increase."},
		{"an unknown topic, before the assignment", "nope", 3, [][]int32{{0}}, kerr.UnknownTopicOrPartition, "<null>"},
	}
	for _, version := range []int16{0, 3} {
		for _, validateOnly := range []bool{false, true} {
			for _, tc := range cases {
				cp := kmsg.NewPtrCreatePartitionsRequest()
				cp.TimeoutMillis, cp.ValidateOnly = 10000, validateOnly
				ct := kmsg.NewCreatePartitionsRequestTopic()
				ct.Topic, ct.Count = tc.topic, tc.count
				if tc.assign != nil {
					ct.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{}
					for _, replicas := range tc.assign {
						a := kmsg.NewCreatePartitionsRequestTopicAssignment()
						a.Replicas = replicas
						ct.Assignment = append(ct.Assignment, a)
					}
				}
				cp.Topics = []kmsg.CreatePartitionsRequestTopic{ct}
				got := r.roundTrip(version, cp).(*kmsg.CreatePartitionsResponse).Topics[0]
				if got.ErrorCode != tc.want.Code || errMsg(got.ErrorMessage) != tc.message {
					t.Errorf("v%d validate_only=%v, %s: error %d %q, want %s %q", version, validateOnly, tc.name,
						got.ErrorCode, errMsg(got.ErrorMessage), tc.want.Message, tc.message)
				}
			}
		}
	}
	if n := partitions(); n != 2 {
		t.Fatalf("after the refused assignments p has %d partitions, want 2", n)
	}

	valid := func(count int32, validateOnly bool, assign ...[]int32) {
		t.Helper()
		cp := kmsg.NewPtrCreatePartitionsRequest()
		cp.TimeoutMillis, cp.ValidateOnly = 10000, validateOnly
		ct := kmsg.NewCreatePartitionsRequestTopic()
		ct.Topic, ct.Count = "p", count
		for _, replicas := range assign {
			a := kmsg.NewCreatePartitionsRequestTopicAssignment()
			a.Replicas = replicas
			ct.Assignment = append(ct.Assignment, a)
		}
		cp.Topics = []kmsg.CreatePartitionsRequestTopic{ct}
		if got := r.roundTrip(3, cp).(*kmsg.CreatePartitionsResponse).Topics[0]; got.ErrorCode != 0 || got.ErrorMessage != nil {
			t.Fatalf("p to %d on node %d (validate_only=%v): error %d %q", count, assignNode, validateOnly, got.ErrorCode, errMsg(got.ErrorMessage))
		}
	}
	valid(4, true, []int32{assignNode}, []int32{assignNode})
	if n := partitions(); n != 2 {
		t.Fatalf("after a valid assignment, validate only, p has %d partitions, want 2", n)
	}
	valid(4, false, []int32{assignNode}, []int32{assignNode})
	if n := partitions(); n != 4 {
		t.Fatalf("after a valid assignment p has %d partitions, want 4", n)
	}
	valid(5, false) // no assignment
	if n := partitions(); n != 5 {
		t.Fatalf("after an increase without assignment p has %d partitions, want 5", n)
	}
}

// TestCreateTopicsAssignments: CreateTopics checks a manual replica
// assignment as Kafka 4.4's controller does (the same gap as
// CreatePartitions had: any assignment was taken), with its messages,
// validate_only or not; a valid one creates one partition per entry.
func TestCreateTopicsAssignments(t *testing.T) {
	g := startGateway(t, func(c *gateway.Config) { c.NodeID = assignNode })
	r := g.raw(t)
	type entry struct {
		partition int32
		replicas  []int32
	}
	seq := func(replicas ...[]int32) []entry {
		var out []entry
		for i, rs := range replicas {
			out = append(out, entry{int32(i), rs})
		}
		return out
	}
	create := func(topic string, version int16, validateOnly bool, partitions int32, rf int16, assign []entry) kmsg.CreateTopicsResponseTopic {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis, req.ValidateOnly = 10000, validateOnly
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, partitions, rf
		for _, e := range assign {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = e.partition, e.replicas
			ct.ReplicaAssignment = append(ct.ReplicaAssignment, a)
		}
		req.Topics = []kmsg.CreateTopicsRequestTopic{ct}
		return r.roundTrip(version, req).(*kmsg.CreateTopicsResponse).Topics[0]
	}
	cases := []struct {
		name       string
		partitions int32
		rf         int16
		assign     []entry
		want       *kerr.Error
		message    string
	}{
		{"a broker that does not exist", -1, -1, seq([]int32{0}), kerr.InvalidReplicaAssignment,
			"The manual partition assignment includes broker 0, but no such broker is registered."},
		{"the broker twice", -1, -1, seq([]int32{assignNode, assignNode}), kerr.InvalidReplicaAssignment,
			"The manual partition assignment includes the broker 3 more than once."},
		{"no broker", -1, -1, seq([]int32{}), kerr.InvalidReplicaAssignment,
			"The manual partition assignment includes an empty replica list."},
		{"the second partition on a broker that does not exist", -1, -1, seq([]int32{assignNode}, []int32{assignNode, 9}), kerr.InvalidReplicaAssignment,
			"The manual partition assignment includes broker 9, but no such broker is registered."},
		{"a partition assigned twice", -1, -1, []entry{{0, []int32{assignNode}}, {0, []int32{assignNode}}}, kerr.InvalidReplicaAssignment,
			"Found multiple manual partition assignments for partition 0"},
		{"partition 0 missing", -1, -1, []entry{{1, []int32{assignNode}}}, kerr.InvalidReplicaAssignment,
			"partitions should be a consecutive 0-based integer sequence"},
		{"a partition twice before a bad broker", -1, -1, []entry{{0, []int32{assignNode}}, {0, []int32{0}}}, kerr.InvalidReplicaAssignment,
			"Found multiple manual partition assignments for partition 0"},
		{"a replication factor", -1, 1, seq([]int32{0}), kerr.InvalidRequest,
			"A manual partition assignment was specified, but replication factor was not set to -1."},
		{"a partition count", 1, -1, seq([]int32{0}), kerr.InvalidRequest,
			"A manual partition assignment was specified, but numPartitions was not set to -1."},
	}
	for _, version := range []int16{1, 7} {
		for _, validateOnly := range []bool{false, true} {
			for _, tc := range cases {
				got := create("t", version, validateOnly, tc.partitions, tc.rf, tc.assign)
				if got.ErrorCode != tc.want.Code || errMsg(got.ErrorMessage) != tc.message {
					t.Errorf("v%d validate_only=%v, %s: error %d %q, want %s %q", version, validateOnly, tc.name,
						got.ErrorCode, errMsg(got.ErrorMessage), tc.want.Message, tc.message)
				}
			}
		}
	}
	if tp := r.roundTrip(12, metadataReq("t")).(*kmsg.MetadataResponse).Topics[0]; tp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("t after the refused assignments: error %d, want UNKNOWN_TOPIC_OR_PARTITION", tp.ErrorCode)
	}
	if got := create("t", 7, true, -1, -1, seq([]int32{assignNode}, []int32{assignNode})); got.ErrorCode != 0 || got.NumPartitions != 2 {
		t.Fatalf("t on node %d, validate only: %+v", assignNode, got)
	}
	if tp := r.roundTrip(12, metadataReq("t")).(*kmsg.MetadataResponse).Topics[0]; tp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("t after a validate-only creation: error %d, want UNKNOWN_TOPIC_OR_PARTITION", tp.ErrorCode)
	}
	// In the request's order of partitions, not 0 first.
	if got := create("t", 7, false, -1, -1, []entry{{1, []int32{assignNode}}, {0, []int32{assignNode}}}); got.ErrorCode != 0 || got.NumPartitions != 2 {
		t.Fatalf("t on node %d: %+v", assignNode, got)
	}
	tp := r.roundTrip(12, metadataReq("t")).(*kmsg.MetadataResponse).Topics[0]
	if tp.ErrorCode != 0 || len(tp.Partitions) != 2 {
		t.Fatalf("t after its creation: error %d, %d partitions, want 2", tp.ErrorCode, len(tp.Partitions))
	}
	for _, p := range tp.Partitions {
		if p.Leader != assignNode || len(p.Replicas) != 1 || p.Replicas[0] != assignNode {
			t.Errorf("t[%d]: leader %d replicas %v, want node %d", p.Partition, p.Leader, p.Replicas, assignNode)
		}
	}
}

// TestCreatePartitionsAssignmentQuotaOrder: with the partition mutation
// bucket empty, Kafka's order holds: the number of assignments is checked
// before the quota (INVALID_REPLICA_ASSIGNMENT), the brokers after it
// (THROTTLING_QUOTA_EXCEEDED).
func TestCreatePartitionsAssignmentQuotaOrder(t *testing.T) {
	g := startGateway(t, func(c *gateway.Config) {
		c.NodeID = assignNode
		c.Limits.PartitionMutationsPerSecond = 10 // a bucket of 100
	})
	now := time.Unix(1_000_000, 0)
	gateway.SetLimitsClock(g.srv, func() time.Time { return now })
	r := g.raw(t)
	if tp := r.roundTrip(7, createTopicsReq("q", 110, nil)).(*kmsg.CreateTopicsResponse).Topics[0]; tp.ErrorCode != 0 {
		t.Fatalf("create q: %+v", tp) // the bucket goes to -10
	}
	for _, tc := range []struct {
		name   string
		count  int32
		assign [][]int32
		want   *kerr.Error
	}{
		{"one assignment for two new partitions", 112, [][]int32{{assignNode}}, kerr.InvalidReplicaAssignment},
		{"a broker that does not exist", 111, [][]int32{{0}}, kerr.ThrottlingQuotaExceeded},
		{"a valid assignment", 111, [][]int32{{assignNode}}, kerr.ThrottlingQuotaExceeded},
	} {
		cp := kmsg.NewPtrCreatePartitionsRequest()
		cp.TimeoutMillis = 10000
		ct := kmsg.NewCreatePartitionsRequestTopic()
		ct.Topic, ct.Count = "q", tc.count
		for _, replicas := range tc.assign {
			a := kmsg.NewCreatePartitionsRequestTopicAssignment()
			a.Replicas = replicas
			ct.Assignment = append(ct.Assignment, a)
		}
		cp.Topics = []kmsg.CreatePartitionsRequestTopic{ct}
		if got := r.roundTrip(3, cp).(*kmsg.CreatePartitionsResponse).Topics[0]; got.ErrorCode != tc.want.Code {
			t.Errorf("%s with the bucket empty: error %d, want %s", tc.name, got.ErrorCode, tc.want.Message)
		}
	}
}
