package disrest

import (
	"testing"
	"time"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
	"github.com/disgw/disgw/disbackend/dislocal"
)

// TestProducerExpiry, on an injected clock, against dislocal: a producer
// idle for ProducerStateExpiry leaves the in-memory windows at the next
// sweep (and the partitions left without state go too), and its retry is
// written again at a new offset, as Kafka accepts any sequence from a
// producer it has no state for; a producer that wrote within the expiry
// keeps its dedupe. After a restart the window read back from DIS counts
// as written when its checkpoint was committed: it dedupes within the
// expiry from then, expires after it, and a checkpoint committed the
// expiry ago or longer brings no state back.
func TestProducerExpiry(t *testing.T) {
	t.Parallel()
	const expiry = time.Hour
	clock := backendtest.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	_, url := startDIS(t, dislocal.Options{})
	mod := func(o *Options) { o.Linger, o.idemSettle, o.ProducerStateExpiry, o.now = -1, -1, expiry, clock.Now }
	s := newStore(t, url, mod)
	if _, err := s.CreateStream(ctxT(t), disbackend.StreamSpec{Name: "exp", TopicName: "exp", PartitionCount: 2,
		Config: disbackend.StreamConfig{Retention: 24 * time.Hour, MaxMessageBytes: 1 << 20}}); err != nil {
		t.Fatal(err)
	}
	batch := func(pid int64, seq int32) disbackend.Batch {
		return backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 2, Idempotent: true, ProducerID: pid, BaseSequence: seq,
			Seed: uint64(pid)<<8 | uint64(seq)})
	}
	appendTo := func(s *Store, part int32, b disbackend.Batch, base int64, dup bool) {
		t.Helper()
		res, err := s.Append("exp", part, b).Wait(ctxT(t))
		if err != nil {
			t.Fatalf("partition %d producer %d sequence %d: %v", part, b.ProducerID, b.BaseSequence, err)
		}
		if res.BaseOffset != base || res.Duplicate != dup {
			t.Fatalf("partition %d producer %d sequence %d: offset %d, duplicate %v; want %d, %v",
				part, b.ProducerID, b.BaseSequence, res.BaseOffset, res.Duplicate, base, dup)
		}
	}
	wantStates := func(s *Store, what string, states, parts int) {
		t.Helper()
		s.expireProducers()
		s.idem.mu.Lock()
		n := len(s.idem.parts)
		s.idem.mu.Unlock()
		if got := s.idem.count(); got != states || n != parts {
			t.Fatalf("%s: %d producer states in %d partitions, want %d in %d", what, got, n, states, parts)
		}
	}

	appendTo(s, 0, batch(1, 0), 0, false) // producer 1 idle from here on
	appendTo(s, 1, batch(1, 0), 0, false)
	appendTo(s, 0, batch(2, 0), 2, false)
	clock.Advance(expiry - time.Minute)
	appendTo(s, 0, batch(2, 2), 4, false) // producer 2 active within the expiry
	wantStates(s, "within the expiry", 3, 2)

	clock.Advance(time.Minute) // producer 1 idle for the expiry
	if w := s.idem.window(partKey{"exp", 1}); len(w) != 0 {
		t.Fatalf("an expired producer, not swept yet, in the window a checkpoint would get: %+v", w)
	}
	wantStates(s, "producer 1 idle for the expiry", 1, 1)
	if got, err := s.ActiveProducers(ctxT(t), "exp", 0); err != nil || len(got) != 1 || got[0].ProducerID != 2 {
		t.Fatalf("active producers %+v, %v; want producer 2 only", got, err)
	}
	appendTo(s, 0, batch(2, 2), 4, true)  // the active one's retry: a duplicate
	appendTo(s, 0, batch(1, 0), 6, false) // the expired one's: a new write
	appendTo(s, 0, batch(1, 0), 6, true)
	appendTo(s, 1, batch(1, 0), 2, false)
	wantStates(s, "after the expired producer's retries", 3, 2)
	_ = s.Close()

	// A restart 30 minutes later reads partition 0's window back (its
	// checkpoint committed at the expiry): producer 2 dedupes.
	clock.Advance(30 * time.Minute)
	b := newStore(t, url, mod)
	appendTo(b, 0, batch(2, 2), 4, true)
	wantStates(b, "restarted", 2, 1)
	// The expiry after that checkpoint, the states read back expire.
	clock.Advance(30 * time.Minute)
	wantStates(b, "the expiry after the checkpoint", 0, 0)
	appendTo(b, 0, batch(2, 2), 8, false)
	_ = b.Close()

	// A restart the expiry after the last checkpoint: nothing comes back.
	clock.Advance(expiry)
	c := newStore(t, url, mod)
	appendTo(c, 0, batch(2, 2), 10, false)
	wantStates(c, "restarted the expiry after the last checkpoint", 1, 1)
	appendTo(c, 0, batch(2, 2), 10, true)
}
