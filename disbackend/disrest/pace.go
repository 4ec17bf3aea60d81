package disrest

import (
	"context"
	"time"
)

// DIS's write limits per partition, by stream type (dis-api.md 6.1).
const (
	commonWriteBytes     = 1 << 20
	commonWriteRecords   = 1000
	advancedWriteBytes   = 5 << 20
	advancedWriteRecords = 2000
	// paceFraction of the limits is what a partition is paced at, leaving
	// room for the difference between our clock and DIS's arrival times.
	paceFraction = 0.9
)

// pacer keeps one partition's PutRecords under its stream type's limits on
// our side (DESIGN section 4), so that DIS does not refuse records with
// DIS.4303. A refusal in the middle of a PutRecords lets DIS accept a later,
// smaller record before the refused one is sent again: the partition's
// records would be out of order and a Kafka batch's offsets not contiguous.
// Two token buckets (bytes of data, records) each hold one second's worth;
// a request waits until both hold what it needs (a request larger than a
// second's worth waits for full buckets) and may leave them in debt. Used
// only by the partition's writer goroutine. DIS.4303 is still retried when
// it happens anyway (another writer of the partition, DIS's own metering).
type pacer struct {
	bytes, recs float64
	last        time.Time
	// pressed is when this partition last had to wait for its limits (a
	// pacing wait, or a DIS.4303); see underPressure.
	pressed time.Time
}

// pressureWindow is how long after a wait for its limits a partition is
// treated as being at its limits.
const pressureWindow = 2 * time.Second

// underPressure reports whether the partition is at its write limits: it
// waited for them within pressureWindow. There DIS may refuse a record of
// a PutRecords and accept a later, smaller one of the same call, which
// would put the partition's records out of order; so calls are then cut
// where a record is smaller than the one before it (see sendGroup): with
// sizes that never decrease within a call, once DIS refuses a record for
// want of bytes or records, it refuses every later one of the call too.
func (p *pacer) underPressure(now time.Time) bool {
	return !p.pressed.IsZero() && now.Sub(p.pressed) < pressureWindow
}

func paceRates(advanced bool) (bytesPerSec, recsPerSec float64) {
	if advanced {
		return advancedWriteBytes * paceFraction, advancedWriteRecords * paceFraction
	}
	return commonWriteBytes * paceFraction, commonWriteRecords * paceFraction
}

func (p *pacer) refill(now time.Time, rb, rr float64) {
	if p.last.IsZero() {
		p.bytes, p.recs, p.last = rb, rr, now
		return
	}
	if d := now.Sub(p.last).Seconds(); d > 0 {
		p.bytes = min(rb, p.bytes+d*rb)
		p.recs = min(rr, p.recs+d*rr)
		p.last = now
	}
}

// wait blocks until a PutRecords of n records and size bytes of data may be
// sent, and takes them from the buckets. It returns how long it waited.
func (p *pacer) wait(ctx context.Context, advanced bool, n, size int) (time.Duration, error) {
	rb, rr := paceRates(advanced)
	p.refill(time.Now(), rb, rr)
	var d time.Duration
	if need := min(float64(size), rb); p.bytes < need {
		d = max(d, time.Duration((need-p.bytes)/rb*float64(time.Second)))
	}
	if need := min(float64(n), rr); p.recs < need {
		d = max(d, time.Duration((need-p.recs)/rr*float64(time.Second)))
	}
	if d > 0 {
		p.pressed = time.Now()
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
		p.refill(time.Now(), rb, rr)
	}
	p.bytes -= float64(size)
	p.recs -= float64(n)
	return d, nil
}
