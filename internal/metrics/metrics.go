// Package metrics defines disgw's Prometheus metrics (client_golang) on a
// registry of their own, so several servers can run in one process (tests)
// without colliding on the global registry. It is a leaf package: gateway,
// groupcoord, disbackend/disrest, disbackend/localstore and admin import it; it imports none of
// them.
//
// Every method is safe on a nil *Metrics (it does nothing), so code paths
// without metrics need no checks. Label values of topics and groups are
// capped: once MaxTopics (MaxGroups) distinct values have been seen, any
// other value is counted as Other ("__other"), so a client inventing names
// cannot grow the registry without bound.
package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Other is the label value that topics and groups beyond the cap fold into.
const Other = "__other"

// Default caps on distinct topic and group label values.
const (
	DefaultMaxTopics = 1000
	DefaultMaxGroups = 1000
)

// Options configure New. Zero caps take the defaults.
type Options struct {
	MaxTopics int // distinct topic label values before folding into Other
	MaxGroups int // distinct group label values before folding into Other
}

// Metrics holds every disgw metric and the registry they are on.
type Metrics struct {
	Registry *prometheus.Registry

	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	recordsIn       *prometheus.CounterVec
	bytesIn         *prometheus.CounterVec
	recordsOut      *prometheus.CounterVec
	bytesOut        *prometheus.CounterVec
	connections     prometheus.Gauge
	rebalances      prometheus.Counter
	backendCalls    *prometheus.CounterVec
	backendDuration *prometheus.HistogramVec
	putBytes        prometheus.Histogram
	putRecords      prometheus.Histogram
	throttle        prometheus.Counter
	lateWrites      prometheus.Counter
	storageFull     prometheus.Gauge
	storageFree     prometheus.Gauge
	storageOnce     sync.Once // registers storageFull and storageFree at their first use
	cluster         clusterMetrics

	topics *Capper
	groups *Capper
	parts  sync.Map // PartitionKey → *partCounters
}

// New returns the metrics registered on a new registry, with the Go runtime
// and process collectors.
func New(o Options) *Metrics {
	if o.MaxTopics <= 0 {
		o.MaxTopics = DefaultMaxTopics
	}
	if o.MaxGroups <= 0 {
		o.MaxGroups = DefaultMaxGroups
	}
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "disgw_requests_total",
			Help: "Kafka requests answered, by API name, API version and Kafka error name (NONE, or the first error code of the response)."},
			[]string{"api", "version", "error"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "disgw_request_duration_seconds",
			Help:    "Time from a Kafka request's dispatch to its response being ready, in seconds, by API name.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}},
			[]string{"api"}),
		recordsIn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "disgw_records_in_total",
			Help: "Records appended through Produce, by topic."}, []string{"topic"}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "disgw_bytes_in_total",
			Help: "Record batch bytes appended through Produce, by topic."}, []string{"topic"}),
		recordsOut: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "disgw_records_out_total",
			Help: "Records returned by Fetch, by topic."}, []string{"topic"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "disgw_bytes_out_total",
			Help: "Record batch bytes returned by Fetch, by topic."}, []string{"topic"}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "disgw_connections",
			Help: "Open Kafka client connections."}),
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{Name: "disgw_rebalances_total",
			Help: "Consumer-group rebalances started (a group entering PreparingRebalance)."}),
		backendCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "disgw_backend_calls_total",
			Help: "DIS API calls, by operation and DIS error code (OK when it succeeded)."}, []string{"op", "code"}),
		backendDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "disgw_backend_call_duration_seconds",
			Help:    "Duration of DIS API calls, in seconds, by operation.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"op"}),
		putBytes: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "disgw_dis_putrecords_bytes",
			Help:    "Bytes of data sent in each DIS PutRecords call (DIS: at most 1 MiB on COMMON streams, 5 MiB on ADVANCED).",
			Buckets: prometheus.ExponentialBuckets(1024, 2, 13)}),
		putRecords: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "disgw_dis_putrecords_records",
			Help:    "Records sent in each DIS PutRecords call (DIS: at most 1000 per partition and second).",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}}),
		throttle: prometheus.NewCounter(prometheus.CounterOpts{Name: "disgw_throttle_seconds_total",
			Help: "Seconds spent waiting because DIS flow control (DIS.4303) or the partition pacer throttled a call."}),
		lateWrites: prometheus.NewCounter(prometheus.CounterOpts{Name: "disgw_cluster_late_writes_total",
			Help: "Batches DIS wrote that the gateway refused to acknowledge (NOT_LEADER_OR_FOLLOWER): their records are not where one base offset says (a late write of a former leader, docs/cluster.md)."}),
		storageFull: prometheus.NewGauge(prometheus.GaugeOpts{Name: "disgw_storage_full",
			Help: "1 while the embedded store refuses produces for lack of disk space (free space below storage_min_free_bytes, or a write failed with ENOSPC), else 0."}),
		storageFree: prometheus.NewGauge(prometheus.GaugeOpts{Name: "disgw_storage_free_bytes",
			Help: "Free bytes on the embedded store's data directory's filesystem, as last read (statfs, every second)."}),
		cluster: newClusterMetrics(),
		topics:  NewCapper(o.MaxTopics),
		groups:  NewCapper(o.MaxGroups),
	}
	m.Registry.MustRegister(m.requests, m.requestDuration, m.recordsIn, m.bytesIn, m.recordsOut, m.bytesOut,
		m.connections, m.rebalances, m.backendCalls, m.backendDuration, m.putBytes, m.putRecords, m.throttle, m.lateWrites,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Topic returns topic, or Other once the cap of distinct topics is reached.
func (m *Metrics) Topic(topic string) string {
	if m == nil {
		return topic
	}
	return m.topics.Value(topic)
}

// Group returns group, or Other once the cap of distinct groups is reached.
func (m *Metrics) Group(group string) string {
	if m == nil {
		return group
	}
	return m.groups.Value(group)
}

// Request counts one Kafka request answered: api is the API name
// (kmsg.NameForKey), errName the Kafka error name or "NONE", d the time
// from dispatch to the response.
func (m *Metrics) Request(api string, version int16, errName string, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(api, strconv.Itoa(int(version)), errName).Inc()
	m.requestDuration.WithLabelValues(api).Observe(d.Seconds())
}

// In counts records and bytes appended to a topic's partition by Produce.
func (m *Metrics) In(topic string, partition int32, records, bytes int) {
	if m == nil {
		return
	}
	t := m.Topic(topic)
	m.recordsIn.WithLabelValues(t).Add(float64(records))
	m.bytesIn.WithLabelValues(t).Add(float64(bytes))
	if t != Other {
		m.part(topic, partition).add(true, records, bytes)
	}
}

// Out counts records and bytes of a topic's partition returned by Fetch.
func (m *Metrics) Out(topic string, partition int32, records, bytes int) {
	if m == nil {
		return
	}
	t := m.Topic(topic)
	m.recordsOut.WithLabelValues(t).Add(float64(records))
	m.bytesOut.WithLabelValues(t).Add(float64(bytes))
	if t != Other {
		m.part(topic, partition).add(false, records, bytes)
	}
}

// PartitionKey names one partition of a topic.
type PartitionKey struct {
	Topic     string
	Partition int32
}

// PartitionTraffic is what went through one partition since the start:
// the console turns two readings into rates against DIS's limits.
type PartitionTraffic struct {
	RecordsIn, BytesIn, RecordsOut, BytesOut int64
}

type partCounters struct {
	mu sync.Mutex
	t  PartitionTraffic
}

func (p *partCounters) add(in bool, records, bytes int) {
	p.mu.Lock()
	if in {
		p.t.RecordsIn += int64(records)
		p.t.BytesIn += int64(bytes)
	} else {
		p.t.RecordsOut += int64(records)
		p.t.BytesOut += int64(bytes)
	}
	p.mu.Unlock()
}

func (m *Metrics) part(topic string, partition int32) *partCounters {
	k := PartitionKey{topic, partition}
	if v, ok := m.parts.Load(k); ok {
		return v.(*partCounters)
	}
	v, _ := m.parts.LoadOrStore(k, &partCounters{})
	return v.(*partCounters)
}

// Traffic returns every partition's traffic so far (only of topics under
// the MaxTopics cap).
func (m *Metrics) Traffic() map[PartitionKey]PartitionTraffic {
	out := make(map[PartitionKey]PartitionTraffic)
	if m == nil {
		return out
	}
	m.parts.Range(func(k, v any) bool {
		p := v.(*partCounters)
		p.mu.Lock()
		out[k.(PartitionKey)] = p.t
		p.mu.Unlock()
		return true
	})
	return out
}

// ConnOpened and ConnClosed track disgw_connections.
func (m *Metrics) ConnOpened() {
	if m != nil {
		m.connections.Inc()
	}
}

func (m *Metrics) ConnClosed() {
	if m != nil {
		m.connections.Dec()
	}
}

// Rebalance counts one rebalance started.
func (m *Metrics) Rebalance() {
	if m != nil {
		m.rebalances.Inc()
	}
}

// BackendCall counts one DIS call: op is the DIS operation (PutRecords,
// GetRecords, ...), code the DIS error code ("DIS.4303") or "OK".
func (m *Metrics) BackendCall(op, code string, d time.Duration) {
	if m == nil {
		return
	}
	m.backendCalls.WithLabelValues(op, code).Inc()
	m.backendDuration.WithLabelValues(op).Observe(d.Seconds())
}

// PutRecords observes the fill of one PutRecords call.
func (m *Metrics) PutRecords(records, bytes int) {
	if m == nil {
		return
	}
	m.putRecords.Observe(float64(records))
	m.putBytes.Observe(float64(bytes))
}

// Throttled adds time spent throttled.
func (m *Metrics) Throttled(d time.Duration) {
	if m != nil && d > 0 {
		m.throttle.Add(d.Seconds())
	}
}

// LateWrite counts one batch written by DIS and refused to its producer
// (disgw_cluster_late_writes_total).
func (m *Metrics) LateWrite() {
	if m != nil {
		m.lateWrites.Inc()
	}
}

// SetStorage sets the embedded store's disk gauges: full (it refuses
// produces for lack of space) and free, the free bytes of its filesystem
// (negative: unknown, left as it was). The gauges are registered at the
// first call, so they exist only with the embedded store.
func (m *Metrics) SetStorage(full bool, free int64) {
	if m == nil {
		return
	}
	m.storageOnce.Do(func() { m.Registry.MustRegister(m.storageFull, m.storageFree) })
	v := 0.0
	if full {
		v = 1
	}
	m.storageFull.Set(v)
	if free >= 0 {
		m.storageFree.Set(float64(free))
	}
}

// Register adds c (a collector of the caller's, such as the lag
// collector) to the registry.
func (m *Metrics) Register(c prometheus.Collector) error {
	if m == nil {
		return nil
	}
	return m.Registry.Register(c)
}

// Capper hands out label values: the first max distinct values as they
// are, any other as Other.
type Capper struct {
	max  int
	mu   sync.Mutex
	seen map[string]struct{}
}

// NewCapper returns a Capper letting max distinct values through.
func NewCapper(max int) *Capper { return &Capper{max: max, seen: make(map[string]struct{})} }

// Value returns v, or Other when v is new and the cap is reached.
func (c *Capper) Value(v string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[v]; ok {
		return v
	}
	if len(c.seen) >= c.max {
		return Other
	}
	c.seen[v] = struct{}{}
	return v
}
