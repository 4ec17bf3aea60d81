package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend/localstore"
	"github.com/disgw/disgw/gateway"
)

const (
	// topic is the benchmark topic on kfake and disgw, created with
	// partitions partitions on every target through kadm (the same
	// CreateTopics path). The Kafka broker, which serves every round, has
	// a fresh topic each time (kafka_test.go).
	topic = "bench"
	// partitions: 3 spreads the client's batches over several partitions
	// (several batches per Produce request, several partitions per Fetch
	// response) without splitting 1 KiB records into tiny batches.
	partitions = 3
	// valueSize is the size of every record value: 1 KiB of random bytes.
	valueSize = 1024
	// poolSize distinct random values are cycled through (4 MiB), so the
	// client does not spend the run generating random bytes and a batch
	// never holds two equal values.
	poolSize = 4096
	// window bounds the records produced but not yet acknowledged: kgo's
	// own default buffer (MaxBufferedRecords, 50,000), so the producer
	// behaves as one with default options. (An earlier, smaller window of
	// 8,192 made the run latency-bound: disgw's acknowledgement waits for
	// an fdatasync, kfake's for nothing.)
	window = 50000
)

var (
	targetNames = []string{"kfake", "disgw"}
	crcTable    = crc32.MakeTable(crc32.Castagnoli)
)

// valuePool is poolSize random values and their checksums.
type valuePool struct {
	vals [][]byte
	crcs []uint32
}

var (
	poolOnce sync.Once
	pool     valuePool
)

func values() *valuePool {
	poolOnce.Do(func() {
		rng := rand.New(rand.NewChaCha8([32]byte{'d', 'i', 's', 'g', 'w'}))
		buf := make([]byte, poolSize*valueSize)
		for i := 0; i < len(buf); i += 8 {
			binary.LittleEndian.PutUint64(buf[i:], rng.Uint64())
		}
		pool.vals = make([][]byte, poolSize)
		pool.crcs = make([]uint32, poolSize)
		for i := range pool.vals {
			v := buf[i*valueSize : (i+1)*valueSize : (i+1)*valueSize]
			pool.vals[i] = v
			pool.crcs[i] = crc32.Checksum(v, crcTable)
		}
	})
	return &pool
}

// clientOpts are the kgo options for every target: the defaults (acks=all,
// idempotent producer, linger, batch sizes, fetch sizes) except no
// compression, which keeps the random values as they are on the wire and
// in the store.
func clientOpts(addr string, extra ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	}, extra...)
}

// target is a running broker: kfake, a disgw gateway over localstore, or
// a topic on the Apache Kafka broker (kafka_test.go).
type target struct {
	name  string
	addr  string
	topic string
	stop  func() error
	// cpu is the CPU time so far of the target's own process when it is
	// not this one (the Kafka JVM); nil for the in-process targets.
	cpu func() time.Duration
}

// usedCPU is the CPU time so far of this process (client, and broker
// when in-process) and of the target's own process if any.
func (t *target) usedCPU() time.Duration {
	d := cpuTime()
	if t.cpu != nil {
		d += t.cpu()
	}
	return d
}

// startTarget starts the named in-process target (kfake or disgw) with the
// benchmark topic created. It stops at the end of the test or benchmark
// (run) unless stopped before.
func startTarget(tb testing.TB, name string) *target {
	tb.Helper()
	var t *target
	switch name {
	case "kfake":
		t = startKfake(tb)
	case "disgw":
		t = startDisgw(tb)
	default:
		tb.Fatalf("unknown target %q", name)
	}
	return setUp(tb, t)
}

// setUp makes t.stop idempotent and run at the end of the test, and
// creates t.topic.
func setUp(tb testing.TB, t *target) *target {
	tb.Helper()
	name := t.name
	stopped := false
	stop := t.stop
	t.stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		return stop()
	}
	tb.Cleanup(func() {
		if err := t.stop(); err != nil {
			tb.Errorf("stop %s: %v", name, err)
		}
	})
	createTopic(tb, t)
	return t
}

func startKfake(tb testing.TB) *target {
	tb.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		tb.Fatal(err)
	}
	return &target{name: "kfake", addr: c.ListenAddrs()[0], topic: topic, stop: func() error { c.Close(); return nil }}
}

// startDisgw starts a gateway on 127.0.0.1:0 over a localstore in a temp
// dir (on the real disk: the store's fsyncs are real).
func startDisgw(tb testing.TB) *target {
	tb.Helper()
	log := zap.NewNop()
	dir := tb.TempDir()
	store, err := localstore.Open(dir, localstore.Options{Logger: log})
	if err != nil {
		tb.Fatal(err)
	}
	cfg := gateway.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	srv, err := gateway.New(cfg, store, log)
	if err != nil {
		store.Close()
		tb.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		store.Close()
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	return &target{name: "disgw", addr: srv.AdvertisedAddr(), topic: topic, stop: func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := srv.Shutdown(ctx)
		if serr := <-done; err == nil {
			err = serr
		}
		if cerr := store.Close(); err == nil {
			err = cerr
		}
		if rerr := os.RemoveAll(dir); err == nil {
			err = rerr
		}
		return err
	}}
}

func createTopic(tb testing.TB, t *target) {
	tb.Helper()
	cl := newClient(tb, t.addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, t.topic); err != nil {
		tb.Fatalf("%s: create topic %s: %v", t.name, t.topic, err)
	}
}

func newClient(tb testing.TB, addr string, extra ...kgo.Opt) *kgo.Client {
	tb.Helper()
	cl, err := kgo.NewClient(clientOpts(addr, extra...)...)
	if err != nil {
		tb.Fatal(err)
	}
	return cl
}

// tally is what a produce or fetch saw: records, value bytes and the
// order-independent sum of the values' CRC-32Cs.
type tally struct {
	records int64
	bytes   int64
	sum     uint64
}

// expected is the tally of producing the first n records of the pool cycle.
func expected(n int) tally {
	p := values()
	var t tally
	for i := 0; i < n; i++ {
		t.sum += uint64(p.crcs[i%poolSize])
	}
	return tally{records: int64(n), bytes: int64(n) * valueSize, sum: t.sum}
}

// produce writes n records to topic with cl (async Produce, at most window
// unacknowledged, then Flush) and returns the tally of the acknowledged
// ones; the first error is returned too.
func produce(ctx context.Context, cl *kgo.Client, topic string, n int) (tally, error) {
	p := values()
	sem := make(chan struct{}, window)
	var (
		mu    sync.Mutex
		t     tally
		first error
	)
	for i := 0; i < n; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return t, ctx.Err()
		}
		crc := p.crcs[i%poolSize]
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: p.vals[i%poolSize]}, func(r *kgo.Record, err error) {
			<-sem
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = fmt.Errorf("record %d: %w", i, err)
				}
				return
			}
			t.records++
			t.bytes += int64(len(r.Value))
			t.sum += uint64(crc)
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return t, err
	}
	mu.Lock()
	defer mu.Unlock()
	return t, first
}

// consume reads from the start of every partition until n records were
// read, and returns their tally.
func consume(ctx context.Context, cl *kgo.Client, n int) (tally, error) {
	var t tally
	for t.records < int64(n) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return t, fmt.Errorf("read %d of %d records: %w", t.records, n, err)
		}
		var ferr error
		fs.EachError(func(tp string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("fetch %s/%d: %w", tp, p, err)
			}
		})
		if ferr != nil {
			return t, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			t.records++
			t.bytes += int64(len(r.Value))
			t.sum += uint64(crc32.Checksum(r.Value, crcTable))
		})
	}
	return t, nil
}

// consumerOpts read topic from the start.
func consumerOpts(topic string) []kgo.Opt {
	return []kgo.Opt{
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
}

// mbps is MB/s with MB = 1e6 bytes, as go test reports it.
func mbps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / 1e6 / d.Seconds()
}

// profileTimed starts a CPU profile of the timed section when
// DISGW_BENCH_PROFILE_DIR is set (not together with -cpuprofile), written
// to <dir>/<Benchmark>-<target>.pprof; each b.N run overwrites it, so the
// file holds the last (largest) run. -cpuprofile instead covers the whole
// binary, including BenchmarkFetch's untimed produce. It returns the stop
// function.
func profileTimed(b *testing.B) func() {
	dir := os.Getenv("DISGW_BENCH_PROFILE_DIR")
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, strings.ReplaceAll(b.Name(), "/", "-")+".pprof"))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Fatalf("%v (DISGW_BENCH_PROFILE_DIR cannot be used with -cpuprofile)", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}
