// Command compat is disgw's client-compatibility harness.
//
//	compat [-backend local] [-only a,b] [-skip-kgo-suite] [-out docs/compat.md]
//
// It builds bin/disgw, and for each client starts disgw on a free port with a
// fresh data directory, runs the client's scenario (create the topic, produce
// 1,000 keyed records with headers, consume half in a group and commit,
// resume with a new consumer of the group, describe the group), then runs
// franz-go's own integration suite against a fresh disgw. It prints a matrix
// (client x step -> pass/fail with the failing assertion) and writes it to
// docs/compat.md (docs/compat-dis.md with -backend dis) when every client
// ran.
//
// Steps that are known to fail are listed in compat/known-failures.txt, and
// franz-go suite tests in compat/kgo-known-failures.txt (with -backend dis:
// known-failures-dis.txt and kgo-known-failures-dis.txt; each disgw then
// talks to its own `disgw dislocal`). compat exits 1 when
// something fails that is not listed there (or the harness itself breaks),
// and names listed entries that now pass so that the lists only shrink.
//
//	compat scenario CLIENT -broker HOST:PORT -topic T -group G
//
// runs one Go client's scenario (the driver runs itself that way).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/disgw/disgw/compat/internal/scen"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "scenario" {
		os.Exit(scenarioMain(os.Args[2:]))
	}
	os.Exit(driverMain(os.Args[1:]))
}

func scenarioMain(args []string) int {
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "usage: compat scenario CLIENT -broker HOST:PORT -topic T -group G")
		return 2
	}
	name := args[0]
	fs := flag.NewFlagSet("scenario", flag.ContinueOnError)
	broker := fs.String("broker", "", "disgw's HOST:PORT (several nodes: HOST:PORT,... the client's bootstrap); kafka-java-migration: kafka starts an Apache Kafka 4.4.0 broker to run against")
	topic := fs.String("topic", "", "topic")
	group := fs.String("group", "", "consumer group")
	jars := fs.String("jars", "", "directory of the Kafka 4.4.0 jars (kafka-java)")
	tools := fs.String("tools", defaultTools(), "directory compat/setup filled (kafka-connect, kafka-streams, kafka-mirrormaker2)")
	disgwBin := fs.String("disgw", "", "the disgw binary (kafka-connect runs its own)")
	backend := fs.String("backend", "local", "disgw's backend (kafka-connect, kafka-streams)")
	nodes := fs.Int("nodes", 1, "kafka-connect, kafka-connect-eos, kafka-streams-eos: run this many cluster-mode nodes (backend dis) in place of one disgw")
	mirrorTarget := fs.String("mirror-target", "disgw", "kafka-mirrormaker2: mirror into disgw, or into a second Apache Kafka broker (kafka) to compare")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	switch name {
	case "franz-go":
		scenInfoModule("github.com/twmb/franz-go")
		runGoScenario(name, franzClient{*broker}, *topic, *group, true)
	case "sarama", "sarama-v0.11", "sarama-v2.1":
		scenInfoModule("github.com/IBM/sarama")
		runGoScenario(name, newSarama(name, *broker), *topic, *group, true)
	case "kafka-go", "kafka-go-requireall":
		scenInfoModule("github.com/segmentio/kafka-go")
		runGoScenario(name, kafkaGoClient{broker: *broker, requireAll: name == "kafka-go-requireall", name: name}, *topic, *group, true)
	case "confluent-kafka-go", "confluent-kafka-go-consumer-protocol":
		scenInfoModule("github.com/confluentinc/confluent-kafka-go/v2")
		confluentInfo()
		c := confluentClient{broker: *broker, name: name}
		if name == "confluent-kafka-go-consumer-protocol" {
			c.groupProtocol = "consumer"
			scen.Info("group.protocol", "consumer")
		}
		runGoScenario(name, c, *topic, *group, true)
	case "kcat":
		runKcat(*broker, *topic, *group)
	case "kafka-java":
		runJava(*broker, *topic, *group, *jars)
	case "kafka-java-consumer-protocol":
		runJavaGroup(*broker, *topic, *group, *jars)
	case "kafka-java-migration":
		runJavaMigration(*broker, *topic, *group, *jars, *tools)
	case "kafka-connect":
		runConnect(*disgwBin, *backend, *nodes, *tools, *topic)
	case "kafka-connect-eos":
		runConnectEOS(*disgwBin, *backend, *nodes, *tools, *topic)
	case "debezium-postgres", "debezium-postgres-eos":
		runDebezium(*disgwBin, *backend, *tools, *topic, name == "debezium-postgres-eos")
	case "kafka-streams":
		runStreams(*broker, *backend, *topic, *tools)
	case "kafka-streams-eos":
		runStreamsEOS(*disgwBin, *backend, *nodes, *topic, *tools)
	case "flink":
		runFlink(*disgwBin, *backend, *topic, *tools)
	case "kafka-mirrormaker2":
		runMirror(*disgwBin, *backend, *tools, *topic, *group, *mirrorTarget == "kafka")
	case "kafka-diff":
		runDiff(*broker, *tools, *backend)
	case "librdkafka-txn-tests":
		runRdkafkaTests(*broker, *backend, *tools)
	case "dis-go-sdk":
		runDISGo(*broker, *topic, *group)
	case "dis-interop":
		runDISInterop(*broker, *topic, *group, *tools)
	default:
		fmt.Fprintf(os.Stderr, "unknown Go scenario %q\n", name)
		return 2
	}
	return 0
}

// repoRoot finds the main module's root: the nearest directory above the
// working directory whose go.mod declares github.com/disgw/disgw.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/disgw/disgw\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of github.com/disgw/disgw above the working directory")
		}
		dir = parent
	}
}

func defaultTools() string {
	if d := os.Getenv("COMPAT_TOOLS"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "/tmp/disgw-compat"
	}
	return filepath.Join(home, ".cache", "disgw-compat")
}

func since(t time.Time) string { return fmt.Sprintf("%.1fs", time.Since(t).Seconds()) }
