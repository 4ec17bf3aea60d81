package txncoord

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
)

// Ending a transaction: Kafka's two phases. prepare saves PrepareCommit or
// PrepareAbort (from then on the outcome is decided and survives a
// restart); complete writes the markers, applies the offsets (commit) or
// saves the aborted ranges (abort), then saves CompleteCommit or
// CompleteAbort and lets the last stable offset move.

// prepare moves t from Ongoing to PrepareCommit or PrepareAbort and saves
// it; fence (a timeout, or a new producer's InitProducerId) bumps the
// epoch first, as Kafka does, so the old producer is fenced and the
// markers carry the new epoch. Requires t.mu.
func (c *Coordinator) prepare(ctx context.Context, t *txn, commit, fence bool) error {
	prev := t.rec
	if fence && t.rec.Epoch < math.MaxInt16-1 {
		c.update(t, func(r *record) { r.LastPID, r.LastEpoch, r.Epoch = r.PID, r.Epoch, r.Epoch+1 })
	}
	st := PrepareAbort
	if commit {
		st = PrepareCommit
	}
	c.update(t, func(r *record) { r.State, r.UpdateMS = st, c.nowMS() })
	t.marked = nil
	if err := c.save(ctx, t); err != nil {
		c.update(t, func(r *record) { *r = prev })
		return err
	}
	return nil
}

// errInflight: a verified produce of the transaction has not ended by the
// deadline.
var errInflight = errors.New("txncoord: a produce of the transaction is still in flight")

// complete finishes t, in PrepareCommit or PrepareAbort: markers, offsets
// or aborted ranges, then the Complete state. What it did before a failure
// is not done again by a retry in the same process (marked); after a
// restart the markers are written again. Requires t.mu.
func (c *Coordinator) complete(ctx context.Context, t *txn) error {
	commit := t.rec.State == PrepareCommit
	if err := c.drain(ctx, t); err != nil {
		return err
	}
	if t.marked == nil {
		t.marked = map[partKey]int64{}
	}
	if c.cfg.Shared != nil {
		if err := c.sendMarkers(ctx, t, commit); err != nil {
			return err
		}
	}
	for i := range t.rec.Parts {
		p := &t.rec.Parts[i]
		pk := p.key()
		if _, ok := t.marked[pk]; ok {
			continue
		}
		off, err := c.writeMarker(ctx, p, t.rec.PID, t.rec.Epoch, commit)
		if err != nil {
			return err
		}
		t.marked[pk] = off
	}
	if commit {
		for group, offs := range t.rec.Offsets {
			if err := c.commitOffsets(ctx, group, offs); err != nil {
				return err
			}
		}
	} else {
		for i := range t.rec.Parts {
			p := &t.rec.Parts[i]
			off, ok := t.marked[p.key()]
			if !ok || off < 0 {
				continue // the topic is gone
			}
			if err := c.saveAborted(ctx, p, t.rec.PID, off); err != nil {
				return err
			}
		}
	}
	st := CompleteAbort
	if commit {
		st = CompleteCommit
	}
	next := t.rec
	next.State, next.UpdateMS = st, c.nowMS()
	next.Parts, next.Groups, next.Offsets = nil, nil, nil
	if err := c.saveRec(ctx, &next); err != nil {
		return err
	}
	parts := len(t.rec.Parts)
	c.mu.Lock()
	c.closeParts(t)
	t.rec = next
	c.mu.Unlock()
	t.marked = nil
	c.log.Debug("transaction ended", zap.String("transactional_id", t.rec.ID), zap.Bool("commit", commit),
		zap.Int("partitions", parts))
	return nil
}

// sendMarkers has the leaders of t's partitions not yet marked write
// their markers (shared mode), all at once; the partitions whose leader
// answered are marked, the first error is returned. Requires t.mu.
func (c *Coordinator) sendMarkers(ctx context.Context, t *txn, commit bool) error {
	var wg sync.WaitGroup
	errs := make([]error, len(t.rec.Parts))
	for i := range t.rec.Parts {
		p := &t.rec.Parts[i]
		if _, ok := t.marked[p.key()]; ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The leader writes it and, for an abort, saves the range.
			err := c.cfg.SendMarker(ctx, p.Topic, p.Partition, t.rec.PID, t.rec.Epoch, commit)
			if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
				errs[i] = fmt.Errorf("txncoord: marker to %s/%d: %w", p.Topic, p.Partition, err)
			}
		}()
	}
	wg.Wait()
	for i := range t.rec.Parts {
		if errs[i] == nil {
			t.marked[t.rec.Parts[i].key()] = -1
		}
	}
	return errors.Join(errs...)
}

// drain waits until no verified produce of t is in flight: a produce is
// verified only while t is Ongoing, so none starts meanwhile.
func (c *Coordinator) drain(ctx context.Context, t *txn) error {
	for {
		c.mu.Lock()
		n := t.inflight
		c.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", errInflight, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// writeMarker appends a COMMIT or ABORT control batch for producer pid at
// epoch to p and returns its offset; -1 when the topic or partition is
// gone (nothing to end there).
func (c *Coordinator) writeMarker(ctx context.Context, p *txnPart, pid int64, epoch int16, commit bool) (int64, error) {
	key := kmsg.NewControlRecordKey()
	key.Type = kmsg.ControlRecordKeyTypeAbort
	if commit {
		key.Type = kmsg.ControlRecordKeyTypeCommit
	}
	val := kmsg.NewEndTxnMarker()
	h := batch.NewHeader(0)
	h.ProducerID, h.ProducerEpoch = pid, epoch
	if c.cfg.LeaderEpoch != nil {
		h.PartitionLeaderEpoch = c.cfg.LeaderEpoch()
	}
	h.Attributes = batch.AttrTransactional | batch.AttrControl
	raw := batch.Encode(h, []batch.Record{{Key: key.AppendTo(nil), Value: val.AppendTo(nil), Timestamp: c.nowMS()}})
	hdr, err := batch.ParseHeader(raw)
	if err != nil {
		return 0, err
	}
	res, err := c.be.Append(p.Stream, p.Partition, disbackend.Batch{Raw: raw, Header: hdr}).Wait(ctx)
	switch {
	case errors.Is(err, disbackend.ErrStreamNotFound) || errors.Is(err, disbackend.ErrPartitionNotFound):
		return -1, nil
	case err != nil:
		return 0, fmt.Errorf("txncoord: marker to %s/%d: %w", p.Topic, p.Partition, err)
	}
	return res.BaseOffset, nil
}

// saveAborted saves and indexes the aborted range of producer pid on p,
// ended by its marker at last.
func (c *Coordinator) saveAborted(ctx context.Context, p *txnPart, pid, last int64) error {
	pk := p.key()
	b := fmt.Appendf(nil, `{"stream":%q,"last":%d}`, p.Stream, last)
	if err := c.be.SaveTxnRecord(ctx, abortedKey(pk, pid, p.FirstOffset), b); err != nil {
		return fmt.Errorf("txncoord: save aborted range: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addAbortedLocked(pk, p.Stream, Aborted{ProducerID: pid, FirstOffset: p.FirstOffset, LastOffset: last})
	return nil
}

// commitOffsets applies a committed transaction's offsets of group.
func (c *Coordinator) commitOffsets(ctx context.Context, group string, offs []txnOffset) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.Generation = group, -1
	byTopic := map[string]int{}
	for _, o := range offs {
		i, ok := byTopic[o.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[o.Topic] = i
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = o.Topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch, p.Metadata = o.Partition, o.Offset, o.LeaderEpoch, o.Metadata
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	resp := c.groups.CommitTxnOffsets(ctx, req)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			switch p.ErrorCode {
			case 0, kerr.UnknownTopicOrPartition.Code:
				// A topic deleted meanwhile has no offset to keep.
			default:
				return fmt.Errorf("txncoord: commit offsets of group %q: %w", group, kerr.ErrorForCode(p.ErrorCode))
			}
		}
	}
	return nil
}

// WriteMarker serves one partition of WriteTxnMarkers (API key 27): a COMMIT
// or ABORT marker for producer pid at epoch written to a partition by hand,
// as `kafka-transactions.sh abort` asks a partition's leader to. When a
// transaction of pid is open on the partition, its epoch must be the
// transaction's or newer (else INVALID_PRODUCER_EPOCH); the marker ends it
// there (an abort saves its aborted range) and the partition leaves the
// transaction, whose other partitions are ended as usual. With none open
// the marker is written and changes nothing for readers, as on Kafka.
// Returns 0 or the Kafka error code: UNKNOWN_TOPIC_OR_PARTITION,
// INVALID_PRODUCER_EPOCH, KAFKA_STORAGE_ERROR (the marker or the state could
// not be written).
func (c *Coordinator) WriteMarker(ctx context.Context, topic string, part int32, pid int64, epoch int16, commit bool) int16 {
	if c.cfg.Shared != nil {
		return c.LeaderMarker(ctx, topic, part, pid, epoch, commit)
	}
	tp, ok := c.topics.Topic(ctx, topic)
	if !ok || part < 0 || part >= tp.Partitions {
		return kerr.UnknownTopicOrPartition.Code
	}
	pk := partKey{tp.ID, part}
	c.mu.Lock()
	var t *txn
	for o := range c.open[pk] {
		if o.rec.PID == pid {
			t = o
		}
	}
	c.mu.Unlock()
	p := txnPart{Topic: topic, Stream: tp.Stream, TopicID: tp.ID, Partition: part}
	if t == nil {
		if _, err := c.writeMarker(ctx, &p, pid, epoch, commit); err != nil {
			c.log.Warn("write transaction marker failed", zap.String("topic", topic), zap.Int32("partition", part), zap.Error(err))
			return kerr.KafkaStorageError.Code
		}
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	i := slices.IndexFunc(t.rec.Parts, func(x txnPart) bool { return x.key() == pk })
	switch {
	case t.gone || t.rec.PID != pid || i < 0:
		return c.WriteMarker(ctx, topic, part, pid, epoch, commit) // it ended meanwhile
	case epoch < t.rec.Epoch:
		return kerr.InvalidProducerEpoch.Code
	}
	p = t.rec.Parts[i]
	if err := c.drain(ctx, t); err != nil {
		return kerr.KafkaStorageError.Code
	}
	off, err := c.writeMarker(ctx, &p, pid, epoch, commit)
	if err == nil && !commit && off >= 0 {
		err = c.saveAborted(ctx, &p, pid, off)
	}
	next := t.rec
	next.Parts = slices.Delete(slices.Clone(t.rec.Parts), i, i+1)
	next.UpdateMS = c.nowMS()
	if err == nil {
		err = c.saveRec(ctx, &next)
	}
	if err != nil {
		c.log.Warn("write transaction marker failed", zap.String("transactional_id", t.rec.ID), zap.String("topic", topic),
			zap.Int32("partition", part), zap.Error(err))
		return kerr.KafkaStorageError.Code
	}
	c.mu.Lock()
	c.closeParts(t)
	t.rec = next
	for j := range t.rec.Parts {
		c.openPart(t, &t.rec.Parts[j])
	}
	c.mu.Unlock()
	c.log.Info("transaction ended on one partition by WriteTxnMarkers", zap.String("transactional_id", t.rec.ID),
		zap.String("topic", topic), zap.Int32("partition", part), zap.Bool("commit", commit))
	return 0
}
