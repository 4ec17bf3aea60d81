package disrest

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/disgw/disgw/disbackend/disapi"
)

// TestPacerDelay: the buckets start empty and refill at 90% of the COMMON
// limits up to one second of DIS's limits; a request waits for its bytes
// or its records, whichever is later; a record larger than the buckets
// waits for full ones; a cancelled context ends a wait.
func TestPacerDelay(t *testing.T) {
	t.Parallel()
	rb, rr := paceRates(false)
	if a, c := paceRates(true); a != 5*rb || c != 2*rr {
		t.Fatalf("ADVANCED rates %v, %v", a, c)
	}
	var p pacer
	t0 := time.Unix(1000, 0)
	near := func(got, want time.Duration) bool {
		return got >= want-time.Millisecond && got <= want+time.Millisecond
	}
	if d := p.delay(t0, false, 9, 9000); !near(d, 10*time.Millisecond) {
		t.Fatalf("first request of 9 records, 9000 bytes: delay %v, want 10ms (empty at the start)", d)
	}
	t1 := t0.Add(10 * time.Second) // long idle: full, one second of DIS's limits
	if d := p.delay(t1, false, disapi.CommonWriteRecordsPerSec, disapi.CommonWriteBytesPerSec); d != 0 {
		t.Fatalf("a full second's worth after an idle time: delay %v", d)
	}
	p.charge(t1, false, disapi.CommonWriteRecordsPerSec, disapi.CommonWriteBytesPerSec)
	// Empty: 225 records wait a quarter second; half a second's bytes at
	// the pacing rate wait half a second.
	if d := p.delay(t1, false, int(rr/4), 1); !near(d, 250*time.Millisecond) {
		t.Fatalf("a quarter second's records: delay %v, want 250ms", d)
	}
	if d := p.delay(t1, false, 1, int(rb/2)); !near(d, 500*time.Millisecond) {
		t.Fatalf("half a second's bytes: delay %v, want 500ms", d)
	}
	// Larger than the buckets: waits for full ones (1/0.9 s), not forever.
	if d := p.delay(t1, false, 1, 3*disapi.CommonWriteBytesPerSec); !near(d, time.Second*10/9) {
		t.Fatalf("three seconds' worth: delay %v, want %v (full buckets)", d, time.Second*10/9)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var fresh pacer // empty: a second's worth waits
	if _, err := fresh.wait(ctx, false, 1, disapi.CommonWriteBytesPerSec); err == nil {
		t.Fatal("a wait with a cancelled context returned no error")
	}
}

// disBucket is dislocal's (and, as far as documented, DIS's) metering of
// one partition's writes: buckets of one second of the limits, refilled
// continuously; a record that does not fit is refused and takes nothing.
type disBucket struct {
	bytes, recs float64
	last        time.Time
}

func (b *disBucket) take(now time.Time, size int) bool {
	d := now.Sub(b.last).Seconds()
	b.bytes = min(disapi.CommonWriteBytesPerSec, b.bytes+d*disapi.CommonWriteBytesPerSec)
	b.recs = min(disapi.CommonWriteRecordsPerSec, b.recs+d*disapi.CommonWriteRecordsPerSec)
	b.last = now
	if b.bytes < float64(size) || b.recs < 1 {
		return false
	}
	b.bytes -= float64(size)
	b.recs--
	return true
}

// TestPacerNeverRefused simulates a partition written at more than its
// limits through the pacer, one PutRecords at a time, each reaching DIS
// after a random delay (0-300 ms) and answered after another: DIS never
// refuses a record. Charging requests when they are sent, not when they
// are answered, fails this (a slow request followed by a fast one).
func TestPacerNeverRefused(t *testing.T) {
	t.Parallel()
	sizes := []int{100, 1_000, 10_000, 100_000, 500_000, maxRecordBytes}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 5))
		var p pacer
		now := time.Unix(5000, 0)
		dis := disBucket{last: now} // in use until now by a previous writer: empty
		sent, refused := 0, 0
		for range 2000 {
			// A request as sendGroup builds one: at most the buckets'
			// capacity (one second of DIS's limits), at least one record.
			var recs []int
			total := 0
			for n := 1 + rng.IntN(40); len(recs) < n && len(recs) < disapi.CommonWriteRecordsPerSec; {
				s := sizes[rng.IntN(len(sizes))]
				if len(recs) > 0 && total+s > disapi.CommonWriteBytesPerSec {
					break
				}
				recs = append(recs, s)
				total += s
			}
			now = now.Add(p.delay(now, false, len(recs), total))
			arrive := now.Add(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))
			for i, s := range recs {
				if !dis.take(arrive.Add(time.Duration(i)*10*time.Microsecond), s) {
					refused++
				}
			}
			sent += len(recs)
			answered := arrive.Add(time.Duration(rng.Int64N(int64(50 * time.Millisecond))))
			p.charge(answered, false, len(recs), total)
			now = answered
			if rng.IntN(20) == 0 {
				now = now.Add(time.Duration(rng.Int64N(int64(2 * time.Second)))) // idle
			}
		}
		if refused > 0 {
			t.Fatalf("seed %d: DIS refused %d of %d records", seed, refused, sent)
		}
	}
}
