package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

func runCmd(t *testing.T, stdin string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, out.String(), errb.String())
	}
	if os.Getenv("DEBUG_KCAT") != "" {
		t.Logf("stderr: %s", errb.String())
	}
	return out.String()
}

// TestKcat: kcat -P of 1,000 lines, then kcat -C -e returns exactly those
// lines; kcat -L lists the topic with its partitions; kcat -C -o -1 -e
// returns the last message of each partition.
func TestKcat(t *testing.T) {
	kcat := requireTool(t, "/usr/bin/kcat", "-V")
	g := startGateway(t)
	ctx := context.Background()
	const topic = "kcat.lines"
	adm := kadm.NewClient(g.client(t))
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for i := 0; i < 1000; i++ {
		lines = append(lines, fmt.Sprintf("line-%04d", i))
	}
	// Keyed, so that both partitions get records (librdkafka's sticky
	// partitioner would put unkeyed lines in one partition).
	var keyed []string
	for i, l := range lines {
		keyed = append(keyed, fmt.Sprintf("key%d:%s", i, l))
	}
	runCmd(t, strings.Join(keyed, "\n")+"\n", kcat, "-b", g.addr, "-t", topic, "-P", "-K:")

	out := runCmd(t, "", kcat, "-b", g.addr, "-t", topic, "-C", "-e", "-q")
	got := strings.Split(strings.TrimSpace(out), "\n")
	slices.Sort(got)
	if !slices.Equal(got, lines) {
		t.Fatalf("kcat -C returned %d lines, want %d (first %q)", len(got), len(lines), got[:min(3, len(got))])
	}

	meta := runCmd(t, "", kcat, "-b", g.addr, "-L")
	if !strings.Contains(meta, `topic "kcat.lines" with 2 partitions`) {
		t.Fatalf("kcat -L does not list the topic:\n%s", meta)
	}

	// The last message of each partition, by partition.
	last := map[string]bool{}
	for p := 0; p < 2; p++ {
		out := strings.TrimSpace(runCmd(t, "", kcat, "-b", g.addr, "-t", topic, "-C", "-p", fmt.Sprint(p), "-o", "-1", "-e", "-q", "-f", "%p %o %s\n"))
		if strings.Count(out, "\n") != 0 || out == "" {
			t.Fatalf("partition %d: kcat -o -1 returned %q, want one message", p, out)
		}
		last[out] = true
	}
	offs, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	offs.Each(func(o kadm.ListedOffset) {
		if o.Offset == 0 {
			t.Errorf("partition %d empty", o.Partition)
		}
		found := false
		for l := range last {
			if strings.HasPrefix(l, fmt.Sprintf("%d %d ", o.Partition, o.Offset-1)) {
				found = true
			}
		}
		if !found {
			t.Errorf("partition %d: last message at offset %d not returned; got %v", o.Partition, o.Offset-1, last)
		}
	})
}

// TestKafkaPython: Debian's kafka-python (ApiVersions v0, Metadata v1,
// Fetch v4) produces to a topic that does not exist yet (auto-created
// through Metadata) and reads it back.
func TestKafkaPython(t *testing.T) {
	py := requireTool(t, "/usr/bin/python3", "-c", "import kafka")
	g := startGateway(t)
	script := `
import sys
from kafka import KafkaProducer, KafkaConsumer
bs = sys.argv[1]
p = KafkaProducer(bootstrap_servers=bs, acks='all')
futs = [p.send('py.auto', key=b'k%d' % i, value=b'value-%d' % i) for i in range(200)]
offs = [f.get(timeout=30).offset for f in futs]
p.flush(); p.close()
assert offs == list(range(200)), offs[:5]
import time
c = KafkaConsumer('py.auto', bootstrap_servers=bs, auto_offset_reset='earliest', enable_auto_commit=False)
got, deadline = [], time.time() + 60
while len(got) < 200 and time.time() < deadline:
    for recs in c.poll(timeout_ms=1000).values():
        got.extend((m.offset, m.key, m.value) for m in recs)
c.close()
assert len(got) == 200, len(got)
for i, (o, k, v) in enumerate(got):
    assert (o, k, v) == (i, b'k%d' % i, b'value-%d' % i), (i, o, k, v)
print("ok", len(got))
`
	out := runCmd(t, "", py, "-c", script, g.addr)
	if strings.TrimSpace(out) != "ok 200" {
		t.Fatalf("kafka-python: %q", out)
	}
}
