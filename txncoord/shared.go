package txncoord

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
)

// Several nodes (docs/transactions.md, "Several nodes"). With
// Config.Shared set, every node runs a Coordinator over the same records
// (disbackend.TxnShared: DIS's __disgw_txns) and plays two parts:
//
//   - The coordinator of the transactional ids it owns (Config.Owns, the
//     owner of disbackend.TxnKey(id)): it serves their requests as on one
//     node, after loading each id it gained (the fence's takeover, then
//     the latest record: lookup, load), and writes their markers through
//     each partition's leader (Config.SendMarker, Kafka's WriteTxnMarkers).
//     A request for an id it does not own gets NOT_COORDINATOR.
//   - The leader of its partitions: every record of every id reaches it
//     (applyShared), so it knows the open transactions of each partition
//     (the last stable offset, produce verification) and the aborted
//     ranges (read_committed Fetch). The markers it writes for the
//     coordinators (LeaderMarker) end a transaction on a partition at once
//     (txn.ended), and it saves the aborted range of each ABORT marker.
//
// A record of an id this node has loaded as its coordinator (txn.auth) is
// not taken from the stream: the node's own memory is newer.

// codeNotCoordinator: a transactional id another node coordinates.
var codeNotCoordinator = kerr.NotCoordinator.Code

// applyShared takes one record of the shared store (its watcher): a
// transactional id's record (unless this node coordinates the id) or an
// aborted range, nil when deleted. Called with the store's lock held: it
// takes c.mu and calls nothing.
func (c *Coordinator) applyShared(key string, value []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case strings.HasPrefix(key, "t/"):
		id := key[2:]
		t := c.txns[id]
		if t != nil && t.auth {
			return
		}
		if value == nil {
			if t != nil {
				c.closeParts(t)
				delete(c.txns, id)
				t.gone = true
			}
			return
		}
		var r record
		if err := json.Unmarshal(value, &r); err != nil {
			c.log.Warn("transaction record unreadable, skipped", zap.String("key", key), zap.Error(err))
			return
		}
		if t == nil {
			t = &txn{}
			c.txns[id] = t
		}
		c.mirror(t, r)
	case strings.HasPrefix(key, "a/"):
		pk, a, err := parseAbortedKey(key)
		if err != nil {
			return
		}
		if value == nil {
			c.aborted[pk] = slices.DeleteFunc(c.aborted[pk], func(x Aborted) bool {
				return x.ProducerID == a.ProducerID && x.FirstOffset == a.FirstOffset
			})
			if len(c.aborted[pk]) == 0 {
				delete(c.aborted, pk)
				delete(c.streams, pk)
			}
			return
		}
		var ar abortedRecord
		if err := json.Unmarshal(value, &ar); err != nil {
			return
		}
		a.LastOffset = ar.Last
		c.addAbortedLocked(pk, ar.Stream, a)
		for t := range c.open[pk] {
			if !t.auth && c.abortedAfter(pk, t, &t.rec) {
				c.endOn(pk, t, t.rec.Seq)
			}
		}
	}
}

// abortedAfter reports whether an ABORT marker of r's producer at or past
// r's saved first offset on pk is known (an aborted range, saved by the
// leader that wrote it): the transaction ended there, whoever led the
// partition then (`kafka-transactions.sh abort` by hand, or the
// coordinator's marker before its Complete record). A marker of the
// producer's earlier transactions lies below that first offset: the
// coordinator read it from the store after they ended. Requires c.mu.
func (c *Coordinator) abortedAfter(pk partKey, t *txn, r *record) bool {
	i := slices.IndexFunc(r.Parts, func(p txnPart) bool { return p.key() == pk })
	if i < 0 {
		return false
	}
	for _, a := range c.aborted[pk] {
		if a.ProducerID == r.PID && a.LastOffset >= r.Parts[i].FirstOffset {
			return true
		}
	}
	return false
}

// endOn ends t's transaction seq on partition pk at this node (a marker
// written or known): the partition leaves the open index until the next
// transaction. Requires c.mu.
func (c *Coordinator) endOn(pk partKey, t *txn, seq int64) {
	if t.ended == nil {
		t.ended = map[partKey]int64{}
	}
	t.ended[pk] = seq + 1
	if _, ok := c.open[pk][t]; ok && t.rec.Seq == seq {
		c.unopen(pk, t)
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

// mirror makes r t's record and indexes its open partitions. A partition
// already open for the same transaction (r.Seq) keeps its first offset; a
// new one starts at the larger of the saved first offset and the highest
// last stable offset this node answered for the partition, so that the
// last stable offset it answers never goes back (the saved offset is the
// high watermark the coordinator read; no batch of the transaction came
// before this node knew of it, as the produce verification needs it). A
// partition this node ended with a marker (ended) stays ended for that
// transaction. Requires c.mu.
func (c *Coordinator) mirror(t *txn, r record) {
	firsts := map[partKey]int64{} // the partitions closed here, with their first offsets
	for i := range t.rec.Parts {
		pk := t.rec.Parts[i].key()
		if f, ok := c.open[pk][t]; ok {
			firsts[pk] = f
			c.unopen(pk, t)
		}
	}
	same := t.rec.Seq == r.Seq
	t.rec = r
	if open(r.State) {
		for i := range r.Parts {
			p := r.Parts[i]
			pk := p.key()
			if t.ended[pk] == r.Seq+1 || c.abortedAfter(pk, t, &r) {
				continue
			}
			if f, ok := firsts[pk]; ok && same {
				p.FirstOffset = f
				delete(firsts, pk)
			} else {
				p.FirstOffset = max(p.FirstOffset, c.answered(pk))
			}
			c.openPart(t, &p)
		}
	}
	if len(firsts) > 0 { // a last stable offset may have moved up
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

// answered is the highest last stable offset this node answered for pk
// (-1: none).
func (c *Coordinator) answered(pk partKey) int64 {
	if v, ok := c.lso.Load(pk); ok {
		return v.(*atomic.Int64).Load()
	}
	return -1
}

// Answered records that this node, as the partition's leader, answered lso
// as its last stable offset to a read_committed Fetch or ListOffsets
// (shared mode; nothing otherwise). Only such answers count: a node that
// is not the leader may not know every open transaction of the partition,
// so what it says of the offset bounds nothing.
func (c *Coordinator) Answered(topicID [16]byte, part int32, lso int64) {
	if c.cfg.Shared != nil {
		c.noteAnswered(partKey{topicID, part}, lso)
	}
}

// noteAnswered records lso as answered for pk (shared mode).
func (c *Coordinator) noteAnswered(pk partKey, lso int64) {
	v, ok := c.lso.Load(pk)
	if !ok {
		n := &atomic.Int64{}
		n.Store(-1)
		v, _ = c.lso.LoadOrStore(pk, n)
	}
	a := v.(*atomic.Int64)
	for {
		cur := a.Load()
		if lso <= cur || a.CompareAndSwap(cur, lso) {
			return
		}
	}
}

// addAbortedLocked indexes an aborted range unless it is known. Requires
// c.mu.
func (c *Coordinator) addAbortedLocked(pk partKey, stream string, a Aborted) {
	l := c.aborted[pk]
	for _, x := range l {
		if x.ProducerID == a.ProducerID && x.FirstOffset == a.FirstOffset {
			return
		}
	}
	c.aborted[pk] = append(l, a)
	sortAborted(c.aborted[pk])
	c.streams[pk] = stream
	c.ids[stream] = pk.id
}

// loadOwned makes this node t's coordinator (shared mode): the fence's takeover
// of the id, then its latest record. Returns 0, NOT_COORDINATOR (another
// node owns it now) or COORDINATOR_NOT_AVAILABLE. Requires t.mu.
func (c *Coordinator) loadOwned(ctx context.Context, t *txn) int16 {
	v, err := c.cfg.Shared.TxnRecord(ctx, "t/"+t.rec.ID)
	if err != nil {
		if errors.Is(err, disbackend.ErrNotCoordinator) {
			return codeNotCoordinator
		}
		c.log.Warn("loading a transactional id failed", zap.String("transactional_id", t.rec.ID), zap.Error(err))
		return codeNotAvailable
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v != nil {
		var r record
		if err := json.Unmarshal(v, &r); err != nil {
			c.log.Warn("transaction record unreadable", zap.String("transactional_id", t.rec.ID), zap.Error(err))
			return codeNotAvailable
		}
		c.mirror(t, r)
	}
	t.auth, t.marked = true, nil
	return 0
}

// Owns reports whether this node coordinates the transactional id
// (always on one node).
func (c *Coordinator) Owns(id string) bool {
	return c.cfg.Owns == nil || c.cfg.Owns(id)
}

// ViewChanged tells the coordinator that Config.Owns may answer otherwise
// (shared mode): an id it no longer owns is followed from the records
// again, and loaded anew if it comes back.
func (c *Coordinator) ViewChanged() {
	if c.cfg.Shared == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, t := range c.txns {
		if t.auth && !c.Owns(id) {
			t.auth = false
		}
	}
}

// Follow makes sure the records of every id, saved before the view of
// cluster epoch epoch began, have reached this node (shared mode; at
// once otherwise): a node must know every transaction open on a partition
// it gained before it answers a read_committed Fetch or ListOffsets of it.
// One catch-up per epoch. Errors: the store's.
func (c *Coordinator) Follow(ctx context.Context, epoch int32) error {
	if c.cfg.Shared == nil || c.followed.Load() >= int64(epoch) {
		return nil
	}
	c.followMu.Lock()
	defer c.followMu.Unlock()
	if c.followed.Load() >= int64(epoch) {
		return nil
	}
	if err := c.cfg.Shared.CatchUpTxns(ctx); err != nil {
		return err
	}
	if err := c.startsLed(ctx); err != nil {
		return err
	}
	c.followed.Store(int64(epoch))
	return nil
}

// gone reports whether err says a stream or partition does not exist.
func gone(err error) bool {
	return errors.Is(err, disbackend.ErrStreamNotFound) || errors.Is(err, disbackend.ErrPartitionNotFound)
}

// startsLed raises the first offset of each transaction open on a
// partition this node leads to where the transaction starts there: its
// first batch (Config.FirstBatch), else the partition's high watermark
// read now (its batches come later). The first offset a node holds for a
// transaction it learned of as a follower is the saved one, the high
// watermark when the transaction added the partition, and other
// producers' records may lie between it and the transaction's first
// batch; the previous leader may have answered a last stable offset up
// to that batch, and this node, now the leader, must not answer a lower
// one. A deleted stream is passed over. Called by Follow after its
// catch-up. Errors: the store's.
func (c *Coordinator) startsLed(ctx context.Context) error {
	if c.cfg.FirstBatch == nil {
		return nil
	}
	type start struct {
		pk     partKey
		stream string
		t      *txn
		seq    int64
		pid    int64
		first  int64
	}
	var starts []start
	c.mu.Lock()
	for pk, m := range c.open {
		for t, first := range m {
			for i := range t.rec.Parts {
				if p := &t.rec.Parts[i]; p.key() == pk && c.cfg.Leads(p.Stream, pk.part) {
					starts = append(starts, start{pk, p.Stream, t, t.rec.Seq, t.rec.PID, first})
					break
				}
			}
		}
	}
	c.mu.Unlock()
	hw := map[partKey]int64{}
	for _, s := range starts {
		to, ok := hw[s.pk]
		if !ok {
			r, err := c.cfg.Shared.FreshRange(ctx, s.stream, s.pk.part)
			if gone(err) {
				continue // deleted: nothing to read there
			}
			if err != nil {
				return err
			}
			to = r.Next
			hw[s.pk] = to
		}
		if s.first >= to {
			continue
		}
		first, err := c.cfg.FirstBatch(ctx, s.stream, s.pk.part, s.pid, s.first, to)
		if gone(err) {
			continue
		}
		if err != nil {
			return err
		}
		c.mu.Lock()
		if cur, ok := c.open[s.pk][s.t]; ok && s.t.rec.Seq == s.seq && first > cur {
			c.open[s.pk][s.t] = first
			c.log.Info("transaction's first offset on a partition this node leads raised to its first batch",
				zap.String("transactional_id", s.t.rec.ID), zap.String("stream", s.stream), zap.Int32("partition", s.pk.part),
				zap.Int64("producer_id", s.pid), zap.Int64("first_offset_before", cur), zap.Int64("first_offset", first))
			close(c.changed) // the last stable offset moved up
			c.changed = make(chan struct{})
		}
		c.mu.Unlock()
	}
	return nil
}

// CatchUp reads the shared records to their end (shared mode; nothing
// otherwise): every save acknowledged before the call is known here when
// it returns. Errors: the store's.
func (c *Coordinator) CatchUp(ctx context.Context) error {
	if c.cfg.Shared == nil {
		return nil
	}
	return c.cfg.Shared.CatchUpTxns(ctx)
}

// LeaderMarker serves one partition of WriteTxnMarkers (API key 27) on its
// leader in shared mode: from a transaction's coordinator ending it, or
// from `kafka-transactions.sh abort` by hand. It reads the records to their
// end (the coordinator saved its decision before it sent the marker), waits
// for the transaction's verified produces to the partition, appends the
// COMMIT or ABORT marker, saves an ABORT's aborted range (producer id, its
// first offset here, the marker's offset), and ends the transaction on the
// partition. With no transaction of pid open there, the marker is written
// and changes nothing for readers, as on Kafka. Returns 0 or
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH (an epoch older than
// the open transaction's), KAFKA_STORAGE_ERROR.
func (c *Coordinator) LeaderMarker(ctx context.Context, topic string, part int32, pid int64, epoch int16, commit bool) int16 {
	tp, ok := c.topics.Topic(ctx, topic)
	if !ok || part < 0 || part >= tp.Partitions {
		return kerr.UnknownTopicOrPartition.Code
	}
	pk := partKey{tp.ID, part}
	if !c.coordinates(pk, pid) {
		// Another node's transaction: its Prepare record, saved before the
		// marker was sent, read here first.
		if err := c.cfg.Shared.CatchUpTxns(ctx); err != nil {
			c.log.Warn("write transaction marker: reading the transaction records failed", zap.Error(err))
			return kerr.KafkaStorageError.Code
		}
	}
	p := txnPart{Topic: topic, Stream: tp.Stream, TopicID: tp.ID, Partition: part}
	c.mu.Lock()
	var t *txn
	for o, first := range c.open[pk] {
		if o.rec.PID == pid {
			t, p.FirstOffset = o, first
		}
	}
	var seq int64
	if t != nil {
		if epoch < t.rec.Epoch {
			c.mu.Unlock()
			return kerr.InvalidProducerEpoch.Code
		}
		seq = t.rec.Seq
	}
	c.mu.Unlock()
	if t != nil {
		if err := c.drain(ctx, t); err != nil {
			return kerr.KafkaStorageError.Code
		}
	}
	off, err := c.writeMarker(ctx, &p, pid, epoch, commit)
	if err == nil && t != nil && !commit && off >= 0 {
		err = c.saveAborted(ctx, &p, pid, off)
	}
	if err != nil {
		c.log.Warn("write transaction marker failed", zap.String("topic", topic), zap.Int32("partition", part), zap.Error(err))
		if errors.Is(err, disbackend.ErrNotLeader) {
			return kerr.NotLeaderForPartition.Code
		}
		return kerr.KafkaStorageError.Code
	}
	if t != nil {
		c.mu.Lock()
		c.endOn(pk, t, seq)
		c.mu.Unlock()
	}
	return 0
}

// coordinates reports whether this node coordinates (has loaded) the
// transaction of pid open on pk.
func (c *Coordinator) coordinates(pk partKey, pid int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for t := range c.open[pk] {
		if t.rec.PID == pid && t.auth {
			return true
		}
	}
	return false
}

// verifyShared is VerifyProduce in shared mode: a refusal of an id this
// node does not coordinate is checked again after a catch-up (the
// producer's AddPartitionsToTxn was saved before it was answered).
func (c *Coordinator) verifyShared(ctx context.Context, txnID string, pid int64, epoch int16, topicID [16]byte, part int32) (func(), int16) {
	release, code := c.verify(txnID, pid, epoch, topicID, part)
	if code == 0 {
		return release, 0
	}
	c.mu.Lock()
	t := c.txns[txnID]
	auth := t != nil && t.auth
	c.mu.Unlock()
	if auth {
		return nil, code
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.cfg.Shared.CatchUpTxns(cctx); err != nil {
		c.log.Warn("transactional produce: reading the transaction records failed", zap.Error(err))
		return nil, kerr.NotEnoughReplicas.Code
	}
	return c.verify(txnID, pid, epoch, topicID, part)
}

// sharedState is the coordinator's state of shared mode.
type sharedState struct {
	lso      sync.Map // partKey -> *atomic.Int64: the highest last stable offset answered
	followMu sync.Mutex
	followed atomic.Int64 // the cluster epoch of the last Follow catch-up
}
