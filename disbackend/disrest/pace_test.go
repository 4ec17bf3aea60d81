package disrest

import (
	"context"
	"testing"
	"time"
)

// TestPacer: a full second's worth passes at once; then requests wait for
// their bytes or records at 90% of the COMMON limits; a request larger than
// a second's worth waits for full buckets, not forever; a cancelled context
// ends the wait.
func TestPacer(t *testing.T) {
	t.Parallel()
	rb, rr := paceRates(false)
	var p pacer
	ctx := context.Background()
	took := func(n, size int) time.Duration {
		t.Helper()
		start := time.Now()
		if _, err := p.wait(ctx, false, n, size); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	if d := took(int(rr), int(rb)); d > 50*time.Millisecond {
		t.Fatalf("the first second's worth waited %v", d)
	}
	// Both buckets empty: a quarter second's records wait for them (and
	// refill a quarter second's bytes); half a second's bytes then wait for
	// the other quarter.
	if d := took(int(rr/4), 1); d < 150*time.Millisecond || d > 400*time.Millisecond {
		t.Fatalf("a quarter second's worth of records waited %v, want about 250ms", d)
	}
	if d := took(1, int(rb/2)); d < 150*time.Millisecond || d > 400*time.Millisecond {
		t.Fatalf("half a second's worth of bytes waited %v, want about 250ms", d)
	}
	if d := took(1, 2*int(rb)); d < 800*time.Millisecond || d > 1300*time.Millisecond {
		t.Fatalf("two seconds' worth waited %v, want about a second (full buckets)", d)
	}
	// In debt by a second's worth now: the next small request waits.
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := p.wait(cctx, false, 1, 1); err == nil {
		t.Fatal("a wait in debt returned before its context ended")
	}
	if a, c := paceRates(true); a != 5*rb || c != 2*rr {
		t.Fatalf("ADVANCED rates %v, %v", a, c)
	}
}
