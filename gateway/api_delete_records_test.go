package gateway_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceTo writes n one-record batches to topic's partition and returns
// the next offset.
func produceTo(t *testing.T, cl *kgo.Client, topic string, partition int32, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topic, Partition: partition, Key: []byte{byte(i)}, Value: []byte("value")}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

// TestDeleteRecordsKadm deletes records with kadm as kafka-delete-records
// does and checks what a one-node Kafka 4.4 shows afterwards: ListOffsets
// earliest is the new low watermark, Fetch below it gets
// OFFSET_OUT_OF_RANGE, DescribeLogDirs shows the one dir; a restart keeps
// the log start offset.
func TestDeleteRecordsKadm(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	g := startGatewayAt(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := g.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "dr"); err != nil {
		t.Fatal(err)
	}
	compact := "compact"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, "dr.compact"); err != nil {
		t.Fatal(err)
	}
	produceTo(t, cl, "dr", 0, 10)

	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 4})
	os.Add(kadm.Offset{Topic: "dr", Partition: 1, At: -1})
	os.Add(kadm.Offset{Topic: "dr.compact", Partition: 0, At: 0})
	resps, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		topic     string
		partition int32
		low       int64
		err       error
	}{
		{"dr", 0, 4, nil},
		{"dr", 1, 0, nil},
		{"dr.compact", 0, 0, kerr.PolicyViolation},
	} {
		r, ok := resps.Lookup(want.topic, want.partition)
		if !ok {
			t.Fatalf("DeleteRecords: no answer for %s[%d]", want.topic, want.partition)
		}
		if !errors.Is(r.Err, want.err) || (want.err == nil && r.LowWatermark != want.low) {
			t.Fatalf("DeleteRecords %s[%d] = low watermark %d, error %v; want %d, %v", want.topic, want.partition, r.LowWatermark, r.Err, want.low, want.err)
		}
	}
	wantStart := func(g *testGateway, want int64) {
		t.Helper()
		starts, err := kadm.NewClient(g.client(t)).ListStartOffsets(ctx, "dr")
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := starts.Lookup("dr", 0); o.Err != nil || o.Offset != want {
			t.Fatalf("ListOffsets earliest = %d, %v; want %d", o.Offset, o.Err, want)
		}
	}
	wantStart(g, 4)

	// Fetch below the log start offset, as a consumer at offset 2 does.
	f := kmsg.NewPtrFetchRequest()
	f.MaxWaitMillis, f.MaxBytes = 10, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "dr"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 2, 1<<20, -1
	ft.Partitions = []kmsg.FetchRequestTopicPartition{fp}
	f.Topics = []kmsg.FetchRequestTopic{ft}
	fr := g.raw(t).roundTrip(12, f).(*kmsg.FetchResponse)
	if p := fr.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.HighWatermark != -1 || p.LogStartOffset != -1 {
		t.Fatalf("Fetch at 2 below log start offset 4: error %d, high watermark %d, log start %d; want OFFSET_OUT_OF_RANGE, -1, -1 (as Kafka 4.4)",
			p.ErrorCode, p.HighWatermark, p.LogStartOffset)
	}

	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	n := 0
	dirs.Each(func(d kadm.DescribedLogDir) {
		n++
		if d.Err != nil || d.Dir != abs {
			t.Errorf("log dir %q, error %v; want %q", d.Dir, d.Err, abs)
		}
		if d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes {
			t.Errorf("log dir total %d usable %d bytes; want the volume's", d.TotalBytes, d.UsableBytes)
		}
		p0, ok0 := d.Topics.Lookup("dr", 0)
		p1, ok1 := d.Topics.Lookup("dr", 1)
		if !ok0 || !ok1 || p0.Size <= 0 || p1.Size != 0 || p0.OffsetLag != 0 || p0.IsFuture {
			t.Errorf("dr partitions in the log dir: %+v (%v), %+v (%v); want 0 with its 6 records' batches, 1 empty", p0, ok0, p1, ok1)
		}
		if _, ok := d.Topics.Lookup("dr.compact", 0); !ok {
			t.Errorf("dr.compact not in the log dir")
		}
	})
	if n != 1 {
		t.Fatalf("%d log dirs, want 1", n)
	}

	g.stop(t)
	g = startGatewayAt(t, dir)
	wantStart(g, 4)
}

// TestDeleteRecordsVersions sends DeleteRecords, DescribeLogDirs and
// AlterReplicaLogDirs with kmsg at the lowest and highest versions Kafka
// 4.4 serves and checks the answers a one-node Kafka 4.4 gives (recorded
// from it).
func TestDeleteRecordsVersions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	g := startGatewayAt(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := g.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	compact := "compact"
	cd := "compact,delete"
	for _, tc := range []struct {
		name string
		cfg  map[string]*string
	}{{"v.del", nil}, {"v.cmp", map[string]*string{"cleanup.policy": &compact}}, {"v.cmpdel", map[string]*string{"cleanup.policy": &cd}}} {
		if _, err := adm.CreateTopic(ctx, 1, 1, tc.cfg, tc.name); err != nil {
			t.Fatal(err)
		}
		produceTo(t, cl, tc.name, 0, 10)
	}
	for _, v := range []int16{0, 2} {
		raw := g.raw(t)
		del := func(topic string, partition int32, offset int64) kmsg.DeleteRecordsResponseTopicPartition {
			t.Helper()
			r := kmsg.NewPtrDeleteRecordsRequest()
			r.TimeoutMillis = 5000
			rt := kmsg.NewDeleteRecordsRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Partition, rp.Offset = partition, offset
			rt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{rp}
			r.Topics = []kmsg.DeleteRecordsRequestTopic{rt}
			resp := raw.roundTrip(v, r).(*kmsg.DeleteRecordsResponse)
			return resp.Topics[0].Partitions[0]
		}
		base := int64(v) // each version deletes further
		for _, tc := range []struct {
			name      string
			topic     string
			partition int32
			offset    int64
			low       int64
			code      int16
		}{
			{"moves", "v.del", 0, 5 + base, 5 + base, 0},
			{"never back", "v.del", 0, 3, 5 + base, 0},
			{"beyond the high watermark", "v.del", 0, 100, -1, kerr.OffsetOutOfRange.Code},
			{"below -1", "v.del", 0, -2, -1, kerr.OffsetOutOfRange.Code},
			{"unknown partition", "v.del", 3, 1, -1, kerr.UnknownTopicOrPartition.Code},
			{"unknown topic", "v.nope", 0, 1, -1, kerr.UnknownTopicOrPartition.Code},
			{"compact", "v.cmp", 0, 2, -1, kerr.PolicyViolation.Code},
			{"compact,delete", "v.cmpdel", 0, 2 + base, 2 + base, 0},
		} {
			if got := del(tc.topic, tc.partition, tc.offset); got.LowWatermark != tc.low || got.ErrorCode != tc.code {
				t.Errorf("DeleteRecords v%d %s: low watermark %d, error %d; want %d, %d", v, tc.name, got.LowWatermark, got.ErrorCode, tc.low, tc.code)
			}
		}
	}
	raw := g.raw(t)
	if got := func() kmsg.DeleteRecordsResponseTopicPartition {
		r := kmsg.NewPtrDeleteRecordsRequest()
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = "v.del"
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Offset = -1
		rt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{rp}
		r.Topics = []kmsg.DeleteRecordsRequestTopic{rt}
		return raw.roundTrip(2, r).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
	}(); got.LowWatermark != 10 || got.ErrorCode != 0 {
		t.Errorf("DeleteRecords at -1: low watermark %d, error %d; want the high watermark 10", got.LowWatermark, got.ErrorCode)
	}

	abs, _ := filepath.Abs(dir)
	for _, v := range []int16{1, 5} {
		r := kmsg.NewPtrDescribeLogDirsRequest()
		rt := kmsg.NewDescribeLogDirsRequestTopic()
		rt.Topic, rt.Partitions = "v.del", []int32{0, 7}
		rt2 := kmsg.NewDescribeLogDirsRequestTopic()
		rt2.Topic, rt2.Partitions = "v.nope", []int32{0}
		r.Topics = []kmsg.DescribeLogDirsRequestTopic{rt, rt2}
		resp := raw.roundTrip(v, r).(*kmsg.DescribeLogDirsResponse)
		if len(resp.Dirs) != 1 || resp.Dirs[0].Dir != abs || resp.Dirs[0].ErrorCode != 0 {
			t.Fatalf("DescribeLogDirs v%d: dirs %+v, want one, %q", v, resp.Dirs, abs)
		}
		d := resp.Dirs[0]
		if len(d.Topics) != 1 || d.Topics[0].Topic != "v.del" || len(d.Topics[0].Partitions) != 1 || d.Topics[0].Partitions[0].Partition != 0 {
			t.Errorf("DescribeLogDirs v%d: topics %+v, want v.del partition 0 alone (Kafka leaves out what does not exist)", v, d.Topics)
		}
		if v >= 4 && (d.TotalBytes <= 0 || d.UsableBytes <= 0) || v < 4 && (d.TotalBytes != -1 || d.UsableBytes != -1) {
			t.Errorf("DescribeLogDirs v%d: total %d usable %d", v, d.TotalBytes, d.UsableBytes)
		}
		r.Topics = []kmsg.DescribeLogDirsRequestTopic{}
		if resp := raw.roundTrip(v, r).(*kmsg.DescribeLogDirsResponse); len(resp.Dirs) != 1 || len(resp.Dirs[0].Topics) != 0 {
			t.Errorf("DescribeLogDirs v%d with no topics: %+v, want the dir without topics", v, resp.Dirs)
		}
		r.Topics = nil
		if resp := raw.roundTrip(v, r).(*kmsg.DescribeLogDirsResponse); len(resp.Dirs) != 1 || len(resp.Dirs[0].Topics) != 3 {
			t.Errorf("DescribeLogDirs v%d with null topics: %+v, want the dir with all 3 topics", v, resp.Dirs)
		}
	}

	for _, v := range []int16{1, 2} {
		for _, tc := range []struct {
			dir, topic string
			want       [2]int16 // partitions 0 and 9
		}{
			{abs, "v.del", [2]int16{0, kerr.UnknownTopicOrPartition.Code}},
			{abs, "v.nope", [2]int16{kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code}},
			{"/nonexistent/dir", "v.del", [2]int16{kerr.LogDirNotFound.Code, kerr.LogDirNotFound.Code}},
		} {
			r := kmsg.NewPtrAlterReplicaLogDirsRequest()
			rd := kmsg.NewAlterReplicaLogDirsRequestDir()
			rd.Dir = tc.dir
			rt := kmsg.NewAlterReplicaLogDirsRequestDirTopic()
			rt.Topic, rt.Partitions = tc.topic, []int32{0, 9}
			rd.Topics = []kmsg.AlterReplicaLogDirsRequestDirTopic{rt}
			r.Dirs = []kmsg.AlterReplicaLogDirsRequestDir{rd}
			resp := raw.roundTrip(v, r).(*kmsg.AlterReplicaLogDirsResponse)
			got := map[int32]int16{}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					got[p.Partition] = p.ErrorCode
				}
			}
			if got[0] != tc.want[0] || got[9] != tc.want[1] || len(got) != 2 {
				t.Errorf("AlterReplicaLogDirs v%d %s into %s: %v, want 0: %d, 9: %d", v, tc.topic, tc.dir, got, tc.want[0], tc.want[1])
			}
		}
	}
}
