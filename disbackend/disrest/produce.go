package disrest

// The produce path of a partition: its writer (append.go) hands sendGroup
// a group of jobs taken from its queue in order, which goes through these
// steps, each a function below:
//
//   - admitFenced: each job's fence key asked (fence.go), the jobs refused
//     failed;
//   - writableStream: the stream, described again when the partition is
//     beyond the partitions known;
//   - takeOver: in cluster mode, the partition's first write in a new
//     generation waits for the previous leader and resolves its intent
//     (fenced.go);
//   - readIdem: the dedupe window and the last write intent read back from
//     DIS when they may be stale (idem.go);
//   - retryFirst: the retry of a batch cut short goes first, or the group
//     waits for it (idem.go's hold);
//   - checkPartial: the first records of a batch cut short read back and
//     compared with its retry's, once, before only its rest is sent;
//   - plan: each job checked (idempotence, compaction's keyHook) and
//     converted into DIS records, with the write intent of the records;
//   - writeIntent: the intent committed to DIS before the records go;
//   - send: the records in as few PutRecords as the limits allow
//     (putRecords, putrecords.go, the fence asked before each), each job
//     completed (finish) once its records are written, or refused when
//     they are not where one base offset says (a late write).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
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
	if group = s.admitFenced(k, group); len(group) == 0 {
		return nil
	}
	si, err := s.writableStream(ctx, k)
	if err != nil {
		s.failJobs(group, err)
		return nil
	}
	defer func() { ps.lastWrite = time.Now() }()
	if err := s.takeOver(ctx, k, si.id, ps, earliestDeadline(group)); err != nil {
		s.failJobs(group, fmt.Errorf("disrest: append to %s/%d: %w", k.stream, k.part, err))
		return nil
	}
	if err := s.readIdem(ctx, k, si.id, ps); err != nil {
		s.failJobs(group, err)
		return nil
	}
	group, hold, err := s.retryFirst(k, group)
	if hold {
		return group // the writer waits for the retry (writer.run)
	}
	if err != nil {
		s.failJobs(group, err)
		return nil
	}
	if err := s.checkPartial(ctx, k, si, group); err != nil {
		s.failJobs(group, err)
		return nil
	}
	p, rest := s.plan(k, si, group)
	if len(p.out) == 0 {
		return rest
	}
	if err := s.writeIntent(ctx, p, ps); err != nil {
		p.failFrom(0, err)
		return rest
	}
	s.send(ctx, p, ps)
	return rest
}

// admitFenced returns the jobs of group whose fence keys the fence
// allows now, in order, and fails the others with its error.
func (s *Store) admitFenced(k partKey, group []job) []job {
	out := group[:0]
	for i := range group {
		if err := s.fenced(group[i].key); err != nil {
			s.complete(&group[i], disbackend.AppendResult{}, fmt.Errorf("disrest: append to %s/%d: %w", k.stream, k.part, err))
			continue
		}
		out = append(out, group[i])
	}
	return out
}

// failJobs completes jobs with err.
func (s *Store) failJobs(jobs []job, err error) {
	for i := range jobs {
		s.complete(&jobs[i], disbackend.AppendResult{}, err)
	}
}

// writableStream returns the stream of partition k, described again when k
// is beyond the partitions known (grown by another node?). Errors: the
// stream's (streamInfo), ErrPartitionNotFound.
func (s *Store) writableStream(ctx context.Context, k partKey) (streamInfo, error) {
	si, err := s.streamInfo(ctx, k.stream, false)
	if err == nil && k.part >= si.st.PartitionCount {
		si, err = s.streamInfo(ctx, k.stream, true) // grown by another node?
	}
	if err != nil {
		return si, err
	}
	if k.part < 0 || k.part >= si.st.PartitionCount {
		return si, fmt.Errorf("disrest: append to %s/%d: %w", k.stream, k.part, disbackend.ErrPartitionNotFound)
	}
	return si, nil
}

// readIdem reads partition k's dedupe window and last intent back from DIS
// (resolveIdem) at the first write since start, after a write whose
// outcome is unknown, and after idemIdle without a write. Errors wrap
// ErrUnavailable.
func (s *Store) readIdem(ctx context.Context, k partKey, sid string, ps *putState) error {
	if ps.idemResolved && !s.clustered() && time.Since(ps.lastWrite) >= idemIdle {
		// Idle for a while: another node may have led the partition
		// meanwhile; merge its window and learn the end offset again.
		// (In cluster mode a partition has one leader per generation:
		// takeOver resolves it when the generation changes.)
		ps.idemResolved, ps.idemLoaded, ps.known = false, false, false
	}
	if ps.idemResolved {
		return nil
	}
	// The first write since start, or the last one's outcome is unknown:
	// the dedupe window and the last intent from DIS first.
	return s.resolveIdem(ctx, k, sid, ps)
}

// retryFirst orders group for partition k's batch cut short (idem.go),
// whose rest must follow its first records: its retry goes first. Without
// the retry in group, hold is true while the partition waits for it (the
// group goes back to the queue); when the Store closes meanwhile, err
// (ErrUnavailable) fails the group; once the wait is over, the batch cut
// short is dropped (logged) and group goes as it is.
func (s *Store) retryFirst(k partKey, group []job) (ordered []job, hold bool, err error) {
	p := s.idem.held(k)
	if p == nil {
		return group, false, nil
	}
	i := slices.IndexFunc(group, func(j job) bool { return p.isRetry(&j.b) })
	switch {
	case i > 0:
		return slices.Concat(group[i:i+1], group[:i], group[i+1:]), false, nil
	case i == 0:
		return group, false, nil
	case time.Now().Before(p.until) && !s.isClosed():
		return group, true, nil
	case time.Now().Before(p.until):
		return group, false, fmt.Errorf("disrest: append to %s/%d: %w: closing while the partition waits for the retry of a batch cut short", k.stream, k.part, disbackend.ErrUnavailable)
	}
	s.idem.clearPartial(k)
	s.log.Warn("the retry of a batch cut short did not come: other batches written after its first records",
		zap.String("stream", k.stream), zap.Int32("partition", k.part), zap.Int64("producer_id", p.pid),
		zap.Int32("sequence", p.seq), zap.Int64("base_offset", p.base), zap.Int32("written", p.done), zap.Int32("records", p.n))
	return group, false, nil
}

// checkPartial reads back the first records of partition k's batch cut
// short (idem.go) when group starts with its retry and they were not
// checked yet, and compares them with the retry's (key, value, headers,
// whatever the record format): a batch cut short is only inferred, from an
// intent and an end offset that moved into its records, and another
// node's late write (docs/cluster.md §4) that lands where the intent
// expected them moves the end offset the same way. When they differ, the
// batch cut short is forgotten (logged) and the retry is written whole, at
// the partition's end; when they match, the retry's rest follows them.
// Records expired from DIS cannot be compared and are taken as the
// batch's. Errors: DIS's reads, wrapping ErrUnavailable (the group fails;
// its producers retry). DIS GetCursor, GetRecords.
func (s *Store) checkPartial(ctx context.Context, k partKey, si streamInfo, group []job) error {
	if len(group) == 0 {
		return nil
	}
	b := &group[0].b
	p := s.idem.partialOf(k, b)
	if p == nil || p.checked {
		return nil
	}
	format := si.st.Config.RecordFormat
	if format == "" {
		format = s.opts.RecordFormat
	}
	if _, err := s.toDISRecords(b, nil, false, format); err != nil {
		return nil // refused in plan
	}
	raw, err := s.rawRecords(ctx, k, p.base, int(p.done))
	switch {
	case codeOf(err) == disapi.CodeSequenceNumberOutOfRange:
	case err != nil:
		return fmt.Errorf("disrest: append to %s/%d: %w: read the first records of a batch cut short: %v", k.stream, k.part, disbackend.ErrUnavailable, err)
	case !headOf(raw, b.Records):
		s.idem.clearPartial(k)
		s.log.Warn("the first records of a batch cut short are not its own (a late write of another node?): its retry written whole",
			zap.String("stream", k.stream), zap.Int32("partition", k.part), zap.Int64("producer_id", p.pid),
			zap.Int32("sequence", p.seq), zap.Int64("base_offset", p.base), zap.Int32("written", p.done), zap.Int32("records", p.n))
		return nil
	}
	s.idem.checkedPartial(k, p)
	return nil
}

// headOf reports whether the records read back, raw, are the first
// len(raw) of recs: the same keys, values and headers.
func headOf(raw []rawRecord, recs []disbackend.Record) bool {
	if len(raw) > len(recs) {
		return false
	}
	for i := range raw {
		got, _, _ := fromDIS(raw[i].data, raw[i].key, 0, false)
		want := &recs[i]
		if !bytes.Equal(got.Key, want.Key) || !bytes.Equal(got.Value, want.Value) || len(got.Headers) != len(want.Headers) {
			return false
		}
		for j, h := range got.Headers {
			if h.Key != want.Headers[j].Key || !bytes.Equal(h.Value, want.Headers[j].Value) {
				return false
			}
		}
	}
	return true
}

// keyHook is compaction's part in the writes of a partition whose keys the
// compactor indexes (compactindex.go; compactor.hook gives it). The writer
// calls prepare for each job it plans, then written or failed with the
// outcome of each job prepare let through.
type keyHook interface {
	// prepare returns the records of j to send, converted by convert. A
	// copy job (j.src set) first loses its stale copies, and send is
	// false when none is left; a producer's batch is refused (err) when
	// its new keys would exceed CompactionMaxKeys.
	prepare(j *job, convert func() ([]disRecord, error)) (recs []disRecord, send bool, err error)
	// written: DIS stored j's records at sns.
	written(j *job, sns []int64)
	// failed: j's append failed, its records may be in DIS.
	failed(j *job)
}

// groupPlan is what a group comes to: the records of its PutRecords, in
// order, the jobs they complete, and their write intent (idem.go). Only the
// partition's writer goroutine uses it.
type groupPlan struct {
	s         *Store
	k         partKey
	si        streamInfo
	logAppend bool
	format    string
	keys      keyHook                 // nil unless the compactor indexes the partition's keys
	creds     *disbackend.Credentials // the group's (writer.run never mixes them); nil: the gateway's

	out        []disRecord
	preps      []prepared
	intent     []idemEntry // of preps, in order
	idempotent bool        // an idempotent batch among preps
	// late: by index into preps, the jobs whose PutRecords was answered
	// when this node no longer might write the partition (send): refused
	// in finish.
	late map[int]lateWrite
	// producers: for each producer of an idempotent batch in preps, the
	// epoch and the sequence its next batch must start at.
	producers map[int64]nextBatch
}

type nextBatch struct {
	epoch int16
	seq   int32
}

// plan checks and converts the jobs of group, in order, into a groupPlan.
// It completes the jobs that are not to be written (an idempotent
// producer's retry, answered with the original's offsets; a copy no longer
// needed) or cannot be (refused, or records DIS cannot take), and returns
// the jobs from the first that must wait for the next PutRecords (see
// admit) as rest.
func (s *Store) plan(k partKey, si streamInfo, group []job) (p *groupPlan, rest []job) {
	format := si.st.Config.RecordFormat
	if format == "" {
		format = s.opts.RecordFormat
	}
	if format == FormatNative && gatewayStream(k.stream) {
		// Only the gateway reads its own streams: their records (group
		// states carry a header, tombstones a null value) are wrapped
		// when they need it, whatever the format of topics.
		format = FormatAuto
	}
	p = &groupPlan{s: s, k: k, si: si, logAppend: si.st.Config.TimestampType == disbackend.LogAppendTime, format: format,
		keys: s.compact.hook(k, si), creds: group[0].b.Credentials, producers: map[int64]nextBatch{}}
	for i := range group {
		j := &group[i]
		next, done := p.admit(j)
		if next {
			return p, group[i:]
		}
		if done {
			continue
		}
		if recs, partial, ok := p.records(j); ok {
			p.add(j, recs, partial)
		}
	}
	return p, nil
}

// admit applies the group's bounds and Kafka's idempotence rules
// (idemState.check) to j. next: j and the jobs after it wait for the next
// PutRecords, as the intent is full (maxIntentEntries, in cluster mode
// maxClusterIntentEntries) or j does not
// continue its producer's previous batch in the group. done: j is
// completed, a retry (answered as Kafka does, with the stored batch's
// offsets and its max timestamp as LogAppendTime) or refused.
func (p *groupPlan) admit(j *job) (next, done bool) {
	limit := maxIntentEntries
	if p.s.clustered() {
		limit = maxClusterIntentEntries
	}
	if n := len(p.intent); n >= limit && (idemProducer(&j.b) >= 0 || p.intent[n-1].pid >= 0) {
		return true, false
	}
	pid := idemProducer(&j.b)
	if pid < 0 {
		return false, false
	}
	if n, ok := p.producers[pid]; ok {
		return n.epoch != j.b.ProducerEpoch || n.seq != j.b.BaseSequence, false
	}
	dup, err := p.s.idem.check(p.k, &j.b)
	switch {
	case err != nil:
		p.fail(j, err)
	case dup != nil:
		p.s.complete(j, disbackend.AppendResult{BaseOffset: dup.BaseOffset, LogStartOffset: p.s.ranges.first(p.k), LogAppendTime: dup.MaxTimestamp, Duplicate: true}, nil)
	default:
		return false, false
	}
	return false, true
}

// records converts j's records to DIS records (toDISRecords): through the
// keyHook when the partition's keys are indexed; otherwise a copy job is
// dropped (its partition is no longer compacted), and of the retry of a
// batch cut short (idem.go) only the records not yet written are sent,
// partial saying where the others are. ok is false when j was completed.
func (p *groupPlan) records(j *job) (recs []disRecord, partial *idemPartial, ok bool) {
	convert := func() ([]disRecord, error) { return p.s.toDISRecords(&j.b, j.src, p.logAppend, p.format) }
	var err error
	switch {
	case p.keys != nil:
		var send bool
		if recs, send, err = p.keys.prepare(j, convert); err == nil && !send {
			p.s.complete(j, disbackend.AppendResult{BaseOffset: -1}, nil)
			return nil, nil, false
		}
	case j.src != nil:
		p.s.complete(j, disbackend.AppendResult{BaseOffset: -1}, nil)
		return nil, nil, false
	default:
		recs, err = convert()
		if err == nil && idemProducer(&j.b) >= 0 {
			if partial = p.s.idem.partialOf(p.k, &j.b); partial != nil {
				recs = recs[partial.done:] // written before: only the rest
			}
		}
	}
	if err != nil {
		p.fail(j, err)
		return nil, nil, false
	}
	return recs, partial, true
}

// add appends j's records, recs, to the plan, and j to the intent: an
// idempotent batch as its own entry, other records counted in a run.
func (p *groupPlan) add(j *job, recs []disRecord, partial *idemPartial) {
	if pid := idemProducer(&j.b); pid >= 0 {
		p.producers[pid] = nextBatch{j.b.ProducerEpoch, disbackend.IncSequence(j.b.BaseSequence, j.b.NumRecords)}
		maxTS := j.b.MaxTimestamp
		if p.logAppend {
			maxTS = time.Now().UnixMilli()
		}
		e := idemEntry{pid: pid, epoch: j.b.ProducerEpoch, seq: j.b.BaseSequence, n: int32(len(recs)), maxTS: maxTS}
		if partial != nil {
			e.n, e.done, e.base = j.b.NumRecords, partial.done, partial.base
		}
		if p.s.clustered() {
			e.sum = recordsSum(recs) // checked at resolution: another node's late write is not this batch
		}
		p.intent = append(p.intent, e)
		p.idempotent = true
	} else if n := len(p.intent); n > 0 && p.intent[n-1].pid < 0 {
		p.intent[n-1].n += int32(len(recs))
	} else {
		p.intent = append(p.intent, idemEntry{pid: -1, n: int32(len(recs))})
	}
	p.preps = append(p.preps, prepared{j: j, start: len(p.out), end: len(p.out) + len(recs), partial: partial})
	p.out = append(p.out, recs...)
}

// fail completes j, not written, with err.
func (p *groupPlan) fail(j *job, err error) {
	p.s.complete(j, disbackend.AppendResult{}, fmt.Errorf("disrest: append to %s/%d: %w", p.k.stream, p.k.part, err))
}

// failFrom fails the planned jobs from preps[i] on, whose append failed
// with err.
func (p *groupPlan) failFrom(i int, err error) {
	for _, pr := range p.preps[i:] {
		if p.keys != nil {
			p.keys.failed(pr.j)
		}
		p.fail(pr.j, err)
	}
}

// fenceKeys are the distinct fence keys of the plan's jobs.
func (p *groupPlan) fenceKeys() []string {
	var keys []string
	for _, pr := range p.preps {
		if !slices.Contains(keys, pr.j.key) {
			keys = append(keys, pr.j.key)
		}
	}
	return keys
}

// failFenced fails the planned jobs from preps[i] on after the fence
// refused one of their keys with err before a PutRecords: each with its
// own key's refusal, and those whose key is still allowed (another
// owner's writes of a shared stream, in the same PutRecords) with
// ErrUnavailable, to be sent again.
func (p *groupPlan) failFenced(i int, err error) {
	for _, pr := range p.preps[i:] {
		if p.keys != nil {
			p.keys.failed(pr.j)
		}
		jerr := p.s.fenced(pr.j.key)
		if jerr == nil {
			jerr = fmt.Errorf("%w: a write in the same PutRecords was refused: %v", disbackend.ErrUnavailable, err)
		}
		p.fail(pr.j, jerr)
	}
}

// writeIntent commits the plan's write intent (commitIntent) before its
// records go, when it has an idempotent batch; when it has none but the
// checkpoint may hold an intent that was not written (ps.idemStale), an
// empty one replaces it. Errors wrap ErrUnavailable; the checkpoint stays
// stale then.
func (s *Store) writeIntent(ctx context.Context, p *groupPlan, ps *putState) error {
	if !p.idempotent && !ps.idemStale {
		return nil
	}
	intent := p.intent
	if !p.idempotent {
		intent = nil
	}
	s.learn(ctx, p.k, ps)
	err := fmt.Errorf("%w: the end offset is not known", disbackend.ErrUnavailable)
	if ps.known {
		err = s.commitIntent(ctx, p.k, p.si.id, ps, intent)
	}
	if err != nil {
		ps.idemStale = true
		if !errors.Is(err, disbackend.ErrUnavailable) && !errors.Is(err, disbackend.ErrNotLeader) {
			err = fmt.Errorf("%w: keep the write intent: %v", disbackend.ErrUnavailable, err)
		}
		return err
	}
	ps.idemStale = false
	return nil
}

// send writes the plan's records with as few PutRecords as putLimit
// allows (putRecords, asking the fence for the plan's keys before each),
// completing each job once its last record is written (finish, after the
// keyHook's written). When a PutRecords fails, the jobs not completed fail
// with its error (failFenced's when the fence refused), and an idempotent
// group's outcome is resolved (readIdem) before the partition's next
// write. In cluster mode, a PutRecords answered when the fence no longer
// allows the partition is a late write: its jobs are refused (answered,
// finish).
func (s *Store) send(ctx context.Context, p *groupPlan, ps *putState) {
	maxBytes, maxCount := s.putLimit(p.si.advanced)
	sns := make([]int64, len(p.out))
	var throttle time.Duration
	keys := p.fenceKeys()
	check := func() error {
		for _, key := range keys {
			if err := s.fenced(key); err != nil {
				return err
			}
		}
		return nil
	}
	own := s.clustered() && !sharedStream(p.k.stream)
	done := 0 // preps completed
	for start := 0; start < len(p.out); {
		end := p.chunk(start, maxBytes, maxCount, ps.underPressure(time.Now()))
		exp, expKnown := ps.next, ps.known
		got, waited, err := s.putRecordsFenced(ctx, p.k, p.out[start:end], ps, p.si.advanced, p.creds, check)
		throttle += waited
		if err != nil {
			if p.idempotent {
				ps.idemResolved = false // the outcome is unknown: resolve before the next write
			}
			if errors.Is(err, errFenced) {
				p.failFenced(done, err)
			} else {
				p.failFrom(done, err)
			}
			return
		}
		copy(sns[start:end], got)
		if own {
			s.answered(p, ps, start, end, exp, expKnown, got[0])
		}
		start = end
		for ; done < len(p.preps) && p.preps[done].end <= start; done++ {
			pr := p.preps[done]
			if p.keys != nil {
				p.keys.written(pr.j, sns[pr.start:pr.end])
			}
			l, late := p.late[done]
			s.finish(p.k, pr, sns, p.logAppend, throttle, late, l)
		}
	}
}

// lateWrite is why a job's PutRecords came too late to be acknowledged.
type lateWrite struct {
	// moved: its records landed after another writer's (not where the
	// partition ended before it).
	moved bool
	// dropped: the partition was given up meanwhile (viewChanged): nothing
	// of it is to be remembered.
	dropped bool
}

// answered checks, in cluster mode, the answered PutRecords of
// p.out[start:end], whose first record DIS wrote at got; the partition
// ended at exp before it (when expKnown). When the fence no longer allows
// the partition (the lease lapsed, or the partition moved, while the
// request was on its way), a new leader may have resolved this node's
// intent before these records landed, or written before them: the jobs
// with records in the call are marked late, and refused (finish). When it
// still allows it and the records landed elsewhere than exp, another
// writer's records came between: a former leader's late write; these
// records are where DIS says and are acknowledged, with a warning.
func (s *Store) answered(p *groupPlan, ps *putState, start, end int, exp int64, expKnown bool, got int64) {
	moved := expKnown && got != exp
	if s.fence.mayWrite(disbackend.PartitionKey(p.k.stream, p.k.part)) == nil {
		if moved {
			s.log.Warn("records of another writer came before this node's: a former leader's late write?",
				zap.String("stream", p.k.stream), zap.Int32("partition", p.k.part), zap.Int64("expected_at", exp), zap.Int64("written_at", got))
		}
		return
	}
	if p.late == nil {
		p.late = map[int]lateWrite{}
	}
	for i, pr := range p.preps {
		if pr.start < end && pr.end > start {
			l := p.late[i]
			l.moved = l.moved || moved
			l.dropped = ps.dropped.Load()
			p.late[i] = l
		}
	}
}

// putLimit is what one PutRecords holds at most, in bytes of data and
// records: BatchBytes and BatchCount, and at most what DIS's buckets hold
// (one second of the stream type's limits, which is also DIS's limit on
// one PutRecords): the pacer sends it once its model, which never holds
// more than DIS's buckets, holds all of it.
func (s *Store) putLimit(advanced bool) (maxBytes, maxCount int) {
	cb, cr := paceCapacity(advanced)
	return min(s.opts.BatchBytes, int(cb)), min(s.opts.BatchCount, int(cr))
}

// chunk returns the end of the PutRecords of p.out from start: at least
// one record, at most maxCount records and maxBytes of data and, when the
// partition is at its limits (pressed: pacer.underPressure), cut before a
// record smaller than the one before it.
func (p *groupPlan) chunk(start, maxBytes, maxCount int, pressed bool) (end int) {
	end, size := start, 0
	for end < len(p.out) && end-start < maxCount && (end == start || size+len(p.out[end].data) <= maxBytes &&
		!(pressed && len(p.out[end].data) < len(p.out[end-1].data))) {
		size += len(p.out[end].data)
		end++
	}
	return end
}

// finish completes a job whose records all have sequence numbers: with
// its base offset when they are where it says (contiguous, and for the
// rest of a batch cut short, right after its first records); otherwise it
// is refused (refuseLate), unless it is a write of the gateway's own shared
// streams, whose readers take records where they are (only warned about,
// as before). A job send found late (its answer came when this node no
// longer might write the partition) is refused too; when its records are
// where it says (not moved), an idempotent batch is still remembered
// (unless the partition was given up meanwhile), so that its retry at
// this node, once its lease holds again, is answered as a duplicate.
func (s *Store) finish(k partKey, pr prepared, sns []int64, logAppend bool, throttle time.Duration, late bool, why lateWrite) {
	base := sns[pr.start]
	last := sns[pr.end-1]
	mine := sns[pr.start:pr.end]
	from := base
	if pr.partial != nil {
		from = pr.partial.base + int64(pr.partial.done)
	}
	contiguous := s.contiguous(k, mine, from)
	switch {
	case !contiguous && !sharedStream(k.stream):
		if pr.partial != nil {
			s.idem.clearPartial(k)
		}
		s.refuseLate(k, pr.j, mine, "their sequence numbers are not contiguous (another writer in between)")
		s.noteWritten(k, last)
		return
	case late && why.moved:
		s.refuseLate(k, pr.j, mine, "another writer's records came before them, and this node no longer leads the partition (a late write)")
		s.noteWritten(k, last)
		return
	case late:
		if pr.partial != nil {
			base = pr.partial.base
			s.idem.clearPartial(k)
		}
		if idemProducer(&pr.j.b) >= 0 && !why.dropped {
			s.idem.remember(k, &pr.j.b, base, base+int64(pr.j.b.NumRecords)-1, pr.j.b.MaxTimestamp)
		}
		s.refuseLate(k, pr.j, mine, "answered after this node's lease lapsed or the partition moved: a new leader may not know them")
		s.noteWritten(k, last)
		return
	}
	if pr.partial != nil {
		base = pr.partial.base
		last = base + int64(pr.j.b.NumRecords) - 1
		s.idem.clearPartial(k)
		s.log.Info("the rest of a batch cut short written", zap.String("stream", k.stream), zap.Int32("partition", k.part),
			zap.Int64("producer_id", pr.j.b.ProducerID), zap.Int64("base_offset", base), zap.Int("written_before", int(pr.partial.done)))
	}
	res := disbackend.AppendResult{BaseOffset: base, LogAppendTime: -1, Throttle: throttle}
	maxTS := pr.j.b.MaxTimestamp
	if logAppend {
		res.LogAppendTime = time.Now().UnixMilli() // DIS's own stamp is not returned by PutRecords
		maxTS = res.LogAppendTime
	}
	if idemProducer(&pr.j.b) >= 0 {
		s.idem.remember(k, &pr.j.b, base, last, maxTS)
	}
	s.ranges.put(k, disbackend.PartitionRange{First: s.ranges.first(k), Next: last + 1})
	s.notify()
	res.LogStartOffset = s.ranges.first(k)
	s.complete(pr.j, res, nil)
}

// noteWritten advances partition k's cached range past last, a record
// DIS wrote, and wakes long polls.
func (s *Store) noteWritten(k partKey, last int64) {
	if r, ok := s.ranges.get(k, 0); !ok || r.Next <= last {
		s.ranges.put(k, disbackend.PartitionRange{First: s.ranges.first(k), Next: last + 1})
	}
	s.notify()
}

// contiguous reports whether the sequence numbers of a batch's records,
// sns, are from, from+1, ...: otherwise another writer interleaved, or DIS
// accepted a later record after refusing an earlier one. On the shared
// streams (sharedStream), whose jobs finish takes as they are, it warns
// and counts OutOfOrder.
func (s *Store) contiguous(k partKey, sns []int64, from int64) bool {
	for i := range sns {
		if want := from + int64(i); sns[i] != want {
			if sharedStream(k.stream) {
				s.log.Warn("sequence numbers of a batch not contiguous",
					zap.String("stream", k.stream), zap.Int32("partition", k.part),
					zap.Int64("want", want), zap.Int64("got", sns[i]), zap.Int64("out_of_order_total", s.outOfOrder.Add(1)))
			}
			return false
		}
	}
	return true
}

// toDISRecords maps a producer's batch to DIS records in format, from the
// records the gateway decoded (Batch.Records); a batch given without them
// (not through the gateway) is decoded here. src, for a compactor's copy
// job, are the sequence numbers the records copy (toDIS). A batch with records that
// format native cannot store or that are larger than DIS takes in one
// record is refused whole with a disbackend.RecordsError naming each
// (KIP-467 record errors): ErrRecordTooLarge (Kafka MESSAGE_TOO_LARGE) when
// any is too large, else errNeedsEnvelope (ErrInvalidRecord).
func (s *Store) toDISRecords(b *disbackend.Batch, src []int64, logAppend bool, format string) ([]disRecord, error) {
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
	var refused []disbackend.RecordError
	tooLarge := false
	m := batchTxnMeta(&b.Header)
	for i := range recs {
		copyOf := int64(-1)
		if i < len(src) {
			copyOf = src[i]
		}
		d, reason := toDIS(&recs[i], format, m, copyOf)
		switch {
		case reason != "":
			refused = append(refused, disbackend.RecordError{Index: int32(i), Message: nativeRefusal + reason})
			continue
		case len(d.data) > maxRecordBytes:
			tooLarge = true
			refused = append(refused, disbackend.RecordError{Index: int32(i),
				Message: fmt.Sprintf("the record is %d bytes in DIS, more than the %d DIS takes in one record", len(d.data), maxRecordBytes)})
			continue
		}
		if logAppend {
			d.ts = -1 // DIS stamps it
		}
		out[i] = d
	}
	if refused != nil {
		re := &disbackend.RecordsError{Err: errNeedsEnvelope, Records: refused}
		if tooLarge {
			re.Err = disbackend.ErrRecordTooLarge
		}
		return nil, re
	}
	return out, nil
}

// earliestDeadline returns the earliest Deadline of group's producers'
// batches (the compactor's copies have none), zero when none has one.
func earliestDeadline(group []job) time.Time {
	var d time.Time
	for i := range group {
		if t := group[i].b.Deadline; !t.IsZero() && group[i].src == nil && (d.IsZero() || t.Before(d)) {
			d = t
		}
	}
	return d
}
