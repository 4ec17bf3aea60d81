package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

const (
	smokeRecords = 2000
	fullRecords  = 300000
	fullRounds   = 5
)

// full is whether DISGW_BENCH=1 asks for the full size.
func full() bool { return os.Getenv("DISGW_BENCH") == "1" }

// ratioSize is the records per run and the rounds: a smoke size unless
// DISGW_BENCH=1; DISGW_BENCH_RECORDS and DISGW_BENCH_ROUNDS override.
func ratioSize(t *testing.T) (records, rounds int) {
	records, rounds = smokeRecords, 1
	if full() {
		records, rounds = fullRecords, fullRounds
	}
	return envInt(t, "DISGW_BENCH_RECORDS", records), envInt(t, "DISGW_BENCH_ROUNDS", rounds)
}

// withKafka is whether TestRatio adds the Apache Kafka broker as a third
// target: with DISGW_BENCH=1 (or DISGW_BENCH_KAFKA=1 at the smoke size),
// unless DISGW_BENCH_KAFKA=0, and only if java and the broker jars are
// there; otherwise it logs why not. Plain go test ./bench never starts it.
func withKafka(t *testing.T) (jars string, ok bool) {
	switch os.Getenv("DISGW_BENCH_KAFKA") {
	case "0":
		return "", false
	case "1":
	default:
		if !full() {
			return "", false
		}
	}
	jars = kafkaJarsDir()
	if _, err := os.Stat(filepath.Join(jars, kafkaJar)); err != nil {
		t.Logf("Kafka target skipped: %s missing (run compat/setup, or set DISGW_BENCH_KAFKA_JARS)", filepath.Join(jars, kafkaJar))
		return "", false
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Logf("Kafka target skipped: no java on PATH")
		return "", false
	}
	return jars, true
}

// result is one target's run: produce and fetch MB/s, and the CPU cores
// this process (client and broker) used on average in each phase.
type result struct {
	produce, fetch       float64
	produceCPU, fetchCPU float64
}

// TestRatio runs kfake, disgw and (with DISGW_BENCH=1, see withKafka) an
// Apache Kafka broker one after the other, a few rounds (rotating which
// goes first), and logs produce and fetch MB/s of each round, the median
// and best of each target, and the ratios disgw/kfake and disgw/kafka of
// the medians and of the bests. Then it measures the produce latency of
// each target at a fixed rate (latency_test.go). Without DISGW_BENCH=1 it
// runs one round at a smoke size; with it, a warm-up round that is not
// counted comes first (DISGW_BENCH_WARMUPS of them). It never asserts a time: it checks only that every
// record was acknowledged and read back (count, bytes and the sum of the
// values' CRC-32Cs). Run it with -v to see the tables.
func TestRatio(t *testing.T) {
	records, rounds := ratioSize(t)
	want := expected(records)
	load0 := loadavg()
	names := slices.Clone(targetNames)
	starters := map[string]func() *target{}
	for _, name := range names {
		starters[name] = func() *target { return startTarget(t, name) }
	}
	if jars, ok := withKafka(t); ok {
		start := time.Now()
		k := startKafka(t, jars)
		t.Logf("Kafka 4.4.0 started in %s on %s (jars %s)", time.Since(start).Round(time.Millisecond), k.addr, jars)
		names = append(names, "kafka")
		starters["kafka"] = func() *target { return k.target(t) }
	}
	runs := map[string][]result{}
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "round\ttarget\tproduce MB/s\tfetch MB/s\tproduce cores\tfetch cores\t\n")
	warmUps := 0
	if full() {
		// Warm-up rounds (rounds 0, -1, ...) warm the process up (heap
		// growth, page faults of fresh memory) and Kafka's JIT, and are
		// not counted: otherwise whichever target runs first pays for it.
		warmUps = envInt(t, "DISGW_BENCH_WARMUPS", 1)
	}
	for round := 1 - warmUps; round <= rounds; round++ {
		// Each round starts with the next target (with two, they
		// alternate).
		i := (round%len(names) + len(names)) % len(names)
		order := append(slices.Clone(names[i:]), names[:i]...)
		label := strconv.Itoa(round)
		if round <= 0 {
			label = "warm-up"
		}
		for _, name := range order {
			r := runTarget(t, starters[name], records, want)
			if round > 0 {
				runs[name] = append(runs[name], r)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.2f\t%.2f\t\n", label, name, r.produce, r.fetch, r.produceCPU, r.fetchCPU)
		}
	}
	med, best := map[string]result{}, map[string]result{}
	for _, name := range names {
		med[name], best[name] = median(runs[name]), bestOf(runs[name])
	}
	for _, row := range []struct {
		label string
		rs    map[string]result
	}{{"median", med}, {"best", best}} {
		for _, name := range names {
			r := row.rs[name]
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.2f\t%.2f\t\n", row.label, name, r.produce, r.fetch, r.produceCPU, r.fetchCPU)
		}
	}
	for _, row := range []struct {
		label string
		rs    map[string]result
	}{{"ratio of medians", med}, {"ratio of bests", best}} {
		d := row.rs["disgw"]
		for _, name := range names {
			if o := row.rs[name]; name != "disgw" {
				fmt.Fprintf(tw, "%s\tdisgw/%s\t%.2fx\t%.2fx\t\t\t\n", row.label, name, d.produce/o.produce, d.fetch/o.fetch)
			}
		}
	}
	tw.Flush()
	t.Logf("%d records of %d B, %d partitions, %d round(s), GOMAXPROCS %d, load average before %s after %s\n%s",
		records, valueSize, partitions, rounds, runtime.GOMAXPROCS(0), load0, loadavg(), table.String())

	latencyTable(t, names, starters)
}

// runTarget starts a target, produces records (timed from the first Produce to
// the end of Flush), reads them back with a fresh consumer (timed from its
// creation to the last record), checks both tallies and stops the target.
func runTarget(t *testing.T, start func() *target, records int, want tally) result {
	t.Helper()
	runtime.GC() // the previous target's garbage is not this one's cost
	settle()
	tg := start()
	name := tg.name
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	prod := newClient(t, tg.addr)
	begin, cpu := time.Now(), tg.usedCPU()
	got, err := produce(ctx, prod, tg.topic, records)
	pd, pcpu := time.Since(begin), tg.usedCPU()-cpu
	prod.Close()
	if err != nil {
		t.Fatalf("%s: produce: %v", name, err)
	}
	if got != want {
		t.Fatalf("%s: acknowledged %+v, want %+v", name, got, want)
	}

	begin, cpu = time.Now(), tg.usedCPU()
	cons := newClient(t, tg.addr, consumerOpts(tg.topic)...) // it starts fetching at once
	got, err = consume(ctx, cons, records)
	fd, fcpu := time.Since(begin), tg.usedCPU()-cpu
	cons.Close()
	if err != nil {
		t.Fatalf("%s: fetch: %v", name, err)
	}
	if got != want {
		t.Fatalf("%s: read %+v, want %+v", name, got, want)
	}
	if err := tg.stop(); err != nil {
		t.Fatalf("%s: stop: %v", name, err)
	}
	return result{
		produce: mbps(want.bytes, pd), fetch: mbps(want.bytes, fd),
		produceCPU: pcpu.Seconds() / pd.Seconds(), fetchCPU: fcpu.Seconds() / fd.Seconds(),
	}
}

// loadavg is the 1-minute load average, to spot runs that shared the
// machine with other work; "?" where /proc/loadavg is missing.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// bestOf is the highest produce and the highest fetch MB/s of rs (maybe
// from different rounds), with their cores: on a shared machine the best
// round is the one least disturbed by other work.
func bestOf(rs []result) result {
	var b result
	for _, r := range rs {
		if r.produce > b.produce {
			b.produce, b.produceCPU = r.produce, r.produceCPU
		}
		if r.fetch > b.fetch {
			b.fetch, b.fetchCPU = r.fetch, r.fetchCPU
		}
	}
	return b
}

func median(rs []result) result {
	var p, f, pc, fc []float64
	for _, r := range rs {
		p, f = append(p, r.produce), append(f, r.fetch)
		pc, fc = append(pc, r.produceCPU), append(fc, r.fetchCPU)
	}
	return result{produce: med(p), fetch: med(f), produceCPU: med(pc), fetchCPU: med(fc)}
}

func med(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
