package gateway

// DescribeClientQuotas: v0-1 (KIP-546; v1 is flexible).
//
// The gateway has no client quotas (Kafka's quota callback with nothing
// configured), so every filter matches no entity: the answer is an empty
// Entries list and no error. kafka-configs --describe --entity-type users
// asks it alongside DescribeUserScramCredentials.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/kafkawire"
)

func init() { registerAPI(48, 0, 1, (*conn).handleDescribeClientQuotas) }

func (c *conn) handleDescribeClientQuotas(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.DescribeClientQuotasRequest)
	resp := r.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	return ready(req, resp)
}
