package gateway_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend/localstore"
	"github.com/disgw/disgw/gateway"
)

// Transactions on the embedded store (txncoord, docs/transactions.md),
// driven by franz-go's transactional producer and read_committed consumer.

func txnTopic(t *testing.T, g *testGateway, name string, parts int32) {
	t.Helper()
	adm := kadm.NewClient(g.client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, name); err != nil {
		t.Fatal(err)
	}
}

// produceTxn writes the values in one transaction of cl, spread over the
// topic's partitions, and commits or aborts it.
func produceTxn(t *testing.T, cl *kgo.Client, topic string, commit bool, values ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i, v := range values {
		r := &kgo.Record{Topic: topic, Value: []byte(v), Partition: int32(i % 3)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit %v): %v", commit, err)
	}
}

// readAll reads topic from the start with the isolation level until it has
// want records or 10 s pass, and returns the values sorted.
func readAll(t *testing.T, g *testGateway, topic string, committed bool, want int) []string {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := g.client(t, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	// A little longer: anything past want is a failure too.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	cancel()
	sort.Strings(got)
	return got
}

func vals(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	return out
}

func TestTxnCommitAbortReadCommitted(t *testing.T) {
	g := startGateway(t)
	txnTopic(t, g, "tx", 3)
	p := g.client(t, kgo.TransactionalID("tx-a"), kgo.DefaultProduceTopic("tx"))
	produceTxn(t, p, "tx", true, vals("c1", 9)...)
	produceTxn(t, p, "tx", false, vals("ab", 7)...)
	produceTxn(t, p, "tx", true, vals("c2", 5)...)

	want := append(vals("c1", 9), vals("c2", 5)...)
	sort.Strings(want)
	if got := readAll(t, g, "tx", true, len(want)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read_committed got %d records %v, want %v", len(got), got, want)
	}
	all := append(append([]string{}, want...), vals("ab", 7)...)
	sort.Strings(all)
	if got := readAll(t, g, "tx", false, len(all)); fmt.Sprint(got) != fmt.Sprint(all) {
		t.Fatalf("read_uncommitted got %d records %v, want %v", len(got), got, all)
	}
}

// TestTxnOpenHoldsLastStableOffset: records of an open transaction are not
// read with read_committed, ListOffsets read_committed answers the last
// stable offset, and both move once it commits.
func TestTxnOpenHoldsLastStableOffset(t *testing.T) {
	g := startGateway(t)
	txnTopic(t, g, "tx", 3)
	plain := g.client(t, kgo.DefaultProduceTopic("tx"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("before"), Partition: 0}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p := g.client(t, kgo.TransactionalID("tx-open"), kgo.DefaultProduceTopic("tx"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("in-txn"), Partition: 0}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A plain record after the transaction's waits for it (the last stable
	// offset is the transaction's first offset).
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("after"), Partition: 0}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(g.client(t))
	committed := func() int64 {
		lo, err := adm.ListCommittedOffsets(ctx, "tx")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := lo.Lookup("tx", 0)
		return o.Offset
	}
	end, err := adm.ListEndOffsets(ctx, "tx")
	if err != nil {
		t.Fatal(err)
	}
	if hw, _ := end.Lookup("tx", 0); hw.Offset != 3 {
		t.Fatalf("high watermark %d, want 3", hw.Offset)
	}
	if lso := committed(); lso != 1 {
		t.Fatalf("read_committed end offset %d, want 1 (the open transaction's first offset)", lso)
	}
	if got := readAll(t, g, "tx", true, 2); fmt.Sprint(got) != "[before]" {
		t.Fatalf("read_committed during the transaction: %v, want [before]", got)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if lso := committed(); lso != 4 {
		t.Fatalf("read_committed end offset after commit %d, want 4 (after the marker)", lso)
	}
	if got := readAll(t, g, "tx", true, 3); fmt.Sprint(got) != "[after before in-txn]" {
		t.Fatalf("read_committed after the commit: %v", got)
	}
}

// TestTxnZombieFenced: a second producer with the same transactional id
// fences the first, whose open transaction is aborted and whose later
// writes and commit are refused.
func TestTxnZombieFenced(t *testing.T) {
	g := startGateway(t)
	txnTopic(t, g, "tx", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opts := []kgo.Opt{kgo.TransactionalID("tx-z"), kgo.DefaultProduceTopic("tx"), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	old := g.client(t, opts...)
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie-1"), Partition: 1}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fresh := g.client(t, opts...)
	produceTxn(t, fresh, "tx", true, "fresh-0", "fresh-1", "fresh-2")

	err := old.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie-2"), Partition: 1}).FirstErr()
	if err == nil {
		err = old.EndTransaction(ctx, kgo.TryCommit)
	}
	if !errors.Is(err, kerr.InvalidProducerEpoch) && !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("zombie's write or commit: %v, want INVALID_PRODUCER_EPOCH or PRODUCER_FENCED", err)
	}
	if got := readAll(t, g, "tx", true, 3); fmt.Sprint(got) != "[fresh-0 fresh-1 fresh-2]" {
		t.Fatalf("read_committed: %v", got)
	}
}

// TestTxnTimeoutAborts: a producer that writes to three partitions and
// stops is aborted at its transaction timeout; read_committed consumers
// move past it and never see it, read_uncommitted ones see it.
func TestTxnTimeoutAborts(t *testing.T) {
	g := startGateway(t, func(c *gateway.Config) { c.TransactionCheckInterval = 50 * time.Millisecond })
	txnTopic(t, g, "tx", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := g.client(t, kgo.TransactionalID("tx-t"), kgo.DefaultProduceTopic("tx"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(time.Second))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("dead-%d", i)), Partition: int32(i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	plain := g.client(t, kgo.DefaultProduceTopic("tx"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 3 {
		if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("live-%d", i)), Partition: int32(i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// No EndTransaction: the coordinator aborts it after 1 s.
	if got := readAll(t, g, "tx", true, 3); fmt.Sprint(got) != "[live-0 live-1 live-2]" {
		t.Fatalf("read_committed: %v, want the three plain records", got)
	}
	if got := readAll(t, g, "tx", false, 6); len(got) != 6 {
		t.Fatalf("read_uncommitted: %v, want all six", got)
	}
}

// TestTxnSurvivesRestart: a transaction's state is in the store: after a
// restart the committed records stay readable, a transaction left open at
// the stop still holds the last stable offset back (its records are not
// read), and the next producer of its transactional id aborts it.
func TestTxnSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	short := func(c *gateway.Config) { c.TransactionCheckInterval = 50 * time.Millisecond }
	g := startGatewayAt(t, dir, short)
	txnTopic(t, g, "tx", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := g.client(t, kgo.TransactionalID("tx-r"), kgo.DefaultProduceTopic("tx"), kgo.TransactionTimeout(time.Minute))
	produceTxn(t, p, "tx", true, vals("kept", 6)...)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range vals("open", 3) {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	p.Close()
	g.stop(t)

	g = startGatewayAt(t, dir, short)
	want := vals("kept", 6)
	if got := readAll(t, g, "tx", true, 6); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read_committed after restart: %v, want %v", got, want)
	}
	p2 := g.client(t, kgo.TransactionalID("tx-r"), kgo.DefaultProduceTopic("tx"))
	produceTxn(t, p2, "tx", true, vals("again", 3)...)
	want = append(want, vals("again", 3)...)
	sort.Strings(want)
	if got := readAll(t, g, "tx", true, len(want)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read_committed: %v, want %v", got, want)
	}
}

// TestTxnConsumeTransformProduce: franz-go's GroupTransactSession moves
// records from one topic to another exactly once, its offsets committed
// with its transactions.
func TestTxnConsumeTransformProduce(t *testing.T) {
	g := startGateway(t)
	txnTopic(t, g, "in", 3)
	txnTopic(t, g, "out", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	src := g.client(t, kgo.DefaultProduceTopic("in"))
	const n = 300
	for i := range n {
		src.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("r-%03d", i))}, nil)
	}
	if err := src.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(g.addr), kgo.TransactionalID("etl"),
		kgo.ConsumerGroup("etl-group"), kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	moved := 0
	for moved < n && ctx.Err() == nil {
		fs := sess.PollFetches(ctx)
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Value: append([]byte("out-"), r.Value...)}, nil)
			moved++
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatal(err)
		}
		if !committed {
			t.Log("transaction aborted (rebalance), the records come again")
		}
	}
	got := readAll(t, g, "out", true, n)
	if len(got) != n {
		t.Fatalf("out has %d records, want %d", len(got), n)
	}
	for i := 1; i < len(got); i++ {
		if got[i] == got[i-1] {
			t.Fatalf("%s twice in out", got[i])
		}
	}
	adm := kadm.NewClient(g.client(t))
	offs, err := adm.FetchOffsets(ctx, "etl-group")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != n {
		t.Fatalf("etl-group committed %d in all, want %d", sum, n)
	}
}

// TestTxnCompactedTopic: the log cleaner of a compacted topic keeps to
// transactions as Kafka's does: an aborted record supersedes nothing (it is
// dropped), and a record of a transaction still open supersedes nothing
// either (the cleaner stops at the last stable offset). read_committed then
// reads each key's last committed value.
func TestTxnCompactedTopic(t *testing.T) {
	g := startGatewayStore(t, t.TempDir(), localstore.Options{CleanerInterval: 50 * time.Millisecond}, nil)
	adm := kadm.NewClient(g.client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := map[string]*string{"cleanup.policy": ptrTo("compact"), "segment.ms": ptrTo("100"),
		"min.cleanable.dirty.ratio": ptrTo("0.01"), "min.compaction.lag.ms": ptrTo("0")}
	if _, err := adm.CreateTopic(ctx, 1, 1, cfg, "ctx"); err != nil {
		t.Fatal(err)
	}
	p := g.client(t, kgo.TransactionalID("tx-c"), kgo.DefaultProduceTopic("ctx"))
	write := func(commit bool, kvs ...string) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(kvs); i += 2 {
			if err := p.ProduceSync(ctx, &kgo.Record{Key: []byte(kvs[i]), Value: []byte(kvs[i+1])}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	write(true, "a", "a1", "b", "b1")
	write(false, "a", "a2-aborted")
	write(true, "b", "b2")
	// An open transaction's record of a: not decided while the cleaner runs.
	open := g.client(t, kgo.TransactionalID("tx-open"), kgo.DefaultProduceTopic("ctx"))
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := open.ProduceSync(ctx, &kgo.Record{Key: []byte("a"), Value: []byte("a3-open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A plain record after it, so that the segment holding everything above
	// is sealed (segment.ms) and cleaned.
	plain := g.client(t, kgo.DefaultProduceTopic("ctx"))
	time.Sleep(300 * time.Millisecond)
	if err := plain.ProduceSync(ctx, &kgo.Record{Key: []byte("c"), Value: []byte("c1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Wait until a pass has cleaned: b1 gone from a read_uncommitted read.
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := readAll(t, g, "ctx", false, 100)
		if !slices.Contains(got, "b1") {
			if slices.Contains(got, "a2-aborted") {
				t.Fatalf("the aborted record stayed through a cleaning pass: %v", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not cleaned after 30 s: %v", got)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := readAll(t, g, "ctx", true, 2); fmt.Sprint(got) != "[a1 b2]" {
		t.Fatalf("read_committed after cleaning with a transaction open: %v, want [a1 b2]", got)
	}
	if err := open.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, g, "ctx", true, 3); fmt.Sprint(got) != "[a1 b2 c1]" {
		t.Fatalf("read_committed after the abort: %v, want [a1 b2 c1]", got)
	}
}

// TestTxnWriteMarkersAbort: WriteTxnMarkers (what kafka-transactions.sh
// abort sends) ends an open transaction on one partition by hand: its
// records there stay hidden from read_committed readers, which move past
// them at once.
func TestTxnWriteMarkersAbort(t *testing.T) {
	g := startGateway(t)
	txnTopic(t, g, "tx", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := g.client(t, kgo.TransactionalID("tx-hang"), kgo.DefaultProduceTopic("tx"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("hanging"), Partition: 0}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	plain := g.client(t, kgo.DefaultProduceTopic("tx"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("after"), Partition: 0}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(g.client(t))
	ps, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"tx": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var pid int64 = -1
	var epoch int16
	ps.EachProducer(func(s kadm.DescribedProducer) {
		if s.CurrentTxnStartOffset == 0 {
			pid, epoch = s.ProducerID, s.ProducerEpoch
		}
	})
	if pid < 0 {
		t.Fatalf("DescribeProducers shows no open transaction starting at 0: %+v", ps)
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed = pid, epoch, -1, false
	m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "tx", Partitions: []int32{0}}}
	req.Markers = append(req.Markers, m)
	resp, err := req.RequestWith(ctx, g.client(t))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("WriteTxnMarkers: %v", kerr.ErrorForCode(code))
	}
	if got := readAll(t, g, "tx", true, 1); fmt.Sprint(got) != "[after]" {
		t.Fatalf("read_committed after the abort by hand: %v, want [after]", got)
	}
}

// markersIn reads partition 0 of topic from its start (Fetch v12,
// read_uncommitted, raw batches) and returns its COMMIT and ABORT markers
// that still hold their control record.
func markersIn(t *testing.T, g *testGateway, topic string) (commits, aborts int) {
	t.Helper()
	r := g.raw(t)
	for off := int64(0); ; {
		resp := r.roundTrip(12, fetchReq(topic, 0, off, 0, 1)).(*kmsg.FetchResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("fetch %s at %d: %v", topic, off, kerr.ErrorForCode(p.ErrorCode))
		}
		raw := p.RecordBatches
		if len(raw) == 0 {
			return commits, aborts
		}
		for len(raw) >= 12 {
			n := int(binary.BigEndian.Uint32(raw[8:12])) + 12
			if n > len(raw) {
				break
			}
			var b kmsg.RecordBatch
			if err := b.ReadFrom(raw[:n]); err != nil {
				t.Fatal(err)
			}
			raw = raw[n:]
			off = max(off, b.FirstOffset+int64(b.LastOffsetDelta)+1)
			if b.Attributes&0x20 == 0 || b.NumRecords == 0 {
				continue
			}
			// The control record's key: version, then type (0 ABORT, 1 COMMIT).
			var rec kmsg.Record
			if err := rec.ReadFrom(b.Records); err != nil {
				t.Fatal(err)
			}
			if len(rec.Key) >= 4 && binary.BigEndian.Uint16(rec.Key[2:]) == 1 {
				commits++
			} else {
				aborts++
			}
		}
	}
}

// TestTxnCompactedMarkersRemoved: the log cleaner removes a COMMIT marker
// once its transaction has no record left in the partition and
// delete.retention.ms has passed (Kafka's cleaner, KIP-534's delete
// horizon), so that a compacted topic written by a transactional producer
// (a Kafka Streams changelog under exactly_once_v2) does not keep a
// marker per commit forever; a marker whose transaction's record is still
// the latest of its key stays, and so does every ABORT marker.
func TestTxnCompactedMarkersRemoved(t *testing.T) {
	g := startGatewayStore(t, t.TempDir(), localstore.Options{CleanerInterval: 50 * time.Millisecond}, nil)
	adm := kadm.NewClient(g.client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := map[string]*string{"cleanup.policy": ptrTo("compact"), "segment.ms": ptrTo("100"),
		"min.cleanable.dirty.ratio": ptrTo("0.01"), "min.compaction.lag.ms": ptrTo("0"), "delete.retention.ms": ptrTo("100")}
	if _, err := adm.CreateTopic(ctx, 1, 1, cfg, "ctm"); err != nil {
		t.Fatal(err)
	}
	p := g.client(t, kgo.TransactionalID("tx-m"), kgo.DefaultProduceTopic("ctm"))
	write := func(commit bool, k, v string) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, &kgo.Record{Key: []byte(k), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	write(true, "a", "a1")
	write(true, "a", "a2")
	write(true, "a", "a3")
	write(false, "a", "a4-aborted")
	write(true, "b", "b1")
	if c, a := markersIn(t, g, "ctm"); c != 4 || a != 1 {
		t.Fatalf("before cleaning: %d COMMIT and %d ABORT markers, want 4 and 1", c, a)
	}
	// Plain records keep sealing segments (segment.ms) and making dirty
	// sections, so that passes go on.
	plain := g.client(t, kgo.DefaultProduceTopic("ctm"))
	deadline := time.Now().Add(40 * time.Second)
	for i := 0; ; i++ {
		if err := plain.ProduceSync(ctx, &kgo.Record{Key: []byte("c"), Value: fmt.Appendf(nil, "c%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		c, a := markersIn(t, g, "ctm")
		if c < 2 || a != 1 {
			t.Fatalf("after cleaning: %d COMMIT and %d ABORT markers, want 2 (of a3's and b1's transactions) and 1", c, a)
		}
		if c == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d COMMIT markers after 40 s, want 2: the markers of a1's and a2's transactions stay", c)
		}
		time.Sleep(150 * time.Millisecond)
	}
	got := readAll(t, g, "ctm", true, 3)
	if len(got) < 3 || got[0] != "a3" || got[1] != "b1" || !strings.HasPrefix(got[2], "c") {
		t.Fatalf("read_committed after the markers went: %v, want [a3 b1 c...]", got)
	}
}
