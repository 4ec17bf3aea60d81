package disrest

// The compactor's sweeps (see compact.go): each brings a partition's key
// index up to the partition's end and re-appends the live keys DIS may
// soon expire.

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
)

// Sweeps: how often a partition is swept (see the top of compact.go), how
// often the streams are listed, and the copies one sweep makes.
const (
	compactMinSweep  = 2 * time.Second
	compactMaxSweep  = 5 * time.Minute
	compactListEvery = 30 * time.Second
	copyBatchRecords = 500
	copyBatchBytes   = 512 << 10
	copyMaxPerSweep  = 50_000
	copyReadBytes    = 1 << 20
)

// run sweeps every compacted partition when it is due, and lists the
// streams every compactListEvery to learn those created or changed
// elsewhere. A partition the fence does not let this node write (cluster
// mode: another node leads it, or the lease lapsed) is skipped: neither
// read nor copied nor snapshotted. It ends when the Store closes.
func (c *compactor) run() {
	defer c.s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-c.s.stopPoll
		cancel()
	}()
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if time.Since(c.listedAt) >= compactListEvery {
			c.listedAt = time.Now()
			c.list(ctx)
		}
		c.mu.Lock()
		var due []*cpart
		now := time.Now()
		for _, cp := range c.parts {
			if !cp.nextSweep.After(now) {
				due = append(due, cp)
			}
		}
		c.mu.Unlock()
		slices.SortFunc(due, func(a, b *cpart) int { return a.nextSweep.Compare(b.nextSweep) })
		for _, cp := range due {
			if ctx.Err() != nil {
				return
			}
			if c.s.fence.mayWrite(disbackend.PartitionKey(cp.k.stream, cp.k.part)) != nil {
				cp.mu.Lock()
				cp.nextSweep = time.Now().Add(compactMinSweep)
				cp.mu.Unlock()
				continue
			}
			c.sweep(ctx, cp)
		}
	}
}

// list learns the compacted streams from ListStreams.
func (c *compactor) list(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, c.s.opts.RetryTimeout)
	defer cancel()
	sts, err := c.s.ListStreams(lctx)
	if err != nil {
		// Error: without the listing, compacted topics made elsewhere are not kept.
		c.s.log.Error("compactor: list streams", zap.Error(err))
		return
	}
	seen := map[string]bool{}
	for _, st := range sts {
		seen[st.Name] = true
		c.watch(st)
	}
	c.mu.Lock()
	for name := range c.streams {
		if !seen[name] && !gatewayStream(name) { // the gateway's own are not listed
			c.forgetLocked(name)
		}
	}
	c.mu.Unlock()
}

// sweep brings cp's index up to the partition's end, copies the live keys
// that may soon expire, and writes a snapshot when one is due.
func (c *compactor) sweep(ctx context.Context, cp *cpart) {
	s := c.s
	ctx, cancel := context.WithTimeout(ctx, 2*(s.opts.RetryTimeout+s.opts.RequestTimeout))
	defer cancel()
	err := c.sweepOnce(ctx, cp)
	if err != nil && ctx.Err() == nil {
		if errors.Is(err, disbackend.ErrStreamNotFound) || errors.Is(err, disbackend.ErrPartitionNotFound) {
			c.mu.Lock()
			if c.parts[cp.k] == cp {
				delete(c.parts, cp.k)
			}
			c.mu.Unlock()
			return
		}
		s.log.Warn("compactor: sweep", zap.String("stream", cp.k.stream), zap.Int32("partition", cp.k.part), zap.Error(err))
		cp.mu.Lock()
		cp.nextSweep = time.Now().Add(compactMinSweep)
		cp.mu.Unlock()
	}
}

func (c *compactor) sweepOnce(ctx context.Context, cp *cpart) error {
	s := c.s
	si, err := s.streamInfo(ctx, cp.k.stream, false)
	if err != nil {
		return err
	}
	if !keepsKeys(si.st.Config) {
		c.forget(cp.k.stream)
		return nil
	}
	cp.mu.Lock()
	if cp.streamID == "" {
		cp.streamID = si.id
	}
	loaded := cp.loaded
	unsure0 := cp.unsure
	cp.mu.Unlock()
	if !loaded {
		if err := c.restore(ctx, cp); err != nil {
			s.log.Info("compactor: no snapshot of the key index; reading the partition", zap.String("stream", cp.k.stream),
				zap.Int32("partition", cp.k.part), zap.Error(err))
		}
		cp.mu.Lock()
		cp.loaded = true
		cp.mu.Unlock()
	}
	r, err := s.describeRange(ctx, cp.k.stream, cp.k.part)
	if err != nil {
		return err
	}
	now := time.Now()
	nowMs := now.UnixMilli()
	cp.mu.Lock()
	cp.addSample(r.Next, nowMs)
	from := cp.indexed
	cp.mu.Unlock()
	logAppend := si.st.Config.TimestampType == disbackend.LogAppendTime
	tailed, err := c.tail(ctx, cp, max(from, r.First), r.Next, logAppend)
	if err != nil {
		return err
	}

	// What is due, under the lock.
	retention := si.st.Config.Retention
	cp.mu.Lock()
	if cp.unsure == unsure0 {
		cp.unsure = 0 // every failed append before the range was read is read
	}
	lost := 0
	type cand struct {
		off int64
		h   keyHash
	}
	var cands []cand
	// The span of the partition's records, at least: now minus when its
	// oldest record had arrived at the latest. (A lower bound on that
	// arrival would make the span, and the horizon, too long: a topic
	// made compact long after it was created lost its keys that way.)
	span := time.Duration(nowMs-cp.arrivedBy(r.First, nowMs)) * time.Millisecond
	h := min(retention, span) / 2
	cutoff := nowMs - h.Milliseconds()
	delRet := si.st.Config.DeleteRetention.Milliseconds()
	for k, e := range cp.keys {
		if e.off < r.First {
			lost++
			delete(cp.keys, k)
			c.keys.Add(-1)
			continue
		}
		if e.since != 0 && nowMs-e.since >= delRet {
			delete(cp.keys, k) // the tombstone has lived delete.retention.ms
			c.keys.Add(-1)
			continue
		}
		if at, ok := cp.arrivedAfter(e.off); !ok || at < cutoff {
			cands = append(cands, cand{e.off, k})
		}
	}
	cp.pruneSamples(r.First)
	cp.nextSweep = now.Add(min(max(min(retention, span)/8, compactMinSweep), compactMaxSweep))
	cp.mu.Unlock()
	if lost > 0 {
		c.lost.Add(int64(lost))
		s.log.Error("compactor: live keys expired in DIS before they were copied (was no gateway running?)",
			zap.String("stream", cp.k.stream), zap.Int32("partition", cp.k.part), zap.Int("keys", lost),
			zap.Int64("log_start_offset", r.First), zap.Int64("lost_total", c.lost.Load()))
	}

	copied := 0
	if len(cands) > 0 {
		slices.SortFunc(cands, func(a, b cand) int { return cmp.Compare(a.off, b.off) })
		if len(cands) > copyMaxPerSweep {
			cands = cands[:copyMaxPerSweep]
			cp.mu.Lock()
			cp.nextSweep = now // the rest at once
			cp.mu.Unlock()
		}
		offs := make([]int64, len(cands))
		for i := range cands {
			offs[i] = cands[i].off
		}
		if copied, err = c.copyRecords(ctx, cp, offs, logAppend); err != nil {
			return err
		}
	}
	if copied > 0 || tailed > 0 {
		s.log.Debug("compactor: sweep", zap.String("stream", cp.k.stream), zap.Int32("partition", cp.k.part),
			zap.Int("indexed", tailed), zap.Int("copied", copied), zap.Duration("horizon", h))
	}
	cp.mu.Lock()
	due := cp.indexed-cp.snapIdx >= snapshotEvery || (cp.indexed > cp.snapIdx && now.Sub(cp.snapAt) >= h) || (copied > 0 && now.Sub(cp.snapAt) >= h)
	cp.mu.Unlock()
	if due {
		if err := c.snapshot(ctx, cp, r); err != nil {
			s.log.Warn("compactor: snapshot", zap.String("stream", cp.k.stream), zap.Int32("partition", cp.k.part), zap.Error(err))
		}
	}
	return nil
}

// tail reads [from, next) of the partition into the index and returns how
// many records it read. With transactions (the Store's TxnView) the index
// takes a transactional record only below the partition's last stable
// offset and only if its transaction did not abort; one at or past it
// holds its key's copies back (cpart.undecided), and the index's position
// stays at the last stable offset, so the next sweep reads it again.
// Without a view (no coordinator runs, or not yet) every transactional
// record is undecided and the position stays at the first. Markers are
// never indexed.
func (c *compactor) tail(ctx context.Context, cp *cpart, from, next int64, logAppend bool) (int, error) {
	n := 0
	now := time.Now().UnixMilli()
	aborted, stable, known := c.s.txnState(cp.k)
	err := c.s.scan(ctx, cp.k, from, next, copyReadBytes, logAppend, func(recs []fetched) bool {
		cp.mu.Lock()
		for i := range recs {
			f := &recs[i]
			if f.rec.Key == nil || f.txn.flags&txnFlagControl != 0 {
				continue
			}
			h := hashKey(f.rec.Key)
			switch {
			case !f.txn.transactional():
				c.apply(cp, h, f.sn, f.rec.Value == nil, now)
			case f.sn >= stable || !known:
				cp.undecided[h] = max(cp.undecided[h], f.sn)
				if !known {
					stable = min(stable, f.sn)
				}
			default:
				if !abortedAt(aborted, f.txn.pid, f.sn) {
					c.apply(cp, h, f.sn, f.rec.Value == nil, now)
				}
				cp.decided(h, f.sn)
			}
		}
		cp.indexed = max(cp.indexed, min(recs[len(recs)-1].sn+1, stable))
		cp.mu.Unlock()
		n += len(recs)
		return true
	})
	return n, err
}

// abortedAt reports whether producer pid's transactional record at off is
// in one of a partition's aborted ranges.
func abortedAt(l []disbackend.AbortedRange, pid, off int64) bool {
	for _, a := range l {
		if a.ProducerID == pid && a.FirstOffset <= off && off <= a.LastOffset {
			return true
		}
	}
	return false
}

// copyRecords re-appends the records at offs (ascending) and waits until
// they are written; it returns how many it queued (the writer drops those
// stale by then).
func (c *compactor) copyRecords(ctx context.Context, cp *cpart, offs []int64, logAppend bool) (queued int, err error) {
	var recs []disbackend.Record
	var src []int64
	var pend []*disbackend.Pending
	size := 0
	flush := func() {
		if len(recs) == 0 {
			return
		}
		pend = append(pend, c.s.appendCopies(cp.k, recs, src))
		queued += len(recs)
		recs, src, size = nil, nil, 0
	}
	i := 0
	for i < len(offs) {
		got, err := c.s.fetchAt(ctx, cp.k, offs[i], copyReadBytes, logAppend)
		if err != nil {
			if errors.Is(err, disbackend.ErrOffsetOutOfRange) {
				i++ // expired meanwhile: the next sweep counts it lost
				continue
			}
			return 0, err
		}
		if len(got) == 0 {
			break
		}
		for _, f := range got {
			for i < len(offs) && offs[i] < f.sn {
				i++ // not there (another writer's gap)
			}
			if i < len(offs) && offs[i] == f.sn {
				r := f.rec
				r.OffsetDelta = int32(len(recs))
				recs = append(recs, r)
				src = append(src, f.sn)
				size += batch.RecordLen(&r, 0, 0)
				if len(recs) >= copyBatchRecords || size >= copyBatchBytes {
					flush()
				}
				i++
			}
		}
	}
	flush()
	for _, p := range pend {
		if _, err := p.Wait(ctx); err != nil {
			return queued, err
		}
	}
	return queued, nil
}

// appendCopies queues a copy job on partition k's writer: records whose
// src are the offsets they copy. The writer drops copies that are stale
// by the time it sends them (compactor.begin).
func (s *Store) appendCopies(k partKey, recs []disbackend.Record, src []int64) *disbackend.Pending {
	return s.appendJob(k, recordsBatch(recs), src)
}

// recordsBatch is the gateway's own batch of recs (no Raw: the Store
// sends Records; no producer), with the header fields the writer reads.
// The records' OffsetDelta must be 0, 1, 2, ...
func recordsBatch(recs []disbackend.Record) disbackend.Batch {
	b := disbackend.Batch{Header: batch.NewHeader(0), Records: recs}
	b.NumRecords = int32(len(recs))
	b.LastOffsetDelta = int32(len(recs) - 1)
	for i := range recs {
		if i == 0 || recs[i].Timestamp < b.FirstTimestamp {
			b.FirstTimestamp = recs[i].Timestamp
		}
		b.MaxTimestamp = max(b.MaxTimestamp, recs[i].Timestamp)
	}
	return b
}

// scan reads partition k from sequence number from up to next with
// GetRecords of ask bytes, handing each answer's records to f until f
// returns false or an answer is empty.
func (s *Store) scan(ctx context.Context, k partKey, from, next int64, ask int, logAppend bool, f func([]fetched) bool) error {
	for from < next {
		recs, err := s.fetchAt(ctx, k, from, ask, logAppend)
		if err != nil {
			return err
		}
		if len(recs) == 0 || !f(recs) {
			return nil
		}
		from = recs[len(recs)-1].sn + 1
	}
	return nil
}
