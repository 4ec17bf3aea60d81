package txncoord

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memBackend is a Backend in memory: records by key, partitions as lists
// of batches. failAppends and failSaves make its writes fail.
type memBackend struct {
	mu          sync.Mutex
	recs        map[string][]byte
	parts       map[string][]batch.Header // stream/partition -> batches in order
	next        map[string]int64
	pid         int64
	failAppends bool
	failSaves   bool
}

func newMem() *memBackend {
	return &memBackend{recs: map[string][]byte{}, parts: map[string][]batch.Header{}, next: map[string]int64{}}
}

var errBroken = errors.New("broken on purpose")

func (m *memBackend) SaveTxnRecord(_ context.Context, key string, value []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failSaves {
		return errBroken
	}
	if value == nil {
		delete(m.recs, key)
	} else {
		m.recs[key] = append([]byte(nil), value...)
	}
	return nil
}

func (m *memBackend) TxnRecords(context.Context) (map[string][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range m.recs {
		out[k] = v
	}
	return out, nil
}

func (m *memBackend) InitProducerID(context.Context) (int64, int16, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pid++
	return m.pid, 0, nil
}

func pkey(stream string, part int32) string { return stream + "/" + string(rune('0'+part)) }

func (m *memBackend) Append(stream string, part int32, b disbackend.Batch) *disbackend.Pending {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := disbackend.NewPending()
	if m.failAppends {
		p.Complete(disbackend.AppendResult{}, errBroken)
		return p
	}
	k := pkey(stream, part)
	off := m.next[k]
	m.next[k] = off + int64(b.NumRecords)
	h := b.Header
	h.BaseOffset = off
	m.parts[k] = append(m.parts[k], h)
	p.Complete(disbackend.AppendResult{BaseOffset: off}, nil)
	return p
}

func (m *memBackend) Range(stream string, part int32) (disbackend.PartitionRange, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return disbackend.PartitionRange{Next: m.next[pkey(stream, part)]}, nil
}

// markers returns the control batches of a partition: true for COMMIT.
func (m *memBackend) markers(stream string, part int32) []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int64
	for _, h := range m.parts[pkey(stream, part)] {
		if h.Attributes&batch.AttrControl != 0 {
			out = append(out, h.BaseOffset)
		}
	}
	return out
}

type memTopics struct{}

var topicID = [16]byte{1}

func (memTopics) Topic(_ context.Context, name string) (Topic, bool) {
	if name != "t" {
		return Topic{}, false
	}
	return Topic{Stream: "t", ID: topicID, Partitions: 2}, true
}

type memGroups struct {
	mu        sync.Mutex
	committed map[string]int64
}

func (*memGroups) ValidateTxnCommit(string, int32, string, *string) int16 { return 0 }

func (g *memGroups) CommitTxnOffsets(_ context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	g.mu.Lock()
	defer g.mu.Unlock()
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		for _, p := range t.Partitions {
			g.committed[req.Group+"/"+t.Topic] = p.Offset
			rt.Partitions = append(rt.Partitions, kmsg.NewOffsetCommitResponseTopicPartition())
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func start(t *testing.T, be *memBackend, groups *memGroups) *Coordinator {
	t.Helper()
	c, err := New(context.Background(), Config{CheckInterval: 10 * time.Millisecond}, be, memTopics{}, groups)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func initTxn(t *testing.T, c *Coordinator, id string) (int64, int16) {
	t.Helper()
	r := kmsg.NewPtrInitProducerIDRequest()
	r.TransactionalID, r.TransactionTimeoutMillis, r.ProducerID, r.ProducerEpoch = &id, 60000, -1, -1
	resp := c.InitProducerID(context.Background(), r)
	if resp.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.ProducerID, resp.ProducerEpoch
}

func addParts(c *Coordinator, id string, pid int64, epoch int16, parts ...int32) int16 {
	r := kmsg.NewPtrAddPartitionsToTxnRequest()
	r.Version, r.TransactionalID, r.ProducerID, r.ProducerEpoch = 3, id, pid, epoch
	r.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "t", Partitions: parts}}
	resp := c.AddPartitions(context.Background(), r)
	return resp.Topics[0].Partitions[0].ErrorCode
}

func endTxn(c *Coordinator, id string, pid int64, epoch int16, commit bool) int16 {
	r := kmsg.NewPtrEndTxnRequest()
	r.Version, r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit = 3, id, pid, epoch, commit
	return c.EndTxn(context.Background(), r).ErrorCode
}

// TestRestartFinishesPrepare: an EndTxn whose markers cannot be written
// leaves PrepareCommit saved and answers CONCURRENT_TRANSACTIONS; a
// coordinator started on the same state (a restart) writes the markers,
// applies the offsets and completes the commit, and the last stable offset
// then moves.
func TestRestartFinishesPrepare(t *testing.T) {
	be, groups := newMem(), &memGroups{committed: map[string]int64{}}
	c := start(t, be, groups)
	pid, epoch := initTxn(t, c, "x")
	if code := addParts(c, "x", pid, epoch, 0, 1); code != 0 {
		t.Fatalf("AddPartitionsToTxn: %v", kerr.ErrorForCode(code))
	}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = "x", pid, epoch, "g"
	if code := c.AddOffsets(context.Background(), ao).ErrorCode; code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	toc := kmsg.NewPtrTxnOffsetCommitRequest()
	toc.TransactionalID, toc.Group, toc.ProducerID, toc.ProducerEpoch, toc.Generation = "x", "g", pid, epoch, -1
	toc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7}}}}
	if code := c.TxnOffsetCommit(context.Background(), toc).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	be.Append("t", 0, disbackend.Batch{Header: batch.Header{NumRecords: 3}}) // the transaction's records
	if lso := c.LastStableOffset(topicID, 0, 3); lso != 0 {
		t.Fatalf("last stable offset %d during the transaction, want 0", lso)
	}
	be.failAppends = true
	c.Close() // no loop behind the test's back
	if code := endTxn(c, "x", pid, epoch, true); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("EndTxn with markers failing: %v, want CONCURRENT_TRANSACTIONS", kerr.ErrorForCode(code))
	}
	if d, _ := c.Describe("x"); d.State != PrepareCommit {
		t.Fatalf("state %v, want PrepareCommit", d.State)
	}
	be.failAppends = false
	c2 := start(t, be, groups) // the restart
	if lso := c2.LastStableOffset(topicID, 0, 3); lso != 0 {
		t.Fatalf("last stable offset %d after the restart, before the markers, want 0", lso)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if d, _ := c2.Describe("x"); d.State == CompleteCommit {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the restarted coordinator did not complete the commit")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if m := be.markers("t", 0); len(m) != 1 || m[0] != 3 {
		t.Fatalf("markers of t/0 at %v, want [3]", m)
	}
	if n := c2.LastStableOffset(topicID, 0, 4); n != 4 {
		t.Fatalf("last stable offset %d after the commit, want 4", n)
	}
	groups.mu.Lock()
	defer groups.mu.Unlock()
	if groups.committed["g/t"] != 7 {
		t.Fatalf("committed offsets %v, want g/t 7", groups.committed)
	}
}

// TestSaveFailureChangesNothing: an AddPartitionsToTxn whose state cannot
// be saved answers COORDINATOR_NOT_AVAILABLE and holds no last stable
// offset back.
func TestSaveFailureChangesNothing(t *testing.T) {
	be := newMem()
	c := start(t, be, &memGroups{committed: map[string]int64{}})
	pid, epoch := initTxn(t, c, "x")
	be.failSaves = true
	if code := addParts(c, "x", pid, epoch, 0); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("AddPartitionsToTxn with saves failing: %v", kerr.ErrorForCode(code))
	}
	if lso := c.LastStableOffset(topicID, 0, 5); lso != 5 {
		t.Fatalf("last stable offset %d, want 5 (nothing open)", lso)
	}
	if _, code := c.VerifyProduce(context.Background(), "x", pid, epoch, topicID, 0); code != kerr.InvalidTxnState.Code {
		t.Fatalf("produce verified after a failed add: %v", kerr.ErrorForCode(code))
	}
}

// TestEpochExhausted: once the epoch reaches its last value, the next
// InitProducerId gives a new producer id at epoch 0 (Kafka).
func TestEpochExhausted(t *testing.T) {
	be := newMem()
	c := start(t, be, &memGroups{committed: map[string]int64{}})
	pid, _ := initTxn(t, c, "x")
	tx, _ := c.lookup(context.Background(), "x")
	c.update(tx, func(r *record) { r.Epoch = math.MaxInt16 - 1 })
	tx.mu.Unlock()
	pid2, epoch2 := initTxn(t, c, "x")
	if pid2 == pid || epoch2 != 0 {
		t.Fatalf("after the last epoch: producer %d epoch %d, want a new producer at epoch 0", pid2, epoch2)
	}
}

// FuzzLoad: a record read back, whatever its bytes, is loaded or skipped,
// never a panic.
func FuzzLoad(f *testing.F) {
	f.Add("t/x", []byte(`{"v":1,"id":"x","pid":3,"epoch":1,"state":1,"partitions":[{"topic":"t","stream":"t","partition":0,"first_offset":4}]}`))
	f.Add("a/01000000000000000000000000000000/0/3/4", []byte(`{"stream":"t","last":9}`))
	f.Add("a/zz/0/3/4", []byte(`{}`))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		c := &Coordinator{txns: map[string]*txn{}, open: map[partKey]map[*txn]int64{}, aborted: map[partKey][]Aborted{},
			streams: map[partKey]string{}, ids: map[string][16]byte{}}
		_ = c.load(key, value)
	})
}
