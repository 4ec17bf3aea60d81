package localstore

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
	"github.com/disgw/disgw/kafkawire/batch"
)

const recordBytes = 1024

// benchStore opens a store on disk (real fsyncs) or in memory.
func benchStore(b *testing.B, disk bool, opts Options) *Store {
	b.Helper()
	dir := "db"
	if disk {
		dir = b.TempDir()
	} else {
		opts.FS = vfs.NewMem()
	}
	opts.Logger = zap.NewNop()
	opts.RetentionCheckInterval = -1
	s, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func benchCreate(b *testing.B, s *Store, parts int32) {
	b.Helper()
	_, err := s.CreateStream(context.Background(), disbackend.StreamSpec{Name: "bench", TopicName: "bench", PartitionCount: parts,
		Config: disbackend.StreamConfig{Retention: disbackend.UnlimitedRetention}})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAppend measures synced append throughput: 4 producers, one per
// partition, each with up to 8 batches in flight (as a Kafka producer with
// max.in.flight 5 plus the gateway's queue), batches of 1 KiB records.
// Each op is one batch; every append is acknowledged only after its fsync.
func BenchmarkAppend(b *testing.B) {
	for _, disk := range []bool{true, false} {
		for _, size := range []struct {
			name    string
			records int32
		}{{"16KiB", 16}, {"1MiB", 1024}} {
			where := map[bool]string{true: "disk", false: "mem"}[disk]
			b.Run(fmt.Sprintf("%s/batch=%s", where, size.name), func(b *testing.B) {
				s := benchStore(b, disk, Options{})
				const producers, inflight = 4, 8
				benchCreate(b, s, producers)
				tmpl := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: size.records, RecordBytes: recordBytes})
				b.SetBytes(int64(len(tmpl.Raw)))
				b.ReportAllocs()
				b.ResetTimer()
				var wg sync.WaitGroup
				for w := 0; w < producers; w++ {
					n := b.N / producers
					if w < b.N%producers {
						n++
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						q := make([]*disbackend.Pending, 0, inflight)
						for i := 0; i < n; i++ {
							batch := tmpl
							batch.Raw = append([]byte(nil), tmpl.Raw...) // the store owns Raw
							q = append(q, s.Append("bench", int32(w), batch))
							if len(q) == inflight {
								if _, err := q[0].Wait(context.Background()); err != nil {
									b.Error(err)
									return
								}
								q = append(q[:0], q[1:]...)
							}
						}
						for _, p := range q {
							if _, err := p.Wait(context.Background()); err != nil {
								b.Error(err)
							}
						}
					}()
				}
				wg.Wait()
			})
		}
	}
}

// BenchmarkRead measures sequential reads of 16 KiB batches of 1 KiB
// records with 1 MiB per read (franz-go's default fetch.max.partition.bytes),
// from the tail cache and, with the cache off, from the segment files. Each op is one
// Read.
func BenchmarkRead(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"cache", Options{CacheBytesPerPartition: 256 << 20, CacheBytes: 1 << 30}},
		{"segments", Options{CacheBytesPerPartition: -1}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := benchStore(b, true, tc.opts)
			benchCreate(b, s, 1)
			tmpl := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 16, RecordBytes: recordBytes})
			const total = 64 << 20
			var pend []*disbackend.Pending
			for n := 0; n < total; n += len(tmpl.Raw) {
				batch := tmpl
				batch.Raw = append([]byte(nil), tmpl.Raw...)
				pend = append(pend, s.Append("bench", 0, batch))
			}
			for _, p := range pend {
				if _, err := p.Wait(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
			res, err := s.Read(ctx, "bench", 0, 0, 1<<20)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(res.Bytes))
			b.ReportAllocs()
			b.ResetTimer()
			var off int64
			for i := 0; i < b.N; i++ {
				res, err := s.Read(ctx, "bench", 0, off, 1<<20)
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Batches) == 0 {
					off = 0
					continue
				}
				last := res.Batches[len(res.Batches)-1]
				off = batch.LastOffset(last) + 1
			}
		})
	}
}

// smallBatch is a one-record batch of 16 value bytes with timestamp ts (ms),
// 84 bytes: what a producer sends with linger 0 and small records.
func smallBatch(ts int64) disbackend.Batch {
	h := batch.NewHeader(0)
	h.PartitionLeaderEpoch = 0
	raw := batch.Encode(h, []disbackend.Record{{Timestamp: ts, Value: []byte("0123456789abcdef")}})
	ph, err := batch.Parse(raw)
	if err != nil {
		panic(err)
	}
	return disbackend.Batch{Raw: raw, Header: ph}
}

// fillSmall appends n one-record batches to partition part of stream, the
// i-th with timestamp t0+i ms, with up to 8192 in flight.
func fillSmall(tb testing.TB, s *Store, stream string, part int32, n int, t0 int64) {
	tb.Helper()
	ctx := context.Background()
	q := make([]*disbackend.Pending, 0, 8192)
	for i := 0; i < n; i++ {
		q = append(q, s.Append(stream, part, smallBatch(t0+int64(i))))
		if len(q) == cap(q) {
			for _, p := range q {
				if _, err := p.Wait(ctx); err != nil {
					tb.Fatal(err)
				}
			}
			q = q[:0]
		}
	}
	for _, p := range q {
		if _, err := p.Wait(ctx); err != nil {
			tb.Fatal(err)
		}
	}
}

// envInt reads a positive integer from the environment, def when unset.
func envInt(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// heapAfterGC returns the live heap after two collections.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// rssBytes returns the process's resident memory (Linux), 0 when unknown.
func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// oldOffsetsStore opens (creating and filling when new) the store of
// BenchmarkOldOffsets: one partition of n one-record batches, timestamps
// 1 ms apart from t0. DISGW_BENCH_DIR keeps it between runs (it must have
// been filled with the same n).
func oldOffsetsStore(b *testing.B, n int, t0 int64) *Store {
	b.Helper()
	dir := os.Getenv("DISGW_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	opts := Options{Logger: zap.NewNop(), RetentionCheckInterval: -1, CleanerInterval: -1}
	start := time.Now()
	s, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("open %s: %v", dir, time.Since(start))
	if r, err := s.Range("old", 0); err == nil {
		if r.Next != int64(n) {
			b.Fatalf("%s holds %d batches, want %d", dir, r.Next, n)
		}
		return s
	}
	benchCreate1(b, s, "old")
	start = time.Now()
	fillSmall(b, s, "old", 0, n, t0)
	b.Logf("wrote %d batches in %v", n, time.Since(start))
	return s
}

func benchCreate1(tb testing.TB, s *Store, name string) {
	tb.Helper()
	_, err := s.CreateStream(context.Background(), disbackend.StreamSpec{Name: name, TopicName: name, PartitionCount: 1,
		Config: disbackend.StreamConfig{Retention: disbackend.UnlimitedRetention}})
	if err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkOldOffsets measures reads far behind the tail on a partition
// of many one-record batches (DISGW_BENCH_BATCHES, 1,000,000 when unset):
// "fetch" reads 1 MiB (franz-go's fetch.max.partition.bytes) at a random
// offset of the oldest 90% (never in the tail cache; DISGW_BENCH_SPAN
// batches from the start when set, and DISGW_BENCH_WARM=1 reads them once
// first, so that the page cache holds them), "timestamp" finds the batch
// of a random timestamp of the same range (Kafka ListOffsets by
// timestamp). It reports each op's p50 and p99 in microseconds. The
// 50-million-batch figures of docs/architecture.md §5 come from
//
//	DISGW_BENCH_BATCHES=50000000 DISGW_BENCH_DIR=/tmp/old50m \
//	  go test ./disbackend/localstore -run '^$' -bench OldOffsets -benchtime 2000x -timeout 2h
func BenchmarkOldOffsets(b *testing.B) {
	n := envInt(b, "DISGW_BENCH_BATCHES", 1_000_000)
	const t0 = 1_700_000_000_000
	s := oldOffsetsStore(b, n, t0)
	defer s.Close()
	b.Logf("heap %d MiB, rss %d MiB with %d batches", heapAfterGC()>>20, rssBytes()>>20, n)
	ctx := context.Background()
	span := int64(envInt(b, "DISGW_BENCH_SPAN", n*9/10))
	if os.Getenv("DISGW_BENCH_WARM") != "" {
		// Read the span once, so that the page cache holds it.
		start := time.Now()
		for off := int64(0); off < span; {
			res, err := s.Read(ctx, "old", 0, off, 8<<20)
			if err != nil || len(res.Batches) == 0 {
				b.Fatalf("warming at %d: %v", off, err)
			}
			off = batch.LastOffset(res.Batches[len(res.Batches)-1]) + 1
		}
		b.Logf("warmed %d batches in %v", span, time.Since(start))
	}
	for _, tc := range []struct {
		name string
		op   func(x int64) error
	}{
		{"fetch", func(x int64) error {
			res, err := s.Read(ctx, "old", 0, x, 1<<20)
			if err == nil && (len(res.Batches) == 0 || batch.BaseOffset(res.Batches[0]) != x) {
				err = fmt.Errorf("read at %d: %d batches", x, len(res.Batches))
			}
			return err
		}},
		{"timestamp", func(x int64) error {
			raw, err := s.BatchAtTimestamp(ctx, "old", 0, t0+x)
			if err == nil && (raw == nil || batch.BaseOffset(raw) != x) {
				err = fmt.Errorf("timestamp %d: batch at %d", t0+x, baseOf(raw))
			}
			return err
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				x := rng.Int64N(span)
				start := time.Now()
				if err := tc.op(x); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			if os.Getenv("DISGW_BENCH_DECILES") != "" {
				var d []string
				for q := 1; q < 10; q++ {
					d = append(d, fmt.Sprint(lat[len(lat)*q/10].Microseconds()))
				}
				b.Logf("deciles (µs): %s", strings.Join(d, " "))
			}
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

func baseOf(raw []byte) int64 {
	if raw == nil {
		return -1
	}
	return batch.BaseOffset(raw)
}

// BenchmarkStoredMemory writes DISGW_BENCH_BATCHES (1,000,000 when unset)
// one-record batches to one partition of a store on disk and reports the
// live heap and resident memory after writing and after a clean restart.
// DISGW_BENCH_HEAPPROFILE names a file for a heap profile taken after the
// restart.
func BenchmarkStoredMemory(b *testing.B) {
	n := envInt(b, "DISGW_BENCH_BATCHES", 1_000_000)
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		opts := Options{Logger: zap.NewNop(), RetentionCheckInterval: -1, CleanerInterval: -1}
		s, err := Open(dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		base := heapAfterGC()
		benchCreate1(b, s, "mem")
		fillSmall(b, s, "mem", 0, n, 1_700_000_000_000)
		written := heapAfterGC()
		rssWritten := rssBytes()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		s, err = Open(dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		restarted := heapAfterGC()
		if p := os.Getenv("DISGW_BENCH_HEAPPROFILE"); p != "" {
			f, err := os.Create(p)
			if err != nil {
				b.Fatal(err)
			}
			_ = pprof.WriteHeapProfile(f)
			_ = f.Close()
		}
		b.ReportMetric(float64(written-base)/float64(n), "heap-B/batch-written")
		b.ReportMetric(float64(restarted-base)/float64(n), "heap-B/batch-restarted")
		b.Logf("%d batches: heap %d MiB written (rss %d MiB), %d MiB after a restart of %v (rss %d MiB)",
			n, written>>20, rssWritten>>20, restarted>>20, took, rssBytes()>>20)
		_ = s.Close()
	}
}

// BenchmarkRestartAfterKill9 measures a start after kill -9: a child
// process (this test binary again) writes DISGW_BENCH_BATCHES (1,000,000
// when unset) one-record batches round-robin over DISGW_BENCH_PARTITIONS
// (1,000) partitions of one topic whose segment.bytes (1 GiB) keeps them
// in one active segment, and is killed with SIGKILL once they are
// acknowledged; the benchmark then times Open and reports the live heap
// and resident memory after it.
func BenchmarkRestartAfterKill9(b *testing.B) {
	if dir := os.Getenv("DISGW_BENCH_CHILD_DIR"); dir != "" {
		kill9Child(b, dir)
		return
	}
	n := envInt(b, "DISGW_BENCH_BATCHES", 1_000_000)
	parts := envInt(b, "DISGW_BENCH_PARTITIONS", 1000)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := b.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^BenchmarkRestartAfterKill9$", "-test.benchtime=1x")
		cmd.Env = append(os.Environ(), "DISGW_BENCH_CHILD_DIR="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		for sc.Scan() && sc.Text() != "written" {
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		log := zap.NewNop()
		if os.Getenv("DISGW_BENCH_LOG") != "" {
			log, _ = zap.NewDevelopment()
		}
		b.StartTimer()
		start := time.Now()
		s, err := Open(dir, Options{Logger: log, RetentionCheckInterval: -1, CleanerInterval: -1})
		took := time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		var total int64
		for p := int32(0); p < int32(parts); p++ {
			r, err := s.Range("k9", p)
			if err != nil {
				b.Fatal(err)
			}
			total += r.Next
		}
		if total < int64(n) {
			b.Fatalf("%d batches after the restart, %d acknowledged", total, n)
		}
		b.ReportMetric(took.Seconds(), "open-s")
		b.Logf("%d batches over %d partitions: open after kill -9 in %v; heap %d MiB, rss %d MiB",
			n, parts, took, heapAfterGC()>>20, rssBytes()>>20)
		_ = s.Close()
	}
}

// kill9Child is BenchmarkRestartAfterKill9's child: it writes the batches,
// says "written" and waits to be killed.
func kill9Child(b *testing.B, dir string) {
	n := envInt(b, "DISGW_BENCH_BATCHES", 1_000_000)
	parts := envInt(b, "DISGW_BENCH_PARTITIONS", 1000)
	s, err := Open(dir, Options{Logger: zap.NewNop(), RetentionCheckInterval: -1, CleanerInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	_, err = s.CreateStream(context.Background(), disbackend.StreamSpec{Name: "k9", TopicName: "k9", PartitionCount: int32(parts),
		Config: disbackend.StreamConfig{Retention: disbackend.UnlimitedRetention, SegmentBytes: 1 << 30}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	q := make([]*disbackend.Pending, 0, 8192)
	for i := 0; i < n; i++ {
		q = append(q, s.Append("k9", int32(i%parts), smallBatch(1_700_000_000_000+int64(i))))
		if len(q) == cap(q) || i == n-1 {
			for _, p := range q {
				if _, err := p.Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
			q = q[:0]
		}
	}
	fmt.Println("written")
	select {}
}
