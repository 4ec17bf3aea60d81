package gateway

// CreatePartitions: v0-3 (DIS UpdatePartitionCount).
//
// Version notes: v1 ThrottleMillis; v2 flexible; v3 no change.
//
// Each topic is checked as Kafka 4.4's controller checks it
// (ReplicationControlManager.createPartitions), in its order and with its
// messages, validate_only or not:
//   - an unknown topic: UNKNOWN_TOPIC_OR_PARTITION without a message;
//   - only increases: a count equal to or below the current one gets
//     INVALID_PARTITIONS;
//   - an assignment (null: none) must list one entry per new partition,
//     else INVALID_REPLICA_ASSIGNMENT;
//   - the partition mutation rate (THROTTLING_QUOTA_EXCEEDED, limits.go);
//   - each entry is checked as replica_assignment.go says: not empty, no
//     broker but this node (Config.NodeID), none twice, and as many
//     replicas as the topic's partitions have (1), else
//     INVALID_REPLICA_ASSIGNMENT. A valid assignment ([this node] for
//     each) places the partitions where they go anyway.
//
// Then disgw's own limit: more than Config.MaxPartitions partitions is
// INVALID_PARTITIONS. New partitions start at offset 0. Topics past
// Limits.MaxTopics get INVALID_REQUEST (limits.go).

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(37, 0, 3, (*conn).handleCreatePartitions, denyTopics(acl.OpAlter,
		func(r *kmsg.CreatePartitionsRequest) *[]kmsg.CreatePartitionsRequestTopic { return &r.Topics },
		func(t kmsg.CreatePartitionsRequestTopic) string { return t.Topic },
		refuseCreatePartitionsTopic,
		func(r *kmsg.CreatePartitionsResponse) *[]kmsg.CreatePartitionsResponseTopic { return &r.Topics }))
	controllerOnly(37, func(r *kmsg.CreatePartitionsRequest, code int16) kmsg.Response {
		resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, t := range r.Topics {
			d := refuseCreatePartitionsTopic(t, code)
			d.ErrorMessage = codeMessage(code)
			resp.Topics = append(resp.Topics, d)
		}
		return resp
	}, topicsChanged(func(r *kmsg.CreatePartitionsResponse, add func(string, int16)) {
		for _, t := range r.Topics {
			add(t.Topic, t.ErrorCode)
		}
	}))
}

// refuseCreatePartitionsTopic answers a refused topic with code.
func refuseCreatePartitionsTopic(t kmsg.CreatePartitionsRequestTopic, code int16) kmsg.CreatePartitionsResponseTopic {
	d := kmsg.NewCreatePartitionsResponseTopic()
	d.Topic, d.ErrorCode = t.Topic, code
	return d
}

func (c *conn) handleCreatePartitions(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.CreatePartitionsRequest)
	resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
	s := c.s
	ctx, cancel := c.requestContext(r.TimeoutMillis)
	defer cancel()
	count := countNames(r.Topics, func(t kmsg.CreatePartitionsRequestTopic) string { return t.Topic })
	q := newQuota(s.cfg.Limits.MaxTopics)
	defer q.report(c, limitTopics, "CreatePartitions")
	resp.Topics = make([]kmsg.CreatePartitionsResponseTopic, 0, len(r.Topics))
	for _, rt := range r.Topics {
		t := kmsg.NewCreatePartitionsResponseTopic()
		t.Topic = rt.Topic
		if !q.take() {
			t.ErrorCode = errCodeOverCap
			resp.Topics = append(resp.Topics, t)
			continue
		}
		var err error
		if st := s.topics.get(rt.Topic); st != nil && !r.ValidateOnly && count[rt.Topic] == 1 && rt.Count > st.PartitionCount &&
			(rt.Assignment == nil || len(rt.Assignment) == int(rt.Count-st.PartitionCount)) {
			// Kafka applies the quota once the count and the number of
			// assignments passed, before the assignments' brokers.
			if ok, wait := s.limits.admitMutations(); !ok {
				t.ErrorCode = kerr.ThrottlingQuotaExceeded.Code
				t.ErrorMessage = kmsg.StringPtr("partition mutation rate exceeded (partition_mutations_per_second)")
				resp.ThrottleMillis = max(resp.ThrottleMillis, throttleMillis(wait))
				s.limits.hit(limitPartitionMutations, "CreatePartitions", 1, c)
				resp.Topics = append(resp.Topics, t)
				continue
			}
		}
		if count[rt.Topic] > 1 {
			err = errListedTwice(rt.Topic)
		} else {
			before := s.topics.get(rt.Topic)
			err = s.createPartitions(ctx, rt.Topic, rt.Count, newPartitionsAssignment(rt.Assignment), r.ValidateOnly)
			if err == nil && !r.ValidateOnly && before != nil {
				s.limits.spendMutations(int(rt.Count - before.PartitionCount))
			}
		}
		if err != nil {
			t.ErrorCode = kafkaError(c.log, err)
			if t.ErrorCode != kerr.UnknownTopicOrPartition.Code { // Kafka sends no message for an unknown topic
				t.ErrorMessage = errMessage(err)
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	return ready(req, resp)
}

// newPartitionsAssignment is the replicas of each new partition a request
// assigns (nil: no assignment, the request's null).
func newPartitionsAssignment(a []kmsg.CreatePartitionsRequestTopicAssignment) [][]int32 {
	if a == nil {
		return nil
	}
	out := make([][]int32, len(a))
	for i := range a {
		out[i] = a[i].Replicas
	}
	return out
}

// createPartitions raises topic's partition count to n (validateOnly:
// only checks that it may), the new partitions placed by assignment (nil:
// none given; else one replica list per new partition).
func (s *Server) createPartitions(ctx context.Context, topic string, n int32, assignment [][]int32, validateOnly bool) error {
	s.topics.adminMu.Lock()
	defer s.topics.adminMu.Unlock()
	st := s.topics.get(topic)
	if st == nil {
		return fmt.Errorf("%w: topic %q", errUnknownTopic, topic)
	}
	if err := s.checkNewPartitions(st.TopicName, st.PartitionCount, n, assignment); err != nil {
		return err
	}
	if n > s.cfg.MaxPartitions {
		return kerrWrap(kerr.InvalidPartitions, fmt.Sprintf("%d partitions requested; a topic may have at most %d", n, s.cfg.MaxPartitions))
	}
	if validateOnly {
		return nil
	}
	if err := s.backend.UpdatePartitionCount(ctx, st.Name, n); err != nil {
		return err
	}
	updated, err := s.backend.DescribeStream(ctx, st.Name)
	if err != nil {
		return err
	}
	s.topics.put(&updated)
	s.log.Info("partitions created", zapTopic(topic), zapInt32("partitions", n))
	return nil
}

// checkNewPartitions checks raising topic from current partitions to n
// with assignment as Kafka's controller does, with its messages.
func (s *Server) checkNewPartitions(topic string, current, n int32, assignment [][]int32) error {
	switch {
	case n == current:
		return kafkaMessage(kerr.InvalidPartitions, fmt.Sprintf("Topic already has %d partition(s).", current))
	case n < current:
		return kafkaMessage(kerr.InvalidPartitions, fmt.Sprintf("The topic %s currently has %d partition(s); %d would not be an increase.", topic, current, n))
	}
	additional := int(n - current)
	if assignment != nil && len(assignment) != additional {
		return invalidAssignment(fmt.Sprintf("Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", additional, len(assignment)))
	}
	for _, replicas := range assignment {
		if msg := s.replicaAssignmentError(replicas, topicReplicationFactor); msg != "" {
			return invalidAssignment(msg)
		}
	}
	return nil
}
