package bench

import (
	"context"
	"fmt"
	"os"
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

// ratioSize is the records per run and the rounds: a smoke size unless
// DISGW_BENCH=1; DISGW_BENCH_RECORDS and DISGW_BENCH_ROUNDS override.
func ratioSize(t *testing.T) (records, rounds int) {
	records, rounds = smokeRecords, 1
	if os.Getenv("DISGW_BENCH") == "1" {
		records, rounds = fullRecords, fullRounds
	}
	for _, e := range []struct {
		name string
		v    *int
	}{{"DISGW_BENCH_RECORDS", &records}, {"DISGW_BENCH_ROUNDS", &rounds}} {
		if s := os.Getenv(e.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 {
				t.Fatalf("%s=%q: want a positive integer", e.name, s)
			}
			*e.v = n
		}
	}
	return records, rounds
}

// result is one target's run: produce and fetch MB/s, and the CPU cores
// this process (client and broker) used on average in each phase.
type result struct {
	produce, fetch       float64
	produceCPU, fetchCPU float64
}

// TestRatio runs kfake and disgw one after the other in this process, a few
// rounds (alternating which goes first), and logs produce and fetch MB/s of
// each round, the median and best of each target, and the ratios
// disgw/kfake of the medians and of the bests. Without DISGW_BENCH=1 it
// runs one round at a smoke size; with it, a warm-up round that is not
// counted comes first. It never asserts a time: it checks only
// that every record was acknowledged and read back (count, bytes and the
// sum of the values' CRC-32Cs). Run it with -v to see the table.
func TestRatio(t *testing.T) {
	records, rounds := ratioSize(t)
	want := expected(records)
	load0 := loadavg()
	runs := map[string][]result{}
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "round\ttarget\tproduce MB/s\tfetch MB/s\tproduce cores\tfetch cores\t\n")
	first := 1
	if os.Getenv("DISGW_BENCH") == "1" {
		// Round 0 warms the process up (heap growth, page faults of fresh
		// memory) and is not counted: otherwise whichever target runs
		// first pays for it.
		first = 0
	}
	for round := first; round <= rounds; round++ {
		order := slices.Clone(targetNames)
		if round%2 == 0 {
			slices.Reverse(order)
		}
		label := strconv.Itoa(round)
		if round == 0 {
			label = "warm-up"
		}
		for _, name := range order {
			r := runTarget(t, name, records, want)
			if round > 0 {
				runs[name] = append(runs[name], r)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.2f\t%.2f\t\n", label, name, r.produce, r.fetch, r.produceCPU, r.fetchCPU)
		}
	}
	med, best := map[string]result{}, map[string]result{}
	for _, name := range targetNames {
		med[name], best[name] = median(runs[name]), bestOf(runs[name])
	}
	for _, row := range []struct {
		label string
		rs    map[string]result
	}{{"median", med}, {"best", best}} {
		for _, name := range targetNames {
			r := row.rs[name]
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.2f\t%.2f\t\n", row.label, name, r.produce, r.fetch, r.produceCPU, r.fetchCPU)
		}
	}
	for _, row := range []struct {
		label string
		rs    map[string]result
	}{{"ratio of medians", med}, {"ratio of bests", best}} {
		k, d := row.rs["kfake"], row.rs["disgw"]
		fmt.Fprintf(tw, "%s\tdisgw/kfake\t%.2fx\t%.2fx\t\t\t\n", row.label, d.produce/k.produce, d.fetch/k.fetch)
	}
	tw.Flush()
	t.Logf("%d records of %d B, %d partitions, %d round(s), GOMAXPROCS %d, load average before %s after %s\n%s",
		records, valueSize, partitions, rounds, runtime.GOMAXPROCS(0), load0, loadavg(), table.String())
}

// runTarget starts name, produces records (timed from the first Produce to
// the end of Flush), reads them back with a fresh consumer (timed from its
// creation to the last record), checks both tallies and stops the target.
func runTarget(t *testing.T, name string, records int, want tally) result {
	t.Helper()
	runtime.GC() // the previous target's garbage is not this one's cost
	settle()
	tg := startTarget(t, name)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	prod := newClient(t, tg.addr)
	start, cpu := time.Now(), cpuTime()
	got, err := produce(ctx, prod, records)
	pd, pcpu := time.Since(start), cpuTime()-cpu
	prod.Close()
	if err != nil {
		t.Fatalf("%s: produce: %v", name, err)
	}
	if got != want {
		t.Fatalf("%s: acknowledged %+v, want %+v", name, got, want)
	}

	start, cpu = time.Now(), cpuTime()
	cons := newClient(t, tg.addr, consumerOpts()...) // it starts fetching at once
	got, err = consume(ctx, cons, records)
	fd, fcpu := time.Since(start), cpuTime()-cpu
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
