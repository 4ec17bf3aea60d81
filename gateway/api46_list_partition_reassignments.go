package gateway

// ListPartitionReassignments: v0 (KIP-455), flexible.
//
// One node holds every replica and nothing is ever reassigned, so the
// answer is always no topics, whatever topics are listed (unknown ones
// included), as a one-node Kafka 4.4 answers.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(46, 0, 0, (*conn).handleListPartitionReassignments, clusterOp(acl.OpDescribe, refuseListPartitionReassignments))
}

// refuseListPartitionReassignments answers the request with code.
func refuseListPartitionReassignments(r *kmsg.ListPartitionReassignmentsRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	resp.ErrorCode = code
	return resp
}

func (c *conn) handleListPartitionReassignments(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.ListPartitionReassignmentsRequest)
	return ready(req, r.ResponseKind())
}
