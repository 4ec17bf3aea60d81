package localstore

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
)

// producerStates is how many producer states s holds in memory.
func producerStates(s *Store) int {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.producers.Len()
}

// TestProducerExpiry, on an injected clock: a producer idle for
// ProducerStateExpiry is forgotten (its state leaves memory at the next
// group the writer assembles, with the retention loop off), and its retry
// is written again at a new offset, as Kafka accepts any sequence from a
// producer it has no state for; a producer that appended within the
// expiry keeps its dedupe; a restart does not load the states of producers
// idle for the expiry, and a retention pass drops idle states with no
// append coming.
func TestProducerExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const expiry = time.Hour
	clock := backendtest.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := Options{FS: vfs.NewMem(), Now: clock.Now, ProducerStateExpiry: expiry, CacheBytesPerPartition: -1}
	s := openT(t, "db", opts)
	defer func() { _ = s.Close() }()
	if _, err := s.CreateStream(ctx, disbackend.StreamSpec{Name: "ex", TopicName: "ex", PartitionCount: 1,
		Config: disbackend.StreamConfig{Retention: disbackend.UnlimitedRetention}}); err != nil {
		t.Fatal(err)
	}
	batch := func(pid int64, seq int32) disbackend.Batch {
		return backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 2, Idempotent: true, ProducerID: pid,
			BaseSequence: seq, Seed: uint64(pid)<<8 | uint64(seq)})
	}
	appendTo := func(s *Store, b disbackend.Batch, base int64, dup bool) {
		t.Helper()
		res, err := s.Append("ex", 0, b).Wait(ctx)
		if err != nil {
			t.Fatalf("producer %d sequence %d: %v", b.ProducerID, b.BaseSequence, err)
		}
		if res.BaseOffset != base || res.Duplicate != dup {
			t.Fatalf("producer %d sequence %d: offset %d, duplicate %v; want %d, %v",
				b.ProducerID, b.BaseSequence, res.BaseOffset, res.Duplicate, base, dup)
		}
	}
	wantStates := func(s *Store, what string, n int) {
		t.Helper()
		if got := producerStates(s); got != n {
			t.Fatalf("%s: %d producer states in memory, want %d", what, got, n)
		}
	}

	appendTo(s, batch(1, 0), 0, false) // idle from here on
	appendTo(s, batch(2, 0), 2, false)
	clock.Advance(expiry - time.Minute)
	appendTo(s, batch(2, 2), 4, false) // active within the expiry
	wantStates(s, "within the expiry", 2)

	// Producer 1 idle for the expiry (Kafka: now - last >= expiry).
	clock.Advance(time.Minute)
	appendTo(s, batch(2, 2), 4, true) // the active one's retry: still a duplicate
	wantStates(s, "producer 1 idle for the expiry", 1)
	if got, err := s.ActiveProducers(ctx, "ex", 0); err != nil || len(got) != 1 || got[0].ProducerID != 2 {
		t.Fatalf("active producers %+v, %v; want producer 2 only", got, err)
	}
	// Its retry is a new write, at a new offset, and starts a new state.
	appendTo(s, batch(1, 0), 6, false)
	appendTo(s, batch(1, 0), 6, true)
	wantStates(s, "after the expired producer's retry", 2)

	// Producer 3 writes twice, 48 minutes apart; producers 1 and 2 are
	// then 50 and 51 minutes idle, kept.
	clock.Advance(2 * time.Minute)
	appendTo(s, batch(3, 0), 8, false)
	clock.Advance(48 * time.Minute)
	appendTo(s, batch(3, 2), 10, false)
	wantStates(s, "before the restart", 3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart 15 minutes later: producers 1 (65 minutes idle) and 2 (66)
	// are not loaded; producer 3 is, from its batch within the expiry.
	clock.Advance(15 * time.Minute)
	s = openT(t, "db", opts)
	wantStates(s, "restarted", 1)
	if got, err := s.ActiveProducers(ctx, "ex", 0); err != nil || len(got) != 1 || got[0].ProducerID != 3 || got[0].LastSequence != 3 {
		t.Fatalf("active producers after the restart %+v, %v; want producer 3 at sequence 3", got, err)
	}
	appendTo(s, batch(3, 2), 10, true)  // kept: a duplicate
	appendTo(s, batch(2, 2), 12, false) // forgotten: written again
	appendTo(s, batch(1, 0), 14, false)
	wantStates(s, "after the retries", 3)

	// No append coming: a retention pass drops the idle states.
	clock.Advance(expiry)
	if err := s.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	wantStates(s, "after a retention pass", 0)

	// Never expiring (< 0) keeps and loads every state, however long idle.
	// The states dropped above are gone for good: the snapshot Close
	// writes holds the live states only, as Kafka's.
	appendTo(s, batch(1, 2), 16, false)
	appendTo(s, batch(2, 4), 18, false)
	appendTo(s, batch(3, 4), 20, false)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(100 * expiry)
	never := opts
	never.ProducerStateExpiry = -1
	s = openT(t, "db", never)
	wantStates(s, "restarted without expiry", 3)
	appendTo(s, batch(3, 4), 20, true)
	wantStates(s, "without expiry", 3)
}
