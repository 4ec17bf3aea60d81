package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDeleteRecordsRestart runs DeleteRecords through the binary on both
// backends (the embedded store; --backend dis in front of disgw
// dislocal), restarts the gateway and checks the log start offset is
// still there: ListOffsets earliest, and a consumer asked to start at
// offset 0 that Fetch sends back to the start (OFFSET_OUT_OF_RANGE, reset
// to earliest) reads from it. Where Kafka's tools are installed
// (~/.cache/disgw-compat/kafka-4.4.0, make compat fetches them), it runs
// kafka-delete-records and kafka-log-dirs --describe and checks they print
// what they print against a one-node Kafka 4.4 (recorded from it), modulo
// the broker id, the log dir and the sizes.
func TestDeleteRecordsRestart(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backendFixture) {
		dir := t.TempDir()
		logDir := filepath.Join(dir, "data")
		if b.dis != nil {
			logDir = "dis:" + b.dis.endpoint + "/" + b.dis.opts.account.project
		}
		const topic = "dr.restart"
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()

		gw := b.gateway(t, gatewayOpts{data: logDir})
		addr := gw.addr
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		var rs []*kgo.Record
		for i := range 10 {
			rs = append(rs, &kgo.Record{Partition: 0, Value: fmt.Appendf(nil, "v%d", i)})
		}
		pcl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		if err := pcl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		pcl.Close()

		if java := kafkaTools(t); java != nil {
			offsets := filepath.Join(dir, "offsets.json")
			js := fmt.Sprintf(`{"partitions":[{"topic":%q,"partition":0,"offset":4},{"topic":%q,"partition":1,"offset":-1}],"version":1}`, topic, topic)
			if err := os.WriteFile(offsets, []byte(js), 0o600); err != nil {
				t.Fatal(err)
			}
			out := java(t, "org.apache.kafka.tools.DeleteRecordsCommand", "--bootstrap-server", addr, "--offset-json-file", offsets)
			// Kafka 4.4 printed exactly these lines (topic renamed).
			want := "Executing records delete operation\nRecords delete operation completed:\n" +
				"partition: " + topic + "-0\tlow_watermark: 4\npartition: " + topic + "-1\tlow_watermark: 0\n"
			// The tool prints the partitions in its HashMap's order.
			if sortLines(out) != sortLines(want) {
				t.Errorf("kafka-delete-records printed\n%s\nwant (as against Kafka 4.4)\n%s", out, want)
			}
			out = java(t, "org.apache.kafka.tools.LogDirsCommand", "--bootstrap-server", addr, "--describe", "--topic-list", topic)
			// Kafka 4.4: {"brokers":[{"broker":1,"logDirs":[{"partitions":[{"partition":"T-0","size":151,...},
			// {"partition":"T-1","size":0,...}],"error":null,"logDir":"/path"}]}],"version":1}
			norm := regexp.MustCompile(`"broker":-?\d+`).ReplaceAllString(out, `"broker":ID`)
			norm = regexp.MustCompile(`"size":-?\d+`).ReplaceAllString(norm, `"size":N`)
			want = "Querying brokers for log directories information\nReceived log directory information from brokers ID\n" +
				`{"brokers":[{"broker":ID,"logDirs":[{"partitions":[{"partition":"` + topic + `-0","size":N,"offsetLag":0,"isFuture":false},` +
				`{"partition":"` + topic + `-1","size":N,"offsetLag":0,"isFuture":false}],"error":null,"logDir":"` + logDir + `"}]}],"version":1}` + "\n"
			norm = regexp.MustCompile(`brokers \d+\n`).ReplaceAllString(norm, "brokers ID\n")
			norm = sortPartitions(norm)
			if norm != want {
				t.Errorf("kafka-log-dirs --describe printed\n%s\nwant (as against Kafka 4.4, modulo broker id and sizes)\n%s", out, want)
			}
		} else {
			os := kadm.Offsets{}
			os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 4})
			if _, err := adm.DeleteRecords(ctx, os); err != nil {
				t.Fatal(err)
			}
		}
		wantStart := func(addr string) {
			t.Helper()
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			starts, err := kadm.NewClient(cl).ListStartOffsets(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			if o, _ := starts.Lookup(topic, 0); o.Err != nil || o.Offset != 4 {
				t.Fatalf("ListOffsets earliest = %d, %v; want 4", o.Offset, o.Err)
			}
			// By timestamp: never below the log start offset (the 10
			// records are one batch: 4 is inside it).
			byTime, err := kadm.NewClient(cl).ListOffsetsAfterMilli(ctx, 0, topic)
			if err != nil {
				t.Fatal(err)
			}
			if o, _ := byTime.Lookup(topic, 0); o.Err != nil || o.Offset != 4 {
				t.Fatalf("ListOffsets by timestamp 0 = %d, %v; want the log start offset 4", o.Offset, o.Err)
			}
			ccl, err := kgo.NewClient(kgo.SeedBrokers(addr),
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				t.Fatal(err)
			}
			defer ccl.Close()
			var got []*kgo.Record
			for len(got) < 6 {
				fs := ccl.PollFetches(ctx)
				if ctx.Err() != nil {
					t.Fatalf("consumed %d of 6 records: %v", len(got), ctx.Err())
				}
				got = append(got, fs.Records()...)
			}
			if got[0].Offset != 4 || string(got[0].Value) != "v4" || len(got) != 6 {
				t.Fatalf("consumer from 0 read %d records from offset %d (%q); want 6 from 4", len(got), got[0].Offset, got[0].Value)
			}
		}
		wantStart(addr)
		cl.Close()
		if code := gw.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("exit code after SIGTERM = %d, want 0", code)
		}
		gw = gw.restart(t)
		wantStart(gw.addr)
		if code := gw.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("exit code after SIGTERM = %d, want 0", code)
		}
	}, disAccount{"dr-access-key", "dr-secret-key", "drproject"})
}

// kafkaTools returns a runner of Kafka 4.4's tools (their stdout), or nil
// (logged) when java or the jars are missing.
func kafkaTools(t *testing.T) func(t *testing.T, class string, args ...string) string {
	t.Helper()
	home, _ := os.UserHomeDir()
	jars := filepath.Join(home, ".cache", "disgw-compat", "kafka-4.4.0")
	if _, err := os.Stat(jars); err != nil {
		t.Logf("Kafka's tools not run: %v (make compat fetches them)", err)
		return nil
	}
	java, err := exec.LookPath("java")
	if err != nil {
		t.Logf("Kafka's tools not run: %v", err)
		return nil
	}
	return func(t *testing.T, class string, args ...string) string {
		t.Helper()
		cmd := exec.Command(java, append([]string{"-cp", jars + "/*", class}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s\n%s", class, err, out, stderr.String())
		}
		return string(out)
	}
}

func sortLines(s string) string {
	lines := strings.Split(s, "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// sortPartitions sorts the objects of kafka-log-dirs' "partitions" array,
// which the tool prints in its HashMap's order.
func sortPartitions(s string) string {
	return regexp.MustCompile(`"partitions":\[(.*?)\]`).ReplaceAllStringFunc(s, func(m string) string {
		inner := strings.TrimSuffix(strings.TrimPrefix(m, `"partitions":[`), "]")
		parts := strings.Split(inner, "},{")
		for i := range parts {
			parts[i] = "{" + strings.Trim(parts[i], "{}") + "}"
		}
		slices.Sort(parts)
		return `"partitions":[` + strings.Join(parts, ",") + "]"
	})
}
