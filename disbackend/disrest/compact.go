package disrest

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/disgw/disgw/disbackend"
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
//
// This file keeps the set of compacted partitions; compactindex.go is the
// key index, which the partition's writer keeps up to date through its
// keyHook (produce.go), compactsweep.go the sweeps and their copies,
// compactsnap.go the snapshots.

// DefaultCompactionMaxKeys is Options.CompactionMaxKeys' default: the
// keys of compacted partitions one Store indexes, about 100 bytes of memory
// each.
const DefaultCompactionMaxKeys = 1_000_000

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

// forgetPart drops partition k's key index (the partition moved to
// another node: viewChanged); listing the streams watches it again, with
// an index read afresh should it come back.
func (c *compactor) forgetPart(k partKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cp := c.parts[k]; cp != nil {
		cp.mu.Lock()
		c.keys.Add(-int64(len(cp.keys)))
		cp.mu.Unlock()
		delete(c.parts, k)
		if st, ok := c.streams[k.stream]; ok {
			c.parts[k] = newCpart(k, st)
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

// CompactionLost is how many live keys of compacted partitions this Store
// found expired in DIS before it copied them (no gateway ran long enough
// for DIS to expire them, or DIS expired sooner than it said).
func (s *Store) CompactionLost() int64 { return s.compact.lost.Load() }
