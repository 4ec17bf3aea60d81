package gateway

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Manual replica assignments (CreateTopics, CreatePartitions,
// AlterPartitionReassignments) are checked as Kafka 4.4's controller
// checks them (ReplicationControlManager.validateManualPartitionAssignment),
// with its messages. On one node the only broker is this node
// (Config.NodeID), the one replica of every partition, so the one
// assignment that passes is [Config.NodeID]; with several, the brokers are
// the view's nodes (cluster.go) and an assignment of any one of them
// passes. The gateway then places the partition as it places every
// partition (with several nodes, on its owner in the view).

// topicReplicationFactor is every partition's replica count: this node
// alone (Metadata lists replicas [Config.NodeID]).
const topicReplicationFactor = 1

// replicaAssignmentError checks one partition's replicas: not empty, then,
// in ascending order of broker id, each a registered broker and not the
// same as the one before, then (rf >= 0) rf replicas. It returns "" when
// they pass, else Kafka's message (its error is INVALID_REPLICA_ASSIGNMENT).
func (s *Server) replicaAssignmentError(replicas []int32, rf int) string {
	if len(replicas) == 0 {
		return "The manual partition assignment includes an empty replica list."
	}
	ids := slices.Sorted(slices.Values(replicas))
	registered := func(id int32) bool { return id == s.cfg.NodeID }
	if v := s.answerView(); v != nil {
		registered = func(id int32) bool { _, ok := v.Node(id); return ok }
	}
	for i, id := range ids {
		if !registered(id) {
			return fmt.Sprintf("The manual partition assignment includes broker %d, but no such broker is registered.", id)
		}
		if i > 0 && ids[i-1] == id {
			return fmt.Sprintf("The manual partition assignment includes the broker %d more than once.", id)
		}
	}
	if rf >= 0 && len(ids) != rf {
		return fmt.Sprintf("The manual partition assignment includes a partition with %d replica(s), but this is not consistent with previous partitions, which have %d replica(s).", len(ids), rf)
	}
	return ""
}

// invalidAssignment is INVALID_REPLICA_ASSIGNMENT with Kafka's message msg.
func invalidAssignment(msg string) error { return kafkaMessage(kerr.InvalidReplicaAssignment, msg) }

// kafkaMessage is an error of Kafka error ke whose text, sent as the
// response's ErrorMessage, is msg exactly: Kafka's own words.
func kafkaMessage(ke *kerr.Error, msg string) error { return &kafkaMsgErr{ke: ke, msg: msg} }

type kafkaMsgErr struct {
	ke  *kerr.Error
	msg string
}

func (e *kafkaMsgErr) Error() string { return e.msg }
func (e *kafkaMsgErr) Unwrap() error { return e.ke }
