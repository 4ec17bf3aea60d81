package gateway

// WriteTxnMarkers: v0-1 (txncoord.Coordinator.WriteMarker): what Kafka's
// transaction coordinator sends partition leaders, and what
// `kafka-transactions.sh abort` sends to end a hanging transaction on one
// partition by hand. v1 flexible; v2 carries the transaction version
// (KIP-890 part 2), not served. Without a transaction coordinator (txn.go:
// the DIS backend) every partition gets INVALID_REQUEST: the API table is
// the same for every backend.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

// WriteTxnMarkers needs CLUSTER_ACTION on the cluster (Kafka: brokers'
// requests; the transactions tool's principal needs it too), else every
// partition gets CLUSTER_AUTHORIZATION_FAILED.
func init() {
	registerAPI(27, 0, 1, (*conn).handleWriteTxnMarkers,
		clusterOp(acl.OpClusterAction, func(r *kmsg.WriteTxnMarkersRequest, code int16) kmsg.Response {
			return answerWriteTxnMarkers(r, func(string, int32, *kmsg.WriteTxnMarkersRequestMarker) int16 { return code })
		}))
}

// answerWriteTxnMarkers answers each marker's partitions with code.
func answerWriteTxnMarkers(r *kmsg.WriteTxnMarkersRequest, code func(topic string, part int32, m *kmsg.WriteTxnMarkersRequestMarker) int16) *kmsg.WriteTxnMarkersResponse {
	resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for i := range r.Markers {
		m := &r.Markers[i]
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, code(t.Topic, p, m)
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}

func (c *conn) handleWriteTxnMarkers(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.WriteTxnMarkersRequest)
	if c.s.txn == nil {
		return ready(req, answerWriteTxnMarkers(r, func(string, int32, *kmsg.WriteTxnMarkersRequestMarker) int16 {
			return kerr.InvalidRequest.Code
		}))
	}
	ctx, cancel := c.requestContext(0)
	defer cancel()
	return ready(req, c.writeTxnMarkers(ctx, r))
}

// writeTxnMarkers writes each marker on its partitions; with several
// nodes a partition this node does not lead gets NOT_LEADER_OR_FOLLOWER.
func (c *conn) writeTxnMarkers(ctx context.Context, r *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersResponse {
	return answerWriteTxnMarkers(r, func(topic string, part int32, m *kmsg.WriteTxnMarkersRequestMarker) int16 {
		if c.s.txn == nil {
			return kerr.InvalidRequest.Code
		}
		if c.s.cluster != nil {
			st := c.s.topicNamed(ctx, topic)
			if st == nil {
				return kerr.UnknownTopicOrPartition.Code
			}
			if !c.s.leads(st.Name, part) {
				return kerr.NotLeaderForPartition.Code
			}
		}
		return c.s.txn.WriteMarker(ctx, topic, part, m.ProducerID, m.ProducerEpoch, m.Committed)
	})
}
