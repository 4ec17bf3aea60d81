package gateway

// CreatePartitions: v0-3 (DIS UpdatePartitionCount).
//
// Version notes: v1 ThrottleMillis; v2 flexible; v3 no change.
//
// Only increases: a count equal to or below the current one gets
// INVALID_PARTITIONS, as Kafka. Assignments are accepted and ignored (one
// node leads everything). New partitions start at offset 0. Topics past
// Limits.MaxTopics get INVALID_REQUEST (limits.go). An unknown topic gets
// UNKNOWN_TOPIC_OR_PARTITION without an error message, as from Kafka.

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
		if st := s.topics.get(rt.Topic); st != nil && !r.ValidateOnly && count[rt.Topic] == 1 && rt.Count > st.PartitionCount {
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
			err = s.createPartitions(ctx, rt.Topic, rt.Count, r.ValidateOnly)
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

func (s *Server) createPartitions(ctx context.Context, topic string, n int32, validateOnly bool) error {
	s.topics.adminMu.Lock()
	defer s.topics.adminMu.Unlock()
	st := s.topics.get(topic)
	if st == nil {
		return fmt.Errorf("%w: topic %q", errUnknownTopic, topic)
	}
	if n <= st.PartitionCount {
		return kerrWrap(kerr.InvalidPartitions, fmt.Sprintf("topic %q has %d partitions; the count can only be increased", topic, st.PartitionCount))
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
