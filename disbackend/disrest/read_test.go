package disrest

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dis "github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
	"github.com/disgw/disgw/disbackend/dislocal"
	"github.com/disgw/disgw/kafkawire/batch"
)

// putDirect writes values to a partition with the SDK, as another writer
// of the stream would (not through a Store: no pacing, no range update).
func putDirect(t *testing.T, c *dis.DisClient, stream string, part int32, values [][]byte) {
	t.Helper()
	pid := disbackend.PartitionID(part)
	for len(values) > 0 {
		var entries []model.PutRecordsRequestEntry
		size := 0
		for len(values) > 0 && len(entries) < 500 && size+len(values[0]) <= 900<<10 {
			entries = append(entries, model.PutRecordsRequestEntry{Data: base64.StdEncoding.EncodeToString(values[0]), PartitionId: &pid})
			size += len(values[0])
			values = values[1:]
		}
		resp, err := c.SendRecords(&model.SendRecordsRequest{Body: &model.PutRecordsRequest{StreamName: stream, Records: entries}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.FailedRecordCount != nil && *resp.FailedRecordCount != 0 {
			t.Fatalf("SendRecords: %d failed", *resp.FailedRecordCount)
		}
	}
}

func value(i, size int) []byte {
	v := bytes.Repeat([]byte{'.'}, size)
	copy(v, fmt.Sprintf("record %d ", i))
	return v
}

// readAll reads a partition from 0 to n with Reads of maxBytes, checking
// every record's offset and value; it returns the Reads it took.
func readAll(ctx context.Context, s *Store, stream string, n int64, maxBytes, size int) (int, error) {
	reads := 0
	for off := int64(0); off < n; {
		res, err := s.Read(ctx, stream, 0, off, maxBytes)
		reads++
		if err != nil {
			return reads, err
		}
		for _, raw := range res.Batches {
			recs, err := backendtest.DecodeRecords(raw)
			if err != nil {
				return reads, err
			}
			if len(raw) > maxBytes && len(recs) > 1 {
				return reads, fmt.Errorf("Read(%d, %d): a batch of %d bytes with %d records", off, maxBytes, len(raw), len(recs))
			}
			for _, r := range recs {
				if r.Offset != off || !bytes.Equal(r.Value, value(int(off), size)) {
					return reads, fmt.Errorf("record at %d: offset %d, value %.20q", off, r.Offset, r.Value)
				}
				off++
			}
		}
	}
	return reads, nil
}

func gets(before, after dislocal.Stats) int64 {
	return after.Requests["ConsumeRecords"] - before.Requests["ConsumeRecords"]
}

// TestReadAheadShared: three consumers reading a partition of 1,000
// records (3 MB) together cost as many GetRecords as one consumer alone,
// and one consumer costs one GetRecords per readAheadBytes, not one per
// Read.
func TestReadAheadShared(t *testing.T) {
	t.Parallel()
	// Latency makes concurrent GetRecords overlap.
	srv, url := startDIS(t, dislocal.Options{Faults: dislocal.Faults{Latency: 20 * time.Millisecond}})
	const n, size, maxBytes = 1000, 3000, 64 << 10
	opts := func(o *Options) { o.PollInterval = 100 * time.Millisecond }
	w := newStore(t, url, opts)
	stream := mkStream(t, w, "shared", 1)
	vals := make([][]byte, n)
	for i := range vals {
		vals[i] = value(i, size)
	}
	putDirect(t, w.c, stream, 0, vals)

	before := srv.Stats()
	reads, err := readAll(ctxT(t), newStore(t, url, opts), stream, n, maxBytes, size)
	if err != nil {
		t.Fatal(err)
	}
	after := srv.Stats()
	one := gets(before, after)
	want := int64(n*size/readAheadBytes + 1)
	t.Logf("one consumer: %d Reads, %d GetRecords, %d DescribeStream", reads, one,
		after.Requests["ShowStream"]-before.Requests["ShowStream"])
	if one > want {
		t.Fatalf("one consumer: %d GetRecords for %d Reads of %d bytes; want at most %d (%d bytes read ahead)", one, reads, maxBytes, want, readAheadBytes)
	}

	s := newStore(t, url, opts)
	before = srv.Stats()
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = readAll(ctxT(t), s, stream, n, maxBytes, size)
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	after = srv.Stats()
	three := gets(before, after)
	t.Logf("three consumers: %d GetRecords, %d DescribeStream", three, after.Requests["ShowStream"]-before.Requests["ShowStream"])
	if three > one+1 {
		t.Fatalf("three consumers at the same position: %d GetRecords, one alone: %d", three, one)
	}
}

// TestReadSamePositionOneCall: Reads at the same position while a
// GetRecords is in flight wait for it and share its records.
func TestReadSamePositionOneCall(t *testing.T) {
	t.Parallel()
	srv, url := startDIS(t, dislocal.Options{Faults: dislocal.Faults{Latency: 50 * time.Millisecond}})
	s := newStore(t, url, nil)
	stream := mkStream(t, s, "same-pos", 1)
	putDirect(t, s.c, stream, 0, [][]byte{value(0, 10), value(1, 10), value(2, 10)})
	if _, err := s.Range(stream, 0); err != nil {
		t.Fatal(err)
	}
	before := srv.Stats()
	const readers = 5
	var wg sync.WaitGroup
	start := make(chan struct{})
	got := make([][]byte, readers)
	errs := make([]error, readers)
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := s.Read(ctxT(t), stream, 0, 1, 1<<20)
			if err == nil && len(res.Batches) == 1 {
				got[i] = res.Batches[0]
			}
			errs[i] = err
		}()
	}
	close(start)
	wg.Wait()
	for i := range readers {
		if errs[i] != nil || got[i] == nil || !bytes.Equal(got[i], got[0]) {
			t.Fatalf("reader %d: %v, %d bytes; reader 0: %d bytes", i, errs[i], len(got[i]), len(got[0]))
		}
	}
	after := srv.Stats()
	if g, c := gets(before, after), after.Requests["ShowCursor"]-before.Requests["ShowCursor"]; g != 1 || c != 1 {
		t.Fatalf("%d Reads at one position: %d GetRecords and %d GetCursor; want one of each", readers, g, c)
	}
	if recs, _ := backendtest.DecodeRecords(got[0]); len(recs) != 2 || recs[0].Offset != 1 {
		t.Fatalf("read back %+v", recs)
	}
}

// TestReadSmallMaxBytes: a Read whose maxBytes is smaller than the next
// record still returns that record (KIP-74), and otherwise the batch fits
// maxBytes with as many records as fit.
func TestReadSmallMaxBytes(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	w := newStore(t, url, nil)
	stream := mkStream(t, w, "small-max", 1)
	big := value(0, 300<<10)
	recs := []kmsg.Record{{Value: big}}
	for i := 1; i < 20; i++ {
		recs = append(recs, kmsg.Record{Key: []byte("k"), Value: value(i, 100), TimestampDelta64: int64(i)})
	}
	if _, err := w.Append(stream, 0, kafkaBatch(recs, 1)).Wait(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// What buildBatch makes of the first k records: the size limits.
	all, err := w.Read(ctxT(t), stream, 0, 0, 1<<30)
	if err != nil || len(all.Batches) != 1 {
		t.Fatalf("Read all: %v", err)
	}
	dec, err := batch.DecodeRecords(all.Batches[0])
	if err != nil || len(dec) != len(recs) {
		t.Fatalf("decoded %d records, %v", len(dec), err)
	}
	fs := make([]fetched, len(dec))
	for i, r := range dec {
		fs[i] = fetched{sn: int64(i), rec: r}
	}
	sizeOf := func(from, k int) int { return len(buildBatch(fs[from:from+k], false, math.MaxInt64)) }
	for _, tc := range []struct {
		from int64
		max  int
		want int
	}{
		{0, 1, 1}, {0, 0, 1}, {0, 100, 1}, {0, sizeOf(0, 1) - 1, 1}, {0, sizeOf(0, 2) - 1, 1}, {0, sizeOf(0, 2), 2},
		{0, sizeOf(0, 7), 7}, {1, 1, 1}, {1, sizeOf(1, 3), 3}, {1, sizeOf(1, 3) + 1, 3}, {5, 1 << 20, 15},
	} {
		// A new Store each time: nothing buffered, the GetRecords is the
		// Read's own.
		r := newStore(t, url, nil)
		for _, s := range []*Store{r, r} { // from DIS, then from the buffer
			res, err := s.Read(ctxT(t), stream, 0, tc.from, tc.max)
			if err != nil || len(res.Batches) != 1 {
				t.Fatalf("Read(%d, %d) = %d batches, %v", tc.from, tc.max, len(res.Batches), err)
			}
			got, err := backendtest.DecodeRecords(res.Batches[0])
			if err != nil || len(got) != tc.want || got[0].Offset != tc.from {
				t.Fatalf("Read(%d, %d): %d records from %d, %v; want %d", tc.from, tc.max, len(got), got[0].Offset, err, tc.want)
			}
			if len(got) > 1 && len(res.Batches[0]) > tc.max {
				t.Fatalf("Read(%d, %d): %d bytes", tc.from, tc.max, len(res.Batches[0]))
			}
		}
	}
}

// TestFitting: fitting counts exactly the bytes buildBatch writes.
func TestFitting(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	blob := func(n int) []byte {
		if n < 0 {
			return nil
		}
		return bytes.Repeat([]byte{'x'}, n)
	}
	var fs []fetched
	for i := range 150 {
		r := disbackend.Record{Key: blob(rng.IntN(300) - 50), Value: blob(rng.IntN(3000) - 100 + 20000*(i%50/49)),
			Timestamp: 1_700_000_000_000 + rng.Int64N(1<<40) - 1<<39}
		for range rng.IntN(3) {
			r.Headers = append(r.Headers, disbackend.RecordHeader{Key: string(blob(rng.IntN(200))), Value: blob(rng.IntN(300) - 20)})
		}
		fs = append(fs, fetched{sn: 1<<40 + int64(i)*int64(1+rng.IntN(3)), rec: r})
	}
	for k := 1; k <= len(fs); k++ {
		n := len(buildBatch(fs[:k], false, math.MaxInt64))
		if got := fitting(fs, n); got != k {
			t.Fatalf("fitting(%d bytes) = %d; buildBatch writes %d records in it", n, got, k)
		}
		if got := fitting(fs, n-1); got != max(k-1, 1) {
			t.Fatalf("fitting(%d bytes) = %d; want %d", n-1, got, max(k-1, 1))
		}
	}
}

// TestReadBufferBounds: the read-ahead buffers stay within the per
// partition and the Store's bounds.
func TestReadBufferBounds(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	s := newStore(t, url, nil)
	s.reads.ahead, s.reads.partCap, s.reads.totalCap = 40<<10, 100<<10, 250<<10
	stream := mkStream(t, s, "bounds", 3)
	const n, size = 300, 1000
	vals := make([][]byte, n)
	for i := range vals {
		vals[i] = value(i, size)
	}
	for p := int32(0); p < 3; p++ {
		putDirect(t, s.c, stream, p, vals)
	}
	check := func() {
		t.Helper()
		var sum int64
		s.reads.mu.Lock()
		for k, p := range s.reads.m {
			b := p.buffered()
			if b > s.reads.partCap {
				t.Fatalf("partition %d buffers %d bytes, bound %d", k.part, b, s.reads.partCap)
			}
			sum += b
		}
		s.reads.mu.Unlock()
		if used := s.reads.used.Load(); used != sum || used > s.reads.totalCap {
			t.Fatalf("%d bytes buffered (partitions say %d), bound %d", used, sum, s.reads.totalCap)
		}
	}
	for round := 0; round < 2; round++ {
		for p := int32(0); p < 3; p++ {
			for off := int64(0); off < n; {
				res, err := s.Read(ctxT(t), stream, p, off, 16<<10)
				if err != nil || len(res.Batches) != 1 {
					t.Fatalf("Read(%d/%d) = %v", p, off, err)
				}
				recs, _ := backendtest.DecodeRecords(res.Batches[0])
				off = recs[len(recs)-1].Offset + 1
				check()
			}
		}
	}
	if s.reads.used.Load() == 0 {
		t.Fatal("nothing buffered")
	}
}

// TestLongPollBounded: consumers waiting at the high watermark (long polls
// woken by every append through the gateway, and one fetching without
// waiting) cost one DescribeStream per poll tick for the partition, and
// find a record written directly to DIS at the first tick after it.
func TestLongPollBounded(t *testing.T) {
	t.Parallel()
	const poll = 100 * time.Millisecond
	srv, url := startDIS(t, dislocal.Options{})
	s := newStore(t, url, func(o *Options) { o.PollInterval = poll })
	stream := mkStream(t, s, "longpoll", 1)
	putDirect(t, s.c, stream, 0, [][]byte{value(0, 10), value(1, 10)})

	ctx, cancel := context.WithTimeout(ctxT(t), 2*time.Second)
	defer cancel()
	// wrote is the tick after the direct write (-1 before it).
	var wrote atomic.Int64
	wrote.Store(-1)
	type seen struct {
		tick int64 // tick when the Read that returned the record began
		err  error
	}
	readers := 4
	out := make([]seen, readers)
	before := srv.Stats()
	tick0 := s.ticks.Load()
	var wg sync.WaitGroup
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].tick = -1
			off := int64(2) // the high watermark
			for ctx.Err() == nil {
				changed := s.Changed()
				tick := s.ticks.Load()
				res, err := s.Read(ctx, stream, 0, off, 1<<20)
				if err != nil {
					if ctx.Err() == nil {
						out[i].err = err
					}
					return
				}
				if len(res.Batches) > 0 {
					recs, err := backendtest.DecodeRecords(res.Batches[0])
					if err != nil || recs[0].Offset != 2 || !bytes.Equal(recs[0].Value, value(2, 10)) {
						out[i].err = fmt.Errorf("read back %+v, %v", recs, err)
						return
					}
					off = recs[len(recs)-1].Offset + 1
					if out[i].tick < 0 {
						out[i].tick = tick
					}
				}
				if i == readers-1 { // fetches again at once (max_wait_ms 0)
					time.Sleep(time.Millisecond)
					continue
				}
				select { // the gateway's long poll
				case <-changed:
				case <-ctx.Done():
				}
			}
		}()
	}
	// Appends through the gateway (to other partitions) wake every long
	// poll.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			s.notify()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	time.Sleep(time.Second)
	putDirect(t, s.c, stream, 0, [][]byte{value(2, 10)})
	wrote.Store(s.ticks.Load())
	wg.Wait()
	ticks := s.ticks.Load() - tick0
	after := srv.Stats()
	calls := int64(0)
	for _, op := range []string{"ShowStream", "ConsumeRecords", "ShowCursor"} {
		calls += after.Requests[op] - before.Requests[op]
	}
	t.Logf("%d ticks of %v, %d DIS calls (%d DescribeStream, %d GetRecords, %d GetCursor)", ticks, poll, calls,
		after.Requests["ShowStream"]-before.Requests["ShowStream"], gets(before, after),
		after.Requests["ShowCursor"]-before.Requests["ShowCursor"])
	// One DescribeStream per tick, and one more at the start; the new
	// record costs a GetCursor and a GetRecords.
	if calls > ticks+4 {
		t.Fatalf("%d DIS calls in %d poll ticks", calls, ticks)
	}
	for i, o := range out {
		if o.err != nil {
			t.Fatalf("reader %d: %v", i, o.err)
		}
		if o.tick < 0 || o.tick > wrote.Load()+1 {
			t.Fatalf("reader %d found the record written at tick %d at tick %d", i, wrote.Load(), o.tick)
		}
	}
}

// TestReadOwnAppendAtOnce: a record appended through the Store is read at
// once, without waiting for a poll tick.
func TestReadOwnAppendAtOnce(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	s := newStore(t, url, func(o *Options) { o.PollInterval = time.Hour })
	stream := mkStream(t, s, "own", 1)
	for i := int64(0); i < 3; i++ {
		res, err := s.Read(ctxT(t), stream, 0, i, 1<<20)
		if err != nil || len(res.Batches) != 0 || res.Range.Next != i {
			t.Fatalf("Read at the high watermark %d: %+v, %v", i, res, err)
		}
		changed := s.Changed()
		if _, err := s.Append(stream, 0, kafkaBatch([]kmsg.Record{{Value: value(int(i), 10)}}, 1)).Wait(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changed:
		default:
			t.Fatal("an append did not wake long polls")
		}
		res, err = s.Read(ctxT(t), stream, 0, i, 1<<20)
		if err != nil || len(res.Batches) != 1 || res.Range.Next != i+1 {
			t.Fatalf("Read after an append at %d: %+v, %v", i, res, err)
		}
	}
}

// TestReadEmptyBelowNext: where GetRecords finds nothing though the range
// says there are records (a range ahead of the records: another node
// recreated the stream, or DIS answered the describe first), Reads cost one
// GetRecords per poll tick, and one more when the range grows.
func TestReadEmptyBelowNext(t *testing.T) {
	t.Parallel()
	srv, url := startDIS(t, dislocal.Options{})
	s := newStore(t, url, func(o *Options) { o.PollInterval = time.Hour })
	stream := mkStream(t, s, "empty-below", 1)
	putDirect(t, s.c, stream, 0, [][]byte{value(0, 10), value(1, 10)})
	if res, err := s.Read(ctxT(t), stream, 0, 0, 1<<20); err != nil || len(res.Batches) != 1 {
		t.Fatalf("Read(0) = %+v, %v", res, err)
	}
	s.ranges.put(partKey{stream, 0}, disbackend.PartitionRange{First: 0, Next: 3})
	before := srv.Stats()
	for range 20 {
		if res, err := s.Read(ctxT(t), stream, 0, 2, 1<<20); err != nil || len(res.Batches) != 0 {
			t.Fatalf("Read(2) = %+v, %v", res, err)
		}
	}
	if g := gets(before, srv.Stats()); g != 1 {
		t.Fatalf("20 Reads where there is nothing: %d GetRecords, want 1", g)
	}
	if _, err := s.Append(stream, 0, kafkaBatch([]kmsg.Record{{Value: value(2, 10)}, {Value: value(3, 10)}}, 1)).Wait(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	res, err := s.Read(ctxT(t), stream, 0, 2, 1<<20)
	if err != nil || len(res.Batches) != 1 || res.Range.Next != 4 {
		t.Fatalf("Read(2) after an append = %+v, %v", res, err)
	}
}

// TestReadRecreatedStream: records buffered for a stream are not served
// after it was deleted and created again.
func TestReadRecreatedStream(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	s := newStore(t, url, nil)
	stream := mkStream(t, s, "again", 1)
	putDirect(t, s.c, stream, 0, [][]byte{[]byte("old 0"), []byte("old 1"), []byte("old 2")})
	if res, err := s.Read(ctxT(t), stream, 0, 0, 1); err != nil || len(res.Batches) != 1 {
		t.Fatalf("Read = %+v, %v", res, err)
	}
	if err := s.DeleteStream(ctxT(t), stream); err != nil {
		t.Fatal(err)
	}
	mkStream(t, s, "again", 1)
	putDirect(t, s.c, stream, 0, [][]byte{[]byte("new 0"), []byte("new 1")})
	got := readBack(t, s, stream, 0, 1)
	if len(got) != 1 || string(got[0].Value) != "new 1" {
		t.Fatalf("read back %d records, the first %q; want the new stream's", len(got), got[0].Value)
	}
}
