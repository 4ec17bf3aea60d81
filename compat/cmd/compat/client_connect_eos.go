package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/disgw/disgw/compat/internal/scen"
)

// kafka-connect-eos: Apache Kafka Connect 4.3.1 in distributed mode with
// exactly.once.source.support=enabled (KIP-618: each source task writes its
// records and its source offsets in one transaction), a FileStreamSource
// connector with exactly.once.support=required, and the worker killed
// (SIGKILL) mid-run. The scenario runs its own disgw (and dislocal on
// backend dis), as kafka-connect does. Steps:
//
//   - create: the worker starts with exactly-once source support and creates
//     its internal topics.
//   - produce: the connector reads 5,000 lines into a topic, in
//     transactions.
//   - consume: once 1,000 lines are committed in the topic, the worker is
//     killed (SIGKILL) and started again; read_committed, the topic then
//     has each of the 5,000 lines exactly once (the killed task's open
//     transaction is aborted when its successor fences it).
//   - resume: killed again while 1,000 more lines are appended: each of the
//     6,000 lines exactly once.
//   - describe: the connector and its task RUNNING, and Kafka's transaction
//     list (the worker's transactional ids) answered.
//
// With several nodes (-nodes N, backend dis; make compat-cluster) the
// worker talks to N cluster-mode nodes in front of one dislocal (every node
// in its bootstrap.servers, as in kafka-connect); the steps are the same.
const connectEOSMore = 1000

func runConnectEOS(bin, backend string, nodes int, tools, topic string) {
	jars := filepath.Join(tools, connectJarsDir)
	steps := scen.CoreSteps
	fail := func(from int, why string) {
		scen.Report(steps[from], "fail", why)
		for _, s := range steps[from+1:] {
			scen.Report(s, "skip", "an earlier step failed")
		}
	}
	if _, err := os.Stat(filepath.Join(jars, "connect-runtime-4.3.1.jar")); err != nil {
		fail(0, fmt.Sprintf("Kafka Connect 4.3.1 jars missing under %s (run compat/setup)", jars))
		return
	}
	scen.Info("version", "Apache Kafka Connect 4.3.1 (distributed, exactly.once.source.support=enabled), FileStreamSource, "+javaVersion(context.Background()))
	c, err := newConnectRun(bin, backend, nodes, jars, topic, "", 0) // DIS's own retention: no compactor copies during the run

	if err != nil {
		fail(0, err.Error())
		return
	}
	defer c.close()
	c.workerProps = []string{"exactly.once.source.support=enabled"}
	if err := c.startWorker(""); err != nil {
		fail(0, err.Error())
		return
	}
	d, err := c.checkInternalTopics()
	if err != nil {
		fail(0, err.Error())
		return
	}
	scen.Report(scen.StepCreate, "pass", "exactly.once.source.support=enabled; "+d)

	err = c.createDataTopic()
	if err == nil {
		err = c.appendLines(0, connectLines)
	}
	if err == nil {
		err = c.createConnector("compat-source", map[string]string{
			"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "file": c.src, "topic": c.topic, "tasks.max": "1",
			"exactly.once.support": "required", "transaction.boundary": "poll", "batch.size": "100"}) // a transaction a poll of 100 lines
	}
	if err != nil {
		fail(1, err.Error())
		return
	}
	atKill, err := c.waitLastStable(1000)
	if err != nil {
		fail(1, err.Error())
		return
	}
	scen.Report(scen.StepProduce, "pass", fmt.Sprintf("FileStreamSource with exactly.once.support=required, a transaction a poll of 100 lines: %d of %d lines committed in %s (its last stable offsets) when the worker was killed", atKill, connectLines, c.topic))

	if err := c.killWorker(); err != nil {
		fail(2, err.Error())
		return
	}
	if _, err := c.waitCommittedLines(connectLines, true); err != nil {
		fail(2, err.Error())
		return
	}
	scen.Report(scen.StepConsume, "pass", fmt.Sprintf("worker killed (SIGKILL) mid-run and started again: read_committed, each of the %d lines exactly once", connectLines))

	total := connectLines + connectEOSMore
	if err := c.appendLines(connectLines, connectEOSMore); err != nil {
		fail(3, err.Error())
		return
	}
	if err := c.killWorker(); err != nil {
		fail(3, err.Error())
		return
	}
	if _, err := c.waitCommittedLines(total, true); err != nil {
		fail(3, err.Error())
		return
	}
	scen.Report(scen.StepResume, "pass", fmt.Sprintf("%d more lines, the worker killed (SIGKILL) again while they were read: each of the %d lines exactly once", connectEOSMore, total))

	var st struct {
		Connector struct{ State string }
		Tasks     []struct{ State string }
	}
	b, err := c.get("/connectors/compat-source/status")
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err == nil && (st.Connector.State != "RUNNING" || len(st.Tasks) != 1 || st.Tasks[0].State != "RUNNING") {
		err = fmt.Errorf("compat-source: %s", b)
	}
	if err == nil {
		// The connector's one set of task configs is all the worker reads
		// in connect-configs: on DIS the compactor's copies of its
		// records are left out of Kafka reads (docs/compaction.md), so
		// the worker never stops its task for an update nobody made.
		log, _ := os.ReadFile(filepath.Join(c.dir, "worker.log"))
		if n := strings.Count(string(log), "Handling task config update by stopping"); n > 0 {
			err = fmt.Errorf("the worker stopped its task for a config update %d times (compacted-topic copies read as updates?)", n)
		}
	}
	if err != nil {
		fail(4, err.Error())
		return
	}
	scen.Report(scen.StepDescribe, "pass", "compat-source and its task RUNNING after two kills, never stopped for a config update")
}

// killWorker kills the worker (SIGKILL) and starts it again.
func (c *connectRun) killWorker() error {
	if c.worker != nil {
		_ = c.worker.Process.Kill()
		<-c.workerDone
		c.worker = nil
	}
	return c.launchWorker(filepath.Join(c.dir, "worker.properties"), filepath.Join(c.dir, "log4j.properties"))
}

// waitLastStable waits until the topic's last stable offsets (ListOffsets
// read_committed) add up to n at least, polling every 50 ms, and returns
// their sum (records and markers).
func (c *connectRun) waitLastStable(n int64) (int64, error) {
	adm, cl, err := c.admin()
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var sum int64
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		offs, err := adm.ListCommittedOffsets(ctx, c.topic)
		cancel()
		if err != nil {
			continue
		}
		sum = 0
		offs.Each(func(o kadm.ListedOffset) { sum += o.Offset })
		if sum >= n {
			return sum, nil
		}
	}
	return sum, fmt.Errorf("the topic's last stable offsets add up to %d after 90s, want %d; %s", sum, n, c.workerLogTail())
}

// waitCommittedLines reads the topic with read_committed until it has n
// distinct lines of the source file (3 s more when exact), and returns how
// many it read. exact: every line must be there exactly once and nothing
// else.
func (c *connectRun) waitCommittedLines(n int, exact bool) (int, error) {
	deadline := time.Now().Add(2 * time.Minute)
	var seen map[string]int
	for time.Now().Before(deadline) {
		var err error
		if seen, err = c.readCommittedLines(); err != nil {
			return 0, err
		}
		if len(seen) >= n {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(seen) < n {
		return len(seen), fmt.Errorf("read_committed: %d distinct lines after 2 min, want %d; %s", len(seen), n, c.workerLogTail())
	}
	if !exact {
		return len(seen), nil
	}
	time.Sleep(3 * time.Second)
	seen, err := c.readCommittedLines()
	if err != nil {
		return 0, err
	}
	var twice, other []string
	for l, k := range seen {
		if k > 1 {
			twice = append(twice, fmt.Sprintf("%q %d times", l, k))
		}
		var i int
		if _, err := fmt.Sscanf(l, "line %05d of the compat source file", &i); err != nil || i >= n {
			other = append(other, l)
		}
	}
	switch {
	case len(twice) > 0:
		return len(seen), fmt.Errorf("read_committed: %d lines more than once: %s", len(twice), tail(strings.Join(twice, ", "), 400))
	case len(other) > 0 || len(seen) != n:
		return len(seen), fmt.Errorf("read_committed: %d distinct lines, want %d; unexpected: %s", len(seen), n, tail(strings.Join(other, ", "), 300))
	}
	return n, nil
}

// readCommittedLines reads the whole topic with read_committed
// (readCommitted) and counts each value.
func (c *connectRun) readCommittedLines() (map[string]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	byKey, err := readCommitted(ctx, c.bootstrap(), c.topic)
	out := map[string]int{}
	for _, vs := range byKey {
		for _, v := range vs {
			out[v]++
		}
	}
	return out, err
}
