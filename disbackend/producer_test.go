package disbackend

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/disgw/disgw/kafkawire/batch"
)

func idemBatch(epoch int16, seq, n int32) *Batch {
	h := batch.NewHeader(0)
	h.ProducerID, h.ProducerEpoch, h.BaseSequence, h.NumRecords = 1, epoch, seq, n
	return &Batch{Header: h}
}

func TestIncSequence(t *testing.T) {
	for _, tc := range []struct{ seq, inc, want int32 }{
		{0, 1, 1},
		{5, 0, 5},
		{math.MaxInt32 - 1, 1, math.MaxInt32},
		{math.MaxInt32, 1, 0},
		{math.MaxInt32 - 1, 5, 3},
		{math.MaxInt32, math.MaxInt32, math.MaxInt32 - 1},
	} {
		if got := IncSequence(tc.seq, tc.inc); got != tc.want {
			t.Errorf("IncSequence(%d, %d) = %d, want %d", tc.seq, tc.inc, got, tc.want)
		}
	}
}

// TestProducerStates drives the rules through one producer of one
// partition: each step appends (or retries) a batch and says what Check
// must answer.
func TestProducerStates(t *testing.T) {
	type step struct {
		epoch   int16
		seq, n  int32
		want    error // a sentinel, or nil
		dupBase int64 // for a duplicate, the original's base offset; -1 when new
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"new producer starts anywhere", []step{{0, 1000, 2, nil, -1}, {0, 1002, 1, nil, -1}}},
		{"retry of each of the last five", []step{
			{0, 0, 1, nil, -1}, {0, 1, 1, nil, -1}, {0, 2, 1, nil, -1}, {0, 3, 1, nil, -1}, {0, 4, 1, nil, -1},
			{0, 0, 1, nil, 0}, {0, 2, 1, nil, 2}, {0, 4, 1, nil, 4},
		}},
		{"a sixth batch pushes the first out", []step{
			{0, 0, 1, nil, -1}, {0, 1, 1, nil, -1}, {0, 2, 1, nil, -1}, {0, 3, 1, nil, -1}, {0, 4, 1, nil, -1}, {0, 5, 1, nil, -1},
			{0, 0, 1, ErrOutOfOrderSequence, -1}, {0, 1, 1, nil, 1},
		}},
		{"gap, overlap and other length", []step{
			{0, 0, 2, nil, -1}, {0, 5, 1, ErrOutOfOrderSequence, -1}, {0, 1, 2, ErrOutOfOrderSequence, -1},
			{0, 0, 3, ErrOutOfOrderSequence, -1}, {0, 2, 1, nil, -1},
		}},
		{"epochs", []step{
			{0, 0, 2, nil, -1}, {1, 2, 1, ErrOutOfOrderSequence, -1}, {1, 0, 1, nil, -1},
			{0, 2, 1, ErrInvalidProducerEpoch, -1}, {0, 0, 2, ErrInvalidProducerEpoch, -1}, {1, 1, 1, nil, -1},
			{1, 0, 1, nil, 2}, // the new epoch's first batch is remembered, the old epoch's are not
		}},
		{"wrap", []step{
			{0, math.MaxInt32 - 1, 2, nil, -1}, {0, 1, 1, ErrOutOfOrderSequence, -1}, {0, 0, 3, nil, -1},
			{0, math.MaxInt32 - 1, 2, nil, 0}, {0, 3, 1, nil, -1},
		}},
		{"a batch across the top", []step{
			{0, math.MaxInt32 - 1, 5, nil, -1}, {0, math.MaxInt32 - 1, 5, nil, 0}, {0, 4, 1, ErrOutOfOrderSequence, -1}, {0, 3, 1, nil, -1},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s ProducerStates[int]
			next := int64(0)
			for i, st := range tc.steps {
				b := idemBatch(st.epoch, st.seq, st.n)
				dup, err := s.Check(7, b)
				if !errors.Is(err, st.want) || (st.want == nil) != (err == nil) {
					t.Fatalf("step %d (epoch %d seq %d n %d): Check error %v, want %v", i, st.epoch, st.seq, st.n, err, st.want)
				}
				switch {
				case err != nil:
				case st.dupBase >= 0:
					if dup == nil || dup.BaseOffset != st.dupBase {
						t.Fatalf("step %d: Check = %+v, want the duplicate at %d", i, dup, st.dupBase)
					}
				case dup != nil:
					t.Fatalf("step %d: Check = duplicate %+v, want a new batch", i, dup)
				default:
					s.Remember(7, b, next, next+int64(st.n)-1, int64(i), int64(i))
					next += int64(st.n)
				}
			}
		})
	}
}

// TestProducerStatesRebuild: replaying what Check accepted gives the same
// state as the appends did, and an older epoch is ignored.
func TestProducerStatesRebuild(t *testing.T) {
	var live, rebuilt ProducerStates[string]
	type stored struct {
		epoch     int16
		seq, n    int32
		base, end int64
	}
	var log []stored
	next := int64(0)
	for i, b := range []*Batch{idemBatch(0, 0, 3), idemBatch(0, 3, 2), idemBatch(1, 0, 1), idemBatch(1, 1, 4),
		idemBatch(1, 5, 1), idemBatch(1, 6, 1), idemBatch(1, 7, 1), idemBatch(1, 8, 1)} {
		if dup, err := live.Check("p", b); dup != nil || err != nil {
			t.Fatalf("batch %d: %+v, %v", i, dup, err)
		}
		live.Remember("p", b, next, next+int64(b.NumRecords)-1, 100, 100)
		log = append(log, stored{b.ProducerEpoch, b.BaseSequence, b.NumRecords, next, next + int64(b.NumRecords) - 1})
		next += int64(b.NumRecords)
	}
	// A batch of the old epoch among the new epoch's is ignored.
	log = append(log[:len(log)-1:len(log)-1], stored{0, 5, 1, 4, 4}, log[len(log)-1])
	for _, st := range log {
		rebuilt.Rebuild("p", st.epoch, st.seq, st.base, st.end, 100, 100)
	}
	a, b := live.Get("p"), rebuilt.Get("p")
	if a.Epoch != b.Epoch || len(a.Batches) != MaxProducerBatches || len(b.Batches) != len(a.Batches) {
		t.Fatalf("live %+v, rebuilt %+v", a, b)
	}
	for i := range a.Batches {
		if a.Batches[i] != b.Batches[i] {
			t.Fatalf("batch %d: live %+v, rebuilt %+v", i, a.Batches[i], b.Batches[i])
		}
	}
	if dup, _ := rebuilt.Check("p", idemBatch(1, 1, 4)); dup == nil || dup.BaseOffset != 6 {
		t.Fatalf("retry after rebuild = %+v, want the batch at 6", dup)
	}
}

func TestProducerStatesExpireAndDrop(t *testing.T) {
	var s ProducerStates[[2]int]
	for i := 0; i < 4; i++ {
		s.Remember([2]int{i % 2, i}, idemBatch(0, 0, 1), 0, 0, int64(i*10), int64(i*10))
	}
	if n := s.Expire(15); n != 2 || s.Len() != 2 {
		t.Fatalf("Expire(15) = %d, %d left; want 2 dropped, 2 left", n, s.Len())
	}
	s.DropIf(func(k [2]int) bool { return k[0] == 0 })
	if s.Len() != 1 || s.Get([2]int{1, 3}) == nil {
		t.Fatalf("after DropIf: %d states", s.Len())
	}
}

// TestProducerStatesExpireAsKafka: a state idle for the expiry or longer
// goes (Kafka isProducerExpired: currentTimeMs - lastTimestamp >=
// producer.id.expiration.ms), one idle for less stays; after expiry the
// producer's retry, at any sequence and epoch, is a new batch; an expiry
// <= 0 never expires.
func TestProducerStatesExpireAsKafka(t *testing.T) {
	const expiry = 1000 * time.Millisecond
	var s ProducerStates[string]
	s.Remember("idle", idemBatch(3, 40, 2), 0, 1, 0, 5000)
	s.Remember("active", idemBatch(0, 0, 1), 2, 2, 0, 5001)
	if n := s.Expire(ProducerExpiryCutoff(6000, expiry)); n != 1 || s.Get("idle") != nil || s.Get("active") == nil {
		t.Fatalf("at 6000 ms: %d dropped, idle %+v, active %+v; want idle (1000 ms) dropped, active (999 ms) kept",
			n, s.Get("idle"), s.Get("active"))
	}
	if dup, err := s.Check("active", idemBatch(0, 0, 1)); err != nil || dup == nil || dup.BaseOffset != 2 {
		t.Fatalf("retry of the active producer: %+v, %v; want the batch at 2", dup, err)
	}
	for _, b := range []*Batch{idemBatch(3, 40, 2), idemBatch(3, 7, 1), idemBatch(1, 9, 1)} {
		if dup, err := s.Check("idle", b); dup != nil || err != nil {
			t.Fatalf("expired producer's batch epoch %d sequence %d: %+v, %v; want a new batch", b.ProducerEpoch, b.BaseSequence, dup, err)
		}
	}
	if ProducerExpiryCutoff(6000, 0) != math.MinInt64 || ProducerExpiryCutoff(6000, -1) != math.MinInt64 {
		t.Fatal("an expiry <= 0 has a cutoff")
	}
	if n := s.Expire(ProducerExpiryCutoff(math.MaxInt64, -1)); n != 0 {
		t.Fatalf("never expiring dropped %d", n)
	}
}

// TestProducerStatesRebuildKeepsLatestAppend: a batch replayed with an
// earlier append time than the state's does not make the state look
// idler than it is.
func TestProducerStatesRebuildKeepsLatestAppend(t *testing.T) {
	var s ProducerStates[string]
	s.Rebuild("p", 0, 0, 0, 1, 0, 9000)
	s.Rebuild("p", 0, 2, 2, 2, 0, 8000)
	if ps := s.Get("p"); ps.LastAppendMS != 9000 || len(ps.Batches) != 2 {
		t.Fatalf("state %+v; want last append 9000 and 2 batches", ps)
	}
	s.Rebuild("p", 1, 0, 3, 3, 0, 7000) // a newer epoch starts over
	if ps := s.Get("p"); ps.LastAppendMS != 7000 || len(ps.Batches) != 1 {
		t.Fatalf("state %+v; want last append 7000 and 1 batch", ps)
	}
}

// TestProducerStatesShrink: after most states expire, the map is copied
// into one of the live states' size (a Go map keeps its peak's room).
func TestProducerStatesShrink(t *testing.T) {
	var s ProducerStates[int]
	for i := range 10_000 {
		s.Remember(i, idemBatch(0, 0, 1), int64(i), int64(i), 0, int64(i))
	}
	if s.peak != 10_000 {
		t.Fatalf("peak %d", s.peak)
	}
	before := s.m
	if n := s.Expire(7_000); n != 7_001 || s.Len() != 2_999 || s.peak != 10_000 {
		t.Fatalf("expired %d, %d left, peak %d; want 7001, 2999 and the map kept", n, s.Len(), s.peak)
	}
	if n := s.Expire(9_000); n != 2_000 || s.Len() != 999 || s.peak != 999 {
		t.Fatalf("expired %d, %d left, peak %d; want 2000, 999 and a new map", n, s.Len(), s.peak)
	}
	s.m[-1] = nil
	if _, ok := before[-1]; ok {
		t.Fatal("the map was not copied")
	}
	delete(s.m, -1)
	if ps := s.Get(9_500); ps == nil || ps.LastAppendMS != 9_500 {
		t.Fatalf("a live state after the copy: %+v", ps)
	}
}

// TestProducerStatesExpireOrder: over random appends (times mostly
// rising, sometimes back), rebuilds, expiries and drops, Expire drops
// exactly the states a scan of every state would, and the list by last
// append holds every state once, in order.
func TestProducerStatesExpireOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var s ProducerStates[int]
	now := int64(1000)
	for step := range 20_000 {
		k := rng.IntN(300)
		switch r := rng.IntN(100); {
		case r < 60:
			now += int64(rng.IntN(10)) - 2 // a clock that sometimes goes back
			s.Remember(k, idemBatch(int16(rng.IntN(2)), 0, 1), 0, 0, 0, now)
		case r < 85:
			s.Rebuild(k, int16(rng.IntN(3)), 0, 0, 0, 0, now-int64(rng.IntN(50)))
		case r < 98:
			cutoff := now - int64(rng.IntN(200))
			want := 0
			s.Each(func(_ int, ps *ProducerState) {
				if ps.LastAppendMS <= cutoff {
					want++
				}
			})
			if got := s.Expire(cutoff); got != want {
				t.Fatalf("step %d: Expire(%d) dropped %d, a scan finds %d", step, cutoff, got, want)
			}
			s.Each(func(k int, ps *ProducerState) {
				if ps.LastAppendMS <= cutoff {
					t.Fatalf("step %d: state %d at %d left after Expire(%d)", step, k, ps.LastAppendMS, cutoff)
				}
			})
		default:
			m := rng.IntN(7) + 2
			s.DropIf(func(k int) bool { return k%m == 0 })
		}
		n, last := 0, int64(math.MinInt64)
		for e := s.oldest; e != nil; e = e.next {
			if e.LastAppendMS < last || s.m[e.key] != e || (e.next == nil) != (e == s.newest) || e.next != nil && e.next.prev != e {
				t.Fatalf("step %d: list out of order or not the map's at state %d", step, e.key)
			}
			last = e.LastAppendMS
			n++
		}
		if n != s.Len() {
			t.Fatalf("step %d: %d states in the list, %d in the map", step, n, s.Len())
		}
	}
}

// TestProducerStatesRestore: a state saved before a batch is remembered,
// restored, answers as before the batch (it is no duplicate, the next
// sequence is the saved one's); restoring "none" drops a new state.
func TestProducerStatesRestore(t *testing.T) {
	var s ProducerStates[int]
	s.Remember(1, idemBatch(0, 0, 2), 0, 1, 10, 100)
	saved := *s.Get(1)
	saved.Batches = append([]ProducerBatch(nil), saved.Batches...)
	s.Remember(1, idemBatch(0, 2, 3), 2, 4, 20, 200)
	s.Remember(2, idemBatch(0, 0, 1), 5, 5, 30, 300)
	s.Restore(1, &saved)
	s.Restore(2, nil)
	if s.Len() != 1 || s.Get(2) != nil {
		t.Fatalf("states %d, state 2 %v: want only 1", s.Len(), s.Get(2))
	}
	if dup, err := s.Check(1, idemBatch(0, 2, 3)); dup != nil || err != nil {
		t.Fatalf("the undone batch: dup %v err %v, want a new batch", dup, err)
	}
	if dup, err := s.Check(1, idemBatch(0, 0, 2)); dup == nil || err != nil || dup.BaseOffset != 0 {
		t.Fatalf("the kept batch: dup %v err %v, want the duplicate at 0", dup, err)
	}
	if ps := s.Get(1); ps.LastAppendMS != 100 || len(ps.Batches) != 1 {
		t.Fatalf("restored state %+v", ps)
	}
	if n := s.Expire(100); n != 1 || s.Len() != 0 {
		t.Fatalf("expire after restore dropped %d, %d left: the list is broken", n, s.Len())
	}
}
