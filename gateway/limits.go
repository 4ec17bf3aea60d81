package gateway

// Per-request limits (issue 11): how many topics, partitions and groups one
// request may ask for, and how many topics Metadata may auto-create per
// request and per second.
//
// Kafka has none of these caps; the defaults are far above what clients
// send (a consumer of a 10 000-topic cluster lists 10 000 topics). Entries
// past a cap are answered with an error code each and nothing else (name
// and code), so the answer stays small; kafkawire refuses a request
// declaring more than kafkawire.MaxRequestEntries entries before decoding
// it. Duplicate entries that would be answered with the same large answer
// (a Metadata topic, a DescribeConfigs resource, a DescribeGroups or
// OffsetFetch group) are answered once (Metadata, as Kafka, which reads the
// topics as a set) or get INVALID_REQUEST, so a request cannot multiply one
// big answer.

import (
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"
)

// RequestLimits bounds what one request may ask for. Zero fields take the
// defaults of DefaultRequestLimits, those of the disgw settings that fill
// them (max_request_topics, max_request_partitions, max_request_groups,
// auto_create_topics_per_request, auto_create_topics_per_second,
// partition_mutations_per_second).
type RequestLimits struct {
	// MaxTopics is the most topics (or config resources, or coordinator
	// keys) one request is served; the others get an error each.
	MaxTopics int
	// MaxPartitions is the most partitions one request is served, summed
	// over its topics; the others get an error each.
	MaxPartitions int
	// MaxGroups is the most groups one request is served (DescribeGroups,
	// DeleteGroups, OffsetFetch v8+, FindCoordinator v4+).
	MaxGroups int
	// AutoCreatePerRequest is the most topics one Metadata request may
	// auto-create; the others get UNKNOWN_TOPIC_OR_PARTITION with a
	// throttle time, and the client retries.
	AutoCreatePerRequest int
	// AutoCreatePerSecond is how many topics Metadata may auto-create per
	// second across all connections (a token bucket holding at most
	// max(AutoCreatePerSecond, AutoCreatePerRequest) tokens).
	AutoCreatePerSecond float64
	// PartitionMutationsPerSecond is how many partitions CreateTopics and
	// CreatePartitions may create per second across all connections
	// (KIP-599's controller mutation rate): a token bucket of ten seconds'
	// worth; a request is admitted while the bucket is not empty (it may
	// go below zero, as Kafka's), the others get THROTTLING_QUOTA_EXCEEDED
	// and a throttle time.
	PartitionMutationsPerSecond float64
}

// DefaultRequestLimits returns the defaults of RequestLimits: DefaultConfig's.
func DefaultRequestLimits() RequestLimits { return DefaultConfig().Limits }

func (l *RequestLimits) fill() {
	d := DefaultRequestLimits()
	if l.MaxTopics <= 0 {
		l.MaxTopics = d.MaxTopics
	}
	if l.MaxPartitions <= 0 {
		l.MaxPartitions = d.MaxPartitions
	}
	if l.MaxGroups <= 0 {
		l.MaxGroups = d.MaxGroups
	}
	if l.AutoCreatePerRequest <= 0 {
		l.AutoCreatePerRequest = d.AutoCreatePerRequest
	}
	if l.AutoCreatePerSecond <= 0 {
		l.AutoCreatePerSecond = d.AutoCreatePerSecond
	}
	if l.PartitionMutationsPerSecond <= 0 {
		l.PartitionMutationsPerSecond = d.PartitionMutationsPerSecond
	}
}

// Error codes for entries past a cap. Kafka has no such caps; it answers
// INVALID_REQUEST to a request breaking its own rules (a topic listed
// twice), and POLICY_VIOLATION to a CreateTopics its create policy
// refuses. Both are not retriable: the same request would be refused again.
var (
	errCodeOverCap       = kerr.InvalidRequest.Code
	errCodeCreateOverCap = kerr.PolicyViolation.Code
)

// Limit kinds, for the rate-limited log line.
const (
	limitTopics = iota
	limitPartitions
	limitGroups
	limitAutoCreateRequest
	limitAutoCreateRate
	limitPartitionMutations
	numLimits
)

var limitNames = [numLimits]string{"max_request_topics", "max_request_partitions", "max_request_groups",
	"auto_create_topics_per_request", "auto_create_topics_per_second", "partition_mutations_per_second"}

// limiter holds the server's limits, the auto-create token bucket and the
// log throttle; shared by all connections.
type limiter struct {
	cfg RequestLimits
	log *zap.Logger
	now func() time.Time // the clock; tests replace it

	events *limitLog // the rate-limited log lines, on the clock now

	mu        sync.Mutex
	tokens    float64   // guarded by mu
	refilled  time.Time // guarded by mu
	mutations float64   // guarded by mu; partition mutation tokens, refilled with tokens
}

func newLimiter(cfg RequestLimits, log *zap.Logger) *limiter {
	l := &limiter{cfg: cfg, log: log, now: time.Now}
	l.events = newLimitLog(log)
	l.events.now = func() time.Time { return l.now() }
	l.tokens = l.burst()
	l.mutations = l.mutationBurst()
	l.refilled = l.now()
	return l
}

func (l *limiter) mutationBurst() float64 { return 10 * l.cfg.PartitionMutationsPerSecond }

// admitMutations reports whether a create of partitions is admitted: the
// partition mutation bucket is not empty (a create may take it below
// zero, as Kafka's). Refused, it returns how long until the bucket has a
// token again: the throttle time of the THROTTLING_QUOTA_EXCEEDED answer.
func (l *limiter) admitMutations() (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refill()
	if l.mutations > 0 {
		return true, 0
	}
	return false, time.Duration(math.Ceil((1 - l.mutations) / l.cfg.PartitionMutationsPerSecond * float64(time.Second)))
}

// spendMutations takes n partitions created from the bucket.
func (l *limiter) spendMutations(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mutations -= float64(n)
}

func (l *limiter) burst() float64 {
	return math.Max(l.cfg.AutoCreatePerSecond, float64(l.cfg.AutoCreatePerRequest))
}

// takeAutoCreate takes one auto-creation token; false when the bucket is
// empty.
func (l *limiter) takeAutoCreate() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refill()
	if l.tokens < 1 {
		return false
	}
	l.tokens--
	return true
}

// autoCreateWait is how long until the bucket holds n tokens (at most a
// full bucket): the throttle time of an answer that refused n creations.
func (l *limiter) autoCreateWait(n int) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refill()
	need := math.Min(float64(n), l.burst()) - l.tokens
	if need <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(need / l.cfg.AutoCreatePerSecond * float64(time.Second)))
}

// refill adds the tokens earned since the last refill; l.mu held.
func (l *limiter) refill() {
	now := l.now()
	if d := now.Sub(l.refilled); d > 0 {
		l.tokens = math.Min(l.burst(), l.tokens+d.Seconds()*l.cfg.AutoCreatePerSecond)
		l.mutations = math.Min(l.mutationBurst(), l.mutations+d.Seconds()*l.cfg.PartitionMutationsPerSecond)
	}
	l.refilled = now
}

// hit records that a request had refused entries past a limit, and logs it
// at most once per limitLogEvery per kind, with how many hits were not
// logged since.
func (l *limiter) hit(kind int, api string, refused int, c *conn) {
	fields := []zap.Field{zap.String("api", api), zap.Int("refused", refused)}
	if c != nil {
		fields = append(fields, zap.Uint64("conn_id", c.id), zap.String("remote_addr", c.nc.RemoteAddr().String()))
	}
	l.events.hit(limitNames[kind], "request limit hit", fields...)
}

// quota counts the entries of one request against a cap.
type quota struct {
	left, refused int
}

func newQuota(n int) quota { return quota{left: n} }

// take reports whether one more entry is served.
func (q *quota) take() bool {
	if q.left > 0 {
		q.left--
		return true
	}
	q.refused++
	return false
}

// report logs through the limiter when entries were refused.
func (q *quota) report(c *conn, kind int, api string) {
	if q.refused > 0 {
		c.s.limits.hit(kind, api, q.refused, c)
	}
}

// throttleMillis converts a throttle time for a response field.
func throttleMillis(d time.Duration) int32 {
	return int32(min(d.Milliseconds(), math.MaxInt32))
}

// capNames decides, for a request's list of names (groups, keys), which
// are served: codes[i] is 0 for a served entry, errCodeOverCap past the
// cap, and with dedupe INVALID_REQUEST for a name listed again. served
// are the served names in order.
func capNames(names []string, q *quota, dedupe bool) (served []string, codes []int16) {
	codes = make([]int16, len(names))
	served = make([]string, 0, min(len(names), q.left))
	var seen map[string]bool
	if dedupe {
		seen = make(map[string]bool, min(len(names), q.left))
	}
	for i, n := range names {
		switch {
		case dedupe && seen[n]:
			codes[i] = kerr.InvalidRequest.Code
		case !q.take():
			codes[i] = errCodeOverCap
		default:
			if dedupe {
				seen[n] = true
			}
			served = append(served, n)
		}
	}
	return served, codes
}

// partitionQuota applies Limits.MaxTopics and Limits.MaxPartitions to a
// request of topics and their partitions: every partition of a topic past
// the topic cap is refused, and every partition past the partition cap.
type partitionQuota struct {
	topics, partitions quota
	topicOK            bool // the current topic is within the topic cap
}

func (s *Server) newPartitionQuota() *partitionQuota {
	return &partitionQuota{topics: newQuota(s.cfg.Limits.MaxTopics), partitions: newQuota(s.cfg.Limits.MaxPartitions)}
}

// topic starts the next topic; it reports whether the topic is served.
func (q *partitionQuota) topic() bool {
	q.topicOK = q.topics.take()
	return q.topicOK
}

// partition reports whether the current topic's next partition is served.
func (q *partitionQuota) partition() bool {
	if !q.topicOK {
		q.partitions.refused++
		return false
	}
	return q.partitions.take()
}

func (q *partitionQuota) report(c *conn, api string) {
	q.topics.report(c, limitTopics, api)
	q.partitions.report(c, limitPartitions, api)
}

// withRefused merges the answers of the served names (got, in order) with
// an answer made by refused for each name whose code is not 0, in the
// order of names: a response listing every name the request gave.
func withRefused[T any](got []T, names []string, codes []int16, refused func(name string, code int16) T) []T {
	out := make([]T, 0, len(names))
	for i, name := range names {
		if codes[i] == 0 {
			out = append(out, got[0])
			got = got[1:]
			continue
		}
		out = append(out, refused(name, codes[i]))
	}
	return out
}
