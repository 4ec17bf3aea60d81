package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// clusterMetrics are the metrics of cluster mode (docs/cluster.md): the
// membership of the gateway nodes in DIS, its views and its lease.
type clusterMetrics struct {
	members      prometheus.Gauge
	epoch        prometheus.Gauge
	controller   prometheus.Gauge
	leaseRefused prometheus.Counter
	moves        *prometheus.CounterVec
	intents      prometheus.Counter
	// once registers them, at the first ClusterMode: a single node's
	// /metrics does not show them.
	once *sync.Once
}

func newClusterMetrics() clusterMetrics {
	return clusterMetrics{
		members: prometheus.NewGauge(prometheus.GaugeOpts{Name: "disgw_cluster_members",
			Help: "Gateway nodes in this node's current cluster view (0 before the first view or without cluster mode)."}),
		epoch: prometheus.NewGauge(prometheus.GaugeOpts{Name: "disgw_cluster_view_epoch",
			Help: "Cluster epoch of this node's current view: grows by one with every view, the partitions' Kafka leader epoch."}),
		controller: prometheus.NewGauge(prometheus.GaugeOpts{Name: "disgw_cluster_is_controller",
			Help: "1 while this node is the controller of its current generation, else 0."}),
		leaseRefused: prometheus.NewCounter(prometheus.CounterOpts{Name: "disgw_cluster_lease_refused_total",
			Help: "Lease renewals DIS refused (DIS.4701 rebalancing, DIS.4702 member not found, DIS.4703 stale generation): each stops this node's writes at once."}),
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "disgw_cluster_moves_total",
			Help: "Placement keys this node gained or lost at view changes, by kind (partition, group) and direction (gained, lost): ownership moves (docs/cluster.md §3)."},
			[]string{"kind", "direction"}),
		intents: prometheus.NewCounter(prometheus.CounterOpts{Name: "disgw_cluster_intents_refused_total",
			Help: "Write-ahead intents DIS refused (DIS.4701, DIS.4702, DIS.4703: this node is no member of the current generation): each stopped a PutRecords before it was sent, the batch answered NOT_LEADER_OR_FOLLOWER."}),
		once: new(sync.Once),
	}
}

// ClusterMode registers the cluster metrics (disgw_cluster_*); the
// backend calls it when cluster mode starts. Later calls do nothing.
func (m *Metrics) ClusterMode() {
	if m == nil {
		return
	}
	c := m.cluster
	c.once.Do(func() {
		m.Registry.MustRegister(c.members, c.epoch, c.controller, c.leaseRefused, c.moves, c.intents)
		// Every series shows from the start, at 0.
		for _, kind := range []string{"partition", "group"} {
			for _, dir := range []string{"gained", "lost"} {
				c.moves.WithLabelValues(kind, dir)
			}
		}
	})
}

// ClusterView sets disgw_cluster_members and disgw_cluster_view_epoch
// from a view this node adopted.
func (m *Metrics) ClusterView(members int, epoch int32) {
	if m != nil {
		m.cluster.members.Set(float64(members))
		m.cluster.epoch.Set(float64(epoch))
	}
}

// ClusterController sets disgw_cluster_is_controller.
func (m *Metrics) ClusterController(is bool) {
	if m == nil {
		return
	}
	v := 0.0
	if is {
		v = 1
	}
	m.cluster.controller.Set(v)
}

// ClusterLeaseRefused counts one lease renewal DIS refused.
func (m *Metrics) ClusterLeaseRefused() {
	if m != nil {
		m.cluster.leaseRefused.Inc()
	}
}

// ClusterMoves adds n placement keys of kind ("partition", "group") that
// this node gained or lost (direction "gained", "lost") at a view change.
func (m *Metrics) ClusterMoves(kind, direction string, n int) {
	if m != nil && n > 0 {
		m.cluster.moves.WithLabelValues(kind, direction).Add(float64(n))
	}
}

// ClusterIntentRefused counts one write-ahead intent DIS refused
// (disgw_cluster_intents_refused_total).
func (m *Metrics) ClusterIntentRefused() {
	if m != nil {
		m.cluster.intents.Inc()
	}
}
