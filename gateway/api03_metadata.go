package gateway

// Metadata: v0-13.
//
// Version notes:
//   - v0: an empty topic list means every topic; v1+: null means every
//     topic and empty means none. Listing every topic never creates one.
//   - v0-v3 have no allow_auto_topic_creation field (kmsg decodes it as
//     false): unknown requested topics are auto-created when the gateway
//     allows it, as Kafka does for those versions. v4+ follow the flag.
//   - v1: ControllerID, IsInternal (true for __consumer_offsets only,
//     offsets_topic.go), Rack. v2: ClusterID. v5:
//     OfflineReplicas. v7: LeaderEpoch (0 on one node, the view's
//     cluster epoch with several). v8: authorized
//     operations when asked (include_cluster_authorized_operations, v8-10;
//     include_topic_authorized_operations): with no authorizer, every
//     operation of the resource type (authops.go), else Kafka's "not
//     requested" -2147483648.
//   - v9: flexible. v10: topic ids, and lookup by id (UNKNOWN_TOPIC_ID).
//   - v13: top-level ErrorCode (KIP-1102), always 0.
//   - v3: ThrottleMillis: the wait for auto-creations refused by the
//     auto-create limits (limits.go).
//
// A topic listed twice is answered once (Kafka reads the list as a set).
// Topics past Limits.MaxTopics get INVALID_REQUEST and only their name;
// auto-creations past Limits.AutoCreatePerRequest or the per-second bucket
// get UNKNOWN_TOPIC_OR_PARTITION (clients retry) and a throttle time.
//
// In the dis authentication mode (SASLConfig.PlainDIS) each topic answered
// is checked with a DescribeStream signed with the connection's DIS key
// (disAuthorizeTopics): one DIS refuses is TOPIC_AUTHORIZATION_FAILED, or
// left out of an all-topics answer.
//
// On one node every partition is led by this node at leader epoch 0, with
// replicas and ISR = this node. With several (cluster.go): the brokers are
// the view's nodes with an address on the request's listener,
// controller_id the view's controller, each partition's leader its owner
// at the view's epoch with replicas and ISR [leader]; a leader without an
// address on the listener is -1 with LEADER_NOT_AVAILABLE or
// LISTENER_NOT_FOUND, as Kafka answers. A node that is not the controller
// has the controller auto-create a topic (autoCreateForwarded), as KRaft
// brokers forward their auto-creations.

import (
	"context"
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() { registerAPI(3, 0, 13, (*conn).handleMetadata, (*conn).authorizeMetadata) }

// authorizeMetadata: DESCRIBE on each topic. A listing of every topic
// leaves out those the principal may not describe. A named topic it may not
// describe is taken out and answered TOPIC_AUTHORIZATION_FAILED
// (UNKNOWN_TOPIC_ID when named by id), and so is one this request would
// auto-create without CREATE on the cluster or on the topic. Authorized
// operations (KIP-430), when asked for, are the principal's.
func (c *conn) authorizeMetadata(req *kafkawire.Request) (kmsg.Response, postAuth) {
	r := req.Body.(*kmsg.MetadataRequest)
	all := r.Topics == nil || r.Version == 0 && len(r.Topics) == 0
	var denied []kmsg.MetadataResponseTopic
	dropAll := false
	if !all {
		denied = c.denyMetadataTopics(r)
		// v0 reads an empty list as every topic: none left is none answered.
		dropAll = len(r.Topics) == 0 && r.Version == 0
	}
	return nil, func(resp kmsg.Response) error {
		c.filterMetadata(r, resp.(*kmsg.MetadataResponse), all, dropAll, denied)
		return nil
	}
}

// denyMetadataTopics takes the named topics the principal may not describe
// (or may not auto-create) out of r and returns their answers.
func (c *conn) denyMetadataTopics(r *kmsg.MetadataRequest) []kmsg.MetadataResponseTopic {
	autoCreate := c.s.cfg.AutoCreateTopics && (r.Version <= 3 || r.AllowAutoTopicCreation)
	mayCreateAny := c.mayCluster(acl.OpCreate)
	var denied []kmsg.MetadataResponseTopic
	kept := r.Topics[:0]
	for _, rt := range r.Topics {
		named := rt.Topic != nil && *rt.Topic != ""
		var name string
		if named {
			name = *rt.Topic
		}
		name = c.topicName(name, rt.TopicID)
		d := kmsg.NewMetadataResponseTopic()
		d.Topic, d.TopicID, d.ErrorCode = rt.Topic, rt.TopicID, errTopicAuth
		switch {
		case name == "":
			kept = append(kept, rt)
		case !c.mayTopic(acl.OpDescribe, name):
			if !named {
				d.ErrorCode = kmsgUnknownTopicID
			}
			denied = append(denied, d)
		case named && autoCreate && !mayCreateAny && !c.mayTopic(acl.OpCreate, name) && !c.topicExists(name):
			denied = append(denied, d)
		default:
			kept = append(kept, rt)
		}
	}
	r.Topics = kept
	return denied
}

// filterMetadata completes the handler's answer mr to r: it hides the
// topics of a listing (all) the principal may not describe, appends the
// refused topics (denied), and sets the authorized operations asked for.
func (c *conn) filterMetadata(r *kmsg.MetadataRequest, mr *kmsg.MetadataResponse, all, dropAll bool, denied []kmsg.MetadataResponseTopic) {
	if dropAll {
		mr.Topics = nil
	}
	kept := mr.Topics[:0]
	for _, t := range mr.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if all && !c.mayTopic(acl.OpDescribe, name) {
			continue // hidden, as Kafka hides topics a principal may not describe
		}
		if r.IncludeTopicAuthorizedOperations && t.ErrorCode == 0 {
			t.AuthorizedOperations = c.opsOf(acl.ResourceTopic, name, topicAuthorizedOps)
		}
		kept = append(kept, t)
	}
	for _, d := range denied {
		d.AuthorizedOperations = authorizedOps(r.IncludeTopicAuthorizedOperations, 0)
		kept = append(kept, d)
	}
	mr.Topics = kept
	if r.Version <= 10 && r.IncludeClusterAuthorizedOperations {
		mr.AuthorizedOperations = c.opsOf(acl.ResourceCluster, acl.ClusterName, clusterAuthorizedOps)
	}
}

// leaderEpoch is the leader epoch of every partition: one node leads
// everything and leadership never moves.
const leaderEpoch = disbackend.LeaderEpoch

func (c *conn) handleMetadata(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.MetadataRequest)
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	s := c.s

	kv := c.kafkaView()
	if kv == nil {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = s.cfg.NodeID, c.lst.advHost, c.lst.advPort
		resp.Brokers = []kmsg.MetadataResponseBroker{b}
		resp.ControllerID = s.cfg.NodeID
	} else {
		resp.Brokers = make([]kmsg.MetadataResponseBroker, 0, len(kv.brokers))
		for _, ep := range kv.brokers {
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port = ep.id, ep.host, ep.port
			resp.Brokers = append(resp.Brokers, b)
		}
		resp.ControllerID = kv.v.Controller
	}
	resp.ClusterID = &s.cfg.ClusterID
	if r.Version <= 10 {
		resp.AuthorizedOperations = authorizedOps(r.IncludeClusterAuthorizedOperations, clusterAuthorizedOps)
	}
	// Set on every topic answered, unknown ones included, as Kafka does.
	defer func() {
		for i := range resp.Topics {
			resp.Topics[i].AuthorizedOperations = authorizedOps(r.IncludeTopicAuthorizedOperations, topicAuthorizedOps)
		}
	}()

	all := r.Topics == nil || r.Version == 0 && len(r.Topics) == 0
	if all {
		for _, st := range s.topics.all() {
			resp.Topics = append(resp.Topics, s.metadataTopic(r.Version, st, kv))
		}
		resp.Topics = append(resp.Topics, s.metadataTopic(r.Version, s.offsetsTopicStream(), kv))
		if c.disCreds.Load() != nil {
			ctx, cancel := c.requestContext(0)
			defer cancel()
			c.disAuthorizeTopics(ctx, resp, true)
		}
		return ready(req, resp)
	}
	ac := autoCreateBudget{on: s.cfg.AutoCreateTopics && (r.Version <= 3 || r.AllowAutoTopicCreation),
		left: s.cfg.Limits.AutoCreatePerRequest, c: c, req: req}
	ctx, cancel := c.requestContext(0)
	defer cancel()
	topics := newQuota(s.cfg.Limits.MaxTopics)
	// Kafka reads the requested topics as a set: a topic listed twice is
	// answered once (so a request cannot repeat one large answer).
	byName := make(map[string]bool)
	byID := make(map[[16]byte]bool)
	resp.Topics = make([]kmsg.MetadataResponseTopic, 0, min(len(r.Topics), s.cfg.Limits.MaxTopics))
	for _, rt := range r.Topics {
		named := rt.Topic != nil && *rt.Topic != ""
		if named && byName[*rt.Topic] || !named && byID[rt.TopicID] {
			continue
		}
		if !topics.take() {
			t := kmsg.NewMetadataResponseTopic()
			t.Topic, t.TopicID, t.ErrorCode = rt.Topic, rt.TopicID, errCodeOverCap
			resp.Topics = append(resp.Topics, t)
			continue
		}
		if named {
			byName[*rt.Topic] = true
		} else {
			byID[rt.TopicID] = true
		}
		resp.Topics = append(resp.Topics, s.metadataRequestedTopic(ctx, r.Version, rt, &ac, kv))
	}
	if c.disCreds.Load() != nil {
		c.disAuthorizeTopics(ctx, resp, false)
	}
	topics.report(c, limitTopics, "Metadata")
	if n := ac.refusedRequest + ac.refusedRate; n > 0 {
		// The client retries an unknown topic after its backoff; the
		// throttle time (v3+) says when the bucket has room for them.
		resp.ThrottleMillis = throttleMillis(s.limits.autoCreateWait(n))
		if ac.refusedRequest > 0 {
			s.limits.hit(limitAutoCreateRequest, "Metadata", ac.refusedRequest, c)
		}
		if ac.refusedRate > 0 {
			s.limits.hit(limitAutoCreateRate, "Metadata", ac.refusedRate, c)
		}
	}
	return ready(req, resp)
}

// disAuthorizeConcurrency bounds the DIS checks one Metadata request makes
// at once in the dis authentication mode.
const disAuthorizeConcurrency = 8

// disAuthorizeTopics, in the dis authentication mode, asks DIS whether the
// connection's principal may describe each topic answered without an
// error (a DescribeStream signed with its credentials, remembered for the
// backend's PrincipalTTL; up to disAuthorizeConcurrency at once): a topic
// it may not is answered TOPIC_AUTHORIZATION_FAILED without partitions,
// as Kafka answers a topic the principal may not DESCRIBE, or, in an
// all-topics request (hide), left out, as Kafka leaves it out. A check
// that fails otherwise answers the topic with that error (hidden too when
// hide).
func (c *conn) disAuthorizeTopics(ctx context.Context, resp *kmsg.MetadataResponse, hide bool) {
	s := c.s
	errs := make([]error, len(resp.Topics))
	sem := make(chan struct{}, disAuthorizeConcurrency)
	var wg sync.WaitGroup
	for i, t := range resp.Topics {
		var st *disbackend.Stream
		switch {
		case t.ErrorCode != 0:
		case t.Topic != nil && *t.Topic == offsetsTopic:
		case t.Topic != nil:
			st = s.topics.get(*t.Topic)
		default:
			st = s.topics.getByID(t.TopicID)
		}
		if st == nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = s.disAuth.AuthorizeStream(ctx, st.Name, disbackend.AccessDescribe)
		}()
	}
	wg.Wait()
	kept := resp.Topics[:0]
	for i, t := range resp.Topics {
		err := errs[i]
		if err == nil {
			kept = append(kept, t)
			continue
		}
		c.noteBackendErr(err)
		if hide {
			continue
		}
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		c.log.Debug("metadata of a topic refused by DIS", zapTopic(name), zapErr(err))
		d := kmsg.NewMetadataResponseTopic()
		d.Topic, d.TopicID = t.Topic, t.TopicID
		d.ErrorCode = kafkaError(c.log, err)
		kept = append(kept, d)
	}
	resp.Topics = kept
}

// autoCreateBudget is what one Metadata request may still auto-create.
type autoCreateBudget struct {
	on                          bool // the request may auto-create
	left                        int  // creations left to this request
	refusedRequest, refusedRate int  // refused by the per-request cap, by the bucket
	// c and req are the connection and the Metadata request, whose
	// auto-creations a node that is not the controller forwards.
	c   *conn
	req *kafkawire.Request
}

// take reports whether one more topic may be auto-created.
func (b *autoCreateBudget) take(l *limiter) bool {
	if b.left <= 0 {
		b.refusedRequest++
		return false
	}
	if !l.takeAutoCreate() {
		b.refusedRate++
		return false
	}
	b.left--
	return true
}

func (s *Server) metadataRequestedTopic(ctx context.Context, version int16, rt kmsg.MetadataRequestTopic, ac *autoCreateBudget, kv *kafkaView) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	if rt.Topic == nil || *rt.Topic == "" {
		// By id (v10+).
		t.TopicID = rt.TopicID
		if st := s.topics.getByID(rt.TopicID); st != nil {
			return s.metadataTopic(version, st, kv)
		}
		if ot := s.offsetsTopicStream(); rt.TopicID == ot.TopicID {
			return s.metadataTopic(version, ot, kv)
		}
		t.ErrorCode = kerr.UnknownTopicID.Code
		return t
	}
	name := *rt.Topic
	t.Topic = rt.Topic
	if name == offsetsTopic {
		return s.metadataTopic(version, s.offsetsTopicStream(), kv)
	}
	if st := s.topics.get(name); st != nil {
		return s.metadataTopic(version, st, kv)
	}
	if err := disbackend.ValidateTopicName(name); err != nil {
		t.ErrorCode = kerr.InvalidTopicException.Code
		return t
	}
	if st := s.lookupTopic(ctx, name); st != nil {
		return s.metadataTopic(version, st, kv)
	}
	if !ac.on || !ac.take(s.limits) {
		t.ErrorCode = kerr.UnknownTopicOrPartition.Code
		return t
	}
	if s.cluster != nil && ac.c != nil && !s.isController() {
		st, code := ac.c.autoCreateForwarded(ctx, ac.req, name)
		if code != 0 {
			t.ErrorCode = code
			return t
		}
		return s.metadataTopic(version, st, kv)
	}
	st, err := s.autoCreateTopic(ctx, name)
	if err != nil {
		if !errors.Is(err, disbackend.ErrNameCollision) && !errors.Is(err, disbackend.ErrInvalidName) {
			s.log.Warn("auto-create topic failed", zapTopic(name), zapErr(err))
		}
		t.ErrorCode = kafkaError(s.log, err)
		return t
	}
	return s.metadataTopic(version, st, kv)
}

// autoCreateForwarded auto-creates topic, for Metadata request req on a
// node that is not the controller (docs/cluster.md §7), as a KRaft
// broker's auto-topic-creation manager does: a CreateTopics of topic with
// the default partitions, replication and configs, forwarded to the
// controller in an envelope under the connection's principal (the
// controller authorizes CREATE again). It returns the topic once the
// controller created it, or found it created; otherwise the code to
// answer the topic with: the controller's error for the topic, or
// LEADER_NOT_AVAILABLE, which clients retry after their backoff, when the
// request could not be forwarded or the topic cannot be read yet. (Answered
// NOT_CONTROLLER, a Metadata topic error no client retries, librdkafka
// failed every record of a new topic produced through such a node.)
func (c *conn) autoCreateForwarded(ctx context.Context, req *kafkawire.Request, topic string) (*disbackend.Stream, int16) {
	s := c.s
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Version = 7
	ct.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ct.Topics = append(ct.Topics, rt)
	fr := &kafkawire.Request{Key: ct.Key(), Version: ct.Version, CorrelationID: req.CorrelationID, ClientID: req.ClientID, Body: ct}
	resp, code, err := s.fwd.forward(ctx, c, fr)
	if code != 0 {
		c.log.Info("auto-creation not forwarded to the controller", zapTopic(topic), zap.Int16("error_code", code), zapErr(err))
		return nil, kerr.LeaderNotAvailable.Code
	}
	cr, _ := resp.(*kmsg.CreateTopicsResponse)
	if cr == nil || len(cr.Topics) != 1 {
		return nil, kerr.LeaderNotAvailable.Code
	}
	if ec := cr.Topics[0].ErrorCode; ec != 0 && ec != kerr.TopicAlreadyExists.Code {
		if ec != kerr.TopicAuthorizationFailed.Code && ec != kerr.InvalidTopicException.Code {
			s.log.Warn("auto-create topic failed at the controller", zapTopic(topic), zap.Int16("error_code", ec))
		}
		return nil, ec
	}
	s.refreshNamedTopics(ctx, []string{topic})
	if st := s.topics.get(topic); st != nil {
		return st, 0
	}
	return nil, kerr.LeaderNotAvailable.Code
}

// metadataTopic is topic st as Metadata answers it at version: its
// partitions led by this node, or (kv not nil) by their owners in kv's
// view.
func (s *Server) metadataTopic(version int16, st *disbackend.Stream, kv *kafkaView) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	name := st.TopicName
	t.Topic = &name
	if version >= 10 {
		t.TopicID = st.TopicID
	}
	t.IsInternal = name == offsetsTopic
	t.Partitions = make([]kmsg.MetadataResponseTopicPartition, st.PartitionCount)
	node := []int32{s.cfg.NodeID}
	for i := range t.Partitions {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition = int32(i)
		p.Leader = s.cfg.NodeID
		p.LeaderEpoch = leaderEpoch
		p.Replicas = node
		p.ISR = node
		p.OfflineReplicas = []int32{}
		if kv != nil {
			owner := kv.v.Leader(st.Name, p.Partition)
			p.Leader, p.ErrorCode = kv.leaderOf(owner, version)
			p.LeaderEpoch = kv.epoch()
			p.Replicas = kv.replicasOf(owner)
			p.ISR = p.Replicas
		}
		t.Partitions[i] = p
	}
	return t
}
