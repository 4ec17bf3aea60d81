package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The latency part of TestRatio: 1 KiB records produced at a fixed,
// moderate rate (far below every target's throughput), with the same
// client options as the throughput runs (acks=all, idempotent, kgo's
// default 10 ms linger; DISGW_BENCH_LATENCY_LINGER_MS overrides the
// linger), on a fresh target each.
const (
	// latencyRate is the records per second sent (5.12 MB/s of values);
	// DISGW_BENCH_LATENCY_RATE overrides it.
	latencyRate = 5000
	// latencyWarmUp is sent first and not counted (metadata,
	// InitProducerID, a cold JIT); latencyMeasured is counted.
	// DISGW_BENCH_LATENCY_SECONDS overrides latencyMeasured.
	latencyWarmUp   = 3 * time.Second
	latencyMeasured = 10 * time.Second
	// smokeLatency is the counted time at the smoke size (no warm-up).
	smokeLatency = 50 * time.Millisecond
)

// latencyLinger is DISGW_BENCH_LATENCY_LINGER_MS as a kgo option (0 sends
// a batch as soon as a produce slot is free), or none: kgo's default
// linger, 10 ms, which is most of each latency below ~10 ms.
func latencyLinger(t *testing.T) (opts []kgo.Opt, desc string) {
	s := os.Getenv("DISGW_BENCH_LATENCY_LINGER_MS")
	if s == "" {
		return nil, "kgo defaults (linger 10ms)"
	}
	ms, err := strconv.Atoi(s)
	if err != nil || ms < 0 {
		t.Fatalf("DISGW_BENCH_LATENCY_LINGER_MS=%q: want a non-negative integer", s)
	}
	return []kgo.Opt{kgo.ProducerLinger(time.Duration(ms) * time.Millisecond)}, fmt.Sprintf("kgo defaults but linger %dms", ms)
}

// latencyRun is one target's latency run.
type latencyRun struct {
	lat  []float64 // ms from each counted record's Produce call to its acknowledgement
	rate float64   // counted records per second actually sent
}

// latencyTable runs produceAtRate on each target in names, one after the
// other, and logs the p50, p99 and max acknowledgement latency (ms) of
// each and the ratios of disgw's p50 and p99 to the others'.
func latencyTable(t *testing.T, names []string, starters map[string]func() *target) {
	rate := envInt(t, "DISGW_BENCH_LATENCY_RATE", latencyRate)
	warm, measured := time.Duration(0), smokeLatency
	if full() {
		warm, measured = latencyWarmUp, latencyMeasured
	}
	if os.Getenv("DISGW_BENCH_LATENCY_SECONDS") != "" {
		measured = time.Duration(envInt(t, "DISGW_BENCH_LATENCY_SECONDS", 0)) * time.Second
	}
	linger, desc := latencyLinger(t)
	runs := map[string]latencyRun{}
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "target\trecords\tsent/s\tp50 ms\tp99 ms\tmax ms\t\n")
	for _, name := range names {
		settle()
		tg := starters[name]()
		r := produceAtRate(t, tg, rate, warm, measured, linger...)
		if err := tg.stop(); err != nil {
			t.Fatalf("%s: stop: %v", name, err)
		}
		runs[name] = r
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t\n", name, len(r.lat), r.rate,
			quantile(r.lat, 0.5), quantile(r.lat, 0.99), quantile(r.lat, 1))
	}
	d := runs["disgw"].lat
	for _, name := range names {
		if o := runs[name].lat; name != "disgw" {
			fmt.Fprintf(tw, "disgw/%s\t\t\t%.2fx\t%.2fx\t\t\n", name,
				quantile(d, 0.5)/quantile(o, 0.5), quantile(d, 0.99)/quantile(o, 0.99))
		}
	}
	tw.Flush()
	t.Logf("produce latency: %d B records at %d/s, acks=all, idempotent, %s, %s warm-up then %s counted, load average %s\n%s",
		valueSize, rate, desc, warm, measured, loadavg(), table.String())
}

// produceAtRate produces to tg with a fresh client (the benchmark's
// options and extra) at rate records/s, record i at i/rate after the start (a sender
// that fell behind catches up at once), for warm and then measured. It
// fails the test unless every record is acknowledged (count, bytes, sum of
// CRC-32Cs). The latency of a record runs from its Produce call to its
// promise.
func produceAtRate(t *testing.T, tg *target, rate int, warm, measured time.Duration, extra ...kgo.Opt) latencyRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), warm+measured+2*time.Minute)
	defer cancel()
	cl := newClient(t, tg.addr, extra...)
	defer cl.Close()
	p := values()
	nWarm := int(warm.Seconds() * float64(rate))
	n := nWarm + int(measured.Seconds()*float64(rate))
	interval := time.Second / time.Duration(rate)
	var (
		mu    sync.Mutex
		got   tally
		first error
		lat   = make([]float64, 0, n-nWarm)
	)
	start := time.Now()
	var firstSent, lastSent time.Time
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		crc := p.crcs[i%poolSize]
		sent := time.Now()
		if i == nWarm {
			firstSent = sent
		}
		lastSent = sent
		cl.Produce(ctx, &kgo.Record{Topic: tg.topic, Value: p.vals[i%poolSize]}, func(r *kgo.Record, err error) {
			took := time.Since(sent)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = fmt.Errorf("record %d: %w", i, err)
				}
				return
			}
			got.records++
			got.bytes += int64(len(r.Value))
			got.sum += uint64(crc)
			if i >= nWarm {
				lat = append(lat, float64(took)/float64(time.Millisecond))
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("%s: latency run: flush: %v", tg.name, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if first != nil {
		t.Fatalf("%s: latency run: %v", tg.name, first)
	}
	if want := expected(n); got != want {
		t.Fatalf("%s: latency run: acknowledged %+v, want %+v", tg.name, got, want)
	}
	r := latencyRun{lat: lat}
	if d := lastSent.Sub(firstSent); d > 0 {
		r.rate = float64(len(lat)-1) / d.Seconds()
	}
	return r
}
