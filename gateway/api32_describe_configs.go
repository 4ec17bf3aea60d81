package gateway

// DescribeConfigs: v0-4 (DIS DescribeStream).
//
// Version notes: v0 IsDefault (Kafka 4 serves v1+; v0 follows Kafka
// 3.x: IsDefault is source DEFAULT_CONFIG); v1 sources and synonyms
// (include_synonyms); v2 ThrottleMillis; v3 config type and documentation
// (include_documentation: Kafka's own strings); v4 flexible.
//
// Both resource types list Apache Kafka 4.4's keys (kafka_configs_table.go,
// captured from Kafka 4.4 by gen_kafka_configs.go), in name order; keys
// Kafka 4.0 removed are not listed (describe_configs.go). TOPIC resources
// give each key as the topic has it (topic_configs.go), at the default
// unless set; BROKER resources (this node's id, or empty; with several
// nodes another node's id gets INVALID_REQUEST as from Kafka) give the
// gateway's values (advertised.listeners, num.partitions, limits) where
// it has them and Kafka's defaults for the rest, every key read-only.
// GROUP resources give the consumer group configs (group_configs.go).
// Other resource types get INVALID_REQUEST, and so does a resource listed
// again (described once: a request cannot repeat one large answer) and
// resources past Limits.MaxTopics (limits.go).

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() { registerAPI(32, 0, 4, (*conn).handleDescribeConfigs, (*conn).authorizeDescribeConfigs) }

// authorizeDescribeConfigs: DESCRIBE_CONFIGS on each resource, checked on
// the topic, the group or (brokers, broker loggers) the cluster
// (configAuth); a refused resource is answered with the refusal and no
// configs.
func (c *conn) authorizeDescribeConfigs(*kafkawire.Request) (kmsg.Response, postAuth) {
	return nil, func(resp kmsg.Response) error {
		dr := resp.(*kmsg.DescribeConfigsResponse)
		for i := range dr.Resources {
			res := &dr.Resources[i]
			if code := c.configAuth(acl.OpDescribeConfigs, res.ResourceType, res.ResourceName); code != 0 {
				res.ErrorCode, res.Configs = code, nil
				msg := "not authorized to describe the configs of " + res.ResourceName
				res.ErrorMessage = &msg
			}
		}
		return nil
	}
}

func (c *conn) handleDescribeConfigs(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.DescribeConfigsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
	s := c.s
	q := newQuota(s.cfg.Limits.MaxTopics)
	defer q.report(c, limitTopics, "DescribeConfigs")
	type resource struct {
		t    kmsg.ConfigResourceType
		name string
	}
	seen := make(map[resource]bool)
	resp.Resources = make([]kmsg.DescribeConfigsResponseResource, 0, len(r.Resources))
	for _, rr := range r.Resources {
		res := kmsg.NewDescribeConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		key := resource{rr.ResourceType, rr.ResourceName}
		switch {
		case seen[key]:
			res.ErrorCode = kerr.InvalidRequest.Code
		case !q.take():
			res.ErrorCode = errCodeOverCap
		}
		if res.ErrorCode != 0 {
			resp.Resources = append(resp.Resources, res)
			continue
		}
		seen[key] = true
		var entries []configEntry
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			st := s.topics.get(rr.ResourceName)
			if rr.ResourceName == offsetsTopic {
				st = s.offsetsTopicStream()
			}
			if st == nil {
				// As Kafka 4.4: the code, and an empty message.
				res.ErrorCode = kerr.UnknownTopicOrPartition.Code
				res.ErrorMessage = kmsg.StringPtr("")
				resp.Resources = append(resp.Resources, res)
				continue
			}
			if s.disAuth != nil && c.disCreds.Load() != nil && rr.ResourceName != offsetsTopic {
				// The dis authentication mode: the configs come from the
				// gateway's view; the principal's key must be let
				// describe the stream (DescribeStream signed with it,
				// remembered dis_principal_ttl).
				ctx, cancel := c.requestContext(0)
				err := s.disAuth.AuthorizeStream(ctx, st.Name, disbackend.AccessDescribe)
				cancel()
				if err != nil {
					res.ErrorCode = kafkaError(s.log, err)
					resp.Resources = append(resp.Resources, res)
					continue
				}
			}
			entries = s.describeTopicConfig(st)
		case kmsg.ConfigResourceTypeBroker:
			if msg, ok := s.otherBroker(rr.ResourceName); ok {
				res.ErrorCode = kerr.InvalidRequest.Code
				res.ErrorMessage = &msg
				resp.Resources = append(resp.Resources, res)
				continue
			}
			entries = s.describeBrokerConfig()
		case kmsg.ConfigResourceTypeGroupConfig:
			ctx, cancel := c.requestContext(0)
			var err error
			entries, err = s.describeGroupConfig(ctx, rr.ResourceName)
			cancel()
			if err != nil {
				res.ErrorCode, res.ErrorMessage = kafkaError(s.log, err), errMessage(err)
				resp.Resources = append(resp.Resources, res)
				continue
			}
		default:
			res.ErrorCode = kerr.InvalidRequest.Code
			msg := "unsupported resource type " + rr.ResourceType.String()
			res.ErrorMessage = &msg
			resp.Resources = append(resp.Resources, res)
			continue
		}
		// The wanted names, as a map of the entries (a few hundred), not
		// of the names asked (a request may list many).
		want := make(map[string]bool, len(entries))
		for _, e := range entries {
			want[e.def.name] = false
		}
		for _, n := range rr.ConfigNames {
			if _, ok := want[n]; ok {
				want[n] = true
			}
		}
		for _, e := range entries {
			if rr.ConfigNames != nil && !want[e.def.name] {
				continue
			}
			res.Configs = append(res.Configs, describeConfigEntry(r, e))
		}
		resp.Resources = append(resp.Resources, res)
	}
	return ready(req, resp)
}

// describeConfigEntry is e as DescribeConfigs gives it at r's version:
// IsDefault (v0, DEFAULT_CONFIG as Kafka 3.x sets it), synonyms (v1+,
// when asked), documentation (v3+, when asked).
func describeConfigEntry(r *kmsg.DescribeConfigsRequest, e configEntry) kmsg.DescribeConfigsResponseResourceConfig {
	cfg := kmsg.NewDescribeConfigsResponseResourceConfig()
	cfg.Name = e.def.name
	cfg.Value = e.value
	cfg.Source = e.source
	cfg.IsDefault = e.source == kmsg.ConfigSourceDefaultConfig
	cfg.ReadOnly = e.readOnly
	cfg.IsSensitive = e.def.sensitive
	cfg.ConfigType = e.def.typ
	if r.IncludeSynonyms {
		cfg.ConfigSynonyms = make([]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym, 0, len(e.synonyms))
		for _, sy := range e.synonyms {
			cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			cs.Name, cs.Value, cs.Source = sy.name, sy.value, sy.source
			cfg.ConfigSynonyms = append(cfg.ConfigSynonyms, cs)
		}
	}
	if r.IncludeDocumentation && e.def.doc != "" {
		doc := e.def.doc
		cfg.Documentation = &doc
	}
	return cfg
}

// otherBroker returns the refusal of a BROKER resource that is not this
// node (name neither empty nor this node's id), and whether it is one. On
// one node: "unknown broker" and the name. With several nodes, Kafka's
// ConfigHelper's words: clients send a broker's resource to that broker,
// and a broker answers another's with INVALID_REQUEST.
func (s *Server) otherBroker(name string) (string, bool) {
	if name == "" {
		return "", false
	}
	if s.cluster == nil {
		if name == strconv.Itoa(int(s.cfg.NodeID)) {
			return "", false
		}
		return "unknown broker " + strconv.Quote(name), true
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return "Broker id must be an integer, but it is: " + name, true
	}
	self := s.nodeID()
	if int32(id) == self {
		return "", false
	}
	return fmt.Sprintf("Unexpected broker id, expected %d or empty string, but received %s", self, name), true
}
