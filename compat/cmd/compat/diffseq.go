package main

import (
	"hash/crc32"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The differential harness's request sequences, each as a client would
// drive it. A sequence runs once per server; t.do records an answer, and
// t.send is for waits that are not compared (Kafka creates topics
// asynchronously: wait for the leader as a client would). Every request is
// built for the version t.pick gives its API.

func ptr[T any](v T) *T { return &v }

// waitMetadata is the Metadata request of the sequences' waits (not
// compared): v12, which both servers serve, with no auto-creation (a v0-3
// Metadata auto-creates the topics it names, and a wait for a deletion
// would recreate the topic).
func waitMetadata(t *diffTarget, topics ...string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	req.Topics = []kmsg.MetadataRequestTopic{}
	for _, tp := range topics {
		req.Topics = append(req.Topics, kmsg.MetadataRequestTopic{Topic: ptr(tp)})
	}
	resp, err := t.w.do(req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

func nodeID(t *diffTarget) int32 {
	m, err := waitMetadata(t)
	if err != nil {
		return -1
	}
	if len(m.Brokers) == 0 {
		return -1
	}
	return m.Brokers[0].NodeID
}

func metadataReq(t *diffTarget, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	if topics == nil && t.v(3) >= 1 {
		req.Topics = nil // all topics
	} else {
		req.Topics = []kmsg.MetadataRequestTopic{}
	}
	for _, tp := range topics {
		req.Topics = append(req.Topics, kmsg.MetadataRequestTopic{Topic: ptr(tp)})
	}
	return req
}

// waitTopic waits until Metadata shows topic with n partitions, each with a
// leader (n 0: until the topic is unknown).
func waitTopic(t *diffTarget, topic string, n int) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		m, err := waitMetadata(t, topic)
		if err == nil {
			if len(m.Topics) == 1 {
				tp := m.Topics[0]
				if n == 0 && tp.ErrorCode == 3 {
					return
				}
				ok := n > 0 && tp.ErrorCode == 0 && len(tp.Partitions) == n
				for _, p := range tp.Partitions {
					ok = ok && p.ErrorCode == 0 && p.Leader >= 0
				}
				if ok {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func createTopic(t *diffTarget, label, name string, partitions int32, configs map[string]string) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	ct := kmsg.CreateTopicsRequestTopic{Topic: name, NumPartitions: partitions, ReplicationFactor: 1}
	for k, v := range configs {
		ct.Configs = append(ct.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: k, Value: ptr(v)})
	}
	req.Topics = []kmsg.CreateTopicsRequestTopic{ct}
	if label != "" {
		t.do(label, req)
	} else {
		_, _, _ = t.send(req)
	}
	waitTopic(t, name, int(partitions))
}

func seqTopics(t *diffTarget, p string) {
	t1, t2, t3 := p+"t1", p+"t2", p+"t3"
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	req.Topics = []kmsg.CreateTopicsRequestTopic{
		{Topic: t1, NumPartitions: 3, ReplicationFactor: 1},
		{Topic: t2, NumPartitions: 1, ReplicationFactor: 1, Configs: []kmsg.CreateTopicsRequestTopicConfig{
			{Name: "retention.ms", Value: ptr("3600000")}, {Name: "cleanup.policy", Value: ptr("compact")}}},
		{Topic: "bad name!", NumPartitions: 1, ReplicationFactor: 1},
		{Topic: p + "badrf", NumPartitions: 1, ReplicationFactor: 3},
		{Topic: p + "badcfg", NumPartitions: 1, ReplicationFactor: 1, Configs: []kmsg.CreateTopicsRequestTopicConfig{
			{Name: "no.such.config", Value: ptr("1")}}},
	}
	t.do("CreateTopics t1, t2 (configs), an invalid name, replication 3, an unknown config", req)
	waitTopic(t, t1, 3)
	waitTopic(t, t2, 1)
	req = kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	req.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: t1, NumPartitions: 3, ReplicationFactor: 1}}
	t.do("CreateTopics t1 again", req)
	if t.v(19) >= 1 {
		req = kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 30000
		req.ValidateOnly = true
		req.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: t3, NumPartitions: -1, ReplicationFactor: -1}}
		if t.v(19) < 4 {
			req.Topics[0].NumPartitions, req.Topics[0].ReplicationFactor = 2, 1
		}
		t.do("CreateTopics t3 validate only", req)
	}
	mr := metadataReq(t, t1, t2)
	if t.v(3) >= 4 {
		mr = metadataReq(t, t1, t2, p+"unknown")
		mr.AllowAutoTopicCreation = false
	}
	t.do("Metadata t1, t2 (and an unknown topic, v4+)", mr)

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.TimeoutMillis = 30000
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: t1, Count: 4}, {Topic: t2, Count: 1}, {Topic: p + "unknown", Count: 2}}
	t.do("CreatePartitions t1 to 4, t2 to 1 (no change), an unknown topic", cp)
	waitTopic(t, t1, 4)
	cp = kmsg.NewPtrCreatePartitionsRequest()
	cp.TimeoutMillis = 30000
	cp.ValidateOnly = true
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: t1, Count: 2}}
	t.do("CreatePartitions t1 to 2, validate only", cp)
	// A topic of their own: t1 was just scaled, and DIS allows one scaling
	// of a stream an hour (the dis backend answers INVALID_CONFIG to a
	// second one, a deliberate difference).
	createTopic(t, "", p+"as-grow", 4, nil)
	seqAssignments(t, p, p+"as-grow")

	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TimeoutMillis = 30000
	if t.v(20) >= 6 {
		dt.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: ptr(t2)}, {Topic: ptr(p + "unknown")}}
	} else {
		dt.TopicNames = []string{t2, p + "unknown"}
	}
	t.do("DeleteTopics t2 and an unknown topic", dt)
	waitTopic(t, t2, 0)
	t.do("Metadata t1, t2 after delete", metadataReq(t, t1, t2))
	t.do("Metadata all topics", metadataReq(t))
}

// seqAssignments: manual replica assignments, bad and good, in
// CreatePartitions (t1, a topic of 4 partitions never scaled) and CreateTopics, as Kafka's
// controller checks them (a broker that does not exist, a broker twice, an
// empty replica list, an assignment count other than the new partitions',
// a partition assigned twice or missing). The one broker of each server
// is t.node, so [[t.node]] is the one valid assignment; a replica count
// other than the topic's cannot be reached with one broker (two replicas
// are either an unknown broker or one broker twice, checked first).
func seqAssignments(t *diffTarget, p, t1 string) {
	createPartitions := func(label string, validateOnly bool, count int32, assignment ...[]int32) {
		cp := kmsg.NewPtrCreatePartitionsRequest()
		cp.TimeoutMillis = 30000
		cp.ValidateOnly = validateOnly
		ct := kmsg.CreatePartitionsRequestTopic{Topic: t1, Count: count}
		if assignment != nil {
			ct.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{}
			for _, replicas := range assignment {
				ct.Assignment = append(ct.Assignment, kmsg.CreatePartitionsRequestTopicAssignment{Replicas: replicas})
			}
		}
		cp.Topics = []kmsg.CreatePartitionsRequestTopic{ct}
		t.do(label, cp)
	}
	node := t.node
	createPartitions("CreatePartitions t1 to 5 on a broker that does not exist", false, 5, []int32{9999})
	createPartitions("CreatePartitions t1 to 5 on the broker twice", false, 5, []int32{node, node})
	createPartitions("CreatePartitions t1 to 5 on the broker and one that does not exist", false, 5, []int32{node, 9999})
	createPartitions("CreatePartitions t1 to 5 on no broker", false, 5, []int32{})
	createPartitions("CreatePartitions t1 to 6 with one assignment", false, 6, []int32{node})
	createPartitions("CreatePartitions t1 to 5 with an empty assignment list", false, 5, [][]int32{}...)
	createPartitions("CreatePartitions t1 to 5 on a broker that does not exist, validate only", true, 5, []int32{9999})
	createPartitions("CreatePartitions t1 to 6 with one assignment, validate only", true, 6, []int32{node})
	createPartitions("CreatePartitions t1 to 4 (no change) with an assignment", false, 4, []int32{node})
	createPartitions("CreatePartitions t1 to 5 on the broker, validate only", true, 5, []int32{node})
	createPartitions("CreatePartitions t1 to 6 on the broker", false, 6, []int32{node}, []int32{node})
	waitTopic(t, t1, 6)

	assigned := func(name string, replicas ...[]int32) kmsg.CreateTopicsRequestTopic {
		ct := kmsg.CreateTopicsRequestTopic{Topic: p + name, NumPartitions: -1, ReplicationFactor: -1}
		for i, r := range replicas {
			ct.ReplicaAssignment = append(ct.ReplicaAssignment, kmsg.CreateTopicsRequestTopicReplicaAssignment{Partition: int32(i), Replicas: r})
		}
		return ct
	}
	twice := assigned("as-twice", []int32{node}, []int32{node})
	twice.ReplicaAssignment[1].Partition = 0
	gap := assigned("as-gap", []int32{node})
	gap.ReplicaAssignment[0].Partition = 1
	rf := assigned("as-rf", []int32{node})
	rf.ReplicationFactor = 1
	np := assigned("as-np", []int32{node})
	np.NumPartitions = 1
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	req.Topics = []kmsg.CreateTopicsRequestTopic{
		assigned("as-unknown", []int32{9999}), assigned("as-dup", []int32{node, node}), assigned("as-empty", []int32{}),
		assigned("as-second-unknown", []int32{node}, []int32{node, 9999}), twice, gap, rf, np,
	}
	t.do("CreateTopics with bad assignments: an unknown broker, a broker twice, no broker, a partition twice, a gap, replication or partitions not -1", req)
	if t.v(19) >= 1 {
		req = kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 30000
		req.ValidateOnly = true
		req.Topics = []kmsg.CreateTopicsRequestTopic{assigned("as-unknown", []int32{9999}), assigned("as-valid", []int32{node}, []int32{node})}
		t.do("CreateTopics validate only, an unknown broker and a valid assignment", req)
	}
	req = kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	req.Topics = []kmsg.CreateTopicsRequestTopic{assigned("as-valid", []int32{node}, []int32{node})}
	t.do("CreateTopics as-valid with 2 partitions on the broker", req)
	waitTopic(t, p+"as-valid", 2)
	t.do("Metadata t1 and as-valid after the assignments", metadataReq(t, t1, p+"as-valid"))
}

func describeConfigs(t *diffTarget, label string, names []string, res ...kmsg.DescribeConfigsRequestResource) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	req.IncludeDocumentation = true
	for _, r := range res {
		r.ConfigNames = names
		req.Resources = append(req.Resources, r)
	}
	resp := t.do(label, req)
	if resp == nil {
		return
	}
	// The broker resource is named by the node id (node ids are kept).
	for i := range resp.(*kmsg.DescribeConfigsResponse).Resources {
		r := &resp.(*kmsg.DescribeConfigsResponse).Resources[i]
		if r.ResourceType == kmsg.ConfigResourceTypeBroker {
			r.ResourceName = "NODE"
		}
	}
}

// awaitConfigs waits, up to 10 s, until topic's configs read back as want
// (not recorded): a KRaft broker applies a config change its controller
// committed a moment after the change is answered, and a DescribeConfigs
// at once may still read the old value (seen under load in CI). A server
// that never reads back want is then compared as it is.
func awaitConfigs(t *diffTarget, topic string, want map[string]string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		req := kmsg.NewPtrDescribeConfigsRequest()
		r := topicRes(topic)
		for k := range want {
			r.ConfigNames = append(r.ConfigNames, k)
		}
		req.Resources = []kmsg.DescribeConfigsRequestResource{r}
		resp, _, err := t.send(req)
		if err == nil && configsAre(resp.(*kmsg.DescribeConfigsResponse), want) || time.Now().After(deadline) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func configsAre(resp *kmsg.DescribeConfigsResponse, want map[string]string) bool {
	n := 0
	for _, r := range resp.Resources {
		for _, c := range r.Configs {
			if v, ok := want[c.Name]; ok {
				if c.Value == nil || *c.Value != v {
					return false
				}
				n++
			}
		}
	}
	return n == len(want)
}

func topicRes(name string) kmsg.DescribeConfigsRequestResource {
	return kmsg.DescribeConfigsRequestResource{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: name}
}

func seqConfigs(t *diffTarget, p string) {
	c1 := p + "c1"
	createTopic(t, "", c1, 1, map[string]string{"retention.ms": "86400000"})
	broker := kmsg.DescribeConfigsRequestResource{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: itoa32(t.node)}
	describeConfigs(t, "DescribeConfigs c1, every key", nil, topicRes(c1))
	describeConfigs(t, "DescribeConfigs the broker, every key", nil, broker)
	describeConfigs(t, "DescribeConfigs an unknown topic", nil, topicRes(p+"unknown"))

	// 48 hours: within DIS's 24 to 168 (docs/dis-backend.md's stated limit
	// of the DIS backend), so that both backends take it.
	ac := kmsg.NewPtrAlterConfigsRequest()
	ac.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: c1, Configs: []kmsg.AlterConfigsRequestResourceConfig{
		{Name: "retention.ms", Value: ptr("172800000")}, {Name: "cleanup.policy", Value: ptr("delete")}}}}
	t.do("AlterConfigs c1 retention.ms, cleanup.policy", ac)
	ac = kmsg.NewPtrAlterConfigsRequest()
	ac.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: c1, Configs: []kmsg.AlterConfigsRequestResourceConfig{
		{Name: "no.such.config", Value: ptr("1")}}},
		{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: p + "unknown", Configs: []kmsg.AlterConfigsRequestResourceConfig{
			{Name: "retention.ms", Value: ptr("7200000")}}}}
	t.do("AlterConfigs an unknown key, an unknown topic", ac)
	awaitConfigs(t, c1, map[string]string{"retention.ms": "172800000", "cleanup.policy": "delete"})
	describeConfigs(t, "DescribeConfigs c1 after AlterConfigs", []string{"retention.ms", "cleanup.policy", "segment.bytes"}, topicRes(c1))

	ic := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ic.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: c1, Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{
		{Name: "max.message.bytes", Op: kmsg.IncrementalAlterConfigOpSet, Value: ptr("1000000")},
		{Name: "retention.ms", Op: kmsg.IncrementalAlterConfigOpDelete}}}}
	t.do("IncrementalAlterConfigs c1 set max.message.bytes, delete retention.ms", ic)
	ic = kmsg.NewPtrIncrementalAlterConfigsRequest()
	ic.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: c1, Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{
		{Name: "cleanup.policy", Op: kmsg.IncrementalAlterConfigOpAppend, Value: ptr("compact")},
		{Name: "retention.ms", Op: kmsg.IncrementalAlterConfigOpSet, Value: ptr("abc")}}}}
	t.do("IncrementalAlterConfigs c1 a bad value", ic)
	ic = kmsg.NewPtrIncrementalAlterConfigsRequest()
	ic.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: c1, Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{
		{Name: "cleanup.policy", Op: kmsg.IncrementalAlterConfigOpAppend, Value: ptr("compact")}}}}
	t.do("IncrementalAlterConfigs c1 append cleanup.policy compact", ic)
	awaitConfigs(t, c1, map[string]string{"max.message.bytes": "1000000", "cleanup.policy": "delete,compact"})
	describeConfigs(t, "DescribeConfigs c1 after IncrementalAlterConfigs", []string{"retention.ms", "max.message.bytes", "cleanup.policy"}, topicRes(c1))
}

func itoa32(v int32) string {
	b := []byte{}
	if v < 0 {
		return "-1"
	}
	if v == 0 {
		return "0"
	}
	for v > 0 {
		b = append([]byte{byte('0' + v%10)}, b...)
		v /= 10
	}
	return string(b)
}

// diffTS is the records' timestamp in ms: fixed for the run, so that both
// servers store the same batches, and recent, so that neither's retention
// (7 days) deletes them during the run.
var diffTS = time.Now().Truncate(time.Second).UnixMilli()

// recordBatch builds a v2 batch of n records with kmsg's RecordBatch and
// Record (the CRC is computed over the encoded batch).
func recordBatch(n int, pid int64, epoch int16, seq int32) []byte {
	return recordBatchAttrs(n, pid, epoch, seq, 0)
}

// recordBatchAttrs is recordBatch with the batch attributes attrs.
func recordBatchAttrs(n int, pid int64, epoch int16, seq int32, attrs int16) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		r := kmsg.Record{OffsetDelta: int32(i), Key: []byte("key-" + itoa32(int32(i))), Value: []byte("value-" + itoa32(int32(i))),
			Headers: []kmsg.Header{{Key: "idx", Value: []byte(itoa32(int32(i)))}}}
		body := r.AppendTo(nil)
		r.Length = int32(len(body) - 1)
		recs = r.AppendTo(recs)
	}
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs, LastOffsetDelta: int32(n - 1), FirstTimestamp: diffTS, MaxTimestamp: diffTS,
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq, NumRecords: int32(n), Records: recs}
	raw := b.AppendTo(nil)
	b.Length = int32(len(raw) - 12)
	raw = b.AppendTo(nil)
	b.CRC = int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b.AppendTo(nil)
}

// produce records a Produce, retried while the new partition has no
// leader yet.
func produce(t *diffTarget, label string, req *kmsg.ProduceRequest) {
	if t.v(0) >= 13 { // Produce v13 names topics by id (KIP-516)
		for i := range req.Topics {
			req.Topics[i].TopicID = topicID(t, req.Topics[i].Topic)
		}
	}
	t.do(label, req)
}

func produceReq(topic string, partition int32, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 10000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: partition, Records: batch}}}}
	return req
}

func topicID(t *diffTarget, topic string) [16]byte {
	m, err := waitMetadata(t, topic)
	if err != nil || len(m.Topics) != 1 {
		return [16]byte{}
	}
	return m.Topics[0].TopicID
}

func fetchReq(t *diffTarget, topic string, id [16]byte, parts map[int32]int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 200
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	ft := kmsg.FetchRequestTopic{Topic: topic, TopicID: id}
	for _, p := range []int32{0, 1, 2, 3} {
		if off, ok := parts[p]; ok {
			ft.Partitions = append(ft.Partitions, kmsg.FetchRequestTopicPartition{Partition: p, FetchOffset: off, CurrentLeaderEpoch: -1,
				LastFetchedEpoch: -1, LogStartOffset: -1, PartitionMaxBytes: 1 << 20})
		}
	}
	req.Topics = []kmsg.FetchRequestTopic{ft}
	return req
}

func listOffsetsReq(topic string, partition int32, ts int64) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: topic, Partitions: []kmsg.ListOffsetsRequestTopicPartition{
		{Partition: partition, CurrentLeaderEpoch: -1, Timestamp: ts, MaxNumOffsets: 1}}}}
	return req
}

func seqRecords(t *diffTarget, p string) {
	r1 := p + "r1"
	createTopic(t, "", r1, 2, nil)
	produce(t, "Produce 3 records to r1[0]", produceReq(r1, 0, recordBatch(3, -1, -1, -1)))
	produce(t, "Produce 2 records to r1[0]", produceReq(r1, 0, recordBatch(2, -1, -1, -1)))
	produce(t, "Produce to r1[7] (no such partition)", produceReq(r1, 7, recordBatch(1, -1, -1, -1)))

	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionTimeoutMillis = 60000
	ip.ProducerID, ip.ProducerEpoch = -1, -1
	resp := t.do("InitProducerId (idempotent)", ip)
	pid, epoch := int64(-1), int16(-1)
	if resp != nil {
		pid, epoch = resp.(*kmsg.InitProducerIDResponse).ProducerID, resp.(*kmsg.InitProducerIDResponse).ProducerEpoch
	}
	produce(t, "Produce idempotent seq 0 to r1[1]", produceReq(r1, 1, recordBatch(2, pid, epoch, 0)))
	produce(t, "Produce idempotent seq 0 again (duplicate)", produceReq(r1, 1, recordBatch(2, pid, epoch, 0)))
	produce(t, "Produce idempotent seq 5 (out of order)", produceReq(r1, 1, recordBatch(1, pid, epoch, 5)))

	id := topicID(t, r1)
	t.do("Fetch r1[0] at 0, r1[1] at 0", fetchReq(t, r1, id, map[int32]int64{0: 0, 1: 0}))
	t.do("Fetch r1[0] at 3", fetchReq(t, r1, id, map[int32]int64{0: 3}))
	t.do("Fetch r1[0] at 100 (out of range)", fetchReq(t, r1, id, map[int32]int64{0: 100}))
	t.do("Fetch r1[3] (no such partition)", fetchReq(t, r1, id, map[int32]int64{3: 0}))

	t.do("ListOffsets r1[0] earliest", listOffsetsReq(r1, 0, -2))
	t.do("ListOffsets r1[0] latest", listOffsetsReq(r1, 0, -1))
	t.do("ListOffsets r1[0] by timestamp", listOffsetsReq(r1, 0, diffTS))
	t.do("ListOffsets r1[0] after the last timestamp", listOffsetsReq(r1, 0, diffTS+1))
	if t.v(2) >= 7 {
		t.do("ListOffsets r1[0] max timestamp", listOffsetsReq(r1, 0, -3))
	}
	t.do("ListOffsets r1[5] (no such partition)", listOffsetsReq(r1, 5, -1))

	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.ReplicaID = -1
	oe.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: r1, Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{
		{Partition: 0, CurrentLeaderEpoch: -1, LeaderEpoch: 0}, {Partition: 1, CurrentLeaderEpoch: -1, LeaderEpoch: 5}, {Partition: 9, CurrentLeaderEpoch: -1, LeaderEpoch: 0}}}}
	t.do("OffsetForLeaderEpoch r1[0] epoch 0, r1[1] epoch 5, r1[9]", oe)

	// KIP-467: a compacted topic refuses a batch with records without a
	// key, naming each in record_errors (LogValidator.validateKey).
	rc := p + "rc"
	createTopic(t, "", rc, 1, map[string]string{"cleanup.policy": "compact"})
	produce(t, "Produce 20 records, every fifth without a key, to compacted rc[0]", produceReq(rc, 0, keylessBatch(20, 5)))
	produce(t, "Produce 3 records with keys to compacted rc[0]", produceReq(rc, 0, recordBatch(3, -1, -1, -1)))
}

// keylessBatch is recordBatch's batch of n records (no headers) where
// every record i with i%every == 0 has no key.
func keylessBatch(n, every int) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte("value-" + itoa32(int32(i)))}
		if i%every != 0 {
			r.Key = []byte("key-" + itoa32(int32(i)))
		}
		body := r.AppendTo(nil)
		r.Length = int32(len(body) - 1)
		recs = r.AppendTo(recs)
	}
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(n - 1), FirstTimestamp: diffTS, MaxTimestamp: diffTS,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n), Records: recs}
	raw := b.AppendTo(nil)
	b.Length = int32(len(raw) - 12)
	raw = b.AppendTo(nil)
	b.CRC = int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b.AppendTo(nil)
}

func consumerMeta(topic string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 0
	m.Topics = []string{topic}
	return m.AppendTo(nil)
}

func consumerAssignment(topic string, parts ...int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Version = 0
	a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: topic, Partitions: parts}}
	return a.AppendTo(nil)
}

// waitCoordinator returns a FindCoordinator request for group g once the
// target answers it without an error (Kafka creates __consumer_offsets at
// the first one), or after 30 s.
func waitCoordinator(t *diffTarget, g string) *kmsg.FindCoordinatorRequest {
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = g
	fc.CoordinatorKeys = []string{g}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, _, err := t.send(fc)
		if err != nil {
			break
		}
		r := resp.(*kmsg.FindCoordinatorResponse)
		if r.ErrorCode == 0 && (len(r.Coordinators) == 0 || r.Coordinators[0].ErrorCode == 0) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fc
}

func seqGroups(t *diffTarget, p string) {
	gt, g, g2 := p+"gt", p+"g", p+"g2"
	createTopic(t, "", gt, 2, nil)
	// The group commits gt[0]=5 as a consumer that read 5 records would
	// (no consumer commits past the high watermark).
	produce(t, "Produce 5 records to gt[0]", produceReq(gt, 0, recordBatch(5, -1, -1, -1)))

	t.do("FindCoordinator g", waitCoordinator(t, g))

	join := func(label, member string) *kmsg.JoinGroupResponse {
		jr := kmsg.NewPtrJoinGroupRequest()
		jr.Group, jr.MemberID, jr.ProtocolType = g, member, "consumer"
		jr.SessionTimeoutMillis, jr.RebalanceTimeoutMillis = 10000, 10000
		jr.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: consumerMeta(gt)}}
		resp := t.do(label, jr)
		if resp == nil {
			return nil
		}
		return resp.(*kmsg.JoinGroupResponse)
	}
	jresp := join("JoinGroup g", "")
	if jresp != nil && jresp.ErrorCode == 79 { // MEMBER_ID_REQUIRED (v4+)
		jresp = join("JoinGroup g with the member id", jresp.MemberID)
	}
	member, gen := "", int32(-1)
	if jresp != nil {
		member, gen = jresp.MemberID, jresp.Generation
	}
	sg := kmsg.NewPtrSyncGroupRequest()
	sg.Group, sg.Generation, sg.MemberID = g, gen, member
	sg.ProtocolType, sg.Protocol = ptr("consumer"), ptr("range")
	sg.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: member, MemberAssignment: consumerAssignment(gt, 0, 1)}}
	t.do("SyncGroup g (leader)", sg)
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.Generation, hb.MemberID = g, gen, member
	t.do("Heartbeat g", hb)
	hb2 := kmsg.NewPtrHeartbeatRequest()
	hb2.Group, hb2.Generation, hb2.MemberID = g, gen, "no-such-member"
	t.do("Heartbeat g, unknown member", hb2)

	gtID := topicID(t, gt) // OffsetCommit and OffsetFetch v10 name topics by id
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation, oc.MemberID = g, gen, member
	oc.RetentionTimeMillis = -1
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: gt, TopicID: gtID, Partitions: []kmsg.OffsetCommitRequestTopicPartition{
		{Partition: 0, Offset: 5, LeaderEpoch: 0, Metadata: ptr("m")}, {Partition: 1, Offset: 0, LeaderEpoch: -1}, {Partition: 9, Offset: 1, LeaderEpoch: -1}}}}
	t.do("OffsetCommit g gt[0]=5 epoch 0, gt[1]=0, gt[9]", oc)

	of := func(label, group string, topics bool) {
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Group = group
		var ts []kmsg.OffsetFetchRequestTopic
		var gts []kmsg.OffsetFetchRequestGroupTopic
		if topics || t.v(9) < 2 {
			ts = []kmsg.OffsetFetchRequestTopic{{Topic: gt, Partitions: []int32{0, 1, 2}}}
			gts = []kmsg.OffsetFetchRequestGroupTopic{{Topic: gt, TopicID: gtID, Partitions: []int32{0, 1, 2}}}
		}
		r.Topics = ts
		r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, Topics: gts, MemberEpoch: -1}}
		t.do(label, r)
	}
	of("OffsetFetch g gt[0,1,2]", g, true)
	of("OffsetFetch g, every topic", g, false)

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{g, p + "nogroup"}
	dg.IncludeAuthorizedOperations = true
	t.do("DescribeGroups g (Stable) and an unknown group", dg)
	lg := kmsg.NewPtrListGroupsRequest()
	t.do("ListGroups", lg)
	if t.v(16) >= 4 {
		lg = kmsg.NewPtrListGroupsRequest()
		lg.StatesFilter = []string{"Stable"}
		t.do("ListGroups Stable", lg)
	}

	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Group, lv.MemberID = g, member
	lv.Members = []kmsg.LeaveGroupRequestMember{{MemberID: member}}
	t.do("LeaveGroup g", lv)
	t.do("DescribeGroups g after leave", dg)
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = g
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: gt, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	t.do("OffsetDelete g gt[0]", od)
	of("OffsetFetch g gt after OffsetDelete", g, true)

	oc2 := kmsg.NewPtrOffsetCommitRequest()
	oc2.Group, oc2.Generation, oc2.MemberID = g2, -1, ""
	oc2.RetentionTimeMillis = -1
	oc2.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: gt, TopicID: gtID, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3, LeaderEpoch: -1}}}}
	t.do("OffsetCommit g2 (simple, no generation)", oc2)
	dl := kmsg.NewPtrDeleteGroupsRequest()
	dl.Groups = []string{g2, p + "nogroup"}
	t.do("DeleteGroups g2 and an unknown group", dl)
	t.do("ListGroups after DeleteGroups", kmsg.NewPtrListGroupsRequest())
	seqGroupDetails(t, p, gt)
	// Kafka lists __consumer_offsets, internal, once a group used it.
	t.do("Metadata all topics after the groups", metadataReq(t))
}

// seqGroupDetails: a JoinGroup with a rebalance timeout of 0, and a static
// member (KIP-345, JoinGroup v5+) that rejoins with changed subscription
// bytes but the same protocol.
func seqGroupDetails(t *diffTarget, p, gt string) {
	joinSync := func(what, group string, instance *string, rebalance int32, meta []byte, member string, compareSync bool) (string, int32) {
		jr := kmsg.NewPtrJoinGroupRequest()
		jr.Group, jr.MemberID, jr.ProtocolType, jr.InstanceID = group, member, "consumer", instance
		jr.SessionTimeoutMillis, jr.RebalanceTimeoutMillis = 10000, rebalance
		jr.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta}}
		resp := t.do("JoinGroup "+what, jr)
		if resp != nil && resp.(*kmsg.JoinGroupResponse).ErrorCode == 79 {
			jr.MemberID = resp.(*kmsg.JoinGroupResponse).MemberID
			resp = t.do("JoinGroup "+what+" with the member id", jr)
		}
		if resp == nil {
			return "", -1
		}
		j := resp.(*kmsg.JoinGroupResponse)
		sg := kmsg.NewPtrSyncGroupRequest()
		sg.Group, sg.Generation, sg.MemberID, sg.InstanceID = group, j.Generation, j.MemberID, instance
		sg.ProtocolType, sg.Protocol = ptr("consumer"), ptr("range")
		if j.LeaderID == j.MemberID && !j.SkipAssignment {
			sg.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: j.MemberID, MemberAssignment: consumerAssignment(gt, 0, 1)}}
		}
		if compareSync {
			t.do("SyncGroup "+what, sg)
		} else {
			_, _, _ = t.send(sg)
		}
		return j.MemberID, j.Generation
	}
	leave := func(what, group, member string, instance *string, compare bool) {
		lv := kmsg.NewPtrLeaveGroupRequest()
		lv.Group, lv.MemberID = group, member
		lv.Members = []kmsg.LeaveGroupRequestMember{{MemberID: member, InstanceID: instance}}
		if compare {
			t.do("LeaveGroup "+what, lv)
		} else {
			_, _, _ = t.send(lv)
		}
	}
	if t.v(11) >= 1 {
		g0 := p + "g-rebalance0"
		// Only the JoinGroup is compared: Kafka 4.4 gives the member
		// rebalance timeout 0 ms to send its SyncGroup, so its SyncGroup
		// answer is a race (two Kafka brokers answered it with
		// UNKNOWN_MEMBER_ID and with the assignment in one run).
		m, _ := joinSync("rebalance timeout 0", g0, nil, 0, consumerMeta(gt), "", false)
		leave("rebalance timeout 0", g0, m, nil, false)
	}
	if t.v(11) >= 5 {
		gs := p + "g-static"
		inst := ptr("static-1")
		m, _ := joinSync("static member", gs, inst, 10000, consumerMeta(gt), "", true)
		other := kmsg.NewConsumerMemberMetadata()
		other.Topics = []string{gt}
		other.UserData = []byte("changed")
		joinSync("static member rejoins, changed subscription bytes", gs, inst, 10000, other.AppendTo(nil), "", true)
		lg := kmsg.NewPtrListGroupsRequest()
		t.do("ListGroups with the static group", lg)
		leave("static member", gs, m, inst, true)
		t.do("ListGroups after the static member left", lg)
	}
}

// seqAdmin drives the APIs issue 13 adds (each is recorded as not served
// while disgw lacks it).
func seqAdmin(t *diffTarget, p string) {
	a1 := p + "a1"
	createTopic(t, "", a1, 2, nil)
	produce(t, "Produce 3 records to a1[0]", produceReq(a1, 0, recordBatch(3, -1, -1, -1)))

	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.TimeoutMillis = 10000
	dr.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: a1, Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 2}, {Partition: 1, Offset: 5}}},
		{Topic: p + "unknown", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	t.do("DeleteRecords a1[0] to 2, a1[1] to 5 (past the end), an unknown topic", dr)
	t.do("ListOffsets a1[0] earliest after DeleteRecords", listOffsetsReq(a1, 0, -2))
	id := topicID(t, a1)
	t.do("Fetch a1[0] at 0 after DeleteRecords", fetchReq(t, a1, id, map[int32]int64{0: 0}))

	dl := kmsg.NewPtrDescribeLogDirsRequest()
	dl.Topics = []kmsg.DescribeLogDirsRequestTopic{{Topic: a1, Partitions: []int32{0, 1}}}
	if resp := t.do("DescribeLogDirs a1", dl); resp != nil {
		for i := range resp.(*kmsg.DescribeLogDirsResponse).Dirs {
			resp.(*kmsg.DescribeLogDirsResponse).Dirs[i].Dir = "LOGDIR" // the path is the server's own
		}
	}
	ar := kmsg.NewPtrAlterReplicaLogDirsRequest()
	ar.Dirs = []kmsg.AlterReplicaLogDirsRequestDir{{Dir: "/nonexistent-dir", Topics: []kmsg.AlterReplicaLogDirsRequestDirTopic{{Topic: a1, Partitions: []int32{0}}}}}
	t.do("AlterReplicaLogDirs a1[0] to a dir that does not exist", ar)

	el := kmsg.NewPtrElectLeadersRequest()
	el.TimeoutMillis = 10000
	el.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: a1, Partitions: []int32{0, 1}}}
	t.do("ElectLeaders preferred a1[0,1]", el)
	el = kmsg.NewPtrElectLeadersRequest()
	el.TimeoutMillis = 10000
	el.Topics = nil
	t.do("ElectLeaders preferred, every partition", el)

	lr := kmsg.NewPtrListPartitionReassignmentsRequest()
	lr.TimeoutMillis = 10000
	t.do("ListPartitionReassignments, every partition", lr)
	lr = kmsg.NewPtrListPartitionReassignmentsRequest()
	lr.TimeoutMillis = 10000
	lr.Topics = []kmsg.ListPartitionReassignmentsRequestTopic{{Topic: a1, Partitions: []int32{0}}}
	t.do("ListPartitionReassignments a1[0]", lr)
	apr := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	apr.TimeoutMillis = 10000
	apr.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{{Topic: a1, Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{
		{Partition: 0, Replicas: nil}, {Partition: 1, Replicas: []int32{t.node, t.node}}}}}
	t.do("AlterPartitionReassignments cancel a1[0], a1[1] to a duplicate replica", apr)

	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dtp.ResponsePartitionLimit = 1
	dtp.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: a1}, {Topic: p + "unknown"}}
	resp := t.do("DescribeTopicPartitions a1, an unknown topic, 1 partition a response", dtp)
	if resp != nil {
		if c := resp.(*kmsg.DescribeTopicPartitionsResponse).NextCursor; c != nil {
			dtp2 := kmsg.NewPtrDescribeTopicPartitionsRequest()
			dtp2.ResponsePartitionLimit = 1
			dtp2.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: a1}}
			dtp2.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: c.Topic, Partition: c.Partition}
			t.do("DescribeTopicPartitions from the cursor", dtp2)
		}
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	dc.EndpointType = 1
	t.do("DescribeCluster with authorized operations", dc)
	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: a1, Partitions: []int32{0, 7}}}
	t.do("DescribeProducers a1[0], a1[7]", dp)
	seqListConfigResources(t)
	if t.v(3) >= 8 {
		mr := metadataReq(t, a1)
		mr.IncludeTopicAuthorizedOperations = true
		mr.IncludeClusterAuthorizedOperations = t.v(3) <= 10
		t.do("Metadata a1 with authorized operations", mr)
	}
}

// seqListConfigResources: ListConfigResources (KIP-1000's
// ListClientMetricsResources at v0, KIP-1142's at v1) of every type, of
// each type, of a type twice, and of types the version does not know. The
// broker and broker logger resources are named by the node id: node ids
// are kept (diffkept.go), so both are renamed NODE before comparing.
func seqListConfigResources(t *diffTarget) {
	list := func(label string, types ...kmsg.ConfigResourceType) {
		req := kmsg.NewPtrListConfigResourcesRequest()
		req.ResourceTypes = []int8{}
		for _, rt := range types {
			req.ResourceTypes = append(req.ResourceTypes, int8(rt))
		}
		resp := t.do(label, req)
		if resp == nil {
			return
		}
		for i := range resp.(*kmsg.ListConfigResourcesResponse).ConfigResources {
			r := &resp.(*kmsg.ListConfigResourcesResponse).ConfigResources[i]
			if r.Type == int8(kmsg.ConfigResourceTypeBroker) || r.Type == int8(kmsg.ConfigResourceTypeBrokerLogger) {
				r.Name = "NODE"
			}
		}
	}
	list("ListConfigResources, every type")
	if t.v(74) < 1 {
		return // v0 has no resource types
	}
	list("ListConfigResources TOPIC", kmsg.ConfigResourceTypeTopic)
	list("ListConfigResources BROKER, BROKER_LOGGER", kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger)
	list("ListConfigResources GROUP, CLIENT_METRICS", kmsg.ConfigResourceTypeGroupConfig, kmsg.ConfigResourceTypeClientMetrics)
	list("ListConfigResources BROKER twice", kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBroker)
	list("ListConfigResources TOPIC and an unknown type 3", kmsg.ConfigResourceTypeTopic, 3)
	list("ListConfigResources UNKNOWN (0)", kmsg.ConfigResourceTypeUnknown)
}
