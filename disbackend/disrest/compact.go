package disrest

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
	"github.com/disgw/disgw/kafkawire/batch"
)

// Compacted topics on DIS (docs/compaction.md). DIS expires records by age
// only. For a stream whose cleanup.policy is compact (without delete), the
// compactor keeps every live key by re-appending the key's latest record
// (a copy: same key, value, headers and timestamp, a new offset) before DIS
// would expire it, so that reading the partition from its start always
// yields every live key's latest value. A tombstone (null value) is copied
// until delete.retention.ms has passed since it was first seen; then it is
// left to expire with the values before it.
//
// When to copy is decided from what DIS shows: the partition's retention
// (data_duration) and how old its oldest record is. DIS does not say when a
// record arrived (a record's timestamp is the producer's), so the compactor
// keeps samples of the partition's next sequence number over time: a
// record at offset o arrived after the last sample whose next was <= o,
// and by the first sample whose next was > o. The partition's oldest
// record (its first sequence number) has been there at least
// S = now - (when it had arrived at the latest), so DIS keeps records at
// least S; it keeps them at most R, the stream's data_duration. With
// H = min(R, S)/2, a record is copied once it may be older than H (by the
// earliest time it can have arrived), so a copy is made before the record
// has lived half of what DIS keeps, also under dislocal's
// --retention-unit, where an "hour" is shorter. Sweeps of a partition run
// every min(R, S)/8, at least every 5 minutes and at most every 2 seconds.
// Until a partition's records first expire, S is only how long it has
// been watched, so in its first retention period a live key is copied
// about log2(R / 2 s) times (about 18 for 168 hours), then every H.
//
// Writes are serialized per partition: every append goes through the
// partition's writer, which sends one PutRecords at a time in the order
// batches were queued (append.go). A copy job says which offset each of
// its records copies; the writer drops a copy whose key has a newer
// record known, or queued before it, or whose key was written by an append
// whose outcome is unknown (until a sweep has read past it), so a copy
// never overtakes a newer value of its key written through this gateway
// node. Writes by other nodes or DIS applications are indexed when a sweep
// reads them, but can race a copy: docs/compaction.md says that a compacted
// partition must have one writing gateway node.
//
// The key index of a partition (a 16-byte SHA-256 prefix of each key, the
// offset of its latest record, a tombstone's first-seen time) lives in
// memory and, as a snapshot, in DIS: records of SnapshotStream (one
// partition, 168 hours), pointed at by compactApp's checkpoint on the
// compacted partition. A start reads the snapshot and then the records
// the partition got after it; snapshots are written once 10,000 records
// or H have passed since the last, so a start reads at most that much of
// the partition. If the snapshot is gone, the index is rebuilt from the
// partition itself, which holds every live key: the snapshot only makes
// starting faster.

// SnapshotStream is the gateway-owned stream of key-index snapshots of
// compacted partitions (compact.go); not a topic.
const SnapshotStream = "__disgw_compaction"

const (
	compactMinSweep   = 2 * time.Second
	compactMaxSweep   = 5 * time.Minute
	compactListEvery  = 30 * time.Second
	snapshotEvery     = 10_000 // records indexed since the last snapshot
	snapshotChunkKeys = 20_000 // keys per snapshot record (<= 36 bytes each: under DIS's 1 MB)
	copyBatchRecords  = 500
	copyBatchBytes    = 512 << 10
	copyMaxPerSweep   = 50_000
	copyReadBytes     = 1 << 20
	maxSamples        = 256
)

// DefaultCompactionMaxKeys is Options.CompactionMaxKeys' default: the
// keys of compacted partitions one Store indexes, about 100 bytes of memory
// each.
const DefaultCompactionMaxKeys = 1_000_000

type keyHash [16]byte

func hashKey(k []byte) keyHash {
	sum := sha256.Sum256(k)
	return keyHash(sum[:16])
}

// centry is a key's latest record.
type centry struct {
	off   int64
	since int64 // a tombstone's first-seen time (unix ms); 0 for a value
}

// sample says that at unix ms at, the partition's next sequence number was
// next: every record at or after next arrived after at.
type sample struct{ next, at int64 }

// cpart is one compacted partition's key index.
type cpart struct {
	k        partKey
	streamID string
	created  int64 // the stream's create time, unix ms

	mu      sync.Mutex
	loaded  bool
	keys    map[keyHash]centry
	pending map[keyHash]int32 // records of the key sent or being sent, not yet applied
	indexed int64             // every record before it is in keys
	samples []sample          // ascending
	// unsure counts appends that failed with an outcome DIS may not have
	// told (their records may be in the partition): copies wait until a
	// sweep has read the partition past them.
	unsure    int64
	nextSweep time.Time
	snapAt    time.Time
	snapIdx   int64 // indexed when the last snapshot was taken
}

// compactor runs the sweeps of every compacted partition of a Store.
type compactor struct {
	s       *Store
	maxKeys int64
	keys    atomic.Int64 // entries across partitions
	lost    atomic.Int64 // live keys found expired before their copy
	// restored counts key indexes read from a snapshot.
	restored atomic.Int64

	mu       sync.Mutex
	parts    map[partKey]*cpart
	streams  map[string]disbackend.Stream
	listedAt time.Time
	snapOnce onceOK // SnapshotStream and compactApp created
}

func (c *compactor) init(s *Store, maxKeys int64) {
	c.s = s
	c.maxKeys = maxKeys
	c.parts = map[partKey]*cpart{}
	c.streams = map[string]disbackend.Stream{}
}

// keepsKeys reports whether cfg makes the compactor keep the stream's
// keys: cleanup.policy compact without delete. (compact,delete expires by
// retention as delete does, and DIS keeps every record until then.)
func keepsKeys(cfg disbackend.StreamConfig) bool {
	return cfg.CleanupPolicy == disbackend.CleanupCompact
}

// watch starts or stops compacting st after a create, an update or a
// listing.
func (c *compactor) watch(st disbackend.Stream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !keepsKeys(st.Config) {
		c.forgetLocked(st.Name)
		return
	}
	c.streams[st.Name] = st
	for p := int32(0); p < st.PartitionCount; p++ {
		k := partKey{st.Name, p}
		if _, ok := c.parts[k]; !ok {
			c.parts[k] = newCpart(k, st)
		}
	}
}

func newCpart(k partKey, st disbackend.Stream) *cpart {
	created := st.CreatedAt.UnixMilli()
	return &cpart{k: k, created: created, keys: map[keyHash]centry{}, pending: map[keyHash]int32{},
		samples: []sample{{0, created}}}
}

// forget drops a deleted stream's state.
func (c *compactor) forget(name string) {
	c.mu.Lock()
	c.forgetLocked(name)
	c.mu.Unlock()
}

func (c *compactor) forgetLocked(name string) {
	delete(c.streams, name)
	for k, cp := range c.parts {
		if k.stream == name {
			cp.mu.Lock()
			c.keys.Add(-int64(len(cp.keys)))
			cp.mu.Unlock()
			delete(c.parts, k)
		}
	}
}

// part returns the index of partition k of si's stream when it is one the
// compactor keeps, nil otherwise; it starts keeping it if it was not.
func (c *compactor) part(k partKey, si streamInfo) *cpart {
	if !keepsKeys(si.st.Config) {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cp := c.parts[k]
	if cp == nil {
		c.streams[si.st.Name] = si.st
		cp = newCpart(k, si.st)
		c.parts[k] = cp
	}
	if cp.streamID == "" {
		cp.streamID = si.id
	}
	return cp
}

// begin counts the records of a batch about to be sent as pending. It
// refuses a batch that would make the Store index more than maxKeys keys
// (ErrInvalidRecord, Kafka INVALID_RECORD). A copy job (src != nil) first
// loses every copy that is no longer its key's latest record, or whose key
// has a record pending, or any while an append's outcome is unknown; it
// returns the records to send.
func (c *compactor) begin(cp *cpart, recs []disbackend.Record, src []int64) ([]disbackend.Record, []int64, error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if src != nil {
		if cp.unsure > 0 {
			return nil, nil, nil
		}
		var keep []disbackend.Record
		var keepSrc []int64
		for i := range recs {
			h := hashKey(recs[i].Key)
			if e, ok := cp.keys[h]; ok && e.off == src[i] && cp.pending[h] == 0 {
				keep = append(keep, recs[i])
				keepSrc = append(keepSrc, src[i])
			}
		}
		recs, src = keep, keepSrc
	} else {
		fresh := int64(0)
		for i := range recs {
			h := hashKey(recs[i].Key)
			if _, ok := cp.keys[h]; !ok && cp.pending[h] == 0 {
				fresh++
			}
		}
		if fresh > 0 && c.keys.Load()+fresh > c.maxKeys {
			return nil, nil, fmt.Errorf("%w: the gateway indexes at most %d keys of compacted topics (dis_compaction_max_keys), and this batch has %d new ones",
				disbackend.ErrInvalidRecord, c.maxKeys, fresh)
		}
	}
	for i := range recs {
		cp.pending[hashKey(recs[i].Key)]++
	}
	return recs, src, nil
}

// written applies records that DIS stored at sns.
func (c *compactor) written(cp *cpart, recs []disbackend.Record, sns []int64) {
	now := time.Now().UnixMilli()
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for i := range recs {
		h := hashKey(recs[i].Key)
		c.unpend(cp, h)
		c.apply(cp, h, sns[i], recs[i].Value == nil, now)
	}
}

// release gives back the pending counts of records that were not sent.
func (c *compactor) release(cp *cpart, recs []disbackend.Record) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for i := range recs {
		c.unpend(cp, hashKey(recs[i].Key))
	}
}

// failed gives back the pending counts of records whose append failed;
// their outcome is unknown, so copies wait for the next sweep.
func (c *compactor) failed(cp *cpart, recs []disbackend.Record) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for i := range recs {
		c.unpend(cp, hashKey(recs[i].Key))
	}
	cp.unsure++
}

func (c *compactor) unpend(cp *cpart, h keyHash) {
	if n := cp.pending[h]; n > 1 {
		cp.pending[h] = n - 1
	} else {
		delete(cp.pending, h)
	}
}

// apply records that key h has a record at off (a tombstone when tomb)
// unless a later one is known. A tombstone keeps the first-seen time of
// the tombstone it replaces (a copy of it).
func (c *compactor) apply(cp *cpart, h keyHash, off int64, tomb bool, now int64) {
	e, ok := cp.keys[h]
	if ok && off <= e.off {
		return
	}
	var since int64
	if tomb {
		since = now
		if ok && e.since != 0 {
			since = e.since
		}
	}
	if !ok {
		c.keys.Add(1)
	}
	cp.keys[h] = centry{off: off, since: since}
}

// arrivedAfter returns a time (unix ms) before which the record at off
// cannot have arrived, from the samples; ok is false when none says.
func (cp *cpart) arrivedAfter(off int64) (int64, bool) {
	i, _ := slices.BinarySearchFunc(cp.samples, off+1, func(s sample, t int64) int {
		switch {
		case s.next < t:
			return -1
		case s.next > t:
			return 1
		}
		return 0
	})
	// samples[:i] have next <= off.
	if i == 0 {
		return 0, false
	}
	return cp.samples[i-1].at, true
}

// arrivedBy returns a time (unix ms) by which the record at off had
// arrived: the first sample that counts it (next > off), else now.
func (cp *cpart) arrivedBy(off, now int64) int64 {
	i, _ := slices.BinarySearchFunc(cp.samples, off+1, func(s sample, t int64) int { return cmp.Compare(s.next, t) })
	// samples[i:] have next > off.
	if i == len(cp.samples) {
		return now
	}
	return cp.samples[i].at
}

func (cp *cpart) addSample(next, at int64) {
	if n := len(cp.samples); n > 0 && cp.samples[n-1].next >= next {
		if cp.samples[n-1].next == next && n > 1 {
			// Still next at a later time: a tighter bound for what follows.
			cp.samples[n-1].at = max(cp.samples[n-1].at, at)
		}
		return
	}
	cp.samples = append(cp.samples, sample{next, at})
	if len(cp.samples) > maxSamples {
		// Thin out the middle: bounds only get earlier, copies earlier.
		thin := cp.samples[:1]
		for i := 1; i < len(cp.samples)-1; i += 2 {
			thin = append(thin, cp.samples[i])
		}
		cp.samples = append(thin, cp.samples[len(cp.samples)-1])
	}
}

// pruneSamples drops samples no record at or after first needs.
func (cp *cpart) pruneSamples(first int64) {
	i := 0
	for i+1 < len(cp.samples) && cp.samples[i+1].next <= first {
		i++
	}
	cp.samples = cp.samples[i:]
}

// run sweeps every compacted partition when it is due, and lists the
// streams every compactListEvery to learn those created or changed
// elsewhere. It ends when the Store closes.
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
// many records it read.
func (c *compactor) tail(ctx context.Context, cp *cpart, from, next int64, logAppend bool) (int, error) {
	n := 0
	now := time.Now().UnixMilli()
	err := c.s.scan(ctx, cp.k, from, next, copyReadBytes, logAppend, func(recs []fetched) bool {
		cp.mu.Lock()
		for i := range recs {
			if recs[i].rec.Key != nil {
				c.apply(cp, hashKey(recs[i].rec.Key), recs[i].sn, recs[i].rec.Value == nil, now)
			}
		}
		cp.indexed = max(cp.indexed, recs[len(recs)-1].sn+1)
		cp.mu.Unlock()
		n += len(recs)
		return true
	})
	return n, err
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

// snapshotPointer is the checkpoint metadata pointing at a snapshot:
// "snap=<sn>;n=<records>;id=<hex>;sid=<stream_id>".
func snapshotPointer(sn int64, n int, id uint64, sid string) string {
	return "snap=" + strconv.FormatInt(sn, 10) + ";n=" + strconv.Itoa(n) + ";id=" + strconv.FormatUint(id, 16) + ";sid=" + sid
}

func parseSnapshotPointer(meta string) (sn int64, n int, id uint64, sid string, ok bool) {
	var err error
	for _, f := range strings.Split(meta, ";") {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "snap":
			sn, err = strconv.ParseInt(v, 10, 64)
		case "n":
			n, err = strconv.Atoi(v)
		case "id":
			id, err = strconv.ParseUint(v, 16, 64)
		case "sid":
			sid = v
		}
		if err != nil {
			return 0, 0, 0, "", false
		}
	}
	return sn, n, id, sid, n > 0 && sid != ""
}

const snapshotMagic = "DGKS"

// encodeSnapshot returns the snapshot records of cp (locked).
func encodeSnapshot(cp *cpart, id uint64) [][]byte {
	hdr := func(chunk, n int) []byte {
		b := append([]byte(snapshotMagic), 1)
		b = append(b, byte(len(cp.streamID)))
		b = append(b, cp.streamID...)
		b = binary.BigEndian.AppendUint32(b, uint32(cp.k.part))
		b = binary.BigEndian.AppendUint64(b, id)
		b = binary.BigEndian.AppendUint32(b, uint32(chunk))
		b = binary.BigEndian.AppendUint32(b, uint32(n))
		return b
	}
	n := max(1, (len(cp.keys)+snapshotChunkKeys-1)/snapshotChunkKeys)
	out := make([][]byte, n)
	// Chunk 0 holds indexed and the samples.
	b := hdr(0, n)
	b = binary.AppendVarint(b, cp.indexed)
	b = binary.AppendUvarint(b, uint64(len(cp.samples)))
	for _, sm := range cp.samples {
		b = binary.AppendVarint(b, sm.next)
		b = binary.AppendVarint(b, sm.at)
	}
	chunk, inChunk := 0, 0
	count := func(c int) int { return min(snapshotChunkKeys, len(cp.keys)-c*snapshotChunkKeys) }
	b = binary.AppendUvarint(b, uint64(max(count(0), 0)))
	for h, e := range cp.keys {
		if inChunk == snapshotChunkKeys {
			out[chunk] = b
			chunk++
			inChunk = 0
			b = hdr(chunk, n)
			b = binary.AppendUvarint(b, uint64(count(chunk)))
		}
		b = append(b, h[:]...)
		b = binary.AppendVarint(b, e.off)
		b = binary.AppendVarint(b, e.since)
		inChunk++
	}
	out[chunk] = b
	return out
}

// decodeSnapshotChunk parses one snapshot record of (sid, part, id) into
// cp (locked); it returns the chunk number, the number of chunks and, in
// chunk 0, the offset the snapshot indexed up to.
func decodeSnapshotChunk(b []byte, sid string, part int32, id uint64, cp *cpart, c *compactor) (chunk, n int, indexed int64, ok bool) {
	if len(b) < 6 || string(b[:4]) != snapshotMagic || b[4] != 1 {
		return 0, 0, 0, false
	}
	l := int(b[5])
	b = b[6:]
	if len(b) < l+20 || string(b[:l]) != sid {
		return 0, 0, 0, false
	}
	b = b[l:]
	if int32(binary.BigEndian.Uint32(b)) != part || binary.BigEndian.Uint64(b[4:]) != id {
		return 0, 0, 0, false
	}
	chunk, n = int(binary.BigEndian.Uint32(b[12:])), int(binary.BigEndian.Uint32(b[16:]))
	b = b[20:]
	bad := false
	varint := func() int64 {
		v, k := binary.Varint(b)
		if k <= 0 {
			bad = true
			return 0
		}
		b = b[k:]
		return v
	}
	uvarint := func() uint64 {
		v, k := binary.Uvarint(b)
		if k <= 0 {
			bad = true
			return 0
		}
		b = b[k:]
		return v
	}
	if chunk == 0 {
		indexed = varint()
		ns := uvarint()
		for i := uint64(0); i < ns && !bad; i++ {
			next := varint()
			at := varint()
			cp.samples = append(cp.samples, sample{next, at})
		}
		slices.SortFunc(cp.samples, func(a, b sample) int { return cmp.Compare(a.next, b.next) })
		cp.samples = slices.CompactFunc(cp.samples, func(a, b sample) bool { return a.next == b.next })
	}
	keys := uvarint()
	for i := uint64(0); i < keys && !bad; i++ {
		if len(b) < 16 {
			bad = true
			break
		}
		var h keyHash
		copy(h[:], b[:16])
		b = b[16:]
		off := varint()
		since := varint()
		if bad {
			break
		}
		e, had := cp.keys[h]
		if !had || off > e.off {
			if !had {
				c.keys.Add(1)
			}
			cp.keys[h] = centry{off, since}
		}
	}
	return chunk, n, indexed, !bad
}

// ensureSnapshots creates SnapshotStream and compactApp once.
func (c *compactor) ensureSnapshots(ctx context.Context) error {
	return c.snapOnce.do(func() error {
		err := c.s.createStream(ctx, SnapshotStream, 1, disapi.MaxRetentionHours, nil)
		if err != nil && !errors.Is(err, disbackend.ErrStreamExists) {
			return err
		}
		return c.s.ensureApp(ctx, compactApp)
	})
}

// snapshot writes cp's index to SnapshotStream and points compactApp's
// checkpoint on the partition at it.
func (c *compactor) snapshot(ctx context.Context, cp *cpart, r disbackend.PartitionRange) error {
	if err := c.ensureSnapshots(ctx); err != nil {
		return err
	}
	var idb [8]byte
	_, _ = rand.Read(idb[:])
	id := binary.BigEndian.Uint64(idb[:])
	cp.mu.Lock()
	chunks := encodeSnapshot(cp, id)
	indexed, sid := cp.indexed, cp.streamID
	cp.mu.Unlock()
	recs := make([]disbackend.Record, len(chunks))
	now := time.Now().UnixMilli()
	for i, ch := range chunks {
		recs[i] = disbackend.Record{Value: ch, Timestamp: now, OffsetDelta: int32(i)}
	}
	res, err := c.s.appendJob(partKey{SnapshotStream, 0}, recordsBatch(recs), nil).Wait(ctx)
	if err != nil {
		return err
	}
	sn := min(max(indexed, r.First), r.Next)
	if err := c.s.commit(ctx, compactApp, cp.k.stream, cp.k.part, sn, snapshotPointer(res.BaseOffset, len(chunks), id, sid)); err != nil {
		return err
	}
	cp.mu.Lock()
	cp.snapAt, cp.snapIdx = time.Now(), indexed
	cp.mu.Unlock()
	c.s.log.Info("compactor: key index snapshot", zap.String("stream", cp.k.stream), zap.Int32("partition", cp.k.part),
		zap.Int64("indexed", indexed), zap.Int("records", len(chunks)), zap.Int64("snapshot_sn", res.BaseOffset))
	return nil
}

// restore reads the partition's last snapshot into cp.
func (c *compactor) restore(ctx context.Context, cp *cpart) error {
	_, meta, err := c.s.checkpointOf(ctx, compactApp, cp.k.stream, cp.k.part)
	if err != nil {
		return err
	}
	sn, n, id, sid, ok := parseSnapshotPointer(meta)
	cp.mu.Lock()
	mine := cp.streamID
	cp.mu.Unlock()
	if !ok || sid != mine {
		return errors.New("no snapshot")
	}
	got := map[int]bool{}
	var indexed int64
	// Its records follow sn, others' snapshots maybe between them.
	err = c.s.scan(ctx, partKey{SnapshotStream, 0}, sn, sn+int64(n)+1000, 4<<20, false, func(recs []fetched) bool {
		cp.mu.Lock()
		defer cp.mu.Unlock()
		for i := range recs {
			if chunk, _, idx, ok := decodeSnapshotChunk(recs[i].rec.Value, sid, cp.k.part, id, cp, c); ok {
				got[chunk] = true
				if chunk == 0 {
					indexed = idx
				}
			}
		}
		return len(got) < n
	})
	if err != nil {
		return err
	}
	if len(got) < n {
		return fmt.Errorf("snapshot at %d of %s has %d of its %d records", sn, SnapshotStream, len(got), n)
	}
	// Complete: the partition is read from where the snapshot ends.
	cp.mu.Lock()
	cp.indexed = max(cp.indexed, indexed)
	cp.snapAt, cp.snapIdx = time.Now(), cp.indexed
	keys := len(cp.keys)
	cp.mu.Unlock()
	c.restored.Add(1)
	c.s.log.Info("compactor: key index restored from its snapshot", zap.String("stream", cp.k.stream),
		zap.Int32("partition", cp.k.part), zap.Int("keys", keys), zap.Int64("indexed", indexed), zap.String("snapshot", strconv.FormatUint(id, 16)))
	return nil
}

// CompactionLost is how many live keys of compacted partitions this Store
// found expired in DIS before it copied them (no gateway ran long enough
// for DIS to expire them, or DIS expired sooner than it said).
func (s *Store) CompactionLost() int64 { return s.compact.lost.Load() }
