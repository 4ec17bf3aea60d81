package gateway

// ConsumerGroupHeartbeat: v0-1 (groupcoord, KIP-848's consumer protocol;
// docs/consumer-protocol.md), served when Config.ConsumerGroupProtocol is
// set (the default; else not advertised, and answered UNSUPPORTED_VERSION).
//
// Version notes: v1 SubscribedTopicRegex, and the client makes its member
// id (KIP-1082). READ on the group, DESCRIBE on every subscribed topic
// (TOPIC_AUTHORIZATION_FAILED), as Kafka checks them; a regular
// expression matches only the topics the principal may DESCRIBE.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(68, 0, 1, (*conn).handleConsumerGroupHeartbeat,
		groupOp(acl.OpRead, func(r *kmsg.ConsumerGroupHeartbeatRequest) string { return r.Group }, refuseConsumerGroupHeartbeat),
		(*conn).authorizeHeartbeatTopics)
}

func refuseConsumerGroupHeartbeat(r *kmsg.ConsumerGroupHeartbeatRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.ErrorCode = code
	return resp
}

// authorizeHeartbeatTopics: DESCRIBE on every subscribed topic name.
func (c *conn) authorizeHeartbeatTopics(req *kafkawire.Request) (kmsg.Response, postAuth) {
	r := req.Body.(*kmsg.ConsumerGroupHeartbeatRequest)
	for _, t := range r.SubscribedTopicNames {
		if !c.mayTopic(acl.OpDescribe, t) {
			return refuseConsumerGroupHeartbeat(r, kerr.TopicAuthorizationFailed.Code), nil
		}
	}
	return nil, nil
}

func (c *conn) handleConsumerGroupHeartbeat(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.ConsumerGroupHeartbeatRequest)
	if !c.s.cfg.ConsumerGroupProtocol {
		return ready(req, refuseConsumerGroupHeartbeat(r, kerr.UnsupportedVersion.Code))
	}
	client := c.groupClient(req)
	return reply{req: req, finish: func() (kmsg.Response, error) {
		ctx, cancel := c.requestContext(0)
		defer cancel()
		return c.s.groups.ConsumerGroupHeartbeat(ctx, client, consumerTopics{c: c}, r), nil
	}}
}

// consumerTopics is the topic cache as a consumer group sees it
// (consumer.Topics): names, topic ids and partition counts of the topics
// known to this node, __consumer_offsets among them (Kafka resolves
// regular expressions against internal topics too); Names leaves out what
// the connection's principal may not DESCRIBE.
type consumerTopics struct{ c *conn }

func (t consumerTopics) Partitions(topic string) (int32, bool) {
	st := t.c.s.cachedTopic(topic)
	if st == nil {
		return 0, false
	}
	return st.PartitionCount, true
}

func (t consumerTopics) ID(topic string) ([16]byte, bool) {
	st := t.c.s.cachedTopic(topic)
	if st == nil {
		return [16]byte{}, false
	}
	return st.TopicID, true
}

func (t consumerTopics) Name(id [16]byte) (string, bool) {
	if off := t.c.s.offsetsTopicStream(); off.TopicID == id {
		return off.TopicName, true
	}
	st := t.c.s.topics.getByID(id)
	if st == nil {
		return "", false
	}
	return st.TopicName, true
}

func (t consumerTopics) Names() []string {
	var out []string
	for _, st := range append(t.c.s.topics.all(), t.c.s.offsetsTopicStream()) {
		if t.c.mayTopic(acl.OpDescribe, st.TopicName) {
			out = append(out, st.TopicName)
		}
	}
	return out
}
