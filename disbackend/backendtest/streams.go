package backendtest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/disgw/disgw/disbackend"
)

func testCreateDescribeList(t *testing.T, b disbackend.Backend) {
	ctx := ctxT(t)
	var created []disbackend.Stream
	for _, topic := range []string{"zeta", "alpha.one", "mid_dle"} {
		s := spec(t, topic, 3)
		s.Config.Retention = 48 * 3600e9
		s.Config.TimestampType = disbackend.LogAppendTime
		st := mustCreate(t, b, s)
		if st.Name != s.Name || st.TopicName != topic || st.PartitionCount != 3 || st.Config != s.Config.WithDefaults() {
			t.Fatalf("CreateStream(%q) = %+v, want fields of %+v", topic, st, s)
		}
		if st.TopicID == ([16]byte{}) {
			t.Fatalf("CreateStream(%q): zero TopicID", topic)
		}
		if st.CreatedAt.IsZero() {
			t.Fatalf("CreateStream(%q): zero CreatedAt", topic)
		}
		created = append(created, st)
	}
	if created[0].TopicID == created[1].TopicID {
		t.Fatal("two streams share a TopicID")
	}
	for _, want := range created {
		got, err := b.DescribeStream(ctx, want.Name)
		if err != nil {
			t.Fatalf("DescribeStream(%q): %v", want.Name, err)
		}
		if !sameStream(got, want) {
			t.Fatalf("DescribeStream(%q) = %+v, want %+v", want.Name, got, want)
		}
	}
	list, err := b.ListStreams(ctx)
	if err != nil {
		t.Fatalf("ListStreams: %v", err)
	}
	wantNames := []string{"alpha_one", "mid_dle", "zeta"}
	if len(list) != len(wantNames) {
		t.Fatalf("ListStreams: %d streams, want %d", len(list), len(wantNames))
	}
	for i, n := range wantNames {
		if list[i].Name != n {
			t.Fatalf("ListStreams[%d] = %q, want %q (sorted by name)", i, list[i].Name, n)
		}
	}
	if list[0].TopicName != "alpha.one" {
		t.Fatalf("ListStreams: topic name %q, want the original %q", list[0].TopicName, "alpha.one")
	}
	for p := int32(0); p < 3; p++ {
		wantRange(t, b, "zeta", p, 0, 0)
	}
}

// sameStream compares streams, times by instant.
func sameStream(a, b disbackend.Stream) bool {
	return a.Name == b.Name && a.TopicName == b.TopicName && a.TopicID == b.TopicID &&
		a.PartitionCount == b.PartitionCount && a.Config == b.Config && a.CreatedAt.Equal(b.CreatedAt)
}

func testCreateErrors(t *testing.T, b disbackend.Backend) {
	ctx := ctxT(t)
	mustCreate(t, b, spec(t, "orders", 2))
	_, err := b.CreateStream(ctx, spec(t, "orders", 2))
	wantErr(t, "create existing", err, disbackend.ErrStreamExists)
	_, err = b.CreateStream(ctx, spec(t, "orders", 5))
	wantErr(t, "create existing with other partition count", err, disbackend.ErrStreamExists)
	for _, n := range []int32{0, -1} {
		_, err = b.CreateStream(ctx, spec(t, name("parts", int(-n)), n))
		wantErr(t, "create with partition count", err, disbackend.ErrInvalidPartitionCount)
	}
	for _, r := range []int64{0, -2, -3600e9} {
		s := spec(t, "badretention", 1)
		s.Config.Retention = time.Duration(r)
		_, err = b.CreateStream(ctx, s)
		wantErr(t, "create with retention", err, disbackend.ErrInvalidConfig)
	}
	if _, err := b.DescribeStream(ctx, "badretention"); err == nil {
		t.Fatal("a refused CreateStream left a stream behind")
	}
}

func testNameCollision(t *testing.T, b disbackend.Backend) {
	ctx := ctxT(t)
	first := mustCreate(t, b, spec(t, "a.b", 1))
	_, err := b.CreateStream(ctx, spec(t, "a_b", 1))
	wantErr(t, "create a_b beside a.b", err, disbackend.ErrNameCollision)
	got, err := b.DescribeStream(ctx, first.Name)
	if err != nil || got.TopicName != "a.b" || got.TopicID != first.TopicID {
		t.Fatalf("after collision DescribeStream = %+v, %v; want the original a.b", got, err)
	}
	// The other order too.
	mustCreate(t, b, spec(t, "x_y", 1))
	_, err = b.CreateStream(ctx, spec(t, "x.y", 1))
	wantErr(t, "create x.y beside x_y", err, disbackend.ErrNameCollision)
}

func testDeleteStream(t *testing.T, b disbackend.Backend) {
	ctx := ctxT(t)
	st := mustCreate(t, b, spec(t, "gone", 2))
	for i := 0; i < 5; i++ {
		mustAppend(t, b, "gone", int32(i%2), MakeBatch(BatchOptions{NumRecords: 3, Seed: uint64(i)}))
	}
	if err := b.DeleteStream(ctx, "gone"); err != nil {
		t.Fatalf("DeleteStream: %v", err)
	}
	_, err := b.DescribeStream(ctx, "gone")
	wantErr(t, "describe deleted", err, disbackend.ErrStreamNotFound)
	_, err = b.Range("gone", 0)
	wantErr(t, "range of deleted", err, disbackend.ErrStreamNotFound)
	_, err = b.Read(ctx, "gone", 0, 0, 1<<20)
	wantErr(t, "read deleted", err, disbackend.ErrStreamNotFound)
	_, err = b.Append("gone", 0, MakeBatch(BatchOptions{})).Wait(ctx)
	wantErr(t, "append to deleted", err, disbackend.ErrStreamNotFound)
	wantErr(t, "delete again", b.DeleteStream(ctx, "gone"), disbackend.ErrStreamNotFound)
	list, err := b.ListStreams(ctx)
	if err != nil || len(list) != 0 {
		t.Fatalf("ListStreams after delete = %v, %v; want none", list, err)
	}

	again := mustCreate(t, b, spec(t, "gone", 1))
	if again.TopicID == st.TopicID {
		t.Fatal("re-created stream kept the old TopicID")
	}
	wantRange(t, b, "gone", 0, 0, 0)
	res, err := b.Read(ctx, "gone", 0, 0, 1<<20)
	if err != nil || len(res.Batches) != 0 {
		t.Fatalf("Read of re-created stream = %d batches, %v; want none", len(res.Batches), err)
	}
	s := mustAppend(t, b, "gone", 0, MakeBatch(BatchOptions{NumRecords: 2}))
	if s.base != 0 {
		t.Fatalf("first append to re-created stream got offset %d, want 0", s.base)
	}
}

func testNotFound(t *testing.T, b disbackend.Backend) {
	ctx := ctxT(t)
	mustCreate(t, b, spec(t, "two", 2))
	_, err := b.Append("nope", 0, MakeBatch(BatchOptions{})).Wait(ctx)
	wantErr(t, "append to missing stream", err, disbackend.ErrStreamNotFound)
	for _, p := range []int32{2, 7, -1} {
		_, err = b.Append("two", p, MakeBatch(BatchOptions{})).Wait(ctx)
		wantErr(t, "append to missing partition", err, disbackend.ErrPartitionNotFound)
		_, err = b.Read(ctx, "two", p, 0, 100)
		wantErr(t, "read missing partition", err, disbackend.ErrPartitionNotFound)
		_, err = b.Range("two", p)
		wantErr(t, "range of missing partition", err, disbackend.ErrPartitionNotFound)
		_, err = b.BatchAtTimestamp(ctx, "two", p, 0)
		wantErr(t, "timestamp lookup in missing partition", err, disbackend.ErrPartitionNotFound)
	}
	_, err = b.Read(ctx, "nope", 0, 0, 100)
	wantErr(t, "read missing stream", err, disbackend.ErrStreamNotFound)
	_, err = b.BatchWithMaxTimestamp(ctx, "nope", 0)
	wantErr(t, "max timestamp of missing stream", err, disbackend.ErrStreamNotFound)
	wantErr(t, "update partitions of missing stream", b.UpdatePartitionCount(ctx, "nope", 3), disbackend.ErrStreamNotFound)
	wantErr(t, "update config of missing stream",
		b.UpdateStreamConfig(ctx, "nope", disbackend.StreamConfig{Retention: disbackend.UnlimitedRetention}), disbackend.ErrStreamNotFound)
}

func testUpdatePartitionCount(t *testing.T, b disbackend.Backend) {
	ctx := ctxT(t)
	mustCreate(t, b, spec(t, "grow", 2))
	mustAppend(t, b, "grow", 1, MakeBatch(BatchOptions{NumRecords: 4}))
	if err := b.UpdatePartitionCount(ctx, "grow", 4); err != nil {
		t.Fatalf("UpdatePartitionCount(4): %v", err)
	}
	st, err := b.DescribeStream(ctx, "grow")
	if err != nil || st.PartitionCount != 4 {
		t.Fatalf("DescribeStream after growing = %+v, %v; want 4 partitions", st, err)
	}
	wantRange(t, b, "grow", 1, 0, 4)
	for p := int32(2); p < 4; p++ {
		wantRange(t, b, "grow", p, 0, 0)
		if s := mustAppend(t, b, "grow", p, MakeBatch(BatchOptions{NumRecords: 2})); s.base != 0 {
			t.Fatalf("new partition %d: first offset %d, want 0", p, s.base)
		}
	}
	for _, n := range []int32{4, 3, 0, -1} {
		wantErr(t, "UpdatePartitionCount not growing", b.UpdatePartitionCount(ctx, "grow", n), disbackend.ErrInvalidPartitionCount)
	}
}

func testUpdateStreamConfig(t *testing.T, b disbackend.Backend) {
	ctx := ctxT(t)
	mustCreate(t, b, spec(t, "cfg", 1))
	// A config without a cleanup policy reads back with Kafka's defaults.
	cfg := disbackend.StreamConfig{Retention: 7 * 24 * 3600e9, TimestampType: disbackend.LogAppendTime, MaxMessageBytes: 4096}.WithDefaults()
	if err := b.UpdateStreamConfig(ctx, "cfg", cfg); err != nil {
		t.Fatalf("UpdateStreamConfig: %v", err)
	}
	st, err := b.DescribeStream(ctx, "cfg")
	if err != nil || st.Config != cfg {
		t.Fatalf("DescribeStream after update = %+v, %v; want config %+v", st, err, cfg)
	}
	bad := cfg
	bad.Retention = 0
	wantErr(t, "UpdateStreamConfig retention 0", b.UpdateStreamConfig(ctx, "cfg", bad), disbackend.ErrInvalidConfig)
	if st, _ := b.DescribeStream(ctx, "cfg"); st.Config != cfg {
		t.Fatalf("refused update changed the config to %+v", st.Config)
	}
	cfg.Retention = disbackend.UnlimitedRetention
	if err := b.UpdateStreamConfig(ctx, "cfg", cfg); err != nil {
		t.Fatalf("UpdateStreamConfig unlimited: %v", err)
	}
}

// testLongTopicNames: topics of up to 249 characters (Kafka's limit) live
// under the backend's own stream names (disbackend.StreamNameFor: hashed
// on DIS, '.' as '_' on the embedded store), are listed and described under
// their topic names, keep records, and stay apart when their first 64
// characters are equal; a topic named like another's stream collides;
// deleting one leaves the other.
func testLongTopicNames(t *testing.T, b disbackend.Backend) {
	ctx := ctxT(t)
	base := strings.Repeat("long.topic-", 6) // 66 characters
	long1 := base + strings.Repeat("a", 249-len(base))
	long2 := base + strings.Repeat("a", 248-len(base)) + "b"
	streams := map[string]string{}
	for _, topic := range []string{long1, long2} {
		name, err := disbackend.StreamNameFor(b, topic)
		if err != nil {
			t.Fatalf("StreamNameFor(%d characters): %v", len(topic), err)
		}
		s := spec(t, topic, 2)
		s.Name = name
		st := mustCreate(t, b, s)
		if st.Name != name || st.TopicName != topic {
			t.Fatalf("CreateStream = stream %q topic %q, want %q %q", st.Name, st.TopicName, name, topic)
		}
		streams[topic] = name
	}
	if streams[long1] == streams[long2] {
		t.Fatalf("two topics with the same first 248 characters share stream %q", streams[long1])
	}
	list, err := b.ListStreams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, st := range list {
		found[st.TopicName] = st.Name
	}
	for topic, name := range streams {
		if found[topic] != name {
			t.Fatalf("ListStreams: topic %q under stream %q, want %q (listed: %v)", topic, found[topic], name, found)
		}
		got, err := b.DescribeStream(ctx, name)
		if err != nil || got.TopicName != topic {
			t.Fatalf("DescribeStream(%q) = topic %q, %v; want %q", name, got.TopicName, err, topic)
		}
	}
	// A topic whose name is long1's stream name maps to that stream.
	clash := streams[long1]
	if name, err := disbackend.StreamNameFor(b, clash); err != nil || name != clash {
		t.Fatalf("StreamNameFor(%q) = %q, %v; want itself", clash, name, err)
	}
	cs := spec(t, clash, 1)
	cs.Name = clash
	_, err = b.CreateStream(ctx, cs)
	wantErr(t, "create a topic named like a long topic's stream", err, disbackend.ErrNameCollision)
	// A long topic differing from long1 only in '.' and '_' collides, as
	// Kafka refuses it beside long1 (and as short names collide).
	under := strings.ReplaceAll(long1, ".", "_")
	uname, err := disbackend.StreamNameFor(b, under)
	if err != nil {
		t.Fatal(err)
	}
	us := spec(t, under, 1)
	us.Name = uname
	_, err = b.CreateStream(ctx, us)
	wantErr(t, "create a long topic differing only in '.' and '_'", err, disbackend.ErrNameCollision)

	mustAppend(t, b, streams[long1], 1, MakeBatch(BatchOptions{NumRecords: 3, Seed: 1}))
	mustAppend(t, b, streams[long2], 0, MakeBatch(BatchOptions{NumRecords: 2, Seed: 2}))
	if recs := flatten(t, readAll(t, b, streams[long1], 1, 0, 1<<20)); len(recs) != 3 {
		t.Fatalf("read %d records of %q, want 3", len(recs), long1)
	}
	wantRange(t, b, streams[long2], 0, 0, 2)
	wantRange(t, b, streams[long2], 1, 0, 0)

	// An update keeps the topic name.
	cfg := spec(t, long2, 2).Config
	cfg.MaxMessageBytes = 4096
	cfg.SegmentBytes = 1 << 20
	if err := b.UpdateStreamConfig(ctx, streams[long2], cfg); err != nil {
		t.Fatal(err)
	}
	if got, err := b.DescribeStream(ctx, streams[long2]); err != nil || got.TopicName != long2 || got.Config.MaxMessageBytes != 4096 || got.Config.SegmentBytes != 1<<20 {
		t.Fatalf("after UpdateStreamConfig: topic %q max.message.bytes %d segment.bytes %d, %v", got.TopicName, got.Config.MaxMessageBytes, got.Config.SegmentBytes, err)
	}
	cfg.SegmentBytes = 0 // back to the default: nothing but the name left to keep
	if err := b.UpdateStreamConfig(ctx, streams[long2], cfg); err != nil {
		t.Fatal(err)
	}
	if list, err := b.ListStreams(ctx); err != nil || !slices.ContainsFunc(list, func(st disbackend.Stream) bool { return st.TopicName == long2 }) {
		t.Fatalf("after UpdateStreamConfig to defaults ListStreams lacks %q: %v", long2, err)
	}
	if got, err := b.DescribeStream(ctx, streams[long2]); err != nil || got.TopicName != long2 || got.Config.SegmentBytes == 1<<20 {
		t.Fatalf("after UpdateStreamConfig to defaults: topic %q segment.bytes %d, %v", got.TopicName, got.Config.SegmentBytes, err)
	}

	if err := b.DeleteStream(ctx, streams[long1]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.DescribeStream(ctx, streams[long1]); !errors.Is(err, disbackend.ErrStreamNotFound) {
		t.Fatalf("DescribeStream after delete: %v, want ErrStreamNotFound", err)
	}
	if got, err := b.DescribeStream(ctx, streams[long2]); err != nil || got.TopicName != long2 {
		t.Fatalf("the other long topic after delete: %q, %v", got.TopicName, err)
	}
	// Created again, it is a new topic of the same name.
	s := spec(t, long1, 1)
	s.Name = streams[long1]
	if st := mustCreate(t, b, s); st.TopicName != long1 {
		t.Fatalf("recreated: topic %q", st.TopicName)
	}
}
