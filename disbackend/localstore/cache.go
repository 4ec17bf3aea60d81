package localstore

import (
	"sort"
	"sync"
	"sync/atomic"

	"github.com/disgw/disgw/disbackend"
)

// partition is one partition of a stream in memory.
type partition struct {
	sid uint64
	id  int32
	st  *stream // its stream

	// assigned is the offset the next accepted batch gets; it runs ahead of
	// next by the batches applied but not yet synced. Guarded by Store.wmu.
	assigned int64

	// mu guards the fields below. The syncer advances next and appends to
	// cache; retention moves first; readers take a read lock.
	mu sync.RWMutex
	// first and next are the synced range [first : next] (DIS
	// sequence_number_range; Kafka log start offset and high watermark).
	first, next int64
	// segs are the segments holding the partition's synced batches, in
	// offset order (index.go): the writer adds one when the partition first
	// writes to a segment (the syncer then fills it as its frames are
	// published), retention and the cleaner take them off. segsGen counts
	// the removals, so that a read that found a segment gone reads again.
	// The slice is never changed in place below its length: a reader may
	// keep it after unlocking.
	segs    []*segPart
	segsGen uint64
	// belowFirst is the batch bytes of the batches wholly below first in
	// segs' segParts that hold first or later (PartitionBytes); set where
	// first moves.
	belowFirst int64
	// cache holds the most recently synced batches, contiguous and ending at
	// next, oldest first. Raw slices are never modified after they enter.
	// cacheBytes is their length (the per-partition bound), not what they
	// keep in memory (tailCache.bytes).
	cache      []cachedBatch
	cacheBytes int64
	// deleted is set when the stream is deleted; the cache no longer fills.
	deleted bool
}

// dropSegs takes the segParts of the segments in gone off the partition.
// Requires p.mu.
func (p *partition) dropSegs(gone map[*segment]bool) {
	kept := make([]*segPart, 0, len(p.segs))
	for _, sp := range p.segs {
		if !gone[sp.seg] {
			kept = append(kept, sp)
		}
	}
	if len(kept) != len(p.segs) {
		p.segs = kept
		p.segsGen++
	}
}

// cachedBatch is one synced batch held in memory.
type cachedBatch struct {
	base, last int64
	raw        []byte
	frame      *disbackend.Frame // the request frame raw aliases, or nil (raw is its own)
}

// held is what keeping a batch costs the bound of all caches, in bytes:
// its length, or, for a batch that aliases its request's frame, the
// frame's size for the first of its batches kept (0 for the others).
func held(raw []byte, f *disbackend.Frame) int64 {
	if f == nil {
		return int64(len(raw))
	}
	if f.Hold() {
		return int64(f.Size)
	}
	return 0
}

// freed is what dropping b gives back to the bound of all caches (held's
// counterpart).
func (b *cachedBatch) freed() int64 {
	if b.frame == nil {
		return int64(len(b.raw))
	}
	if b.frame.Release() {
		return int64(b.frame.Size)
	}
	return 0
}

// span returns the synced range.
func (p *partition) span() (first, next int64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.first, p.next
}

// readCache returns whole cached batches starting with the one holding
// offset, up to maxBytes but at least one. ok is false when offset is not
// cached. Requires p.mu held (read).
func (p *partition) readCache(offset int64, maxBytes int, out [][]byte, n int) ([][]byte, int, bool) {
	c := p.cache
	if len(c) == 0 || offset < c[0].base || offset >= p.next {
		return out, n, false
	}
	i := sort.Search(len(c), func(i int) bool { return c[i].last >= offset })
	if out == nil {
		out = make([][]byte, 0, min(len(c)-i, 64))
	}
	for ; i < len(c); i++ {
		if n > 0 && n+len(c[i].raw) > maxBytes {
			break
		}
		out = append(out, c[i].raw)
		n += len(c[i].raw)
	}
	return out, n, true
}

// cacheStart returns the first cached offset (next when the cache is
// empty). Requires p.mu held.
func (p *partition) cacheStart() int64 {
	if len(p.cache) == 0 {
		return p.next
	}
	return p.cache[0].base
}

// dropCacheBelow removes cached batches that end before off and returns the
// bytes (as tailCache counts them) and batches freed. Requires p.mu held.
func (p *partition) dropCacheBelow(off int64) (int64, int64) {
	var freed, n int64
	for len(p.cache) > 0 && p.cache[0].last < off {
		freed += p.dropOldest()
		n++
	}
	return freed, n
}

// dropOldest removes the oldest cached batch and returns the bytes freed
// (as tailCache counts them). Requires p.mu held and a batch cached.
func (p *partition) dropOldest() int64 {
	freed := p.cache[0].freed()
	p.cacheBytes -= int64(len(p.cache[0].raw))
	p.cache[0] = cachedBatch{}
	p.cache = p.cache[1:]
	return freed
}

// dropCache empties the cache and returns the bytes freed (as tailCache
// counts them). Requires p.mu.
func (p *partition) dropCache() int64 {
	var freed int64
	for i := range p.cache {
		freed += p.cache[i].freed()
	}
	p.cache, p.cacheBytes = nil, 0
	return freed
}

// tailCache bounds the partitions' tail caches: each partition keeps at most
// perPart bytes of batches, and all together at most total bytes of
// memory, evicting the batches synced longest ago first. A batch that
// aliases its request's frame (Batch.Frame) keeps the whole frame: the
// frame counts once, while any of its batches is kept.
type tailCache struct {
	perPart, total int64
	bytes          atomic.Int64 // kept by all partitions' caches (held)
	live           atomic.Int64 // batches in all partitions' caches

	// fifo lists cached batches in sync order, for global eviction. Entries
	// whose batch was already dropped (per-partition cap, retention,
	// deletion) are stale and skipped. Owned by the syncer goroutine.
	fifo []cacheRef
}

type cacheRef struct {
	p    *partition
	base int64
}

func newTailCache(perPart, total int64) *tailCache {
	return &tailCache{perPart: perPart, total: total}
}

func (t *tailCache) enabled() bool { return t.perPart > 0 }

// add appends a just-synced batch to p's cache. Requires p.mu held; the
// caller then calls balance without holding it. Runs on the syncer.
func (t *tailCache) add(p *partition, base, last int64, raw []byte, frame *disbackend.Frame) {
	if p.deleted {
		return
	}
	p.cache = append(p.cache, cachedBatch{base: base, last: last, raw: raw, frame: frame})
	p.cacheBytes += int64(len(raw))
	added, dropped := held(raw, frame), int64(1)
	var freedN int64
	for p.cacheBytes > t.perPart && len(p.cache) > 1 {
		added -= p.dropOldest()
		freedN++
	}
	t.bytes.Add(added)
	t.live.Add(dropped - freedN)
	t.fifo = append(t.fifo, cacheRef{p: p, base: base})
}

// release accounts for batches dropped outside add (retention, deletion).
func (t *tailCache) release(bytes, batches int64) {
	t.bytes.Add(-bytes)
	t.live.Add(-batches)
}

// balance evicts globally oldest batches while over the total cap, and
// compacts the fifo when it is mostly stale. Runs on the syncer, holding no
// partition lock.
func (t *tailCache) balance() {
	for t.bytes.Load() > t.total && len(t.fifo) > 0 {
		ref := t.fifo[0]
		t.fifo[0] = cacheRef{}
		t.fifo = t.fifo[1:]
		ref.p.mu.Lock()
		if len(ref.p.cache) > 0 && ref.p.cache[0].base == ref.base {
			t.release(ref.p.dropOldest(), 1)
		}
		ref.p.mu.Unlock()
	}
	if int64(len(t.fifo)) > 2*t.live.Load()+1024 {
		kept := t.fifo[:0]
		for _, ref := range t.fifo {
			ref.p.mu.RLock()
			ok := len(ref.p.cache) > 0 && ref.base >= ref.p.cache[0].base
			ref.p.mu.RUnlock()
			if ok {
				kept = append(kept, ref)
			}
		}
		clear(t.fifo[len(kept):])
		t.fifo = kept
	}
}

// KeepsFrames reports that the store counts the request frames its tail
// cache keeps alive (disbackend.FrameKeeper): a batch that aliases its
// Produce request's frame (Batch.Frame) counts the frame's size once
// against CacheBytes while any batch of it is cached.
func (s *Store) KeepsFrames() bool { return true }
