package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTxnKill9 kills the gateway (on each backend) with SIGKILL while a
// transactional producer commits transactions of ten records over three
// partitions, three times, restarting it on the same data (directory, or
// dislocal). After
// each restart a read_committed consumer must find every transaction whose
// commit was acknowledged whole, and every other transaction whole or not at
// all (the one whose EndTxn was in flight may have been decided), nothing
// twice. The transaction open at the kill is aborted at its timeout (3 s).
func TestTxnKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("long: a kill -9 loop under a transactional producer")
	}
	forEachBackend(t, txnKill9)
}

func txnKill9(t *testing.T, b backendFixture) {
	dir := t.TempDir()
	const topic, perTxn, rounds = "txn.crash", 10, 3
	acked := map[string]bool{}  // transaction name -> commit acknowledged
	ending := map[string]bool{} // EndTxn sent: only these may be read
	started := map[string]bool{}
	var mu sync.Mutex
	var g *gatewayProc
	for round := range rounds {
		ready := filepath.Join(t.TempDir(), fmt.Sprintf("ready-%d", round))
		g = startGateway(t, gatewayOpts{dis: b.dis, data: dir, ready: ready, args: []string{"--log-level", "warn"}})
		if round == 0 {
			adm, err := kgo.NewClient(kgo.SeedBrokers(g.addr))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			if _, err := kadm.NewClient(adm).CreateTopic(ctx, 3, 1, nil, topic); err != nil {
				t.Fatal(err)
			}
			cancel()
			adm.Close()
		} else {
			verifyTxns(t, g.addr, topic, perTxn, acked, ending)
		}
		p, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.TransactionalID("crash-txn"), kgo.DefaultProduceTopic(topic),
			kgo.TransactionTimeout(3*time.Second), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for k := 0; ; k++ {
				name := fmt.Sprintf("r%d-t%03d", round, k)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				if err := p.BeginTransaction(); err != nil {
					cancel()
					return
				}
				mu.Lock()
				started[name] = true
				mu.Unlock()
				for i := range perTxn {
					p.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%s-%02d", name, i)), Partition: int32(i % 3)}, nil)
				}
				err := p.Flush(ctx)
				if err == nil {
					mu.Lock()
					ending[name] = true
					mu.Unlock()
					err = p.EndTransaction(ctx, kgo.TryCommit)
				}
				cancel()
				if err != nil {
					return
				}
				mu.Lock()
				acked[name] = true
				mu.Unlock()
			}
		}()
		time.Sleep(time.Duration(700+300*round) * time.Millisecond)
		g.stop(t, syscall.SIGKILL)
		<-done
		p.Close()
	}
	g = g.restart(t)
	verifyTxns(t, g.addr, topic, perTxn, acked, ending)
	mu.Lock()
	defer mu.Unlock()
	if len(acked) < rounds {
		t.Fatalf("only %d transactions committed in %d rounds: the test proves little", len(acked), rounds)
	}
}

// verifyTxns reads topic with read_committed until every acknowledged
// transaction is there and nothing more comes for 4 s (past the 3 s timeout
// of a transaction left open), and checks each transaction is whole or
// absent, acknowledged ones whole, and none read whose commit was never
// asked for (ending).
func verifyTxns(t *testing.T, addr, topic string, perTxn int, acked, ending map[string]bool) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]int{}
	counts := map[string]int{}
	quietSince := time.Now()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			v := string(r.Value)
			seen[v]++
			counts[v[:strings.LastIndex(v, "-")]]++
		})
		if n > 0 {
			quietSince = time.Now()
		}
		all := true
		for name := range acked {
			if counts[name] < perTxn {
				all = false
			}
		}
		if all && time.Since(quietSince) > 4*time.Second {
			break
		}
	}
	for v, n := range seen {
		if n > 1 {
			t.Errorf("%s read %d times", v, n)
		}
	}
	for name := range acked {
		if counts[name] != perTxn {
			t.Errorf("committed transaction %s: %d of %d records", name, counts[name], perTxn)
		}
	}
	for name, n := range counts {
		if !ending[name] {
			t.Errorf("transaction %s read, but its commit was never asked for", name)
		}
		if n != perTxn && n != 0 {
			t.Errorf("transaction %s read in part: %d of %d records", name, n, perTxn)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// TestTxnETLKill9 runs franz-go's GroupTransactSession from one topic to
// another (consume, transform, produce and commit the offsets in one
// transaction) while the gateway (on each backend) is killed with SIGKILL
// and restarted on the same address and data (directory, or dislocal): the
// output read with read_committed must be the input exactly once, nothing
// missing, nothing twice.
func TestTxnETLKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("long: a kill -9 under a consume-transform-produce session")
	}
	forEachBackend(t, txnETLKill9)
}

func txnETLKill9(t *testing.T, b backendFixture) {
	addr := freeAddr(t)
	dir := filepath.Join(t.TempDir(), "data")
	g := startGateway(t, gatewayOpts{dis: b.dis, data: dir, listen: addr, args: []string{"--log-level", "warn"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("etl.in"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	adm := kadm.NewClient(src)
	for _, tp := range []string{"etl.in", "etl.out"} {
		if _, err := adm.CreateTopic(ctx, 3, 1, nil, tp); err != nil {
			t.Fatal(err)
		}
	}
	const n = 3000
	for i := range n {
		src.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i % 17)), Value: []byte(fmt.Sprintf("r%04d", i))}, nil)
	}
	if err := src.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(addr), kgo.TransactionalID("etl-kill"),
		kgo.ConsumerGroup("etl-kill"), kgo.ConsumeTopics("etl.in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic("etl.out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.TransactionTimeout(5*time.Second), kgo.RequestRetries(100))
	if err != nil {
		t.Fatal(err)
	}
	stop, _ := runETL(t, ctx, sess, 15*time.Second)
	time.Sleep(300 * time.Millisecond)
	g.stop(t, syscall.SIGKILL)
	g.restart(t) // on the same address: the session's clients reconnect

	// Wait until the output holds n records read_committed, then a little
	// longer: anything more is a duplicate.
	waitValues(t, addr, "etl.out", n, 2*time.Minute)
	time.Sleep(2 * time.Second)
	stop()
	sess.Close()
	got := readCommittedValues(t, addr, "etl.out")
	for i := range n {
		v := fmt.Sprintf("out-r%04d", i)
		if got[v] != 1 {
			t.Errorf("%s read %d times", v, got[v])
		}
	}
	if len(got) != n {
		t.Errorf("%d distinct records in the output, want %d", len(got), n)
	}
}

// runETL runs a consume-transform-produce loop on sess until the stop it
// returns is called: each round polls up to 100 records (2 s at most),
// copies them to the session's default topic with "out-" before each
// value and ends the transaction (TryCommit; an error aborts: the records
// come again), giving EndTransaction endWait. ends receives each round's
// End error (nil: committed) while someone reads it.
func runETL(t *testing.T, ctx context.Context, sess *kgo.GroupTransactSession, endWait time.Duration) (stop func(), ends <-chan error) {
	t.Helper()
	quit := make(chan struct{})
	done := make(chan struct{})
	endc := make(chan error)
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			default:
			}
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			fs := sess.PollRecords(pctx, 100) // 30 transactions or more: a kill lands mid-run
			pcancel()
			if err := sess.Begin(); err != nil {
				t.Errorf("begin: %v", err)
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: append([]byte("out-"), r.Value...)}, nil)
			})
			ectx, ecancel := context.WithTimeout(ctx, endWait)
			_, err := sess.End(ectx, kgo.TryCommit)
			ecancel()
			select {
			case endc <- err:
			default:
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func() { close(quit); <-done }, endc
}

// waitValues waits, at most within, until topic read read_committed
// through addr holds n records or more.
func waitValues(t *testing.T, addr, topic string, n int, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(time.Second) {
		total := 0
		for _, c := range readCommittedValues(t, addr, topic) {
			total += c
		}
		if total >= n {
			return
		}
	}
}

// readCommittedValues reads topic from the start with read_committed until a
// poll of 2 s brings nothing, and counts each value.
func readCommittedValues(t *testing.T, addr, topic string) map[string]int {
	t.Helper()
	return readValues(t, addr, topic, kgo.ReadCommitted())
}

// readValues reads topic from the start at isolation level iso until a
// poll of 2 s brings nothing, and counts each value.
func readValues(t *testing.T, addr, topic string, iso kgo.IsolationLevel) map[string]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[string]int{}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		k := 0
		fs.EachRecord(func(r *kgo.Record) { k++; out[string(r.Value)]++ })
		if k == 0 {
			break
		}
	}
	return out
}
