package disrest

// The fetch path's shared, per-partition state (Read in read.go uses it):
//
//   - One GetRecords per position: Reads of a partition at the same next
//     sequence number share one in-flight GetRecords (a flight) and its
//     records, whoever started it; the flight runs on its own context, so a
//     reader that gives up does not fail the others.
//   - Read-ahead: every GetRecords asks for readAheadBytes (or the reader's
//     maxBytes when larger), and what it returns is kept in a small buffer
//     of contiguous runs of records (segments), so the next Read at a
//     position the buffer covers is answered without a call. Bounds, in
//     bytes of record data, keys and headers plus recordOverhead per record:
//     partBufferBytes per partition (4 MiB) and totalBufferBytes per Store
//     (64 MiB); past them the least recently used records go first.
//   - Bounded polling: a partition's range (DescribeStream) is read from DIS
//     at most once per poll tick (Options.PollInterval) however many
//     consumers read it, by one shared call; a Read at the high watermark
//     within the same tick answers from the cached range without a call. So
//     a consumer waiting at the high watermark costs one DescribeStream per
//     PollInterval per partition (shared by all consumers of it), and records
//     written by others (other nodes, DIS apps) are found at the first tick
//     after they were written. Records appended through this Store move the
//     cached range at once. A Read beyond the cached range's next always
//     waits for a refresh (never OFFSET_OUT_OF_RANGE from a stale range);
//     one inside it does not wait (the records are there). With
//     PollInterval < 0 every Read reads the range (or uses it for RangeTTL),
//     as concurrent Reads share the call.
//   - A GetRecords that finds nothing below the range's next (a range ahead
//     of the records) is not repeated at that position until the next tick
//     or the range grows.

import (
	"context"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
)

const (
	// readAheadBytes is the max_fetch_bytes of a GetRecords (the reader's
	// maxBytes when larger): 2 MiB, one second of a COMMON partition's read
	// limit and more than any record DIS holds (1 MiB with the envelope), so
	// a GetRecords never asks for less than the next record (DIS would then
	// answer nothing, forever).
	readAheadBytes = disapi.CommonReadBytesPerSec
	// partBufferBytes bounds the records buffered for one partition: 4 MiB,
	// room for a read-ahead and the one before it (so a consumer a little
	// behind another still finds its records).
	partBufferBytes = 4 << 20
	// totalBufferBytes bounds the records buffered across the Store: 64 MiB.
	totalBufferBytes = 64 << 20
	// maxSegments bounds the separate runs of records buffered per
	// partition (consumers far apart).
	maxSegments = 4
	// recordOverhead is what a buffered record costs besides its data, key
	// and headers (the decoded record's fields), in bytes.
	recordOverhead = 128
	// headerOverhead is the same for each header.
	headerOverhead = 48
	// maxPartStates: when more partitions than this have state, the idle
	// ones (nothing buffered or in flight) are forgotten.
	maxPartStates = 1 << 16
)

// readCache holds the read state of every partition read through the Store.
type readCache struct {
	// ahead, partCap and totalCap are readAheadBytes, partBufferBytes and
	// totalBufferBytes; tests lower them.
	ahead             int
	partCap, totalCap int64

	// mu guards m.
	mu sync.Mutex
	m  map[partKey]*partReads

	used  atomic.Int64 // bytes buffered across partitions
	clock atomic.Int64 // LRU stamps
}

func (c *readCache) init() {
	c.m = map[partKey]*partReads{}
	c.ahead, c.partCap, c.totalCap = readAheadBytes, partBufferBytes, totalBufferBytes
}

// partReads is one partition's read state.
type partReads struct {
	used atomic.Int64 // LRU stamp of the last buffer use

	// mu guards the rest. Lock order: readCache.mu, then partReads.mu.
	mu sync.Mutex
	// id and logAppend are the stream's DIS id and timestamp type the
	// buffer was filled for; a change empties it (the stream was recreated
	// or reconfigured).
	id        string
	logAppend bool
	// gen counts resets; a flight started before one does not fill the
	// buffer.
	gen   int64
	segs  []*segment
	bytes int64
	// flights are the GetRecords in flight, by the sequence number they
	// start at.
	flights map[int64]*flight
	// emptyAt is where the last GetRecords found nothing, while the range
	// said next was emptyNext, started at epoch emptyEpoch: Reads there that
	// began no later, with the range unchanged, answer nothing without a
	// call.
	emptyAt, emptyNext, emptyEpoch int64
	// rangeEpoch is the epoch at which the last range refresh that
	// succeeded started; rangeFl is the one in flight.
	rangeEpoch int64
	rangeFl    *rangeFlight
}

// segment is a run of buffered records: every record DIS has in [start :
// end) is in recs, in order (end is one past the last).
type segment struct {
	start, end int64
	recs       []fetched
	bytes      int64
	used       int64 // LRU stamp
}

// flight is a shared GetRecords; recs and err are set before done closes
// and never changed after.
type flight struct {
	done  chan struct{}
	epoch int64
	next  int64 // the range's next when it started
	recs  []fetched
	err   error
}

// rangeFlight is a shared range refresh (DescribeStream).
type rangeFlight struct {
	done  chan struct{}
	epoch int64
	err   error
}

// part returns k's state, made empty when the buffer was filled for
// another stream id or timestamp type.
func (c *readCache) part(k partKey, id string, logAppend bool) *partReads {
	c.mu.Lock()
	p := c.m[k]
	if p == nil {
		if len(c.m) >= maxPartStates {
			c.sweepLocked()
		}
		p = &partReads{flights: map[int64]*flight{}, emptyAt: -1, rangeEpoch: -1}
		p.id, p.logAppend = id, logAppend
		c.m[k] = p
	}
	c.mu.Unlock()
	p.mu.Lock()
	if p.id != id || p.logAppend != logAppend {
		p.dropSegs(c)
		p.gen++
		p.flights = map[int64]*flight{} // those in flight answer their readers only
		p.id, p.logAppend = id, logAppend
		p.emptyAt, p.rangeEpoch = -1, -1
	}
	p.mu.Unlock()
	return p
}

// sweepLocked forgets the partitions with nothing buffered or in flight.
func (c *readCache) sweepLocked() {
	for k, p := range c.m {
		p.mu.Lock()
		idle := len(p.segs) == 0 && len(p.flights) == 0 && p.rangeFl == nil
		p.mu.Unlock()
		if idle {
			delete(c.m, k)
		}
	}
}

// shrink empties the least recently used partitions' buffers until the
// Store's total is within totalCap.
func (c *readCache) shrink() {
	if c.used.Load() <= c.totalCap {
		return
	}
	c.mu.Lock()
	ps := make([]*partReads, 0, len(c.m))
	for _, p := range c.m {
		ps = append(ps, p)
	}
	c.mu.Unlock()
	sort.Slice(ps, func(i, j int) bool { return ps[i].used.Load() < ps[j].used.Load() })
	for _, p := range ps {
		if c.used.Load() <= c.totalCap {
			return
		}
		p.mu.Lock()
		p.dropSegs(c)
		p.mu.Unlock()
	}
}

// buffered returns the partition's buffered bytes (tests).
func (p *partReads) buffered() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bytes
}

func (f *fetched) mem() int64 {
	n := int64(f.n + len(f.rec.Key) + recordOverhead)
	for _, h := range f.rec.Headers {
		n += int64(len(h.Key) + len(h.Value) + headerOverhead)
	}
	return n
}

func (p *partReads) add(c *readCache, n int64) {
	p.bytes += n
	c.used.Add(n)
}

func (p *partReads) dropSegs(c *readCache) {
	for _, sg := range p.segs {
		clear(sg.recs)
	}
	p.segs = nil
	p.add(c, -p.bytes)
}

// lookup returns a copy of the buffered records from offset on that fit
// maxBytes as one Kafka batch (at least one), nil when offset is not
// buffered.
func (p *partReads) lookup(c *readCache, offset int64, maxBytes int) []fetched {
	for _, sg := range p.segs {
		if sg.start <= offset && offset < sg.end {
			i := sort.Search(len(sg.recs), func(i int) bool { return sg.recs[i].sn >= offset })
			if i == len(sg.recs) {
				return nil // cannot be: end is one past the last record
			}
			stamp := c.clock.Add(1)
			sg.used = stamp
			p.used.Store(stamp)
			recs := sg.recs[i:]
			return slices.Clone(recs[:fitting(recs, maxBytes)])
		}
	}
	return nil
}

// insert buffers what a GetRecords at start returned (recs, not empty,
// sequence numbers from start on), then keeps within the bounds.
func (p *partReads) insert(c *readCache, start int64, recs []fetched) {
	var sg *segment
	for _, x := range p.segs {
		if x.start <= start && start <= x.end {
			sg = x
			break
		}
	}
	if sg == nil {
		sg = &segment{start: start, end: start}
		p.segs = append(p.segs, sg)
	}
	p.extend(c, sg, recs)
	// Runs that now touch sg join it.
	for merged := true; merged; {
		merged = false
		for j, x := range p.segs {
			if x != sg && sg.start <= x.start && x.start <= sg.end {
				p.extend(c, sg, x.recs)
				p.add(c, -x.bytes)
				clear(x.recs)
				p.segs = slices.Delete(p.segs, j, j+1)
				merged = true
				break
			}
		}
	}
	stamp := c.clock.Add(1)
	sg.used = stamp
	p.used.Store(stamp)
	for len(p.segs) > maxSegments {
		j := p.lru()
		p.add(c, -p.segs[j].bytes)
		clear(p.segs[j].recs)
		p.segs = slices.Delete(p.segs, j, j+1)
	}
	for p.bytes > c.partCap && len(p.segs) > 0 {
		p.trimFront(c, p.lru(), p.bytes-c.partCap)
	}
}

// extend appends to sg the records of recs from sg.end on.
func (p *partReads) extend(c *readCache, sg *segment, recs []fetched) {
	if len(recs) == 0 {
		return
	}
	i := sort.Search(len(recs), func(i int) bool { return recs[i].sn >= sg.end })
	var n int64
	for _, f := range recs[i:] {
		sg.recs = append(sg.recs, f)
		n += f.mem()
	}
	sg.bytes += n
	p.add(c, n)
	sg.end = max(sg.end, recs[len(recs)-1].sn+1)
}

// lru is the index of the least recently used segment.
func (p *partReads) lru() int {
	j := 0
	for i, sg := range p.segs {
		if sg.used < p.segs[j].used {
			j = i
		}
	}
	return j
}

// trimFront drops at least need bytes of segment j's oldest records (the
// whole segment when that is all it has).
func (p *partReads) trimFront(c *readCache, j int, need int64) {
	sg := p.segs[j]
	var n int64
	i := 0
	for i < len(sg.recs) && n < need {
		n += sg.recs[i].mem()
		i++
	}
	if i == len(sg.recs) {
		p.add(c, -sg.bytes)
		clear(sg.recs)
		p.segs = slices.Delete(p.segs, j, j+1)
		return
	}
	clear(sg.recs[:i]) // the backing array must not keep the dropped data
	sg.recs = sg.recs[i:]
	sg.start = sg.recs[0].sn
	sg.bytes -= n
	p.add(c, -n)
}

// readStart is the epoch of a Read that starts now: the poll tick when
// PollInterval > 0 (what was read from DIS since the last tick is fresh),
// else a new number per Read (only what is read after it began is fresh).
func (s *Store) readStart() int64 {
	if s.opts.PollInterval > 0 {
		return s.ticks.Load()
	}
	return s.readEpoch.Add(1)
}

// epoch is the current epoch, stamped on calls to DIS as they start.
func (s *Store) epoch() int64 {
	if s.opts.PollInterval > 0 {
		return s.ticks.Load()
	}
	return s.readEpoch.Load()
}

// flightContext is the context of a shared call: not the reader's (it
// may give up while others wait), ended by Close, bounded by twice the
// request timeout (retries included).
func (s *Store) flightContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.bg, 2*s.opts.RequestTimeout)
}

// readRange returns k's range for a Read at offset that began at epoch t0.
// The cached range is used when a refresh started at or after t0 succeeded
// (with polling: in this tick), or it is younger than RangeTTL. Otherwise
// one shared refresh reads it from DIS; the Read waits for it unless
// offset is inside the cached range (with polling on, records are known to
// be there, and the refresh only brings the high watermark up to date).
// An offset beyond the cached next always waits for a refresh.
func (s *Store) readRange(ctx context.Context, p *partReads, k partKey, offset, t0 int64) (disbackend.PartitionRange, error) {
	r, known := s.ranges.get(k, time.Duration(1<<63-1))
	_, young := s.ranges.get(k, s.opts.RangeTTL)
	p.mu.Lock()
	if known && offset <= r.Next && (p.rangeEpoch >= t0 || young) {
		p.mu.Unlock()
		return r, nil
	}
	rf := p.rangeFl
	if rf == nil || rf.epoch < t0 {
		rf = &rangeFlight{done: make(chan struct{}), epoch: s.epoch()}
		p.rangeFl = rf
		go s.refreshRange(p, k, rf)
	}
	p.mu.Unlock()
	if known && s.opts.PollInterval > 0 && r.First <= offset && offset < r.Next {
		return r, nil
	}
	select {
	case <-rf.done:
	case <-ctx.Done():
		return disbackend.PartitionRange{}, ctx.Err()
	}
	if rf.err != nil {
		return disbackend.PartitionRange{}, rf.err
	}
	r, _ = s.ranges.get(k, time.Duration(1<<63-1))
	return r, nil
}

func (s *Store) refreshRange(p *partReads, k partKey, rf *rangeFlight) {
	ctx, cancel := s.flightContext()
	defer cancel()
	_, err := s.rangeOf(ctx, k.stream, k.part)
	p.mu.Lock()
	if p.rangeFl == rf {
		p.rangeFl = nil
	}
	if err == nil {
		p.rangeEpoch = max(p.rangeEpoch, rf.epoch)
	}
	p.mu.Unlock()
	rf.err = err
	close(rf.done)
}

// records returns the records from offset on that fit maxBytes as one
// Kafka batch (at least one when there are any): from the buffer, else
// from the GetRecords in flight at offset, else from a new one. r is the
// partition's range and t0 the epoch the Read began at.
func (s *Store) records(ctx context.Context, p *partReads, k partKey, offset int64, maxBytes int, r disbackend.PartitionRange, t0 int64) ([]fetched, error) {
	c := &s.reads
	p.mu.Lock()
	if recs := p.lookup(c, offset, maxBytes); recs != nil {
		p.mu.Unlock()
		return recs, nil
	}
	if p.emptyAt == offset && p.emptyNext >= r.Next && p.emptyEpoch >= t0 {
		p.mu.Unlock()
		return nil, nil
	}
	fl := p.flights[offset]
	if fl == nil {
		fl = &flight{done: make(chan struct{}), epoch: s.epoch(), next: r.Next}
		p.flights[offset] = fl
		go s.fly(p, p.gen, p.logAppend, k, offset, max(maxBytes, c.ahead), fl)
	}
	p.mu.Unlock()
	select {
	case <-fl.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if fl.err != nil {
		return nil, fl.err
	}
	return fl.recs[:fitting(fl.recs, maxBytes)], nil
}

// fly runs the GetRecords of fl and buffers what it returns.
func (s *Store) fly(p *partReads, gen int64, logAppend bool, k partKey, sn int64, ask int, fl *flight) {
	ctx, cancel := s.flightContext()
	defer cancel()
	recs, err := s.fetchAt(ctx, k, sn, ask, logAppend)
	fl.recs, fl.err = recs, err
	c := &s.reads
	p.mu.Lock()
	if p.flights[sn] == fl {
		delete(p.flights, sn)
	}
	if err == nil && p.gen == gen {
		if len(recs) == 0 {
			p.emptyAt, p.emptyNext, p.emptyEpoch = sn, fl.next, fl.epoch
		} else {
			p.insert(c, sn, recs)
		}
	}
	p.mu.Unlock()
	c.shrink() // before the readers go on: within bounds when a Read returns
	close(fl.done)
}
