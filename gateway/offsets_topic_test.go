package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestOffsetsTopicInMetadata: __consumer_offsets is listed as Apache Kafka
// 4.4 lists it (asked of the reference broker: is_internal true in
// Metadata when listing all topics and when naming it; Produce refused
// with INVALID_TOPIC_EXCEPTION; DescribeConfigs gives cleanup.policy
// compact and segment.bytes 104857600), with Kafka's default 50
// partitions led by this node; CreateTopics of it is TOPIC_ALREADY_EXISTS
// and DeleteTopics TOPIC_DELETION_DISABLED.
func TestOffsetsTopicInMetadata(t *testing.T) {
	g := startGateway(t)
	r := g.raw(t)
	if resp := r.roundTrip(7, createTopicsReq("plain", 1, nil)).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
		t.Fatal(resp.Topics[0].ErrorCode)
	}
	for _, v := range []int16{1, 9, 12} {
		all := kmsg.NewPtrMetadataRequest()
		named := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr("__consumer_offsets")
		named.Topics = append(named.Topics, mt)
		for what, req := range map[string]*kmsg.MetadataRequest{"all": all, "named": named} {
			resp := r.roundTrip(v, req).(*kmsg.MetadataResponse)
			found := false
			for _, tp := range resp.Topics {
				switch *tp.Topic {
				case "__consumer_offsets":
					found = true
					if !tp.IsInternal || tp.ErrorCode != 0 || len(tp.Partitions) != 50 || tp.Partitions[49].Leader != resp.Brokers[0].NodeID {
						t.Errorf("v%d %s: __consumer_offsets internal %v error %d partitions %d", v, what, tp.IsInternal, tp.ErrorCode, len(tp.Partitions))
					}
				case "plain":
					if tp.IsInternal {
						t.Errorf("v%d %s: plain is internal", v, what)
					}
				}
			}
			if !found {
				t.Errorf("v%d %s: __consumer_offsets not listed", v, what)
			}
		}
	}
	if resp := r.roundTrip(7, createTopicsReq("__consumer_offsets", 1, nil)).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != kerr.TopicAlreadyExists.Code {
		t.Errorf("create: error %d", resp.Topics[0].ErrorCode)
	}
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TimeoutMillis = 5000
	dtt := kmsg.NewDeleteTopicsRequestTopic()
	dtt.Topic = kmsg.StringPtr("__consumer_offsets")
	dt.Topics = append(dt.Topics, dtt)
	dt.TopicNames = []string{"__consumer_offsets"}
	if resp := r.roundTrip(6, dt).(*kmsg.DeleteTopicsResponse); resp.Topics[0].ErrorCode != kerr.TopicDeletionDisabled.Code {
		t.Errorf("delete: error %d", resp.Topics[0].ErrorCode)
	}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "__consumer_offsets"
	res.ConfigNames = []string{"cleanup.policy", "segment.bytes"}
	dc.Resources = append(dc.Resources, res)
	got := map[string]string{}
	for _, c := range r.roundTrip(4, dc).(*kmsg.DescribeConfigsResponse).Resources[0].Configs {
		got[c.Name] = *c.Value + " " + c.Source.String()
	}
	if got["cleanup.policy"] != "compact DYNAMIC_TOPIC_CONFIG" || got["segment.bytes"] != "104857600 DYNAMIC_TOPIC_CONFIG" {
		t.Errorf("describe configs: %v", got)
	}
	cl := g.client(t, kgo.RecordRetries(0), kgo.ProduceRequestTimeout(5*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "__consumer_offsets", Value: []byte("x")}).FirstErr(); err != kerr.InvalidTopicException {
		t.Errorf("produce: %v, want INVALID_TOPIC_EXCEPTION", err)
	}

	// DescribeTopicPartitions naming it (kafka-topics --describe of every
	// topic asks so, after Metadata listed it): its 50 partitions.
	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dtp.ResponsePartitionLimit = 2000
	dtpt := kmsg.NewDescribeTopicPartitionsRequestTopic()
	dtpt.Topic = "__consumer_offsets"
	dtp.Topics = append(dtp.Topics, dtpt)
	if resp := r.roundTrip(0, dtp).(*kmsg.DescribeTopicPartitionsResponse); len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 ||
		!resp.Topics[0].IsInternal || len(resp.Topics[0].Partitions) != 50 {
		t.Errorf("DescribeTopicPartitions: %+v", resp.Topics)
	}
	// DeleteRecords of it: INVALID_TOPIC_EXCEPTION, as Kafka 4.4 answers
	// for an internal topic.
	drr := kmsg.NewPtrDeleteRecordsRequest()
	drr.TimeoutMillis = 5000
	drt := kmsg.NewDeleteRecordsRequestTopic()
	drt.Topic = "__consumer_offsets"
	drp := kmsg.NewDeleteRecordsRequestTopicPartition()
	drp.Partition, drp.Offset = 0, -1
	drt.Partitions = append(drt.Partitions, drp)
	drr.Topics = append(drr.Topics, drt)
	if resp := r.roundTrip(2, drr).(*kmsg.DeleteRecordsResponse); resp.Topics[0].Partitions[0].ErrorCode != kerr.InvalidTopicException.Code {
		t.Errorf("DeleteRecords: error %d, want INVALID_TOPIC_EXCEPTION", resp.Topics[0].Partitions[0].ErrorCode)
	}
}
