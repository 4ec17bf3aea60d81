package gateway

// DescribeConfigs: v0-4 (DIS DescribeStream).
//
// Version notes: v1 sources and synonyms (no synonyms here); v2
// ThrottleMillis; v3 config type and documentation (documentation null);
// v4 flexible.
//
// TOPIC resources list every config of topic_configs.go as the topic has
// it (at Kafka's default unless set), and the storage-tuning keys Kafka
// has and disgw ignores at their Kafka defaults. BROKER resources (this
// node's id, or empty) list the broker defaults that clients read.
// Other resource types get INVALID_REQUEST, and so does a resource listed
// again (described once: a request cannot repeat one large answer) and
// resources past Limits.MaxTopics (limits.go).

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/kafkawire"
)

func init() { registerAPI(32, 0, 4, (*conn).handleDescribeConfigs) }

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
		var entries []topicConfigEntry
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			st := s.topics.get(rr.ResourceName)
			if st == nil {
				res.ErrorCode = kerr.UnknownTopicOrPartition.Code
				msg := "unknown topic " + strconv.Quote(rr.ResourceName)
				res.ErrorMessage = &msg
				resp.Resources = append(resp.Resources, res)
				continue
			}
			entries = s.describeTopicConfig(st)
		case kmsg.ConfigResourceTypeBroker:
			if rr.ResourceName != "" && rr.ResourceName != strconv.Itoa(int(s.cfg.NodeID)) {
				res.ErrorCode = kerr.InvalidRequest.Code
				msg := "unknown broker " + strconv.Quote(rr.ResourceName)
				res.ErrorMessage = &msg
				resp.Resources = append(resp.Resources, res)
				continue
			}
			entries = s.describeBrokerConfig()
		default:
			res.ErrorCode = kerr.InvalidRequest.Code
			msg := "unsupported resource type " + rr.ResourceType.String()
			res.ErrorMessage = &msg
			resp.Resources = append(resp.Resources, res)
			continue
		}
		// The wanted names, as a map of the entries (a few dozen), not of
		// the names asked (a request may list many).
		want := make(map[string]bool, len(entries))
		for _, e := range entries {
			want[e.name] = false
		}
		for _, n := range rr.ConfigNames {
			if _, ok := want[n]; ok {
				want[n] = true
			}
		}
		for _, e := range entries {
			if rr.ConfigNames != nil && !want[e.name] {
				continue
			}
			cfg := kmsg.NewDescribeConfigsResponseResourceConfig()
			cfg.Name = e.name
			v := e.value
			cfg.Value = &v
			cfg.IsDefault = e.isDefault
			cfg.ReadOnly = rr.ResourceType == kmsg.ConfigResourceTypeBroker
			switch {
			case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
				cfg.Source = kmsg.ConfigSourceStaticBrokerConfig
			case e.isDefault:
				cfg.Source = kmsg.ConfigSourceDefaultConfig
			default:
				cfg.Source = kmsg.ConfigSourceDynamicTopicConfig
			}
			cfg.ConfigType = configType(e.value)
			res.Configs = append(res.Configs, cfg)
		}
		resp.Resources = append(resp.Resources, res)
	}
	return ready(req, resp)
}

func configType(v string) kmsg.ConfigType {
	if v == "true" || v == "false" {
		return kmsg.ConfigTypeBoolean
	}
	if _, err := strconv.ParseInt(v, 10, 64); err == nil {
		return kmsg.ConfigTypeLong
	}
	return kmsg.ConfigTypeString
}

// describeBrokerConfig lists the broker settings clients commonly read.
func (s *Server) describeBrokerConfig() []topicConfigEntry {
	ret := "-1"
	if s.cfg.DefaultRetention > 0 {
		ret = strconv.FormatInt(s.cfg.DefaultRetention.Milliseconds(), 10)
	}
	return []topicConfigEntry{
		{"auto.create.topics.enable", strconv.FormatBool(s.cfg.AutoCreateTopics), false},
		{"broker.id", strconv.Itoa(int(s.cfg.NodeID)), false},
		{"default.replication.factor", "1", false},
		{"log.retention.ms", ret, false},
		{"message.max.bytes", strconv.Itoa(int(s.cfg.MaxMessageBytes)), false},
		{"min.insync.replicas", "1", false},
		{"num.partitions", strconv.Itoa(int(s.cfg.DefaultPartitions)), false},
		{"offsets.topic.replication.factor", "1", false},
		{"socket.request.max.bytes", strconv.Itoa(int(s.cfg.MaxFrameBytes)), false},
	}
}
