package admin

// Cluster mode (docs/cluster.md §8): /readyz answers 503 while the node
// holds no usable view, /metrics adds the partitions this node leads and
// the groups it coordinates, and the overview shows the view's nodes.
// On one node (the gateway's Cluster is nil) nothing here shows.

import (
	"errors"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/disgw/disgw/disbackend"
)

var (
	partitionsLedDesc = prometheus.NewDesc("disgw_cluster_partitions_led",
		"Partitions of topics this node leads in its current cluster view (0 without a Ready view), over the topics of the latest snapshot.", nil, nil)
	groupsOwnedDesc = prometheus.NewDesc("disgw_cluster_groups_owned",
		"Consumer groups (DIS apps) this node coordinates in its current cluster view (0 without a Ready view), over the apps of the latest snapshot.", nil, nil)
)

// clusterOf returns the gateway's cluster view, nil on one node.
func (s *Server) clusterOf() disbackend.Cluster { return s.opts.Gateway.Cluster() }

// clusterNotReady returns why a cluster-mode node should not take new
// clients ("" when it may, and on one node): ClusterStatus.NotReady, or,
// for a cluster that does not report its lease, whether it has held a
// view (a view not Ready of epoch 1 or later is between views: ready).
func clusterNotReady(c disbackend.Cluster) string {
	if c == nil {
		return ""
	}
	if r, ok := c.(disbackend.ClusterStatusReporter); ok {
		return r.Status().NotReady()
	}
	if v := c.View(); !v.Ready && v.Epoch == 0 {
		return "no cluster view yet: joining the nodes' group"
	}
	return ""
}

// clusterReady is readiness's cluster check: nil, or the reason as an
// error ("cluster: …").
func (s *Server) clusterReady() error {
	if why := clusterNotReady(s.clusterOf()); why != "" {
		return errors.New("cluster: " + why)
	}
	return nil
}

// owned counts, over the topics' partitions and the apps of snap, those
// whose owner in v is this node (none when v is not Ready), and the
// totals.
func owned(v *disbackend.View, snap *Snapshot) (led, partitions, groupsOwned, groups int) {
	for _, t := range snap.Topics {
		for _, p := range t.Partitions {
			partitions++
			if v.Ready && v.Leader(t.Stream, p.ID) == v.Self {
				led++
			}
		}
	}
	for _, a := range snap.Apps {
		groups++
		if v.Ready && v.Coordinator(a.Group) == v.Self {
			groupsOwned++
		}
	}
	return led, partitions, groupsOwned, groups
}

// collectCluster sends disgw_cluster_partitions_led and
// disgw_cluster_groups_owned: the current view over snap's topics and
// apps. Nothing on one node or before the first snapshot.
func (s *Server) collectCluster(ch chan<- prometheus.Metric, snap *Snapshot) {
	c := s.clusterOf()
	if c == nil || snap == nil {
		return
	}
	led, _, groups, _ := owned(c.View(), snap)
	ch <- prometheus.MustNewConstMetric(partitionsLedDesc, prometheus.GaugeValue, float64(led))
	ch <- prometheus.MustNewConstMetric(groupsOwnedDesc, prometheus.GaugeValue, float64(groups))
}

// ClusterPage is the overview's cluster section: this node's view, lease
// and share of the keys.
type ClusterPage struct {
	Self, Controller int32
	// Generation and Epoch are the view's; Member is the generation of
	// this node's last SyncGroup (-1 before), ahead of Generation between
	// views.
	Generation, Member int64
	Epoch              int32
	Ready              bool // the view is Ready
	Nodes              []ClusterNode
	// PartitionsLed of Partitions, GroupsOwned of Groups: over the
	// snapshot's topics and apps (-1 without a snapshot).
	PartitionsLed, Partitions, GroupsOwned, Groups int
	Lease                                          string // "held (2.1s left)", "between views", …
	NotReady                                       string // why /readyz answers 503, "" when it does not
}

// ClusterNode is one node of the view.
type ClusterNode struct {
	ID               int32
	Listeners        []KV // name, HOST:PORT, by name
	Controller, Self bool
}

// clusterPage returns the overview's cluster section, nil on one node.
func (s *Server) clusterPage(snap *Snapshot) *ClusterPage {
	c := s.clusterOf()
	if c == nil {
		return nil
	}
	v := c.View()
	p := &ClusterPage{Self: v.Self, Controller: v.Controller, Generation: v.Generation, Member: v.Generation, Epoch: v.Epoch,
		Ready: v.Ready, PartitionsLed: -1, Partitions: -1, GroupsOwned: -1, Groups: -1, Lease: "unknown",
		NotReady: clusterNotReady(c)}
	if r, ok := c.(disbackend.ClusterStatusReporter); ok {
		st := r.Status()
		p.Member, p.Lease = st.Generation, leaseText(st)
	}
	for _, n := range v.Nodes {
		cn := ClusterNode{ID: n.ID, Controller: n.ID == v.Controller, Self: n.ID == v.Self}
		for name, addr := range n.Listeners {
			cn.Listeners = append(cn.Listeners, KV{name, addr})
		}
		sort.Slice(cn.Listeners, func(i, j int) bool { return cn.Listeners[i].Key < cn.Listeners[j].Key })
		p.Nodes = append(p.Nodes, cn)
	}
	if snap != nil {
		p.PartitionsLed, p.Partitions, p.GroupsOwned, p.Groups = owned(v, snap)
	}
	return p
}

// leaseText is the lease as the console shows it.
func leaseText(st disbackend.ClusterStatus) string {
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	switch st.Lease {
	case disbackend.LeaseHeld:
		return "held (" + st.LeaseLeft.Round(100*time.Millisecond).String() + " left)"
	case disbackend.LeaseBetweenViews:
		if st.LeaseLeft > 0 {
			return "between views (held for generation " + itoa(st.Generation) + ", " + ms(st.LeaseLeft) + " left)"
		}
		return "between views (" + st.RefusedCode + " " + ms(st.LeaseEnded) + " ago: the nodes rebalance)"
	case disbackend.LeaseRefused:
		return "refused (" + st.RefusedCode + " " + ms(st.LeaseEnded) + " ago)"
	case disbackend.LeaseLapsed:
		return "lapsed (" + ms(st.LeaseEnded) + " ago)"
	}
	return st.Lease.String()
}
