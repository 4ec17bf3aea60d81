package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTxnKill9 kills the gateway (embedded store) with SIGKILL while a
// transactional producer commits transactions of ten records over three
// partitions, three times, restarting it on the same data directory. After
// each restart a read_committed consumer must find every transaction whose
// commit was acknowledged whole, and every other transaction whole or not at
// all (the one whose EndTxn was in flight may have been decided), nothing
// twice. The transaction open at the kill is aborted at its timeout (3 s).
func TestTxnKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("long: a kill -9 loop under a transactional producer")
	}
	dir := t.TempDir()
	const topic, perTxn, rounds = "txn.crash", 10, 3
	acked := map[string]bool{}  // transaction name -> commit acknowledged
	ending := map[string]bool{} // EndTxn sent: only these may be read
	started := map[string]bool{}
	var mu sync.Mutex
	var g *gatewayProc
	for round := range rounds {
		ready := filepath.Join(t.TempDir(), fmt.Sprintf("ready-%d", round))
		g = startGateway(t, gatewayOpts{data: dir, ready: ready, args: []string{"--log-level", "warn"}})
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
