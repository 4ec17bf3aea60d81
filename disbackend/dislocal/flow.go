package dislocal

import (
	"strconv"
	"sync"
	"time"

	"github.com/disgw/disgw/disbackend/disapi"
)

// Flow control: per partition, token buckets at DIS's limits
// (docs/dis-api.md §6.1, §6.2), each holding at most one second of its
// rate. A write takes its bytes and one record from the write buckets, a
// read its bytes from the read bucket; a record that does not fit is refused with DIS.4303 and
// takes nothing, so a smaller record after it may still pass, as on DIS.
// DIS's exact algorithm is UNCONFIRMED; this is the simplest that keeps the
// documented rates.

type bucket struct {
	tokens float64
	rate   float64 // per second, also the capacity
	last   time.Time
}

func newBucket(rate float64, now time.Time) bucket {
	return bucket{tokens: rate, rate: rate, last: now}
}

func (b *bucket) refill(now time.Time) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.rate, b.tokens+d.Seconds()*b.rate)
		b.last = now
	}
}

type partitionBuckets struct {
	writeBytes, writeRecords, readBytes bucket
}

type flowControl struct {
	now func() time.Time
	mu  sync.Mutex
	// parts is keyed by stream_id and partition (flowKey), so a stream
	// created again starts with full buckets.
	parts map[string]*partitionBuckets
}

func newFlowControl(now func() time.Time) *flowControl {
	return &flowControl{now: now, parts: map[string]*partitionBuckets{}}
}

func flowKey(streamID string, p int32) string {
	return streamID + "/" + strconv.Itoa(int(p))
}

func (f *flowControl) get(key string, advanced bool, now time.Time) *partitionBuckets {
	pb := f.parts[key]
	if pb == nil {
		wb, wr, rb := disapi.CommonWriteBytesPerSec, disapi.CommonWriteRecordsPerSec, disapi.CommonReadBytesPerSec
		if advanced {
			wb, wr, rb = disapi.AdvancedWriteBytesPerSec, disapi.AdvancedWriteRecordsPerSec, disapi.AdvancedReadBytesPerSec
		}
		pb = &partitionBuckets{newBucket(float64(wb), now), newBucket(float64(wr), now), newBucket(float64(rb), now)}
		f.parts[key] = pb
	}
	return pb
}

// takeWrite admits one record of n bytes, or refuses it taking nothing.
func (f *flowControl) takeWrite(key string, advanced bool, n int) bool {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	pb := f.get(key, advanced, now)
	pb.writeBytes.refill(now)
	pb.writeRecords.refill(now)
	if pb.writeBytes.tokens < float64(n) || pb.writeRecords.tokens < 1 {
		return false
	}
	pb.writeBytes.tokens -= float64(n)
	pb.writeRecords.tokens--
	return true
}

// takeRead admits reading one record of n bytes, or refuses it taking
// nothing.
func (f *flowControl) takeRead(key string, advanced bool, n int) bool {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	pb := f.get(key, advanced, now)
	pb.readBytes.refill(now)
	if pb.readBytes.tokens < float64(n) {
		return false
	}
	pb.readBytes.tokens -= float64(n)
	return true
}
