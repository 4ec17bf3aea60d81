package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// An Apache Kafka 4.4.0 broker for scenarios that need a real Kafka beside
// disgw (kafka-mirrormaker2 mirrors from it): KRaft, one node that is both
// broker and controller, on free ports, in a temporary directory, started
// with java -cp over the jars compat/setup put in TOOLS/kafka-broker-4.4.0
// (compat/java/broker/pom.xml).
const (
	kafkaBrokerJarsDir = "kafka-broker-4.4.0"
	kafkaBrokerJar     = "kafka_2.13-4.4.0.jar"
)

// kafkaBroker is a running Apache Kafka broker.
type kafkaBroker struct {
	Addr string // the PLAINTEXT listener, HOST:PORT
	Dir  string // its directory: server.properties, data/, broker.log
	Log  string
	cmd  *exec.Cmd
	done chan error
}

// startKafkaBroker formats a fresh KRaft storage directory (StorageTool
// format --standalone) and starts kafka.Kafka on two free ports, PLAINTEXT
// and CONTROLLER, with every internal topic at replication factor 1 and no
// initial rebalance delay; extra properties are appended. It waits until a
// Metadata request through kadm names the broker.
func startKafkaBroker(tools string, extra ...string) (*kafkaBroker, error) {
	jars := filepath.Join(tools, kafkaBrokerJarsDir)
	if _, err := os.Stat(filepath.Join(jars, kafkaBrokerJar)); err != nil {
		return nil, fmt.Errorf("the Apache Kafka 4.4.0 broker jars missing under %s (run compat/setup)", jars)
	}
	dir, err := os.MkdirTemp("", "disgw-compat-kafka-")
	if err != nil {
		return nil, err
	}
	b := &kafkaBroker{Dir: dir, Log: filepath.Join(dir, "broker.log")}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cport, err := freePort()
	if err != nil {
		return nil, err
	}
	b.Addr = fmt.Sprintf("127.0.0.1:%d", port)
	controller := fmt.Sprintf("127.0.0.1:%d", cport)
	props := append([]string{
		"process.roles=broker,controller",
		"node.id=1",
		"listeners=PLAINTEXT://" + b.Addr + ",CONTROLLER://" + controller,
		"advertised.listeners=PLAINTEXT://" + b.Addr,
		"controller.listener.names=CONTROLLER",
		"inter.broker.listener.name=PLAINTEXT",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"controller.quorum.bootstrap.servers=" + controller,
		"log.dirs=" + filepath.Join(dir, "data"),
		"num.partitions=1",
		"offsets.topic.replication.factor=1",
		"offsets.topic.num.partitions=3",
		"transaction.state.log.replication.factor=1",
		"transaction.state.log.min.isr=1",
		"share.coordinator.state.topic.replication.factor=1",
		"share.coordinator.state.topic.min.isr=1",
		"group.initial.rebalance.delay.ms=0",
		// disgw computes a consumer group's target assignment at every
		// change (docs/consumer-protocol.md); Kafka 4.4 at most once a
		// second by default, which leaves a group Assigning through a
		// sequence of quick heartbeats.
		"group.consumer.assignment.interval.ms=0",
	}, extra...)
	serverProps := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(serverProps, []byte(strings.Join(props, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	log4j := filepath.Join(dir, "log4j.properties")
	if err := os.WriteFile(log4j, []byte("log4j.rootLogger=INFO, stdout\nlog4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"+
		"log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\nlog4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n"), 0o644); err != nil {
		return nil, err
	}
	javaArgs := func(class string, args ...string) []string {
		return append([]string{"-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx512m", "-Dlog4j.configuration=file:" + log4j,
			"-cp", filepath.Join(jars, "*"), class}, args...)
	}
	// A random cluster id, never starting with '-' (StorageTool's argument
	// parser would take it for an option, as Kafka's Uuid.randomUuid
	// avoids too): 1 start in 64 failed before.
	var clusterID string
	for clusterID == "" || clusterID[0] == '-' {
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return nil, err
		}
		clusterID = base64.RawURLEncoding.EncodeToString(id[:])
	}
	if _, _, err := runCmd(context.Background(), 60*time.Second, "", "java",
		javaArgs("kafka.tools.StorageTool", "format", "--standalone", "-t", clusterID, "-c", serverProps)...); err != nil {
		return nil, fmt.Errorf("formatting the KRaft storage: %v", err)
	}
	logf, err := os.Create(b.Log)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("java", javaArgs("kafka.Kafka", serverProps)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	b.cmd, b.done = cmd, make(chan error, 1)
	go func() { b.done <- cmd.Wait(); logf.Close() }()

	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case err := <-b.done:
			b.cmd = nil
			return nil, fmt.Errorf("the Kafka broker exited while starting: %v; %s", err, b.LogTail())
		default:
		}
		if b.ready() {
			return b, nil
		}
		if time.Now().After(deadline) {
			b.Stop()
			return nil, fmt.Errorf("the Kafka broker not ready after 90s; %s", b.LogTail())
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// ready: a Metadata request names broker 1 and the controller.
func (b *kafkaBroker) ready() bool {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DialTimeout(2*time.Second))
	if err != nil {
		return false
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	m, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	return err == nil && len(m.Brokers) == 1 && m.Controller == 1
}

// Stop stops the broker with SIGTERM (a controlled shutdown), killing it
// after 30s. Its directory stays, for its log; Remove deletes it.
func (b *kafkaBroker) Stop() {
	if b.cmd == nil {
		return
	}
	stopProcess(b.cmd, b.done, syscall.SIGTERM, 30*time.Second)
	b.cmd = nil
}

// Remove deletes the broker's data (not its log).
func (b *kafkaBroker) Remove() { _ = os.RemoveAll(filepath.Join(b.Dir, "data")) }

// LogTail is the broker log's ERROR lines, or its end.
func (b *kafkaBroker) LogTail() string {
	return "Kafka broker " + logErrors(b.Log, 600)
}

// logErrors returns a log file's lines with " ERROR ", each with the
// exception line after it, or the log's end.
func logErrors(path string, n int) string {
	data, _ := os.ReadFile(path)
	var errs []string
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if strings.Contains(l, " ERROR ") {
			if i+1 < len(lines) && strings.Contains(lines[i+1], "Exception") && !strings.HasPrefix(lines[i+1], "[") {
				l += " " + strings.TrimSpace(lines[i+1])
			}
			errs = append(errs, l)
		}
	}
	if len(errs) > 0 {
		return "errors: " + tail(strings.Join(errs, " | "), n)
	}
	return "log: " + tail(string(data), n)
}
