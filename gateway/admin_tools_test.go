package gateway_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// kafkaToolsClasspath returns the classpath of Kafka 4.4's Java tools that
// compat downloads (COMPAT_TOOLS, else ~/.cache/disgw-compat), skipping the
// test when they are missing, except under CI=true.
func kafkaToolsClasspath(t *testing.T) string {
	t.Helper()
	requireTool(t, "/usr/bin/java", "-version")
	dir := os.Getenv("COMPAT_TOOLS")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "disgw-compat")
	}
	jars, _ := filepath.Glob(filepath.Join(dir, "kafka-4.4.0", "kafka-tools-*.jar"))
	if len(jars) == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Kafka 4.4 tools not in %s under CI=true (make compat downloads them)", dir)
		}
		t.Skipf("Kafka 4.4 tools not in %s", dir)
	}
	return filepath.Join(dir, "kafka-4.4.0", "*")
}

// runKafkaTool runs org.apache.kafka.tools.<tool> with args against addr
// and returns its stdout, stderr and exit code.
func runKafkaTool(t *testing.T, cp, tool, addr string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/usr/bin/java", append([]string{"-cp", cp, "org.apache.kafka.tools." + tool,
		"--bootstrap-server", addr}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return out.String(), errOut.String(), code
}

// TestKafkaAdminTools runs Kafka 4.4's kafka-topics --describe (which
// uses DescribeTopicPartitions) and kafka-leader-election against the
// gateway; the expected output is a one-node Kafka 4.4's for the same
// topic, with its node id 1 as the gateway's 0 (the topic id and the
// configs differ by design and are not compared here).
func TestKafkaAdminTools(t *testing.T) {
	if testing.Short() {
		t.Skip("long: Kafka's Java tools, a JVM per tool run")
	}
	cp := kafkaToolsClasspath(t)
	g := startGateway(t)
	_, t3, _ := adminTopics(t, g)

	out, errOut, code := runKafkaTool(t, cp, "TopicCommand", g.addr, "--describe", "--topic", t3)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	header := regexp.MustCompile(`^Topic: admin-t3\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: `)
	if code != 0 || len(lines) != 4 || !header.MatchString(lines[0]) {
		t.Fatalf("kafka-topics --describe: exit %d\n%s\n%s", code, out, errOut)
	}
	for i, l := range lines[1:] {
		// Kafka: "Elr: N/A" would mean the tool fell back to Metadata.
		want := "\tTopic: admin-t3\tPartition: " + string(rune('0'+i)) + "\tLeader: 0\tReplicas: 0\tIsr: 0\tElr: \tLastKnownElr: "
		if l != want {
			t.Errorf("line %d: %q, want %q", i+1, l, want)
		}
	}

	// Every topic: Metadata lists __consumer_offsets, which the tool then
	// describes by name (it failed with UNKNOWN_TOPIC_OR_PARTITION once).
	out, errOut, code = runKafkaTool(t, cp, "TopicCommand", g.addr, "--describe")
	if code != 0 || !strings.Contains(out, "Topic: __consumer_offsets\tTopicId: ") || !strings.Contains(out, "Topic: admin-t3\tTopicId: ") {
		t.Errorf("kafka-topics --describe (every topic): exit %d\n%s\n%s", code, out, errOut)
	}

	for _, tc := range []struct {
		args []string
		out  string
		code int
		err  string
	}{
		{[]string{"--all-topic-partitions"}, "", 0, ""},
		{[]string{"--topic", t3, "--partition", "0"}, "Valid replica already elected for partitions admin-t3-0\n", 0, ""},
		{[]string{"--topic", "admin-nosuch", "--partition", "0"},
			"Error completing leader election (PREFERRED) for partition: admin-nosuch-0: " +
				"org.apache.kafka.common.errors.UnknownTopicOrPartitionException: No such topic as admin-nosuch\n",
			1, "1 replica(s) could not be elected"},
	} {
		out, errOut, code := runKafkaTool(t, cp, "LeaderElectionCommand", g.addr,
			append([]string{"--election-type", "preferred"}, tc.args...)...)
		if out != tc.out || code != tc.code || !strings.Contains(errOut, tc.err) {
			t.Errorf("kafka-leader-election %v: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr with %q",
				tc.args, code, out, errOut, tc.code, tc.out, tc.err)
		}
	}
}
