package gateway

// ListConfigResources: v0-1, flexible. v0 is KIP-1000's
// ListClientMetricsResources (Kafka 3.7); KIP-1142 renamed it and added v1
// (Kafka 4.1). kafka-configs and the admin client's listConfigResources
// use it to find which resources have configs to describe.
//
// Version notes: v0 lists the client metrics resources only; v1 adds
// resource_types (the types to list; empty: every type v1 knows) and each
// resource's type.
//
// As Kafka 4.4's KafkaApis.handleListConfigResources answers:
//   - the types a version knows: v0 CLIENT_METRICS; v1 TOPIC, BROKER,
//     BROKER_LOGGER, CLIENT_METRICS and GROUP (kmsg's GROUP_CONFIG). A
//     type asked for that the version does not know makes the answer
//     UNSUPPORTED_VERSION with no resources; a type asked twice is listed
//     once;
//   - in Kafka's order: the groups that have configs (sorted by name;
//     group_configs.go), the client metrics
//     resources, every broker as a broker logger, every broker as a broker
//     (named by node id: this node's Config.NodeID, or with several nodes
//     the view's nodes Metadata lists, cluster.go), then every topic,
//     sorted by name,
//     __consumer_offsets included as Metadata lists it;
//   - disgw has no client metrics resources (KIP-714 is not served): that
//     type is always empty, as from a Kafka where none were set. So v0
//     always answers no resources.
//
// In the dis authentication mode (SASLConfig.PlainDIS), the topics DIS
// does not let the principal describe are left out, as Metadata leaves
// them out of a listing of every topic (disAuthorizeTopics).

import (
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

// ListConfigResources needs DESCRIBE_CONFIGS on the cluster, as Kafka's;
// the topics it lists are not checked one by one.
func init() {
	registerAPI(74, 0, 1, (*conn).handleListConfigResources,
		clusterOp(acl.OpDescribeConfigs, refuseListConfigResources))
}

// refuseListConfigResources answers the request with code and no
// resources.
func refuseListConfigResources(r *kmsg.ListConfigResourcesRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	resp.ErrorCode = code
	return resp
}

// configResourceTypes are the resource types each version of
// ListConfigResources lists (Kafka's ListConfigResourcesRequest
// .supportedResourceTypes).
func configResourceTypes(version int16) []kmsg.ConfigResourceType {
	if version == 0 {
		return []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeClientMetrics}
	}
	return []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker,
		kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics, kmsg.ConfigResourceTypeGroupConfig}
}

func (c *conn) handleListConfigResources(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.ListConfigResourcesRequest)
	resp := r.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	supported := configResourceTypes(r.Version)
	for _, t := range r.ResourceTypes {
		if !slices.Contains(supported, kmsg.ConfigResourceType(t)) {
			resp.ErrorCode = kerr.UnsupportedVersion.Code
			return ready(req, resp)
		}
	}
	// Each type is listed once, however often it is asked for.
	asked := func(rt kmsg.ConfigResourceType) bool {
		return len(r.ResourceTypes) == 0 && slices.Contains(supported, rt) || slices.Contains(r.ResourceTypes, int8(rt))
	}
	add := func(rt kmsg.ConfigResourceType, name string) {
		cr := kmsg.NewListConfigResourcesResponseConfigResource()
		cr.Name, cr.Type = name, int8(rt)
		resp.ConfigResources = append(resp.ConfigResources, cr)
	}
	// GROUP and CLIENT_METRICS come first in Kafka's answer; disgw has
	// no client metrics resources.
	if asked(kmsg.ConfigResourceTypeGroupConfig) {
		ctx, cancel := c.requestContext(0)
		groups, err := c.s.configuredGroups(ctx)
		cancel()
		if err != nil {
			resp.ErrorCode = kafkaError(c.log, err)
			return ready(req, resp)
		}
		for _, g := range groups {
			add(kmsg.ConfigResourceTypeGroupConfig, g)
		}
	}
	nodes := []string{strconv.Itoa(int(c.s.cfg.NodeID))}
	if kv := c.kafkaView(); kv != nil {
		nodes = nodes[:0]
		for _, b := range kv.brokers {
			nodes = append(nodes, strconv.Itoa(int(b.id)))
		}
	}
	if asked(kmsg.ConfigResourceTypeBrokerLogger) {
		for _, node := range nodes {
			add(kmsg.ConfigResourceTypeBrokerLogger, node)
		}
	}
	if asked(kmsg.ConfigResourceTypeBroker) {
		for _, node := range nodes {
			add(kmsg.ConfigResourceTypeBroker, node)
		}
	}
	if asked(kmsg.ConfigResourceTypeTopic) {
		for _, name := range c.describableTopicNames() {
			add(kmsg.ConfigResourceTypeTopic, name)
		}
	}
	return ready(req, resp)
}

// describableTopicNames is the name of every topic Metadata lists when
// asked for all (__consumer_offsets included), sorted; in the dis
// authentication mode without those DIS does not let the principal
// describe.
func (c *conn) describableTopicNames() []string {
	s := c.s
	all := s.topics.all()
	names := make([]string, 0, len(all)+1)
	for _, st := range all {
		names = append(names, st.TopicName)
	}
	names = append(names, offsetsTopic)
	if c.disCreds.Load() != nil {
		// The check Metadata makes of a listing of every topic.
		mr := kmsg.NewPtrMetadataResponse()
		for i := range names {
			t := kmsg.NewMetadataResponseTopic()
			t.Topic = &names[i]
			mr.Topics = append(mr.Topics, t)
		}
		ctx, cancel := c.requestContext(0)
		defer cancel()
		c.disAuthorizeTopics(ctx, mr, true)
		names = names[:0:0]
		for _, t := range mr.Topics {
			names = append(names, *t.Topic)
		}
	}
	slices.Sort(names)
	return names
}
