package gateway

// CreateTopics: v0-7 (DIS CreateStream).
//
// Version notes:
//   - v1: validate_only, ErrorMessage. v2: ThrottleMillis. v4: -1 for
//     partitions or replication factor means the broker default (KIP-464).
//   - v5: flexible; NumPartitions, ReplicationFactor and Configs in the
//     response (KIP-525). v7: topic id in the response.
//
// Replication factor is accepted and ignored (the store replicates; we
// report 1). A manual replica assignment is checked as Kafka's controller
// checks it (checkTopicAssignment: this node is the only broker, so each
// partition's replicas must be [Config.NodeID]) and sets the partition
// count. An existing topic is TOPIC_ALREADY_EXISTS before anything else
// is checked. A topic answered with an error has, v5+, partitions and replication
// factor -1 and configs [] (v7: topic id zero); validate_only answers,
// v7, a random topic id, as Kafka.
// Topics past Limits.MaxTopics get POLICY_VIOLATION (limits.go).
// Configs: see topic_configs.go (what the backend refuses, such as
// compaction on DIS, is INVALID_CONFIG).

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(19, 0, 7, (*conn).handleCreateTopics, (*conn).authorizeCreateTopics)
	controllerOnly(19, refuseCreateTopics, topicsChanged(func(r *kmsg.CreateTopicsResponse, add func(string, int16)) {
		for _, t := range r.Topics {
			add(t.Topic, t.ErrorCode)
		}
	}))
}

// refuseCreateTopics answers every topic of r with code (and, v1+, its
// message), as Kafka's CreateTopicsRequest.getErrorResponse.
func refuseCreateTopics(r *kmsg.CreateTopicsRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, rt := range r.Topics {
		t := kmsg.NewCreateTopicsResponseTopic()
		t.Topic, t.ErrorCode = rt.Topic, code
		t.Configs = []kmsg.CreateTopicsResponseTopicConfig{} // as the handler answers a refused topic
		if r.Version >= 1 {
			t.ErrorMessage = codeMessage(code)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// authorizeCreateTopics: CREATE on the cluster, or else on each topic (a
// refused topic is taken out and answered TOPIC_AUTHORIZATION_FAILED); the
// configs of a created topic (v5+) are answered only with DESCRIBE_CONFIGS
// on it (else TOPIC_AUTHORIZATION_FAILED as its config error).
func (c *conn) authorizeCreateTopics(req *kafkawire.Request) (kmsg.Response, postAuth) {
	r := req.Body.(*kmsg.CreateTopicsRequest)
	configs := c.createdTopicConfigs
	if c.mayCluster(acl.OpCreate) {
		return nil, configs
	}
	var denied []kmsg.CreateTopicsResponseTopic
	kept := r.Topics[:0]
	for _, t := range r.Topics {
		if c.mayTopic(acl.OpCreate, t.Topic) {
			kept = append(kept, t)
			continue
		}
		d := kmsg.NewCreateTopicsResponseTopic()
		d.Topic, d.ErrorCode, d.ConfigErrorCode, d.NumPartitions, d.ReplicationFactor = t.Topic, errTopicAuth, errTopicAuth, -1, -1
		denied = append(denied, d)
	}
	r.Topics = kept
	return nil, chainPost(configs, appendDenied(denied, func(r *kmsg.CreateTopicsResponse) *[]kmsg.CreateTopicsResponseTopic { return &r.Topics }))
}

// createdTopicConfigs drops the configs of each created topic the principal
// may not DESCRIBE_CONFIGS.
func (c *conn) createdTopicConfigs(resp kmsg.Response) error {
	for i := range resp.(*kmsg.CreateTopicsResponse).Topics {
		t := &resp.(*kmsg.CreateTopicsResponse).Topics[i]
		if t.ErrorCode == 0 && !c.mayTopic(acl.OpDescribeConfigs, t.Topic) {
			t.Configs, t.ConfigErrorCode = nil, errTopicAuth
		}
	}
	return nil
}

func (c *conn) handleCreateTopics(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.CreateTopicsRequest)
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	s := c.s
	ctx, cancel := c.requestContext(r.TimeoutMillis)
	defer cancel()
	count := countNames(r.Topics, func(t kmsg.CreateTopicsRequestTopic) string { return t.Topic })
	q := newQuota(s.cfg.Limits.MaxTopics)
	defer q.report(c, limitTopics, "CreateTopics")
	for _, rt := range r.Topics {
		t := kmsg.NewCreateTopicsResponseTopic()
		t.Topic = rt.Topic
		t.Configs = []kmsg.CreateTopicsResponseTopicConfig{} // as Kafka: empty, not null, for a topic refused
		if !q.take() {
			// As a create policy refusing it (Kafka's answer for a topic
			// the broker's rules do not allow).
			t.ErrorCode = errCodeCreateOverCap
			resp.Topics = append(resp.Topics, t)
			continue
		}
		fail := func(code int16, err error) {
			t.ErrorCode = code
			if r.Version >= 1 {
				t.ErrorMessage = errMessage(err)
			}
		}
		if !r.ValidateOnly && s.topics.get(rt.Topic) == nil {
			if ok, wait := s.limits.admitMutations(); !ok {
				fail(kerr.ThrottlingQuotaExceeded.Code, errors.New("partition mutation rate exceeded (partition_mutations_per_second)"))
				resp.ThrottleMillis = max(resp.ThrottleMillis, throttleMillis(wait))
				s.limits.hit(limitPartitionMutations, "CreateTopics", 1, c)
				resp.Topics = append(resp.Topics, t)
				continue
			}
		}
		st, err := s.createTopicFromRequest(ctx, r, &rt, count[rt.Topic] > 1)
		if err != nil {
			fail(kafkaError(c.log, err), err)
			resp.Topics = append(resp.Topics, t)
			continue
		}
		if !r.ValidateOnly {
			s.limits.spendMutations(int(st.PartitionCount))
		}
		if r.Version >= 7 {
			t.TopicID = st.TopicID
			if r.ValidateOnly && t.TopicID == ([16]byte{}) {
				// As Kafka's controller: the id it would have given,
				// random, though the topic is not created.
				t.TopicID = randomTopicID()
			}
		}
		t.NumPartitions = st.PartitionCount
		t.ReplicationFactor = 1
		for _, e := range s.describeTopicConfig(st) {
			cfg := kmsg.NewCreateTopicsResponseTopicConfig()
			cfg.Name, cfg.Value = e.def.name, e.value
			cfg.Source = int8(e.source)
			cfg.ReadOnly, cfg.IsSensitive = e.readOnly, e.def.sensitive
			t.Configs = append(t.Configs, cfg)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return ready(req, resp)
}

// randomTopicID returns 16 random bytes, never all zero (Kafka's null
// topic id).
func randomTopicID() [16]byte {
	var id [16]byte
	for id == ([16]byte{}) {
		_, _ = rand.Read(id[:]) // crypto/rand.Read never fails (Go 1.24+)
	}
	return id
}

func (s *Server) createTopicFromRequest(ctx context.Context, r *kmsg.CreateTopicsRequest, rt *kmsg.CreateTopicsRequestTopic, duplicate bool) (*disbackend.Stream, error) {
	if duplicate {
		return nil, errListedTwice(rt.Topic)
	}
	// As Kafka: an existing topic is TOPIC_ALREADY_EXISTS whatever the
	// request's partitions and configs (Kafka Connect pre-checks its
	// internal topics this way).
	if rt.Topic == offsetsTopic || s.topics.get(rt.Topic) != nil || s.lookupTopic(ctx, rt.Topic) != nil {
		return nil, kerrWrap(kerr.TopicAlreadyExists, fmt.Sprintf("topic %q already exists", rt.Topic))
	}
	partitions := rt.NumPartitions
	switch {
	case len(rt.ReplicaAssignment) > 0:
		if err := s.checkTopicAssignment(rt); err != nil {
			return nil, err
		}
		partitions = int32(len(rt.ReplicaAssignment))
	case partitions == -1:
		partitions = s.cfg.DefaultPartitions
	case partitions <= 0:
		return nil, kerrWrap(kerr.InvalidPartitions, fmt.Sprintf("number of partitions must be larger than 0, or -1 for the default; got %d", partitions))
	}
	if partitions > s.cfg.MaxPartitions {
		return nil, kerrWrap(kerr.InvalidPartitions, fmt.Sprintf("%d partitions requested; a topic may have at most %d", partitions, s.cfg.MaxPartitions))
	}
	if rt.ReplicationFactor == 0 || rt.ReplicationFactor < -1 {
		return nil, kerrWrap(kerr.InvalidReplicationFactor, fmt.Sprintf("replication factor must be larger than 0, or -1 for the default; got %d", rt.ReplicationFactor))
	}
	def := s.defaultStreamConfig()
	cfg := def
	explicit := make(map[string]bool, len(rt.Configs))
	for _, kv := range rt.Configs {
		if err := applyTopicConfig(&cfg, kv.Name, kv.Value); err != nil {
			return nil, err
		}
		explicit[kv.Name] = kv.Value != nil
	}
	s.keepExplicitTopicKeys(&cfg, &def, explicit)
	st, err := s.createTopic(ctx, rt.Topic, partitions, cfg, r.ValidateOnly)
	if errors.Is(err, disbackend.ErrStreamExists) {
		return nil, kerrWrap(kerr.TopicAlreadyExists, fmt.Sprintf("topic %q already exists", rt.Topic))
	}
	return st, err
}

// checkTopicAssignment checks a new topic's manual replica assignment as
// Kafka 4.4's controller does (ReplicationControlManager.createTopic), in
// its order and with its messages: replication factor and partitions -1
// (else INVALID_REQUEST); then each entry in request order: its partition
// not assigned before, its replicas as replicaAssignmentError checks them,
// as many as the first entry's; then the partitions 0 to n-1 (else
// INVALID_REPLICA_ASSIGNMENT).
func (s *Server) checkTopicAssignment(rt *kmsg.CreateTopicsRequestTopic) error {
	if rt.ReplicationFactor != -1 {
		return kafkaMessage(kerr.InvalidRequest, "A manual partition assignment was specified, but replication factor was not set to -1.")
	}
	if rt.NumPartitions != -1 {
		return kafkaMessage(kerr.InvalidRequest, "A manual partition assignment was specified, but numPartitions was not set to -1.")
	}
	assigned := make(map[int32]bool, len(rt.ReplicaAssignment))
	rf := -1 // the first entry sets it
	for _, a := range rt.ReplicaAssignment {
		if assigned[a.Partition] {
			return invalidAssignment(fmt.Sprintf("Found multiple manual partition assignments for partition %d", a.Partition))
		}
		assigned[a.Partition] = true
		if msg := s.replicaAssignmentError(a.Replicas, rf); msg != "" {
			return invalidAssignment(msg)
		}
		rf = len(a.Replicas)
	}
	for i := range int32(len(assigned)) {
		if !assigned[i] {
			return invalidAssignment("partitions should be a consecutive 0-based integer sequence")
		}
	}
	return nil
}
