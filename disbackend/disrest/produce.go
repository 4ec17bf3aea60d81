package disrest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
)

// prepared is a job whose records are to be written.
type prepared struct {
	j          *job
	start, end int // its records in the group's out
	// partial, for the retry of a batch whose first records a PutRecords
	// cut short wrote (idem.go): where those are; its other records are
	// in out.
	partial *idemPartial
}

// sendGroup writes the records of a group of jobs of partition k, taken
// from the queue in order, with as few PutRecords as BatchBytes and
// BatchCount allow, and completes each job with its first record's
// sequence number once all of its records are accepted. Runs on the
// partition's writer goroutine. It returns the jobs it did not handle (an
// idempotent producer's batch that does not continue its previous one in
// the group must be checked after that one is remembered): they go back to
// the queue.
func (s *Store) sendGroup(k partKey, group []job, ps *putState) []job {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.RetryTimeout+s.opts.RequestTimeout)
	defer cancel()
	failAll := func(jobs []job, err error) {
		for i := range jobs {
			s.complete(&jobs[i], disbackend.AppendResult{}, err)
		}
	}
	si, err := s.streamInfo(ctx, k.stream, false)
	if err == nil && k.part >= si.st.PartitionCount {
		si, err = s.streamInfo(ctx, k.stream, true) // grown by another node?
	}
	if err != nil {
		failAll(group, err)
		return nil
	}
	if k.part < 0 || k.part >= si.st.PartitionCount {
		failAll(group, fmt.Errorf("disrest: append to %s/%d: %w", k.stream, k.part, disbackend.ErrPartitionNotFound))
		return nil
	}
	if ps.idemResolved && time.Since(ps.lastWrite) >= idemIdle {
		// Idle for a while: another node may have led the partition
		// meanwhile; merge its window and learn the end offset again.
		ps.idemResolved, ps.idemLoaded, ps.known = false, false, false
	}
	defer func() { ps.lastWrite = time.Now() }()
	if !ps.idemResolved {
		// The first write since start, or the last one's outcome is
		// unknown: the dedupe window and the last intent from DIS first.
		if err := s.resolveIdem(ctx, k, si.id, ps); err != nil {
			failAll(group, err)
			return nil
		}
	}
	if p := s.idem.held(k); p != nil {
		// A batch cut short: nothing goes before the rest of it.
		i := slices.IndexFunc(group, func(j job) bool { return p.isRetry(&j.b) })
		switch {
		case i > 0:
			group = slices.Concat(group[i:i+1], group[:i], group[i+1:])
		case i == 0:
		case time.Now().Before(p.until) && !s.isClosed():
			return group // the writer waits for the retry (writer.run)
		case time.Now().Before(p.until):
			failAll(group, fmt.Errorf("disrest: append to %s/%d: %w: closing while the partition waits for the retry of a batch cut short", k.stream, k.part, disbackend.ErrUnavailable))
			return nil
		default:
			s.idem.clearPartial(k)
			s.log.Warn("the retry of a batch cut short did not come: other batches written after its first records",
				zap.String("stream", k.stream), zap.Int32("partition", k.part), zap.Int64("producer_id", p.pid),
				zap.Int32("sequence", p.seq), zap.Int64("base_offset", p.base), zap.Int32("written", p.done), zap.Int32("records", p.n))
		}
	}
	logAppend := si.st.Config.TimestampType == disbackend.LogAppendTime
	cp := s.compact.part(k, si) // nil unless the compactor keeps the partition's keys
	format := si.st.Config.RecordFormat
	if format == "" {
		format = s.opts.RecordFormat
	}

	// Producers of idempotent batches to be written in this group: the
	// epoch and the sequence their next batch must start at.
	type next struct {
		epoch int16
		seq   int32
	}
	producers := map[int64]next{}
	var out []disRecord
	var preps []prepared
	var rest []job
	var intent []idemEntry // of preps, in order; see idem.go
	idempotent := false
	for i := range group {
		j := &group[i]
		if len(intent) >= maxIntentEntries && (j.b.ProducerID >= 0 || intent[len(intent)-1].pid >= 0) {
			rest = group[i:] // the next PutRecords
			break
		}
		fail := func(err error) {
			s.complete(j, disbackend.AppendResult{}, fmt.Errorf("disrest: append to %s/%d: %w", k.stream, k.part, err))
		}
		if pid := j.b.ProducerID; pid >= 0 {
			if n, ok := producers[pid]; ok {
				if n.epoch != j.b.ProducerEpoch || n.seq != j.b.BaseSequence {
					rest = group[i:]
					break
				}
			} else {
				dup, err := s.idem.check(k, &j.b)
				if err != nil {
					fail(err)
					continue
				}
				if dup != nil {
					// As Kafka: a retry is answered with the stored
					// batch's max timestamp as its LogAppendTime.
					s.complete(j, disbackend.AppendResult{BaseOffset: dup.BaseOffset, LogStartOffset: s.ranges.first(k), LogAppendTime: dup.MaxTimestamp, Duplicate: true}, nil)
					continue
				}
			}
		}
		if j.src != nil {
			// A copy: sent only if it is still its key's latest record.
			if cp == nil {
				s.complete(j, disbackend.AppendResult{BaseOffset: -1}, nil)
				continue
			}
			kept, src, _ := s.compact.begin(cp, j.b.Records, j.src)
			if len(kept) == 0 {
				s.complete(j, disbackend.AppendResult{BaseOffset: -1}, nil)
				continue
			}
			j.b.Records, j.src, j.b.NumRecords = kept, src, int32(len(kept))
		}
		recs, err := s.toDISRecords(&j.b, logAppend, format)
		var partial *idemPartial
		if err == nil && j.b.ProducerID >= 0 && cp == nil {
			if partial = s.idem.partialOf(k, &j.b); partial != nil {
				recs = recs[partial.done:] // written before: only the rest
			}
		}
		if err != nil {
			if cp != nil && j.src != nil {
				s.compact.release(cp, j.b.Records)
			}
			fail(err)
			continue
		}
		if cp != nil && j.src == nil {
			if _, _, err := s.compact.begin(cp, j.b.Records, nil); err != nil {
				fail(err)
				continue
			}
		}
		if pid := j.b.ProducerID; pid >= 0 {
			producers[pid] = next{j.b.ProducerEpoch, disbackend.IncSequence(j.b.BaseSequence, j.b.NumRecords)}
			maxTS := j.b.MaxTimestamp
			if logAppend {
				maxTS = time.Now().UnixMilli()
			}
			e := idemEntry{pid: pid, epoch: j.b.ProducerEpoch, seq: j.b.BaseSequence, n: int32(len(recs)), maxTS: maxTS}
			if partial != nil {
				e.n, e.done, e.base = j.b.NumRecords, partial.done, partial.base
			}
			intent = append(intent, e)
			idempotent = true
		} else if n := len(intent); n > 0 && intent[n-1].pid < 0 {
			intent[n-1].n += int32(len(recs))
		} else {
			intent = append(intent, idemEntry{pid: -1, n: int32(len(recs))})
		}
		preps = append(preps, prepared{j: j, start: len(out), end: len(out) + len(recs), partial: partial})
		out = append(out, recs...)
	}
	if len(out) == 0 {
		return rest
	}
	failPreps := func(preps []prepared, err error) {
		for _, pr := range preps {
			if cp != nil {
				s.compact.failed(cp, pr.j.b.Records)
			}
			s.complete(pr.j, disbackend.AppendResult{}, fmt.Errorf("disrest: append to %s/%d: %w", k.stream, k.part, err))
		}
	}
	if idempotent || ps.idemStale {
		// Write-ahead: the intent (or, after one that was not written,
		// none) is in DIS before the records are.
		if !idempotent {
			intent = nil
		}
		s.learn(ctx, k, ps)
		err := fmt.Errorf("%w: the end offset is not known", disbackend.ErrUnavailable)
		if ps.known {
			err = s.commitIntent(ctx, k, si.id, ps, intent)
		}
		if err != nil {
			ps.idemStale = true
			if !errors.Is(err, disbackend.ErrUnavailable) {
				err = fmt.Errorf("%w: keep the write intent: %v", disbackend.ErrUnavailable, err)
			}
			failPreps(preps, err)
			return rest
		}
		ps.idemStale = false
	}

	// A PutRecords also holds at most what DIS's buckets hold (one second
	// of the stream type's limits, which is also DIS's limit on one
	// PutRecords): the pacer sends it once its model, which never holds
	// more than DIS's buckets, holds all of it.
	cb, cr := paceCapacity(si.advanced)
	maxBytes, maxCount := min(s.opts.BatchBytes, int(cb)), min(s.opts.BatchCount, int(cr))
	sns := make([]int64, len(out))
	var throttle time.Duration
	done := 0 // preps completed
	for start := 0; start < len(out); {
		end, size := start, 0
		safe := ps.underPressure(time.Now())
		for end < len(out) && end-start < maxCount && (end == start || size+len(out[end].data) <= maxBytes &&
			!(safe && len(out[end].data) < len(out[end-1].data))) {
			size += len(out[end].data)
			end++
		}
		got, waited, err := s.putRecords(ctx, k, out[start:end], ps, si.advanced, group[0].b.Credentials)
		throttle += waited
		if err != nil {
			if idempotent {
				ps.idemResolved = false // the outcome is unknown: resolve before the next write
			}
			failPreps(preps[done:], err)
			return rest
		}
		copy(sns[start:end], got)
		start = end
		for done < len(preps) && preps[done].end <= start {
			if cp != nil {
				s.compact.written(cp, preps[done].j.b.Records, sns[preps[done].start:preps[done].end])
			}
			s.finish(k, preps[done], sns, logAppend, throttle)
			done++
		}
	}
	return rest
}

// finish completes a job whose records all have sequence numbers.
func (s *Store) finish(k partKey, pr prepared, sns []int64, logAppend bool, throttle time.Duration) {
	base := sns[pr.start]
	last := sns[pr.end-1]
	if pr.partial != nil {
		base = pr.partial.base
		last = base + int64(pr.j.b.NumRecords) - 1
		s.idem.clearPartial(k)
		s.log.Info("the rest of a batch cut short written", zap.String("stream", k.stream), zap.Int32("partition", k.part),
			zap.Int64("producer_id", pr.j.b.ProducerID), zap.Int64("base_offset", base), zap.Int("written_before", int(pr.partial.done)))
	}
	for i := pr.start + 1; i < pr.end && pr.partial == nil; i++ {
		if want := base + int64(i-pr.start); sns[i] != want {
			// Another writer interleaved, or DIS accepted a later record
			// after refusing an earlier one: the producer is told base,
			// and the records are where DIS put them.
			s.log.Warn("sequence numbers of a batch not contiguous",
				zap.String("stream", k.stream), zap.Int32("partition", k.part),
				zap.Int64("want", want), zap.Int64("got", sns[i]), zap.Int64("out_of_order_total", s.outOfOrder.Add(1)))
			break
		}
	}
	res := disbackend.AppendResult{BaseOffset: base, LogAppendTime: -1, Throttle: throttle}
	maxTS := pr.j.b.MaxTimestamp
	if logAppend {
		res.LogAppendTime = time.Now().UnixMilli() // DIS's own stamp is not returned by PutRecords
		maxTS = res.LogAppendTime
	}
	if pr.j.b.ProducerID >= 0 {
		s.idem.remember(k, &pr.j.b, base, last, maxTS)
	}
	s.ranges.put(k, disbackend.PartitionRange{First: s.ranges.first(k), Next: last + 1})
	s.notify()
	res.LogStartOffset = s.ranges.first(k)
	s.complete(pr.j, res, nil)
}

// toDISRecords maps a producer's batch to DIS records in format, from the
// records the gateway decoded (Batch.Records); a batch given without them
// (not through the gateway) is decoded here.
func (s *Store) toDISRecords(b *disbackend.Batch, logAppend bool, format string) ([]disRecord, error) {
	recs := b.Records
	if recs == nil {
		var err error
		if recs, err = batch.DecodeRecords(b.Raw); err != nil {
			return nil, err
		}
		b.Records = recs
	}
	if len(recs) == 0 {
		return nil, errors.New("batch has no records")
	}
	out := make([]disRecord, len(recs))
	for i := range recs {
		d, err := toDIS(&recs[i], format)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		if len(d.data) > maxRecordBytes {
			return nil, fmt.Errorf("%w: record %d: %d bytes, more than the %d DIS takes in one record", disbackend.ErrRecordTooLarge, i, len(d.data), maxRecordBytes)
		}
		if logAppend {
			d.ts = -1 // DIS stamps it
		}
		out[i] = d
	}
	return out, nil
}
