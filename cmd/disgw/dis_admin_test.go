package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAdminAPIsOnDIS: on the DIS backend (`disgw serve --backend dis` in
// front of `disgw dislocal`), DescribeProducers shows the idempotent
// producer's state the DIS backend keeps (disrest/idem.go), kadm's
// ElectLeaders gets ELECTION_NOT_NEEDED, DescribeTopicPartitions lists the
// topic's partitions and DescribeCluster gives Metadata's cluster id.
func TestAdminAPIsOnDIS(t *testing.T) {
	t.Parallel()
	const ak, sk, project = "admin-access-key", "admin-secret-key", "adminproject"
	d := startDISLocal(t, disLocalOpts{account: disAccount{ak, sk, project}})
	addr := startGateway(t, gatewayOpts{dis: d}).addr

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic = "admin.dis"
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if r, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	recs := []*kgo.Record{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	dp, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}, 1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	p0, p1 := dp[topic].Partitions[0], dp[topic].Partitions[1]
	got, ok := p0.ActiveProducers[pid]
	if p0.Err != nil || len(p0.ActiveProducers) != 1 || !ok || got.ProducerEpoch != epoch || got.LastSequence != 2 ||
		got.CoordinatorEpoch != -1 || got.CurrentTxnStartOffset != -1 {
		t.Errorf("partition 0: %+v, want producer %d epoch %d last sequence 2", p0, pid, epoch)
	}
	if p1.Err != nil || len(p1.ActiveProducers) != 0 {
		t.Errorf("partition 1: %+v", p1)
	}

	el, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}, 1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		if !errors.Is(el[topic][p].Err, kerr.ElectionNotNeeded) {
			t.Errorf("elect %d: %+v", p, el[topic][p])
		}
	}

	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dtp.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: topic}}
	dr, err := dtp.RequestWith(ctx, cl)
	if err != nil || len(dr.Topics) != 1 || dr.Topics[0].ErrorCode != 0 || len(dr.Topics[0].Partitions) != 2 || dr.NextCursor != nil {
		t.Fatalf("DescribeTopicPartitions: %v %+v", err, dr)
	}

	m, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
	if err != nil || dc.ErrorCode != 0 || dc.ClusterID != m.Cluster || dc.ClusterID == "" || dc.ControllerID != 0 {
		t.Errorf("DescribeCluster: %v %+v, Metadata's cluster %q", err, dc, m.Cluster)
	}
}
