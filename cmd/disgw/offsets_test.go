package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCommitAnyOffset runs librdkafka's 0099_commit_metadata and
// 0140_commit_metadata semantics on both backends: franz-go commits offset
// 10 with metadata on an empty partition and an offset past the end of a
// partition with records, and fetches both back exactly (offset, metadata,
// leader epoch), as Kafka, which takes any offset, answers, also after the
// gateway restarts; confluent-kafka-python (librdkafka, the compat venv's)
// commits 10 with metadata on the empty partition and a new consumer reads
// it back.
func TestCommitAnyOffset(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backendFixture) {
		gw := b.gateway(t, gatewayOpts{args: b.onDIS("--dis-region", "cn-north-4")})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		const topic, group = "commit.any", "commit.any.group"
		var commit kadm.Offsets
		commit.Add(kadm.Offset{Topic: topic, Partition: 0, At: 10, LeaderEpoch: 0, Metadata: "Hello world!"})
		commit.Add(kadm.Offset{Topic: topic, Partition: 1, At: 1000, LeaderEpoch: -1, Metadata: "past the end"})
		fetch := func(what, addr string) {
			t.Helper()
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			fetched, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			commit.Each(func(want kadm.Offset) {
				got, ok := fetched.Lookup(want.Topic, want.Partition)
				if !ok || got.Err != nil || got.At != want.At || got.Metadata != want.Metadata || got.LeaderEpoch != want.LeaderEpoch {
					t.Fatalf("%s: %s[%d] = %+v, want %+v", what, want.Topic, want.Partition, got, want)
				}
			})
		}

		cl, err := kgo.NewClient(kgo.SeedBrokers(gw.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		if rs, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil || rs.Err != nil {
			t.Fatalf("create topic: %v, %v", rs.Err, err)
		}
		recs := []*kgo.Record{{Topic: topic, Partition: 1, Value: []byte("a")}, {Topic: topic, Partition: 1, Value: []byte("b")}}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		if rs, err := adm.CommitOffsets(ctx, group, commit); err != nil || rs.Error() != nil {
			t.Fatalf("commit 10 on an empty partition and 1000 past the end: %v, %v; want both taken", rs.Error(), err)
		}
		fetch("fetched", gw.addr)
		librdkafkaCommitMetadata(t, gw.addr, topic)
		cl.Close()

		// A restarted gateway reads them back from its store (DIS, or the
		// embedded store's data directory).
		if code := gw.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("serve exit code after SIGTERM = %d", code)
		}
		fetch("after a restart", gw.restart(t).addr)
	})
}

// librdkafkaCommitMetadata is librdkafka's 0099_commit_metadata through
// confluent-kafka-python: a consumer commits offset 10 with metadata on
// partition 0 of topic (empty), and a new consumer of the group reads the
// offset and the metadata back. Skipped without the compat venv's
// confluent-kafka-python.
func librdkafkaCommitMetadata(t *testing.T, addr, topic string) {
	t.Helper()
	home, _ := os.UserHomeDir()
	py := filepath.Join(home, ".cache", "disgw-compat", "venv", "bin", "python")
	if err := exec.Command(py, "-c", "import confluent_kafka").Run(); err != nil {
		t.Log("confluent-kafka-python not installed in the compat venv: librdkafka's check skipped")
		return
	}
	script := fmt.Sprintf(`
from confluent_kafka import Consumer, TopicPartition
conf = {"bootstrap.servers": %q, "group.id": "commit.any.librdkafka", "enable.auto.commit": False}
c = Consumer(conf)
c.commit(offsets=[TopicPartition(%q, 0, 10, "Hello world!")], asynchronous=False)
c.close()
c = Consumer(conf)
got = c.committed([TopicPartition(%q, 0)], timeout=30)[0]
c.close()
assert got.error is None and got.offset == 10 and got.metadata == "Hello world!", (got.error, got.offset, got.metadata)
print("ok")
`, addr, topic, topic)
	out, err := exec.Command(py, "-c", script).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("librdkafka commit of 10 with metadata on an empty partition: %v\n%s", err, out)
	}
}
