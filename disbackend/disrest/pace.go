package disrest

import (
	"context"
	"time"

	"github.com/disgw/disgw/disbackend/disapi"
)

// paceFraction of DIS's write limits per partition (disapi's
// Common/AdvancedWrite...PerSec) is the rate a partition is paced at.
const paceFraction = 0.9

// pacer keeps one partition's PutRecords under its stream type's limits on
// our side (docs/dis-backend.md), so that DIS does not refuse records with
// DIS.4303. A refusal in the middle of a PutRecords lets DIS accept a later
// record of the same call before the refused one is sent again: the
// partition's records would be out of order and a Kafka batch's offsets
// not contiguous.
//
// The pacer is a model of DIS's two token buckets (bytes of data, records)
// that never holds more than DIS's do, as long as the gateway is the
// partition's only writer:
//   - it refills at paceFraction of DIS's rates, and holds at most one
//     second of DIS's limits (DIS's capacity, so that a 1 MB record can
//     pass);
//   - it starts empty (DIS's buckets may be in use by a previous process);
//   - a PutRecords is charged when its answer (or failure) comes back, not
//     when it is sent: DIS charges it at some moment in between, and a
//     token bucket charged later never holds more afterwards. Charging at
//     the send instead lets a request that took long to reach DIS be
//     followed by one that did not, arriving when DIS's bucket is lower
//     than ours (seen with dislocal --fault-jitter).
//
// With at most one PutRecords in flight per partition, a request sent when
// the model holds its bytes and records finds at least that in DIS's
// buckets. Used only by the partition's writer goroutine. DIS.4303 is still
// retried when it happens anyway (another writer of the partition, DIS's
// own metering).
type pacer struct {
	bytes, recs float64
	last        time.Time
	// pressed is when this partition last had to wait for its limits (a
	// pacing wait, or a DIS.4303); see underPressure.
	pressed time.Time
}

// pressureWindow is how long after a wait for its limits a partition is
// treated as being at its limits; pressureWait is the shortest pacing wait
// that counts (the first requests after a start wait a little, as the
// pacer starts empty, without the partition being at its limits).
const (
	pressureWindow = 2 * time.Second
	pressureWait   = 20 * time.Millisecond
)

// underPressure reports whether the partition is at its write limits: it
// waited for them (at least pressureWait, or a DIS.4303) within
// pressureWindow. A second line of defence, for
// when DIS's metering differs from the pacer's model: calls are then cut
// where a record is smaller than the one before it (groupPlan.chunk), so
// that within a call a refusal for want of bytes is not followed by the
// acceptance of a smaller record.
func (p *pacer) underPressure(now time.Time) bool {
	return !p.pressed.IsZero() && now.Sub(p.pressed) < pressureWindow
}

// paceRates are the rates a partition is paced at, per second.
func paceRates(advanced bool) (bytesPerSec, recsPerSec float64) {
	if advanced {
		return disapi.AdvancedWriteBytesPerSec * paceFraction, disapi.AdvancedWriteRecordsPerSec * paceFraction
	}
	return disapi.CommonWriteBytesPerSec * paceFraction, disapi.CommonWriteRecordsPerSec * paceFraction
}

// paceCapacity is what the pacer's buckets hold at most: one second of
// DIS's limits.
func paceCapacity(advanced bool) (bytes, recs float64) {
	if advanced {
		return disapi.AdvancedWriteBytesPerSec, disapi.AdvancedWriteRecordsPerSec
	}
	return disapi.CommonWriteBytesPerSec, disapi.CommonWriteRecordsPerSec
}

func (p *pacer) refill(now time.Time, advanced bool) {
	if p.last.IsZero() {
		p.last = now // empty at the start
		return
	}
	rb, rr := paceRates(advanced)
	cb, cr := paceCapacity(advanced)
	if d := now.Sub(p.last).Seconds(); d > 0 {
		p.bytes = min(cb, p.bytes+d*rb)
		p.recs = min(cr, p.recs+d*rr)
		p.last = now
	}
}

// delay is how long from now a PutRecords of n records and size bytes of
// data must wait before it is sent (0: send it now). A request larger than
// the buckets waits for full buckets.
func (p *pacer) delay(now time.Time, advanced bool, n, size int) time.Duration {
	p.refill(now, advanced)
	rb, rr := paceRates(advanced)
	cb, cr := paceCapacity(advanced)
	var d time.Duration
	if need := min(float64(size), cb); p.bytes < need {
		d = max(d, time.Duration((need-p.bytes)/rb*float64(time.Second))+1)
	}
	if need := min(float64(n), cr); p.recs < need {
		d = max(d, time.Duration((need-p.recs)/rr*float64(time.Second))+1)
	}
	return d
}

// wait blocks until a PutRecords of n records and size bytes of data may be
// sent. It returns how long it waited. The request is charged with charge
// once its answer comes back.
func (p *pacer) wait(ctx context.Context, advanced bool, n, size int) (time.Duration, error) {
	var waited time.Duration
	for {
		d := p.delay(time.Now(), advanced, n, size)
		if d <= 0 {
			return waited, nil
		}
		if d >= pressureWait {
			p.pressed = time.Now()
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return waited, ctx.Err()
		case <-t.C:
		}
		waited += d
	}
}

// charge takes a PutRecords of n records and size bytes of data from the
// buckets at now, when its answer (or its failure) came back, whatever DIS
// answered: refused records may have been charged by DIS too, and a request
// without an answer may have been applied. A request larger than the
// buckets leaves them in debt.
func (p *pacer) charge(now time.Time, advanced bool, n, size int) {
	p.refill(now, advanced)
	p.bytes -= float64(size)
	p.recs -= float64(n)
}
