package txncoord

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
)

// sharedMem is the records two coordinators share (disbackend.TxnShared)
// over one memBackend: every save reaches every watcher at once unless
// held (then at the next CatchUpTxns), as DIS's stream reaches the nodes
// at their next read. fresh is the high watermark FreshRange answers
// (-1: the backend's).
type sharedMem struct {
	*memBackend
	mu       sync.Mutex
	watchers []func(string, []byte)
	hold     bool
	held     [][2]any
	fresh    int64
}

type sharedNode struct {
	*sharedMem
	watch func(string, []byte)
	// abortedFirst: TxnRecords gives the aborted ranges before the
	// transactions' records (else after).
	abortedFirst bool
}

// TxnRecords gives the watcher every record, as a store's first read does.
func (n *sharedNode) TxnRecords(ctx context.Context) (map[string][]byte, error) {
	recs, err := n.memBackend.TxnRecords(ctx)
	if err != nil {
		return nil, err
	}
	keys := slices.Sorted(maps.Keys(recs)) // "a/..." before "t/..."
	if !n.abortedFirst {
		slices.Reverse(keys)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, k := range keys {
		n.watch(k, recs[k])
	}
	return recs, nil
}

func (n *sharedNode) WatchTxnRecords(f func(string, []byte)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.watch = f
	n.watchers = append(n.watchers, f)
}

func (n *sharedNode) SaveTxnRecord(ctx context.Context, key string, value []byte) error {
	if err := n.memBackend.SaveTxnRecord(ctx, key, value); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.hold {
		n.held = append(n.held, [2]any{key, value})
		n.watch(key, value) // the writer has its own save
		return nil
	}
	for _, w := range n.watchers {
		w(key, value)
	}
	return nil
}

func (n *sharedNode) CatchUpTxns(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, h := range n.held {
		for _, w := range n.watchers {
			w(h[0].(string), h[1].([]byte))
		}
	}
	n.held = nil
	return nil
}

func (n *sharedNode) TxnRecord(ctx context.Context, key string) ([]byte, error) {
	if err := n.CatchUpTxns(ctx); err != nil {
		return nil, err
	}
	n.memBackend.mu.Lock()
	defer n.memBackend.mu.Unlock()
	return n.recs[key], nil
}

func (n *sharedNode) FreshRange(_ context.Context, stream string, part int32) (disbackend.PartitionRange, error) {
	n.mu.Lock()
	f := n.fresh
	n.mu.Unlock()
	if f >= 0 {
		return disbackend.PartitionRange{Next: f}, nil
	}
	return n.memBackend.Range(stream, part)
}

// coordinatorOf starts node a's coordinator of every transactional id, a
// follower of every partition, whose markers the coordinator *leader
// writes (LeaderMarker, as WriteTxnMarkers would reach it).
func coordinatorOf(t *testing.T, a *sharedNode, groups *memGroups, leader **Coordinator) *Coordinator {
	t.Helper()
	c, err := New(context.Background(), Config{Shared: a, Owns: func(string) bool { return true },
		Leads: func(string, int32) bool { return false },
		SendMarker: func(ctx context.Context, topic string, part int32, pid int64, epoch int16, commit bool) error {
			if code := (*leader).LeaderMarker(ctx, topic, part, pid, epoch, commit); code != 0 {
				return kerr.ErrorForCode(code)
			}
			return nil
		}}, a, memTopics{}, groups)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestSharedLeader: two nodes; A coordinates every transactional id, B
// leads partition 0 and writes its markers (SendMarker calls B's
// LeaderMarker).
//
//   - B's last stable offset never goes back: a transaction B learns of
//     with a saved first offset (the high watermark A read, 90) below what
//     B has answered (100) starts at 100 there.
//   - A produce B refuses at first (the add not read yet) is accepted
//     after B reads the records to their end.
//   - The marker B writes ends the transaction on the partition at once,
//     and the transaction's records read again (same Seq) do not open it
//     again; the next transaction (Seq + 1) does.
//   - An ABORT saves the aborted range at B, which A reads too.
func TestSharedLeader(t *testing.T) {
	sm := &sharedMem{memBackend: newMem(), fresh: 90}
	a, b := &sharedNode{sharedMem: sm}, &sharedNode{sharedMem: sm}
	var cb *Coordinator
	groups := &memGroups{committed: map[string]int64{}}
	ca := coordinatorOf(t, a, groups, &cb)
	cb, err := New(context.Background(), Config{Shared: b, Owns: func(string) bool { return false },
		Leads: func(string, int32) bool { return true }}, b, memTopics{}, groups)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cb.Close)
	ctx := context.Background()
	// A read_committed answer of B, the leader.
	answer := func(hw int64) int64 {
		lso := cb.LastStableOffset(topicID, 0, hw)
		cb.Answered(topicID, 0, lso)
		return lso
	}

	if lso := answer(100); lso != 100 {
		t.Fatalf("no transaction: last stable offset %d, want 100", lso)
	}
	// What a read_uncommitted Fetch shows (any node) bounds nothing.
	cb.LastStableOffset(topicID, 0, 110)
	pid, epoch := initTxn(t, ca, "x")
	sm.mu.Lock()
	sm.hold = true // B has not read A's add yet
	sm.mu.Unlock()
	if code := addParts(ca, "x", pid, epoch, 0); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if _, code := cb.verify("x", pid, epoch, topicID, 0); code == 0 {
		t.Fatal("B verified a produce of a transaction it had not read")
	}
	release, code := cb.VerifyProduce(ctx, "x", pid, epoch, topicID, 0)
	if code != 0 {
		t.Fatalf("B refused the produce after reading the records: %v", kerr.ErrorForCode(code))
	}
	release()
	sm.mu.Lock()
	sm.hold = false
	sm.mu.Unlock()
	if lso := answer(120); lso != 100 {
		t.Fatalf("transaction open (saved first offset 90, 100 answered before): last stable offset %d, want 100", lso)
	}
	if code := endTxn(ca, "x", pid, epoch, false); code != 0 {
		t.Fatalf("EndTxn abort: %v", kerr.ErrorForCode(code))
	}
	if lso := answer(130); lso != 130 {
		t.Fatalf("after the ABORT marker: last stable offset %d, want 130", lso)
	}
	for name, c := range map[string]*Coordinator{"A": ca, "B": cb} {
		if l := c.AbortedIn(topicID, 0, 0, 1000); len(l) != 1 || l[0].ProducerID != pid || l[0].FirstOffset != 100 {
			t.Errorf("%s's aborted ranges: %+v, want one of producer %d from 100", name, l, pid)
		}
	}
	// The transaction's records again (a late copy, the same Seq): still
	// ended at B.
	ca.mu.Lock()
	tx := ca.txns["x"]
	rec := tx.rec
	ca.mu.Unlock()
	rec.State, rec.Parts = PrepareAbort, []txnPart{{Topic: "t", Stream: "t", TopicID: topicID, Partition: 0, FirstOffset: 90}}
	cb.mu.Lock()
	cb.mirror(cb.txns["x"], rec)
	cb.mu.Unlock()
	if lso := answer(140); lso != 140 {
		t.Fatalf("the ended transaction read again: last stable offset %d, want 140", lso)
	}
	// The next transaction opens the partition again.
	sm.mu.Lock()
	sm.fresh = 150
	sm.mu.Unlock()
	if code := addParts(ca, "x", pid, epoch, 0); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if lso := answer(160); lso != 150 {
		t.Fatalf("the next transaction: last stable offset %d, want 150", lso)
	}
	// kafka-transactions.sh abort at B, by hand: ended there, and at a
	// node that leads the partition next, whichever of the transaction's
	// record and the aborted range it reads first.
	sm.memBackend.mu.Lock()
	sm.next[pkey("t", 0)] = 163 // the transaction's records and others', after 150
	sm.memBackend.mu.Unlock()
	if code := cb.LeaderMarker(ctx, "t", 0, pid, epoch, false); code != 0 {
		t.Fatalf("abort by hand: %v", kerr.ErrorForCode(code))
	}
	if lso := answer(165); lso != 165 {
		t.Fatalf("after the abort by hand: last stable offset %d, want 165", lso)
	}
	for _, abortedFirst := range []bool{false, true} {
		n := &sharedNode{sharedMem: sm, abortedFirst: abortedFirst}
		cn, err := New(ctx, Config{Shared: n, Owns: func(string) bool { return false },
			Leads: func(string, int32) bool { return true }}, n, memTopics{}, groups)
		if err != nil {
			t.Fatal(err)
		}
		if lso := cn.LastStableOffset(topicID, 0, 166); lso != 166 {
			t.Errorf("a new leader (aborted ranges read first: %v) after the abort by hand: last stable offset %d, want 166", abortedFirst, lso)
		}
		cn.Close()
	}
	if code := endTxn(ca, "x", pid, epoch, true); code != 0 {
		t.Fatalf("EndTxn commit: %v", kerr.ErrorForCode(code))
	}
	if lso := answer(170); lso != 170 {
		t.Fatalf("after the COMMIT marker: last stable offset %d, want 170", lso)
	}
}

// write appends n records of producer pid (-1: not idempotent) to a
// partition as one batch, transactional or not.
func (m *memBackend) write(stream string, part int32, pid int64, n int32, txn bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := pkey(stream, part)
	h := batch.Header{BaseOffset: m.next[k], LastOffsetDelta: n - 1, ProducerID: pid}
	if txn {
		h.Attributes |= batch.AttrTransactional
	}
	m.parts[k] = append(m.parts[k], h)
	m.next[k] += int64(n)
}

// firstBatch is Config.FirstBatch over the batches' headers.
func (m *memBackend) firstBatch(_ context.Context, stream string, part int32, pid int64, from, to int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, h := range m.parts[pkey(stream, part)] {
		if h.LastOffset() < from || h.BaseOffset >= to {
			continue
		}
		if h.ProducerID == pid && h.Attributes&batch.AttrTransactional != 0 && h.Attributes&batch.AttrControl == 0 {
			return max(h.BaseOffset, from), nil
		}
	}
	return to, nil
}

// TestSharedNewLeader: a node that gains a partition with a transaction
// open there starts the transaction at its first batch, not at the saved
// first offset (the high watermark when the transaction added the
// partition), once it has followed (Follow): the previous leader may have
// answered a last stable offset up to that batch, with other producers'
// records before it. With no batch there yet, the transaction starts at
// the high watermark. An ABORT's aborted range then starts at the batch.
func TestSharedNewLeader(t *testing.T) {
	sm := &sharedMem{memBackend: newMem(), fresh: -1}
	a := &sharedNode{sharedMem: sm}
	groups := &memGroups{committed: map[string]int64{}}
	var cn *Coordinator
	ca := coordinatorOf(t, a, groups, &cn)
	ctx := context.Background()
	sm.write("t", 0, -1, 90, false)
	pid, epoch := initTxn(t, ca, "x")
	if code := addParts(ca, "x", pid, epoch, 0, 1); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	// Partition 0: others' records 90-99, the transaction's 100-104 (its
	// previous leader answered 100), others' 105-109. Partition 1: others'
	// records 0-19 only.
	sm.write("t", 0, 7, 10, false)
	sm.write("t", 0, pid, 5, true)
	sm.write("t", 0, 8, 5, true)
	sm.write("t", 1, 7, 20, false)

	var leads atomic.Bool
	n := &sharedNode{sharedMem: sm}
	cn, err := New(ctx, Config{Shared: n, Owns: func(string) bool { return false },
		Leads: func(string, int32) bool { return leads.Load() }, FirstBatch: sm.firstBatch}, n, memTopics{}, groups)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cn.Close)
	if lso := cn.LastStableOffset(topicID, 0, 110); lso != 90 {
		t.Fatalf("a follower: last stable offset %d, want the saved first offset 90", lso)
	}
	leads.Store(true)
	if err := cn.Follow(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if lso := cn.LastStableOffset(topicID, 0, 110); lso != 100 {
		t.Errorf("the new leader: last stable offset %d, want 100 (the transaction's first batch)", lso)
	}
	if lso := cn.LastStableOffset(topicID, 1, 20); lso != 20 {
		t.Errorf("the new leader, no batch of the transaction: last stable offset %d, want 20", lso)
	}
	// A leader whose partitions' stream is gone meanwhile follows all
	// the same.
	m := &sharedNode{sharedMem: sm}
	cm, err := New(ctx, Config{Shared: m, Owns: func(string) bool { return false }, Leads: func(string, int32) bool { return true },
		FirstBatch: func(context.Context, string, int32, int64, int64, int64) (int64, error) {
			return 0, disbackend.ErrStreamNotFound
		}}, m, memTopics{}, groups)
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	if err := cm.Follow(ctx, 2); err != nil {
		t.Errorf("Follow with the stream gone: %v", err)
	}
	if code := endTxn(ca, "x", pid, epoch, false); code != 0 {
		t.Fatalf("EndTxn abort: %v", kerr.ErrorForCode(code))
	}
	if l := cn.AbortedIn(topicID, 0, 0, 1000); len(l) != 1 || l[0].ProducerID != pid || l[0].FirstOffset != 100 {
		t.Errorf("aborted ranges: %+v, want one of producer %d from 100", l, pid)
	}
}
