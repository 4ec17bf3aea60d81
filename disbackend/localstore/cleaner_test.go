package localstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
	"github.com/disgw/disgw/kafkawire/batch"
)

// kv is a record of a test batch; a nil value is a tombstone.
type kv struct {
	key   string
	value []byte
}

// keyedBatch is a batch of records with keys, as the gateway hands it.
func keyedBatch(ts int64, recs []kv) disbackend.Batch {
	rs := make([]disbackend.Record, len(recs))
	for i, r := range recs {
		rs[i] = disbackend.Record{OffsetDelta: int32(i), Timestamp: ts, Key: []byte(r.key), Value: r.value}
	}
	return backendtest.FromRaw(batch.Encode(batch.NewHeader(0), rs))
}

// stored is one record read back, with its offset.
type storedRec struct {
	off   int64
	key   string
	value []byte
}

// readPartition reads a partition from its first offset to its next.
func readPartition(t *testing.T, s *Store, stream string, part int32) []storedRec {
	t.Helper()
	ctx := context.Background()
	r, err := s.Range(stream, part)
	if err != nil {
		t.Fatal(err)
	}
	var out []storedRec
	for off := r.First; off < r.Next; {
		res, err := s.Read(ctx, stream, part, off, 1<<20)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(res.Batches) == 0 {
			t.Fatalf("Read(%d) below next %d returned nothing", off, r.Next)
		}
		for _, raw := range res.Batches {
			if !batch.CheckCRC(raw) {
				t.Fatalf("batch at %d: CRC", batch.BaseOffset(raw))
			}
			recs, err := batch.DecodeRecords(raw)
			if err != nil {
				t.Fatalf("batch at %d: %v", batch.BaseOffset(raw), err)
			}
			for _, rec := range recs {
				if o := rec.Offset(batch.BaseOffset(raw)); o >= off {
					out = append(out, storedRec{off: o, key: string(rec.Key), value: rec.Value})
				}
			}
			off = batch.LastOffset(raw) + 1
		}
	}
	return out
}

// compactionCase writes keys × versions records to a compacted stream,
// tombstones some keys, and knows the latest record of every key.
type compactionCase struct {
	stream     string
	parts      int32
	keys       int
	versions   int
	tombstones int // the first this many keys end with a tombstone
	perBatch   int
	latest     []map[string]storedRec // by partition
	all        []map[int64]storedRec  // by partition: every acknowledged record
}

func (c *compactionCase) config() disbackend.StreamConfig {
	return disbackend.StreamConfig{Retention: disbackend.UnlimitedRetention, MaxMessageBytes: 1 << 20,
		CleanupPolicy: disbackend.CleanupCompact, DeleteRetention: time.Hour, MinCleanableDirtyRatio: 0.01,
		SegmentBytes: 16 << 10, SegmentTime: time.Minute}
}

func (c *compactionCase) create(t *testing.T, s *Store) {
	t.Helper()
	if _, err := s.CreateStream(context.Background(), disbackend.StreamSpec{Name: c.stream, TopicName: c.stream,
		PartitionCount: c.parts, Config: c.config()}); err != nil {
		t.Fatal(err)
	}
}

// write appends every version of every key, then the tombstones, and
// waits for each append.
func (c *compactionCase) write(t *testing.T, s *Store, clock *backendtest.FakeClock) {
	t.Helper()
	ctx := context.Background()
	c.latest = make([]map[string]storedRec, c.parts)
	c.all = make([]map[int64]storedRec, c.parts)
	for p := range c.parts {
		c.latest[p], c.all[p] = map[string]storedRec{}, map[int64]storedRec{}
	}
	pending := make([][]kv, c.parts)
	flush := func(p int32) {
		if len(pending[p]) == 0 {
			return
		}
		res, err := s.Append(c.stream, p, keyedBatch(clock.Now().UnixMilli(), pending[p])).Wait(ctx)
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		for i, r := range pending[p] {
			sr := storedRec{off: res.BaseOffset + int64(i), key: r.key, value: r.value}
			c.latest[p][r.key] = sr
			c.all[p][sr.off] = sr
		}
		pending[p] = pending[p][:0]
	}
	add := func(k int, value []byte) {
		p := int32(k % int(c.parts))
		pending[p] = append(pending[p], kv{fmt.Sprintf("key-%05d", k), value})
		if len(pending[p]) == c.perBatch {
			flush(p)
		}
	}
	for v := range c.versions {
		for k := range c.keys {
			add(k, fmt.Appendf(nil, "key-%05d version %d", k, v))
		}
	}
	for k := range c.tombstones {
		add(k, nil)
	}
	for p := range c.parts {
		flush(p)
	}
}

// check compares what the store holds with the case: with exact, each
// key once with its latest record (tombstones gone unless keepTombstones);
// without, what a crash may leave: every stored record acknowledged at its
// offset, and each key's last stored record its latest.
func (c *compactionCase) check(t *testing.T, s *Store, exact, keepTombstones bool) error {
	t.Helper()
	for p := range c.parts {
		got := readPartition(t, s, c.stream, p)
		last := map[string]storedRec{}
		prev := int64(-1)
		for _, r := range got {
			want, ok := c.all[p][r.off]
			if !ok || want.key != r.key || !slices.Equal(want.value, r.value) || (want.value == nil) != (r.value == nil) {
				return fmt.Errorf("partition %d offset %d: %q=%q is not what was written there", p, r.off, r.key, r.value)
			}
			if r.off <= prev {
				return fmt.Errorf("partition %d: offset %d after %d", p, r.off, prev)
			}
			prev = r.off
			if exact {
				if _, dup := last[r.key]; dup {
					return fmt.Errorf("partition %d: key %q more than once (offset %d)", p, r.key, r.off)
				}
			}
			last[r.key] = r
		}
		for key, want := range c.latest[p] {
			have, ok := last[key]
			switch {
			case want.value == nil && exact && !keepTombstones:
				if ok {
					return fmt.Errorf("partition %d: tombstoned key %q still there at %d", p, key, have.off)
				}
			case want.value == nil && !exact && !ok:
				// a tombstone may be gone already
			case !ok || have.off != want.off:
				return fmt.Errorf("partition %d: key %q: latest at %d, want %d", p, key, have.off, want.off)
			}
		}
	}
	return nil
}

// waitFor polls cond until it returns nil, failing with its last error
// after a generous limit (a wait for the background cleaner, not a timing
// assertion).
func waitFor(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func cleanerOpts(fs vfs.FS, clock *backendtest.FakeClock) Options {
	return Options{FS: fs, Now: clock.Now, CleanerInterval: 2 * time.Millisecond, CacheBytesPerPartition: 64 << 10}
}

// TestCleanerCompacts: 1,000 keys × 10 versions and 100 tombstones over two
// partitions; the cleaner leaves each key's latest record at the offset it
// was written at, then, past delete.retention.ms, no tombstoned key; a
// restart reads the same.
func TestCleanerCompacts(t *testing.T) {
	t.Parallel()
	clock := backendtest.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	fs := vfs.NewCrashableMem()
	s := openT(t, "db", cleanerOpts(fs, clock))
	c := &compactionCase{stream: "compacted", parts: 2, keys: 1000, versions: 10, tombstones: 100, perBatch: 50}
	c.create(t, s)
	c.write(t, s, clock)
	if err := c.check(t, s, false, true); err != nil {
		t.Fatalf("before cleaning: %v", err)
	}
	clock.Advance(2 * time.Minute) // the active segment is older than segment.ms: rolled, then cleaned
	waitFor(t, "compaction", func() error { return c.check(t, s, true, true) })
	clock.Advance(2 * time.Hour) // past delete.retention.ms
	waitFor(t, "tombstones removed", func() error { return c.check(t, s, true, false) })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, "db", cleanerOpts(fs, clock))
	defer s.Close()
	if err := c.check(t, s, true, false); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	// Appends go on at the partitions' next.
	for p := range c.parts {
		r, _ := s.Range(c.stream, p)
		res, err := s.Append(c.stream, p, keyedBatch(clock.Now().UnixMilli(), []kv{{"after", []byte("x")}})).Wait(context.Background())
		if err != nil || res.BaseOffset != r.Next {
			t.Fatalf("append after cleaning: %+v, %v; want offset %d", res, err, r.Next)
		}
	}
}

// TestCleanerPasses: a key map that holds 57 keys cleans 600 keys × 3
// versions in several passes, to the same result.
func TestCleanerPasses(t *testing.T) {
	t.Parallel()
	clock := backendtest.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := cleanerOpts(vfs.NewMem(), clock)
	opts.CleanerBufferBytes = 64 * 24 // 64 slots at most
	var mu sync.Mutex
	passes := 0
	opts.cleanerHook = func(step string) {
		if step == "state saved" {
			mu.Lock()
			passes++
			mu.Unlock()
		}
	}
	s := openT(t, "db", opts)
	defer s.Close()
	c := &compactionCase{stream: "small_map", parts: 1, keys: 600, versions: 3, tombstones: 0, perBatch: 20}
	c.create(t, s)
	c.write(t, s, clock)
	clock.Advance(2 * time.Minute)
	waitFor(t, "compaction in passes", func() error { return c.check(t, s, true, true) })
	mu.Lock()
	defer mu.Unlock()
	if passes < 10 {
		t.Fatalf("%d passes; 600 keys in a map of 57 need more", passes)
	}
}

// TestCleanerKeepsProducerState: the cleaner keeps an idempotent producer's
// last batch, emptied, so that its retry is still a duplicate, before and
// after a restart, and its next sequence goes on.
func TestCleanerKeepsProducerState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := backendtest.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	fs := vfs.NewMem()
	s := openT(t, "db", cleanerOpts(fs, clock))
	c := &compactionCase{stream: "idem", parts: 1}
	c.create(t, s)
	pid, _, err := s.InitProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	idem := func(seq int32, recs []kv) disbackend.Batch {
		rs := make([]disbackend.Record, len(recs))
		for i, r := range recs {
			rs[i] = disbackend.Record{OffsetDelta: int32(i), Timestamp: clock.Now().UnixMilli(), Key: []byte(r.key), Value: r.value}
		}
		h := batch.NewHeader(0)
		h.ProducerID, h.ProducerEpoch, h.BaseSequence = pid, 0, seq
		return backendtest.FromRaw(batch.Encode(h, rs))
	}
	var lastBase int64
	for i := range 3 {
		res, err := s.Append("idem", 0, idem(int32(2*i), []kv{{"a", []byte{byte(i)}}, {"b", []byte{byte(i)}}})).Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lastBase = res.BaseOffset
	}
	// Another writer supersedes every record of the producer.
	for range 50 {
		if _, err := s.Append("idem", 0, keyedBatch(clock.Now().UnixMilli(), []kv{{"a", []byte("new")}, {"b", []byte("new")}})).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(2 * time.Minute)
	waitFor(t, "compaction", func() error {
		recs := readPartition(t, s, "idem", 0)
		if len(recs) != 2 {
			return fmt.Errorf("%d records, want 2", len(recs))
		}
		return nil
	})
	for round := range 2 {
		res, err := s.Append("idem", 0, idem(4, []kv{{"a", []byte{2}}, {"b", []byte{2}}})).Wait(ctx)
		if err != nil || !res.Duplicate || res.BaseOffset != lastBase {
			t.Fatalf("round %d: retry of the producer's last batch = %+v, %v; want the duplicate at %d", round, res, err, lastBase)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openT(t, "db", cleanerOpts(fs, clock))
	}
	defer s.Close()
	if _, err := s.Append("idem", 0, idem(6, []kv{{"c", []byte("next")}})).Wait(ctx); err != nil {
		t.Fatalf("the producer's next batch: %v", err)
	}
}

// TestCleanerCrash crashes the machine (Pebble's crashable filesystem, the
// unsynced writes lost) at every step of a cleaning pass's swap: reopened,
// the store holds every acknowledged record that compaction keeps, at its
// offset, each key's latest among them, and the cleaner then finishes.
func TestCleanerCrash(t *testing.T) {
	t.Parallel()
	steps := []string{"cleaned written", "swap committed", "replaced removed", "swap renamed", "index written", "state saved"}
	for _, step := range steps {
		for _, keep := range []int{0, 50} {
			t.Run(fmt.Sprintf("%s/keep%d", step, keep), func(t *testing.T) {
				t.Parallel()
				clock := backendtest.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
				fs := vfs.NewCrashableMem()
				opts := cleanerOpts(fs, clock)
				var once sync.Once
				var armed atomic.Bool // once every record is acknowledged
				crashed := make(chan *vfs.MemFS, 1)
				opts.cleanerHook = func(at string) {
					if at == step && armed.Load() {
						once.Do(func() {
							crashed <- fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: keep, RNG: rand.New(rand.NewPCG(7, uint64(keep)))})
						})
					}
				}
				s := openT(t, "db", opts)
				c := &compactionCase{stream: "crash", parts: 2, keys: 200, versions: 4, tombstones: 20, perBatch: 25}
				c.create(t, s)
				c.write(t, s, clock)
				armed.Store(true)
				clock.Advance(2 * time.Minute)
				var clone *vfs.MemFS
				select {
				case clone = <-crashed:
				case <-time.After(30 * time.Second):
					t.Fatalf("the cleaner never reached %q", step)
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s = openT(t, "db", cleanerOpts(clone, clock))
				defer s.Close()
				if err := c.check(t, s, false, true); err != nil {
					t.Fatalf("after a crash at %q: %v", step, err)
				}
				waitFor(t, "compaction after the crash", func() error { return c.check(t, s, true, true) })
			})
		}
	}
}

// TestCleanerReadsGaps: a read at an offset the cleaner removed returns the
// next batch kept, and a header left without records is skipped when
// looking for a timestamp.
func TestCleanerReadsGaps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := backendtest.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := openT(t, "db", cleanerOpts(vfs.NewMem(), clock))
	defer s.Close()
	c := &compactionCase{stream: "gaps", parts: 1}
	c.create(t, s)
	ts := clock.Now().UnixMilli()
	for i := range 20 { // offsets 0-39: key "k" twice a batch
		if _, err := s.Append("gaps", 0, keyedBatch(ts+int64(i), []kv{{"k", []byte{byte(i)}}, {fmt.Sprint("u", i), []byte{1}}})).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(2 * time.Minute)
	waitFor(t, "compaction", func() error {
		if recs := readPartition(t, s, "gaps", 0); len(recs) != 21 {
			return fmt.Errorf("%d records, want 21", len(recs))
		}
		return nil
	})
	// Offset 0 (key "k", superseded) is gone: a read there starts at offset 1.
	res, err := s.Read(ctx, "gaps", 0, 0, 1)
	if err != nil || len(res.Batches) != 1 {
		t.Fatalf("Read(0) = %d batches, %v", len(res.Batches), err)
	}
	recs, _ := batch.DecodeRecords(res.Batches[0])
	if len(recs) == 0 || recs[0].Offset(batch.BaseOffset(res.Batches[0])) != 1 {
		t.Fatalf("Read(0) starts at %+v, want offset 1", recs)
	}
	if r, _ := s.Range("gaps", 0); r.First != 0 || r.Next != 40 {
		t.Fatalf("range %+v: compaction moves neither the log start offset nor the end", r)
	}
	raw, err := s.BatchAtTimestamp(ctx, "gaps", 0, ts+19)
	if err != nil || raw == nil {
		t.Fatalf("BatchAtTimestamp: %v", err)
	}
	if h, _ := batch.ParseHeader(raw); h.NumRecords == 0 {
		t.Fatal("BatchAtTimestamp returned a header without records")
	}
}

// TestClusterIDKept: a data directory keeps its cluster id across
// restarts; another directory has another.
func TestClusterIDKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := vfs.NewMem()
	s := openT(t, "db", Options{FS: fs})
	a, err := s.ClusterID(ctx)
	if err != nil || len(a) != 22 {
		t.Fatalf("ClusterID = %q, %v", a, err)
	}
	_ = s.Close()
	s = openT(t, "db", Options{FS: fs})
	defer s.Close()
	if b, _ := s.ClusterID(ctx); b != a {
		t.Fatalf("after a restart: %q, want %q", b, a)
	}
	o := openT(t, "other", Options{FS: fs})
	defer o.Close()
	if c, _ := o.ClusterID(ctx); c == a {
		t.Fatalf("another directory has the same cluster id %q", c)
	}
}

// TestCleanerReadRacesSwap: a read that missed the tail cache while a
// cleaning pass replaced the index, removing every batch from its offset
// up to the cache start it had seen, still returns the next kept batch
// (it once answered offset out of range inside [first, next)).
func TestCleanerReadRacesSwap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := backendtest.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := cleanerOpts(vfs.NewMem(), clock)
	opts.CacheBytesPerPartition = 4 << 10
	var armed atomic.Bool
	readerIn, swapped := make(chan struct{}), make(chan struct{})
	opts.cleanerHook = func(step string) {
		switch {
		case step == "read: cache start taken" && armed.CompareAndSwap(true, false):
			close(readerIn)
			<-swapped
		case step == "swap committed":
			<-readerIn
		case step == "index written":
			select {
			case <-swapped:
			default:
				close(swapped)
			}
		}
	}
	s := openT(t, "db", opts)
	defer s.Close()
	c := &compactionCase{stream: "race", parts: 1}
	cfg := c.config()
	cfg.SegmentBytes = 1 << 20 // no roll before the clock moves, so no pass while appending
	if _, err := s.CreateStream(ctx, disbackend.StreamSpec{Name: c.stream, TopicName: c.stream, PartitionCount: 1, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	ts := clock.Now().UnixMilli()
	value := make([]byte, 500)
	for i := range 40 { // one key: only the last batch keeps a record
		if _, err := s.Append("race", 0, keyedBatch(ts+int64(i), []kv{{"k", value}})).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	armed.Store(true)
	clock.Advance(2 * time.Minute) // rolled, then cleaned once the read is in
	res, err := s.Read(ctx, "race", 0, 0, 1<<20)
	if err != nil || len(res.Batches) == 0 {
		t.Fatalf("Read(0) racing a cleaning pass = %d batches, %v", len(res.Batches), err)
	}
	if last := batch.LastOffset(res.Batches[len(res.Batches)-1]); last != 39 {
		t.Fatalf("Read(0) ends at offset %d, want 39", last)
	}
}
