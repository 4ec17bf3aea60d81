package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/gateway"
)

// Several gateway nodes (docs/cluster.md §5): Kafka's view answered from
// the backend's disbackend.Cluster.

func metadataAll(t *testing.T, r *rawConn, version int16) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	if version == 0 {
		req.Topics = []kmsg.MetadataRequestTopic{}
	}
	return r.roundTrip(version, req).(*kmsg.MetadataResponse)
}

func topicOf(t *testing.T, mr *kmsg.MetadataResponse, name string) kmsg.MetadataResponseTopic {
	t.Helper()
	for _, tp := range mr.Topics {
		if tp.Topic != nil && *tp.Topic == name {
			return tp
		}
	}
	t.Fatalf("topic %s not in Metadata", name)
	return kmsg.MetadataResponseTopic{}
}

func TestClusterMetadata(t *testing.T) {
	tc := startCluster(t, 3, []clusterTopic{{"orders", 6}})
	tc.change(func(tc *testCluster) { tc.epoch, tc.controller = 5, 2 })
	stream, err := disbackend.StreamNameFor(tc.store, "orders")
	if err != nil {
		t.Fatal(err)
	}

	check := func(mr *kmsg.MetadataResponse, version int16, epoch int32) {
		t.Helper()
		if len(mr.Brokers) != 3 {
			t.Fatalf("v%d: %d brokers, want 3", version, len(mr.Brokers))
		}
		for i, b := range mr.Brokers {
			host, port := tc.hostPort(t, int32(i))
			if b.NodeID != int32(i) || b.Host != host || b.Port != port {
				t.Errorf("v%d: broker %d = %d %s:%d, want %d %s:%d", version, i, b.NodeID, b.Host, b.Port, i, host, port)
			}
		}
		if mr.ControllerID != 2 && version >= 1 {
			t.Errorf("v%d: controller %d, want 2", version, mr.ControllerID)
		}
		for _, name := range []string{"orders", "__consumer_offsets"} {
			st := name
			if name == "orders" {
				st = stream
			}
			for _, p := range topicOf(t, mr, name).Partitions {
				want := tc.owner(disbackend.PartitionKey(st, p.Partition))
				if p.Leader != want || p.ErrorCode != 0 || !slices.Equal(p.Replicas, []int32{want}) || !slices.Equal(p.ISR, []int32{want}) {
					t.Errorf("v%d: %s[%d] leader %d replicas %v isr %v error %d, want leader %d", version, name, p.Partition, p.Leader, p.Replicas, p.ISR, p.ErrorCode, want)
				}
				if version >= 7 && p.LeaderEpoch != epoch {
					t.Errorf("v%d: %s[%d] leader epoch %d, want %d", version, name, p.Partition, p.LeaderEpoch, epoch)
				}
			}
		}
	}
	for id := range int32(3) {
		r := tc.raw(t, id)
		for _, v := range []int16{0, 1, 7, 12, 13} {
			check(metadataAll(t, r, v), v, 5)
		}
	}

	// The leader of a partition moves with a new view and epoch.
	tc.change(func(tc *testCluster) { tc.owners[disbackend.PartitionKey(stream, 0)] = 2; tc.epoch = 6 })
	mr := metadataAll(t, tc.raw(t, 1), 12)
	check(mr, 12, 6)
	if p := topicOf(t, mr, "orders").Partitions[0]; p.Leader != 2 {
		t.Errorf("orders[0] leader %d after the move, want 2", p.Leader)
	}

	t.Run("DescribeCluster", func(t *testing.T) {
		dr := tc.raw(t, 0).roundTrip(0, kmsg.NewPtrDescribeClusterRequest()).(*kmsg.DescribeClusterResponse)
		if dr.ControllerID != 2 || len(dr.Brokers) != 3 {
			t.Fatalf("DescribeCluster: controller %d, %d brokers; want 2, 3", dr.ControllerID, len(dr.Brokers))
		}
		for i, b := range dr.Brokers {
			host, port := tc.hostPort(t, int32(i))
			if b.NodeID != int32(i) || b.Host != host || b.Port != port {
				t.Errorf("broker %d = %d %s:%d", i, b.NodeID, b.Host, b.Port)
			}
		}
	})

	t.Run("DescribeTopicPartitions", func(t *testing.T) {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		req.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "orders"}}
		req.ResponsePartitionLimit = 100
		dr := tc.raw(t, 1).roundTrip(0, req).(*kmsg.DescribeTopicPartitionsResponse)
		for _, p := range dr.Topics[0].Partitions {
			want := tc.owner(disbackend.PartitionKey(stream, p.Partition))
			if p.LeaderID != want || p.LeaderEpoch != 6 || !slices.Equal(p.Replicas, []int32{want}) {
				t.Errorf("orders[%d] leader %d epoch %d replicas %v, want %d epoch 6", p.Partition, p.LeaderID, p.LeaderEpoch, p.Replicas, want)
			}
		}
	})

	t.Run("ListConfigResources", func(t *testing.T) {
		req := kmsg.NewPtrListConfigResourcesRequest()
		req.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeBroker), int8(kmsg.ConfigResourceTypeBrokerLogger)}
		lr := tc.raw(t, 1).roundTrip(1, req).(*kmsg.ListConfigResourcesResponse)
		var got []string
		for _, r := range lr.ConfigResources {
			got = append(got, fmt.Sprintf("%d/%s", r.Type, r.Name))
		}
		want := []string{"8/0", "8/1", "8/2", "4/0", "4/1", "4/2"}
		if !slices.Equal(got, want) {
			t.Errorf("resources %v, want %v", got, want)
		}
	})

	t.Run("DescribeConfigsOtherBroker", func(t *testing.T) {
		req := kmsg.NewPtrDescribeConfigsRequest()
		for _, name := range []string{"1", "2", "", "x"} {
			res := kmsg.NewDescribeConfigsRequestResource()
			res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, name
			req.Resources = append(req.Resources, res)
		}
		dr := tc.raw(t, 1).roundTrip(4, req).(*kmsg.DescribeConfigsResponse)
		want := map[string]string{"1": "", "": "", "2": "Unexpected broker id, expected 1 or empty string, but received 2",
			"x": "Broker id must be an integer, but it is: x"}
		for _, res := range dr.Resources {
			msg := ""
			if res.ErrorMessage != nil {
				msg = *res.ErrorMessage
			}
			if w := want[res.ResourceName]; msg != w || (w == "") != (res.ErrorCode == 0) {
				t.Errorf("broker %q: error %d %q, want %q", res.ResourceName, res.ErrorCode, msg, w)
			}
		}
	})

	t.Run("ApiVersionsNodeID", func(t *testing.T) {
		r := tc.raw(t, 1)
		for _, c := range []struct {
			node int32
			code int16
		}{{1, 0}, {0, kerr.RebootstrapRequired.Code}} {
			req := kmsg.NewPtrApiVersionsRequest()
			req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
			req.ClusterID, req.NodeID = mr.ClusterID, c.node
			if got := r.roundTrip(5, req).(*kmsg.ApiVersionsResponse).ErrorCode; got != c.code {
				t.Errorf("ApiVersions v5 node %d at node 1: error %d, want %d", c.node, got, c.code)
			}
		}
	})

	t.Run("ReplicaAssignment", func(t *testing.T) {
		r := tc.raw(t, 2) // the controller
		for _, c := range []struct {
			replicas []int32
			code     int16
		}{{[]int32{1}, 0}, {[]int32{2}, 0}, {[]int32{7}, kerr.InvalidReplicaAssignment.Code}} {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.ValidateOnly, req.TimeoutMillis = true, 5000
			tp := kmsg.NewCreateTopicsRequestTopic()
			tp.Topic, tp.NumPartitions, tp.ReplicationFactor = "assigned", -1, -1
			tp.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: c.replicas}}
			req.Topics = append(req.Topics, tp)
			if got := r.roundTrip(7, req).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; got != c.code {
				t.Errorf("replicas %v: error %d, want %d", c.replicas, got, c.code)
			}
		}
	})

	// A node without an address on the request's listener is left out,
	// and its partitions answer as Kafka's metadata cache does.
	t.Run("ListenerNotFound", func(t *testing.T) {
		tc.change(func(tc *testCluster) { tc.listeners[1] = map[string]string{"INTERNAL": "10.0.0.1:9093"} })
		r := tc.raw(t, 0)
		for _, c := range []struct {
			version int16
			code    int16
		}{{12, kerr.ListenerNotFound.Code}, {5, kerr.LeaderNotAvailable.Code}} {
			mr := metadataAll(t, r, c.version)
			if len(mr.Brokers) != 2 {
				t.Errorf("v%d: %d brokers, want 2", c.version, len(mr.Brokers))
			}
			for _, p := range topicOf(t, mr, "orders").Partitions {
				if tc.owner(disbackend.PartitionKey(stream, p.Partition)) != 1 {
					continue
				}
				if p.Leader != -1 || p.ErrorCode != c.code {
					t.Errorf("v%d: orders[%d] leader %d error %d, want -1 %d", c.version, p.Partition, p.Leader, p.ErrorCode, c.code)
				}
			}
		}
	})
}

// TestClusterNotReady: before its first Ready view a node answers as
// itself alone; between views it answers the last Ready one; it writes
// nothing while not Ready.
func TestClusterNotReady(t *testing.T) {
	tc := startCluster(t, 3, []clusterTopic{{"t", 3}})
	tc.change(func(tc *testCluster) { tc.ready[0] = false; tc.epoch = 3 })

	// Node 0 has never held a Ready view: itself alone...
	r := tc.raw(t, 0)
	mr := metadataAll(t, r, 12)
	host, port := tc.hostPort(t, 0)
	if len(mr.Brokers) != 1 || mr.Brokers[0].NodeID != 0 || mr.Brokers[0].Host != host || mr.Brokers[0].Port != port || mr.ControllerID != 0 {
		t.Fatalf("before any view: brokers %+v controller %d, want node 0 alone", mr.Brokers, mr.ControllerID)
	}
	for _, p := range topicOf(t, mr, "t").Partitions {
		if p.Leader != 0 || p.LeaderEpoch != 3 {
			t.Errorf("before any view: t[%d] leader %d epoch %d, want 0, 3", p.Partition, p.Leader, p.LeaderEpoch)
		}
	}
	// ... that writes nothing.
	pr := r.roundTrip(11, produceReq(-1, "t", 0, makeBatch(t, batchSpec{n: 1}))).(*kmsg.ProduceResponse)
	if p := pr.Topics[0].Partitions[0]; p.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce before any view: error %d, want NOT_LEADER_OR_FOLLOWER", p.ErrorCode)
	}

	// Ready, then between views: the last Ready view answers.
	tc.change(func(tc *testCluster) { tc.ready[0] = true; tc.epoch = 4 })
	if n := len(metadataAll(t, r, 12).Brokers); n != 3 {
		t.Fatalf("ready: %d brokers, want 3", n)
	}
	tc.change(func(tc *testCluster) { tc.ready[0] = false; tc.epoch = 5; tc.controller = 1 })
	mr = metadataAll(t, r, 12)
	if len(mr.Brokers) != 3 || mr.ControllerID != 0 || topicOf(t, mr, "t").Partitions[0].LeaderEpoch != 4 {
		t.Fatalf("between views: %d brokers, controller %d, epoch %d; want the last Ready view's 3, 0, 4",
			len(mr.Brokers), mr.ControllerID, topicOf(t, mr, "t").Partitions[0].LeaderEpoch)
	}
	pr = r.roundTrip(11, produceReq(-1, "t", 0, makeBatch(t, batchSpec{n: 1}))).(*kmsg.ProduceResponse)
	if p := pr.Topics[0].Partitions[0]; p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != 0 || p.CurrentLeader.LeaderEpoch != 4 {
		t.Fatalf("produce between views: error %d current leader %+v, want NOT_LEADER_OR_FOLLOWER, 0 at 4", p.ErrorCode, p.CurrentLeader)
	}
	if a := tc.nodes[0].takeAppends(); len(a) != 0 {
		t.Errorf("node 0 appended %v while not Ready", a)
	}
}

// TestClusterProduceNotLeader: a Produce to a partition this node does not
// lead is refused before anything is queued, with KIP-951's current
// leader and node endpoints from v10.
func TestClusterProduceNotLeader(t *testing.T) {
	tc := startCluster(t, 3, []clusterTopic{{"orders", 3}})
	tc.change(func(tc *testCluster) { tc.epoch = 7 })
	r := tc.raw(t, 0)

	req := produceReq(-1, "orders", 0, makeBatch(t, batchSpec{n: 2}))
	p1 := kmsg.NewProduceRequestTopicPartition()
	p1.Partition, p1.Records = 1, makeBatch(t, batchSpec{n: 3})
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, p1)
	pr := r.roundTrip(11, req).(*kmsg.ProduceResponse)
	got := pr.Topics[0].Partitions
	if got[0].ErrorCode != 0 || got[0].BaseOffset != 0 {
		t.Fatalf("orders[0] at its leader: error %d base %d", got[0].ErrorCode, got[0].BaseOffset)
	}
	if got[1].ErrorCode != kerr.NotLeaderForPartition.Code || got[1].CurrentLeader.LeaderID != 1 || got[1].CurrentLeader.LeaderEpoch != 7 || got[1].ErrorMessage != nil {
		t.Fatalf("orders[1] at node 0: error %d current leader %+v message %v; want NOT_LEADER_OR_FOLLOWER, leader 1 epoch 7, no message",
			got[1].ErrorCode, got[1].CurrentLeader, got[1].ErrorMessage)
	}
	host, port := tc.hostPort(t, 1)
	if len(pr.Brokers) != 1 || pr.Brokers[0].NodeID != 1 || pr.Brokers[0].Host != host || pr.Brokers[0].Port != port {
		t.Fatalf("node endpoints %+v, want node 1 at %s:%d", pr.Brokers, host, port)
	}
	// Below v10 the code alone (the fields are v10+ tags).
	pr = r.roundTrip(9, produceReq(-1, "orders", 1, makeBatch(t, batchSpec{n: 3}))).(*kmsg.ProduceResponse)
	if p := pr.Topics[0].Partitions[0]; p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != -1 || len(pr.Brokers) != 0 {
		t.Fatalf("v9: error %d current leader %+v brokers %v", p.ErrorCode, p.CurrentLeader, pr.Brokers)
	}
	// Nothing of the refused batches was queued.
	stream, _ := disbackend.StreamNameFor(tc.store, "orders")
	if a := tc.nodes[0].takeAppends(); len(a) != 1 || a[stream+"/0"] != 1 {
		t.Errorf("node 0 appended %v, want one batch to orders[0]", a)
	}
	rg, err := tc.store.Range(stream, 1)
	if err != nil || rg.Next != 0 {
		t.Errorf("orders[1] range %+v %v, want nothing written", rg, err)
	}
	// The leader takes it, stamped with the view's epoch.
	pr = tc.raw(t, 1).roundTrip(11, produceReq(-1, "orders", 1, makeBatch(t, batchSpec{n: 3}))).(*kmsg.ProduceResponse)
	if p := pr.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("orders[1] at its leader: error %d base %d", p.ErrorCode, p.BaseOffset)
	}
	fr := tc.raw(t, 2).roundTrip(12, fetchReq("orders", 1, 0, 0, 0)).(*kmsg.FetchResponse)
	fp := fr.Topics[0].Partitions[0]
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(fp.RecordBatches); err != nil || fp.ErrorCode != 0 {
		t.Fatalf("fetch orders[1] at node 2: error %d, %v", fp.ErrorCode, err)
	}
	if rb.PartitionLeaderEpoch != 7 {
		t.Errorf("stored batch's partition leader epoch %d, want 7", rb.PartitionLeaderEpoch)
	}

	t.Run("DeleteRecords", func(t *testing.T) {
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.TimeoutMillis = 5000
		req.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "orders", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 1, Offset: 1}}}}
		dr := r.roundTrip(2, req).(*kmsg.DeleteRecordsResponse)
		if p := dr.Topics[0].Partitions[0]; p.ErrorCode != kerr.NotLeaderForPartition.Code || p.LowWatermark != -1 {
			t.Errorf("DeleteRecords at a non-leader: error %d low watermark %d", p.ErrorCode, p.LowWatermark)
		}
		dr = tc.raw(t, 1).roundTrip(2, req).(*kmsg.DeleteRecordsResponse)
		if p := dr.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LowWatermark != 1 {
			t.Errorf("DeleteRecords at the leader: error %d low watermark %d", p.ErrorCode, p.LowWatermark)
		}
	})

	t.Run("DescribeProducers", func(t *testing.T) {
		req := kmsg.NewPtrDescribeProducersRequest()
		req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "orders", Partitions: []int32{0, 1}}}
		dr := r.roundTrip(0, req).(*kmsg.DescribeProducersResponse)
		if ps := dr.Topics[0].Partitions; ps[0].ErrorCode != 0 || ps[1].ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Errorf("DescribeProducers at node 0: errors %d, %d; want 0, NOT_LEADER_OR_FOLLOWER", ps[0].ErrorCode, ps[1].ErrorCode)
		}
	})
}

// TestClusterFranzProduce: franz-go, seeded with one node, produces
// through three nodes over one store and writes each partition only
// through its leader, before and after the leaders move; every record is
// read back once.
func TestClusterFranzProduce(t *testing.T) {
	const parts, perPhase = 6, 300
	tc := startCluster(t, 3, []clusterTopic{{"events", parts}})
	stream, _ := disbackend.StreamNameFor(tc.store, "events")
	cl := tc.client(t, 0, kgo.DefaultProduceTopic("events"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	produce := func(phase int) {
		t.Helper()
		var recs []*kgo.Record
		for i := range perPhase {
			recs = append(recs, &kgo.Record{Partition: int32(i % parts), Value: []byte(fmt.Sprintf("%d-%d", phase, i))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("phase %d: %v", phase, err)
		}
	}
	checkLeaders := func(phase int) {
		t.Helper()
		for _, n := range tc.nodes {
			for key, count := range n.takeAppends() {
				var p int32
				fmt.Sscanf(key[len(stream)+1:], "%d", &p)
				if want := tc.owner(disbackend.PartitionKey(stream, p)); want != n.id {
					t.Errorf("phase %d: node %d appended %d batches to %s, led by %d", phase, n.id, count, key, want)
				}
			}
		}
	}
	produce(0)
	checkLeaders(0)

	// Every leader moves to the next node, at a new epoch.
	tc.change(func(tc *testCluster) {
		tc.epoch++
		for p := range int32(parts) {
			tc.owners[disbackend.PartitionKey(stream, p)] = (p + 1) % 3
		}
	})
	produce(1)
	checkLeaders(1)

	// Read back through another node: each record once.
	consumer := tc.client(t, 2, kgo.ConsumeTopics("events"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]int{}
	for len(seen) < 2*perPhase {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", len(seen), 2*perPhase, err)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	for v, n := range seen {
		if n != 1 {
			t.Errorf("record %s read %d times", v, n)
		}
	}
	for p := range int32(parts) {
		rg, err := tc.store.Range(stream, p)
		if err != nil || rg.Next != 2*perPhase/parts {
			t.Errorf("events[%d]: %+v %v, want %d records", p, rg, err, 2*perPhase/parts)
		}
	}
}

// TestClusterEpochFencing: Fetch, ListOffsets and OffsetForLeaderEpoch,
// served by any node, fence with the view's epoch.
func TestClusterEpochFencing(t *testing.T) {
	tc := startCluster(t, 3, []clusterTopic{{"f", 2}})
	tc.change(func(tc *testCluster) { tc.epoch = 4 })
	pr := tc.raw(t, 0).roundTrip(11, produceReq(-1, "f", 0, makeBatch(t, batchSpec{n: 5}))).(*kmsg.ProduceResponse)
	if code := pr.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("produce: %d", code)
	}
	mr := metadataAll(t, tc.raw(t, 1), 12)
	topicID := topicOf(t, mr, "f").TopicID
	r := tc.raw(t, 2) // not the leader of f[0]

	fetch := func(version int16, current int32) (kmsg.FetchResponseTopicPartition, []kmsg.FetchResponseBroker) {
		t.Helper()
		req := fetchReq("f", 0, 0, 0, 0)
		req.Topics[0].TopicID = topicID
		req.Topics[0].Partitions[0].CurrentLeaderEpoch = current
		fr := r.roundTrip(version, req).(*kmsg.FetchResponse)
		return fr.Topics[0].Partitions[0], fr.Brokers
	}
	for _, c := range []struct {
		version int16
		current int32
		code    int16
	}{{12, 3, kerr.FencedLeaderEpoch.Code}, {12, 5, kerr.UnknownLeaderEpoch.Code}, {12, 4, 0}, {12, -1, 0}, {16, 3, kerr.FencedLeaderEpoch.Code}, {16, 4, 0}} {
		p, brokers := fetch(c.version, c.current)
		if p.ErrorCode != c.code {
			t.Errorf("Fetch v%d epoch %d: error %d, want %d", c.version, c.current, p.ErrorCode, c.code)
		}
		if c.code == 0 && p.HighWatermark != 5 {
			t.Errorf("Fetch v%d epoch %d: high watermark %d, want 5", c.version, c.current, p.HighWatermark)
		}
		if c.code == kerr.FencedLeaderEpoch.Code && (p.CurrentLeader.LeaderID != 0 || p.CurrentLeader.LeaderEpoch != 4) {
			t.Errorf("Fetch v%d fenced: current leader %+v, want 0 at 4", c.version, p.CurrentLeader)
		}
		if wantBrokers := c.version >= 16 && c.code == kerr.FencedLeaderEpoch.Code; wantBrokers != (len(brokers) == 1 && brokers[0].NodeID == 0) {
			t.Errorf("Fetch v%d epoch %d: node endpoints %+v", c.version, c.current, brokers)
		}
	}

	listOffsets := func(current int32) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		req.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "f", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, CurrentLeaderEpoch: current, Timestamp: -1}}}}
		return r.roundTrip(7, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	if p := listOffsets(3); p.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Errorf("ListOffsets epoch 3: error %d", p.ErrorCode)
	}
	if p := listOffsets(5); p.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Errorf("ListOffsets epoch 5: error %d", p.ErrorCode)
	}
	if p := listOffsets(4); p.ErrorCode != 0 || p.Offset != 5 || p.LeaderEpoch != 4 {
		t.Errorf("ListOffsets epoch 4: error %d offset %d epoch %d, want 0 5 4", p.ErrorCode, p.Offset, p.LeaderEpoch)
	}

	ofle := func(current, epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = -1
		req.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: "f", Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{{Partition: 0, CurrentLeaderEpoch: current, LeaderEpoch: epoch}}}}
		return r.roundTrip(4, req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	}
	for _, c := range []struct {
		current, epoch int32
		code           int16
		wantEpoch      int32
		wantEnd        int64
	}{
		{-1, 0, 0, 0, 5}, {-1, 2, 0, 2, 5}, {4, 4, 0, 4, 5}, {-1, 5, 0, -1, -1}, {-1, -1, 0, -1, -1},
		{3, 2, kerr.FencedLeaderEpoch.Code, -1, -1}, {5, 2, kerr.UnknownLeaderEpoch.Code, -1, -1},
	} {
		p := ofle(c.current, c.epoch)
		if p.ErrorCode != c.code || c.code == 0 && (p.LeaderEpoch != c.wantEpoch || p.EndOffset != c.wantEnd) {
			t.Errorf("OffsetForLeaderEpoch current %d epoch %d: error %d, %d/%d; want %d, %d/%d", c.current, c.epoch,
				p.ErrorCode, p.LeaderEpoch, p.EndOffset, c.code, c.wantEpoch, c.wantEnd)
		}
	}
}

// TestClusterFindCoordinator: a group's coordinator is its owner in the
// view, at its address on the request's listener.
func TestClusterFindCoordinator(t *testing.T) {
	tc := startCluster(t, 3, nil)
	groups := []string{"g-a", "g-b", "g-c", "g-d", "g-e", "g-f"}
	owners := map[int32]bool{}
	r := tc.raw(t, 1)
	for _, g := range groups {
		want := tc.owner(disbackend.GroupKey(g))
		owners[want] = true
		host, port := tc.hostPort(t, want)
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = g
		fr := r.roundTrip(3, req).(*kmsg.FindCoordinatorResponse)
		if fr.ErrorCode != 0 || fr.NodeID != want || fr.Host != host || fr.Port != port {
			t.Errorf("v3 %s: %d node %d %s:%d, want node %d %s:%d", g, fr.ErrorCode, fr.NodeID, fr.Host, fr.Port, want, host, port)
		}
	}
	if len(owners) < 2 {
		t.Fatalf("the test's groups all land on %v: pick others", owners)
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKeys = groups
	fr := r.roundTrip(4, req).(*kmsg.FindCoordinatorResponse)
	for i, c := range fr.Coordinators {
		if want := tc.owner(disbackend.GroupKey(groups[i])); c.Key != groups[i] || c.ErrorCode != 0 || c.NodeID != want {
			t.Errorf("v4 %s: %d node %d, want %d", c.Key, c.ErrorCode, c.NodeID, want)
		}
	}
	// A coordinator without an address on this listener.
	target := tc.owner(disbackend.GroupKey("g-a"))
	tc.change(func(tc *testCluster) { tc.listeners[target] = map[string]string{"INTERNAL": "10.0.0.1:1"} })
	req = kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = "g-a"
	if target == 1 {
		r = tc.raw(t, 0)
	}
	fr = r.roundTrip(3, req).(*kmsg.FindCoordinatorResponse)
	if fr.ErrorCode != kerr.CoordinatorNotAvailable.Code || fr.NodeID != -1 {
		t.Errorf("coordinator without the listener: error %d node %d", fr.ErrorCode, fr.NodeID)
	}
	// Transactions stay as on one node.
	req = kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorType = "tx", 1
	if fr := r.roundTrip(3, req).(*kmsg.FindCoordinatorResponse); fr.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("type 1: error %d", fr.ErrorCode)
	}
}

func createTopicReq(name string, partitions int32) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 5000
	tp := kmsg.NewCreateTopicsRequestTopic()
	tp.Topic, tp.NumPartitions, tp.ReplicationFactor = name, partitions, -1
	req.Topics = append(req.Topics, tp)
	return req
}

// TestClusterForward: admin writes sent to a node that is not the
// controller are forwarded to it in an envelope; the forwarding node shows
// the change at once.
func TestClusterForward(t *testing.T) {
	tc := startCluster(t, 3, []clusterTopic{{"orders", 2}}, func(c *gateway.Config) {
		c.Authorizer, c.AllowEveryoneIfNoACL = true, true
	})
	tc.change(func(tc *testCluster) { tc.controller = 2 })
	r0 := tc.raw(t, 0)

	// CreateTopics through node 0: applied by node 2.
	cr := r0.roundTrip(7, createTopicReq("made.by.controller", 3)).(*kmsg.CreateTopicsResponse)
	if tp := cr.Topics[0]; tp.ErrorCode != 0 || tp.NumPartitions != 3 {
		t.Fatalf("forwarded CreateTopics: error %d %v partitions %d", tp.ErrorCode, tp.ErrorMessage, tp.NumPartitions)
	}
	if a0, a2 := tc.nodes[0].adminCalls(), tc.nodes[2].adminCalls(); a0 != 0 || a2 != 1 {
		t.Fatalf("admin calls: node 0 %d, node 2 %d; want 0, 1", a0, a2)
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("made.by.controller")}}
	if mt := r0.roundTrip(12, req).(*kmsg.MetadataResponse).Topics[0]; mt.ErrorCode != 0 || len(mt.Partitions) != 3 {
		t.Fatalf("Metadata at node 0 after the forwarded create: error %d, %d partitions", mt.ErrorCode, len(mt.Partitions))
	}
	// A second create of it: the controller's answer, forwarded back.
	cr = r0.roundTrip(7, createTopicReq("made.by.controller", 3)).(*kmsg.CreateTopicsResponse)
	if code := cr.Topics[0].ErrorCode; code != kerr.TopicAlreadyExists.Code {
		t.Fatalf("second create: error %d, want TOPIC_ALREADY_EXISTS", code)
	}

	// IncrementalAlterConfigs through node 1: node 1 describes the new
	// value at once.
	ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "orders"
	res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Op: 0, Value: kmsg.StringPtr("3600000")}}
	ia.Resources = append(ia.Resources, res)
	r1 := tc.raw(t, 1)
	if got := r1.roundTrip(1, ia).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; got.ErrorCode != 0 {
		t.Fatalf("forwarded IncrementalAlterConfigs: error %d %v", got.ErrorCode, got.ErrorMessage)
	}
	if tc.nodes[1].adminCalls() != 0 || tc.nodes[2].adminCalls() != 2 {
		t.Fatalf("admin calls: node 1 %d, node 2 %d; want 0, 2", tc.nodes[1].adminCalls(), tc.nodes[2].adminCalls())
	}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dres := kmsg.NewDescribeConfigsRequestResource()
	dres.ResourceType, dres.ResourceName, dres.ConfigNames = kmsg.ConfigResourceTypeTopic, "orders", []string{"retention.ms"}
	dc.Resources = append(dc.Resources, dres)
	if cfg := r1.roundTrip(4, dc).(*kmsg.DescribeConfigsResponse).Resources[0].Configs; len(cfg) != 1 || cfg[0].Value == nil || *cfg[0].Value != "3600000" {
		t.Fatalf("retention.ms at node 1 after the forwarded change: %+v", cfg)
	}

	// franz-go's admin client, seeded with node 0, finds the controller
	// itself; its configs change is forwarded from whichever node.
	t.Run("Franz", func(t *testing.T) {
		cl := tc.client(t, 0)
		ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "orders"
		res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Op: 0, Value: kmsg.StringPtr("7200000")}}
		ia.Resources = append(ia.Resources, res)
		resp, err := ia.RequestWith(context.Background(), cl)
		if err != nil || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("IncrementalAlterConfigs: %v %+v", err, resp)
		}
		ct := createTopicReq("from.franz", 2)
		cresp, err := ct.RequestWith(context.Background(), cl)
		if err != nil || cresp.Topics[0].ErrorCode != 0 {
			t.Fatalf("CreateTopics: %v %+v", err, cresp)
		}
	})
	// CreateAcls through node 0: node 0 describes it at once.
	ca := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "orders", kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	ca.Creations = append(ca.Creations, c)
	if got := r0.roundTrip(3, ca).(*kmsg.CreateACLsResponse).Results[0]; got.ErrorCode != 0 {
		t.Fatalf("forwarded CreateAcls: error %d %v", got.ErrorCode, got.ErrorMessage)
	}
	da := kmsg.NewPtrDescribeACLsRequest()
	da.ResourceType, da.ResourcePatternType, da.Operation, da.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if got := r0.roundTrip(3, da).(*kmsg.DescribeACLsResponse); got.ErrorCode != 0 || len(got.Resources) != 1 {
		t.Fatalf("DescribeAcls at node 0 after the forwarded create: error %d, %d resources", got.ErrorCode, len(got.Resources))
	}

	// DeleteTopics through node 1: gone from node 1 at once.
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TimeoutMillis = 5000
	dt.TopicNames = []string{"made.by.controller"}
	if got := r1.roundTrip(5, dt).(*kmsg.DeleteTopicsResponse).Topics[0]; got.ErrorCode != 0 {
		t.Fatalf("forwarded DeleteTopics: error %d", got.ErrorCode)
	}
	if mt := r1.roundTrip(12, req).(*kmsg.MetadataResponse).Topics[0]; mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("Metadata at node 1 after the forwarded delete: error %d", mt.ErrorCode)
	}

}

// TestClusterAutoCreate: a Metadata that auto-creates a topic at a node
// that is not the controller has the controller create it (a forwarded
// CreateTopics) and answers the topic; when that cannot be done, the
// topic is LEADER_NOT_AVAILABLE (retriable), or UNKNOWN_TOPIC_OR_PARTITION
// on a node that never forwards; never NOT_CONTROLLER, which librdkafka
// takes for a permanent produce error.
func TestClusterAutoCreate(t *testing.T) {
	meta := func(topic string) *kmsg.MetadataRequest {
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = true
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(topic)}}
		return req
	}
	t.Run("Forwarded", func(t *testing.T) {
		tc := startCluster(t, 3, nil)
		tc.change(func(tc *testCluster) { tc.controller = 2 })
		for _, v := range []int16{4, 12} {
			name := "auto.made.v" + strconv.Itoa(int(v))
			mt := tc.raw(t, 0).roundTrip(v, meta(name)).(*kmsg.MetadataResponse).Topics[0]
			if mt.ErrorCode != 0 || len(mt.Partitions) == 0 {
				t.Fatalf("v%d: auto-created topic at node 0: error %d, %d partitions", v, mt.ErrorCode, len(mt.Partitions))
			}
			for _, p := range mt.Partitions {
				if want := tc.owner("p/" + name + "/" + strconv.Itoa(int(p.Partition))); p.Leader != want {
					t.Errorf("v%d: partition %d led by %d, want %d", v, p.Partition, p.Leader, want)
				}
			}
		}
		if a0, a2 := tc.nodes[0].adminCalls(), tc.nodes[2].adminCalls(); a0 != 0 || a2 != 2 {
			t.Fatalf("admin calls: node 0 %d, node 2 %d; want 0, 2", a0, a2)
		}
		// Asked again at another node: the topic, created once.
		if mt := tc.raw(t, 1).roundTrip(12, meta("auto.made.v12")).(*kmsg.MetadataResponse).Topics[0]; mt.ErrorCode != 0 {
			t.Fatalf("the topic at node 1: error %d", mt.ErrorCode)
		}
		if a1, a2 := tc.nodes[1].adminCalls(), tc.nodes[2].adminCalls(); a1 != 0 || a2 != 2 {
			t.Fatalf("admin calls: node 1 %d, node 2 %d; want 0, 2", a1, a2)
		}
	})
	t.Run("ControllerUnreachable", func(t *testing.T) {
		tc := startCluster(t, 2, nil)
		tc.change(func(tc *testCluster) {
			tc.controller = 1
			tc.listeners[1] = map[string]string{"PLAINTEXT": "127.0.0.1:1"}
		})
		if mt := tc.raw(t, 0).roundTrip(12, meta("not.yet")).(*kmsg.MetadataResponse).Topics[0]; mt.ErrorCode != kerr.LeaderNotAvailable.Code {
			t.Fatalf("unreachable controller: error %d, want LEADER_NOT_AVAILABLE", mt.ErrorCode)
		}
		if tc.nodes[0].adminCalls() != 0 || tc.nodes[1].adminCalls() != 0 {
			t.Fatal("a node created the topic")
		}
	})
	t.Run("NoKey", func(t *testing.T) {
		tc := startCluster(t, 2, nil, func(c *gateway.Config) { c.ClusterKey = nil })
		tc.change(func(tc *testCluster) { tc.controller = 1 })
		if mt := tc.raw(t, 0).roundTrip(12, meta("never")).(*kmsg.MetadataResponse).Topics[0]; mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("no cluster key: error %d, want UNKNOWN_TOPIC_OR_PARTITION", mt.ErrorCode)
		}
		if tc.nodes[0].adminCalls() != 0 || tc.nodes[1].adminCalls() != 0 {
			t.Fatal("a node created the topic")
		}
	})
}

// TestClusterChangeNotice: the controller tells the other nodes of a topic
// or ACL write before it answers, so that a topic created (or deleted)
// through one node is listed (or gone) at every other at once, as a
// client that creates a topic and lists it through another node expects
// (kafka-topics --create, then --describe; kafka-python's
// partitions_for_topic); the nodes never refresh their topics here.
func TestClusterChangeNotice(t *testing.T) {
	tc := startCluster(t, 3, nil, func(c *gateway.Config) {
		c.Authorizer, c.AllowEveryoneIfNoACL = true, true
	})
	tc.change(func(tc *testCluster) { tc.controller = 2 })
	listed := func(id int32, topic string) bool {
		for _, mt := range metadataAll(t, tc.raw(t, id), 12).Topics {
			if mt.Topic != nil && *mt.Topic == topic {
				return mt.ErrorCode == 0
			}
		}
		return false
	}
	// Created at the controller itself, then through node 0 (forwarded).
	if cr := tc.raw(t, 2).roundTrip(7, createTopicReq("at.controller", 2)).(*kmsg.CreateTopicsResponse); cr.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics at node 2: error %d", cr.Topics[0].ErrorCode)
	}
	if cr := tc.raw(t, 0).roundTrip(7, createTopicReq("through.node0", 2)).(*kmsg.CreateTopicsResponse); cr.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics at node 0: error %d", cr.Topics[0].ErrorCode)
	}
	for _, id := range []int32{0, 1, 2} {
		for _, topic := range []string{"at.controller", "through.node0"} {
			if !listed(id, topic) {
				t.Errorf("node %d does not list %s right after it was created", id, topic)
			}
		}
	}
	// Deleted at the controller: gone everywhere.
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TimeoutMillis = 5000
	dt.TopicNames = []string{"at.controller"}
	if got := tc.raw(t, 2).roundTrip(5, dt).(*kmsg.DeleteTopicsResponse).Topics[0]; got.ErrorCode != 0 {
		t.Fatalf("DeleteTopics at node 2: error %d", got.ErrorCode)
	}
	for _, id := range []int32{0, 1} {
		if listed(id, "at.controller") {
			t.Errorf("node %d still lists at.controller after it was deleted", id)
		}
	}
	// An ACL created at the controller: described at node 1 at once.
	ca := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "through.node0", kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	ca.Creations = append(ca.Creations, c)
	if got := tc.raw(t, 2).roundTrip(3, ca).(*kmsg.CreateACLsResponse).Results[0]; got.ErrorCode != 0 {
		t.Fatalf("CreateAcls at node 2: error %d", got.ErrorCode)
	}
	da := kmsg.NewPtrDescribeACLsRequest()
	da.ResourceType, da.ResourcePatternType, da.Operation, da.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if got := tc.raw(t, 1).roundTrip(3, da).(*kmsg.DescribeACLsResponse); got.ErrorCode != 0 || len(got.Resources) != 1 {
		t.Fatalf("DescribeAcls at node 1 right after the controller created one: error %d, %d resources", got.ErrorCode, len(got.Resources))
	}
	// A notice from a node that is not the controller is not served.
	env := kmsg.NewPtrEnvelopeRequest()
	m := kmsg.NewPtrMetadataRequest()
	env.RequestData = encodeRequest(3, 12, 1, m)
	env.RequestPrincipal = gateway.EncodePrincipal("User:ANONYMOUS")
	gateway.SignEnvelope([]byte("test cluster key"), 0, time.Now(), env)
	if er := tc.raw(t, 1).roundTrip(0, env).(*kmsg.EnvelopeResponse); er.ErrorCode != kerr.NotController.Code {
		t.Fatalf("a notice from node 0 at node 1: envelope error %d, want NOT_CONTROLLER", er.ErrorCode)
	}
}

// TestClusterForwardRefused: what is answered when a write cannot be
// forwarded, and the envelopes a controller refuses.
func TestClusterForwardRefused(t *testing.T) {
	t.Run("NoKey", func(t *testing.T) {
		tc := startCluster(t, 2, nil, func(c *gateway.Config) { c.ClusterKey = nil })
		tc.change(func(tc *testCluster) { tc.controller = 1 })
		cr := tc.raw(t, 0).roundTrip(7, createTopicReq("x", 1)).(*kmsg.CreateTopicsResponse)
		if tp := cr.Topics[0]; tp.ErrorCode != kerr.NotController.Code || tp.ErrorMessage == nil {
			t.Fatalf("no cluster key: error %d %v, want NOT_CONTROLLER with its message", tp.ErrorCode, tp.ErrorMessage)
		}
		if tc.nodes[1].adminCalls() != 0 {
			t.Fatal("the controller created the topic")
		}
	})

	t.Run("ControllerUnreachable", func(t *testing.T) {
		tc := startCluster(t, 2, nil)
		tc.change(func(tc *testCluster) {
			tc.controller = 1
			tc.listeners[1] = map[string]string{"PLAINTEXT": "127.0.0.1:1"}
		})
		ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
		ia.Resources = append(ia.Resources, res)
		got := tc.raw(t, 0).roundTrip(1, ia).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
		if got.ErrorCode != kerr.NotController.Code {
			t.Fatalf("unreachable controller: error %d", got.ErrorCode)
		}
	})

	t.Run("Envelopes", func(t *testing.T) {
		tc := startCluster(t, 3, []clusterTopic{{"orders", 1}})
		tc.change(func(tc *testCluster) { tc.controller = 2 })
		key := []byte("test cluster key")
		inner := func(body kmsg.Request, version int16) []byte {
			return encodeRequest(body.Key(), version, 77, body)
		}
		envelope := func(data []byte, sender int32, key []byte, at time.Time) *kmsg.EnvelopeRequest {
			env := kmsg.NewPtrEnvelopeRequest()
			env.RequestData = data
			env.RequestPrincipal = gateway.EncodePrincipal("User:ANONYMOUS")
			env.ClientHostAddress = []byte{127, 0, 0, 1}
			gateway.SignEnvelope(key, sender, at, env)
			return env
		}
		now := time.Now()
		create := inner(createTopicReq("via.envelope", 1), 7)
		for _, c := range []struct {
			name string
			to   int32
			env  *kmsg.EnvelopeRequest
			code int16
		}{
			{"wrong key", 2, envelope(create, 0, []byte("other key"), now), kerr.ClusterAuthorizationFailed.Code},
			{"unsigned", 2, func() *kmsg.EnvelopeRequest { e := kmsg.NewPtrEnvelopeRequest(); e.RequestData = create; return e }(), kerr.ClusterAuthorizationFailed.Code},
			{"stale", 2, envelope(create, 0, key, now.Add(-10*time.Minute)), kerr.ClusterAuthorizationFailed.Code},
			{"not a member", 2, envelope(create, 9, key, now), kerr.ClusterAuthorizationFailed.Code},
			{"not the controller", 1, envelope(create, 0, key, now), kerr.NotController.Code},
			{"not a controller write", 2, envelope(inner(kmsg.NewPtrMetadataRequest(), 12), 0, key, now), kerr.InvalidRequest.Code},
			{"accepted", 2, envelope(create, 0, key, now), 0},
		} {
			er := tc.raw(t, c.to).roundTrip(0, c.env).(*kmsg.EnvelopeResponse)
			if er.ErrorCode != c.code {
				t.Errorf("%s: envelope error %d, want %d", c.name, er.ErrorCode, c.code)
				continue
			}
			if c.code != 0 {
				continue
			}
			resp := kmsg.NewPtrCreateTopicsResponse()
			resp.Version = 7
			if len(er.ResponseData) < 5 || int32(er.ResponseData[3]) != 77 {
				t.Fatalf("%s: response data %x", c.name, er.ResponseData)
			}
			if err := resp.ReadFrom(er.ResponseData[5:]); err != nil || resp.Topics[0].ErrorCode != 0 {
				t.Fatalf("%s: inner response %v %+v", c.name, err, resp)
			}
		}
		if tc.nodes[2].adminCalls() != 1 {
			t.Errorf("controller admin calls %d, want 1 (the accepted envelope only)", tc.nodes[2].adminCalls())
		}
	})

	// On one node key 58 is unknown, as before: the connection closes.
	t.Run("OneNode", func(t *testing.T) {
		g := startGateway(t)
		r := g.raw(t)
		r.send(0, kmsg.NewPtrEnvelopeRequest())
		r.expectClosed()
	})
}
