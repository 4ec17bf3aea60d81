package admin

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	lagDesc = prometheus.NewDesc("kafka_consumergroup_lag",
		"Committed offset's distance to the high watermark, in records (kafka_exporter), from the latest snapshot.",
		[]string{"consumergroup", "topic", "partition"}, nil)
	lagSumDesc = prometheus.NewDesc("kafka_consumergroup_lag_sum",
		"Sum of kafka_consumergroup_lag over a group's partitions of a topic (kafka_exporter).",
		[]string{"consumergroup", "topic"}, nil)
	currentOffsetDesc = prometheus.NewDesc("kafka_topic_partition_current_offset",
		"High watermark (log end offset) of a partition (kafka_exporter), from the latest snapshot.",
		[]string{"topic", "partition"}, nil)
	oldestOffsetDesc = prometheus.NewDesc("kafka_topic_partition_oldest_offset",
		"Log start offset of a partition (kafka_exporter), from the latest snapshot.",
		[]string{"topic", "partition"}, nil)
	groupsDesc = prometheus.NewDesc("disgw_groups",
		"Consumer groups by state (Empty, PreparingRebalance, CompletingRebalance, Stable, Dead), from the latest snapshot.",
		[]string{"state"}, nil)
	snapshotAgeDesc = prometheus.NewDesc("disgw_admin_snapshot_timestamp_seconds",
		"Unix time of the snapshot the lag and offset metrics come from.", nil, nil)
)

// lagCollector exposes the latest Snapshot: it never calls the backend.
// Topics and groups beyond the metrics' caps are summed under "__other".
type lagCollector struct{ s *Server }

func (c lagCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{lagDesc, lagSumDesc, currentOffsetDesc, oldestOffsetDesc, groupsDesc, snapshotAgeDesc,
		partitionsLedDesc, groupsOwnedDesc} {
		ch <- d
	}
}

func (c lagCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.s.Snapshot()
	if snap == nil {
		return
	}
	m := c.s.opts.Metrics
	type tp struct{ topic, part string }
	type gtp struct{ group, topic, part string }
	type gt struct{ group, topic string }
	cur, old := map[tp]float64{}, map[tp]float64{}
	for _, t := range snap.Topics {
		name := m.Topic(t.Name)
		for _, p := range t.Partitions {
			k := tp{name, strconv.Itoa(int(p.ID))}
			cur[k] += float64(p.End)
			old[k] += float64(p.LogStart)
		}
	}
	lag, sum := map[gtp]float64{}, map[gt]float64{}
	states := map[string]float64{}
	for _, g := range snap.Groups {
		states[g.State]++
		group := m.Group(g.ID)
		for _, o := range g.Offsets {
			if o.End < 0 {
				continue
			}
			topic := m.Topic(o.Topic)
			lag[gtp{group, topic, strconv.Itoa(int(o.Partition))}] += float64(o.Lag)
			sum[gt{group, topic}] += float64(o.Lag)
		}
	}
	for k, v := range cur {
		ch <- prometheus.MustNewConstMetric(currentOffsetDesc, prometheus.GaugeValue, v, k.topic, k.part)
	}
	for k, v := range old {
		ch <- prometheus.MustNewConstMetric(oldestOffsetDesc, prometheus.GaugeValue, v, k.topic, k.part)
	}
	for k, v := range lag {
		ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, v, k.group, k.topic, k.part)
	}
	for k, v := range sum {
		ch <- prometheus.MustNewConstMetric(lagSumDesc, prometheus.GaugeValue, v, k.group, k.topic)
	}
	for _, st := range []string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"} {
		ch <- prometheus.MustNewConstMetric(groupsDesc, prometheus.GaugeValue, states[st], st)
	}
	ch <- prometheus.MustNewConstMetric(snapshotAgeDesc, prometheus.GaugeValue, float64(snap.Taken.UnixNano())/1e9)
	c.s.collectCluster(ch, snap)
}
