package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/disgw/disgw/compat/internal/scen"
)

// Apache Kafka Connect 4.3.1 in distributed mode (connect-runtime and
// connect-file from Maven Central; 4.4.0 of them is not served), with disgw
// its only bootstrap server. The scenario runs its own disgw (and, for the
// DIS backend, its own dislocal) because it kills and restarts it. Its
// steps, in the matrix's columns:
//
//   - create: workers create their internal topics (configs, offsets,
//     status; compacted) themselves, with replication factor 1, -1 (the
//     broker's default) and their default 3, each on a fresh disgw; the
//     topics say cleanup.policy=compact.
//   - produce: a FileStreamSource connector reads 5,000 lines into a topic.
//   - consume: a FileStreamSink connector writes them to a file, which must
//     equal the source file.
//   - resume: the worker is restarted and 1,000 lines appended: the sink
//     has exactly 6,000, none twice.
//   - describe: both connectors RUNNING, the sink's group offsets = the
//     topic's end offsets.
//   - kill -9 disgw: disgw is killed under the worker and started again on
//     the same data and port; 1,000 more lines: exactly 7,000.
//   - after the cleaner (backend local): the internal topics are made
//     cleanable (segment.ms 500, min.cleanable.dirty.ratio 0.01) and
//     cleaned; the worker is restarted and 1,000 more lines appended:
//     exactly 8,000, so the connector configs, the source offsets and the
//     sink offsets survived.
//   - after expiry (backend dis, where there is no log cleaner: the
//     gateway's compactor re-appends each live key's latest record before
//     DIS expires it): dislocal runs with --retention-unit 500ms, so a
//     168-hour stream (the compacted internal topics) keeps records 84 s.
//     The step waits until every record the internal topics had when it
//     began has expired in DIS (each partition's log start offset at or
//     past the end offset it had), restarts the worker, which then reads
//     only the compactor's copies, and appends 1,000 more lines: exactly
//     8,000, as after the cleaner.
//
// kill -9 disgw is the same on both backends: each keeps the groups'
// membership across a restart (the DIS backend in its compacted stream
// __disgw_groups), so the worker and the sink go on with the generation
// they had and nothing is delivered twice.
//
// With several nodes (-nodes N, backend dis; cluster.go) each run has N
// cluster-mode nodes in front of one dislocal, every node in the worker's
// bootstrap.servers, and kill -9 disgw is kill -9 a node: the node that
// coordinates the sink's group is killed (SIGKILL) under the worker; while
// it is down 1,000 more lines must reach the sink, exactly 7,000 (its
// partitions and groups move to the other nodes once DIS dropped it from
// the nodes' group); then it is started again on its address and the
// step waits until every node's Metadata lists all N. after expiry runs
// as on one node, on the N nodes.
const (
	connectJarsDir     = "connect-4.3.1"
	connectWorkerClass = "org.apache.kafka.connect.cli.ConnectDistributed"
	connectLines       = 5000
	connectMore        = 1000
	// connectRetentionUnit is dislocal's --retention-unit on backend dis:
	// the 168 hours of a compacted topic are 84 s.
	connectRetentionUnit = 500 * time.Millisecond
	// connectTimeout is the scenario's time limit (the driver's
	// -client-timeout when that is longer): after expiry waits about
	// 168 × connectRetentionUnit.
	connectTimeout = 9 * time.Minute
)

var connectInternalTopics = []string{"connect-configs", "connect-offsets", "connect-status"}

// connectExtraFor is the scenario's steps beyond the core ones on backend.
func connectExtraFor(backend string, nodes int) []string {
	switch {
	case nodes > 1:
		return []string{"kill -9 a node", "after expiry"}
	case backend == "dis":
		return []string{"kill -9 disgw", "after expiry"}
	}
	return []string{"kill -9 disgw", "after the cleaner"}
}

// connectRun is one worker and the disgw it talks to.
type connectRun struct {
	bin, backend, jars, dir string
	nodes                   int
	disgw                   *disgwProc
	cluster                 *disgwCluster // with several nodes, in place of disgw
	dataDir                 string        // of disgw (and dislocal)
	disgwLog                string        // of the disgw running
	worker                  *exec.Cmd
	workerDone              chan error
	rest                    string // the worker's REST address
	src, sink               string
	topic                   string
	workerProps             []string // added to the worker's properties (startWorker)
}

func runConnect(bin, backend string, nodes int, tools, topic string) {
	jars := filepath.Join(tools, connectJarsDir)
	steps := append(append([]string{}, scen.CoreSteps...), connectExtraFor(backend, nodes)...)
	if _, err := os.Stat(filepath.Join(jars, "connect-runtime-4.3.1.jar")); err != nil {
		for _, s := range steps {
			scen.Report(s, "fail", fmt.Sprintf("Kafka Connect 4.3.1 jars missing under %s (run compat/setup)", jars))
		}
		return
	}
	scen.Info("version", "Apache Kafka Connect 4.3.1 (distributed), FileStream connectors, "+javaVersion(context.Background()))
	fail := func(from int, step, why string) {
		scen.Report(step, "fail", why)
		for _, s := range steps[from+1:] {
			scen.Report(s, "skip", "an earlier step failed")
		}
	}
	// create: the internal topics, at three replication factors.
	var detail []string
	for _, rf := range []string{"1", "-1", ""} {
		c, err := newConnectRun(bin, backend, nodes, jars, topic, rf, connectRetentionUnit)
		if err == nil {
			err = c.startWorker(rf)
		}
		if err == nil {
			var d string
			d, err = c.checkInternalTopics()
			detail = append(detail, fmt.Sprintf("rf %s: %s", cmpOr(rf, "default (3)"), d))
		}
		if rf != "" || err != nil {
			c.close()
		}
		if err != nil {
			fail(0, scen.StepCreate, fmt.Sprintf("replication factor %s: %v", cmpOr(rf, "default (3)"), err))
			return
		}
		if rf == "" {
			defer c.close()
			scen.Report(scen.StepCreate, "pass", strings.Join(detail, "; "))
			runConnectFlow(c, steps, fail)
		}
	}
}

func runConnectFlow(c *connectRun, steps []string, fail func(int, string, string)) {
	if err := c.createDataTopic(); err != nil {
		fail(1, scen.StepProduce, err.Error())
		return
	}
	if err := c.appendLines(0, connectLines); err != nil {
		fail(1, scen.StepProduce, err.Error())
		return
	}
	if err := c.createConnector("compat-source", map[string]string{
		"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "file": c.src, "topic": c.topic, "tasks.max": "1"}); err != nil {
		fail(1, scen.StepProduce, err.Error())
		return
	}
	if err := c.waitTopic(connectLines); err != nil {
		fail(1, scen.StepProduce, err.Error())
		return
	}
	scen.Report(scen.StepProduce, "pass", fmt.Sprintf("FileStreamSource: %d lines in %s", connectLines, c.topic))
	if err := c.createConnector("compat-sink", map[string]string{
		"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "file": c.sink, "topics": c.topic, "tasks.max": "1"}); err != nil {
		fail(2, scen.StepConsume, err.Error())
		return
	}
	if err := c.waitSink(connectLines); err != nil {
		fail(2, scen.StepConsume, err.Error())
		return
	}
	scen.Report(scen.StepConsume, "pass", fmt.Sprintf("FileStreamSink: the sink file equals the source file, %d lines", connectLines))

	total := connectLines
	// more runs before, appends connectMore lines and checks the sink;
	// how() describes what before did.
	more := func(step int, name string, how func() string, before func() error) bool {
		if err := before(); err != nil {
			fail(step, name, err.Error())
			return false
		}
		if err := c.appendLines(total, connectMore); err != nil {
			fail(step, name, err.Error())
			return false
		}
		total += connectMore
		if err := c.waitSink(total); err != nil {
			fail(step, name, err.Error())
			return false
		}
		scen.Report(name, "pass", fmt.Sprintf("%s, %d more lines: the sink has exactly %d, none twice", how(), connectMore, total))
		return true
	}
	say := func(s string) func() string { return func() string { return s } }
	if !more(3, scen.StepResume, say("worker restarted"), c.restartWorker) {
		return
	}
	if d, err := c.describe(); err != nil {
		fail(4, scen.StepDescribe, err.Error())
		return
	} else {
		scen.Report(scen.StepDescribe, "pass", d)
	}
	if c.cluster != nil {
		var killed int
		var how string
		if !more(5, "kill -9 a node", func() string { return how }, func() error {
			var err error
			killed, how, err = c.killNode()
			return err
		}) {
			return
		}
		if err := c.cluster.restart(killed); err != nil {
			scen.Report("after expiry", "skip", fmt.Sprintf("node %d not started again: %v", killed, err))
			return
		}
	} else if !more(5, "kill -9 disgw", say("disgw killed (SIGKILL) under the worker and started again"), c.restartDisgw) {
		return
	}
	if c.backend != "dis" {
		more(6, "after the cleaner", say("the internal topics compacted by disgw's log cleaner, then the worker restarted"), func() error {
			if err := c.cleanInternalTopics(); err != nil {
				return err
			}
			return c.restartWorker()
		})
		return
	}
	var expired string
	more(6, "after expiry", func() string {
		return fmt.Sprintf("every record the internal topics had expired in DIS (dislocal --retention-unit %v: %s), "+
			"the worker restarted on the compactor's copies", connectRetentionUnit, expired)
	}, func() error {
		var err error
		if expired, err = c.expireInternalTopics(); err != nil {
			return err
		}
		return c.restartWorker()
	})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// newConnectRun starts disgw (and dislocal on backend dis, with
// --retention-unit unit unless it is 0) for a worker whose internal topics
// have replication factor rf.
func newConnectRun(bin, backend string, nodes int, jars, topic, rf string, unit time.Duration) (*connectRun, error) {
	c := &connectRun{bin: bin, backend: backend, nodes: nodes, jars: jars, topic: topic}
	var err error
	c.dir, err = os.MkdirTemp("", "disgw-compat-connect-")
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "logs of the run with replication factor %s: %s\n", cmpOr(rf, "default"), c.dir)
	c.src, c.sink = filepath.Join(c.dir, "source.txt"), filepath.Join(c.dir, "sink.txt")
	c.disgwLog = filepath.Join(c.dir, "disgw.log")
	var disArgs []string
	if backend == "dis" && unit > 0 {
		disArgs = []string{"--retention-unit", unit.String()}
	}
	if nodes > 1 {
		c.cluster, c.dataDir, err = startCluster(bin, nodes, filepath.Join(c.dir, "cluster.disgw.log"), disArgs, "DISGW_CLEANER_CHECK_INTERVAL=200ms")
		return c, err
	}
	c.disgw, c.dataDir, err = startDisgwWith(bin, backend, c.disgwLog, disArgs, "DISGW_CLEANER_CHECK_INTERVAL=200ms")
	return c, err
}

// bootstrap is the worker's bootstrap.servers: disgw's address, or every
// node's.
func (c *connectRun) bootstrap() string {
	if c.cluster != nil {
		return c.cluster.bootstrap()
	}
	return c.disgw.addr
}

// close stops the worker and disgw and removes disgw's data; the
// directory with the logs stays (its path is an ##INFO line).
func (c *connectRun) close() {
	c.stopWorker()
	if c.disgw != nil {
		c.disgw.stop()
	}
	if c.cluster != nil {
		c.cluster.stop()
	}
	if c.dataDir != "" {
		_ = os.RemoveAll(c.dataDir)
	}
}

// startWorker writes the worker's properties (replication factor rf of its
// internal topics, "" for Connect's default) and starts it, waiting for its
// REST API.
func (c *connectRun) startWorker(rf string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	c.rest = fmt.Sprintf("127.0.0.1:%d", port)
	props := []string{
		"bootstrap.servers=" + c.bootstrap(),
		"group.id=compat-connect",
		"key.converter=org.apache.kafka.connect.storage.StringConverter",
		"value.converter=org.apache.kafka.connect.storage.StringConverter",
		"config.storage.topic=connect-configs",
		"offset.storage.topic=connect-offsets",
		"status.storage.topic=connect-status",
		"listeners=http://" + c.rest,
		"offset.flush.interval.ms=500",
		"plugin.discovery=service_load",
		// A task restarted mid-write (the compactor's copy of a task
		// config in connect-configs reads as a config update on DIS) must
		// drain its producer before it stops: 5,000 lines in one
		// partition take 5 s at DIS's 1,000 records a second, the
		// default graceful timeout; past it the task is cancelled without
		// committing its offsets and the next one sends the lines again.
		"task.shutdown.graceful.timeout.ms=30000",
	}
	props = append(props, c.workerProps...)
	if rf != "" {
		for _, t := range []string{"config", "offset", "status"} {
			props = append(props, t+".storage.replication.factor="+rf)
		}
	}
	workerProps := filepath.Join(c.dir, "worker.properties")
	if err := os.WriteFile(workerProps, []byte(strings.Join(props, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	log4j := filepath.Join(c.dir, "log4j.properties")
	if err := os.WriteFile(log4j, []byte("log4j.rootLogger=INFO, stdout\nlog4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"+
		"log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\nlog4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n"), 0o644); err != nil {
		return err
	}
	return c.launchWorker(workerProps, log4j)
}

func (c *connectRun) launchWorker(workerProps, log4j string) error {
	logf, err := os.OpenFile(filepath.Join(c.dir, "worker.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command("java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Dlog4j.configuration=file:"+log4j,
		"-cp", filepath.Join(c.jars, "*"), connectWorkerClass, workerProps)
	done, err := startLogged(cmd, logf)
	if err != nil {
		return err
	}
	c.worker, c.workerDone = cmd, done
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			c.worker = nil
			return fmt.Errorf("the worker exited while starting: %v; %s", err, c.workerLogTail())
		default:
		}
		if _, err := c.get("/connectors"); err == nil {
			return nil
		}
		time.Sleep(300 * time.Millisecond)
	}
	return fmt.Errorf("the worker's REST API not up after 90s; %s", c.workerLogTail())
}

func (c *connectRun) workerLogTail() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "worker.log"))
	var errs []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, " ERROR ") {
			errs = append(errs, l)
		}
	}
	if len(errs) > 0 {
		return "worker errors: " + tail(strings.Join(errs, " | "), 600)
	}
	return "worker log: " + tail(string(b), 400)
}

// stopWorker stops the worker with SIGTERM (a clean stop: it commits what
// it has), waiting for it.
func (c *connectRun) stopWorker() {
	if c.worker == nil {
		return
	}
	stopProcess(c.worker, c.workerDone, syscall.SIGTERM, 60*time.Second)
	c.worker = nil
}

// stopProcess sends sig to cmd and waits for done, killing it after limit.
func stopProcess(cmd *exec.Cmd, done <-chan error, sig os.Signal, limit time.Duration) {
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
	}
}

func (c *connectRun) restartWorker() error {
	c.stopWorker()
	return c.launchWorker(filepath.Join(c.dir, "worker.properties"), filepath.Join(c.dir, "log4j.properties"))
}

// restartDisgw kills disgw with SIGKILL and starts it again on the same
// data directory and port (the worker's bootstrap address); dislocal, for
// the DIS backend, keeps running.
func (c *connectRun) restartDisgw() error {
	_ = c.disgw.cmd.Process.Kill()
	<-c.disgw.exited
	c.disgwLog = filepath.Join(c.dir, "disgw-restarted.log")
	p, err := restartDisgw(c.disgw, c.bin, c.backend, c.dataDir, c.disgwLog, "DISGW_CLEANER_CHECK_INTERVAL=200ms")
	if err != nil {
		return err
	}
	c.disgw = p
	return nil
}

// killNode kills (SIGKILL) the node that coordinates the sink's group
// (several nodes) and returns it and what the step says of it.
func (c *connectRun) killNode() (int, string, error) {
	adm, cl, err := c.admin()
	if err != nil {
		return 0, "", err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	co := adm.FindGroupCoordinators(ctx, "connect-compat-sink")["connect-compat-sink"]
	if co.Err != nil {
		return 0, "", fmt.Errorf("FindCoordinator of connect-compat-sink: %w", co.Err)
	}
	node := int(co.NodeID)
	if node < 0 || node >= len(c.cluster.nodes) {
		return 0, "", fmt.Errorf("connect-compat-sink coordinated by %d, not a node", node)
	}
	led := 0
	if md, err := adm.Metadata(ctx, c.topic); err == nil {
		for _, p := range md.Topics[c.topic].Partitions {
			if int(p.Leader) == node {
				led++
			}
		}
	}
	c.cluster.kill(node)
	return node, fmt.Sprintf("node %d (coordinator of the sink's group, leader of %d of the topic's partitions) killed (SIGKILL) under the worker "+
		"and left down", node, led), nil
}

// expireInternalTopics waits until every record the internal topics hold
// now has expired in DIS (waitExpired).
func (c *connectRun) expireInternalTopics() (string, error) {
	adm, cl, err := c.admin()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	return waitExpired(adm, 168*connectRetentionUnit+2*time.Minute, connectInternalTopics...)
}

// createDataTopic creates the topic the source writes and the sink reads,
// one partition, on backend dis with retention.ms 168 hours, DIS's
// longest: 84 s at dislocal's --retention-unit 500ms. Auto-created, it
// would keep DIS's default 24 hours, 12 s here, and a sink task restarted
// a few times (a compactor's copy in connect-configs is a config update
// to the worker) found its first records expired (make compat-cluster
// failed so in CI: the sink began at offset 1243 of 5000).
func (c *connectRun) createDataTopic() error {
	adm, cl, err := c.admin()
	if err != nil {
		return err
	}
	defer cl.Close()
	var configs map[string]*string
	if c.backend == "dis" {
		ms := strconv.FormatInt((168 * time.Hour).Milliseconds(), 10)
		configs = map[string]*string{"retention.ms": &ms}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := adm.CreateTopic(ctx, 1, -1, configs, c.topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return fmt.Errorf("creating %s: %w", c.topic, err)
	}
	return nil
}

func (c *connectRun) admin() (*kadm.Client, *kgo.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.bootstrap(), ",")...))
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl, nil
}

// checkInternalTopics waits for the worker's three internal topics and
// checks each says cleanup.policy=compact.
func (c *connectRun) checkInternalTopics() (string, error) {
	adm, cl, err := c.admin()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := connectInternalTopics
	for {
		rc, err := adm.DescribeTopicConfigs(ctx, names...)
		if err == nil {
			var got []string
			ok := true
			for _, r := range rc {
				v := ""
				for _, cfg := range r.Configs {
					if cfg.Key == "cleanup.policy" && cfg.Value != nil {
						v = *cfg.Value
					}
				}
				ok = ok && r.Err == nil && v == "compact"
				got = append(got, fmt.Sprintf("%s cleanup.policy=%s", r.Name, v))
			}
			if ok && len(rc) == 3 {
				return strings.Join(got, ", "), nil
			}
			if ctx.Err() != nil {
				return "", fmt.Errorf("internal topics: %s", strings.Join(got, ", "))
			}
		} else if ctx.Err() != nil {
			return "", err
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// appendLines appends lines from..from+n-1 to the source file.
func (c *connectRun) appendLines(from, n int) error {
	f, err := os.OpenFile(c.src, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	var b strings.Builder
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&b, "line %05d of the compat source file\n", i)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (c *connectRun) createConnector(name string, config map[string]string) error {
	body, _ := json.Marshal(map[string]any{"name": name, "config": config})
	resp, err := http.Post("http://"+c.rest+"/connectors", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("POST /connectors %s: %s %s", name, resp.Status, tail(string(b), 300))
	}
	return nil
}

func (c *connectRun) get(path string) ([]byte, error) {
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + c.rest + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s %s", path, resp.Status, tail(string(b), 300))
	}
	return b, err
}

// waitTopic waits until the topic holds n records.
func (c *connectRun) waitTopic(n int) error {
	adm, cl, err := c.admin()
	if err != nil {
		return err
	}
	defer cl.Close()
	deadline := time.Now().Add(90 * time.Second)
	var have int64
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ends, err := adm.ListEndOffsets(ctx, c.topic)
		cancel()
		if err == nil {
			have = 0
			ends.Each(func(o kadm.ListedOffset) { have += o.Offset })
			if have >= int64(n) {
				return nil
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	return fmt.Errorf("the topic has %d records after 90s, want %d; %s", have, n, c.workerLogTail())
}

// waitSink waits until the sink file has n lines and the sink's group has
// committed the topic's end offsets (so that nothing is to be delivered
// again), then checks the file equals the source file: the same lines, in
// order, none twice.
func (c *connectRun) waitSink(n int) error {
	deadline := time.Now().Add(120 * time.Second)
	var lines int
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(c.sink)
		lines = bytes.Count(b, []byte("\n"))
		if lines >= n {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if lines < n {
		return fmt.Errorf("the sink file has %d lines after 120s, want %d; %s", lines, n, c.workerLogTail())
	}
	if _, err := c.sinkCommitted(60 * time.Second); err != nil {
		return err
	}
	b, err := os.ReadFile(c.sink)
	if err != nil {
		return err
	}
	src, err := os.ReadFile(c.src)
	if err != nil {
		return err
	}
	if !bytes.Equal(b, src) {
		return fmt.Errorf("the sink file (%d lines) differs from the source file (%d lines)",
			bytes.Count(b, []byte("\n")), bytes.Count(src, []byte("\n")))
	}
	return nil
}

// describe checks the connectors are RUNNING and the sink's group has
// committed the topic's end offsets.
func (c *connectRun) describe() (string, error) {
	for _, name := range []string{"compat-source", "compat-sink"} {
		var st struct {
			Connector struct{ State string }
			Tasks     []struct{ State string }
		}
		b, err := c.get("/connectors/" + name + "/status")
		if err == nil {
			err = json.Unmarshal(b, &st)
		}
		if err != nil {
			return "", err
		}
		if st.Connector.State != "RUNNING" || len(st.Tasks) != 1 || st.Tasks[0].State != "RUNNING" {
			return "", fmt.Errorf("%s: %s", name, b)
		}
	}
	got, err := c.sinkCommitted(30 * time.Second)
	if err != nil {
		return "", err
	}
	return "compat-source and compat-sink RUNNING; group connect-compat-sink committed = end offsets (" + got + ")", nil
}

// sinkCommitted waits until the sink's group has committed the topic's end
// offsets and returns them.
func (c *connectRun) sinkCommitted(limit time.Duration) (string, error) {
	adm, cl, err := c.admin()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ends, err1 := adm.ListEndOffsets(ctx, c.topic)
		committed, err2 := adm.FetchOffsets(ctx, "connect-compat-sink")
		cancel()
		if err := firstErr(err1, err2); err != nil {
			// With several nodes, a request may go to a node just
			// killed: asked again until the limit.
			if c.cluster == nil || time.Now().After(deadline) {
				return "", err
			}
			time.Sleep(500 * time.Millisecond)
			continue
		}
		var got []string
		same := true
		ends.Each(func(o kadm.ListedOffset) {
			cm, _ := committed.Lookup(c.topic, o.Partition)
			same = same && cm.At == o.Offset
			got = append(got, fmt.Sprintf("p%d=%d/%d", o.Partition, cm.At, o.Offset))
		})
		if same {
			return strings.Join(got, " "), nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("group connect-compat-sink committed/end after %v: %s", limit, strings.Join(got, " "))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// cleanInternalTopics makes the internal topics cleanable at once
// (segment.ms 500, min.cleanable.dirty.ratio 0.01) and waits until disgw's
// log cleaner has passed over each.
func (c *connectRun) cleanInternalTopics() error {
	adm, cl, err := c.admin()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := connectInternalTopics
	seg, ratio := "500", "0.01"
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "segment.ms", Value: &seg}, {Name: "min.cleanable.dirty.ratio", Value: &ratio}}, names...)
	if err == nil {
		for _, r := range rs {
			if r.Err != nil {
				err = fmt.Errorf("alter %s: %v", r.Name, r.Err)
			}
		}
	}
	if err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(c.disgwLog)
		missing := []string{}
		for _, n := range names {
			if !bytes.Contains(b, []byte(`"msg":"log cleaner pass","stream":"`+n+`"`)) {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("disgw's log cleaner did not pass over %s within 60s", strings.Join(missing, ", "))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
