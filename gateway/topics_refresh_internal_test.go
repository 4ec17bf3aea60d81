package gateway

import (
	"testing"
	"time"
)

// TestNextRefreshWait: the interval after a success; after failures
// (DIS.4305 among them) doubling from twice the interval, capped at
// maxRefreshBackoff, or at the interval when that is longer; no overflow.
func TestNextRefreshWait(t *testing.T) {
	for _, c := range []struct {
		interval time.Duration
		failures int
		want     time.Duration
	}{
		{5 * time.Second, 0, 5 * time.Second},
		{5 * time.Second, 1, 10 * time.Second},
		{5 * time.Second, 2, 20 * time.Second},
		{5 * time.Second, 4, 80 * time.Second},
		{5 * time.Second, 5, maxRefreshBackoff},
		{5 * time.Second, 1000, maxRefreshBackoff},
		{time.Millisecond, 3, 8 * time.Millisecond},
		{10 * time.Minute, 0, 10 * time.Minute},
		{10 * time.Minute, 3, 10 * time.Minute},
		{time.Duration(1) << 62, 2, time.Duration(1) << 62},
	} {
		if got := nextRefreshWait(c.interval, c.failures); got != c.want {
			t.Errorf("nextRefreshWait(%v, %d) = %v, want %v", c.interval, c.failures, got, c.want)
		}
	}
}
