package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKill9 kills the gateway process with SIGKILL in the middle of an
// acks=all produce stream, five times, restarting it on the same data
// directory each time; every acknowledged record must then be readable at
// the offset it was acknowledged with, byte-identical. (A kill -9 keeps the
// page cache, so this proves the process-crash path; the machine-crash path
// is proven by backendtest's crash test on Pebble's crashable filesystem.)
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("long: a kill -9 loop, five rounds")
	}
	dir := t.TempDir()
	const crashTopic, parts, rounds = "crash.stream", 3, 5
	type key struct {
		p   int32
		off int64
	}
	acked := map[key]string{}
	var mu sync.Mutex

	startAt := func(t *testing.T, round int) (*gatewayProc, string) {
		ready := filepath.Join(t.TempDir(), fmt.Sprintf("ready-%d", round))
		p := startGateway(t, gatewayOpts{data: dir, ready: ready, args: []string{"--log-level", "warn"}})
		return p, p.addr
	}
	verify := func(t *testing.T, addr string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(crashTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, crashTopic)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(0)
		ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
		got := map[key]string{}
		for int64(len(got)) < want {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read %d of %d records after restart", len(got), want)
			}
			fs.EachRecord(func(r *kgo.Record) { got[key{r.Partition, r.Offset}] = string(r.Value) })
		}
		mu.Lock()
		defer mu.Unlock()
		for k, v := range acked {
			if got[k] != v {
				t.Fatalf("acknowledged record %q at partition %d offset %d reads back as %q", v, k.p, k.off, got[k])
			}
		}
		t.Logf("verified %d acknowledged records (%d stored)", len(acked), len(got))
	}

	for round := 0; round < rounds; round++ {
		p, addr := startAt(t, round)
		if round == 0 {
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), parts, 1, nil, crashTopic); err != nil {
				t.Fatal(err)
			}
			cl.Close()
		} else {
			verify(t, addr)
		}
		prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(crashTopic),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond),
			kgo.RecordRetries(3), kgo.RecordDeliveryTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		killAt := 2000 + rand.IntN(3000)
		var n, ackedThisRound int
		var once sync.Once
		killed := make(chan struct{})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		for {
			select {
			case <-killed:
			case <-ctx.Done():
				t.Fatalf("round %d: %d acknowledged, never reached %d", round, ackedThisRound, killAt)
			default:
				v := fmt.Sprintf("r%d-%06d", round, n)
				n++
				prod.Produce(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}, func(r *kgo.Record, err error) {
					if err != nil {
						return
					}
					mu.Lock()
					acked[key{r.Partition, r.Offset}] = string(r.Value)
					ackedThisRound++
					c := ackedThisRound
					mu.Unlock()
					if c >= killAt {
						once.Do(func() {
							_ = p.cmd.Process.Signal(os.Kill)
							close(killed)
						})
					}
				})
				continue
			}
			break
		}
		<-p.done
		cancel()
		prod.Close()
	}
	_, addr := startAt(t, rounds)
	verify(t, addr)
}

// TestKill9GroupResume: a group commits, the gateway is killed with
// SIGKILL and started again, and a new consumer of the same group starts
// exactly at the committed offsets: no record before them, none skipped.
func TestKill9GroupResume(t *testing.T) {
	if testing.Short() {
		t.Skip("long: kill -9 after 900 records produced one at a time")
	}
	dir := t.TempDir()
	const grpTopic, group, parts, n = "grp.crash", "crash-group", 3, 900
	startAt := func(name string) (*gatewayProc, string) {
		ready := filepath.Join(t.TempDir(), name)
		p := startGateway(t, gatewayOpts{data: dir, ready: ready, env: []string{"DISGW_GROUP_INITIAL_REBALANCE_DELAY=100ms"},
			args: []string{"--log-level", "warn"}})
		return p, p.addr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	p, addr := startAt("first")
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(grpTopic))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(prod).CreateTopic(ctx, parts, 1, nil, grpTopic); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("v%04d", i)
		if err := prod.ProduceSync(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v), Partition: int32(i % parts)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	prod.Close()

	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(grpTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for read < n/2 {
		fs := cons.PollRecords(ctx, n/2-read)
		if ctx.Err() != nil {
			t.Fatalf("read %d before the commit", read)
		}
		read += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	committed, err := kadm.NewClient(cons).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	committed.Each(func(o kadm.OffsetResponse) { want[o.Partition] = o.At })
	if len(want) == 0 {
		t.Fatal("nothing committed")
	}
	_ = p.cmd.Process.Signal(os.Kill)
	<-p.done
	cons.Close()

	_, addr = startAt("second")
	again, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(grpTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	first := map[int32]int64{}
	next := map[int32]int64{}
	got := 0
	total := int64(0)
	for p := int32(0); p < parts; p++ {
		total += int64(n/parts) - want[p]
	}
	for int64(got) < total {
		fs := again.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d after the restart", got, total)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if _, ok := first[r.Partition]; !ok {
				first[r.Partition] = r.Offset
				next[r.Partition] = r.Offset
			}
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: offset %d after %d (skipped)", r.Partition, r.Offset, next[r.Partition]-1)
			}
			next[r.Partition]++
			got++
		})
	}
	for p, off := range first {
		if off != want[p] {
			t.Fatalf("partition %d resumed at %d, committed %d", p, off, want[p])
		}
	}
}
