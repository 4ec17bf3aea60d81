package main

import (
	"context"
	be "encoding/binary"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestServeOnDISFlowControl: dislocal meters every partition at a COMMON
// stream's limits (1 MiB/s and 1000 records/s written); a franz-go producer
// offers three times that to each of two partitions, records of mixed sizes
// (100 B to 500 KB). Acknowledgements slow down to the limit, and afterwards
// every acknowledged record is read back at its acknowledged offset, and the
// records of each partition come back in the order they were produced
// (disrest paces each partition under the limits: without it dislocal, as
// DIS, refuses a large record and accepts a smaller later one). dislocal
// delays each request by a random 0-300 ms (--fault-jitter): a pacer that
// charged a request when it was sent, not when it was answered, let a slow
// request be followed by a fast one that found DIS's bucket short, and this
// test failed most runs.
func TestServeOnDISFlowControl(t *testing.T) {
	if testing.Short() {
		t.Skip("long: produces at DIS's rate limits for several seconds")
	}
	t.Parallel()
	const ak, sk, project = "e2e-access-key", "e2e-secret-key", "e2eproject"
	d := startDISLocal(t, disLocalOpts{account: disAccount{ak, sk, project}, args: []string{"--flow-control", "--fault-jitter", "300ms"}})
	addr := startGateway(t, gatewayOpts{dis: d}).addr

	const (
		topic      = "dis.flow"
		partitions = 2
		limit      = 1 << 20 // COMMON: bytes a second a partition
		offered    = 3 * limit
		produceFor = 2500 * time.Millisecond
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedBytes(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	tr := newTracker(partitions)
	var offerAt [partitions]int
	sizes := []int{100, 1_000, 10_000, 100_000, 500_000}
	rng := rand.New(rand.NewPCG(1, 2))
	begin := time.Now()
	var seq [partitions]uint64
	for tick := time.NewTicker(20 * time.Millisecond); time.Since(begin) < produceFor; <-tick.C {
		for p := range partitions {
			// Offer what three times the limit allows by now.
			for float64(offerAt[p]) < offered*time.Since(begin).Seconds() {
				n := sizes[rng.IntN(len(sizes))]
				v := make([]byte, n)
				tr.produce(ctx, cl, p, seq[p], v)
				seq[p]++
				offerAt[p] += n
			}
		}
	}
	offeredFor := time.Since(begin)
	tr.wait(t)
	for p := range partitions {
		as := tr.acked[p]
		if len(as) == 0 {
			t.Fatalf("partition %d: nothing acknowledged", p)
		}
		bytes := 0
		for _, a := range as {
			bytes += a.size
		}
		last := as[len(as)-1].at.Sub(begin)
		rate := float64(bytes) / last.Seconds()
		t.Logf("partition %d: offered %d bytes in %v, %d records (%d bytes) acknowledged in %v: %.0f bytes/s",
			p, offerAt[p], offeredFor.Round(time.Millisecond), len(as), bytes, last.Round(time.Millisecond), rate)
		// A second's worth in the bucket at the start, then the limit; allow 25%.
		if max := float64(limit) * (last.Seconds() + 1) * 1.25; float64(bytes) > max {
			t.Errorf("partition %d: %d bytes acknowledged in %v, more than the limit allows (%0.f)", p, bytes, last, max)
		}
		if last < offeredFor+time.Second {
			t.Errorf("partition %d: the last acknowledgement came %v after the start, the producer offered until %v: not slowed down", p, last, offeredFor)
		}
	}

	// Read everything back.
	for p := range partitions {
		as := tr.acked[p]
		want := map[int64]uint64{}
		for _, a := range as {
			want[a.offset] = a.seq
		}
		rd, err := kgo.NewClient(kgo.SeedBrokers(addr),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {int32(p): kgo.NewOffset().AtStart()}}))
		if err != nil {
			t.Fatal(err)
		}
		var prev int64 = -1
		var prevSeq uint64
		seen := 0
		for seen < len(want) {
			fs := rd.PollFetches(ctx)
			if ctx.Err() != nil {
				rd.Close()
				t.Fatalf("partition %d: read %d of %d acknowledged records: %v", p, seen, len(want), ctx.Err())
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
			for _, r := range fs.Records() {
				s := be.BigEndian.Uint64(r.Value)
				if prev >= 0 && s <= prevSeq {
					rd.Close()
					t.Fatalf("partition %d: record %d (offset %d) after record %d (offset %d): out of order", p, s, r.Offset, prevSeq, prev)
				}
				prev, prevSeq = r.Offset, s
				if w, ok := want[r.Offset]; ok {
					if w != s {
						rd.Close()
						t.Fatalf("partition %d offset %d: record %d, acknowledged there: %d", p, r.Offset, s, w)
					}
					seen++
				}
			}
		}
		rd.Close()
	}
}

// TestServeOnDISFaults: dislocal answers 10% of the requests with HTTP 500
// DIS.5000, closes the connection of another 10% unanswered, and serves
// another 10% but loses their answer (a PutRecords is written, the gateway
// cannot know: it checks before sending again); a franz-go
// producer (acks=all) writes 3,000 records to 3 partitions, and afterwards
// every acknowledged record reads back at its acknowledged offset, each
// once and in the order produced within its partition.
func TestServeOnDISFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("long: 3,000 records through 30% injected DIS faults")
	}
	t.Parallel()
	// dislocal checks no signature; the gateway signs with any key.
	d := startDISLocal(t, disLocalOpts{args: []string{"--fault-error-rate", "0.1", "--fault-drop-rate", "0.1", "--fault-lost-rate", "0.1"}})
	addr := startGateway(t, gatewayOpts{dis: d, ownCredentials: true, env: []string{"DISGW_DIS_AK=ak", "DISGW_DIS_SK=sk"},
		args: []string{"--dis-project-id", "faults"}}).addr

	const (
		topic      = "dis.faults"
		partitions = 3
		perPart    = 1000
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RetryTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for {
		_, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
		if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create topic: %v", err)
		}
		t.Logf("create topic: %v (retrying)", err)
		time.Sleep(100 * time.Millisecond)
	}
	tr := newTracker(partitions)
	for i := range perPart {
		for p := range partitions {
			tr.produce(ctx, cl, p, uint64(i), make([]byte, 8+rand.IntN(2000)))
		}
		if i%100 == 99 {
			tr.wg.Wait() // let batches of several sizes form
		}
	}
	tr.wait(t)
	for p := range partitions {
		want := map[int64]uint64{}
		for _, a := range tr.acked[p] {
			want[a.offset] = a.seq
		}
		if len(want) < perPart/2 {
			t.Fatalf("partition %d: only %d of %d records acknowledged", p, len(want), perPart)
		}
		rd, err := kgo.NewClient(kgo.SeedBrokers(addr),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {int32(p): kgo.NewOffset().AtStart()}}))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int64]bool{}
		var prevSeq uint64
		first := true
		for len(seen) < len(want) {
			fs := rd.PollFetches(ctx)
			if ctx.Err() != nil {
				rd.Close()
				t.Fatalf("partition %d: read %d of %d acknowledged records: %v", p, len(seen), len(want), ctx.Err())
			}
			for _, r := range fs.Records() {
				s := be.BigEndian.Uint64(r.Value)
				if !first && s <= prevSeq {
					rd.Close()
					t.Fatalf("partition %d: record %d (offset %d) after record %d: out of order or twice", p, s, r.Offset, prevSeq)
				}
				first, prevSeq = false, s
				if w, ok := want[r.Offset]; ok {
					if w != s {
						rd.Close()
						t.Fatalf("partition %d offset %d: record %d, acknowledged there: %d", p, r.Offset, s, w)
					}
					seen[r.Offset] = true
				}
			}
		}
		rd.Close()
	}
}

// ack is one acknowledged record: its sequence number (the first 8 bytes
// of its value), its size, its offset and when the acknowledgement came.
type ack struct {
	seq    uint64
	size   int
	offset int64
	at     time.Time
}

// tracker produces records and records their acknowledgements by partition.
type tracker struct {
	mu     sync.Mutex
	wg     sync.WaitGroup
	acked  [][]ack
	failed int
}

func newTracker(partitions int) *tracker { return &tracker{acked: make([][]ack, partitions)} }

// produce sends v, with seq written into its first 8 bytes, to partition p.
func (tr *tracker) produce(ctx context.Context, cl *kgo.Client, p int, seq uint64, v []byte) {
	be.BigEndian.PutUint64(v, seq)
	tr.wg.Add(1)
	cl.Produce(ctx, &kgo.Record{Partition: int32(p), Value: v}, func(r *kgo.Record, err error) {
		defer tr.wg.Done()
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if err != nil {
			tr.failed++
			return
		}
		tr.acked[p] = append(tr.acked[p], ack{seq: seq, size: len(v), offset: r.Offset, at: time.Now()})
	})
}

// wait waits for every acknowledgement and logs how many records failed.
func (tr *tracker) wait(t *testing.T) {
	tr.wg.Wait()
	if tr.failed > 0 {
		t.Logf("%d records not acknowledged", tr.failed)
	}
}
