package disrest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/def"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
	"github.com/disgw/disgw/kafkawire/batch"
)

// writer is one partition's accumulator: it merges the records of
// consecutive Appends into one PutRecords when they arrive within Linger of
// the first waiting one, up to BatchBytes or BatchCount (a full batch goes
// at once), and sends them one PutRecords at a time, in the order they were
// enqueued.
type writer struct {
	s *Store
	k partKey

	// mu guards q, qRecs, qBytes and stopped.
	mu      sync.Mutex
	q       []job
	qRecs   int // records waiting in q
	qBytes  int // raw bytes waiting in q
	stopped bool
	wake    chan struct{} // cap 1

	put putState // only the run goroutine uses it
}

type job struct {
	b   disbackend.Batch
	p   *disbackend.Pending
	at  time.Time // enqueued
	mem int       // bytes held while it waits: Raw, and the decompressed records of a compressed batch
	// src, for a compactor's copy job, is the offset each record copies
	// (compact.go); nil for a producer's batch.
	src []int64
}

func (j *job) size() int { return len(j.b.Raw) }

// jobMem is what a waiting batch holds in memory, in bytes: its raw
// bytes, its decoded records (the Record and RecordHeader values) and,
// when it is compressed, the decompressed data they alias.
func jobMem(b *disbackend.Batch) int {
	n := len(b.Raw) + len(b.Records)*int(unsafe.Sizeof(disbackend.Record{}))
	compressed := b.Codec() != batch.CodecNone || b.Raw == nil // nil: the compactor's, records of their own
	for i := range b.Records {
		r := &b.Records[i]
		n += len(r.Headers) * int(unsafe.Sizeof(disbackend.RecordHeader{}))
		if compressed {
			n += batch.RecordLen(r, 0, 0)
		}
	}
	return n
}

// sleepUnlocked releases w.mu (held by the caller) and waits up to d, or
// until signal wakes the writer.
func (w *writer) sleepUnlocked(d time.Duration) {
	w.mu.Unlock()
	t := time.NewTimer(d)
	select {
	case <-w.wake:
	case <-t.C:
	}
	t.Stop()
}

func (w *writer) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *writer) enqueue(j job) {
	w.mu.Lock()
	w.q = append(w.q, j)
	w.qRecs += int(j.b.NumRecords)
	w.qBytes += j.size()
	w.mu.Unlock()
	w.signal()
}

func (w *writer) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.signal()
}

// run takes batches of jobs off the queue: once the first waiting job has
// lingered for Linger, or the waiting records fill a PutRecords, or the
// Store is closing.
func (w *writer) run() {
	defer w.s.wg.Done()
	o := &w.s.opts
	for {
		w.mu.Lock()
		if len(w.q) == 0 {
			stopped := w.stopped
			w.mu.Unlock()
			if stopped {
				return
			}
			<-w.wake
			continue
		}
		if p := w.s.idem.held(w.k); p != nil && !w.stopped {
			// A batch cut short holds the partition's other writes until
			// its retry comes (idem.go): that goes first.
			i := slices.IndexFunc(w.q, func(j job) bool { return p.isRetry(&j.b) })
			wait := time.Until(p.until)
			if i < 0 && wait > 0 {
				w.sleepUnlocked(wait)
				continue
			}
			if i > 0 {
				w.q = slices.Concat(w.q[i:i+1], w.q[:i], w.q[i+1:])
			}
		}
		full := w.qRecs >= o.BatchCount || w.qBytes >= o.BatchBytes
		if wait := time.Until(w.q[0].at.Add(o.Linger)); !full && !w.stopped && wait > 0 {
			w.sleepUnlocked(wait)
			continue
		}
		n, recs, size := 0, 0, 0
		for n < len(w.q) {
			j := &w.q[n]
			r, b := int(j.b.NumRecords), j.size()
			if n > 0 && (recs+r > o.BatchCount || size+b > o.BatchBytes || !sameCredentials(j.b.Credentials, w.q[0].b.Credentials)) {
				// Full, or another principal's batch (dis authentication
				// mode): it waits for a PutRecords signed with its own
				// credentials.
				break
			}
			n, recs, size = n+1, recs+r, size+b
		}
		group := make([]job, n)
		copy(group, w.q[:n])
		clear(w.q[:n])
		w.q = w.q[n:]
		w.qRecs -= recs
		w.qBytes -= size
		w.mu.Unlock()
		if rest := w.s.sendGroup(w.k, group, &w.put); len(rest) > 0 {
			w.requeue(rest)
		}
	}
}

// sameCredentials reports whether two batches are written with the same
// credentials (nil: the gateway's), so may share one PutRecords.
func sameCredentials(a, b *disbackend.Credentials) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.AK == b.AK && a.SK == b.SK
}

// requeue puts jobs back at the front of the queue, in order.
func (w *writer) requeue(jobs []job) {
	w.mu.Lock()
	for _, j := range jobs {
		w.qRecs += int(j.b.NumRecords)
		w.qBytes += j.size()
	}
	w.q = append(jobs, w.q...)
	w.mu.Unlock()
}

// Append enqueues the batch on the partition's writer; see the package
// comment for what happens to it. When BufferBytes are already waiting
// across the Store, Append blocks until there is room (backpressure on the
// caller, which keeps one caller's batches in order); after BufferWait it
// returns a Pending completed with ErrUnavailable (Kafka REQUEST_TIMED_OUT).
func (s *Store) Append(stream string, part int32, b disbackend.Batch) *disbackend.Pending {
	return s.appendJob(partKey{stream, part}, b, nil)
}

// appendJob is Append of a batch, or with src of a compactor's copy job.
func (s *Store) appendJob(k partKey, b disbackend.Batch, src []int64) *disbackend.Pending {
	stream, part := k.stream, k.part
	p := disbackend.NewPending()
	mem := jobMem(&b)
	if !s.buf.acquire(mem, s.opts.BufferWait) {
		p.Complete(disbackend.AppendResult{}, fmt.Errorf("disrest: append to %s/%d: %w: %d bytes waiting for DIS for more than %v (buffer of %d bytes full)",
			stream, part, disbackend.ErrUnavailable, s.buf.waiting(), s.opts.BufferWait, s.opts.BufferBytes))
		return p
	}
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		s.buf.release(mem)
		p.Complete(disbackend.AppendResult{}, fmt.Errorf("disrest: append to %s/%d: %w", stream, part, disbackend.ErrClosed))
		return p
	}
	w := s.writers[k]
	if w == nil {
		w = &writer{s: s, k: k, wake: make(chan struct{}, 1)}
		s.writers[k] = w
		s.wg.Add(1)
		go w.run()
	}
	w.enqueue(job{b: b, p: p, at: time.Now(), mem: mem, src: src})
	return p
}

// isClosed reports whether Close was called.
func (s *Store) isClosed() bool {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	return s.closed
}

// complete completes a job, then gives its bytes back to the buffer.
func (s *Store) complete(j *job, res disbackend.AppendResult, err error) {
	j.p.Complete(res, err)
	s.buf.release(j.mem)
}

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

// putRequest is the SDK's request of a PutRecords: its body is ours, with
// the records' timestamps, which the SDK's model lacks.
type putRequest struct {
	Body *disapi.PutRecordsRequest `json:"body,omitempty"`
}

// putRecordsBody is the PutRecords body of the records of recs at todo
// (indexes into recs, in order) to partition part of stream: each with its
// data in Base64, its partition_key when it has one and its timestamp
// unless DIS stamps it (ts < 0).
func putRecordsBody(stream string, part int32, recs []disRecord, todo []int) *disapi.PutRecordsRequest {
	pid := disbackend.PartitionID(part)
	body := &disapi.PutRecordsRequest{StreamName: stream, Records: make([]disapi.PutRecordsRequestEntry, len(todo))}
	data := make([]string, len(todo))
	for i, idx := range todo {
		rec := recs[idx]
		data[i] = base64.StdEncoding.EncodeToString(rec.data)
		e := disapi.PutRecordsRequestEntry{Data: &data[i], PartitionID: pid, PartitionKey: rec.key}
		if rec.ts >= 0 {
			ts := rec.ts
			e.Timestamp = &ts
		}
		body.Records[i] = e
	}
	return body
}

// putRecordsDef is the SDK's SendRecords definition with our request model.
func putRecordsDef() *def.HttpRequestDef {
	return def.NewHttpRequestDefBuilder().
		WithMethod(http.MethodPost).
		WithPath("/v2/{project_id}/records").
		WithResponse(new(model.SendRecordsResponse)).
		WithContentType("application/json").
		WithRequestField(def.NewFieldDef().WithName("Body").WithLocationType(def.Body)).
		Build()
}

// putRecords sends records to partition k and returns their sequence
// numbers, and how long it waited for DIS's limits (the pacer's waits and
// the backoffs after DIS.4303: the throttle time reported to the producer).
// Every request first waits for the partition's pacer. Records refused with a retriable code (DIS.4303, DIS.5xxx) are
// sent again, with backoff and jitter, before anything else of the
// partition; so is the whole request after DIS.4303/4305/4309/5xxx or no
// answer. It gives up after RetryTimeout with ErrUnavailable.
//
// creds, when not nil, are the principal's the records are written with
// (all of the group's: run never mixes them); a PutRecords DIS refuses
// for them (403 DIS.4116) fails with ErrNotAuthorized, not retried.
func (s *Store) putRecords(ctx context.Context, k partKey, recs []disRecord, ps *putState, advanced bool, creds *disbackend.Credentials) (sns []int64, throttle time.Duration, err error) {
	sns, err = s.putRecordsThrottled(ctx, k, recs, ps, advanced, creds, &throttle)
	return sns, throttle, err
}

// putRun is the state of one putRecords across its attempts. Only the
// partition's writer goroutine uses it.
type putRun struct {
	s        *Store
	k        partKey
	recs     []disRecord
	ps       *putState
	advanced bool
	creds    *disbackend.Credentials // nil: the gateway's
	// throttle adds up the pacer's waits and the backoffs after DIS.4303.
	throttle *time.Duration
	sns      []int64 // by index into recs, set as DIS accepts them
	todo     []int   // indexes into recs still to be written, in order
	deadline time.Time
	backoff  time.Duration // of the next retry, before jitter
	// unverified: the last PutRecords got no answer and DIS may have
	// applied it; look (verifyPut) before sending its records again.
	unverified bool
	lastErr    error // the last reason to send records again
}

// putOutcome is what one PutRecords came to, as classify sorts it and
// apply carries it out.
type putOutcome struct {
	accepted []acceptedRecord // in the call's order
	retry    []int            // indexes into recs to send again, in order
	limited  bool             // a DIS.4303 among the reasons to retry
	// maybeApplied: no answer, or DIS failed, while the partition's next
	// sequence number is known: DIS may have written the records.
	maybeApplied bool
	reason       error // the last reason to retry
	// outOfOrder are the records DIS accepted after refusing an earlier
	// one of the call: the first of each run of acceptances.
	outOfOrder []int
	// fatal, when set, ends putRecords: what precedes it in the answer is
	// still in the outcome (apply then only warns and notes the pressure).
	fatal error
}

type acceptedRecord struct {
	idx int // into recs
	sn  int64
}

// putRecordsThrottled is putRecords, adding to *throttle as it waits. Each
// attempt paces, sends, classifies the answer and applies it; an attempt
// that leaves records to send again backs off first (backOff), and one
// whose PutRecords may have been applied without an answer is checked
// (verifyPut) before its records go again.
func (s *Store) putRecordsThrottled(ctx context.Context, k partKey, recs []disRecord, ps *putState, advanced bool, creds *disbackend.Credentials, throttle *time.Duration) ([]int64, error) {
	r := &putRun{s: s, k: k, recs: recs, ps: ps, advanced: advanced, creds: creds, throttle: throttle,
		sns: make([]int64, len(recs)), todo: make([]int, len(recs)),
		deadline: time.Now().Add(s.opts.RetryTimeout), backoff: s.opts.RetryBackoff}
	for i := range r.todo {
		r.todo[i] = i
	}
	s.learn(ctx, k, ps)
	for attempt := 0; ; attempt++ {
		if r.unverified {
			if left, ok := s.verifyPut(ctx, k, recs, r.todo, r.sns, ps); ok {
				r.unverified, r.todo = false, left
				if len(r.todo) == 0 {
					return r.sns, nil
				}
			}
		}
		out := putOutcome{retry: r.todo} // still unverified: DIS could not be asked; ask again after the backoff
		if !r.unverified {
			size, err := r.pace(ctx)
			if err != nil {
				return nil, err
			}
			resp, err := r.send(ctx, size)
			out = r.classify(ctx, resp, err)
			r.apply(out)
			if out.fatal != nil {
				return nil, out.fatal
			}
			if len(out.retry) == 0 {
				return r.sns, nil
			}
		}
		if err := r.backOff(ctx, attempt, out); err != nil {
			return nil, err
		}
		r.todo = out.retry
	}
}

// pace waits until the partition's pacer lets the records still to be
// written go, and adds the wait to the throttle time. It returns their data
// bytes; an error (ctx ended) wraps ErrUnavailable.
func (r *putRun) pace(ctx context.Context) (size int, err error) {
	for _, idx := range r.todo {
		size += len(r.recs[idx].data)
	}
	waited, err := r.ps.wait(ctx, r.advanced, len(r.todo), size)
	*r.throttle += waited
	r.s.opts.Metrics.Throttled(waited)
	if err != nil {
		return 0, fmt.Errorf("%w: put records to %s/%d: %v", disbackend.ErrUnavailable, r.k.stream, r.k.part, err)
	}
	return size, nil
}

// send writes the records still to be written, size bytes of data, with
// one PutRecords bounded by RequestTimeout (callToEnd: it waits for the
// request to end even when ctx ends first), then charges the pacer with
// them, whatever the answer.
func (r *putRun) send(ctx context.Context, size int) (*model.SendRecordsResponse, error) {
	s := r.s
	body := putRecordsBody(r.k.stream, r.k.part, r.recs, r.todo)
	rctx, cancel := context.WithTimeout(disbackend.WithCredentials(ctx, r.creds), s.opts.RequestTimeout)
	hc := s.hcOf(r.creds)
	resp, err := callToEnd(rctx, s, "put records", func() (*model.SendRecordsResponse, error) {
		v, err := hc.Sync(&putRequest{Body: body}, putRecordsDef())
		if err != nil {
			return nil, err
		}
		return v.(*model.SendRecordsResponse), nil
	})
	cancel()
	s.opts.Metrics.PutRecords(len(r.todo), size)
	r.ps.charge(time.Now(), r.advanced, len(r.todo), size)
	return resp, err
}

// classify sorts what a PutRecords came to, its answer or its error, into
// a putOutcome. It changes nothing; apply does.
func (r *putRun) classify(ctx context.Context, resp *model.SendRecordsResponse, err error) putOutcome {
	if err != nil {
		return r.classifyError(ctx, err)
	}
	return r.classifyAnswer(resp)
}

// classifyError: the whole PutRecords failed. A retriable failure (see
// disError.retriable; also this request's own timeout) sends every record
// again, after a look (maybeApplied) when there was no answer or DIS
// failed; any other is fatal, as ErrUnavailable once ctx has ended.
func (r *putRun) classifyError(ctx context.Context, err error) putOutcome {
	var de *disError
	if !errors.As(err, &de) && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		// This request's own timeout: no answer, like a dropped
		// connection.
		de = &disError{cause: err, sentinel: disbackend.ErrUnavailable}
	}
	if de == nil || !de.retriable() {
		if ctx.Err() != nil {
			return putOutcome{fatal: fmt.Errorf("%w: %v", disbackend.ErrUnavailable, err)}
		}
		return putOutcome{fatal: err}
	}
	return putOutcome{
		retry: r.todo, reason: err, limited: de.flowControl(),
		// No answer, or DIS failed: it may have written them.
		maybeApplied: r.ps.known && (de.status == 0 || de.status >= 500),
	}
}

// classifyAnswer sorts an answer's records, in order: accepted with their
// sequence numbers, refused with a retriable code (DIS.4303, DIS.5xxx) to
// send again, and accepted after a refusal (outOfOrder). A refusal that is
// not retriable, a record without a valid sequence number, or an answer
// that does not match the request is fatal.
func (r *putRun) classifyAnswer(resp *model.SendRecordsResponse) putOutcome {
	var out putOutcome
	if resp.Records == nil || len(*resp.Records) != len(r.todo) {
		out.fatal = fmt.Errorf("put records: %d results for %d records", lenOf(resp.Records), len(r.todo))
		return out
	}
	out.accepted = make([]acceptedRecord, 0, len(r.todo))
	failedBefore := false
	for i, e := range *resp.Records {
		idx := r.todo[i]
		if e.ErrorCode != nil && *e.ErrorCode != "" {
			de := refusal(e)
			if !de.retriable() {
				out.fatal = fmt.Errorf("put records: record %d: %w", idx, de)
				return out
			}
			out.retry, out.reason = append(out.retry, idx), de
			out.limited = out.limited || de.flowControl()
			failedBefore = true
			continue
		}
		if failedBefore {
			failedBefore = false // one warning per run of refusals
			out.outOfOrder = append(out.outOfOrder, idx)
		}
		if e.SequenceNumber == nil {
			out.fatal = fmt.Errorf("put records: record %d: no sequence number", idx)
			return out
		}
		sn, err := strconv.ParseInt(*e.SequenceNumber, 10, 64)
		if err != nil {
			out.fatal = fmt.Errorf("put records: record %d: sequence number %q", idx, *e.SequenceNumber)
			return out
		}
		out.accepted = append(out.accepted, acceptedRecord{idx: idx, sn: sn})
	}
	return out
}

// refusal is the disError of a record that a PutRecords answer refused.
func refusal(e model.PutRecordsResultEntry) *disError {
	msg := ""
	if e.ErrorMessage != nil {
		msg = *e.ErrorMessage
	}
	return &disError{status: 200, code: *e.ErrorCode, message: msg, sentinel: sentinelFor(*e.ErrorCode)}
}

// apply carries out an outcome: a DIS.4303 marks the partition as pressed
// (pacer.underPressure), and each record accepted out of order is logged
// and counted (OutOfOrder). Unless the outcome is fatal, the accepted
// records get their sequence numbers, the partition's next one advances
// (putState.advance), and the run notes whether to look before sending
// again and why it retries.
func (r *putRun) apply(out putOutcome) {
	if out.limited {
		r.ps.pressed = time.Now()
	}
	for _, idx := range out.outOfOrder {
		r.s.log.Warn("DIS accepted a record after refusing an earlier one of the partition",
			zap.String("stream", r.k.stream), zap.Int32("partition", r.k.part),
			zap.Int("record", idx), zap.Int64("out_of_order_total", r.s.outOfOrder.Add(1)))
	}
	if out.fatal != nil {
		return
	}
	sns := make([]int64, len(out.accepted))
	for i, a := range out.accepted {
		r.sns[a.idx], sns[i] = a.sn, a.sn
	}
	r.ps.advance(sns)
	r.unverified = out.maybeApplied
	if out.reason != nil {
		r.lastErr = out.reason
	}
}

// backOff comes between an attempt that left out.retry to send and the
// next: past the deadline (RetryTimeout) it gives up with ErrUnavailable;
// otherwise it sleeps the backoff with jitter, counted as throttle time
// when DIS.4303 was among the reasons, and doubles it up to
// maxRetryBackoff. DIS failing (not its rate limits, which pacing meets)
// is warned about once per putRecords, not per retry.
func (r *putRun) backOff(ctx context.Context, attempt int, out putOutcome) error {
	s, k := r.s, r.k
	if time.Now().After(r.deadline) {
		s.log.Warn("put records failed: giving up", zap.String("stream", k.stream), zap.Int32("partition", k.part),
			zap.Int("records", len(out.retry)), zap.Duration("retried_for", s.opts.RetryTimeout), zap.Error(r.lastErr))
		return fmt.Errorf("%w: put records to %s/%d: still refused after %v: %v",
			disbackend.ErrUnavailable, k.stream, k.part, s.opts.RetryTimeout, r.lastErr)
	}
	if attempt == 0 && !out.limited {
		s.log.Warn("put records failed: retrying", zap.String("stream", k.stream), zap.Int32("partition", k.part),
			zap.Int("records", len(out.retry)), zap.Error(r.lastErr))
	}
	d := r.backoff/2 + rand.N(r.backoff/2+1)
	s.log.Debug("retrying put records", zap.String("stream", k.stream), zap.Int32("partition", k.part),
		zap.Int("records", len(out.retry)), zap.Duration("backoff", d), zap.Error(r.lastErr))
	t := time.NewTimer(d)
	select {
	case <-ctx.Done():
		t.Stop()
		return fmt.Errorf("%w: put records to %s/%d: %v", disbackend.ErrUnavailable, k.stream, k.part, ctx.Err())
	case <-t.C:
	}
	if out.limited {
		*r.throttle += d
		s.opts.Metrics.Throttled(d)
	}
	r.backoff = min(2*r.backoff, maxRetryBackoff)
	return nil
}

func lenOf[T any](p *[]T) int {
	if p == nil {
		return 0
	}
	return len(*p)
}
