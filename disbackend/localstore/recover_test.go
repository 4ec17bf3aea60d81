package localstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
	"github.com/disgw/disgw/kafkawire/batch"
)

// TestIndexCrash crashes (Pebble's crashable filesystem) at each step of
// writing a journal block, sealing a segment (its index: tmp written,
// renamed, directory synced; the journal removed) and writing a producer
// snapshot, with none, half or all of the unsynced writes kept, while
// plain and idempotent appends go on; every acknowledged batch is then
// readable at its offset, and the idempotent producer's last batch is a
// duplicate. The recovered store is crashed again at each step of Open's
// own index writing.
func TestIndexCrash(t *testing.T) {
	t.Parallel()
	steps := []string{"journal: written", "journal: synced", "index: tmp written", "index: renamed",
		"index: directory synced", "journal: removed", "snapshot: tmp written", "snapshot: renamed",
		"snapshot: written", "snapshot: older removed"}
	keeps := []int{0, 50, 100}
	if testing.Short() {
		keeps = []int{50}
	}
	for _, step := range steps {
		for _, keep := range keeps {
			t.Run(fmt.Sprintf("%s/keep%d", step, keep), func(t *testing.T) {
				t.Parallel()
				crashAt(t, step, keep)
			})
		}
	}
}

func crashOpts(fs vfs.FS) Options {
	return Options{FS: fs, SegmentBytes: 24 << 10, MaxUnindexedBytes: 4 << 10, CacheBytesPerPartition: 2 << 10, CleanerInterval: -1}
}

func crashAt(t *testing.T, step string, keep int) {
	fs := vfs.NewCrashableMem()
	opts := crashOpts(fs)
	log := &ackLog{}
	var armed atomic.Bool
	var seen atomic.Int32
	type image struct {
		fs   *vfs.MemFS
		acks map[int32][]acked
	}
	crashed := make(chan image, 1)
	opts.cleanerHook = func(at string) {
		if at != step || !armed.Load() || seen.Add(1) != 3 {
			return
		}
		log.mu.Lock()
		acks := byPart(log.acks)
		clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: keep, RNG: rand.New(rand.NewPCG(uint64(keep), 3))})
		log.mu.Unlock()
		crashed <- image{clone, acks}
	}
	s := openT(t, "db", opts)
	createStream(t, s, "c", 4)
	pid, _, err := s.InitProducerID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	wg := writeLoad(t, s, "c", pid, log, stop)
	waitFor(t, "some acknowledgements", func() error {
		if log.snapshot()[3] == nil {
			return fmt.Errorf("none yet")
		}
		return nil
	})
	armed.Store(true)
	var img image
	select {
	case img = <-crashed:
	case <-time.After(60 * time.Second):
		t.Fatalf("never reached %q", step)
	}
	close(stop)
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Open the image, crashing it again at each step of the index writing
	// of its recovery (when the recovery writes one).
	for _, again := range []string{"", "index: tmp written", "index: renamed", "index: directory synced"} {
		// Each time from a copy: Open changes what it opens.
		clone := img.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))})
		if again != "" {
			var second *vfs.MemFS
			o := crashOpts(clone)
			o.cleanerHook = func(at string) {
				if at == again && second == nil {
					second = clone.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: keep, RNG: rand.New(rand.NewPCG(9, uint64(keep)))})
				}
			}
			s := openT(t, "db", o)
			_ = s.Close()
			if second == nil {
				continue // the recovery wrote no index
			}
			clone = second
		}
		s := openT(t, "db", crashOpts(clone))
		n := 0
		for _, l := range img.acks {
			n += len(l)
		}
		t.Logf("crash at %q, then %q: %d batches acknowledged; recovery %+v", step, again, n, s.stats)
		checkAcked(t, s, "c", img.acks)
		// And once more, from what that Open left.
		s = reopen(t, s, crashOpts(clone))
		checkAcked(t, s, "c", img.acks)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCrashScanBounded: after a crash, Open reads the active segments'
// journals and scans only what no block covers: at most
// MaxUnindexedBytes, plus the appends in flight at the crash.
func TestCrashScanBounded(t *testing.T) {
	t.Parallel()
	fs := vfs.NewCrashableMem()
	const maxUnindexed = 64 << 10
	opts := Options{FS: fs, MaxUnindexedBytes: maxUnindexed, CacheBytesPerPartition: -1}
	s := openT(t, "db", opts)
	createStream(t, s, "a", 8)
	createStream(t, s, "b", 1)
	ctx := context.Background()
	var total int64
	for i := 0; i < 3000; i++ {
		b := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 1, RecordBytes: 200, Seed: uint64(i)})
		total += int64(len(b.Raw))
		st, part := "b", int32(0)
		if i%2 == 0 {
			st, part = "a", int32(i/2%8)
		}
		if _, err := s.Append(st, part, b).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))})
	_ = s.Close()
	s = openT(t, "db", Options{FS: clone, MaxUnindexedBytes: maxUnindexed})
	defer s.Close()
	if s.stats.journalBlocks == 0 || s.stats.scanned != 2 {
		t.Fatalf("recovery: %+v; want the journals of both active segments read", s.stats)
	}
	t.Logf("wrote %d bytes; recovery: %+v", total, s.stats)
	if s.stats.scannedBytes > maxUnindexed+8<<10 || s.stats.scannedBytes >= total/2 {
		t.Fatalf("scanned %d bytes of %d written; want at most MaxUnindexedBytes (%d)", s.stats.scannedBytes, total, maxUnindexed)
	}
	for p := int32(0); p < 8; p++ {
		if r, _ := s.Range("a", p); r.Next == 0 {
			t.Fatalf("partition %d empty after recovery", p)
		}
	}
	if r, _ := s.Range("b", 0); r.Next != 1500 {
		t.Fatalf("stream b: next %d after recovery, want 1500", r.Next)
	}
}

// TestRestartFromSnapshot: a clean restart loads the idempotent producers
// from the snapshot and replays no batch; with the snapshot torn or
// missing, and with the index of a segment torn or missing, Open rebuilds
// them from the data, and every duplicate is still found.
func TestRestartFromSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := vfs.NewMem()
	opts := Options{FS: fs, SegmentBytes: 8 << 10, CacheBytesPerPartition: -1}
	s := openT(t, "db", opts)
	createStream(t, s, "p", 3)
	var last [3][2]acked // by partition, producer: its last batch
	pids := [2]int64{}
	for i := range pids {
		pids[i], _, _ = s.InitProducerID(ctx)
	}
	seqs := map[[2]int64]int32{}
	for i := 0; i < 300; i++ {
		part, k := int32(i%3), (i/3)%2
		key := [2]int64{int64(part), pids[k]}
		b := idemBatch(pids[k], seqs[key], 2, 100, uint64(i))
		seqs[key] += 2
		raw := append([]byte(nil), b.Raw...)
		res, err := s.Append("p", part, b).Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		batch.SetBaseOffset(raw, res.BaseOffset)
		last[part][k] = acked{part: part, base: res.BaseOffset, raw: raw}
	}
	before := map[int32][]disbackend.ActiveProducer{}
	for p := int32(0); p < 3; p++ {
		before[p], _ = s.ActiveProducers(ctx, "p", p)
	}
	check := func(s *Store, what string) {
		t.Helper()
		for p := int32(0); p < 3; p++ {
			got, err := s.ActiveProducers(ctx, "p", p)
			if err != nil || fmt.Sprint(got) != fmt.Sprint(before[p]) {
				t.Fatalf("%s: partition %d producers %+v, %v; want %+v", what, p, got, err, before[p])
			}
			for k := range pids {
				a := last[p][k]
				res, err := s.Append("p", p, backendtest.FromRaw(append([]byte(nil), a.raw...))).Wait(ctx)
				if err != nil || !res.Duplicate || res.BaseOffset != a.base {
					t.Fatalf("%s: retry of partition %d's last batch of producer %d: %+v, %v", what, p, pids[k], res, err)
				}
			}
		}
	}
	s = reopen(t, s, opts)
	if s.stats.replayed != 0 || s.stats.scanned != 0 || s.stats.snapshots != 1 || s.stats.segments < 5 {
		t.Fatalf("clean restart: %+v; want the snapshot loaded, nothing replayed or scanned", s.stats)
	}
	check(s, "clean restart")

	snaps := func() []string {
		names, _ := fs.List("db/segments")
		var out []string
		for _, n := range names {
			if strings.HasSuffix(n, "."+extSnapshot) {
				out = append(out, fs.PathJoin("db/segments", n))
			}
		}
		return out
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, path := range snaps() { // torn
		truncate(t, fs, path, -1)
	}
	s = openT(t, "db", opts)
	if s.stats.brokenSnapshots != 1 || s.stats.replayed != s.stats.segments {
		t.Fatalf("torn snapshot: %+v; want every segment replayed", s.stats)
	}
	check(s, "torn snapshot")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, path := range snaps() { // missing
		_ = fs.Remove(path)
	}
	// and an index missing, another torn
	names, _ := fs.List("db/segments")
	var indexes []string
	for _, n := range names {
		if strings.HasSuffix(n, "."+extIndex) {
			indexes = append(indexes, fs.PathJoin("db/segments", n))
		}
	}
	slices.Sort(indexes)
	_ = fs.Remove(indexes[1])
	truncate(t, fs, indexes[2], 100)
	s = openT(t, "db", opts)
	if s.stats.snapshots != 0 || s.stats.replayed != s.stats.segments || s.stats.rebuiltIndexes != 2 {
		t.Fatalf("missing snapshot, two indexes broken: %+v", s.stats)
	}
	check(s, "missing snapshot and indexes")
	s = reopen(t, s, opts)
	if s.stats.replayed != 0 || s.stats.rebuiltIndexes != 0 {
		t.Fatalf("restart after the rebuild: %+v; want nothing rebuilt", s.stats)
	}
	check(s, "restart after the rebuild")
	_ = s.Close()
}

// truncate cuts the file at path to n bytes (-1: half its size).
func truncate(t *testing.T, fs vfs.FS, path string, n int) {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(f)
	_ = f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if n < 0 {
		n = len(data) / 2
	}
	w, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write(data[:n])
	_ = w.Close()
}

// oldIdxRecord is a record of the first format's dense .idx.
func oldIdxRecord(dst []byte, f *frameInfo) []byte {
	be := binary.BigEndian
	dst = be.AppendUint64(dst, uint64(f.pos))
	dst = be.AppendUint32(dst, uint32(f.size))
	dst = be.AppendUint32(dst, uint32(f.part))
	dst = be.AppendUint64(dst, uint64(f.base))
	dst = be.AppendUint64(dst, uint64(f.last))
	dst = be.AppendUint64(dst, uint64(f.appendMS))
	dst = be.AppendUint64(dst, uint64(f.maxTS))
	dst = be.AppendUint64(dst, uint64(f.pid))
	dst = be.AppendUint32(dst, uint32(f.seq))
	dst = be.AppendUint16(dst, uint16(f.epoch))
	return append(dst, 0, 0)
}

// toFirstFormat turns a closed store's segments into the first format: a
// dense .idx beside each .log but the last (left as a crash left an
// active segment: no index), no .index, journal or snapshot.
func toFirstFormat(t *testing.T, fs vfs.FS) int {
	t.Helper()
	dir := "db/segments"
	names, _ := fs.List(dir)
	slices.Sort(names)
	var logs []string
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, "."+extLog):
			logs = append(logs, strings.TrimSuffix(n, "."+extLog))
		default:
			_ = fs.Remove(fs.PathJoin(dir, n))
		}
	}
	for _, base := range logs[:len(logs)-1] {
		f, err := fs.Open(fs.PathJoin(dir, base+"."+extLog))
		if err != nil {
			t.Fatal(err)
		}
		sid, _, _, _ := parseSegmentName(base + "." + extLog)
		var recs []byte
		n := 0
		if _, err := scanSegment(f, sid, 0, func(fi *frameInfo, raw []byte) {
			recs = oldIdxRecord(recs, fi)
			n++
		}); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		buf := binary.BigEndian.AppendUint32(nil, idxMagic)
		buf = binary.BigEndian.AppendUint32(buf, uint32(n))
		buf = append(buf, recs...)
		buf = binary.BigEndian.AppendUint32(buf, batch.Checksum(buf))
		w, _ := fs.Create(fs.PathJoin(dir, base+"."+extOldIdx), vfs.WriteCategoryUnspecified)
		_, _ = w.Write(buf)
		_ = w.Close()
	}
	return len(logs) - 1
}

// TestOpenFirstFormat: a store written in the first format (a dense .idx
// per sealed segment, no snapshot) opens: its segments are migrated to the
// sparse index, producer states replayed from the .idx records, the last
// segment scanned; every batch reads back and the next start migrates
// and replays nothing.
func TestOpenFirstFormat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := vfs.NewMem()
	opts := Options{FS: fs, SegmentBytes: 16 << 10, CacheBytesPerPartition: -1, CleanerInterval: -1}
	s := openT(t, "db", opts)
	createStream(t, s, "old", 4)
	pid, _, _ := s.InitProducerID(ctx)
	log := &ackLog{}
	stop := make(chan struct{})
	wg := writeLoad(t, s, "old", pid, log, stop)
	waitFor(t, "a few segments", func() error {
		if n := len(log.snapshot()[0]); n < 300 {
			return fmt.Errorf("%d batches", n)
		}
		return nil
	})
	close(stop)
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	acks := log.snapshot()
	old := toFirstFormat(t, fs)
	s = openT(t, "db", opts)
	if s.stats.migrated != old || s.stats.scanned != 1 || s.stats.replayed != old+1 || old < 3 {
		t.Fatalf("first Open of the first format: %+v; want %d segments migrated, 1 scanned, all replayed", s.stats, old)
	}
	checkAcked(t, s, "old", acks)
	s = reopen(t, s, opts)
	if s.stats.migrated != 0 || s.stats.scanned != 0 || s.stats.replayed != 0 {
		t.Fatalf("second Open: %+v; want nothing migrated, scanned or replayed", s.stats)
	}
	checkAcked(t, s, "old", acks)
	names, _ := fs.List("db/segments")
	for _, n := range names {
		if strings.HasSuffix(n, "."+extOldIdx) {
			t.Fatalf("%s left after the migration", n)
		}
	}
	_ = s.Close()
}

// TestSnapshotOlderThanCleanedSegment: the log cleaner's segment keeps the
// number of the first segment it replaced but holds batches of the later
// ones (its index's covers); with only a snapshot older than those (one
// taken when an earlier segment was sealed), Open replays the cleaned
// segment, so the producer's last batch is still a duplicate.
func TestSnapshotOlderThanCleanedSegment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := backendtest.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	fs := vfs.NewMem()
	opts := cleanerOpts(fs, clock)
	opts.CleanerInterval = -1 // passes run below, when the test says
	s := openT(t, "db", opts)
	c := &compactionCase{stream: "cov", parts: 1}
	c.create(t, s)
	pid, _, _ := s.InitProducerID(ctx)
	var early []byte
	var earlyName string
	var last acked
	value := make([]byte, 300)
	for i := range 200 {
		h := batch.NewHeader(0)
		h.ProducerID, h.BaseSequence = pid, int32(i)
		b := backendtest.FromRaw(batch.Encode(h, []disbackend.Record{{Timestamp: clock.Now().UnixMilli(), Key: []byte(fmt.Sprint(i % 7)), Value: value}}))
		raw := append([]byte(nil), b.Raw...)
		res, err := s.Append("cov", 0, b).Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		batch.SetBaseOffset(raw, res.BaseOffset)
		last = acked{base: res.BaseOffset, raw: raw}
		if early == nil {
			names, _ := fs.List("db/segments")
			for _, n := range names {
				if strings.HasSuffix(n, "."+extSnapshot) {
					earlyName = fs.PathJoin("db/segments", n)
					f, _ := fs.Open(earlyName)
					early, _ = io.ReadAll(f)
					_ = f.Close()
				}
			}
		}
	}
	if early == nil {
		t.Fatal("no segment rolled")
	}
	clock.Advance(2 * time.Minute)
	s.rollIdle(s.streams["cov"])
	for more := true; more; {
		var err error
		if more, err = s.cleanStream(s.streams["cov"]); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(s.segs[s.streams["cov"].sid]); n != 1 {
		t.Fatalf("%d segments after cleaning, want 1", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := fs.List("db/segments")
	for _, n := range names {
		if strings.HasSuffix(n, "."+extSnapshot) {
			_ = fs.Remove(fs.PathJoin("db/segments", n))
		}
	}
	w, _ := fs.Create(earlyName, vfs.WriteCategoryUnspecified)
	_, _ = w.Write(early)
	_ = w.Close()
	s = openT(t, "db", opts)
	defer s.Close()
	if s.stats.snapshots != 1 || s.stats.replayed != 1 {
		t.Fatalf("Open with a snapshot older than the cleaned segment: %+v; want it loaded and the segment replayed", s.stats)
	}
	res, err := s.Append("cov", 0, backendtest.FromRaw(append([]byte(nil), last.raw...))).Wait(ctx)
	if err != nil || !res.Duplicate || res.BaseOffset != last.base {
		t.Fatalf("retry of the producer's last batch: %+v, %v; want the duplicate at %d", res, err, last.base)
	}
}
