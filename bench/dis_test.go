package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/disgw/disgw/disbackend/dislocal"
	"github.com/disgw/disgw/disbackend/disrest"
	"github.com/disgw/disgw/disbackend/localstore"
	"github.com/disgw/disgw/gateway"
)

// The DIS benchmark (issue 5): a gateway over disrest (the DIS backend with
// its defaults: linger 50 ms, batches of 1 MiB or 1000 records, the pacer)
// in front of dislocal (signatures checked, no flow control, over a
// localstore on the real disk), all in this process on 127.0.0.1:0. It
// measures what the gateway costs DIS in requests, and the produce latency
// at light load. Skipped unless DISGW_BENCH_DIS=1; see README.md.

const (
	disAK      = "bench-access-key"
	disSK      = "bench-secret-key"
	disProject = "benchproject"

	// disWarmUp is left out of the throughput figures: the pacer starts
	// empty, the consumer finds the partitions, batches start to fill.
	disWarmUp = 3 * time.Second
	// disBufferPerPartition bounds what the producer keeps unacknowledged
	// (kgo MaxBufferedBytes): enough for several full 1 MB batches waiting
	// per partition, so the accumulator always has full groups, and little
	// enough that the flush at the end takes seconds.
	disBufferPerPartition = 3 << 20
)

// TestDIS runs the DIS benchmark: sustained produce with a consumer
// reading on (for 1 KiB and 8 KiB values, each on a fresh gateway and
// dislocal), then produce latency at light load. It logs the figures and
// never asserts a time; it checks only that every acknowledged record was
// read back. DISGW_BENCH_DIS_SECONDS (default 15), DISGW_BENCH_DIS_SIZES
// (default "1024,8192") and DISGW_BENCH_DIS_LATENCY_RECORDS (default 300)
// change the size.
func TestDIS(t *testing.T) {
	if os.Getenv("DISGW_BENCH_DIS") != "1" {
		t.Skip("the DIS benchmark takes about 75 s; run it with DISGW_BENCH_DIS=1 (make bench-dis)")
	}
	secs := envInt(t, "DISGW_BENCH_DIS_SECONDS", 15)
	latRecords := envInt(t, "DISGW_BENCH_DIS_LATENCY_RECORDS", 300)
	batch := envInt(t, "DISGW_BENCH_DIS_BATCH", 0) // kgo ProducerBatchMaxBytes; 0: kgo's default, 1 MB
	var sizes []int
	for _, f := range strings.Split(envString("DISGW_BENCH_DIS_SIZES", "1024,8192"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || n > 512<<10 {
			t.Fatalf("DISGW_BENCH_DIS_SIZES=%q: want value sizes in bytes, 1 to 524288, comma-separated", f)
		}
		sizes = append(sizes, n)
	}
	for _, size := range sizes {
		t.Run(fmt.Sprintf("Throughput/%dB", size), func(t *testing.T) {
			disThroughput(t, size, batch, time.Duration(secs)*time.Second)
		})
	}
	t.Run("Latency", func(t *testing.T) { disLatency(t, latRecords) })
}

func envString(name, def string) string {
	if s := os.Getenv(name); s != "" {
		return s
	}
	return def
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// disEnv is a gateway over disrest in front of dislocal, in this process.
type disEnv struct {
	addr string           // the gateway's Kafka listener
	dis  *dislocal.Server // request counts: Stats
	log  *httpLog         // what went through dislocal's HTTP listener
}

// startDISEnv starts localstore (in a temp dir on the real disk),
// dislocal on it behind an httptest server, disrest with the defaults of
// `disgw serve --backend dis`, and a gateway; all stop at the end of t.
func startDISEnv(t *testing.T) *disEnv {
	t.Helper()
	warn := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	st, err := localstore.Open(t.TempDir(), localstore.Options{Logger: warn, RetentionCheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close localstore: %v", err)
		}
	})
	dis, err := dislocal.New(st, dislocal.Options{ProjectID: disProject, AK: disAK, SK: disSK, Logger: warn})
	if err != nil {
		t.Fatal(err)
	}
	hl := &httpLog{}
	hs := httptest.NewServer(hl.wrap(dis)) // 127.0.0.1:0
	t.Cleanup(hs.Close)

	store, err := disrest.New(disrest.Options{Endpoint: hs.URL, ProjectID: disProject, AK: disAK, SK: disSK, Logger: warn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := store.Close(); err != nil {
			t.Errorf("close disrest: %v", err)
		}
		if n := store.OutOfOrder(); n != 0 {
			t.Errorf("disrest counted %d records or batches out of order", n)
		}
	})
	cfg := gateway.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.ShutdownGrace = 2 * time.Second
	srv, err := gateway.New(cfg, store, warn)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("gateway shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("gateway serve: %v", err)
		}
	})
	return &disEnv{addr: srv.AdvertisedAddr(), dis: dis, log: hl}
}

// createDISTopic creates topic with parts partitions through the gateway.
func createDISTopic(t *testing.T, addr, topic string, parts int32) {
	t.Helper()
	cl := newClient(t, addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// httpLog records the PutRecords that reach dislocal (when, how many
// records and data bytes, how long dislocal took to answer) and counts the
// GetRecords answered without records.
type httpLog struct {
	mu   sync.Mutex
	puts []putCall

	emptyGets atomic.Int64
}

type putCall struct {
	stream    string
	partition string // of the first record
	at        time.Time
	took      time.Duration
	records   int
	bytes     int // DIS data bytes (Base64-decoded)
}

func (l *httpLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/records") {
			h.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodGet {
			sw := &sniffWriter{ResponseWriter: w}
			h.ServeHTTP(sw, r)
			if bytes.HasPrefix(sw.head, []byte(`{"records":[]`)) {
				l.emptyGets.Add(1)
			}
			return
		}
		body, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body)) // the same bytes: the signature still holds
		var pb struct {
			StreamName string `json:"stream_name"`
			Records    []struct {
				Data        string `json:"data"`
				PartitionID string `json:"partition_id"`
			} `json:"records"`
		}
		_ = json.Unmarshal(body, &pb) // a bad body is dislocal's to answer
		pc := putCall{stream: pb.StreamName, at: time.Now(), records: len(pb.Records)}
		if len(pb.Records) > 0 {
			pc.partition = pb.Records[0].PartitionID
		}
		for _, rec := range pb.Records {
			pc.bytes += len(rec.Data)/4*3 - strings.Count(rec.Data[max(len(rec.Data)-2, 0):], "=")
		}
		h.ServeHTTP(w, r)
		pc.took = time.Since(pc.at)
		l.mu.Lock()
		l.puts = append(l.puts, pc)
		l.mu.Unlock()
	})
}

// putsBetween are the PutRecords to stream that arrived in [from, to).
func (l *httpLog) putsBetween(stream string, from, to time.Time) []putCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []putCall
	for _, p := range l.puts {
		if p.stream == stream && !p.at.Before(from) && p.at.Before(to) {
			out = append(out, p)
		}
	}
	return out
}

// sniffWriter keeps the first bytes of an answer.
type sniffWriter struct {
	http.ResponseWriter
	head []byte
}

func (w *sniffWriter) Write(b []byte) (int, error) {
	if n := 32 - len(w.head); n > 0 {
		w.head = append(w.head, b[:min(n, len(b))]...)
	}
	return w.ResponseWriter.Write(b)
}

// disValues is a 4 MiB random buffer; record i of a run takes size bytes of
// it at a rotating offset.
var (
	disValOnce sync.Once
	disValBuf  []byte
)

func disValue(i, size int) []byte {
	disValOnce.Do(func() {
		rng := rand.New(rand.NewChaCha8([32]byte{'d', 'i', 's', 'b', 'e', 'n', 'c', 'h'}))
		disValBuf = make([]byte, 4<<20)
		for j := 0; j < len(disValBuf); j += 8 {
			binary.LittleEndian.PutUint64(disValBuf[j:], rng.Uint64())
		}
	})
	off := (i * 4099) % (len(disValBuf) - size + 1) // 4099: not a multiple of the size, values differ
	return disValBuf[off : off+size : off+size]
}

// clientCounts counts, with kgo hooks, the Fetch responses a consumer read,
// the batches (partition reads with records) in them, and the batches a
// producer had acknowledged and their bytes.
type clientCounts struct {
	fetches, fetchBatches     atomic.Int64
	producedBatches, produced atomic.Int64 // batches, uncompressed record bytes
}

func (c *clientCounts) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 1 && err == nil { // Fetch
		c.fetches.Add(1)
	}
}

func (c *clientCounts) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, _ kgo.FetchBatchMetrics) {
	c.fetchBatches.Add(1)
}

func (c *clientCounts) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	c.producedBatches.Add(1)
	c.produced.Add(int64(m.UncompressedBytes))
}

// snapshot is the counts at one instant of a run.
type snapshot struct {
	at                        time.Time
	dis                       dislocal.Stats
	emptyGets                 int64
	fetches, fetchBatches     int64
	producedBatches, produced int64
}

func takeSnapshot(e *disEnv, cc *clientCounts) snapshot {
	return snapshot{
		at: time.Now(), dis: e.dis.Stats(), emptyGets: e.log.emptyGets.Load(),
		fetches: cc.fetches.Load(), fetchBatches: cc.fetchBatches.Load(),
		producedBatches: cc.producedBatches.Load(), produced: cc.produced.Load(),
	}
}

// disThroughput produces size-byte values to a 3-partition topic for d
// (as fast as the gateway acknowledges, at most disBufferPerPartition
// unacknowledged per partition), with a consumer reading on, and logs the
// DIS requests per MiB and per fetch over the run minus its first
// disWarmUp.
func disThroughput(t *testing.T, size, batch int, d time.Duration) {
	if d <= disWarmUp {
		t.Fatalf("the run (%v) must be longer than the warm-up (%v)", d, disWarmUp)
	}
	e := startDISEnv(t)
	const topic = "disbench"
	createDISTopic(t, e.addr, topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), d+2*time.Minute)
	defer cancel()

	var cc clientCounts
	// The consumer reads on from the start while the producer writes.
	cons := newClient(t, e.addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(&cc))
	defer cons.Close()
	var (
		consMu  sync.Mutex
		consGot tally
	)
	cctx, stopCons := context.WithCancel(ctx)
	consDone := make(chan error, 1)
	go func() {
		for {
			fs := cons.PollFetches(cctx)
			if cctx.Err() != nil {
				consDone <- nil
				return
			}
			var ferr error
			fs.EachError(func(tp string, p int32, err error) {
				if ferr == nil {
					ferr = fmt.Errorf("fetch %s/%d: %w", tp, p, err)
				}
			})
			if ferr != nil {
				consDone <- ferr
				return
			}
			consMu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				consGot.records++
				consGot.bytes += int64(len(r.Value))
				consGot.sum += uint64(crc32.Checksum(r.Value, crcTable))
			})
			consMu.Unlock()
		}
	}()
	defer stopCons()

	popts := []kgo.Opt{kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.MaxBufferedBytes(partitions * disBufferPerPartition), kgo.WithHooks(&cc)}
	if batch > 0 {
		popts = append(popts, kgo.ProducerBatchMaxBytes(int32(batch)))
	}
	prod := newClient(t, e.addr, popts...)
	defer prod.Close()
	var (
		prodMu  sync.Mutex
		prodGot tally
		prodErr error
	)
	// The counts are taken at the end of the warm-up and at the end of
	// producing, on timers: Produce blocks while the buffer is full.
	start := time.Now()
	warmEnd, end := start.Add(disWarmUp), start.Add(d)
	snaps := make(chan snapshot, 2)
	for _, at := range []time.Time{warmEnd, end} {
		tm := time.AfterFunc(time.Until(at), func() { snaps <- takeSnapshot(e, &cc) })
		defer tm.Stop()
	}
	for n := 0; time.Now().Before(end); n++ {
		v := disValue(n, size)
		crc := crc32.Checksum(v, crcTable)
		prod.Produce(ctx, &kgo.Record{Topic: topic, Value: v}, func(r *kgo.Record, err error) {
			prodMu.Lock()
			defer prodMu.Unlock()
			if err != nil {
				if prodErr == nil {
					prodErr = err
				}
				return
			}
			prodGot.records++
			prodGot.bytes += int64(len(r.Value))
			prodGot.sum += uint64(crc)
		})
	}
	first, last := <-snaps, <-snaps
	if last.at.Before(first.at) {
		first, last = last, first
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	drained := time.Since(last.at)
	prodMu.Lock()
	want, perr := prodGot, prodErr
	prodMu.Unlock()
	if perr != nil {
		t.Fatalf("produce: %v", perr)
	}
	// Every acknowledged record is read back.
	for {
		consMu.Lock()
		got := consGot
		consMu.Unlock()
		if got.records >= want.records {
			if got != want {
				t.Fatalf("read %+v, acknowledged %+v", got, want)
			}
			break
		}
		select {
		case err := <-consDone:
			t.Fatalf("consumer stopped after %d of %d records: %v", got.records, want.records, err)
		case <-ctx.Done():
			t.Fatalf("read %d of %d records: %v", got.records, want.records, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	caught := takeSnapshot(e, &cc)
	stopCons()
	if err := <-consDone; err != nil {
		t.Fatal(err)
	}

	// The window: from the end of the warm-up to the end of producing.
	win := last.at.Sub(first.at)
	puts := e.log.putsBetween(topic, first.at, last.at)
	var putBytes, putRecs int
	if os.Getenv("DISGW_BENCH_DIS_TRACE") != "" {
		for _, p := range puts {
			t.Logf("PutRecords at %s %s: %d records, %d bytes, answered in %v", p.at.Format("05.000"), p.partition, p.records, p.bytes, p.took)
		}
	}
	for _, p := range puts {
		putBytes, putRecs = putBytes+p.bytes, putRecs+p.records
	}
	mib := float64(putBytes) / (1 << 20)
	// Produce is counted up to the end of producing, reads up to the
	// moment the consumer caught up (it reads on during the flush).
	req := func(to snapshot, op string) int64 { return to.dis.Requests[op] - first.dis.Requests[op] }
	sends := req(last, "SendRecords")
	gets, cursors, describes := req(caught, "ConsumeRecords"), req(caught, "ShowCursor"), req(caught, "ShowStream")
	fetches, batches := caught.fetches-first.fetches, caught.fetchBatches-first.fetchBatches
	readWin := caught.at.Sub(first.at)
	kb, kbytes := last.producedBatches-first.producedBatches, last.produced-first.produced
	var errs []string
	for op, v := range caught.dis.Errors {
		if dv := v - first.dis.Errors[op]; dv != 0 {
			errs = append(errs, fmt.Sprintf("%s %d", op, dv))
		}
	}
	slices.Sort(errs)

	var b strings.Builder
	fmt.Fprintf(&b, "%d B values, %d partitions, COMMON stream; window %.1fs (run %v minus %v warm-up), flush after it %.1fs\n",
		size, partitions, win.Seconds(), d, disWarmUp, drained.Seconds())
	fmt.Fprintf(&b, "  written to DIS      %.2f MB/s, %.0f records/s (the pacer: 0.94 MB/s and 900 records/s a partition)\n",
		float64(putBytes)/1e6/win.Seconds(), float64(putRecs)/win.Seconds())
	fmt.Fprintf(&b, "  kgo batches         %d acknowledged, %.0f B each on average\n", kb, ratio(kbytes, kb))
	// The fewest calls DIS allows: one PutRecords holds at most 1 MiB and
	// (the accumulator's batch count) 1000 records.
	fewest := max(float64(putBytes)/(1<<20), float64(putRecs)/1000)
	fmt.Fprintf(&b, "  PutRecords          %d for %.2f MiB of data: %.2f per MiB (ideal 1 at 1 MiB per call; %.2f at 1 MiB and 1000 records a call)\n",
		len(puts), mib, float64(len(puts))/mib, fewest/mib)
	if len(puts) > 0 {
		bs, rs := make([]float64, len(puts)), make([]float64, len(puts))
		for i, p := range puts {
			bs[i], rs[i] = float64(p.bytes), float64(p.records)
		}
		fmt.Fprintf(&b, "    bytes per call    p10 %.0f  p50 %.0f  p90 %.0f  max %.0f\n",
			quantile(bs, 0.1), quantile(bs, 0.5), quantile(bs, 0.9), quantile(bs, 1))
		fmt.Fprintf(&b, "    records per call  p10 %.0f  p50 %.0f  p90 %.0f  max %.0f\n",
			quantile(rs, 0.1), quantile(rs, 0.5), quantile(rs, 0.9), quantile(rs, 1))
		if other := sends - int64(len(puts)); other != 0 {
			fmt.Fprintf(&b, "    (and %d PutRecords to other streams)\n", other)
		}
	}
	fmt.Fprintf(&b, "  reading on, %.1fs (the window and the flush):\n", readWin.Seconds())
	fmt.Fprintf(&b, "  Fetch responses     %d, with %d partition batches\n", fetches, batches)
	fmt.Fprintf(&b, "  GetRecords          %d: %.2f per partition batch fetched (ideal 1), %.2f per Fetch; %d answered empty\n",
		gets, ratio(gets, batches), ratio(gets, fetches), caught.emptyGets-first.emptyGets)
	fmt.Fprintf(&b, "  GetCursor           %d (ideal 0 in steady state)\n", cursors)
	fmt.Fprintf(&b, "  DescribeStream      %d: %.2f per Fetch (%.1f/s)\n", describes, ratio(describes, fetches), float64(describes)/readWin.Seconds())
	if len(errs) > 0 {
		fmt.Fprintf(&b, "  DIS errors          %s\n", strings.Join(errs, ", "))
	}
	t.Log(b.String())
}

// disLatency produces records one at a time (ProduceSync, acks=all, kgo
// linger 0) to a 1-partition topic, a random 20-100 ms apart, and logs the
// latency quantiles of the acknowledgements and of dislocal's answers to
// the PutRecords meanwhile.
func disLatency(t *testing.T, records int) {
	e := startDISEnv(t)
	const topic = "dislatency"
	createDISTopic(t, e.addr, topic, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(records)*time.Second+time.Minute)
	defer cancel()
	cl := newClient(t, e.addr, kgo.ProducerLinger(0))
	defer cl.Close()
	rng := rand.New(rand.NewPCG(5, 55))
	const warmUp = 5 // metadata, InitProducerID, the first PutRecords
	type sent struct{ at, acked time.Time }
	var (
		sends []sent
		start time.Time
		size  int
	)
	for i := -warmUp; i < records; i++ {
		if i == 0 {
			start = time.Now()
		}
		time.Sleep(20*time.Millisecond + time.Duration(rng.Int64N(int64(80*time.Millisecond))))
		v := fmt.Appendf(nil, "latency record %06d %s", i, strings.Repeat("x", 64))
		size = len(v)
		t0 := time.Now()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: v}).FirstErr(); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if i >= 0 {
			sends = append(sends, sent{t0, time.Now()})
		}
	}
	puts := e.log.putsBetween(topic, start, time.Now())
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	lat := make([]float64, len(sends))
	for i, s := range sends {
		lat[i] = ms(s.acked.Sub(s.at))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d records of %d B, one at a time 20-100 ms apart, acks=all, kgo linger 0, gateway dis_linger 50ms\n", records, size)
	fmt.Fprintf(&b, "  ProduceSync ms       p50 %5.1f  p90 %5.1f  p99 %5.1f  max %5.1f  mean %.1f (target p99 <= 55)\n",
		quantile(lat, 0.5), quantile(lat, 0.9), quantile(lat, 0.99), quantile(lat, 1), mean(lat))
	fmt.Fprintf(&b, "  PutRecords           %d\n", len(puts))
	// With one record per PutRecords, each acknowledgement splits into:
	// until its PutRecords reached dislocal (the linger, the pacer, the
	// gateway), dislocal's answer (its localstore fsyncs), and from the
	// answer to the client's acknowledgement.
	if len(puts) == len(sends) {
		var before, dis, after []float64
		for i, p := range puts {
			s := sends[i]
			if p.records != 1 || p.at.Before(s.at) || p.at.Add(p.took).After(s.acked) {
				before = nil
				break
			}
			before = append(before, ms(p.at.Sub(s.at)))
			dis = append(dis, ms(p.took))
			after = append(after, ms(s.acked.Sub(p.at.Add(p.took))))
		}
		for _, row := range []struct {
			label string
			xs    []float64
		}{{"  to dislocal ms     ", before}, {"  dislocal answer ms ", dis}, {"  answer to ack ms   ", after}} {
			if len(row.xs) > 0 {
				fmt.Fprintf(&b, "%s p50 %5.1f  p90 %5.1f  p99 %5.1f  max %5.1f\n", row.label,
					quantile(row.xs, 0.5), quantile(row.xs, 0.9), quantile(row.xs, 0.99), quantile(row.xs, 1))
			}
		}
	}
	t.Log(b.String())
}

// quantile is the nearest-rank q-quantile of xs (sorted in place); 0 when
// empty.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}
