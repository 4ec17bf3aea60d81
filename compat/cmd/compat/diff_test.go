package main

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func metadataResp(leader int32, host string, err int16, replicas ...int32) *kmsg.MetadataResponse {
	r := kmsg.NewPtrMetadataResponse()
	r.Brokers = []kmsg.MetadataResponseBroker{{NodeID: leader, Host: host, Port: 9092}}
	r.Topics = []kmsg.MetadataResponseTopic{{Topic: ptr("t"), ErrorCode: err, Partitions: []kmsg.MetadataResponseTopicPartition{
		{Partition: 0, Leader: leader, Replicas: replicas, ISR: replicas}}}}
	return r
}

// failures returns the differences compareTagged does not keep.
func failures(a, b kmsg.Response) []string {
	rep := newDiffReport()
	rep.compare("s", &exchange{label: "x", key: a.Key(), resp: a}, &exchange{label: "x", key: b.Key(), resp: b})
	return rep.fails["s"]
}

func TestDiffKeepsNodeIDsHostsReplicas(t *testing.T) {
	if f := failures(metadataResp(1, "a", 0, 1), metadataResp(0, "b", 0, 0)); len(f) != 0 {
		t.Fatalf("node ids, hosts and replicas should be kept: %v", f)
	}
}

func TestDiffReportsRealDifferences(t *testing.T) {
	// No leader is not a node id difference.
	noLeader := metadataResp(0, "a", 0, 0)
	noLeader.Topics[0].Partitions[0].Leader = -1
	f := failures(metadataResp(1, "a", 0, 1), noLeader)
	if len(f) != 1 || !strings.Contains(f[0], "Topics[\"t\"].Partitions[0].Leader: Kafka 1, disgw -1") {
		t.Fatalf("leader -1: %v", f)
	}
	f = failures(metadataResp(1, "a", 0, 1), metadataResp(1, "a", 3, 1))
	if len(f) != 1 || !strings.Contains(f[0], "ErrorCode: Kafka 0, disgw 3 UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("error code: %v", f)
	}
	// A topic missing from one answer.
	b := metadataResp(1, "a", 0, 1)
	b.Topics = append(b.Topics, kmsg.MetadataResponseTopic{Topic: ptr("u")})
	f = failures(metadataResp(1, "a", 0, 1), b)
	if len(f) != 1 || !strings.Contains(f[0], `Topics["u"]: Kafka missing, disgw present`) {
		t.Fatalf("extra topic: %v", f)
	}
	// null and empty differ.
	x, y := kmsg.NewPtrDescribeGroupsResponse(), kmsg.NewPtrDescribeGroupsResponse()
	x.Groups = []kmsg.DescribeGroupsResponseGroup{{Group: "g", Members: []kmsg.DescribeGroupsResponseGroupMember{}}}
	y.Groups = []kmsg.DescribeGroupsResponseGroup{{Group: "g"}}
	if f := failures(x, y); len(f) != 1 {
		t.Fatalf("null vs empty: %v", f)
	}
}

func TestDiffRecordBatches(t *testing.T) {
	a, b := kmsg.NewPtrFetchResponse(), kmsg.NewPtrFetchResponse()
	a.Topics = []kmsg.FetchResponseTopic{{Topic: "t", Partitions: []kmsg.FetchResponseTopicPartition{{Partition: 0, RecordBatches: recordBatch(3, -1, -1, -1)}}}}
	b.Topics = []kmsg.FetchResponseTopic{{Topic: "t", Partitions: []kmsg.FetchResponseTopicPartition{{Partition: 0, RecordBatches: recordBatch(3, -1, -1, -1)}}}}
	if f := failures(a, b); len(f) != 0 {
		t.Fatalf("same batches: %v", f)
	}
	if v := decodeBatches(recordBatch(3, -1, -1, -1)); len(v) != 1 || !v[0].CRCValid || len(v[0].Records) != 3 {
		t.Fatalf("decoded %+v", v)
	}
	b.Topics[0].Partitions[0].RecordBatches = recordBatch(2, -1, -1, -1)
	if f := failures(a, b); len(f) == 0 {
		t.Fatal("a batch of 2 records against one of 3: no difference")
	}
}

func TestDiffDownconvert(t *testing.T) {
	r := kmsg.NewPtrMetadataResponse()
	r.SetVersion(12)
	r.ClusterID = ptr("c")
	r.Topics = []kmsg.MetadataResponseTopic{{Topic: ptr("t"), TopicID: [16]byte{1}}}
	d, err := downconvert(r, 0)
	if err != nil {
		t.Fatal(err)
	}
	m := d.(*kmsg.MetadataResponse)
	if m.ClusterID != nil || m.Topics[0].TopicID != [16]byte{} || *m.Topics[0].Topic != "t" {
		t.Fatalf("v0: %+v", m)
	}
}

// TestDiffConfigResourcesKeyedByType: ListConfigResources' resources are
// matched by type and name (the broker and its logger share a name), and
// only disgw's topics of replication factor 3 are kept.
func TestDiffConfigResourcesKeyedByType(t *testing.T) {
	res := func(rs ...kmsg.ListConfigResourcesResponseConfigResource) *kmsg.ListConfigResourcesResponse {
		r := kmsg.NewPtrListConfigResourcesResponse()
		r.ConfigResources = rs
		return r
	}
	broker := kmsg.ListConfigResourcesResponseConfigResource{Name: "NODE", Type: 4}
	logger := kmsg.ListConfigResourcesResponseConfigResource{Name: "NODE", Type: 8}
	topic := kmsg.ListConfigResourcesResponseConfigResource{Name: "t", Type: 2}
	if f := failures(res(logger, broker, topic), res(topic, broker, logger)); len(f) != 0 {
		t.Fatalf("the same resources in another order: %v", f)
	}
	f := failures(res(logger, broker, topic), res(broker, broker, topic))
	if len(f) != 1 || !strings.Contains(f[0], `ConfigResources[8/"NODE"]: Kafka present, disgw missing`) {
		t.Fatalf("a broker in place of the broker logger: %v", f)
	}
	badrf := kmsg.ListConfigResourcesResponseConfigResource{Name: "diff-topics-lo-badrf", Type: 2}
	if f := failures(res(topic), res(topic, badrf)); len(f) != 0 {
		t.Fatalf("disgw's topic of replication factor 3 should be kept: %v", f)
	}
	other := kmsg.ListConfigResourcesResponseConfigResource{Name: "diff-topics-lo-t9", Type: 2}
	if f := failures(res(topic), res(topic, other)); len(f) != 1 {
		t.Fatalf("an extra topic should be reported: %v", f)
	}
}
