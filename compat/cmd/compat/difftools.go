package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The tools step of kafka-diff: Apache Kafka 4.4.0's own command-line tools
// run against the Kafka broker and against disgw, their standard output
// compared line by line after normalising what may differ: the broker's
// address, node ids, topic ids and the log directory's path. Nothing else.

type toolRun struct {
	label string
	out   string
	err   error
}

var toolNorm = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`TopicId: [A-Za-z0-9_-]{22}`), "TopicId: TOPICID"},
	{regexp.MustCompile(`\b(Leader|Replicas|Isr|Elr|LastKnownElr): [0-9][0-9,]*`), "$1: NODE"},
	{regexp.MustCompile(`"broker":[0-9]+`), `"broker":NODE`},
	{regexp.MustCompile(`brokers [0-9][0-9, ]*`), "brokers NODE"},
	{regexp.MustCompile(`"logDir":"[^"]*"`), `"logDir":"LOGDIR"`},
	{regexp.MustCompile(`/[0-9.]+:[0-9]+\b`), "/HOST:PORT"},
	{regexp.MustCompile(`\b127\.0\.0\.1:[0-9]+\b`), "HOST:PORT"},
}

func normTool(s string) string {
	for _, n := range toolNorm {
		s = n.re.ReplaceAllString(s, n.repl)
	}
	return strings.TrimSpace(s)
}

// runTools runs the tools against addr; topic and group are created and
// filled here (the group's commit is a simple OffsetCommit).
func runTools(addr, tools, topic, group string) []toolRun {
	ctx := context.Background()
	jars := filepath.Join(tools, "kafka-4.4.0", "*")
	brokerJars := filepath.Join(tools, kafkaBrokerJarsDir, "*")
	java := func(cp, class string, args ...string) (string, error) {
		a := append([]string{"-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", cp, class}, args...)
		out, _, err := runCmd(ctx, 90*time.Second, "", "java", a...)
		return out, err
	}
	var runs []toolRun
	add := func(label, out string, err error) { runs = append(runs, toolRun{label, normTool(out), err}) }
	bs := []string{"--bootstrap-server", addr}

	// retention.ms set to 24 h, which both servers keep on every backend
	// (DIS's default retention differs from Kafka's: a kept difference of
	// the wire steps), so --describe lists the same Configs.
	out, err := java(jars, javaTopicCommand, append(bs, "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1",
		"--config", "retention.ms=86400000")...)
	add("kafka-topics --create", out, err)
	pick := func(k int16) int16 {
		switch k {
		case 0:
			return 9
		case 3:
			return 12
		case 8:
			return 8
		}
		return 0
	}
	t := &diffTarget{name: addr, w: &wireConn{addr: addr}, pick: pick, v: pick}
	waitTopic(t, topic, 2)
	produce(t, "", produceReq(topic, 0, recordBatch(3, -1, -1, -1)))
	produce(t, "", produceReq(topic, 1, recordBatch(2, -1, -1, -1)))
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = group, -1
	oc.RetentionTimeMillis = -1
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{
		{Partition: 0, Offset: 2, LeaderEpoch: -1}, {Partition: 1, Offset: 1, LeaderEpoch: -1}}}}
	_, _, _ = t.send(oc)
	if t.w.c != nil {
		t.w.Close()
	}

	out, err = java(jars, javaTopicCommand, append(bs, "--describe", "--topic", topic)...)
	add("kafka-topics --describe", out, err)
	out, err = java(brokerJars, "kafka.admin.ConfigCommand", append(bs, "--describe", "--all", "--entity-type", "topics", "--entity-name", topic)...)
	add("kafka-configs --describe --all (topic)", out, err)
	f, ferr := os.CreateTemp("", "disgw-compat-delrec-*.json")
	if ferr == nil {
		fmt.Fprintf(f, `{"partitions":[{"topic":%q,"partition":0,"offset":1}],"version":1}`, topic)
		f.Close()
		defer os.Remove(f.Name())
	}
	out, err = java(jars, "org.apache.kafka.tools.DeleteRecordsCommand", append(bs, "--offset-json-file", f.Name())...)
	add("kafka-delete-records", out, err)
	out, err = java(jars, "org.apache.kafka.tools.LogDirsCommand", append(bs, "--describe", "--topic-list", topic)...)
	add("kafka-log-dirs --describe", out, err)
	out, err = java(jars, "org.apache.kafka.tools.LeaderElectionCommand", append(bs, "--election-type", "preferred", "--all-topic-partitions")...)
	add("kafka-leader-election --election-type preferred --all-topic-partitions", out, err)
	out, err = java(jars, javaGroupCommand, append(bs, "--describe", "--group", group)...)
	add("kafka-consumer-groups --describe", out, err)
	return runs
}

func runDiffTools(step string, rep *diffReport, kafkaAddr, disgwAddr, tools, backend string) {
	topic, group := "diff-tools-t", "diff-tools-g"
	var kr, dr []toolRun
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); kr = runTools(kafkaAddr, tools, topic, group) }()
	go func() { defer wg.Done(); dr = runTools(disgwAddr, tools, topic, group) }()
	wg.Wait()
	for i, k := range kr {
		d := dr[i]
		rep.mu.Lock()
		rep.count[step]++
		rep.mu.Unlock()
		if (k.err == nil) != (d.err == nil) {
			rep.fail(step, fmt.Sprintf("%s: Kafka exit %v, disgw exit %v; disgw printed: %s", k.label, errOrOK(k.err), errOrOK(d.err), tail(d.out, 300)))
		}
		kout, dout := k.out, d.out
		if backend == "dis" && k.label == "kafka-log-dirs --describe" {
			// Kept: DIS does not tell partition sizes (-1; diffkept.go,
			// DescribeLogDirs).
			kout, dout = logDirSize.ReplaceAllString(kout, `"size":SIZE`), logDirSize.ReplaceAllString(dout, `"size":SIZE`)
		}
		kl, dl := strings.Split(kout, "\n"), strings.Split(dout, "\n")
		for j := 0; j < max(len(kl), len(dl)); j++ {
			var a, b string
			if j < len(kl) {
				a = strings.TrimRight(kl[j], " ")
			}
			if j < len(dl) {
				b = strings.TrimRight(dl[j], " ")
			}
			if a != b {
				rep.fail(step, fmt.Sprintf("%s (%s) line %d: Kafka %q, disgw %q", k.label, backend, j+1, a, b))
			}
		}
	}
}

var logDirSize = regexp.MustCompile(`"size":-?[0-9]+`)

func errOrOK(err error) string {
	if err == nil {
		return "0"
	}
	return err.Error()
}
