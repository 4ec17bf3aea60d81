package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// idemRun is one end-to-end run of idempotent producers through
// `disgw serve --backend dis` in front of `disgw dislocal`.
type idemRun struct {
	t        *testing.T
	dir      string
	endpoint string
	dis      *disLocal
	gw       *gatewayProc
	addr     string // the gateway's, the same across restarts
	round    int
}

const (
	idemTopic      = "idem.kill9"
	idemPartitions = 4
	idemProducers  = 3
)

func newIdemRun(t *testing.T) *idemRun {
	r := &idemRun{t: t, dir: t.TempDir()}
	r.dis = startDISLocal(t, disLocalOpts{}) // checks no signature
	r.endpoint = r.dis.endpoint
	r.startGateway("127.0.0.1:0")
	return r
}

// startGateway starts the gateway listening on listen and waits for it.
// A port just freed by a killed gateway is taken again (SO_REUSEADDR);
// it is retried a few times in case it is still held.
func (r *idemRun) startGateway(listen string) {
	t := r.t
	for attempt := 0; ; attempt++ {
		r.round++
		ready := filepath.Join(r.dir, fmt.Sprintf("gw-ready-%d", r.round))
		r.gw = startGateway(t, gatewayOpts{dis: r.dis, ownCredentials: true, env: []string{"DISGW_DIS_AK=ak", "DISGW_DIS_SK=sk"},
			listen: listen, ready: ready, args: []string{"--dis-project-id", "idem", "--log-level", idemLogLevel()}, noWait: true})
		deadline := time.Now().Add(60 * time.Second)
		for {
			if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
				if r.addr == "" {
					r.addr = string(b[:len(b)-trailingSpace(b)])
				}
				return
			}
			select {
			case <-r.gw.done:
				if attempt < 20 {
					time.Sleep(250 * time.Millisecond)
				} else {
					t.Fatalf("gateway exited before it was ready: %v\n%s", r.gw.err, r.gw.output(t))
				}
			case <-time.After(20 * time.Millisecond):
				if time.Now().Before(deadline) {
					continue
				}
				t.Fatal("gateway not ready within 60s")
			}
			break
		}
	}
}

func trailingSpace(b []byte) int {
	n := 0
	for n < len(b) && (b[len(b)-1-n] == '\n' || b[len(b)-1-n] == ' ') {
		n++
	}
	return n
}

// idemAck is where a record was acknowledged.
type idemAck struct {
	part   int32
	offset int64
}

// idemLoad is idempotent producers (franz-go defaults) writing to every
// partition; each record carries its producer and its sequence in the
// partition in headers, and most records' values are identical.
type idemLoad struct {
	mu     sync.Mutex
	acked  map[string]idemAck // by "producer/partition/seq"
	failed int
	sent   int
	stop   chan struct{}
	wg     sync.WaitGroup
}

func idemID(prod, part int, seq int) string { return fmt.Sprintf("%d/%d/%d", prod, part, seq) }

func (r *idemRun) startLoad() *idemLoad {
	t := r.t
	l := &idemLoad{acked: map[string]idemAck{}, stop: make(chan struct{})}
	for prod := range idemProducers {
		cl, err := kgo.NewClient(kgo.SeedBrokers(r.addr), kgo.DefaultProduceTopic(idemTopic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond),
			kgo.WithLogger(resetLogger{t, prod}))
		if err != nil {
			t.Fatal(err)
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer cl.Close()
			seqs := make([]int, idemPartitions)
			var inflight sync.WaitGroup
			for n := 0; ; n++ {
				select {
				case <-l.stop:
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
					if err := cl.Flush(ctx); err != nil {
						t.Errorf("producer %d: flush: %v", prod, err)
					}
					cancel()
					inflight.Wait()
					return
				default:
				}
				part := n % idemPartitions
				seq := seqs[part]
				seqs[part]++
				v := []byte("same value")
				if seq%3 == 0 {
					v = []byte(fmt.Sprintf("unique %d/%d/%d", prod, part, seq))
				}
				id := idemID(prod, part, seq)
				inflight.Add(1)
				l.mu.Lock()
				l.sent++
				l.mu.Unlock()
				cl.Produce(context.Background(), &kgo.Record{Partition: int32(part), Value: v,
					Headers: []kgo.RecordHeader{{Key: "id", Value: []byte(id)}}}, func(rec *kgo.Record, err error) {
					defer inflight.Done()
					l.mu.Lock()
					defer l.mu.Unlock()
					if err != nil {
						l.failed++
						return
					}
					l.acked[id] = idemAck{rec.Partition, rec.Offset}
				})
				if n%200 == 199 {
					time.Sleep(20 * time.Millisecond) // a few thousand records/s in all
				}
			}
		}()
	}
	return l
}

func (l *idemLoad) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// finish stops the producers once everything sent is acknowledged or
// failed.
func (l *idemLoad) finish() {
	close(l.stop)
	l.wg.Wait()
}

// verify reads every partition from the start and checks that every
// acknowledged record is there exactly once, at the offset it was
// acknowledged with, each producer's records of a partition in order.
func (r *idemRun) verify(l *idemLoad) {
	t := r.t
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.addr), kgo.ConsumeTopics(idemTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, idemTopic)
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	seen := map[string][]idemAck{}
	last := map[string]int{} // by "producer/partition": last sequence read
	var read int64
	disorder := 0
	for read < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", read, total)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			read++
			var id string
			for _, h := range rec.Headers {
				if h.Key == "id" {
					id = string(h.Value)
				}
			}
			var prod, part, seq int
			if _, err := fmt.Sscanf(id, "%d/%d/%d", &prod, &part, &seq); err != nil || part != int(rec.Partition) {
				t.Fatalf("partition %d offset %d: record id %q", rec.Partition, rec.Offset, id)
			}
			seen[id] = append(seen[id], idemAck{rec.Partition, rec.Offset})
			pk := strconv.Itoa(prod) + "/" + strconv.Itoa(part)
			if prev, ok := last[pk]; ok && seq <= prev && len(seen[id]) == 1 {
				disorder++
			}
			last[pk] = max(last[pk], seq)
		})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	dups, missing, moved := 0, 0, 0
	var odd []string // diagnostics: the records stored twice or acknowledged elsewhere
	for id, at := range seen {
		dups += len(at) - 1
		if len(at) > 1 {
			a, ok := l.acked[id]
			odd = append(odd, fmt.Sprintf("%s stored at %v, acknowledged %v at %d", id, at, ok, a.offset))
		}
	}
	for id, a := range l.acked {
		at := seen[id]
		switch {
		case len(at) == 0:
			missing++
			odd = append(odd, fmt.Sprintf("%s missing, acknowledged at %d/%d", id, a.part, a.offset))
		case at[0] != a:
			moved++
			if len(at) == 1 {
				odd = append(odd, fmt.Sprintf("%s stored at %v, acknowledged at %d", id, at, a.offset))
			}
		}
	}
	idemOddRuns(t, odd)
	t.Logf("sent %d, acknowledged %d, failed %d; stored %d: %d duplicates, %d acknowledged missing, %d acknowledged at another offset, %d out of order",
		l.sent, len(l.acked), l.failed, total, dups, missing, moved, disorder)
	if dups > 0 || missing > 0 || moved > 0 || disorder > 0 {
		t.Errorf("%d duplicates, %d acknowledged records missing, %d acknowledged at another offset than they are, %d out of order",
			dups, missing, moved, disorder)
	}
}

// idemOddRuns logs the diagnostics of verify in runs: lines of the same
// producer and partition with consecutive sequences are one line, the
// first and the last of the run with its length.
func idemOddRuns(t *testing.T, odd []string) {
	type line struct {
		prod, part, seq int
		text            string
	}
	var ls []line
	for _, o := range odd {
		var l line
		if _, err := fmt.Sscanf(o, "%d/%d/%d", &l.prod, &l.part, &l.seq); err != nil {
			continue
		}
		l.text = o
		ls = append(ls, l)
	}
	slices.SortFunc(ls, func(a, b line) int {
		return cmp.Or(cmp.Compare(a.part, b.part), cmp.Compare(a.prod, b.prod), cmp.Compare(a.seq, b.seq))
	})
	shown := 0
	for i := 0; i < len(ls); {
		j := i + 1
		for j < len(ls) && ls[j].part == ls[i].part && ls[j].prod == ls[i].prod && ls[j].seq == ls[j-1].seq+1 {
			j++
		}
		if shown < 60 {
			t.Logf("%d records: %s ... %s", j-i, ls[i].text, ls[j-1].text)
		}
		shown++
		i = j
	}
	if shown > 60 {
		t.Logf("... %d runs in all", shown)
	}
}

func (r *idemRun) createTopic() {
	t := r.t
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), idemPartitions, 1, nil, idemTopic); err != nil {
		t.Fatal(err)
	}
}

// waitAcked waits until n more records than now are acknowledged.
func (r *idemRun) waitAcked(l *idemLoad, n int) {
	want := l.ackedCount() + n
	deadline := time.Now().Add(2 * time.Minute)
	for l.ackedCount() < want {
		if time.Now().After(deadline) {
			r.t.Fatalf("%d records acknowledged, waited for %d", l.ackedCount(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDISIdempotentKill9: idempotent franz-go producers (defaults) write
// to 4 partitions through the gateway on DIS (dislocal), most records with
// the same value; the gateway is killed with SIGKILL in the middle and
// started again on the same port. Afterwards every acknowledged record is
// in DIS exactly once, at the offset it was acknowledged with, each
// producer's records in order. Before the dedupe window was kept in DIS
// (disrest/idem.go), a batch written whose answer was lost with the
// process was written again by the producer's retry; before a batch cut
// short held its partition's other writes until its retry came, its rest
// was written after other batches (records at offsets other than those
// acknowledged) and a second batch cut short lost the first (duplicates).
//
// 3 kills by default (about 65 s), 10 in CI (CI=true) or with
// DISGW_TEST_IDEM_KILL9=1 (about 190 s, 2.5 to 3.5 min under -race on a
// busy 2-core machine), as the issue asks; IDEM_TEST_TRIALS
// sets the number. IDEM_TEST_LOG=info keeps the gateway's resolutions in
// the output (shown when the test fails), IDEM_TEST_CLIENT_LOG=1 logs
// every franz-go message.
func TestDISIdempotentKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("long: a kill -9 loop under load, a minute or more")
	}
	t.Parallel()
	r := newIdemRun(t)
	r.createTopic()
	l := r.startLoad()
	trials := 3
	if os.Getenv("DISGW_TEST_IDEM_KILL9") == "1" || os.Getenv("CI") == "true" {
		trials = 10
	}
	if v, err := strconv.Atoi(os.Getenv("IDEM_TEST_TRIALS")); err == nil {
		trials = v
	}
	for trial := range trials {
		if trial > 0 {
			time.Sleep(time.Second) // the retries of the last trial answered first
		}
		t0 := time.Now()
		r.waitAcked(l, 2000+trial*137%1000)
		t1 := time.Now()
		if err := r.gw.cmd.Process.Signal(os.Kill); err != nil {
			t.Fatal(err)
		}
		<-r.gw.done
		r.startGateway(r.addr)
		t.Logf("trial %d: %v for the acknowledgements, %v to kill and restart", trial, t1.Sub(t0), time.Since(t1))
	}
	t0 := time.Now()
	r.waitAcked(l, 1000)
	t1 := time.Now()
	l.finish()
	t2 := time.Now()
	r.verify(l)
	t.Logf("%v for the last acknowledgements, %v to flush, %v to verify", t1.Sub(t0), t2.Sub(t1), time.Since(t2))
}

// TestDISIdempotentOutage: the same load while dislocal is stopped
// (SIGSTOP) for 65 s, longer than the gateway's 60 s retry limit, then
// resumed: the PutRecords in flight have an unknown outcome, and the
// producers' retries must neither be written twice nor lost. About 2 min.
func TestDISIdempotentOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("long: a 65 s DIS outage")
	}
	t.Parallel()
	r := newIdemRun(t)
	r.createTopic()
	l := r.startLoad()
	r.waitAcked(l, 3000)
	if err := r.dis.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(65 * time.Second)
	if err := r.dis.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	r.waitAcked(l, 3000)
	l.finish()
	r.verify(l)
}

func idemLogLevel() string {
	if v := os.Getenv("IDEM_TEST_LOG"); v != "" {
		return v
	}
	return "warn"
}

// resetLogger logs franz-go's producer-ID resets (after an
// OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID or
// INVALID_PRODUCER_EPOCH answer), after which it writes its batches again
// under a new producer id or epoch: the duplicates they make are what
// this test counts.
type resetLogger struct {
	t    *testing.T
	prod int
}

func (l resetLogger) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (l resetLogger) Log(level kgo.LogLevel, msg string, kv ...any) {
	if strings.Contains(msg, "producer ID") || strings.Contains(msg, "producer epoch") || os.Getenv("IDEM_TEST_CLIENT_LOG") != "" {
		l.t.Logf("%s producer %d: %s %v", time.Now().Format("15:04:05.000"), l.prod, msg, kv)
	}
}
