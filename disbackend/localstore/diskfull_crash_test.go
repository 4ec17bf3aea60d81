package localstore

// Disk-full tests written to break the disk-full state: groups over
// several streams, seals and journal writes that find no room, crashes after
// a write taken back, metadata reopened under readers, and (with
// DISGW_TEST_SMALLFS naming a small tmpfs) a real ENOSPC.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
	"github.com/disgw/disgw/kafkawire/batch"
)

// dfBatch is batch seq of idempotent producer pid (one record, size bytes).
func dfBatch(pid int64, seq int32, size int) disbackend.Batch {
	return backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 1, RecordBytes: size, Idempotent: true,
		ProducerID: pid, BaseSequence: seq, Seed: uint64(pid)<<32 | uint64(uint32(seq))})
}

type dfStored struct {
	base int64
	pid  int64
	seq  int32
	raw  []byte
}

// dfRead reads a whole partition.
func dfRead(t *testing.T, s *Store, stream string, part int32) []dfStored {
	t.Helper()
	r, err := s.Range(stream, part)
	if err != nil {
		t.Fatal(err)
	}
	var out []dfStored
	for off := r.First; off < r.Next; {
		res, err := s.Read(context.Background(), stream, part, off, 1<<20)
		if err != nil || len(res.Batches) == 0 {
			t.Fatalf("%s/%d: read at %d of [%d : %d]: %d batches, %v", stream, part, off, r.First, r.Next, len(res.Batches), err)
		}
		for _, b := range res.Batches {
			h, err := batch.Parse(b)
			if err != nil {
				t.Fatalf("%s/%d: stored batch at %d: %v", stream, part, off, err)
			}
			out = append(out, dfStored{base: h.BaseOffset, pid: h.ProducerID, seq: h.BaseSequence, raw: append([]byte(nil), b...)})
			off = h.BaseOffset + int64(h.LastOffsetDelta) + 1
		}
	}
	return out
}

// dfAcked is what a test expects in a partition: the acknowledged batches
// in offset order.
type dfAcked struct {
	mu sync.Mutex
	m  map[string][]dfStored // "stream/part"
}

func (a *dfAcked) add(stream string, part int32, base int64, b disbackend.Batch) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string][]dfStored{}
	}
	k := fmt.Sprintf("%s/%d", stream, part)
	raw := append([]byte(nil), b.Raw...)
	batch.SetBaseOffset(raw, base)
	a.m[k] = append(a.m[k], dfStored{base: base, pid: b.ProducerID, seq: b.BaseSequence, raw: raw})
}

// check: every partition holds exactly its acknowledged batches, at
// offsets 0..n-1 with no gap, byte for byte.
func (a *dfAcked) check(t *testing.T, s *Store, parts map[string]int32, when string) {
	t.Helper()
	for stream, n := range parts {
		for p := range n {
			k := fmt.Sprintf("%s/%d", stream, p)
			want := a.m[k]
			got := dfRead(t, s, stream, p)
			if len(got) != len(want) {
				var gs []string
				for _, g := range got {
					gs = append(gs, fmt.Sprintf("%d:pid%d/seq%d", g.base, g.pid, g.seq))
				}
				t.Fatalf("%s: %s holds %d batches %v, want %d acknowledged", when, k, len(got), gs, len(want))
			}
			for i := range want {
				if got[i].base != int64(i) || want[i].base != int64(i) {
					t.Fatalf("%s: %s batch %d at offset %d (acked at %d), want %d", when, k, i, got[i].base, want[i].base, i)
				}
				if !bytes.Equal(got[i].raw, want[i].raw) {
					t.Fatalf("%s: %s batch %d at %d: stored pid %d seq %d is not the acknowledged pid %d seq %d",
						when, k, i, got[i].base, got[i].pid, got[i].seq, want[i].pid, want[i].seq)
				}
			}
		}
	}
}

func dfCreate(t *testing.T, s *Store, name string, parts int32, cfg disbackend.StreamConfig) {
	t.Helper()
	cfg.Retention = time.Hour
	if _, err := s.CreateStream(context.Background(), disbackend.StreamSpec{Name: name, TopicName: name, PartitionCount: parts, Config: cfg}); err != nil {
		t.Fatal(err)
	}
}

func dfSid(s *Store, name string) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return uint64(s.streams[name].sid)
}

type dfReq struct {
	stream string
	part   int32
	b      disbackend.Batch
	p      *disbackend.Pending
}

// dfGroup enqueues reqs while the writer is held after taking the first
// (Store.groupHook), so that they form one group, and returns them with
// their Pendings. (Holding wmu instead did not: the writer takes what is
// queued before it locks wmu, and under -race took the first 7 of 16
// appends as a group of their own.)
func dfGroup(s *Store, reqs []dfReq) []dfReq {
	release := make(chan struct{})
	hold := func() { <-release }
	s.groupHook.Store(&hold)
	for i := range reqs {
		r := &reqs[i]
		// Append takes ownership of Raw: hand it a copy.
		b := r.b
		b.Raw = append([]byte(nil), r.b.Raw...)
		r.p = s.Append(r.stream, r.part, b)
	}
	s.groupHook.Store(nil)
	close(release)
	return reqs
}

// TestDiskFullTakeBackMultiStreamIdem: a group over two streams, five
// partitions, two idempotent producers and a duplicate of an acknowledged
// batch finds no room on the second stream; all refused; retries after
// space is back are new batches at the next offsets (the duplicate still
// a duplicate); after a crash every acknowledged batch is there once and
// the producer states dedupe the last batches.
func TestDiskFullTakeBackMultiStreamIdem(t *testing.T) {
	ctx := context.Background()
	mem := vfs.NewCrashableMem()
	q := newQuotaFSOn(mem, 1<<30)
	opts := Options{FS: q, MinFreeBytes: -1, BallastBytes: -1, spaceCheck: 5 * time.Millisecond, CacheBytesPerPartition: -1}
	s := openT(t, "db", opts)
	dfCreate(t, s, "a", 3, disbackend.StreamConfig{})
	dfCreate(t, s, "b", 2, disbackend.StreamConfig{})
	parts := map[string]int32{"a": 3, "b": 2}
	var acked dfAcked
	seqs := map[string]int32{}
	next := func(stream string, part int32, pid int64) disbackend.Batch {
		k := fmt.Sprintf("%s/%d/%d", stream, part, pid)
		b := dfBatch(pid, seqs[k], 100+int(seqs[k])*7+int(part))
		seqs[k]++
		return b
	}
	// Acknowledged history.
	for round := 0; round < 3; round++ {
		for stream, n := range parts {
			for p := range n {
				for _, pid := range []int64{7, 8} {
					b := next(stream, p, pid)
					res, err := s.Append(stream, p, b).Wait(ctx)
					if err != nil {
						t.Fatal(err)
					}
					acked.add(stream, p, res.BaseOffset, b)
				}
			}
		}
	}
	lastAcked := dfBatch(7, seqs["a/1/7"]-1, 100+int(seqs["a/1/7"]-1)*7+1)

	// The group that finds no room on b.
	var reqs []dfReq
	for _, stream := range []string{"a", "b"} {
		for p := range parts[stream] {
			for _, pid := range []int64{7, 8, 7} {
				reqs = append(reqs, dfReq{stream: stream, part: p, b: next(stream, p, pid)})
			}
		}
	}
	reqs = append(reqs, dfReq{stream: "a", part: 1, b: lastAcked})
	failB := fmt.Sprintf("%016x-", dfSid(s, "b"))
	q.failing.Store(&failB)
	reqs = dfGroup(s, reqs)
	for i, r := range reqs {
		if _, err := r.p.Wait(ctx); !errors.Is(err, disbackend.ErrStorageFull) {
			t.Fatalf("req %d (%s/%d pid %d seq %d) in the taken-back group: %v, want ErrStorageFull", i, r.stream, r.part, r.b.ProducerID, r.b.BaseSequence, err)
		}
	}
	acked.check(t, s, parts, "after the take-back")
	q.failing.Store(nil)
	waitState(t, s, false)

	// Retries, in one group again, in the same order.
	reqs = dfGroup(s, reqs)
	for i, r := range reqs {
		res, err := r.p.Wait(ctx)
		if err != nil {
			t.Fatalf("retry %d (%s/%d pid %d seq %d): %v", i, r.stream, r.part, r.b.ProducerID, r.b.BaseSequence, err)
		}
		if i == len(reqs)-1 {
			if !res.Duplicate {
				t.Fatalf("retry of an acknowledged batch: %+v, want a duplicate", res)
			}
			continue
		}
		if res.Duplicate {
			t.Fatalf("retry %d (%s/%d pid %d seq %d) answered as a duplicate (offset %d) though it was refused", i, r.stream, r.part, r.b.ProducerID, r.b.BaseSequence, res.BaseOffset)
		}
		acked.add(r.stream, r.part, res.BaseOffset, r.b)
	}
	acked.check(t, s, parts, "after the retries")

	// Crash (only synced data survives), reopen.
	crashed := newQuotaFSOn(mem.CrashClone(vfs.CrashCloneCfg{}), 1<<30)
	_ = s.Close()
	opts.FS = crashed
	s = openT(t, "db", opts)
	defer func() { _ = s.Close() }()
	acked.check(t, s, parts, "after the crash")
	// The producer states after the crash: the last batch of each is a
	// duplicate at its offset; the next sequence is taken.
	for stream, n := range parts {
		for p := range n {
			for _, pid := range []int64{7, 8} {
				k := fmt.Sprintf("%s/%d/%d", stream, p, pid)
				last := dfBatch(pid, seqs[k]-1, 100+int(seqs[k]-1)*7+int(p))
				res, err := s.Append(stream, p, last).Wait(ctx)
				if err != nil || !res.Duplicate {
					t.Fatalf("%s retry of last seq %d after the crash: %+v, %v; want a duplicate", k, seqs[k]-1, res, err)
				}
				b := next(stream, p, pid)
				res, err = s.Append(stream, p, b).Wait(ctx)
				if err != nil || res.Duplicate {
					t.Fatalf("%s next seq after the crash: %+v, %v", k, res, err)
				}
				acked.add(stream, p, res.BaseOffset, b)
			}
		}
	}
	acked.check(t, s, parts, "after the crash and more appends")
}

// TestDiskFullTakeBackLeftoverFrameAfterCrash: on a file without a descriptor
// the taken-back bytes are not cut (positional); a shorter write after
// them leaves a whole taken-back frame behind, which is synced with it:
// after a crash that refused batch is in the partition.
func TestDiskFullTakeBackLeftoverFrameAfterCrash(t *testing.T) {
	ctx := context.Background()
	mem := vfs.NewCrashableMem()
	q := newQuotaFSOn(mem, 1<<30)
	opts := Options{FS: q, MinFreeBytes: -1, BallastBytes: -1, spaceCheck: 5 * time.Millisecond, CacheBytesPerPartition: -1}
	s := openT(t, "db", opts)
	dfCreate(t, s, "a", 1, disbackend.StreamConfig{})
	dfCreate(t, s, "b", 1, disbackend.StreamConfig{})
	parts := map[string]int32{"a": 1, "b": 1}
	var acked dfAcked
	for _, st := range []string{"a", "b"} {
		b := dfBatch(7, 0, 200)
		res, err := s.Append(st, 0, b).Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		acked.add(st, 0, res.BaseOffset, b)
	}
	failB := fmt.Sprintf("%016x-", dfSid(s, "b"))
	q.failing.Store(&failB)
	reqs := dfGroup(s, []dfReq{
		{stream: "a", part: 0, b: dfBatch(7, 1, 200)},
		{stream: "a", part: 0, b: dfBatch(7, 2, 200)},
		{stream: "b", part: 0, b: dfBatch(7, 1, 200)},
	})
	for _, r := range reqs {
		if _, err := r.p.Wait(ctx); !errors.Is(err, disbackend.ErrStorageFull) {
			t.Fatalf("taken-back append: %v", err)
		}
	}
	q.failing.Store(nil)
	waitState(t, s, false)
	// The producer gives up seq 2 (it is refused); it sends seq 1 again,
	// same size: it is written over the first taken-back frame.
	b := dfBatch(7, 1, 200)
	res, err := s.Append("a", 0, b).Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	acked.add("a", 0, res.BaseOffset, b)
	acked.check(t, s, parts, "before the crash")
	crashed := newQuotaFSOn(mem.CrashClone(vfs.CrashCloneCfg{}), 1<<30)
	_ = s.Close()
	opts.FS = crashed
	s = openT(t, "db", opts)
	defer func() { _ = s.Close() }()
	acked.check(t, s, parts, "after the crash")
}

// TestDiskFullSealENOSPC: a roll whose index file finds no room refuses the
// group and changes nothing; once there is room the roll is made; after
// a crash every acknowledged batch is there and nothing else.
func TestDiskFullSealENOSPC(t *testing.T) {
	ctx := context.Background()
	mem := vfs.NewCrashableMem()
	q := newQuotaFSOn(mem, 1<<30)
	opts := Options{FS: q, MinFreeBytes: -1, BallastBytes: -1, spaceCheck: 5 * time.Millisecond, CacheBytesPerPartition: -1,
		SegmentBytes: 4 << 10}
	s := openT(t, "db", opts)
	dfCreate(t, s, "a", 2, disbackend.StreamConfig{})
	parts := map[string]int32{"a": 2}
	var acked dfAcked
	seq := [2]int32{}
	refused := 0
	ix := "." + extIndex
	for i := 0; i < 120; i++ {
		p := int32(i % 2)
		if i == 30 || i == 70 {
			q.failing.Store(&ix)
		}
		if i == 45 || i == 90 {
			q.failing.Store(nil)
			waitState(t, s, false)
		}
		b := dfBatch(7, seq[p], 300)
		res, err := s.Append("a", p, b).Wait(ctx)
		switch {
		case errors.Is(err, disbackend.ErrStorageFull):
			refused++
			continue
		case err != nil:
			t.Fatalf("append %d: %v", i, err)
		}
		if res.Duplicate {
			t.Fatalf("append %d answered as duplicate", i)
		}
		seq[p]++
		acked.add("a", p, res.BaseOffset, b)
	}
	if refused == 0 {
		t.Fatal("no append refused: no roll hit the failing index")
	}
	t.Logf("%d refused", refused)
	acked.check(t, s, parts, "live")
	crashed := newQuotaFSOn(mem.CrashClone(vfs.CrashCloneCfg{}), 1<<30)
	_ = s.Close()
	opts.FS = crashed
	s = openT(t, "db", opts)
	defer func() { _ = s.Close() }()
	acked.check(t, s, parts, "after the crash")
}

// TestDiskFullSealENOSPCReserveRoom: an index write that finds no room deletes
// the ballast and is made again in its room; the store is then full, so
// the group whose roll it was should not write its batches into the
// ballast's room either.
func TestDiskFullSealENOSPCReserveRoom(t *testing.T) {
	ctx := context.Background()
	q := newQuotaFS(1 << 30)
	opts := Options{FS: q, MinFreeBytes: -1, BallastBytes: 1 << 20, spaceCheck: time.Hour, CacheBytesPerPartition: -1,
		SegmentBytes: 4 << 10}
	s := openT(t, "db", opts)
	defer func() { _ = s.Close() }()
	dfCreate(t, s, "a", 1, disbackend.StreamConfig{})
	i := int32(0)
	for ; ; i++ {
		if _, err := s.Append("a", 0, dfBatch(7, i, 300)).Wait(ctx); err != nil {
			t.Fatal(err)
		}
		s.wmu.Lock()
		sz := s.active[s.streams["a"].sid].size
		s.wmu.Unlock()
		if sz+400 > 4<<10 {
			break
		}
	}
	i++
	// The next append rolls; the disk has room for the index only once
	// the ballast is gone.
	q.avail.Store(100)
	_, err := s.Append("a", 0, dfBatch(7, i, 300)).Wait(ctx)
	full := s.StorageNotReady()
	t.Logf("append: %v; state %q", err, full)
	if full != "" && err == nil {
		t.Fatalf("the store entered the disk-full state during the group's roll, yet the group was acknowledged (written in the ballast's room)")
	}
}

// TestDiskFullJournalENOSPC: journal writes that find no room stop journaling
// the segment; acknowledged batches survive a crash (scan).
func TestDiskFullJournalENOSPC(t *testing.T) {
	ctx := context.Background()
	mem := vfs.NewCrashableMem()
	q := newQuotaFSOn(mem, 1<<30)
	opts := Options{FS: q, MinFreeBytes: -1, BallastBytes: -1, spaceCheck: 5 * time.Millisecond, CacheBytesPerPartition: -1,
		MaxUnindexedBytes: 1}
	s := openT(t, "db", opts)
	dfCreate(t, s, "a", 2, disbackend.StreamConfig{})
	parts := map[string]int32{"a": 2}
	var acked dfAcked
	seq := [2]int32{}
	jn := "." + extJournal
	for i := 0; i < 60; i++ {
		p := int32(i % 2)
		if i == 20 {
			q.failing.Store(&jn)
		}
		if i == 40 {
			q.failing.Store(nil)
		}
		b := dfBatch(7, seq[p], 200)
		res, err := s.Append("a", p, b).Wait(ctx)
		if errors.Is(err, disbackend.ErrStorageFull) {
			waitState(t, s, false)
			continue
		}
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		seq[p]++
		acked.add("a", p, res.BaseOffset, b)
	}
	acked.check(t, s, parts, "live")
	crashed := newQuotaFSOn(mem.CrashClone(vfs.CrashCloneCfg{}), 1<<30)
	_ = s.Close()
	opts.FS = crashed
	s = openT(t, "db", opts)
	defer func() { _ = s.Close() }()
	acked.check(t, s, parts, "after the crash")
}

// TestDiskFullACLsDuringReopen: the metadata opened read-only on a full disk is
// closed and opened again for writing once there is room (reopenMeta,
// under dbMu); ACLs (and UpdateACLs) use s.db without dbMu.
func TestDiskFullACLsDuringReopen(t *testing.T) {
	ctx := context.Background()
	q := newQuotaFS(1 << 30)
	s, opts := diskFullStore(t, q, 8<<20, 1<<20, nil)
	if err := s.UpdateACLs(ctx, func([]disbackend.ACL) ([]disbackend.ACL, error) {
		return []disbackend.ACL{{}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	q.avail.Store(0)
	s = openT(t, "db", opts)
	defer func() { _ = s.Close() }()
	if s.StorageNotReady() == "" {
		t.Fatal("not full")
	}
	var stop atomic.Bool
	var panics atomic.Int64
	var firstPanic atomic.Value
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				func() {
					defer func() {
						if r := recover(); r != nil {
							panics.Add(1)
							firstPanic.CompareAndSwap(nil, fmt.Sprint(r))
						}
					}()
					_, _ = s.ACLs(ctx)
				}()
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	q.avail.Store(1 << 30)
	waitState(t, s, false)
	time.Sleep(20 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if n := panics.Load(); n > 0 {
		t.Fatalf("ACLs panicked %d times while the metadata was reopened: %v", n, firstPanic.Load())
	}
}

// TestDiskFullRealENOSPC: on a real small filesystem (DISGW_TEST_SMALLFS, e.g. a
// 64 MiB tmpfs: `mount -t tmpfs -o size=64m tmpfs DIR`; on 32 MiB the
// metadata, opened read-only, never finds the 26 MiB it needs to be
// opened for writing again) the writev path's ENOSPC is taken back
// (ftruncate + lseek); concurrent idempotent producers on two streams; every
// acknowledged batch is readable, offsets dense, after a restart too.
func TestDiskFullRealENOSPC(t *testing.T) {
	root := os.Getenv("DISGW_TEST_SMALLFS")
	if root == "" {
		t.Skip("DISGW_TEST_SMALLFS not set")
	}
	ctx := context.Background()
	dir, err := os.MkdirTemp(root, "smallfs")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	opts := Options{FS: vfs.Default, MinFreeBytes: -1, BallastBytes: 2 << 20, spaceCheck: 5 * time.Millisecond,
		CacheBytesPerPartition: -1}
	opts.Logger = nil
	s := openT(t, filepath.Join(dir, "db"), opts)
	dfCreate(t, s, "a", 3, disbackend.StreamConfig{})
	dfCreate(t, s, "b", 2, disbackend.StreamConfig{})
	parts := map[string]int32{"a": 3, "b": 2}
	var acked dfAcked
	var refusedN atomic.Int64
	seqs := map[string]int32{}
	var seqMu sync.Mutex
	filler := filepath.Join(dir, "filler")
	for round := 0; round < 6; round++ {
		var st unix.Statfs_t
		if err := unix.Statfs(root, &st); err != nil {
			t.Fatal(err)
		}
		free := int64(st.Bavail) * int64(st.Bsize)
		ff, err := os.Create(filler)
		if err != nil {
			t.Fatal(err)
		}
		leave := int64(1<<20) + int64(round)*300<<10
		if err := unix.Fallocate(int(ff.Fd()), 0, 0, free-leave); err != nil {
			t.Fatal(err)
		}
		ff.Close()
		var wg sync.WaitGroup
		for stream, n := range parts {
			for p := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					pid := int64(10 + p)
					if stream == "b" {
						pid += 100
					}
					k := fmt.Sprintf("%s/%d", stream, p)
					seqMu.Lock()
					seq := seqs[k]
					seqMu.Unlock()
					defer func() { seqMu.Lock(); seqs[k] = seq; seqMu.Unlock() }()
					refused := 0
					for refused < 10 {
						// A window of 4 in flight.
						var bs []disbackend.Batch
						var ps []*disbackend.Pending
						for i := range int32(4) {
							b := dfBatch(pid, seq+i, 3000+int((seq+i)%5)*700)
							c := b
							c.Raw = append([]byte(nil), b.Raw...)
							bs = append(bs, b)
							ps = append(ps, s.Append(stream, p, c))
						}
						failedAt := -1
						for i, pd := range ps {
							res, err := pd.Wait(ctx)
							switch {
							case errors.Is(err, disbackend.ErrStorageFull) || errors.Is(err, disbackend.ErrOutOfOrderSequence):
								if failedAt < 0 {
									failedAt = i
								}
								if errors.Is(err, disbackend.ErrStorageFull) {
									refusedN.Add(1)
								}
							case err != nil:
								t.Errorf("%s seq %d: %v", k, seq+int32(i), err)
								return
							default:
								if failedAt >= 0 {
									t.Errorf("%s seq %d acknowledged at %d after seq %d was refused", k, seq+int32(i), res.BaseOffset, seq+int32(failedAt))
									return
								}
								if res.Duplicate {
									t.Errorf("%s seq %d: duplicate at %d", k, seq+int32(i), res.BaseOffset)
									return
								}
								acked.add(stream, p, res.BaseOffset, bs[i])
							}
						}
						if failedAt >= 0 {
							seq += int32(failedAt)
							refused++
							time.Sleep(time.Millisecond)
						} else {
							seq += 4
						}
					}
				}()
			}
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		acked.check(t, s, parts, fmt.Sprintf("round %d full", round))
		if round%2 == 1 {
			// Stop and start with the disk still full.
			_ = s.Close()
			s = openT(t, filepath.Join(dir, "db"), opts)
			acked.check(t, s, parts, fmt.Sprintf("round %d reopened full", round))
		}
		os.Remove(filler)
		waitState(t, s, false)
	}
	t.Logf("%d refused", refusedN.Load())
	if refusedN.Load() == 0 {
		t.Fatal("nothing refused")
	}
	acked.check(t, s, parts, "space back")
	for stream, n := range parts {
		for p := range n {
			b := dfBatch(999, p, 500)
			res, err := s.Append(stream, p, b).Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			acked.add(stream, p, res.BaseOffset, b)
		}
	}
	acked.check(t, s, parts, "space back")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, filepath.Join(dir, "db"), opts)
	defer func() { _ = s.Close() }()
	acked.check(t, s, parts, "reopened")
}
