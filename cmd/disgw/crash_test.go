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
	dir := t.TempDir()
	const crashTopic, parts, rounds = "crash.stream", 3, 5
	type key struct {
		p   int32
		off int64
	}
	acked := map[key]string{}
	var mu sync.Mutex

	startAt := func(t *testing.T, round int) (*proc, string) {
		ready := filepath.Join(t.TempDir(), fmt.Sprintf("ready-%d", round))
		p := start(t, environ(), "serve", "--listen", "127.0.0.1:0", "--data", dir, "--ready-file", ready, "--log-level", "warn")
		return p, p.waitReady(t, ready)
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
