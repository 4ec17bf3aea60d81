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
	c.once.Do(func() { m.Registry.MustRegister(c.members, c.epoch, c.controller, c.leaseRefused) })
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
