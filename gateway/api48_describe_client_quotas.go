package gateway

// DescribeClientQuotas: v0-1 (KIP-546; v1 is flexible).
//
// The gateway has no client quotas (Kafka's quota callback with nothing
// configured), so every filter matches no entity: the answer is an empty
// Entries list and no error. kafka-configs --describe --entity-type users
// asks it alongside DescribeUserScramCredentials.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

// DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster, as Kafka's
// ControllerApis checks it.
func init() {
	registerAPI(48, 0, 1, (*conn).handleDescribeClientQuotas, clusterOp(acl.OpDescribeConfigs, refuseDescribeClientQuotas))
}

// refuseDescribeClientQuotas answers the request with code.
func refuseDescribeClientQuotas(r *kmsg.DescribeClientQuotasRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	resp.ErrorCode = code
	return resp
}

func (c *conn) handleDescribeClientQuotas(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.DescribeClientQuotasRequest)
	resp := r.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	return ready(req, resp)
}
