package gateway

// ListPartitionReassignments: v0 (KIP-455), flexible.
//
// One node holds every replica and nothing is ever reassigned, so the
// answer is always no topics, whatever topics are listed (unknown ones
// included), as a one-node Kafka 4.4 answers.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/kafkawire"
)

func init() { registerAPI(46, 0, 0, (*conn).handleListPartitionReassignments) }

func (c *conn) handleListPartitionReassignments(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.ListPartitionReassignmentsRequest)
	return ready(req, r.ResponseKind())
}
