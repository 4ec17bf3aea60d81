package main

// Transactions with several nodes (docs/transactions.md, "Several
// nodes"): three cluster nodes in front of one dislocal.

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnCoordinatorOf asks cl which node coordinates transactional id.
func txnCoordinatorOf(t *testing.T, ctx context.Context, cl *kgo.Client, id string) int32 {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKeys = 1, []string{id}
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && len(resp.Coordinators) == 1 && resp.Coordinators[0].ErrorCode == 0 {
			return resp.Coordinators[0].NodeID
		}
		if time.Now().After(deadline) {
			t.Fatalf("FindCoordinator of transactional id %s: %v %+v", id, err, resp)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestClusterTxn: three nodes; every partition's leader writes its markers
// and answers its last stable offset.
//
//   - A transaction writing to six partitions (led by all three nodes)
//     and aborted is seen by read_uncommitted consumers and never by
//     read_committed ones; one committed after it is seen by both.
//   - A franz-go GroupTransactSession (consume-transform-produce, its
//     offsets committed in the transactions, its group coordinated by one
//     node, its transactional id by another or the same) copies 3000
//     records while the node coordinating its transactional id is killed
//     (SIGKILL) and restarted: the output read_committed holds every
//     record exactly once.
func TestClusterTxn(t *testing.T) {
	if testing.Short() {
		t.Skip("long: three cluster nodes, one killed")
	}
	c := startRollCluster(t, rollClusterOpts{})
	seeds := kgo.SeedBrokers(c.addrs()...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	src, err := kgo.NewClient(seeds, kgo.DefaultProduceTopic("etl.in"), kgo.RequestRetries(100))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	adm := kadm.NewClient(src)
	for _, tp := range []string{"etl.in", "etl.out", "txn.abort"} {
		if _, err := adm.CreateTopic(ctx, 6, 1, nil, tp); err != nil {
			t.Fatal(err)
		}
	}

	// An aborted transaction, then a committed one, over six partitions.
	p, err := kgo.NewClient(seeds, kgo.TransactionalID("cluster-abort"), kgo.DefaultProduceTopic("txn.abort"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequestRetries(100))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for round, commit := range []kgo.TransactionEndTry{kgo.TryAbort, kgo.TryCommit} {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for part := range int32(6) {
			v := fmt.Sprintf("round%d-p%d", round, part)
			if err := p.ProduceSync(ctx, &kgo.Record{Partition: part, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
		}
		// Open: each leader holds its last stable offset below the
		// records (ListOffsets read_committed, at every partition's
		// leader).
		checkStable(t, ctx, adm, "txn.abort", fmt.Sprintf("round %d, transaction open", round),
			func(stable, hw int64) bool { return stable < hw })
		if err := p.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("end transaction %d: %v", round, err)
		}
	}
	committed := readCommittedValues(t, c.addrs()[0], "txn.abort")
	for part := range 6 {
		if committed[fmt.Sprintf("round0-p%d", part)] != 0 {
			t.Errorf("read_committed read the aborted round0-p%d", part)
		}
		if committed[fmt.Sprintf("round1-p%d", part)] != 1 {
			t.Errorf("read_committed read the committed round1-p%d %d times", part, committed[fmt.Sprintf("round1-p%d", part)])
		}
	}
	checkStable(t, ctx, adm, "txn.abort", "transactions ended", func(stable, hw int64) bool { return stable == hw })
	if all := readValues(t, c.addrs()[1], "txn.abort", kgo.ReadUncommitted()); len(all) != 12 {
		t.Errorf("read_uncommitted read %d distinct values, want 12 (the aborted ones too): %v", len(all), all)
	}

	// Consume-transform-produce with the transaction's coordinator killed.
	const n = 3000
	for i := range n {
		src.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i % 17)), Value: []byte(fmt.Sprintf("r%04d", i))}, nil)
	}
	if err := src.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	const id = "cluster-etl"
	sess, err := kgo.NewGroupTransactSession(seeds, kgo.TransactionalID(id),
		kgo.ConsumerGroup("cluster-etl"), kgo.ConsumeTopics("etl.in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic("etl.out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.TransactionTimeout(10*time.Second), kgo.RequestRetries(1000))
	if err != nil {
		t.Fatal(err)
	}
	stop, ends := runETL(t, ctx, sess, 30*time.Second)
	// Let a few transactions commit, then kill the id's coordinator.
	for ok := 0; ok < 3; {
		select {
		case err := <-ends:
			if err == nil {
				ok++
			}
		case <-ctx.Done():
			t.Fatal("no transaction committed")
		}
	}
	victim := c.node(txnCoordinatorOf(t, ctx, src, id))
	t.Logf("killing node %d, the coordinator of %s", victim.id, id)
	victim.gw.stop(t, syscall.SIGKILL)
	time.Sleep(time.Second)
	c.startNode(victim)

	waitValues(t, c.addrs()[0], "etl.out", n, 3*time.Minute)
	time.Sleep(2 * time.Second)
	stop()
	sess.Close()
	got := readCommittedValues(t, c.addrs()[2], "etl.out")
	missing, twice := 0, 0
	for i := range n {
		switch k := got[fmt.Sprintf("out-r%04d", i)]; {
		case k == 0:
			missing++
		case k > 1:
			twice++
		}
	}
	if missing > 0 || twice > 0 || len(got) != n {
		t.Errorf("output read_committed: %d distinct records (want %d), %d missing, %d read more than once", len(got), n, missing, twice)
	}
	// The group's committed offsets are the input's ends (a new client:
	// src's connection to the killed node may be dead).
	cl, err := kgo.NewClient(seeds, kgo.RequestRetries(100))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm = kadm.NewClient(cl)
	offs, err := adm.FetchOffsets(ctx, "cluster-etl")
	if err != nil {
		t.Fatal(err)
	}
	ends2, err := adm.ListEndOffsets(ctx, "etl.in")
	if err != nil {
		t.Fatal(err)
	}
	ends2.Each(func(o kadm.ListedOffset) {
		if co, ok := offs.Lookup("etl.in", o.Partition); !ok || co.At != o.Offset {
			t.Errorf("group's committed offset of etl.in/%d: %v (%v), want %d", o.Partition, co.At, co.Err, o.Offset)
		}
	})
}

// checkStable lists each partition's last stable offset (ListOffsets
// read_committed) and high watermark and reports those for which ok is
// false.
func checkStable(t *testing.T, ctx context.Context, adm *kadm.Client, topic, what string, ok func(stable, hw int64) bool) {
	t.Helper()
	stable, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end.Each(func(o kadm.ListedOffset) {
		if s, found := stable.Lookup(topic, o.Partition); !found || s.Err != nil || !ok(s.Offset, o.Offset) {
			t.Errorf("%s: %s/%d last stable offset %d (%v), high watermark %d", what, topic, o.Partition, s.Offset, s.Err, o.Offset)
		}
	})
}
