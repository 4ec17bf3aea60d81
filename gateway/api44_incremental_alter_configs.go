package gateway

// IncrementalAlterConfigs: v0-1 (DIS UpdateStream and stream tags, through
// Backend.UpdateStreamConfig). AlterConfigs (v0-2) is in
// api33_alter_configs.go and shares alterTopicConfig.
//
// Version notes: v1 flexible.
//
// TOPIC resources: SET applies a topic config as CreateTopics does
// (applyTopicConfig: INVALID_CONFIG for unknown keys and unsupported
// values); DELETE puts the key back to its default (a key disgw does not
// know is accepted and changes nothing, as in Kafka 4.4); APPEND and SUBTRACT
// get INVALID_CONFIG (no topic config here is a list). A key listed twice
// in one resource gets INVALID_REQUEST, as in Kafka. On DIS, retention.ms
// is data_duration (24-168 hours; others INVALID_CONFIG). BROKER
// resources get INVALID_REQUEST: broker settings come from disgw's
// configuration file. GROUP resources set the consumer group configs
// (group_configs.go; AlterConfigs, API 33, replaces them all, as Kafka's
// does). Other resource types get INVALID_REQUEST, and so do
// resources past Limits.MaxTopics (limits.go).

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(44, 0, 1, (*conn).handleIncrementalAlterConfigs, denyEach(
		func(r *kmsg.IncrementalAlterConfigsRequest) *[]kmsg.IncrementalAlterConfigsRequestResource {
			return &r.Resources
		},
		func(c *conn, res kmsg.IncrementalAlterConfigsRequestResource) int16 {
			return c.configAuth(acl.OpAlterConfigs, res.ResourceType, res.ResourceName)
		},
		func(res kmsg.IncrementalAlterConfigsRequestResource, code int16) kmsg.IncrementalAlterConfigsResponseResource {
			d := kmsg.NewIncrementalAlterConfigsResponseResource()
			d.ResourceType, d.ResourceName, d.ErrorCode = res.ResourceType, res.ResourceName, code
			return d
		},
		func(r *kmsg.IncrementalAlterConfigsResponse) *[]kmsg.IncrementalAlterConfigsResponseResource {
			return &r.Resources
		}))
	controllerOnly(44, func(r *kmsg.IncrementalAlterConfigsRequest, code int16) kmsg.Response {
		resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for _, rr := range r.Resources {
			d := kmsg.NewIncrementalAlterConfigsResponseResource()
			d.ResourceType, d.ResourceName, d.ErrorCode, d.ErrorMessage = rr.ResourceType, rr.ResourceName, code, codeMessage(code)
			resp.Resources = append(resp.Resources, d)
		}
		return resp
	}, topicsChanged(func(r *kmsg.IncrementalAlterConfigsResponse, add func(string, int16)) {
		for _, res := range r.Resources {
			if res.ResourceType == kmsg.ConfigResourceTypeTopic {
				add(res.ResourceName, res.ErrorCode)
			}
		}
	}))
}

func (c *conn) handleIncrementalAlterConfigs(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.IncrementalAlterConfigsRequest)
	resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	ctx, cancel := c.requestContext(30_000)
	defer cancel()
	q := newQuota(c.s.cfg.Limits.MaxTopics)
	defer q.report(c, limitTopics, "IncrementalAlterConfigs")
	resp.Resources = make([]kmsg.IncrementalAlterConfigsResponseResource, 0, len(r.Resources))
	for _, rr := range r.Resources {
		res := kmsg.NewIncrementalAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		if !q.take() {
			res.ErrorCode = errCodeOverCap
			resp.Resources = append(resp.Resources, res)
			continue
		}
		err := c.s.alterConfigs(ctx, rr.ResourceType, rr.ResourceName, false, r.ValidateOnly, len(rr.Configs),
			func(i int) (string, kmsg.IncrementalAlterConfigOp, *string) {
				return rr.Configs[i].Name, rr.Configs[i].Op, rr.Configs[i].Value
			})
		if err != nil {
			res.ErrorCode = kafkaError(c.log, err)
			res.ErrorMessage = errMessage(err)
		}
		resp.Resources = append(resp.Resources, res)
	}
	return ready(req, resp)
}

// alterConfigs changes one resource's configs: n of them, given by op (the
// request's entries). With replace (AlterConfigs) the topic's configs
// start from the defaults, else (IncrementalAlterConfigs) from what the
// topic has. Errors are Kafka errors (kerrWrap) or the backend's.
func (s *Server) alterConfigs(ctx context.Context, typ kmsg.ConfigResourceType, name string, replace, validateOnly bool,
	n int, op func(int) (string, kmsg.IncrementalAlterConfigOp, *string)) error {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
	case kmsg.ConfigResourceTypeGroupConfig:
		return s.alterGroupConfig(ctx, name, replace, validateOnly, n, op)
	case kmsg.ConfigResourceTypeBroker:
		return kerrWrap(kerr.InvalidRequest, "broker configs cannot be changed at run time: they come from disgw's configuration file")
	default:
		return kerrWrap(kerr.InvalidRequest, "unsupported resource type "+typ.String())
	}
	seen := make(map[string]bool, n)
	for i := range n {
		key, _, _ := op(i)
		if seen[key] {
			return kerrWrap(kerr.InvalidRequest, "Error due to duplicate config keys: "+strconv.Quote(key))
		}
		seen[key] = true
	}

	s.topics.adminMu.Lock()
	defer s.topics.adminMu.Unlock()
	st := s.topics.get(name)
	if st == nil {
		return fmt.Errorf("%w: topic %q", errUnknownTopic, name)
	}
	def := s.defaultStreamConfig()
	cfg := st.Config
	explicit := s.explicitTopicKeys(&cfg, &def)
	if replace {
		cfg = def
		explicit = make(map[string]bool, n)
	}
	for i := range n {
		key, o, value := op(i)
		var err error
		switch o {
		case kmsg.IncrementalAlterConfigOp(0): // SET
			if value == nil {
				err = fmt.Errorf("%w: %s: a null value cannot be set", disbackend.ErrInvalidConfig, key)
			} else {
				err = applyTopicConfig(&cfg, key, value)
			}
		case kmsg.IncrementalAlterConfigOp(1): // DELETE
			err = s.resetTopicConfig(&cfg, def, key)
		case kmsg.IncrementalAlterConfigOp(2), kmsg.IncrementalAlterConfigOp(3): // APPEND, SUBTRACT
			err = s.appendTopicConfig(&cfg, key, o == 2, value)
		default:
			err = kerrWrap(kerr.InvalidRequest, fmt.Sprintf("unknown config operation %d for %s", o, key))
		}
		if err != nil {
			return err
		}
		explicit[key] = o != kmsg.IncrementalAlterConfigOp(1) // a DELETE unsets
	}
	s.keepExplicitTopicKeys(&cfg, &def, explicit)
	if cfg == st.Config {
		return nil
	}
	if validateOnly {
		return s.validateStreamConfig(cfg)
	}
	if err := s.backend.UpdateStreamConfig(ctx, st.Name, cfg); err != nil {
		return err
	}
	updated, err := s.backend.DescribeStream(ctx, st.Name)
	if err != nil {
		return err
	}
	s.topics.put(&updated)
	s.log.Info("topic configs altered", zapTopic(name))
	return nil
}

// appendTopicConfig applies IncrementalAlterConfigs APPEND (add) or
// SUBTRACT to a list config, as Kafka does: cleanup.policy gains or loses
// the comma-separated items of value; the ignored list configs (the
// replication throttles) accept it; any other key is INVALID_CONFIG, as
// Kafka refuses it for a key that is not a list.
func (s *Server) appendTopicConfig(cfg *disbackend.StreamConfig, key string, add bool, value *string) error {
	opName := map[bool]string{true: "append", false: "subtract"}[add]
	if key != cfgCleanupPolicy {
		if _, ok := ignoredTopicConfigs[key]; ok && kafkaTopicConfigType(key) == kmsg.ConfigTypeList {
			return nil
		}
		return fmt.Errorf("%w: Config value %s is not allowed for config key %s", disbackend.ErrInvalidConfig, opName, key)
	}
	if value == nil {
		return fmt.Errorf("%w: %s: a null value cannot be %sed", disbackend.ErrInvalidConfig, key, opName)
	}
	tc := findTopicConfig(key)
	items := strings.Split(tc.show(s, cfg), ",")
	for _, v := range strings.Split(*value, ",") {
		v = strings.TrimSpace(v)
		i := slices.Index(items, v)
		switch {
		case add && i < 0:
			items = append(items, v)
		case !add && i >= 0:
			items = slices.Delete(items, i, i+1)
		}
	}
	joined := strings.Join(items, ",")
	return applyTopicConfig(cfg, key, &joined)
}

// kafkaTopicConfigType is topic key's Kafka config type, 0 when Kafka has
// no such key.
func kafkaTopicConfigType(key string) kmsg.ConfigType {
	for i := range kafkaTopicConfigs {
		if kafkaTopicConfigs[i].name == key {
			return kafkaTopicConfigs[i].typ
		}
	}
	return 0
}
