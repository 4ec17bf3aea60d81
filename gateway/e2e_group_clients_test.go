package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/disgw/disgw/gateway"
)

// committedAll waits until the group's committed offset of every partition
// of topic is want.
func committedAll(t *testing.T, adm *kadm.Client, group, topic string, parts int32, want int64) {
	t.Helper()
	var last kadm.OffsetResponses
	deadline := time.Now().Add(30 * time.Second)
	for {
		offs, err := adm.FetchOffsets(context.Background(), group)
		ok := err == nil
		for p := range parts {
			if o, found := offs.Lookup(topic, p); !found || o.At != want {
				ok = false
			}
		}
		if ok {
			return
		}
		last = offs
		if time.Now().After(deadline) {
			t.Fatalf("committed offsets of %s: %v, want %d everywhere (err %v)", group, last, want, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestGroupKafkaPython: kafka-python's group consumer (JoinGroup v2,
// SyncGroup v1, OffsetCommit v2, OffsetFetch v1) consumes and commits; a
// second consumer of the group starts at the committed offsets.
func TestGroupKafkaPython(t *testing.T) {
	py := requireTool(t, "/usr/bin/python3", "-c", "import kafka")
	g := startGateway(t, fastGroups)
	ctx := context.Background()
	const topic, group = "py.group", "py-group"
	adm := kadm.NewClient(g.client(t))
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	produceN(t, g.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression())), topic, 2, 50)
	script := `
import sys, time
from kafka import KafkaConsumer, TopicPartition
bs, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]
def consumer():
    return KafkaConsumer(topic, bootstrap_servers=bs, group_id=group, auto_offset_reset='earliest',
                         enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500)
c = consumer()
got, deadline = 0, time.time() + 60
while got < 100 and time.time() < deadline:
    for recs in c.poll(timeout_ms=500).values():
        got += len(recs)
assert got == 100, got
c.commit()
c.close()
c = consumer()
c.poll(timeout_ms=2000)
tps = [TopicPartition(topic, p) for p in (0, 1)]
print("committed", [c.committed(tp) for tp in tps])
c.close()
print("ok", got)
`
	out := runCmd(t, "", py, "-c", script, g.addr, topic, group)
	if !strings.Contains(out, "committed [50, 50]") || !strings.Contains(out, "ok 100") {
		t.Fatalf("kafka-python: %q", out)
	}
	committedAll(t, adm, group, topic, 2, 50)
}

// TestGroupKcat: kcat -G (librdkafka's balanced consumer: JoinGroup v5,
// OffsetFetch v7) reads everything and commits on close; a second run of
// the group reads only what was produced since.
func TestGroupKcat(t *testing.T) {
	kcat := requireTool(t, "/usr/bin/kcat", "-V")
	g := startGateway(t, fastGroups)
	ctx := context.Background()
	const topic, group = "kcat.group", "kcat-group"
	adm := kadm.NewClient(g.client(t))
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	prod := g.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	produceN(t, prod, topic, 2, 20)
	// No -o: in -G mode it would override the committed offsets.
	args := []string{"-b", g.addr, "-G", group, "-e", "-q", "-f", "%p:%o\n", "-X", "auto.offset.reset=earliest",
		"-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=100", topic}
	out := runCmd(t, "", kcat, args...)
	if n := len(strings.Fields(out)); n != 40 {
		t.Fatalf("first run read %d records, want 40:\n%s", n, out)
	}
	committedAll(t, adm, group, topic, 2, 20)
	produceN(t, prod, topic, 2, 1)
	out = runCmd(t, "", kcat, args...)
	got := strings.Fields(out)
	slices.Sort(got)
	if strings.Join(got, " ") != "0:20 1:20" {
		t.Fatalf("second run read %q, want the two records produced since", got)
	}
	committedAll(t, adm, group, topic, 2, 21)
}

// TestGroupConfluentKafkaPython: confluent-kafka-python (librdkafka,
// OffsetCommit v7) commits synchronously; the offsets read back through a
// new consumer's committed() and through kadm.
func TestGroupConfluentKafkaPython(t *testing.T) {
	py := requireTool(t, "/usr/bin/python3", "-c", "import confluent_kafka")
	g := startGateway(t, fastGroups)
	ctx := context.Background()
	const topic, group = "ck.group", "ck-group"
	adm := kadm.NewClient(g.client(t))
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	produceN(t, g.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression())), topic, 3, 10)
	script := `
import sys, time
from confluent_kafka import Consumer, TopicPartition
bs, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]
conf = {'bootstrap.servers': bs, 'group.id': group, 'auto.offset.reset': 'earliest', 'enable.auto.commit': False}
c = Consumer(conf)
c.subscribe([topic])
got, deadline = 0, time.time() + 60
while got < 30 and time.time() < deadline:
    m = c.poll(0.5)
    if m is None or m.error():
        continue
    got += 1
assert got == 30, got
c.commit(asynchronous=False)
c.close()
c = Consumer(conf)
print("committed", sorted(tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(3)], timeout=30)))
c.close()
print("ok", got)
`
	out := runCmd(t, "", py, "-c", script, g.addr, topic, group)
	if !strings.Contains(out, "committed [10, 10, 10]") || !strings.Contains(out, "ok 30") {
		t.Fatalf("confluent-kafka-python: %q", out)
	}
	committedAll(t, adm, group, topic, 3, 10)
}

// TestGroupKcatTwoProcesses: two `kcat -G` processes on a 4-partition topic
// each get partitions and receive records, and together they read every
// record exactly once, committing before they exit.
func TestGroupKcatTwoProcesses(t *testing.T) {
	kcat := requireTool(t, "/usr/bin/kcat", "-V")
	// A delay long enough for both processes to join the first generation.
	g := startGateway(t, func(c *gateway.Config) {
		fastGroups(c)
		c.GroupInitialRebalanceDelay = 1500 * time.Millisecond
	})
	ctx := context.Background()
	const topic, group, parts, per = "kcat.two", "kcat-two", 4, 50
	adm := kadm.NewClient(g.client(t))
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	prod := g.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	produceN(t, prod, topic, parts, per)
	args := []string{"-b", g.addr, "-G", group, "-e", "-q", "-f", "%p:%o\n", "-X", "auto.offset.reset=earliest",
		"-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=100", topic}
	outs := make([]string, 2)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i] = runCmd(t, "", kcat, args...)
		}()
	}
	wg.Wait()
	seen := map[string]int{}
	for i, out := range outs {
		recs := strings.Fields(out)
		if len(recs) == 0 {
			t.Fatalf("kcat process %d received nothing (one process got every partition)", i)
		}
		for _, r := range recs {
			seen[r]++
		}
	}
	for p := 0; p < parts; p++ {
		for o := 0; o < per; o++ {
			if k := fmt.Sprintf("%d:%d", p, o); seen[k] != 1 {
				t.Fatalf("record %s read %d times", k, seen[k])
			}
		}
	}
	if len(seen) != parts*per {
		t.Fatalf("%d distinct records read, want %d", len(seen), parts*per)
	}
	committedAll(t, adm, group, topic, parts, per)
}
