package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire"
)

// topicCache is the gateway's view of the backend's streams, keyed by Kafka
// topic name and by topic id. Entries are immutable; a change replaces the
// entry. The backend stays the source of truth (it keeps the original names).
type topicCache struct {
	mu     sync.RWMutex
	byName map[string]*disbackend.Stream   // guarded by mu
	byID   map[[16]byte]*disbackend.Stream // guarded by mu
	// gen counts puts; putGen is each topic's gen at its last put, so that
	// a refresh drops or replaces only what was put before its listing
	// started (topics_refresh.go). Guarded by mu.
	gen    uint64
	putGen map[string]uint64
	// listings counts the refreshes whose listing is under way: only then
	// is a removal remembered in putGen (so that memory stays bounded by
	// the topics when no refresh runs). Guarded by mu.
	listings int
	// missing holds, per topic name, when (Unix ns) the backend last
	// answered that it has no stream for it (lookupTopic); a lookup within
	// missingTopicTTL of that answers the same without asking again. A
	// put forgets the name; at missingTopicsMax names the map starts
	// over. Guarded by mu.
	missing map[string]int64
	// adminMu serializes topic creation, deletion and changes, so a check and
	// the change that follows it cannot interleave with another.
	adminMu sync.Mutex
}

const (
	// missingTopicTTL is how long the backend's "no such stream" for a
	// topic name answers every lookup of it (lookupTopic), so that
	// clients retrying a topic that does not exist (a Java admin or
	// producer asks Metadata every retry.backoff.ms, 100 ms) cost one
	// DIS DescribeStream a second per name, not one a request. A topic
	// created through this node, or through another node of the cluster
	// (whose controller tells this one), is known at once; one created
	// with DIS tools within this second later.
	missingTopicTTL = time.Second
	// missingTopicsMax bounds the names remembered as missing.
	missingTopicsMax = 10_000
)

// missingRecently reports whether the backend answered within
// missingTopicTTL before now that it has no stream for topic.
func (tc *topicCache) missingRecently(topic string, now time.Time) bool {
	tc.mu.RLock()
	at, ok := tc.missing[topic]
	tc.mu.RUnlock()
	return ok && now.UnixNano()-at < int64(missingTopicTTL)
}

// forgetMissing drops what noteMissing remembered of topic.
func (tc *topicCache) forgetMissing(topic string) {
	tc.mu.Lock()
	delete(tc.missing, topic)
	tc.mu.Unlock()
}

// noteMissing remembers that the backend answered at now that it has no
// stream for topic, unless the topic was put meanwhile.
func (tc *topicCache) noteMissing(topic string, now time.Time) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.byName[topic] != nil {
		return
	}
	if tc.missing == nil || len(tc.missing) >= missingTopicsMax {
		tc.missing = make(map[string]int64)
	}
	tc.missing[topic] = now.UnixNano()
}

func newTopicCache(ctx context.Context, b disbackend.Backend) (*topicCache, error) {
	streams, err := b.ListStreams(ctx)
	if err != nil {
		return nil, err
	}
	tc := &topicCache{byName: make(map[string]*disbackend.Stream), byID: make(map[[16]byte]*disbackend.Stream),
		putGen: make(map[string]uint64)}
	for i := range streams {
		tc.put(&streams[i])
	}
	return tc, nil
}

func (tc *topicCache) get(topic string) *disbackend.Stream {
	tc.mu.RLock()
	defer tc.mu.RUnlock()
	return tc.byName[topic]
}

func (tc *topicCache) getByID(id [16]byte) *disbackend.Stream {
	tc.mu.RLock()
	defer tc.mu.RUnlock()
	return tc.byID[id]
}

// all returns every topic sorted by name.
func (tc *topicCache) all() []*disbackend.Stream {
	tc.mu.RLock()
	out := make([]*disbackend.Stream, 0, len(tc.byName))
	for _, st := range tc.byName {
		out = append(out, st)
	}
	tc.mu.RUnlock()
	slices.SortFunc(out, func(a, b *disbackend.Stream) int { return strings.Compare(a.TopicName, b.TopicName) })
	return out
}

func (tc *topicCache) put(st *disbackend.Stream) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.putLocked(st)
}

func (tc *topicCache) putLocked(st *disbackend.Stream) {
	delete(tc.missing, st.TopicName)
	tc.gen++
	tc.putGen[st.TopicName] = tc.gen
	if old := tc.byName[st.TopicName]; old != nil {
		delete(tc.byID, old.TopicID)
	}
	tc.byName[st.TopicName] = st
	tc.byID[st.TopicID] = st
}

func (tc *topicCache) remove(topic string) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.removeLocked(topic)
	// Remembered, so that a refresh whose listing started before does not
	// bring the topic back.
	tc.gen++
	if tc.listings > 0 {
		tc.putGen[topic] = tc.gen
	}
}

func (tc *topicCache) removeLocked(topic string) {
	if old := tc.byName[topic]; old != nil {
		delete(tc.byID, old.TopicID)
		delete(tc.byName, topic)
	}
	delete(tc.putGen, topic)
}

// topicNamed is topic's stream from the topic cache, else from the backend
// (lookupTopic); nil when there is none.
func (s *Server) topicNamed(ctx context.Context, topic string) *disbackend.Stream {
	if st := s.topics.get(topic); st != nil {
		return st
	}
	return s.lookupTopic(ctx, topic)
}

// lookupTopic asks the backend for a topic this node does not know
// (created through another node, or by DIS tools) and caches it; nil when
// the backend has no stream for it (or one that belongs to another topic
// name).
func (s *Server) lookupTopic(ctx context.Context, topic string) *disbackend.Stream {
	name, err := disbackend.StreamNameFor(s.backend, topic)
	if err != nil {
		return nil
	}
	asked := time.Now()
	if s.topics.missingRecently(topic, asked) {
		return nil
	}
	st, err := s.backend.DescribeStream(ctx, name)
	if errors.Is(err, disbackend.ErrStreamNotFound) || err == nil && st.TopicName != topic {
		s.topics.noteMissing(topic, asked)
		return nil
	}
	if err != nil {
		return nil
	}
	s.topics.put(&st)
	s.log.Info("topic found in the backend", zapTopic(topic), zapInt32("partitions", st.PartitionCount))
	return &st
}

// lookupStream is lookupTopic by stream name: the topic of the backend's
// stream, cached; nil when there is no such stream (or it is not the
// stream its topic name maps to).
func (s *Server) lookupStream(ctx context.Context, stream string) *disbackend.Stream {
	st, err := s.backend.DescribeStream(ctx, stream)
	if err != nil {
		return nil
	}
	if name, err := disbackend.StreamNameFor(s.backend, st.TopicName); err != nil || name != stream {
		return nil
	}
	s.topics.put(&st)
	s.log.Info("topic found in the backend", zapTopic(st.TopicName), zapInt32("partitions", st.PartitionCount))
	return &st
}

// validateStreamConfig checks cfg with the backend, when it can, for
// validate_only requests.
func (s *Server) validateStreamConfig(cfg disbackend.StreamConfig) error {
	if v, ok := s.backend.(disbackend.ConfigValidator); ok {
		return v.ValidateStreamConfig(cfg)
	}
	return nil
}

// createTopic creates a Kafka topic as a stream (DIS CreateStream).
// partitions <= 0 means the configured default. Errors: the backend's
// (ErrStreamExists, ErrNameCollision, ErrInvalidName, ...).
func (s *Server) createTopic(ctx context.Context, topic string, partitions int32, cfg disbackend.StreamConfig, validateOnly bool) (*disbackend.Stream, error) {
	name, err := disbackend.StreamNameFor(s.backend, topic)
	if err != nil {
		return nil, err
	}
	if partitions <= 0 {
		partitions = s.cfg.DefaultPartitions
	}
	s.topics.adminMu.Lock()
	defer s.topics.adminMu.Unlock()
	if st := s.topics.get(topic); st != nil {
		return st, fmt.Errorf("%w: topic %q", disbackend.ErrStreamExists, topic)
	}
	for _, other := range s.topics.all() {
		if other.Name == name {
			return nil, fmt.Errorf("%w: topic %q collides with existing topic %q (both map to stream %q)",
				disbackend.ErrNameCollision, topic, other.TopicName, name)
		}
	}
	if validateOnly {
		if err := s.validateStreamConfig(cfg); err != nil {
			return nil, err
		}
		return &disbackend.Stream{Name: name, TopicName: topic, PartitionCount: partitions, Config: cfg}, nil
	}
	st, err := s.backend.CreateStream(ctx, disbackend.StreamSpec{Name: name, TopicName: topic, PartitionCount: partitions, Config: cfg})
	if errors.Is(err, disbackend.ErrStreamExists) {
		// Created by another node, or by an earlier attempt whose answer
		// was lost: the topic exists, and this node learns it.
		s.topics.forgetMissing(topic)
		if found := s.lookupTopic(ctx, topic); found != nil {
			return found, fmt.Errorf("%w: topic %q", disbackend.ErrStreamExists, topic)
		}
	}
	if err != nil {
		return nil, err
	}
	s.topics.put(&st)
	s.log.Info("topic created", zap.String("topic", topic), zap.Int32("partitions", partitions))
	return &st, nil
}

// autoCreateTopic creates topic with the defaults (Metadata auto-creation,
// for Metadata request md); an existing topic is returned as is.
//
// With several nodes, only the controller creates topics (docs/cluster.md
// §7): a node that is not the controller forwards a CreateTopics of the
// topic (default partitions and replication factor, no configs: what the
// defaults give here) to it in an envelope under the client's principal,
// as a Kafka broker's AutoTopicCreationManager does, with the Metadata
// request's client id and correlation id; then it reads the topic it
// created, or found already there, and returns it. When the create cannot
// be forwarded now (no view, the controller unreachable or moved) or the
// topic cannot be read yet, the error is errAutoCreatePending
// (LEADER_NOT_AVAILABLE, as Kafka answers a topic being auto-created: the
// client asks again); a topic the controller refuses gets its error. A
// node without the cluster key, or a connection of the dis authentication
// mode, never forwards: the topic is UNKNOWN_TOPIC_OR_PARTITION, as with
// auto-creation off.
func (c *conn) autoCreateTopic(ctx context.Context, md *kafkawire.Request, topic string) (*disbackend.Stream, error) {
	s := c.s
	if s.cluster == nil || c.forwarded || s.isController() {
		st, err := s.createTopic(ctx, topic, 0, s.defaultStreamConfig(), false)
		if errors.Is(err, disbackend.ErrStreamExists) && st != nil {
			return st, nil
		}
		return st, err
	}
	if len(s.fwd.key) == 0 || c.disCreds.Load() != nil {
		// Never forwarded from this node or connection: as if
		// auto-creation were off.
		return nil, kerrWrap(kerr.UnknownTopicOrPartition, "auto-creation is not forwarded to the controller from this node or connection")
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	create.Version = autoCreateVersion
	create.TimeoutMillis = int32(autoCreateTimeout / time.Millisecond)
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, -1, -1
	create.Topics = append(create.Topics, t)
	req := &kafkawire.Request{Key: create.Key(), Version: create.Version, CorrelationID: md.CorrelationID, ClientID: md.ClientID, Body: create}
	resp, code, err := s.fwd.forward(ctx, c, req)
	if code != 0 {
		c.log.Info("auto-creation not forwarded to the controller", zapTopic(topic), zap.Int16("error_code", code), zapErr(err))
		return nil, fmt.Errorf("%w: topic %q: %v", errAutoCreatePending, topic, err)
	}
	cr := resp.(*kmsg.CreateTopicsResponse)
	if len(cr.Topics) != 1 || cr.Topics[0].Topic != topic {
		return nil, fmt.Errorf("%w: topic %q: the controller answered %d topics", errAutoCreatePending, topic, len(cr.Topics))
	}
	switch code := cr.Topics[0].ErrorCode; code {
	case 0, kerr.TopicAlreadyExists.Code:
	default:
		return nil, kerr.ErrorForCode(code)
	}
	s.refreshNamedTopics(ctx, []string{topic})
	if st := s.topics.get(topic); st != nil {
		return st, nil
	}
	return nil, fmt.Errorf("%w: topic %q created by the controller, not read yet", errAutoCreatePending, topic)
}

// The CreateTopics an auto-creation forwards: v4, the first with -1 for
// the defaults (KIP-464), and the time the controller may take.
const (
	autoCreateVersion = 4
	autoCreateTimeout = 10 * time.Second
)

// errAutoCreatePending: an auto-creation forwarded to the controller has
// no topic to answer yet; Metadata answers LEADER_NOT_AVAILABLE.
var errAutoCreatePending = kerrWrap(kerr.LeaderNotAvailable, "the topic is being created by the controller")

func (s *Server) defaultStreamConfig() disbackend.StreamConfig {
	ret := s.cfg.DefaultRetention
	if ret < 0 {
		ret = disbackend.UnlimitedRetention
	}
	return disbackend.StreamConfig{Retention: ret, TimestampType: disbackend.CreateTime, MaxMessageBytes: s.cfg.MaxMessageBytes,
		CleanupPolicy: disbackend.CleanupDelete, DeleteRetention: disbackend.DefaultDeleteRetention,
		MinCleanableDirtyRatio: disbackend.DefaultMinCleanableDirtyRatio,
		SegmentBytes:           disbackend.DefaultSegmentBytes, SegmentTime: disbackend.DefaultSegmentTime}
}

// countNames counts how often each topic name appears in a request's list;
// Kafka answers INVALID_REQUEST for every entry of a name listed twice.
func countNames[T any](items []T, name func(T) string) map[string]int {
	count := make(map[string]int, len(items))
	for _, it := range items {
		count[name(it)]++
	}
	return count
}

// errListedTwice is the error for a topic named more than once in one
// request (Kafka INVALID_REQUEST).
func errListedTwice(topic string) error {
	return kerrWrap(kerr.InvalidRequest, fmt.Sprintf("topic %q is listed more than once", topic))
}
