package disrest

// Idempotent producers on DIS: Kafka's rules through
// disbackend.ProducerStates, as localstore applies them, with the dedupe
// window kept in DIS as part of writing, so that it survives a restart of
// the gateway and an outage of DIS longer than RetryTimeout.
//
// Write-ahead checkpoint: before a PutRecords to partition P that carries
// an idempotent batch, P's writer commits the checkpoint of the
// gateway-owned app idemApp on P (CommitCheckpoint; sequence number = P's
// end offset), whose metadata (encodeIdem) holds the DIS stream_id, P's
// dedupe window (the newest batches per producer, fewer when they do not
// fit DIS's 1000 characters) and the intent: every batch going into that
// PutRecords, in order (producer id, epoch, first sequence, record count,
// max timestamp; a run of non-idempotent records as its count), and the
// end offset it is expected to be written at. The gateway is assumed to be
// P's only writer.
//
// Resolution (resolveIdem): before the first write to P after start, and
// after a PutRecords to P whose outcome is unknown, the writer reads the
// checkpoint and P's end offset (DescribeStream): the intent's batches
// that the end offset moved past (resolveIntent) were written there and
// join the window with those offsets, so a producer's retry of one is
// answered with its original offsets and not written again; the others
// were not written; one only partly written (a batch larger than one
// PutRecords, or cut at the partition's limits, its process killed
// between two) is completed by the producer's retry, which writes only
// its other records, and until that retry comes (held, at most
// defaultIdemHold, or until a transaction marker of its producer is
// queued: endedBy) the partition's other batches wait, so that the
// batch's records stay contiguous. Content is not compared: two batches
// with identical records are different writes, which only the sequence
// numbers tell apart. In cluster mode, where another node's late write
// (docs/cluster.md §4) can fill the offsets an intent expected, each
// idempotent batch of the intent also carries a checksum of its records,
// and a batch counts as written only where its records are (verifyIntent).
// When another DIS app writes to P the end offset can
// move without the intent being written: see docs/dis-backend.md,
// "Idempotent producers".

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
	"github.com/disgw/disgw/kafkawire/batch"
)

// idemApp is the gateway-owned app whose checkpoint on a partition holds
// the partition's dedupe window and write intent (see above).
const idemApp = "__disgw-idem"

// maxIntentEntries bounds the entries of one intent (idempotent batches,
// and runs of other records between them): a group with more is cut and
// the rest goes in the next PutRecords, so that the intent always fits the
// checkpoint metadata with room for the window.
const maxIntentEntries = 24

// maxClusterIntentEntries is maxIntentEntries in cluster mode, where each
// idempotent entry also carries its checksum (up to 8 characters more):
// as many characters as 24 entries without.
const maxClusterIntentEntries = 20

// idemIdle: a partition written to after this long without a write has
// its dedupe window and end offset read from DIS again first (another
// node may have led it meanwhile: several gateway nodes).
const idemIdle = 5 * time.Second

// defaultIdemSettle is how long resolveIdem waits, when an intent looks
// not (wholly) written, for a PutRecords of it still on its way to DIS
// before it looks again.
const defaultIdemSettle = 3 * time.Second

// idemState is guarded by mu; each partition's writer is its only user for
// that partition, so check and remember of one batch do not interleave with
// another batch of the partition.
type idemState struct {
	mu    sync.Mutex
	parts map[partKey]*disbackend.ProducerStates[int64]
	// partials: by partition, the batch a PutRecords cut short, to be
	// completed by its retry.
	partials map[partKey]*idemPartial
	appOnce  onceOK // idemApp created
	// nodesOnce: nodesApp created (cluster mode: the intents are its
	// checkpoints, fenced by DIS).
	nodesOnce onceOK
	// expiry is Options.ProducerStateExpiry and now its clock, set by New
	// (idemexpiry.go).
	expiry time.Duration
	now    func() time.Time
}

func (s *idemState) part(k partKey) *disbackend.ProducerStates[int64] {
	if s.parts == nil {
		s.parts = map[partKey]*disbackend.ProducerStates[int64]{}
	}
	p := s.parts[k]
	if p == nil {
		p = &disbackend.ProducerStates[int64]{}
		s.parts[k] = p
	}
	return p
}

// idemProducer is the producer id whose sequence b is checked and
// remembered under: its ProducerID, or -1 (none) for a transaction
// marker (a control batch: the coordinator's, of no sequence, as Kafka's
// markers are).
func idemProducer(b *disbackend.Batch) int64 {
	if b.Attributes&batch.AttrControl != 0 {
		return -1
	}
	return b.ProducerID
}

// check returns the original of a retried batch, or an error for a batch
// that cannot be accepted (ErrInvalidProducerEpoch, ErrOutOfOrderSequence);
// nil, nil means write it and then call remember.
func (s *idemState) check(k partKey, b *disbackend.Batch) (*disbackend.ProducerBatch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.part(k).Check(b.ProducerID, b)
}

// remember records a written batch at offsets [base, last] with max
// timestamp maxTS (ms).
func (s *idemState) remember(k partKey, b *disbackend.Batch, base, last, maxTS int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.part(k).Remember(b.ProducerID, b, base, last, maxTS, s.nowMS())
}

// window returns the batches remembered for partition k, newest (highest
// base offset) first, less those of producers idle for the expiry (not
// swept yet), so that a checkpoint never brings an expired producer back.
func (s *idemState) window(k partKey) []idemBatch {
	cutoff := s.cutoff()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []idemBatch
	if p := s.parts[k]; p != nil {
		p.Each(func(pid int64, ps *disbackend.ProducerState) {
			if ps.LastAppendMS <= cutoff {
				return
			}
			for _, b := range ps.Batches {
				out = append(out, idemBatch{pid: pid, epoch: ps.Epoch, b: b})
			}
		})
	}
	slices.SortFunc(out, func(a, b idemBatch) int { return cmp.Compare(b.b.BaseOffset, a.b.BaseOffset) })
	return out
}

// restore adds batches read back from DIS, from a checkpoint committed at
// atMS (ms), to partition k's states, oldest first: those already
// remembered are skipped, older epochs ignored. DIS keeps no time of the
// batches' writes, so each counts as appended at atMS (at most now): none
// when atMS is the expiry ago or longer.
func (s *idemState) restore(k partKey, batches []idemBatch, atMS int64) {
	slices.SortStableFunc(batches, func(a, b idemBatch) int { return cmp.Compare(a.b.BaseOffset, b.b.BaseOffset) })
	if atMS <= s.cutoff() {
		return
	}
	now := min(atMS, s.nowMS())
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.part(k)
	for _, ib := range batches {
		if ps := p.Get(ib.pid); ps != nil && ps.Epoch == ib.epoch &&
			slices.ContainsFunc(ps.Batches, func(b disbackend.ProducerBatch) bool { return b.FirstSeq == ib.b.FirstSeq }) {
			continue
		}
		p.Rebuild(ib.pid, ib.epoch, ib.b.FirstSeq, ib.b.BaseOffset, ib.b.LastOffset, ib.b.MaxTimestamp, now)
	}
}

// dropPart forgets partition k's window and batch cut short (the
// partition moved to another node: viewChanged).
func (s *idemState) dropPart(k partKey) {
	s.mu.Lock()
	delete(s.parts, k)
	delete(s.partials, k)
	s.mu.Unlock()
}

func (s *idemState) dropStream(name string) {
	s.mu.Lock()
	for k := range s.parts {
		if k.stream == name {
			delete(s.parts, k)
		}
	}
	for k := range s.partials {
		if k.stream == name {
			delete(s.partials, k)
		}
	}
	s.mu.Unlock()
}

// idemPartial is an intent's idempotent batch of which a PutRecords cut
// short (a batch of more records than one PutRecords takes, its process
// killed between two) wrote the first done records, from base on. The
// producer's retry of it writes only the rest and is answered with base.
type idemPartial struct {
	pid   int64
	epoch int16
	seq   int32
	n     int32
	base  int64
	done  int32
	// until: the partition's other writes wait for the retry until then
	// (see held).
	until time.Time
	// checked: its first records were read back and are the retry's
	// (checkPartial).
	checked bool
}

// endedBy reports whether b is a transaction marker (control batch) of p's
// producer: the transaction p's batch belongs to has ended (its
// coordinator aborted it, or the producer ended it, which it does only
// once its batches were answered), so no retry of p will come and the
// partition's writes need not wait for one.
func (p *idemPartial) endedBy(b *disbackend.Batch) bool {
	return b.Attributes&batch.AttrControl != 0 && b.ProducerID == p.pid
}

// isRetry reports whether b is the producer's retry of the batch p.
func (p *idemPartial) isRetry(b *disbackend.Batch) bool {
	return p.pid == b.ProducerID && p.epoch == b.ProducerEpoch && p.seq == b.BaseSequence && p.n == b.NumRecords
}

// defaultIdemHold is how long a partition's writes wait, after a batch cut
// short is found, for the producer's retry of it (see held).
const defaultIdemHold = 30 * time.Second

// held returns partition k's batch cut short while the partition's other
// writes wait for its retry: its rest must follow its first records
// directly, or its records would not be at the offsets the producer is
// told (base offset + index). After until, the partial is dropped: a retry
// coming later is written whole (its first records are then in DIS twice,
// the first copy never acknowledged).
func (s *idemState) held(k partKey) *idemPartial {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.partials[k]
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// partialOf returns partition k's partial batch when b is its retry.
func (s *idemState) partialOf(k partKey, b *disbackend.Batch) *idemPartial {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.partials[k]
	if p == nil || !p.isRetry(b) {
		return nil
	}
	return p
}

// setPartial sets partition k's batch cut short, its retry awaited for
// hold; the same batch set again keeps its deadline.
func (s *idemState) setPartial(k partKey, p *idemPartial, hold time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.partials == nil {
		s.partials = map[partKey]*idemPartial{}
	}
	if p == nil {
		delete(s.partials, k)
		return
	}
	c := *p
	c.until = time.Now().Add(hold)
	if o := s.partials[k]; o != nil && o.pid == c.pid && o.epoch == c.epoch && o.seq == c.seq && o.base == c.base {
		c.until = o.until
		c.checked = o.checked && o.done == c.done
	}
	s.partials[k] = &c
}

func (s *idemState) clearPartial(k partKey) { s.setPartial(k, nil, 0) }

// checkedPartial marks partition k's batch cut short, when it is still p,
// as checked (checkPartial).
func (s *idemState) checkedPartial(k partKey, p *idemPartial) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.partials[k]; o != nil && o.pid == p.pid && o.epoch == p.epoch && o.seq == p.seq && o.base == p.base && o.done == p.done {
		o.checked = true
	}
}

// pendingPartial returns partition k's partial batch unless intent
// completes it (the intent then describes it).
func (s *idemState) pendingPartial(k partKey, intent []idemEntry) *idemPartial {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.partials[k]
	if p == nil {
		return nil
	}
	for _, e := range intent {
		if e.pid == p.pid && e.epoch == p.epoch && e.seq == p.seq && e.done > 0 {
			return nil
		}
	}
	c := *p
	return &c
}

// idemBatch is one remembered batch of producer pid with epoch.
type idemBatch struct {
	pid   int64
	epoch int16
	b     disbackend.ProducerBatch
}

// idemEntry is one entry of an intent: an idempotent batch (pid >= 0) of
// n records, or a run of n records of other producers (pid -1).
type idemEntry struct {
	pid   int64
	epoch int16
	seq   int32
	n     int32
	maxTS int64 // ms
	// done > 0: the completion of a batch cut short (idemPartial), whose
	// first done records are from base on; this PutRecords has n-done.
	done int32
	base int64
	// sum, in cluster mode, is the checksum of the records the entry puts
	// in its PutRecords (recordsSum), checked when the intent is resolved
	// (verifyIntent): another node's late write (docs/cluster.md §4) that
	// fills the offsets the intent expected is not taken for its batches.
	// 0: none (one node, or an intent without it).
	sum uint32
}

// count is how many records the entry puts in its PutRecords.
func (e *idemEntry) count() int32 { return e.n - e.done }

// idemCheckpoint is what idemApp's checkpoint on a partition holds.
type idemCheckpoint struct {
	sid    string      // DIS stream_id of the stream it was written for
	end    int64       // the partition's end offset the intent is expected at
	intent []idemEntry // in write order
	window []idemBatch // the dedupe window before the intent
	// at: when it was committed (ms; decodeIdem: the base t0 of its
	// timestamps, which commitIntent takes from the clock).
	at int64
	// partial: a batch cut short earlier whose retry has not come yet.
	partial *idemPartial
}

// The metadata is text, numbers in base 36:
//
//	i1|<sid>|<end>|<t0>|<intent>|<window>
//
// intent: entries joined by ',', an idempotent batch as
// pid.epoch.seq.n.ts (with .done.back for the completion of a batch cut
// short, and ~sum in cluster mode) and a run of other records as n; window: producers
// joined by ',', each pid.epoch: and its batches oldest first joined by
// '/', each seq.n.back.ts, where back = end - base offset and ts = max
// timestamp - t0.
const idemMetaVersion = "i1"

func b36(v int64) string { return strconv.FormatInt(v, 36) }

func encodeEntry(e idemEntry, end, t0 int64) string {
	if e.pid < 0 {
		return b36(int64(e.n))
	}
	v := b36(e.pid) + "." + b36(int64(e.epoch)) + "." + b36(int64(e.seq)) + "." + b36(int64(e.n)) + "." + b36(e.maxTS-t0)
	if e.done > 0 {
		v += "." + b36(int64(e.done)) + "." + b36(end-e.base)
	}
	if e.sum != 0 {
		v += "~" + b36(int64(e.sum))
	}
	return v
}

func encodeWinBatch(b disbackend.ProducerBatch, end, t0 int64) string {
	return b36(int64(b.FirstSeq)) + "." + b36(b.LastOffset-b.BaseOffset+1) + "." + b36(end-b.BaseOffset) + "." + b36(b.MaxTimestamp-t0)
}

// encodeIdem encodes cp in at most max characters with t0 (ms) as the
// timestamps' base, keeping the newest batches of cp.window (which is
// newest first) that fit. ok is false when even the header and the intent
// do not fit.
func encodeIdem(cp *idemCheckpoint, t0 int64, max int) (meta string, kept int, ok bool) {
	var sb strings.Builder
	sb.WriteString(idemMetaVersion + "|" + cp.sid + "|" + b36(cp.end) + "|" + b36(t0) + "|")
	for i, e := range cp.intent {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(encodeEntry(e, cp.end, t0))
	}
	sb.WriteByte('|')
	head := sb.String()
	if len(head) > max {
		return "", 0, false
	}
	// The newest batches first, as many as fit (each producer's prefix
	// counted once).
	size, n := len(head), 0
	seen := map[int64]bool{}
	for _, ib := range cp.window {
		add := len(encodeWinBatch(ib.b, cp.end, t0)) + 1
		if !seen[ib.pid] {
			add += len(b36(ib.pid)) + len(b36(int64(ib.epoch))) + 3
		}
		if size+add > max {
			break
		}
		size += add
		seen[ib.pid] = true
		n++
	}
	tail := ""
	if p := cp.partial; p != nil {
		tail = "|" + b36(p.pid) + "." + b36(int64(p.epoch)) + "." + b36(int64(p.seq)) + "." + b36(int64(p.n)) + "." + b36(cp.end-p.base) + "." + b36(int64(p.done))
		size += len(tail)
	}
	for ; n >= 0; n-- {
		meta := head + encodeWindow(cp.window[:n], cp.end, t0) + tail
		if len(meta) <= max {
			return meta, n, true
		}
	}
	return "", 0, false
}

// encodeWindow encodes batches (newest first) by producer, in order of
// each producer's newest batch, its batches oldest first.
func encodeWindow(batches []idemBatch, end, t0 int64) string {
	var order []int64
	by := map[int64][]idemBatch{}
	for _, ib := range batches {
		if _, ok := by[ib.pid]; !ok {
			order = append(order, ib.pid)
		}
		by[ib.pid] = append(by[ib.pid], ib)
	}
	var sb strings.Builder
	for i, pid := range order {
		if i > 0 {
			sb.WriteByte(',')
		}
		bs := by[pid]
		sb.WriteString(b36(pid) + "." + b36(int64(bs[0].epoch)) + ":")
		for j := len(bs) - 1; j >= 0; j-- {
			if j < len(bs)-1 {
				sb.WriteByte('/')
			}
			sb.WriteString(encodeWinBatch(bs[j].b, end, t0))
		}
	}
	return sb.String()
}

var errIdemMeta = errors.New("not a dedupe checkpoint")

// decodeIdem decodes checkpoint metadata written by encodeIdem. It fails
// (errIdemMeta) on anything else, and on values out of range (negative
// counts or offsets, an epoch beyond int16, a sequence beyond int32).
func decodeIdem(meta string) (*idemCheckpoint, error) {
	f := strings.Split(meta, "|")
	if len(f) != 6 && len(f) != 7 || f[0] != idemMetaVersion || f[1] == "" {
		return nil, errIdemMeta
	}
	cp := &idemCheckpoint{sid: f[1]}
	var err error
	num := func(s string, lo, hi int64) int64 {
		v, e := strconv.ParseInt(s, 36, 64)
		if e != nil || v < lo || v > hi {
			err = errIdemMeta
		}
		return v
	}
	const maxOff = 1 << 62
	cp.end = num(f[2], 0, maxOff)
	t0 := num(f[3], -maxOff, maxOff)
	cp.at = t0
	ts := func(s string) int64 { return t0 + num(s, -maxOff, maxOff) }
	if f[4] != "" {
		for _, es := range strings.Split(f[4], ",") {
			es, sum, hasSum := strings.Cut(es, "~")
			p := strings.Split(es, ".")
			switch len(p) {
			case 1:
				if hasSum {
					return nil, errIdemMeta
				}
				cp.intent = append(cp.intent, idemEntry{pid: -1, n: int32(num(p[0], 1, 1<<31-1))})
			case 5, 7:
				e := idemEntry{pid: num(p[0], 0, 1<<63-1), epoch: int16(num(p[1], 0, 1<<15-1)),
					seq: int32(num(p[2], 0, 1<<31-1)), n: int32(num(p[3], 1, 1<<31-1)), maxTS: ts(p[4])}
				if hasSum {
					e.sum = uint32(num(sum, 1, 1<<32-1))
				}
				if len(p) == 7 {
					e.done = int32(num(p[5], 1, int64(e.n)-1))
					e.base = cp.end - num(p[6], 1, maxOff)
					if err == nil && (e.done >= e.n || e.base < 0) {
						return nil, errIdemMeta
					}
				}
				cp.intent = append(cp.intent, e)
			default:
				return nil, errIdemMeta
			}
		}
	}
	if f[5] != "" {
		for _, ps := range strings.Split(f[5], ",") {
			head, body, ok := strings.Cut(ps, ":")
			hp := strings.Split(head, ".")
			if !ok || len(hp) != 2 || body == "" {
				return nil, errIdemMeta
			}
			pid, epoch := num(hp[0], 0, 1<<63-1), int16(num(hp[1], 0, 1<<15-1))
			for _, bs := range strings.Split(body, "/") {
				p := strings.Split(bs, ".")
				if len(p) != 4 {
					return nil, errIdemMeta
				}
				seq, n, back := int32(num(p[0], 0, 1<<31-1)), num(p[1], 1, 1<<31-1), num(p[2], 1, maxOff)
				base := cp.end - back
				if err == nil && (base < 0 || base+n > cp.end) {
					return nil, errIdemMeta
				}
				cp.window = append(cp.window, idemBatch{pid: pid, epoch: epoch, b: disbackend.ProducerBatch{
					FirstSeq: seq, LastSeq: disbackend.IncSequence(seq, int32(n-1)),
					BaseOffset: base, LastOffset: base + n - 1, MaxTimestamp: ts(p[3]),
				}})
			}
		}
	}
	if len(f) == 7 {
		p := strings.Split(f[6], ".")
		if len(p) != 6 {
			return nil, errIdemMeta
		}
		pp := &idemPartial{pid: num(p[0], 0, 1<<63-1), epoch: int16(num(p[1], 0, 1<<15-1)), seq: int32(num(p[2], 0, 1<<31-1)),
			n: int32(num(p[3], 2, 1<<31-1)), base: cp.end - num(p[4], 1, maxOff)}
		pp.done = int32(num(p[5], 1, int64(pp.n)-1))
		if err == nil && (pp.base < 0 || pp.done >= pp.n) {
			return nil, errIdemMeta
		}
		cp.partial = pp
	}
	if err != nil {
		return nil, err
	}
	return cp, nil
}

// resolveIntent returns the idempotent batches of cp's intent that were
// written, with their offsets, given the partition's end offset now: the
// batches the end moved past, from cp.end on, in order (a batch only
// partly covered, which only a PutRecords cut short can leave, counts as
// not written: sending it again duplicates its written part rather than
// losing the rest). all reports that the whole intent was written. The
// gateway being the partition's only writer, an end beyond the intent
// means records written after it.
func resolveIntent(cp *idemCheckpoint, end int64) (written []idemBatch, all bool) {
	written, all, _ = resolveIntentPartial(cp, end)
	return written, all
}

// resolveIntentPartial is resolveIntent, and the idempotent batch only
// partly covered, if any.
func resolveIntentPartial(cp *idemCheckpoint, end int64) (written []idemBatch, all bool, partial *idemPartial) {
	off := cp.end
	for _, e := range cp.intent {
		base := off
		if e.done > 0 {
			base = e.base
		}
		if off+int64(e.count()) > end {
			if e.pid >= 0 && (end > off || e.done > 0) {
				partial = &idemPartial{pid: e.pid, epoch: e.epoch, seq: e.seq, n: e.n, base: base, done: e.done + int32(max(end-off, 0))}
			}
			return written, false, partial
		}
		if e.pid >= 0 {
			written = append(written, idemBatch{pid: e.pid, epoch: e.epoch, b: disbackend.ProducerBatch{
				FirstSeq: e.seq, LastSeq: disbackend.IncSequence(e.seq, e.n-1),
				BaseOffset: base, LastOffset: base + int64(e.n) - 1, MaxTimestamp: e.maxTS,
			}})
		}
		off += int64(e.count())
	}
	return written, true, nil
}

// verifyIntent returns how many leading entries of cp's intent have their
// records where the intent expected them, given the partition's end offset
// end: it reads the records of the entries wholly before end (GetCursor,
// GetRecords) and compares each checksummed entry's (idemEntry.sum) with
// recordsSum's of what lies there. The entries from the first that
// differs on were not written by the intent's PutRecords, whatever the end
// offset says; len(cp.intent) when every one checked matches (or none can
// be: the records expired). Errors: DIS's.
func (s *Store) verifyIntent(ctx context.Context, k partKey, cp *idemCheckpoint, end int64) (int, error) {
	off, n, sums := cp.end, 0, false
	for _, e := range cp.intent {
		if off+int64(e.count()) > end {
			break
		}
		off += int64(e.count())
		n++
		sums = sums || e.sum != 0
	}
	if !sums {
		return len(cp.intent), nil
	}
	raw, err := s.rawRecords(ctx, k, cp.end, int(off-cp.end))
	if codeOf(err) == disapi.CodeSequenceNumberOutOfRange {
		return len(cp.intent), nil
	}
	if err != nil {
		return 0, err
	}
	at := 0
	for i, e := range cp.intent[:n] {
		c := int(e.count())
		if e.sum != 0 && rawSum(raw[at:at+c]) != e.sum {
			return i, nil
		}
		at += c
	}
	return len(cp.intent), nil
}

// recordsSum is the checksum of DIS records as an intent keeps it
// (idemEntry.sum): CRC-32C of each record's partition key (none as empty,
// as sameRecord compares them) and data, each length-prefixed; never 0.
func recordsSum(recs []disRecord) uint32 {
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	for _, r := range recs {
		sumRecord(h, r.key, r.data)
	}
	return max(h.Sum32(), 1)
}

// rawSum is recordsSum of records read back from DIS.
func rawSum(recs []rawRecord) uint32 {
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	for _, r := range recs {
		sumRecord(h, r.key, r.data)
	}
	return max(h.Sum32(), 1)
}

func sumRecord(h hash.Hash32, key *string, data []byte) {
	var k string
	if key != nil {
		k = *key
	}
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(k)))])
	h.Write([]byte(k))
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(data)))])
	h.Write(data)
}

// resolveIdem reads idemApp's checkpoint on partition k and k's end offset
// (GetCheckpoint, DescribeStream) and adds what they tell to the window:
// on the first call of the writer the window kept, and the intent's
// batches that were written (resolveIntent). A checkpoint of another
// stream of the same name, or unreadable (logged), is ignored. Errors
// (DIS could not be asked) wrap ErrUnavailable.
func (s *Store) resolveIdem(ctx context.Context, k partKey, sid string, ps *putState) error {
	return s.resolveIdemMode(ctx, k, sid, ps, false)
}

// resolveIdemMode is resolveIdem; in cluster mode the checkpoint is the
// newer (higher sequence number) of nodesApp's and idemApp's (an intent
// written before cluster mode was turned on). takeover (takeOver: the
// partition's first write in a new generation) replaces the window and
// batch cut short this node holds with what DIS tells, unless the
// partition's end offset is still the one ps knew (no other node wrote
// it since), so that a former owner's stale window never survives.
func (s *Store) resolveIdemMode(ctx context.Context, k partKey, sid string, ps *putState, takeover bool) error {
	meta, none, err := s.readIntent(ctx, k)
	if err != nil {
		return fmt.Errorf("%w: read the dedupe checkpoint of %s/%d: %v", disbackend.ErrUnavailable, k.stream, k.part, err)
	}
	r, err := s.describeRange(ctx, k.stream, k.part)
	if err != nil {
		return fmt.Errorf("%w: read the end offset of %s/%d: %v", disbackend.ErrUnavailable, k.stream, k.part, err)
	}
	replace := takeover && !(ps.known && ps.idemLoaded && ps.next == r.Next)
	if replace {
		s.idem.dropPart(k)
	}
	ps.next, ps.known = r.Next, true
	var cp *idemCheckpoint
	if !none && meta != "" {
		if cp, err = decodeIdem(meta); err != nil {
			s.log.Warn("dedupe checkpoint unreadable: ignored", zap.String("stream", k.stream), zap.Int32("partition", k.part), zap.String("metadata", meta))
		} else if cp.sid != sid {
			cp = nil // left by an earlier stream of the same name
		}
	}
	if cp == nil {
		ps.idemResolved, ps.idemLoaded, ps.idemStale = true, true, false
		return nil
	}
	written, all, partial := resolveIntentPartial(cp, r.Next)
	if settle := s.settle(); !all && settle > 0 {
		// A PutRecords of the intent may still be on its way: sent by a
		// process that died since, or by this one before it gave up, and
		// DIS applies a request it received whoever waits for the answer.
		// Look again once such a request has landed.
		t := time.NewTimer(settle)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: resolve the write intent of %s/%d: %v", disbackend.ErrUnavailable, k.stream, k.part, ctx.Err())
		case <-t.C:
		}
		if r, err = s.describeRange(ctx, k.stream, k.part); err != nil {
			return fmt.Errorf("%w: read the end offset of %s/%d: %v", disbackend.ErrUnavailable, k.stream, k.part, err)
		}
		ps.next = r.Next
		written, all, partial = resolveIntentPartial(cp, r.Next)
	}
	if s.clustered() && len(written) > 0 {
		// Another node's late write may fill the offsets the intent
		// expected (docs/cluster.md §4): its batches count as written
		// only where their records are.
		kept, err := s.verifyIntent(ctx, k, cp, r.Next)
		if err != nil {
			return fmt.Errorf("%w: check the write intent of %s/%d: %v", disbackend.ErrUnavailable, k.stream, k.part, err)
		}
		if kept < len(cp.intent) {
			before := *cp
			before.intent = cp.intent[:kept]
			n := len(written)
			written, _, _ = resolveIntentPartial(&before, r.Next)
			all, partial = false, nil
			s.log.Warn("write intent not written: other records lie where it expected its batches (a late write of another node?)",
				zap.String("stream", k.stream), zap.Int32("partition", k.part), zap.Int64("expected_at", cp.end),
				zap.Int64("end_offset", r.Next), zap.Int("batches_by_offsets", n), zap.Int("batches_written", len(written)))
		}
	}
	if partial == nil && cp.partial != nil && (!ps.idemLoaded || replace) {
		partial = cp.partial // cut short before, its retry not seen yet
	}
	if partial != nil {
		s.idem.setPartial(k, partial, s.idemHold()) // until its retry comes
	}
	batches := written
	if !ps.idemLoaded || replace {
		// Merged with what this process remembers (batches known are
		// skipped): after an idle time, another node's batches join.
		batches = append(slices.Clone(cp.window), written...)
	}
	s.idem.restore(k, batches, cp.at)
	if len(cp.intent) > 0 {
		s.log.Info("write intent resolved", zap.String("stream", k.stream), zap.Int32("partition", k.part),
			zap.Int64("expected_at", cp.end), zap.Int64("end_offset", r.Next), zap.Bool("replaced", replace),
			zap.Int("batches", len(cp.intent)), zap.Int("idempotent_written", len(written)), zap.Bool("all_written", all), zap.Bool("partly_written", partial != nil))
	}
	ps.idemResolved, ps.idemLoaded = true, true
	// An intent not (wholly) written must not be read later against an
	// end offset that other writes moved: the next PutRecords commits a
	// checkpoint first.
	ps.idemStale = !all
	return nil
}

// readIntent reads the metadata of partition k's dedupe checkpoint: in
// cluster mode the newer of nodesApp's and idemApp's, else idemApp's.
// none: there is none. DIS GetCheckpoint.
func (s *Store) readIntent(ctx context.Context, k partKey) (meta string, none bool, err error) {
	read := func(app string) (int64, string, bool, error) {
		sn, meta, err := s.checkpointOf(ctx, app, k.stream, k.part)
		if errors.Is(err, disbackend.ErrAppNotFound) || codeOf(err) == disapi.CodeNoCheckpoint {
			return -1, "", true, nil
		}
		return sn, meta, false, err
	}
	sn, meta, none, err := read(idemApp)
	if err != nil || !s.clustered() {
		return meta, none, err
	}
	nsn, nmeta, nnone, err := read(nodesApp)
	if err != nil {
		return "", false, err
	}
	if !nnone && (none || nsn >= sn) {
		return nmeta, false, nil
	}
	return meta, none, nil
}

// idemHold is how long a batch cut short holds its partition's other
// writes (see held).
func (s *Store) idemHold() time.Duration {
	if s.opts.idemHold > 0 {
		return s.opts.idemHold
	}
	return defaultIdemHold
}

// commitIntent commits idemApp's checkpoint on partition k before the
// PutRecords of intent, at the partition's end offset ps.next (known),
// with the window. In cluster mode, with a membership (fence.member), it is
// nodesApp's checkpoint instead, committed with the node's client_id and
// generation_id: DIS refuses it from a node that is no longer a member of
// the current generation, and the write then fails with ErrNotLeader
// (docs/cluster.md §4). DIS CreateApp (once), CommitCheckpoint.
func (s *Store) commitIntent(ctx context.Context, k partKey, sid string, ps *putState, intent []idemEntry) error {
	clientID, gen, fenced := s.fence.member()
	app, once := idemApp, &s.idem.appOnce
	if fenced {
		app, once = nodesApp, &s.idem.nodesOnce
	}
	if err := once.do(func() error { return s.ensureApp(ctx, app) }); err != nil {
		return err
	}
	cp := &idemCheckpoint{sid: sid, end: ps.next, intent: intent, window: s.idem.window(k), partial: s.idem.pendingPartial(k, intent)}
	meta, kept, ok := encodeIdem(cp, s.idem.nowMS(), disbackend.MaxCheckpointMetadataLen)
	if !ok {
		return fmt.Errorf("disrest: write intent of %s/%d: %d batches do not fit a checkpoint", k.stream, k.part, len(intent))
	}
	if kept < len(cp.window) {
		s.log.Debug("dedupe window trimmed to fit a checkpoint", zap.String("stream", k.stream), zap.Int32("partition", k.part),
			zap.Int("kept", kept), zap.Int("batches", len(cp.window)))
	}
	if !fenced {
		return s.commit(ctx, idemApp, k.stream, k.part, ps.next, meta)
	}
	if err := s.fence.mayWrite(disbackend.PartitionKey(k.stream, k.part)); err != nil {
		return err
	}
	err := s.commitFenced(ctx, nodesApp, k.stream, k.part, ps.next, meta, clientID, gen)
	if fenceRefused(err) {
		s.opts.Metrics.ClusterIntentRefused()
		return fmt.Errorf("disrest: write intent of %s/%d: %w: DIS refused it for generation %d: %v", k.stream, k.part, disbackend.ErrNotLeader, gen, err)
	}
	return err
}

// ActiveProducers returns the idempotent producer states this process
// keeps for partition part of stream name, by producer id (DescribeProducers;
// after a restart, those of the dedupe window read back from DIS once the
// partition is written to). A stream or partition without state, known to
// DIS or not, has none. Errors: ErrClosed.
func (s *Store) ActiveProducers(ctx context.Context, name string, part int32) ([]disbackend.ActiveProducer, error) {
	s.closeMu.Lock()
	closed := s.closed
	s.closeMu.Unlock()
	if closed {
		return nil, fmt.Errorf("disrest: active producers: %w", disbackend.ErrClosed)
	}
	k := partKey{stream: name, part: part}
	out := []disbackend.ActiveProducer{}
	s.idem.mu.Lock()
	if p := s.idem.parts[k]; p != nil {
		p.Each(func(pid int64, ps *disbackend.ProducerState) {
			out = append(out, ps.Active(pid))
		})
	}
	s.idem.mu.Unlock()
	slices.SortFunc(out, func(a, b disbackend.ActiveProducer) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out, nil
}

var _ disbackend.ProducerDescriber = (*Store)(nil)
