package gateway

// AlterConfigs: v0-2 (the legacy whole-resource form; see
// api44_incremental_alter_configs.go for what applies).
//
// Version notes: v1 no change; v2 flexible.
//
// A TOPIC resource's configs are replaced: keys not listed go back to
// their defaults, as in Kafka. Resources past Limits.MaxTopics get
// INVALID_REQUEST (limits.go).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(33, 0, 2, (*conn).handleAlterConfigs, denyEach(
		func(r *kmsg.AlterConfigsRequest) *[]kmsg.AlterConfigsRequestResource { return &r.Resources },
		func(c *conn, res kmsg.AlterConfigsRequestResource) int16 {
			return c.configAuth(acl.OpAlterConfigs, res.ResourceType, res.ResourceName)
		},
		func(res kmsg.AlterConfigsRequestResource, code int16) kmsg.AlterConfigsResponseResource {
			d := kmsg.NewAlterConfigsResponseResource()
			d.ResourceType, d.ResourceName, d.ErrorCode = res.ResourceType, res.ResourceName, code
			return d
		},
		func(r *kmsg.AlterConfigsResponse) *[]kmsg.AlterConfigsResponseResource { return &r.Resources }))
	controllerOnly(33, func(r *kmsg.AlterConfigsRequest, code int16) kmsg.Response {
		resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
		for _, rr := range r.Resources {
			d := kmsg.NewAlterConfigsResponseResource()
			d.ResourceType, d.ResourceName, d.ErrorCode, d.ErrorMessage = rr.ResourceType, rr.ResourceName, code, codeMessage(code)
			resp.Resources = append(resp.Resources, d)
		}
		return resp
	}, topicsChanged(func(r *kmsg.AlterConfigsResponse, add func(string, int16)) {
		for _, res := range r.Resources {
			if res.ResourceType == kmsg.ConfigResourceTypeTopic {
				add(res.ResourceName, res.ErrorCode)
			}
		}
	}))
}

func (c *conn) handleAlterConfigs(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.AlterConfigsRequest)
	resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
	ctx, cancel := c.requestContext(30_000)
	defer cancel()
	q := newQuota(c.s.cfg.Limits.MaxTopics)
	defer q.report(c, limitTopics, "AlterConfigs")
	resp.Resources = make([]kmsg.AlterConfigsResponseResource, 0, len(r.Resources))
	for _, rr := range r.Resources {
		res := kmsg.NewAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		if !q.take() {
			res.ErrorCode = errCodeOverCap
			resp.Resources = append(resp.Resources, res)
			continue
		}
		err := c.s.alterConfigs(ctx, rr.ResourceType, rr.ResourceName, true, r.ValidateOnly, len(rr.Configs),
			func(i int) (string, kmsg.IncrementalAlterConfigOp, *string) {
				return rr.Configs[i].Name, 0, rr.Configs[i].Value // SET
			})
		if err != nil {
			res.ErrorCode = kafkaError(c.log, err)
			res.ErrorMessage = errMessage(err)
		}
		resp.Resources = append(resp.Resources, res)
	}
	return ready(req, resp)
}
