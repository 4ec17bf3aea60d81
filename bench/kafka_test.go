package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The third target of TestRatio: Apache Kafka 4.4.0 itself, one KRaft node
// (broker and controller) with Kafka's default settings, in a child JVM.
// The start mirrors compat/cmd/compat/kafkabroker.go (a separate Go
// module, so not imported): format a fresh storage directory with
// StorageTool --standalone, then run kafka.Kafka from the jars compat/setup
// puts in ~/.cache/disgw-compat/kafka-broker-4.4.0, on two free ports.
const kafkaJar = "kafka_2.13-4.4.0.jar"

// kafkaJarsDir is DISGW_BENCH_KAFKA_JARS, else the directory compat/setup
// fills.
func kafkaJarsDir() string {
	if d := os.Getenv("DISGW_BENCH_KAFKA_JARS"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "disgw-compat", "kafka-broker-4.4.0")
}

// kafkaServerJVM are the JVM options bin/kafka-server-start.sh uses by
// default (KAFKA_HEAP_OPTS and kafka-run-class.sh's
// KAFKA_JVM_PERFORMANCE_OPTS), so the broker runs as shipped. (compat
// starts it with C1 only and a smaller heap, for a quicker start.)
var kafkaServerJVM = []string{"-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
	"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true"}

// kafkaBroker is a running broker; each target() is a fresh topic on it,
// so its JVM warms up once for the whole run.
type kafkaBroker struct {
	addr   string // the PLAINTEXT listener, 127.0.0.1:port
	dir    string // server.properties, data/, broker.log; removed by stop
	cmd    *exec.Cmd
	done   chan error
	topics int // topics created so far
}

// startKafka starts the broker from the jars in jars and waits until a
// Metadata request names it (at most 90 s). It is stopped, and its
// directory removed, at the end of the test.
func startKafka(t *testing.T, jars string) *kafkaBroker {
	t.Helper()
	dir, err := os.MkdirTemp("", "disgw-bench-kafka-")
	if err != nil {
		t.Fatal(err)
	}
	k := &kafkaBroker{dir: dir}
	t.Cleanup(func() {
		if err := k.stop(); err != nil {
			t.Errorf("stop Kafka: %v", err)
		}
	})
	k.addr = "127.0.0.1:" + strconv.Itoa(freePort(t))
	controller := "127.0.0.1:" + strconv.Itoa(freePort(t))
	props := []string{
		"process.roles=broker,controller",
		"node.id=1",
		"listeners=PLAINTEXT://" + k.addr + ",CONTROLLER://" + controller,
		"advertised.listeners=PLAINTEXT://" + k.addr,
		"controller.listener.names=CONTROLLER",
		"inter.broker.listener.name=PLAINTEXT",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"controller.quorum.bootstrap.servers=" + controller,
		"log.dirs=" + filepath.Join(dir, "data"),
		// Only what one node needs; everything else is Kafka's default
		// (no fsync before an acknowledgement: log.flush.* unset).
		"offsets.topic.replication.factor=1",
		"transaction.state.log.replication.factor=1",
		"transaction.state.log.min.isr=1",
		"share.coordinator.state.topic.replication.factor=1",
		"share.coordinator.state.topic.min.isr=1",
	}
	serverProps := filepath.Join(dir, "server.properties")
	log4j := filepath.Join(dir, "log4j.properties")
	for path, text := range map[string]string{
		serverProps: strings.Join(props, "\n") + "\n",
		log4j: "log4j.rootLogger=INFO, stdout\nlog4j.appender.stdout=org.apache.log4j.ConsoleAppender\n" +
			"log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\nlog4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n",
	} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	java := func(jvm []string, class string, args ...string) *exec.Cmd {
		return exec.Command("java", slices.Concat(jvm,
			[]string{"-Dlog4j.configuration=file:" + log4j, "-cp", filepath.Join(jars, "*"), class}, args)...)
	}
	// A random cluster id not starting with '-', which StorageTool would
	// take for an option.
	var id [16]byte
	clusterID := "-"
	for clusterID[0] == '-' {
		_, _ = rand.Read(id[:])
		clusterID = base64.RawURLEncoding.EncodeToString(id[:])
	}
	format := java([]string{"-XX:TieredStopAtLevel=1", "-Xmx512m"}, "kafka.tools.StorageTool",
		"format", "--standalone", "-t", clusterID, "-c", serverProps)
	if out, err := format.CombinedOutput(); err != nil {
		t.Fatalf("Kafka: formatting the KRaft storage: %v\n%s", err, tail(string(out)))
	}
	logf, err := os.Create(filepath.Join(dir, "broker.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := java(kafkaServerJVM, "kafka.Kafka", serverProps)
	cmd.Stdout, cmd.Stderr = logf, logf
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("Kafka: %v", err)
	}
	k.cmd, k.done = cmd, make(chan error, 1)
	go func() { k.done <- cmd.Wait(); logf.Close() }()

	for deadline := time.Now().Add(90 * time.Second); !k.ready(); time.Sleep(300 * time.Millisecond) {
		select {
		case err := <-k.done:
			k.cmd = nil
			t.Fatalf("Kafka exited while starting: %v; %s", err, k.logTail())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("Kafka not ready after 90s; %s", k.logTail())
		}
	}
	return k
}

// ready: a Metadata request names broker 1 and it is the controller.
func (k *kafkaBroker) ready() bool {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.addr), kgo.DialTimeout(2*time.Second))
	if err != nil {
		return false
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	m, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	return err == nil && len(m.Brokers) == 1 && m.Controller == 1
}

// target is a fresh topic, bench-N, on the broker, created like the other
// targets'. Its stop does nothing: the topic's data stays until the broker
// stops (deleting it would have Kafka remove the files a minute later,
// in another target's timed run).
func (k *kafkaBroker) target(tb testing.TB) *target {
	k.topics++
	return setUp(tb, &target{
		name: "kafka", addr: k.addr, topic: fmt.Sprintf("bench-%d", k.topics),
		stop: func() error { return nil }, cpu: k.cpuTime,
	})
}

// stop sends the broker SIGTERM (a controlled shutdown), SIGKILL after
// 30 s, waits for it to exit and removes its directory.
func (k *kafkaBroker) stop() error {
	if k.cmd != nil {
		_ = k.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-k.done:
		case <-time.After(30 * time.Second):
			_ = k.cmd.Process.Kill()
			<-k.done
		}
		k.cmd = nil
	}
	return os.RemoveAll(k.dir)
}

// cpuTime is the JVM's user and system CPU time so far, from
// /proc/PID/stat (utime and stime, in clock ticks of 1/100 s); 0 where
// that cannot be read.
func (k *kafkaBroker) cpuTime() time.Duration {
	if k.cmd == nil {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", k.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // f[0] is field 3, state
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// logTail is the end of the broker's log.
func (k *kafkaBroker) logTail() string {
	b, _ := os.ReadFile(filepath.Join(k.dir, "broker.log"))
	return "broker.log: " + tail(string(b))
}

// tail is the last 2000 bytes of s.
func tail(s string) string {
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return s
}

// freePort is a TCP port on 127.0.0.1 free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
