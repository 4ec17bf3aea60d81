package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/auth/basic"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/config"
	dis "github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestServeOnDIS runs `disgw serve --backend dis` in front of `disgw
// dislocal` (both the real binary, signatures checked): franz-go produces
// plain records, records with headers and a tombstone, consumes them back
// byte-identical, commits as a group and a new member resumes after the
// commit; a DIS SDK consumer reads the plain records as plain data; the
// secret key never reaches the log.
func TestServeOnDIS(t *testing.T) {
	t.Parallel()
	const ak, sk, project = "e2e-access-key", "e2e-secret-key-not-logged", "e2eproject"
	d := startDISLocal(t, disLocalOpts{account: disAccount{ak, sk, project}})
	endpoint := d.endpoint

	gw := startGateway(t, gatewayOpts{dis: d, args: []string{"--dis-region", "cn-north-4"}})
	addr := gw.addr

	const topic = "dis.e2e"
	ts := time.UnixMilli(1_700_000_000_123)
	want := []*kgo.Record{
		{Key: []byte("k0"), Value: []byte("plain value 0"), Timestamp: ts},
		{Key: []byte("k1"), Value: []byte("with headers"), Timestamp: ts.Add(time.Millisecond),
			Headers: []kgo.RecordHeader{{Key: "h1", Value: []byte("v1")}, {Key: "empty", Value: []byte{}}}},
		{Key: []byte("k2"), Value: nil, Timestamp: ts.Add(2 * time.Millisecond)}, // tombstone
		{Key: []byte{0, 0xff}, Value: []byte("binary key"), Timestamp: ts.Add(3 * time.Millisecond)},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pcl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	if err := pcl.ProduceSync(ctx, want...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	consumeGroup := func(n int) []*kgo.Record {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumerGroup("e2e.group"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var got []*kgo.Record
		for len(got) < n {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d records: %v", len(got), n, ctx.Err())
			}
			fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s[%d]: %v", topic, p, err) })
			got = append(got, fs.Records()...)
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
		return got
	}
	same := func(i int, got, w *kgo.Record, off int64) {
		t.Helper()
		if got.Offset != off || !bytes.Equal(got.Key, w.Key) || !bytes.Equal(got.Value, w.Value) ||
			(got.Value == nil) != (w.Value == nil) || !got.Timestamp.Equal(w.Timestamp) || len(got.Headers) != len(w.Headers) {
			t.Fatalf("record %d: offset %d key %q value %q (nil %v) ts %v headers %v; want offset %d key %q value %q (nil %v) ts %v headers %v",
				i, got.Offset, got.Key, got.Value, got.Value == nil, got.Timestamp, got.Headers,
				off, w.Key, w.Value, w.Value == nil, w.Timestamp, w.Headers)
		}
		for j, h := range w.Headers {
			if got.Headers[j].Key != h.Key || !bytes.Equal(got.Headers[j].Value, h.Value) {
				t.Fatalf("record %d header %d: %+v, want %+v", i, j, got.Headers[j], h)
			}
		}
	}
	got := consumeGroup(len(want))
	for i := range want {
		same(i, got[i], want[i], int64(i))
	}

	// Produce more; a new member of the group resumes after the commit.
	more := []*kgo.Record{{Key: []byte("k4"), Value: []byte("after commit"), Timestamp: ts.Add(4 * time.Millisecond)}}
	if err := pcl.ProduceSync(ctx, more...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	got = consumeGroup(1)
	same(0, got[0], more[0], int64(len(want)))

	// A DIS application reads the plain records as plain data.
	cred, err := basic.NewCredentialsBuilder().WithAk(ak).WithSk(sk).WithProjectId(project).SafeBuild()
	if err != nil {
		t.Fatal(err)
	}
	hc, err := dis.DisClientBuilder().WithEndpoints([]string{endpoint}).WithCredential(cred).
		WithHttpConfig(config.DefaultHttpConfig().WithTimeout(10 * time.Second)).SafeBuild()
	if err != nil {
		t.Fatal(err)
	}
	c := dis.NewDisClient(hc)
	typ := model.GetShowCursorRequestCursorTypeEnum().TRIM_HORIZON
	cur, err := c.ShowCursor(&model.ShowCursorRequest{StreamName: "dis_e2e", PartitionId: "0", CursorType: &typ})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := c.ConsumeRecords(&model.ConsumeRecordsRequest{PartitionCursor: *cur.PartitionCursor})
	if err != nil || recs.Records == nil || len(*recs.Records) != len(want)+1 {
		t.Fatalf("SDK read: %+v, %v", recs, err)
	}
	for i, r := range *recs.Records {
		data, _ := base64.StdEncoding.DecodeString(*r.Data)
		plain := i == 0 || i == len(want)
		if plain && (string(data) != string(append(append([]*kgo.Record{}, want...), more...)[i].Value) || r.PartitionKey == nil) {
			t.Fatalf("SDK record %d: data %q key %v, want the plain value and key", i, data, r.PartitionKey)
		}
		if !plain && data[0] != 0xFF {
			t.Fatalf("SDK record %d: data %q, want the envelope", i, data)
		}
	}

	// The topic was created without retention.ms: DIS's default, 24 h.
	rcs, err := kadm.NewClient(pcl).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if rc, err := rcs.On(topic, nil); err != nil {
		t.Fatal(err)
	} else if v := configValue(rc.Configs, "retention.ms"); v != "86400000" {
		t.Fatalf("retention.ms of an auto-created topic = %q, want 86400000 (24 h, DIS's default)", v)
	}

	// Kafka takes any committed offset. DIS keeps a checkpoint only inside
	// the partition's range, so the gateway keeps one beyond it beside the
	// checkpoint: it is fetched back exactly, and a DIS application reads
	// the group's checkpoint at the end of the partition (5), with the
	// commit's metadata.
	var beyond kadm.Offsets
	beyond.Add(kadm.Offset{Topic: topic, Partition: 0, At: 999_999, LeaderEpoch: 3, Metadata: "beyond"})
	if rs, err := kadm.NewClient(pcl).CommitOffsets(ctx, "e2e.group", beyond); err != nil || rs.Error() != nil {
		t.Fatalf("commit beyond the high watermark: %v, %v; want it taken", rs.Error(), err)
	}
	fetched, err := kadm.NewClient(pcl).FetchOffsets(ctx, "e2e.group")
	if o, ok := fetched.Lookup(topic, 0); err != nil || !ok || o.Err != nil || o.At != 999_999 || o.LeaderEpoch != 3 || o.Metadata != "beyond" {
		t.Fatalf("fetch of the commit beyond the high watermark: %+v, %v", o, err)
	}
	last := model.GetShowCheckpointRequestCheckpointTypeEnum().LAST_READ
	if cp, err := c.ShowCheckpoint(&model.ShowCheckpointRequest{AppName: "e2e_2Egroup", StreamName: "dis_e2e", PartitionId: "0",
		CheckpointType: last}); err != nil || cp.SequenceNumber == nil || *cp.SequenceNumber != "5" || cp.Metadata == nil || *cp.Metadata != "beyond" {
		t.Fatalf("the group's checkpoint as DIS holds it: %+v, %v; want 5 \"beyond\"", cp, err)
	}

	// A dry run answers what the real request would: DIS keeps 24-168 h.
	hour := "3600000"
	if rs, err := kadm.NewClient(pcl).ValidateCreateTopics(ctx, 1, 1, map[string]*string{"retention.ms": &hour}, "dis.dry"); err != nil ||
		!errors.Is(rs["dis.dry"].Err, kerr.InvalidConfig) {
		t.Fatalf("validate-only CreateTopics with retention.ms 1 h: %v, %v; want INVALID_CONFIG", rs["dis.dry"].Err, err)
	}
	if rs, err := kadm.NewClient(pcl).ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &hour}}, topic); err != nil ||
		!errors.Is(rs[0].Err, kerr.InvalidConfig) {
		t.Fatalf("validate-only IncrementalAlterConfigs with retention.ms 1 h: %v, %v; want INVALID_CONFIG", rs, err)
	}

	if code := gw.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exit code after SIGTERM = %d", code)
	}
	if out := gw.output(t); strings.Contains(out, sk) {
		t.Fatal("the secret key is in the gateway's log")
	}
	if f := gw.logLine(t, "started"); f["backend"] != "dis" || f["dis_endpoint"] != endpoint {
		t.Fatalf("started log line %v", f)
	}
}

// configValue is the value of the config named name, "" when absent.
func configValue(cs []kadm.Config, name string) string {
	for _, c := range cs {
		if c.Key == name && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}
