package backendtest

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
)

// Harness gives RunDurable what the Backend interface cannot: restarts,
// crashes, a clock and retention passes. Every backend it returns is open;
// RunDurable closes them (ignoring errors from a second Close).
type Harness struct {
	// Open returns a new, empty backend on durable storage whose clock is
	// now (nil: the real clock).
	Open func(t *testing.T, now func() time.Time) disbackend.Backend
	// Reopen closes b cleanly and opens its storage again with the same
	// clock.
	Reopen func(t *testing.T, b disbackend.Backend) disbackend.Backend
	// Crash captures b's storage as a power loss at this instant would leave
	// it, while b keeps running: each write not yet synced survives with
	// probability keepUnsyncedPercent (0 = only synced data, 100 = all),
	// chosen with seed. It returns a function opening a backend on the
	// captured storage. Nil skips the crash test.
	Crash func(t *testing.T, b disbackend.Backend, keepUnsyncedPercent int, seed uint64) func(t *testing.T) disbackend.Backend
	// EnforceRetention runs one retention pass on b now. Nil skips the
	// retention tests.
	EnforceRetention func(b disbackend.Backend) error
}

// RunDurable runs the subtests that need a Harness: restart keeps streams,
// data, ranges, producer state, apps and checkpoints; producer ids stay
// unique across restarts;
// retention; and crash recovery under concurrent appends.
func RunDurable(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
		skip bool
	}{
		{"RestartKeepsEverything", testRestart, false},
		{"RestartKeepsProducerState", testRestartProducers, false},
		{"InitProducerIDAcrossRestart", testInitProducerIDRestart, false},
		{"RestartKeepsApps", testRestartApps, false},
		{"RestartKeepsLogStart", testRestartKeepsLogStart, false},
		{"Retention", testRetention, h.EnforceRetention == nil},
		{"Crash", testCrash, h.Crash == nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip {
				t.Skip("harness has no hook for this")
			}
			t.Parallel()
			tc.fn(t, h)
		})
	}
}

func hopen(t *testing.T, h Harness, now func() time.Time) disbackend.Backend {
	t.Helper()
	b := h.Open(t, now)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func hreopen(t *testing.T, h Harness, b disbackend.Backend) disbackend.Backend {
	t.Helper()
	nb := h.Reopen(t, b)
	t.Cleanup(func() { _ = nb.Close() })
	return nb
}

// snapshot is everything observable about a set of partitions.
type snapshot struct {
	streams []disbackend.Stream
	ranges  map[string]disbackend.PartitionRange
	data    map[string][][]byte
}

func takeSnapshot(t *testing.T, b disbackend.Backend) snapshot {
	t.Helper()
	list, err := b.ListStreams(ctxT(t))
	if err != nil {
		t.Fatalf("ListStreams: %v", err)
	}
	s := snapshot{streams: list, ranges: map[string]disbackend.PartitionRange{}, data: map[string][][]byte{}}
	for _, st := range list {
		for p := int32(0); p < st.PartitionCount; p++ {
			k := fmt.Sprintf("%s/%d", st.Name, p)
			r := mustRange(t, b, st.Name, p)
			s.ranges[k] = r
			s.data[k] = readAll(t, b, st.Name, p, r.First, 1<<20)
		}
	}
	return s
}

func wantSnapshot(t *testing.T, got, want snapshot) {
	t.Helper()
	if len(got.streams) != len(want.streams) {
		t.Fatalf("%d streams, want %d", len(got.streams), len(want.streams))
	}
	for i := range want.streams {
		if !sameStream(got.streams[i], want.streams[i]) {
			t.Fatalf("stream %d = %+v, want %+v", i, got.streams[i], want.streams[i])
		}
	}
	for k, r := range want.ranges {
		if got.ranges[k] != r {
			t.Fatalf("%s: range %+v, want %+v", k, got.ranges[k], r)
		}
		wantBatches(t, nil, k, got.data[k], want.data[k]...)
	}
}

func testRestart(t *testing.T, h Harness) {
	ctx := ctxT(t)
	b := hopen(t, h, nil)
	mustCreate(t, b, spec(t, "r.one", 3))
	mustCreate(t, b, spec(t, "r2", 1))
	if err := b.UpdatePartitionCount(ctx, "r2", 2); err != nil {
		t.Fatal(err)
	}
	cfg := disbackend.StreamConfig{Retention: 72 * time.Hour, TimestampType: disbackend.CreateTime, MaxMessageBytes: 9999}
	if err := b.UpdateStreamConfig(ctx, "r2", cfg); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		st := []string{"r_one", "r2"}[i%2]
		mustAppend(t, b, st, int32(i%2), MakeBatch(BatchOptions{NumRecords: int32(1 + i%4), RecordBytes: 100, Seed: uint64(i), FirstTimestamp: int64(i)}))
	}
	before := takeSnapshot(t, b)
	b = hreopen(t, h, b)
	wantSnapshot(t, takeSnapshot(t, b), before)
	// Appends go on at next, and survive another restart.
	r := mustRange(t, b, "r_one", 0)
	if s := mustAppend(t, b, "r_one", 0, MakeBatch(BatchOptions{NumRecords: 2, Seed: 99})); s.base != r.Next {
		t.Fatalf("append after restart: offset %d, want %d", s.base, r.Next)
	}
	mustAppend(t, b, "r2", 1, MakeBatch(BatchOptions{NumRecords: 2, Seed: 98}))
	before = takeSnapshot(t, b)
	b = hreopen(t, h, b)
	b = hreopen(t, h, b)
	wantSnapshot(t, takeSnapshot(t, b), before)
	// Deletion survives a restart too.
	if err := b.DeleteStream(ctx, "r2"); err != nil {
		t.Fatal(err)
	}
	b = hreopen(t, h, b)
	_, err := b.DescribeStream(ctx, "r2")
	wantErr(t, "deleted stream after restart", err, disbackend.ErrStreamNotFound)
	mustCreate(t, b, spec(t, "r2", 1))
	wantRange(t, b, "r2", 0, 0, 0)
}

func testRestartProducers(t *testing.T, h Harness) {
	b := hopen(t, h, nil)
	mustCreate(t, b, spec(t, "rp", 2))
	pid := initProducer(t, b)
	var s []stored
	for i := 0; i < 4; i++ {
		s = append(s, mustAppend(t, b, "rp", 0, idem(pid, 0, int32(i*2), 2, uint64(i))))
	}
	mustAppend(t, b, "rp", 1, idem(pid, 0, 0, 1, 50))
	pid2 := initProducer(t, b)
	mustAppend(t, b, "rp", 0, idem(pid2, 0, 0, 1, 51))
	mustAppend(t, b, "rp", 0, idem(pid2, 1, 0, 1, 52)) // pid2 now at epoch 1
	b = hreopen(t, h, b)
	wantDuplicate(t, b, "rp", 0, idem(pid, 0, 0, 2, 0), s[0].base)
	wantDuplicate(t, b, "rp", 0, idem(pid, 0, 6, 2, 3), s[3].base)
	wantDuplicate(t, b, "rp", 1, idem(pid, 0, 0, 1, 50), 0)
	wantAppendErr(t, "gap after restart", b, "rp", 0, idem(pid, 0, 9, 1, 4), disbackend.ErrOutOfOrderSequence)
	wantAppendErr(t, "old epoch after restart", b, "rp", 0, idem(pid2, 0, 1, 1, 53), disbackend.ErrInvalidProducerEpoch)
	mustAppend(t, b, "rp", 0, idem(pid, 0, 8, 1, 5))
	mustAppend(t, b, "rp", 0, idem(pid2, 1, 1, 1, 54))
	b = hreopen(t, h, b)
	wantDuplicate(t, b, "rp", 0, idem(pid, 0, 8, 1, 5), mustRange(t, b, "rp", 0).Next-2)
}

func testInitProducerIDRestart(t *testing.T, h Harness) {
	b := hopen(t, h, nil)
	seen := map[int64]bool{}
	for round := 0; round < 4; round++ {
		for i := 0; i < 5; i++ {
			id := initProducer(t, b)
			if seen[id] {
				t.Fatalf("round %d: producer id %d handed out twice (across restarts)", round, id)
			}
			seen[id] = true
		}
		b = hreopen(t, h, b)
	}
}

// FakeClock is a clock a test sets or moves; its Now is a store's clock
// option (localstore.Options.Now). Safe for concurrent use.
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewFakeClock returns a FakeClock at t.
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{now: t} }

// Now returns the clock's time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set sets the clock to t.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func testRetention(t *testing.T, h Harness) {
	ctx := ctxT(t)
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := NewFakeClock(t0)
	b := hopen(t, h, clock.Now)
	enforce := func() {
		t.Helper()
		if err := h.EnforceRetention(b); err != nil {
			t.Fatalf("EnforceRetention: %v", err)
		}
	}
	sp := spec(t, "ret", 2)
	sp.Config.Retention = time.Hour
	mustCreate(t, b, sp)
	mustCreate(t, b, spec(t, "keep", 1))
	b0 := mustAppend(t, b, "ret", 0, MakeBatch(BatchOptions{NumRecords: 3, Seed: 1}))
	mustAppend(t, b, "ret", 0, MakeBatch(BatchOptions{NumRecords: 2, Seed: 2}))
	keep := mustAppend(t, b, "keep", 0, MakeBatch(BatchOptions{NumRecords: 2, Seed: 3}))
	clock.Set(t0.Add(30 * time.Minute))
	b2 := mustAppend(t, b, "ret", 0, MakeBatch(BatchOptions{NumRecords: 4, Seed: 4}))
	b3 := mustAppend(t, b, "ret", 0, MakeBatch(BatchOptions{NumRecords: 1, Seed: 5}))

	clock.Set(t0.Add(time.Hour)) // not older than an hour yet
	enforce()
	wantRange(t, b, "ret", 0, 0, 10)

	clock.Set(t0.Add(time.Hour + time.Millisecond))
	enforce()
	wantRange(t, b, "ret", 0, 5, 10)
	wantRange(t, b, "ret", 1, 0, 0)
	res, err := b.Read(ctx, "ret", 0, b0.base, 1<<20)
	wantErr(t, "read expired", err, disbackend.ErrOffsetOutOfRange)
	if res.Range != (disbackend.PartitionRange{First: 5, Next: 10}) {
		t.Fatalf("expired read: range %+v, want [5 : 10]", res.Range)
	}
	res, err = b.Read(ctx, "ret", 0, 5, 1<<20)
	if err != nil {
		t.Fatalf("read after retention: %v", err)
	}
	wantBatches(t, b, "after retention", res.Batches, b2.raw, b3.raw)
	got, err := b.BatchAtTimestamp(ctx, "ret", 0, -1)
	if err != nil || batch.BaseOffset(got) != 5 {
		t.Fatalf("BatchAtTimestamp after retention: batch at %d, %v; want the first retained (5)", baseOrMinus1(got), err)
	}
	b = hreopen(t, h, b)
	wantRange(t, b, "ret", 0, 5, 10)

	// Everything expires: first catches up with next, which stays, also
	// across a restart, and appends continue from it.
	clock.Set(t0.Add(1000 * time.Hour))
	enforce()
	wantRange(t, b, "ret", 0, 10, 10)
	res, err = b.Read(ctx, "ret", 0, 10, 1<<20)
	if err != nil || len(res.Batches) != 0 {
		t.Fatalf("read at next of an expired partition = %d batches, %v; want none", len(res.Batches), err)
	}
	_, err = b.Read(ctx, "ret", 0, 9, 1<<20)
	wantErr(t, "read below first", err, disbackend.ErrOffsetOutOfRange)
	b = hreopen(t, h, b)
	wantRange(t, b, "ret", 0, 10, 10)
	if s := mustAppend(t, b, "ret", 0, MakeBatch(BatchOptions{NumRecords: 2, Seed: 6})); s.base != 10 {
		t.Fatalf("append after full expiry: offset %d, want 10", s.base)
	}
	// Unlimited retention never expires.
	wantRange(t, b, "keep", 0, 0, 2)
	res, err = b.Read(ctx, "keep", 0, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	wantBatches(t, b, "unlimited", res.Batches, keep.raw)
}

// crashPoint is one crash image: the appends and reads known before it.
type crashPoint struct {
	open        func(t *testing.T) disbackend.Backend
	keep        int
	acks, reads int
	idemAcks    int
	commits     int
	label       string
}

// crashApp is the app whose checkpoints the crash test commits.
const crashApp = "crash-app"

type seen struct {
	part int32
	base int64
	raw  []byte
}

// testCrash runs appenders (plain and idempotent) and a reader, captures
// crash images at arbitrary moments, and checks each image after reopening:
// every append acknowledged before the image was taken is there byte for
// byte at its offset, every batch read before it is unchanged, the
// partitions are contiguous, the idempotent producer's last acknowledged
// batch is still recognized as a duplicate, and every checkpoint whose
// commit returned is there (or a later one of its partition).
func testCrash(t *testing.T, h Harness) {
	const parts = 4
	b := hopen(t, h, nil)
	mustCreate(t, b, spec(t, "crash", parts))
	pid := initProducer(t, b)
	if _, err := b.CreateApp(ctxT(t), disbackend.App{Name: crashApp, GroupID: crashApp}); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var commits []seen // part and base (the committed offset, increasing) of each acknowledged commit
	var acks, reads []seen
	var idemAcks []disbackend.Batch // by sequence order, a copy of each acknowledged idempotent batch
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			type inflight struct {
				p    *disbackend.Pending
				part int32
				raw  []byte
			}
			var q []inflight
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				part := int32(rng.IntN(parts))
				bt := MakeBatch(BatchOptions{NumRecords: int32(1 + rng.IntN(20)), RecordBytes: 1 + rng.IntN(600), Seed: uint64(w)<<32 | uint64(i)})
				want := append([]byte(nil), bt.Raw...) // before Append: the backend owns Raw after
				q = append(q, inflight{p: b.Append("crash", part, bt), part: part, raw: want})
				for len(q) > 8 || (len(q) > 0 && rng.IntN(4) == 0) {
					f := q[0]
					q = q[1:]
					res, err := f.p.Wait(ctxT(t))
					if err != nil {
						t.Errorf("append: %v", err)
						return
					}
					batch.SetBaseOffset(f.raw, res.BaseOffset)
					mu.Lock()
					acks = append(acks, seen{part: f.part, base: res.BaseOffset, raw: f.raw})
					mu.Unlock()
				}
			}
		}()
	}
	// The idempotent appender keeps at most 4 batches in flight, so its last
	// acknowledged batch is always among the last 5 any image holds.
	wg.Add(1)
	go func() {
		defer wg.Done()
		var q []*disbackend.Pending
		var qb []disbackend.Batch
		seq := int32(0)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			bt := idem(pid, 0, seq, 3, uint64(1<<40+i))
			seq += 3
			keep := bt
			keep.Raw = append([]byte(nil), bt.Raw...)
			q, qb = append(q, b.Append("crash", 0, bt)), append(qb, keep)
			for len(q) >= 4 {
				res, err := q[0].Wait(ctxT(t))
				if err != nil {
					t.Errorf("idempotent append: %v", err)
					return
				}
				kept := qb[0]
				q, qb = q[1:], qb[1:]
				raw := append([]byte(nil), kept.Raw...)
				batch.SetBaseOffset(raw, res.BaseOffset)
				mu.Lock()
				acks = append(acks, seen{part: 0, base: res.BaseOffset, raw: raw})
				idemAcks = append(idemAcks, kept)
				mu.Unlock()
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		var next [parts]int64
		for {
			select {
			case <-stop:
				return
			default:
			}
			for p := int32(0); p < parts; p++ {
				res, err := b.Read(ctxT(t), "crash", p, next[p], 32<<10)
				if err != nil {
					t.Errorf("read: %v", err)
					return
				}
				if len(res.Batches) == 0 {
					continue
				}
				mu.Lock()
				for _, raw := range res.Batches {
					reads = append(reads, seen{part: p, base: batch.BaseOffset(raw), raw: raw})
				}
				mu.Unlock()
				next[p] = lastOffset(res.Batches[len(res.Batches)-1]) + 1
			}
		}
	}()

	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := int64(1); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			part := int32(i % parts)
			c := disbackend.Checkpoint{Stream: "crash", Partition: part, SequenceNumber: i, Metadata: fmt.Sprint(i)}
			if err := b.CommitCheckpoints(ctxT(t), crashApp, []disbackend.Checkpoint{c}); err != nil {
				t.Errorf("commit checkpoint: %v", err)
				return
			}
			mu.Lock()
			commits = append(commits, seen{part: part, base: i})
			mu.Unlock()
		}
	}()

	var points []crashPoint
	rng := rand.New(rand.NewPCG(42, 42))
	for i, keep := range []int{0, 25, 50, 100, 0, 25, 50, 100, 50, 100} {
		time.Sleep(time.Duration(2+rng.IntN(25)) * time.Millisecond)
		mu.Lock()
		pt := crashPoint{keep: keep, acks: len(acks), reads: len(reads), idemAcks: len(idemAcks), commits: len(commits),
			label: fmt.Sprintf("image %d (keep %d%% unsynced)", i, keep)}
		mu.Unlock()
		pt.open = h.Crash(t, b, keep, uint64(1000+i))
		points = append(points, pt)
	}
	close(stop)
	wg.Wait()
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if t.Failed() {
		return
	}
	for _, pt := range points {
		t.Run(pt.label, func(t *testing.T) {
			checkCrashImage(t, pt, acks[:pt.acks], reads[:pt.reads], idemAcks[:pt.idemAcks], commits[:pt.commits])
		})
	}
	t.Logf("%d acknowledged appends, %d batches read, %d checkpoints committed during the run", len(acks), len(reads), len(commits))
}

func checkCrashImage(t *testing.T, pt crashPoint, acks, reads []seen, idemAcks []disbackend.Batch, commits []seen) {
	c := pt.open(t)
	defer func() { _ = c.Close() }()
	st, err := c.DescribeStream(ctxT(t), "crash")
	if err != nil {
		t.Fatalf("DescribeStream after crash: %v", err)
	}
	have := map[int32]map[int64][]byte{}
	for p := int32(0); p < st.PartitionCount; p++ {
		r := mustRange(t, c, "crash", p)
		if r.First != 0 {
			t.Fatalf("partition %d: first %d after crash, want 0", p, r.First)
		}
		all := readAll(t, c, "crash", p, 0, 1<<20)
		checkContiguous(t, all, 0)
		have[p] = map[int64][]byte{}
		for _, raw := range all {
			have[p][batch.BaseOffset(raw)] = raw
		}
	}
	check := func(what string, list []seen) {
		for _, s := range list {
			got, ok := have[s.part][s.base]
			if !ok {
				t.Fatalf("%s batch at partition %d offset %d lost in the crash", what, s.part, s.base)
			}
			if string(got) != string(s.raw) {
				t.Fatalf("%s batch at partition %d offset %d changed in the crash", what, s.part, s.base)
			}
		}
	}
	check("acknowledged", acks)
	check("read", reads)
	if n := len(idemAcks); n > 0 {
		// The idempotent producer's newest batch in the image (acknowledged
		// or not: a crash may keep unsynced data) must be recognized when
		// retried, at its offset: the producer state was rebuilt exactly.
		// (The newest batch acknowledged before the image was taken is not
		// the one to retry: more may have been acknowledged, and kept,
		// while the image was being taken, pushing it out of the last five.)
		pid := idemAcks[0].ProducerID
		var newest []byte
		for _, raw := range have[0] {
			if h, err := batch.ParseHeader(raw); err == nil && h.ProducerID == pid &&
				(newest == nil || batch.BaseOffset(raw) > batch.BaseOffset(newest)) {
				newest = raw
			}
		}
		if newest == nil {
			t.Fatalf("no batch of idempotent producer %d in the image, though %d were acknowledged before it", pid, n)
		}
		h, err := batch.ParseHeader(newest)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := batch.DecodeRecords(newest)
		if err != nil {
			t.Fatal(err)
		}
		retry := disbackend.Batch{Raw: append([]byte(nil), newest...), Header: h, Records: recs}
		wantDuplicate(t, c, "crash", 0, retry, batch.BaseOffset(newest))
	}
	committed := map[int32]int64{}
	for _, c := range commits {
		committed[c.part] = max(committed[c.part], c.base)
	}
	got := map[int32]int64{}
	for _, c := range mustCheckpoints(t, c, crashApp, "crash") {
		got[c.Partition] = c.SequenceNumber
		if c.Metadata != fmt.Sprint(c.SequenceNumber) {
			t.Fatalf("checkpoint of partition %d at %d has metadata %q", c.Partition, c.SequenceNumber, c.Metadata)
		}
	}
	for part, want := range committed {
		if got[part] < want {
			t.Fatalf("partition %d: checkpoint %d after the crash, but %d was committed before it", part, got[part], want)
		}
	}
	// The image takes appends at its next.
	r := mustRange(t, c, "crash", 1)
	if s := mustAppend(t, c, "crash", 1, MakeBatch(BatchOptions{Seed: 777})); s.base != r.Next {
		t.Fatalf("append after crash: offset %d, want %d", s.base, r.Next)
	}
}
