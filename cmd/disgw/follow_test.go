package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/auth/basic"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/config"
	dis "github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// disPair starts `disgw dislocal` (extra flags added) and `disgw serve
// --backend dis` in front of it (extra env added), and returns the
// gateway's address and a DIS SDK client of the same account.
func disPair(t *testing.T, dislocalFlags []string, gwEnv ...string) (string, *dis.DisClient) {
	t.Helper()
	const ak, sk, project = "follow-access-key", "follow-secret-key", "followproject"
	d := startDISLocal(t, disLocalOpts{account: disAccount{ak, sk, project}, args: dislocalFlags})
	endpoint := d.endpoint
	addr := startGateway(t, gatewayOpts{dis: d, env: gwEnv}).addr
	cred, err := basic.NewCredentialsBuilder().WithAk(ak).WithSk(sk).WithProjectId(project).SafeBuild()
	if err != nil {
		t.Fatal(err)
	}
	hc, err := dis.DisClientBuilder().WithEndpoints([]string{endpoint}).WithCredential(cred).
		WithHttpConfig(config.DefaultHttpConfig().WithTimeout(10 * time.Second)).SafeBuild()
	if err != nil {
		t.Fatal(err)
	}
	return addr, dis.NewDisClient(hc)
}

// TestServeOnDISFollowsDIS: a real gateway in front of a real dislocal
// (one data_duration hour = 100ms, so a scaled-down partition expires in
// 2.4 s) with dis_metadata_refresh 200ms. Through the DIS SDK, as another
// DIS user: a stream is deleted, one created, one scaled down from 3 to 1.
// An all-topics Metadata (no client names the topics) shows each change;
// the scaled-down topic keeps its DELETED partitions until they expire,
// then lists 1 partition, and a Fetch of the expired partition (which the
// gateway had read, so its records were in the read-ahead buffer) returns
// no records. The wait is polled; its timeout, many refresh intervals,
// only guards against hanging.
func TestServeOnDISFollowsDIS(t *testing.T) {
	t.Parallel()
	addr, other := disPair(t, []string{"--retention-unit", "100ms", "--no-scaling-limits"}, "DISGW_DIS_METADATA_REFRESH=200ms")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MetadataMinAge(50*time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if r, err := adm.CreateTopic(ctx, 1, 1, nil, "follow.del"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	if r, err := adm.CreateTopic(ctx, 3, 1, nil, "follow.scale"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "follow.scale", Partition: 2, Value: []byte("on partition 2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	td, err := adm.ListTopics(ctx, "follow.scale")
	if err != nil {
		t.Fatal(err)
	}
	scaleID := td["follow.scale"].ID
	var brokerID int32
	if m, err := adm.BrokerMetadata(ctx); err != nil || len(m.Brokers) != 1 {
		t.Fatalf("brokers: %v %v", m, err)
	} else {
		brokerID = m.Brokers[0].NodeID
	}
	// fetch2 fetches follow.scale partition 2 from offset 0: its error code
	// and whether it returned the record.
	fetch2 := func() (int16, bool) {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MaxBytes, req.ReplicaID = 10, 1<<20, -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = "follow.scale", scaleID
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = 2, 0, 1<<20, -1, -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp, err := req.RequestWith(ctx, cl.Broker(int(brokerID)))
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			return resp.ErrorCode, false
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("fetch response %+v", resp)
		}
		p := resp.Topics[0].Partitions[0]
		return p.ErrorCode, bytes.Contains(p.RecordBatches, []byte("on partition 2"))
	}
	if code, got := fetch2(); code != 0 || !got {
		t.Fatalf("fetch of partition 2 before the scale-down: error %d, record %v", code, got)
	}

	// Another DIS user deletes, creates and scales down.
	if _, err := other.DeleteStream(&model.DeleteStreamRequest{StreamName: "follow_del"}); err != nil {
		t.Fatal(err)
	}
	typ, dt, hours := model.GetCreateStreamReqStreamTypeEnum().COMMON, model.GetCreateStreamReqDataTypeEnum().BLOB, int32(24)
	if _, err := other.CreateStream(&model.CreateStreamRequest{Body: &model.CreateStreamReq{StreamName: "follow_new",
		PartitionCount: 2, StreamType: &typ, DataType: &dt, DataDuration: &hours}}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.UpdatePartitionCount(&model.UpdatePartitionCountRequest{StreamName: "follow_scale",
		Body: &model.UpdatePartitionCountReq{StreamName: "follow_scale", TargetPartitionCount: 1}}); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, cond func(kadm.TopicDetails) bool) {
		t.Helper()
		for {
			td, err := adm.ListTopics(ctx)
			if err == nil && cond(td) {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: not seen in Metadata (topics %v): %v", what, td.Names(), err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("deleted stream gone, created stream listed", func(td kadm.TopicDetails) bool {
		_, present := td["follow.del"]
		return !present && len(td["follow_new"].Partitions) == 2
	})
	waitFor("scaled-down stream with its partitions expired", func(td kadm.TopicDetails) bool {
		return len(td["follow.scale"].Partitions) == 1
	})
	code, got := fetch2()
	if got || code == 0 {
		t.Fatalf("fetch of the EXPIRED partition 2: error %d, record returned %v", code, got)
	}
	if err := kerr.ErrorForCode(code); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("fetch of the EXPIRED partition 2: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "follow_new", Partition: 1, Value: []byte("v")}).FirstErr(); err != nil {
		t.Errorf("produce to the stream created in DIS: %v", err)
	}
}

// TestServeOnDISRecordSize: on DIS, max.message.bytes over 1,048,622 (2
// MiB) is refused at CreateTopics, AlterConfigs and
// IncrementalAlterConfigs with INVALID_CONFIG naming the limit; a record
// over DIS's 1 MiB (a 1,048,577-byte value) on a topic whose
// max.message.bytes allows it (a stream a DIS tool tagged with 2000000)
// gets MESSAGE_TOO_LARGE, and a smaller one is stored.
func TestServeOnDISRecordSize(t *testing.T) {
	t.Parallel()
	addr, other := disPair(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerBatchMaxBytes(4<<20), kgo.RecordRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const limit = "1048622"
	twoMiB := "2097152"
	invalid := func(what string, code int16, msg *string) {
		t.Helper()
		if err := kerr.ErrorForCode(code); !errors.Is(err, kerr.InvalidConfig) || msg == nil || !strings.Contains(*msg, limit) {
			m := "<nil>"
			if msg != nil {
				m = *msg
			}
			t.Errorf("%s max.message.bytes 2 MiB: %v %q, want INVALID_CONFIG naming %s", what, err, m, limit)
		}
	}
	creq := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "size.big", 1, 1
	cc := kmsg.NewCreateTopicsRequestTopicConfig()
	cc.Name, cc.Value = "max.message.bytes", &twoMiB
	ct.Configs = append(ct.Configs, cc)
	creq.Topics = append(creq.Topics, ct)
	cresp, err := creq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	invalid("CreateTopics", cresp.Topics[0].ErrorCode, cresp.Topics[0].ErrorMessage)
	if r, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": kadm.StringPtr(limit)}, "size.ok"); err != nil || r.Err != nil {
		t.Fatalf("create with max.message.bytes %s: %v %v", limit, err, r.Err)
	}
	areq := kmsg.NewPtrAlterConfigsRequest()
	ar := kmsg.NewAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, "size.ok"
	ac := kmsg.NewAlterConfigsRequestResourceConfig()
	ac.Name, ac.Value = "max.message.bytes", &twoMiB
	ar.Configs = append(ar.Configs, ac)
	areq.Resources = append(areq.Resources, ar)
	aresp, err := areq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	invalid("AlterConfigs", aresp.Resources[0].ErrorCode, aresp.Resources[0].ErrorMessage)
	ireq := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ir := kmsg.NewIncrementalAlterConfigsRequestResource()
	ir.ResourceType, ir.ResourceName = kmsg.ConfigResourceTypeTopic, "size.ok"
	ic := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	ic.Name, ic.Op, ic.Value = "max.message.bytes", kmsg.IncrementalAlterConfigOpSet, &twoMiB
	ir.Configs = append(ir.Configs, ic)
	ireq.Resources = append(ireq.Resources, ir)
	iresp, err := ireq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	invalid("IncrementalAlterConfigs", iresp.Resources[0].ErrorCode, iresp.Resources[0].ErrorMessage)

	// A stream made by a DIS tool with the gateway's tag allowing 2000000.
	typ, dt, hours := model.GetCreateStreamReqStreamTypeEnum().COMMON, model.GetCreateStreamReqDataTypeEnum().BLOB, int32(24)
	k, v := "disgw-max-message-bytes", "2000000"
	tags := []model.Tag{{Key: &k, Value: &v}}
	if _, err := other.CreateStream(&model.CreateStreamRequest{Body: &model.CreateStreamReq{StreamName: "sizebig",
		PartitionCount: 1, StreamType: &typ, DataType: &dt, DataDuration: &hours, Tags: &tags}}); err != nil {
		t.Fatal(err)
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "sizebig", Value: bytes.Repeat([]byte{'x'}, 1_048_577)}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("produce of a 1,048,577-byte value: %v, want MESSAGE_TOO_LARGE", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "sizebig", Value: bytes.Repeat([]byte{'x'}, 1_000_000)}).FirstErr(); err != nil {
		t.Errorf("produce of a 1,000,000-byte value: %v", err)
	}
}
