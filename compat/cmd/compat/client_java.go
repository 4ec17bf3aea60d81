package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/disgw/disgw/compat/internal/scen"
)

// The Apache Kafka 4.4 Java client through Apache Kafka's own command-line
// tools (kafka-tools and kafka-clients 4.4.0 from Maven Central), run with
// java -cp JARS/*.
const (
	javaTopicCommand     = "org.apache.kafka.tools.TopicCommand"
	javaConsoleProducer  = "org.apache.kafka.tools.ConsoleProducer"
	javaConsoleConsumer  = "org.apache.kafka.tools.consumer.ConsoleConsumer"
	javaGroupCommand     = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
	javaProducerPerfTest = "org.apache.kafka.tools.ProducerPerformance"
	javaConsumerPerfTest = "org.apache.kafka.tools.ConsumerPerformance"
	javaClientName       = "kafka-java"
	perfRecords          = 20000
)

func runJava(broker, topic, group, jars string) {
	ctx := context.Background()
	if _, err := os.Stat(filepath.Join(jars, "kafka-tools-4.4.0.jar")); err != nil {
		for _, s := range append(scen.CoreSteps, javaExtra...) {
			scen.Report(s, "fail", fmt.Sprintf("Kafka 4.4.0 jars missing under %s (run compat/setup)", jars))
		}
		return
	}
	scen.Info("version", "Apache Kafka 4.4.0 tools and kafka-clients, "+javaVersion(ctx))
	// A SASL or TLS row: every tool gets the client.properties of its
	// security settings (KIP-1147's --command-config, which Kafka 4.4's
	// tools all take).
	var secArgs []string
	if props := scen.SecurityFromEnv().JavaProperties(); props != "" {
		f, err := os.CreateTemp("", "compat-client-*.properties")
		if err == nil {
			_, err = f.WriteString(props)
			f.Close()
			defer os.Remove(f.Name())
		}
		if err != nil {
			for _, s := range append(scen.CoreSteps, javaExtra...) {
				scen.Report(s, "fail", "writing client.properties: "+err.Error())
			}
			return
		}
		secArgs = []string{"--command-config", f.Name()}
		scen.Info("client.properties", strings.ReplaceAll(strings.TrimSpace(regexp.MustCompile(`password="[^"]*"`).ReplaceAllString(props, `password="..."`)), "\n", "; "))
	}
	java := func(timeout time.Duration, stdin, class string, args ...string) (string, error) {
		a := append(append([]string{"-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", filepath.Join(jars, "*"), class}, args...), secArgs...)
		out, _, err := runCmd(ctx, timeout, stdin, "java", a...)
		return out, err
	}
	topics := func(args ...string) (string, error) {
		return java(60*time.Second, "", javaTopicCommand, append([]string{"--bootstrap-server", broker}, args...)...)
	}
	partitionCount := func() (int, string, error) {
		out, err := topics("--describe", "--topic", topic)
		if err != nil {
			return 0, out, err
		}
		m := regexp.MustCompile(`PartitionCount:\s*(\d+)`).FindStringSubmatch(out)
		if m == nil {
			return 0, out, fmt.Errorf("kafka-topics --describe printed no PartitionCount: %s", tail(out, 300))
		}
		n, _ := strconv.Atoi(m[1])
		return n, out, nil
	}
	produce := func(from, to int) error {
		var b strings.Builder
		for i := from; i < to; i++ {
			var hs []string
			for _, h := range scen.Headers(i, javaClientName) {
				hs = append(hs, h[0]+":"+h[1])
			}
			fmt.Fprintf(&b, "%s\t%s\t%s\n", strings.Join(hs, ","), scen.Key(i), scen.Value(i))
		}
		_, err := java(90*time.Second, b.String(), javaConsoleProducer, "--bootstrap-server", broker, "--topic", topic,
			"--reader-property", "parse.key=true", "--reader-property", "parse.headers=true")
		return err
	}
	consume := func(max int, extra ...string) ([]scen.Rec, error) {
		args := append([]string{"--bootstrap-server", broker, "--topic", topic, "--group", group,
			"--max-messages", strconv.Itoa(max), "--timeout-ms", "30000",
			"--formatter-property", "print.key=true", "--formatter-property", "print.headers=true",
			"--formatter-property", "print.partition=true", "--formatter-property", "print.offset=true"}, extra...)
		out, err := java(consumeTimeout+15*time.Second, "", javaConsoleConsumer, args...)
		recs, perr := parseConsole(out)
		if err == nil {
			err = perr
		}
		return recs, err
	}

	scen.Run(scen.StepCreate, func() (string, error) {
		if _, err := topics("--create", "--topic", topic, "--partitions", strconv.Itoa(scen.Partitions), "--replication-factor", "1"); err != nil {
			return "", err
		}
		return fmt.Sprintf("kafka-topics --create --partitions %d", scen.Partitions), nil
	})
	scen.Run("kafka-topics --describe", func() (string, error) {
		n, _, err := partitionCount()
		if err != nil {
			return "", err
		}
		if n != scen.Partitions {
			return "", fmt.Errorf("PartitionCount: %d, want %d", n, scen.Partitions)
		}
		return fmt.Sprintf("PartitionCount: %d", n), nil
	})
	scen.Run(scen.StepProduce, func() (string, error) {
		if err := produce(0, scen.N); err != nil {
			return "", err
		}
		return fmt.Sprintf("kafka-console-producer: %d lines with headers and keys, exit 0", scen.N), nil
	})
	var first []scen.Rec
	consumed := scen.Run(scen.StepConsume, func() (string, error) {
		recs, err := consume(scen.N, "--from-beginning")
		first = recs
		if err != nil {
			return "", fmt.Errorf("kafka-console-consumer --group (read %d): %v", len(recs), err)
		}
		if err := scen.CheckFirst(recs, javaClientName, true); err != nil {
			return "", err
		}
		if len(recs) != scen.N {
			return "", fmt.Errorf("kafka-console-consumer --group read %d records, want %d", len(recs), scen.N)
		}
		return fmt.Sprintf("kafka-console-consumer --group --max-messages %d read them all; committed on close", scen.N), nil
	})
	if !consumed {
		scen.Skip(scen.StepResume, "needs a committed first consumer (consume failed)")
	} else {
		scen.Run(scen.StepResume, func() (string, error) {
			if err := produce(scen.N, scen.N+scen.More); err != nil {
				return "", fmt.Errorf("producing %d more: %v", scen.More, err)
			}
			committed := scen.Committed(first)
			recs, err := consume(scen.More)
			if cerr := scen.CheckResume(first, committed, recs, scen.N+scen.More, javaClientName, true); cerr != nil {
				if err != nil {
					return "", fmt.Errorf("%v (console consumer: %v)", cerr, err)
				}
				return "", cerr
			}
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("after %d more records the console consumer resumed at %s and read exactly those", scen.More, scen.FmtOffsets(committed)), nil
		})
	}
	scen.Run(scen.StepDescribe, func() (string, error) {
		out, err := java(60*time.Second, "", javaGroupCommand, "--bootstrap-server", broker, "--describe", "--group", group)
		if err != nil {
			return "", err
		}
		// GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...
		rows := 0
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 6 || f[0] != group || f[1] != topic {
				continue
			}
			rows++
			if f[3] != f[4] || f[5] != "0" {
				return "", fmt.Errorf("kafka-consumer-groups --describe row %q: CURRENT-OFFSET %s, LOG-END-OFFSET %s, LAG %s; want lag 0", line, f[3], f[4], f[5])
			}
		}
		if rows != scen.Partitions {
			return "", fmt.Errorf("kafka-consumer-groups --describe: %d rows for the topic, want %d: %s", rows, scen.Partitions, tail(out, 400))
		}
		return fmt.Sprintf("%d partitions, every one at lag 0", rows), nil
	})
	scen.Run("kafka-topics --alter --partitions", func() (string, error) {
		if _, err := topics("--alter", "--topic", topic, "--partitions", strconv.Itoa(scen.Partitions+1)); err != nil {
			return "", err
		}
		n, _, err := partitionCount()
		if err != nil {
			return "", err
		}
		if n != scen.Partitions+1 {
			return "", fmt.Errorf("after --alter --partitions %d: PartitionCount: %d", scen.Partitions+1, n)
		}
		return fmt.Sprintf("PartitionCount %d -> %d", scen.Partitions, n), nil
	})
	runJavaLongName(topic, func(timeout time.Duration, stdin, class string, args ...string) (string, error) {
		return java(timeout, stdin, class, append([]string{"--bootstrap-server", broker}, args...)...)
	})
	perfTopic := topic + "-perf"
	perfProduced := scen.Run("producer-perf-test", func() (string, error) {
		out, err := java(120*time.Second, "", javaProducerPerfTest, "--bootstrap-server", broker, "--topic", perfTopic,
			"--num-records", strconv.Itoa(perfRecords), "--record-size", "100", "--throughput", "-1")
		if err != nil {
			return "", err
		}
		m := regexp.MustCompile(`(?m)^(\d+) records sent, .*$`).FindAllStringSubmatch(out, -1)
		if len(m) == 0 || m[len(m)-1][1] != strconv.Itoa(perfRecords) {
			return "", fmt.Errorf("kafka-producer-perf-test summary missing or short: %s", tail(out, 300))
		}
		return strings.TrimSpace(m[len(m)-1][0]), nil
	})
	scen.Run("consumer-perf-test", func() (string, error) {
		if !perfProduced {
			return "", fmt.Errorf("needs producer-perf-test")
		}
		out, err := java(120*time.Second, "", javaConsumerPerfTest, "--bootstrap-server", broker, "--topic", perfTopic,
			"--num-records", strconv.Itoa(perfRecords), "--timeout", "30000")
		if err != nil {
			return "", err
		}
		// start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, ...
		lines := strings.Split(strings.TrimSpace(out), "\n")
		last := strings.Split(lines[len(lines)-1], ",")
		if len(last) < 5 || strings.TrimSpace(last[4]) != strconv.Itoa(perfRecords) {
			return "", fmt.Errorf("kafka-consumer-perf-test did not consume %d records: %s", perfRecords, tail(out, 300))
		}
		return fmt.Sprintf("consumed %d records: %s", perfRecords, strings.TrimSpace(lines[len(lines)-1])), nil
	})
}

// parseConsole reads the console consumer's lines
// Partition:P\tOffset:O\tk1:v1,k2:v2\tKEY\tVALUE.
func parseConsole(out string) ([]scen.Rec, error) {
	var recs []scen.Rec
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "Partition:") {
			continue
		}
		f := strings.SplitN(line, "\t", 5)
		if len(f) != 5 {
			return recs, fmt.Errorf("console consumer line %q: want 5 fields", line)
		}
		p, err1 := strconv.Atoi(strings.TrimPrefix(f[0], "Partition:"))
		o, err2 := strconv.ParseInt(strings.TrimPrefix(f[1], "Offset:"), 10, 64)
		if err1 != nil || err2 != nil {
			return recs, fmt.Errorf("console consumer line %q", line)
		}
		r := scen.Rec{Partition: int32(p), Offset: o, Key: f[3], Value: f[4], Headers: map[string]string{}}
		if f[2] != "NO_HEADERS" {
			for _, kv := range strings.Split(f[2], ",") {
				k, v, _ := strings.Cut(kv, ":")
				r.Headers[k] = v
			}
		}
		recs = append(recs, r)
	}
	return recs, nil
}

func javaVersion(ctx context.Context) string {
	_, errOut, _ := runCmd(ctx, 20*time.Second, "", "java", "-version")
	return strings.SplitN(strings.TrimSpace(errOut), "\n", 2)[0]
}
