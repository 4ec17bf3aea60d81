package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/disgw/disgw/compat/internal/scen"
)

// env is what a client's command line is made from.
type env struct {
	root, compat, self, tools string
	broker, topic, group      string
	bin, backend              string // disgw and its backend, for scenarios that run their own
	// disEndpoint is the URL of the dislocal behind disgw (backend dis,
	// when the driver started it), e.g. http://127.0.0.1:PORT; the
	// scenario process also gets it, with the credentials, in its
	// environment (disEnv).
	disEndpoint string
	// nodes is how many cluster-mode nodes run in front of one dislocal
	// (-nodes; 1: one disgw, no cluster mode); nodeAddrs their HOST:PORT
	// when the driver started them (also in the scenario's
	// clusterNodesEnv). broker is then the scenario's bootstrap.
	nodes     int
	nodeAddrs []string
}

// disEnv is the environment a scenario gets on backend dis: the dislocal
// behind disgw and the AK/SK and project id it checks, for clients that
// talk to DIS itself (the DIS SDKs and the DIS Kafka Adapter).
func disEnv(endpoint string) []string {
	return []string{"DISGW_COMPAT_DIS_ENDPOINT=" + endpoint, "DISGW_COMPAT_DIS_AK=" + compatDISAK,
		"DISGW_COMPAT_DIS_SK=" + compatDISSK, "DISGW_COMPAT_DIS_PROJECT=" + compatDISProject}
}

type clientSpec struct {
	name  string
	about string
	extra []string // steps beyond the core ones, in order
	// extraBy replaces extra on the matrices it names (matrixName: a
	// backend, or dis-cluster; a step that differs by backend, such as
	// kafka-connect's after the cleaner / after expiry).
	extraBy map[string][]string
	// timeout, when longer, replaces -client-timeout for this client.
	timeout time.Duration
	// disArgs are added to the command line of the dislocal the driver
	// starts for the client (backend dis), e.g. a shorter --retention-unit.
	disArgs []string
	argv    func(e env) ([]string, error)
	// ownsDisgw: the scenario runs its own disgw (it kills and restarts
	// it), so the driver starts none.
	ownsDisgw bool
	// backends, when set, are the only backends the client runs on (the
	// DIS clients need a DIS endpoint: backend dis).
	backends []string
	// security, when set, runs disgw with one listener of its Protocol and
	// one user of its Mechanism (security.go); the scenario gets it, with
	// the user's name and password and the CA, in its environment
	// (scen.SecurityFromEnv).
	security *scen.Security
	// cluster: the client runs on several nodes too (-nodes N > 1,
	// cluster.go); clusterOnly: only there. seedOne bootstraps the client
	// with one node's address alone (the last node's), so that it must
	// follow Metadata to the others.
	cluster, clusterOnly, seedOne bool
	// gatewayEnv is added to disgw serve's environment (settings).
	gatewayEnv []string
	// alone: with -parallel N > 1 the row runs with no other row at once
	// (it waits for the rows before it to end, and the rows after it
	// wait for it).
	alone bool
}

// runsOn reports whether the client runs on backend with nodes nodes.
func (c clientSpec) runsOn(backend string, nodes int) bool {
	if nodes > 1 && !c.cluster || nodes <= 1 && c.clusterOnly {
		return false
	}
	return len(c.backends) == 0 || slices.Contains(c.backends, backend)
}

func goScenario(name string) func(e env) ([]string, error) {
	return func(e env) ([]string, error) {
		argv := []string{e.self, "scenario", name, "-broker", e.broker, "-topic", e.topic, "-group", e.group,
			"-jars", filepath.Join(e.tools, "kafka-4.4.0"), "-tools", e.tools, "-disgw", e.bin, "-backend", e.backend}
		if e.nodes > 1 {
			argv = append(argv, "-nodes", strconv.Itoa(e.nodes))
		}
		return argv, nil
	}
}

func pyScenario(python func(e env) string, lib string, name string) func(e env) ([]string, error) {
	return func(e env) ([]string, error) {
		py := python(e)
		if _, err := os.Stat(py); err != nil {
			return nil, fmt.Errorf("%s missing (run compat/setup)", py)
		}
		return []string{py, filepath.Join(e.compat, "python", "scenario.py"), "--lib", lib, "--name", name,
			"--broker", e.broker, "--topic", e.topic, "--group", e.group}, nil
	}
}

// pyTxnScenario is pyScenario with the step "transactions" (--txn,
// txnExtra).
func pyTxnScenario(python func(e env) string, lib string, name string) func(e env) ([]string, error) {
	run := pyScenario(python, lib, name)
	return func(e env) ([]string, error) {
		argv, err := run(e)
		if err == nil {
			argv = append(argv, "--txn")
		}
		return argv, err
	}
}

// txnExtra is the step of the Python and kafkajs rows that run a
// transactional producer and read_committed consumers (docs/transactions.md).
var txnExtra = []string{"transactions"}

// disPyScenario runs compat/python/dis_scenario.py (the DIS Python SDK)
// with the virtualenv's Python; protobuf selects the SDK's protobuf bodies.
func disPyScenario(name string, protobuf bool) func(e env) ([]string, error) {
	return func(e env) ([]string, error) {
		py := venvPython(e)
		if _, err := os.Stat(py); err != nil {
			return nil, fmt.Errorf("%s missing (run compat/setup)", py)
		}
		argv := []string{py, filepath.Join(e.compat, "python", "dis_scenario.py"), "--name", name, "--topic", e.topic, "--group", e.group}
		if protobuf {
			argv = append(argv, "--protobuf")
		}
		return argv, nil
	}
}

func debianPython(env) string { return "/usr/bin/python3" }
func venvPython(e env) string { return filepath.Join(e.tools, "venv", "bin", "python") }

var kcatExtra = []string{"kcat -L", "kcat -C -e", "kcat -o -1", "kcat -o s@TS"}
var javaExtra = []string{"kafka-topics --describe", "kafka-topics --alter --partitions", stepJavaLongName, "producer-perf-test", "consumer-perf-test"}

var clients = []clientSpec{
	{name: "franz-go", about: "kgo with default options, kadm", argv: goScenario("franz-go"), cluster: true},
	{name: "sarama", about: "IBM/sarama at its default Version", argv: goScenario("sarama")},
	{name: "sarama-v0.11", about: "IBM/sarama at V0_11_0_0", argv: goScenario("sarama-v0.11")},
	{name: "sarama-v2.1", about: "IBM/sarama at V2_1_0_0", argv: goScenario("sarama-v2.1")},
	{name: "kafka-go", about: "segmentio/kafka-go, default Writer (acks=0), group Reader", argv: goScenario("kafka-go")},
	{name: "kafka-go-requireall", about: "segmentio/kafka-go, RequireAll Writer, group Reader", argv: goScenario("kafka-go-requireall")},
	{name: "confluent-kafka-go", about: "confluent-kafka-go, bundled librdkafka (cgo)", argv: goScenario("confluent-kafka-go"), cluster: true},
	{name: "confluent-kafka-go-consumer-protocol", about: "confluent-kafka-go, bundled librdkafka (cgo), consumers with group.protocol=consumer (KIP-848)",
		argv: goScenario("confluent-kafka-go-consumer-protocol"), cluster: true},
	{name: "kcat", about: "Debian's kcat (librdkafka 2.0.2)", extra: kcatExtra, argv: goScenario("kcat"), cluster: true},
	// Its topic auto-created with 3 partitions, led by several nodes.
	{name: "kcat-one-seed", about: "Debian's kcat bootstrapped with one node's address, its topic auto-created with 3 partitions (several nodes only)", extra: kcatExtra,
		argv: goScenario("kcat"), cluster: true, clusterOnly: true, seedOne: true, gatewayEnv: []string{"DISGW_DEFAULT_PARTITIONS=3"}},
	{name: "kafka-python-debian", about: "Debian's python3-kafka, /usr/bin/python3", argv: pyScenario(debianPython, "kafka-python", "kafka-python-debian")},
	{name: "kafka-python-pypi", about: "kafka-python, newest from PyPI, in a virtualenv", argv: pyTxnScenario(venvPython, "kafka-python", "kafka-python-pypi"), cluster: true,
		extra: txnExtra},
	{name: "confluent-kafka-python-debian", about: "Debian's python3-confluent-kafka, /usr/bin/python3", argv: pyTxnScenario(debianPython, "confluent-kafka", "confluent-kafka-python-debian"), extra: txnExtra},
	{name: "confluent-kafka-python-pypi", about: "confluent-kafka, newest from PyPI, in a virtualenv", argv: pyTxnScenario(venvPython, "confluent-kafka", "confluent-kafka-python-pypi"), extra: txnExtra,
		cluster: true},
	{name: "kafkajs", about: "kafkajs 2.2.4 from npm", argv: func(e env) ([]string, error) {
		if _, err := os.Stat(filepath.Join(e.compat, "node", "node_modules", "kafkajs")); err != nil {
			return nil, fmt.Errorf("compat/node/node_modules/kafkajs missing (run compat/setup)")
		}
		return []string{"node", filepath.Join(e.compat, "node", "scenario.js"),
			"--broker", e.broker, "--topic", e.topic, "--group", e.group, "--txn"}, nil
	}, extra: txnExtra},
	{name: "kafka-java", about: "Apache Kafka 4.4.0 command-line tools (Java client)", extra: javaExtra, argv: goScenario("kafka-java"), cluster: true},
	{name: "kafka-java-consumer-protocol", about: "Apache Kafka 4.4.0 kafka-clients consumers with group.protocol=consumer (KIP-848), a group of 3 JVMs: joins, a leave, a kill -9, a restart from the commits",
		argv: goScenario("kafka-java-consumer-protocol")},
	// Only on the embedded store (make compat), for CI's time: the
	// migration is the group coordinator's, the same on every backend.
	{name: "kafka-java-migration", about: "Apache Kafka 4.4.0 kafka-clients consumers, a group of 3 JVMs rolled one at a time from group.protocol=classic to consumer and back (online migration)",
		argv: goScenario("kafka-java-migration"), backends: []string{"local"}},
	{name: "kcat-sasl-ssl-scram512", about: "kcat with security.protocol=SASL_SSL, SCRAM-SHA-512", extra: kcatExtra,
		argv: goScenario("kcat"), security: &scen.Security{Protocol: "SASL_SSL", Mechanism: "SCRAM-SHA-512"}},
	{name: "franz-go-sasl-ssl-plain", about: "franz-go (kgo, kadm) with SASL PLAIN over TLS",
		argv: goScenario("franz-go"), security: &scen.Security{Protocol: "SASL_SSL", Mechanism: "PLAIN"}},
	{name: "confluent-kafka-python-sasl-scram256", about: "confluent-kafka-python (PyPI) with SASL_PLAINTEXT, SCRAM-SHA-256",
		argv:     pyScenario(venvPython, "confluent-kafka", "confluent-kafka-python-sasl-scram256"),
		security: &scen.Security{Protocol: "SASL_PLAINTEXT", Mechanism: "SCRAM-SHA-256"}},
	{name: "kafka-python-debian-sasl-ssl-scram512", about: "Debian's python3-kafka (2.0.2: v0 SaslHandshake, raw tokens) with SASL_SSL, SCRAM-SHA-512",
		argv:     pyScenario(debianPython, "kafka-python", "kafka-python-debian-sasl-ssl-scram512"),
		security: &scen.Security{Protocol: "SASL_SSL", Mechanism: "SCRAM-SHA-512"}},
	{name: "kafka-java-sasl-ssl-scram512", about: "Apache Kafka 4.4.0 command-line tools with a client.properties: SASL_SSL, SCRAM-SHA-512", extra: javaExtra,
		argv: goScenario("kafka-java"), security: &scen.Security{Protocol: "SASL_SSL", Mechanism: "SCRAM-SHA-512"}},
	{name: "kafka-connect", about: "Apache Kafka Connect 4.3.1, distributed worker, FileStreamSource and FileStreamSink",
		extra: connectExtraFor("local", 1), extraBy: map[string][]string{"dis": connectExtraFor("dis", 1), "dis-cluster": connectExtraFor("dis", 3)},
		argv: goScenario("kafka-connect"), ownsDisgw: true, timeout: connectTimeout, cluster: true},
	{name: "kafka-connect-eos", about: "Apache Kafka Connect 4.3.1, distributed worker with exactly.once.source.support=enabled, FileStreamSource, the worker killed (SIGKILL) twice",
		argv: goScenario("kafka-connect-eos"), ownsDisgw: true, backends: []string{"local", "dis"}, cluster: true},
	{name: "debezium-postgres", about: "Debezium's PostgreSQL connector 3.6.1.Final (pgoutput) in a Kafka Connect 4.3.1 distributed worker, on a PostgreSQL of its own: snapshot, changes, the worker, disgw and PostgreSQL restarted",
		extra: debeziumExtraFor(false), argv: goScenario("debezium-postgres"), ownsDisgw: true, timeout: debeziumTimeout},
	{name: "debezium-postgres-eos", about: "debezium-postgres with Connect's exactly.once.source.support=enabled and exactly.once.support=required: every change event exactly once (read_committed) through the same kills",
		extra: debeziumExtraFor(true), argv: goScenario("debezium-postgres-eos"), ownsDisgw: true, timeout: debeziumTimeout},
	{name: "kafka-streams", about: "Apache Kafka Streams 4.4.0 word count with a state store, at-least-once", extra: streamsExtra,
		argv: goScenario("kafka-streams"), disArgs: []string{"--retention-unit", streamsRetentionUnit.String()}, timeout: streamsTimeout},
	{name: "kafka-streams-eos", about: "Apache Kafka Streams 4.4.0 word count, exactly_once_v2, killed (SIGKILL) three times mid-run and disgw once, each 1 s after a transaction of the application committed",
		// With several nodes it runs them itself and kills one of them in
		// place of disgw (client_streams_eos.go).
		extra: streamsEOSExtra, argv: goScenario("kafka-streams-eos"), timeout: streamsTimeout, ownsDisgw: true, cluster: true},
	{name: "flink", about: "Apache Flink 2.2.1 (MiniCluster) with flink-connector-kafka 5.0.0-2.2: KafkaSource, a keyed count, KafkaSink AT_LEAST_ONCE, then EXACTLY_ONCE with INCREMENTING and with POOLING transactional ids; each run's JVM killed (SIGKILL) and restored from its retained checkpoint, and disgw killed (SIGKILL) under it",
		extra: flinkExtra, argv: goScenario("flink"), timeout: flinkTimeout, ownsDisgw: true, backends: []string{"local", "dis"}},
	{name: "kafka-mirrormaker2", about: "MirrorMaker 2 (connect-mirror 4.3.1, dedicated) from an Apache Kafka 4.4.0 broker into disgw, group offsets synced",
		extra: mirrorExtra, argv: goScenario("kafka-mirrormaker2"), ownsDisgw: true},
	{name: "librdkafka-txn-tests", about: "librdkafka 2.0.2's own test programs 0103-transactions, 0129-fetch_aborted_msgs and 0098-consumer-txn (with its Java TransactionProducerCli), built from Debian's source package",
		// The embedded store only, for CI's time: on DIS the three pass too
		// (0098 in quick mode, 1m24s a run); add "dis" to run them there.
		extra: rdkafkaTestsExtra, argv: goScenario("librdkafka-txn-tests"), timeout: rdkafkaTestsTimeout, backends: []string{"local"}},
	{name: "kafka-diff", about: "differential harness: the same kmsg requests to an Apache Kafka 4.4.0 broker and to disgw, answers compared field by field; Kafka's tools' output compared",
		extra: diffSteps, argv: goScenario("kafka-diff")},
	{name: "dis-python-sdk", about: "the DIS Python SDK (huaweicloud-sdk-python-dis, newest from PyPI) against dislocal, JSON bodies",
		argv: disPyScenario("dis-python-sdk", false), backends: []string{"dis"}},
	{name: "dis-python-sdk-protobuf", about: "the DIS Python SDK against dislocal, protobuf bodies (bodySerializeType=protobuf)",
		argv: disPyScenario("dis-python-sdk-protobuf", true), backends: []string{"dis"}},
	{name: "dis-go-sdk", about: "huaweicloud-sdk-go-v3's DIS client (services/dis/v2) against dislocal; its checkpoints through kadm",
		extra: disGoExtra, argv: goScenario("dis-go-sdk"), backends: []string{"dis"}},
	{name: "dis-java-sdk", about: "DIS Java SDK 1.3.21 (DISClient, JSON bodies) directly on dislocal",
		argv: disJavaRow("sdk", "json"), backends: []string{"dis"}},
	{name: "dis-java-sdk-protobuf", about: "DIS Java SDK 1.3.21 (DISClient, body.serialize.type=protobuf) directly on dislocal",
		argv: disJavaRow("sdk", "protobuf"), backends: []string{"dis"}},
	{name: "dis-kafka-adapter", about: "DIS Kafka Adapter 1.2.2 (DISKafkaProducer, DISKafkaConsumer) directly on dislocal",
		extra: disAdapterExtra, argv: disJavaRow("adapter"), backends: []string{"dis"},
		// dislocal's group join window 1 s (DIS: about 20 s) and a member dropped
		// after 15 s without a request (DIS: about 1 min), so rebalances take seconds.
		disArgs: []string{"--group-sync-delay", "1s", "--group-session-timeout", "15s"}},
	{name: "dis-interop", about: "franz-go through disgw and the DIS Java SDK and Kafka Adapter on its dislocal: the same records and group offsets",
		extra: disInteropExtra, argv: goScenario("dis-interop"), backends: []string{"dis"}},
}

// stepResult is one cell of the matrix.
type stepResult struct {
	Step, Status, Detail string
	Known                string // the reason from known-failures.txt, if listed
}

type clientResult struct {
	spec     clientSpec
	matrix   string // matrixName
	steps    map[string]*stepResult
	info     []string
	note     string // the scenario process's own failure, if any
	duration time.Duration
	log      string
}

func (r *clientResult) stepNames() []string {
	return append(append([]string{}, scen.CoreSteps...), r.spec.extraSteps(r.matrix)...)
}

// extraSteps are the client's steps beyond the core ones in matrix
// (matrixName).
func (c clientSpec) extraSteps(matrix string) []string {
	if e, ok := c.extraBy[matrix]; ok {
		return e
	}
	return c.extra
}

func driverMain(args []string) int {
	fs := flag.NewFlagSet("compat", flag.ContinueOnError)
	backend := fs.String("backend", "local", "disgw backend (passed to disgw serve --backend)")
	nodes := fs.Int("nodes", 1, "with -backend dis: run each client against this many cluster-mode nodes in front of one dislocal (the clients marked for it; docs/compat-dis-cluster.md)")
	only := fs.String("only", "", "comma-separated clients to run (default all); kgo-suite names the franz-go suite")
	skipKgo := fs.Bool("skip-kgo-suite", false, "do not run franz-go's integration suite")
	kgoAll := fs.Bool("kgo-all", false, "run the franz-go suite's known failures too (to see whether the list can shrink)")
	kgoRecords := fs.Int("kgo-records", 50000, "KGO_TEST_RECORDS for franz-go's suite")
	out := fs.String("out", "", "markdown file to write the matrix to (default docs/compat.md when every client runs)")
	clientTimeout := fs.Duration("client-timeout", 5*time.Minute, "time limit of one client's scenario")
	tools := fs.String("tools", defaultTools(), "directory compat/setup filled: Kafka jars, Python virtualenv (env COMPAT_TOOLS)")
	disgwBin := fs.String("disgw", "", "disgw binary to run (default: build bin/disgw)")
	listClients := fs.Bool("list", false, "list the clients and exit")
	parallel := fs.Int("parallel", 1, "run up to this many clients at once, each against its own disgw (a client marked alone runs by itself); the console and the matrix keep the clients' order")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *parallel < 1 {
		fmt.Fprintln(os.Stderr, "compat: -parallel must be 1 or more")
		return 2
	}
	if *nodes < 1 || *nodes > 1 && *backend != "dis" {
		fmt.Fprintln(os.Stderr, "compat: -nodes must be 1, or more with -backend dis")
		return 2
	}
	matrix := matrixName(*backend, *nodes)
	if *listClients {
		for _, c := range clients {
			if *nodes > 1 && !c.cluster || *nodes == 1 && c.clusterOnly {
				continue
			}
			fmt.Printf("%-30s %s\n", c.name, c.about)
		}
		if *nodes == 1 {
			fmt.Printf("%-30s %s\n", "kgo-suite", "franz-go's integration suite (go test github.com/twmb/franz-go/pkg/kgo)")
		}
		return 0
	}
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		return 2
	}
	compatDir := filepath.Join(root, "compat")
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		return 2
	}
	if *disgwBin == "" {
		*disgwBin = filepath.Join(root, "bin", "disgw")
		fmt.Println("== build bin/disgw")
		cmd := exec.Command("go", "build", "-o", *disgwBin, "./cmd/disgw")
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "compat: building disgw:", err)
			return 1
		}
	}
	knownFile, kgoKnownFile := knownFiles(matrix)
	known, err := loadKnown(filepath.Join(compatDir, knownFile))
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		return 2
	}

	want := map[string]bool{}
	for _, n := range strings.Split(*only, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	if *nodes > 1 && want["kgo-suite"] {
		fmt.Fprintln(os.Stderr, "compat: franz-go's suite runs on one node only")
		return 2
	}
	for n := range want {
		found := n == "kgo-suite"
		for _, c := range clients {
			found = found || c.name == n
		}
		if !found {
			fmt.Fprintf(os.Stderr, "compat: unknown client %q (compat -list)\n", n)
			return 2
		}
	}
	logDir, err := os.MkdirTemp("", "disgw-compat-logs-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		return 1
	}
	start := time.Now()
	stamp := time.Now().UTC().Format("20060102150405")
	var rows []clientSpec
	for _, c := range clients {
		if (len(want) == 0 || want[c.name]) && c.runsOn(*backend, *nodes) {
			rows = append(rows, c)
		}
	}
	run := func(c clientSpec) *clientResult {
		return runClient(c, env{root: root, compat: compatDir, self: self, tools: *tools,
			topic: "compat-" + c.name + "-" + stamp, group: "compat-" + c.name + "-group-" + stamp, nodes: *nodes},
			*disgwBin, *backend, matrix, *clientTimeout, logDir)
	}
	report := func(r *clientResult) {
		for _, s := range r.stepNames() {
			if k, ok := known[r.spec.name+" "+s]; ok {
				r.steps[s].Known = k
			}
			sr := r.steps[s]
			fmt.Printf("   %-34s %-4s %s\n", s, sr.Status, oneLine(sr.Detail, 220))
		}
		if r.note != "" {
			fmt.Printf("   note: %s\n", r.note)
		}
		fmt.Printf("   (%s, log %s)\n", r.duration.Round(100*time.Millisecond), r.log)
	}
	results := runRows(rows, *parallel, run, report)
	var suite *kgoSuiteResult
	if !*skipKgo && *nodes == 1 && (len(want) == 0 || want["kgo-suite"]) {
		fmt.Println("== franz-go integration suite (github.com/twmb/franz-go/pkg/kgo v1.22.3)")
		suite = runKgoSuite(compatDir, kgoKnownFile, *disgwBin, *backend, *kgoRecords, *kgoAll, logDir)
		fmt.Printf("   %s\n", suite.summary())
		for _, f := range suite.Unexpected {
			fmt.Printf("   unexpected failure: %s\n", f)
		}
	}

	md := renderMarkdown(results, suite, *backend, *nodes, root, time.Since(start))
	fmt.Println()
	fmt.Println(md)
	if *out == "" && len(want) == 0 {
		*out = filepath.Join(root, "docs", "compat.md")
		if matrix != "local" {
			*out = filepath.Join(root, "docs", "compat-"+matrix+".md")
		}
	}
	if *out != "" {
		err := os.MkdirAll(filepath.Dir(*out), 0o755)
		if err == nil {
			err = os.WriteFile(*out, []byte(md), 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "compat: writing", *out, err)
			return 1
		}
		fmt.Println("wrote", *out)
	}

	pass, fail, unexpected, na, fixed := 0, 0, 0, 0, []string{}
	// CI keeps only the tail of the output: the unexpected failures'
	// details are printed again there, after the long page.
	var why []string
	for _, r := range results {
		for _, s := range r.stepNames() {
			sr := r.steps[s]
			switch sr.Status {
			case "pass":
				pass++
				if sr.Known != "" {
					fixed = append(fixed, r.spec.name+" "+s)
				}
			case "na":
				na++
			default:
				fail++
				if sr.Known == "" {
					unexpected++
				}
				if sr.Known == "" && sr.Status != "skip" {
					why = append(why, fmt.Sprintf("unexpected: %s %s: %s: %s (log %s)", r.spec.name, s, sr.Status,
						clip(sr.Detail, 1500), r.log))
				}
			}
		}
	}
	for _, f := range fixed {
		fmt.Printf("now passes, remove from compat/%s: %s\n", knownFile, f)
	}
	bad := unexpected > 0
	if suite != nil {
		for _, t := range suite.FixedKnown {
			fmt.Printf("now passes, remove from compat/%s: %s\n", kgoKnownFile, t)
		}
		bad = bad || len(suite.Unexpected) > 0 || suite.HarnessErr != ""
	}
	for _, w := range why {
		fmt.Println(w)
	}
	fmt.Printf("compat matrix: pass %d, fail %d (unexpected %d), n/a %d; %s in all\n", pass, fail, unexpected, na, since(start))
	if bad {
		fmt.Printf("compat: FAILED: failures not listed in compat/%s or compat/%s\n", knownFile, kgoKnownFile)
		return 1
	}
	return 0
}

// runRows runs the rows, up to parallel at once (a row marked alone with
// no other), and returns their results in the rows' order. It prints in
// that order too, as one row after another would: a row's header once
// it has started and the rows before it are printed, report's lines
// once it has ended. With parallel 1 the rows run one after another.
func runRows(rows []clientSpec, parallel int, run func(clientSpec) *clientResult, report func(*clientResult)) []*clientResult {
	results := make([]*clientResult, len(rows))
	started, done := make([]chan struct{}, len(rows)), make([]chan struct{}, len(rows))
	for i := range rows {
		started[i], done[i] = make(chan struct{}), make(chan struct{})
	}
	slots := make(chan struct{}, parallel) // one token a running row, all of them for a row alone
	go func() {
		for i, c := range rows {
			n := 1
			if c.alone {
				n = parallel
			}
			for range n {
				slots <- struct{}{}
			}
			close(started[i])
			go func() {
				results[i] = run(c)
				for range n {
					<-slots
				}
				close(done[i])
			}()
		}
	}()
	for i, c := range rows {
		<-started[i]
		fmt.Printf("== %s (%s)\n", c.name, c.about)
		<-done[i]
		report(results[i])
	}
	return results
}

// matrixName names the matrix of backend with nodes nodes: the backend,
// or BACKEND-cluster with several nodes (its page docs/compat-dis-cluster.md,
// its lists known-failures-dis-cluster.txt ...).
func matrixName(backend string, nodes int) string {
	if nodes > 1 {
		return backend + "-cluster"
	}
	return backend
}

// knownFiles names the lists of known failures of a matrix (matrixName): the embedded
// store's are known-failures.txt and kgo-known-failures.txt, another
// matrix's known-failures-MATRIX.txt and kgo-known-failures-MATRIX.txt.
func knownFiles(matrix string) (steps, kgo string) {
	if matrix == "local" {
		return "known-failures.txt", "kgo-known-failures.txt"
	}
	return "known-failures-" + matrix + ".txt", "kgo-known-failures-" + matrix + ".txt"
}

func oneLine(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}

// disgwProc is a running disgw, and for the dis backend the dislocal it
// talks to.
type disgwProc struct {
	cmd    *exec.Cmd
	addr   string
	exited chan struct{}
	err    error
	dis    *disgwProc // dislocal, backend dis
}

// The credentials compat gives dislocal (signatures on) and disgw serve.
const (
	compatDISAK      = "compat-access-key"
	compatDISSK      = "compat-secret-key"
	compatDISProject = "compatproject"
)

// spawn starts bin with args and env, logging to logPath, and waits for the
// HOST:PORT it writes to ready.
func spawn(bin string, args, env []string, ready, logPath string) (*disgwProc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	p := &disgwProc{cmd: cmd, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); logf.Close(); close(p.exited) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, err := os.ReadFile(ready); err == nil && strings.HasSuffix(string(b), "\n") {
			p.addr = strings.TrimSpace(string(b))
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("%s %s exited before it was ready: %v (log %s)", filepath.Base(bin), args[0], p.err, logPath)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s %s not ready after 20s (log %s)", filepath.Base(bin), args[0], logPath)
		}
	}
}

// startDisgw starts disgw on a free port with a fresh data directory and
// waits for its ready file. With backend dis it first starts `disgw
// dislocal` (free port, its own fresh data directory, AK/SK signatures
// checked) and points disgw serve at it; its log is next to disgw's.
func startDisgw(bin, backend, logPath string) (*disgwProc, string, error) {
	return startDisgwWith(bin, backend, logPath, nil, cleanerEnv)
}

// cleanerEnv makes the log cleaner look often (compacted topics of
// kafka-streams).
const cleanerEnv = "DISGW_CLEANER_CHECK_INTERVAL=500ms"

// startDisgwWith is startDisgw with disArgs appended to dislocal's command
// line (backend dis; e.g. --retention-unit 1s) and extraEnv in disgw
// serve's environment.
func startDisgwWith(bin, backend, logPath string, disArgs []string, extraEnv ...string) (*disgwProc, string, error) {
	dir, err := os.MkdirTemp("", "disgw-compat-data-")
	if err != nil {
		return nil, "", err
	}
	args := []string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--data", filepath.Join(dir, "data"),
		"--ready-file", filepath.Join(dir, "ready"), "--backend", backend, "--log-level", "info"}
	env := extraEnv
	var dis *disgwProc
	if backend == "dis" {
		dis, err = spawn(bin, append([]string{"dislocal", "--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "dislocal"),
			"--ak", compatDISAK, "--project-id", compatDISProject, "--ready-file", filepath.Join(dir, "dis-ready")}, disArgs...),
			[]string{"DISGW_DISLOCAL_SK=" + compatDISSK}, filepath.Join(dir, "dis-ready"),
			strings.TrimSuffix(logPath, ".disgw.log")+".dislocal.log")
		if err != nil {
			return nil, dir, err
		}
		args = append(args, "--dis-endpoint", "http://"+dis.addr, "--dis-project-id", compatDISProject)
		env = append(env, "DISGW_DIS_AK="+compatDISAK, "DISGW_DIS_SK="+compatDISSK)
	}
	p, err := spawn(bin, args, env, filepath.Join(dir, "ready"), logPath)
	if err != nil {
		if dis != nil {
			dis.stop()
		}
		return nil, dir, err
	}
	p.dis = dis
	return p, dir, nil
}

// restartDisgw starts disgw serve again after old exited (killed): the
// same data directory (of startDisgwWith's dir) and address, and for the
// DIS backend the same dislocal, which kept running.
func restartDisgw(old *disgwProc, bin, backend, dir, logPath string, extraEnv ...string) (*disgwProc, error) {
	ready := filepath.Join(dir, "ready")
	_ = os.Remove(ready)
	args := []string{"serve", "--listen", old.addr, "--admin-listen", "127.0.0.1:0", "--data", filepath.Join(dir, "data"),
		"--ready-file", ready, "--backend", backend, "--log-level", "info"}
	env := extraEnv
	if old.dis != nil {
		args = append(args, "--dis-endpoint", "http://"+old.dis.addr, "--dis-project-id", compatDISProject)
		env = append(env, "DISGW_DIS_AK="+compatDISAK, "DISGW_DIS_SK="+compatDISSK)
	}
	var p *disgwProc
	var err error
	for range 20 { // the port may take a moment to be free again
		if p, err = spawn(bin, args, env, ready, logPath); err == nil {
			p.dis = old.dis
			return p, nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return nil, err
}

// stop sends SIGTERM and waits (then SIGKILL), disgw first, then its
// dislocal. It returns a problem to report: a process had exited on its
// own, or did not stop cleanly.
func (p *disgwProc) stop() string {
	problem := p.stop1()
	if p.dis != nil {
		if dp := p.dis.stop1(); dp != "" {
			problem = strings.TrimPrefix(problem+"; dislocal: "+dp, "; ")
		}
	}
	return problem
}

func (p *disgwProc) stop1() string {
	select {
	case <-p.exited:
		return fmt.Sprintf("disgw exited during the scenario: %v", p.err)
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.err != nil {
			return fmt.Sprintf("disgw exited with %v on SIGTERM", p.err)
		}
		return ""
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return "disgw did not stop within 30s of SIGTERM (killed)"
	}
}

func runClient(c clientSpec, e env, bin, backend, matrix string, timeout time.Duration, logDir string) *clientResult {
	r := &clientResult{spec: c, matrix: matrix, steps: map[string]*stepResult{}, log: filepath.Join(logDir, c.name+".log")}
	timeout = max(timeout, c.timeout)
	start := time.Now()
	defer func() {
		r.duration = time.Since(start)
		for _, s := range r.stepNames() {
			if r.steps[s] == nil {
				why := "not reached"
				if r.note != "" {
					why = "not reached: " + r.note
				}
				r.steps[s] = &stepResult{Step: s, Status: "fail", Detail: why}
			}
		}
	}()
	e.bin, e.backend = bin, backend
	var secEnv []string
	gwEnv := append([]string{cleanerEnv}, c.gatewayEnv...)
	if c.security != nil {
		dir, err := os.MkdirTemp("", "disgw-compat-security-")
		if err != nil {
			r.note = err.Error()
			return r
		}
		defer os.RemoveAll(dir)
		sec, env, err := setupSecurity(dir, *c.security)
		if err != nil {
			r.note = err.Error()
			return r
		}
		secEnv, gwEnv = sec.Env(), append(gwEnv, env...)
	}
	if !c.ownsDisgw && e.nodes > 1 {
		cl, dataDir, err := startCluster(bin, e.nodes, filepath.Join(logDir, c.name+".disgw.log"), c.disArgs, gwEnv...)
		if dataDir != "" {
			defer os.RemoveAll(dataDir)
		}
		if err != nil {
			r.note = err.Error()
			return r
		}
		e.nodeAddrs, e.broker, e.disEndpoint = cl.addrs(), cl.bootstrap(), cl.disEndpoint()
		if c.seedOne {
			e.broker = e.nodeAddrs[len(e.nodeAddrs)-1]
		}
		defer func() {
			if problem := cl.stop(); problem != "" {
				r.note = strings.TrimPrefix(r.note+"; "+problem, "; ")
			}
		}()
	} else if !c.ownsDisgw {
		p, dataDir, err := startDisgwWith(bin, backend, filepath.Join(logDir, c.name+".disgw.log"), c.disArgs, gwEnv...)
		if dataDir != "" {
			defer os.RemoveAll(dataDir)
		}
		if err != nil {
			r.note = err.Error()
			return r
		}
		e.broker = p.addr
		if p.dis != nil {
			e.disEndpoint = "http://" + p.dis.addr
		}
		defer func() {
			if problem := p.stop(); problem != "" {
				r.note = strings.TrimPrefix(r.note+"; "+problem, "; ")
			}
		}()
	}
	argv, err := c.argv(e)
	if err != nil {
		r.note = err.Error()
		return r
	}
	logf, err := os.Create(r.log)
	if err != nil {
		r.note = err.Error()
		return r
	}
	defer logf.Close()
	fmt.Fprintf(logf, "$ %s\n", strings.Join(argv, " "))

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = e.compat
	cmd.Env = append(os.Environ(), "KAFKAJS_NO_PARTITIONER_WARNING=1", "PYTHONUNBUFFERED=1")
	if e.disEndpoint != "" {
		cmd.Env = append(cmd.Env, disEnv(e.disEndpoint)...)
	}
	cmd.Env = append(cmd.Env, secEnv...)
	if len(e.nodeAddrs) > 0 {
		cmd.Env = append(cmd.Env, clusterNodesEnv+"="+strings.Join(e.nodeAddrs, ","))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		r.note = err.Error()
		return r
	}
	var logMu sync.Mutex
	cmd.Stderr = lockedWriter{&logMu, logf}
	if err := cmd.Start(); err != nil {
		r.note = err.Error()
		return r
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		logMu.Lock()
		fmt.Fprintln(logf, line)
		logMu.Unlock()
		switch {
		case strings.HasPrefix(line, "##STEP "):
			var s struct{ Step, Status, Detail string }
			if err := json.Unmarshal([]byte(line[len("##STEP "):]), &s); err == nil {
				if s.Status != "pass" && s.Status != "fail" && s.Status != "skip" && s.Status != "na" {
					s.Detail = fmt.Sprintf("bad status %q: %s", s.Status, s.Detail)
					s.Status = "fail"
				}
				r.steps[s.Step] = &stepResult{Step: s.Step, Status: s.Status, Detail: s.Detail}
			}
		case strings.HasPrefix(line, "##INFO "):
			var kv struct{ Key, Value string }
			if err := json.Unmarshal([]byte(line[len("##INFO "):]), &kv); err == nil {
				r.info = append(r.info, kv.Key+": "+kv.Value)
			}
		}
	}
	err = cmd.Wait()
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		r.note = fmt.Sprintf("scenario timed out after %s", timeout)
	case err != nil && !errors.Is(err, exec.ErrWaitDelay):
		r.note = fmt.Sprintf("scenario exited: %v", err)
	}
	return r
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// loadKnown reads known-failures.txt: lines "CLIENT | STEP | reason".
func loadKnown(path string) (map[string]string, error) {
	m := map[string]string{}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.SplitN(line, "|", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("%s:%d: want CLIENT | STEP | reason", path, i+1)
		}
		m[strings.TrimSpace(f[0])+" "+strings.TrimSpace(f[1])] = strings.TrimSpace(f[2])
	}
	return m, nil
}

// clip is s cut to at most n bytes, with how much was cut said.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s ... (%d bytes more)", s[:n], len(s)-n)
}
