package gateway

// ConsumerGroupDescribe: v0-1 (groupcoord, KIP-848; docs/consumer-protocol.md
// §1.5), served when Config.ConsumerGroupProtocol is set.
//
// Version notes: v1 Member.MemberType. DESCRIBE on each group, else that
// group is answered GROUP_AUTHORIZATION_FAILED; the authorized operations,
// when asked for, are the principal's.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(69, 0, 1, (*conn).handleConsumerGroupDescribe, (*conn).authorizeConsumerGroupDescribe)
}

func (c *conn) authorizeConsumerGroupDescribe(req *kafkawire.Request) (kmsg.Response, postAuth) {
	r := req.Body.(*kmsg.ConsumerGroupDescribeRequest)
	return nil, func(resp kmsg.Response) error {
		dr := resp.(*kmsg.ConsumerGroupDescribeResponse)
		for i := range dr.Groups {
			g := &dr.Groups[i]
			if !c.mayGroup(acl.OpDescribe, g.Group) {
				name := g.Group
				*g = kmsg.NewConsumerGroupDescribeResponseGroup()
				g.Group, g.ErrorCode = name, errGroupAuth
				continue
			}
			if r.IncludeAuthorizedOperations && g.ErrorCode == 0 {
				g.AuthorizedOperations = c.opsOf(acl.ResourceGroup, g.Group, groupAuthorizedOps)
			}
		}
		return nil
	}
}

func (c *conn) handleConsumerGroupDescribe(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.ConsumerGroupDescribeRequest)
	if !c.s.cfg.ConsumerGroupProtocol {
		resp := r.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
		for _, id := range r.Groups {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode = id, kerr.UnsupportedVersion.Code
			resp.Groups = append(resp.Groups, g)
		}
		return ready(req, resp)
	}
	return reply{req: req, finish: func() (kmsg.Response, error) {
		ctx, cancel := c.requestContext(0)
		defer cancel()
		return c.s.groups.ConsumerGroupDescribe(ctx, consumerTopics{c: c}, r), nil
	}}
}
