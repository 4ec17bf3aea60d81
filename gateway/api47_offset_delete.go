package gateway

// OffsetDelete: v0 (groupcoord; DIS DeleteCheckpoint).
//
// An Empty group loses the offsets asked for. A live "consumer" group loses
// only those of topics no member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC
// for the others), as Kafka does; a live group of another protocol type
// (connect, ...) gets NON_EMPTY_GROUP.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/kafkawire"
)

func init() { registerAPI(47, 0, 0, (*conn).handleOffsetDelete) }

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
