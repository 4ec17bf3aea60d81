package gateway

// OffsetDelete: v0 (groupcoord; DIS DeleteCheckpoint).
//
// An Empty group loses the offsets asked for. A live "consumer" group loses
// only those of topics no member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC
// for the others), as Kafka does; a live group of another protocol type
// (connect, ...) gets NON_EMPTY_GROUP.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

// OffsetDelete needs DELETE on the group (else the request is refused),
// then READ on each topic (else the topic is taken out and answered
// TOPIC_AUTHORIZATION_FAILED on each partition).
func init() {
	registerAPI(47, 0, 0, (*conn).handleOffsetDelete,
		groupOp(acl.OpDelete, func(r *kmsg.OffsetDeleteRequest) string { return r.Group }, refuseOffsetDelete),
		denyTopics(acl.OpRead,
			func(r *kmsg.OffsetDeleteRequest) *[]kmsg.OffsetDeleteRequestTopic { return &r.Topics },
			func(t kmsg.OffsetDeleteRequestTopic) string { return t.Topic },
			refuseOffsetDeleteTopic,
			func(r *kmsg.OffsetDeleteResponse) *[]kmsg.OffsetDeleteResponseTopic { return &r.Topics }))
}

// refuseOffsetDelete answers the request with code.
func refuseOffsetDelete(r *kmsg.OffsetDeleteRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
	resp.ErrorCode = code
	return resp
}

// refuseOffsetDeleteTopic answers each partition of a refused topic with
// code.
func refuseOffsetDeleteTopic(t kmsg.OffsetDeleteRequestTopic, code int16) kmsg.OffsetDeleteResponseTopic {
	d := kmsg.NewOffsetDeleteResponseTopic()
	d.Topic = t.Topic
	for _, p := range t.Partitions {
		dp := kmsg.NewOffsetDeleteResponseTopicPartition()
		dp.Partition, dp.ErrorCode = p.Partition, code
		d.Partitions = append(d.Partitions, dp)
	}
	return d
}

func (c *conn) handleOffsetDelete(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.OffsetDeleteRequest)
	return reply{req: req, finish: func() (kmsg.Response, error) {
		ctx, cancel := c.requestContext(0)
		defer cancel()
		return c.s.groups.OffsetDelete(ctx, r), nil
	}}
}

// consumerSubscription reads the topics of a "consumer" protocol member's
// metadata (ConsumerMemberMetadata), for OffsetDelete. groupcoord itself
// treats metadata as opaque; this is the one place that reads it.
func consumerSubscription(protocolType string, metadata []byte) ([]string, bool) {
	if protocolType != "consumer" {
		return nil, false
	}
	var m kmsg.ConsumerMemberMetadata
	if err := m.ReadFrom(metadata); err != nil {
		return nil, false
	}
	return m.Topics, true
}
