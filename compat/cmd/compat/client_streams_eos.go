package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/disgw/disgw/compat/internal/scen"
)

// Apache Kafka Streams 4.4.0 with processing.guarantee=exactly_once_v2 (the
// kafka-streams scenario's WordCount; transactions, docs/transactions.md),
// on a disgw of its own (and dislocal on backend dis), which it kills once
// too. Its steps:
//
//   - create: the input and output topics (kadm), 2 partitions each.
//   - produce: 500 lines of words before the application starts, then more
//     while it runs and is killed: 100 a second for the first 2,000, then
//     20 a second until the kills are done.
//   - consume: the application is killed with SIGKILL three times while
//     lines keep coming, then started again on the same state directory
//     (its transactional id is kept there, so the new instance fences the
//     old one and aborts its transaction); between the first and the
//     second kill, disgw itself is killed (SIGKILL) and started again on
//     the same data and port. The kills are not on a clock but on the
//     application's progress: each (disgw's too) once the instance running
//     has committed a transaction (its group's offsets moved), 1 s into
//     the next one (commit.interval.ms 2 s: mid-run, a transaction open;
//     an at-least-once application repeats counts here), and after
//     disgw's restart the application must commit again before it is
//     killed. The application runs with session.timeout.ms 6000 (disgw's
//     smallest) and the gateways with no initial rebalance delay, so that
//     a killed instance's replacement gets the partitions within seconds.
//   - resume: the output read with read_committed: every word's counts are
//     exactly 1, 2, ..., N in order, each once (at-least-once would repeat
//     some after each kill), and N is the word's total.
//   - describe: the application's group committed the input's end offsets.
//
// With several nodes (-nodes N, backend dis; make compat-cluster,
// cluster.go) the scenario runs N cluster-mode nodes in front of one
// dislocal, every node in the application's bootstrap.servers, and in place
// of disgw one node is killed (SIGKILL): the node that coordinates most of
// the application's transactional ids (its group's coordinator on a tie or
// when none is listed; node 1 when neither is found), started again at
// once on its address and data directory. The steps and the check are the
// same.
var streamsEOSExtra []string

const (
	streamsEOSFirst = 500  // lines before the application starts
	streamsEOSLines = 2000 // lines while it runs, 20 at a time
	streamsEOSKills = 3
	// streamsEOSCommitMS is the application's commit.interval.ms: each
	// transaction stays open 2 s, so a kill lands in one (an at-least-once
	// application killed there repeats up to 2 s of counts: the check
	// fails for it).
	streamsEOSCommitMS = 2000
	// streamsEOSSessionMS is the application's session.timeout.ms
	// (heartbeat.interval.ms a third of it), the smallest disgw accepts
	// (group_min_session_timeout 6s): the group drops a killed instance
	// 6 s after its last heartbeat, not 45 s, and its replacement gets
	// the partitions then.
	streamsEOSSessionMS = 6000
	// streamsEOSRebalanceDelayEnv: the gateways the scenario starts
	// rebalance a group with no members at once (not 3 s after its first
	// JoinGroup): one instance at a time.
	streamsEOSRebalanceDelayEnv = "DISGW_GROUP_INITIAL_REBALANCE_DELAY=-1"
)

func runStreamsEOS(bin, backend string, nodes int, topic, tools string) {
	r := &streamsRun{backend: backend, guarantee: "exactly_once_v2", commitMS: streamsEOSCommitMS, sessionMS: streamsEOSSessionMS,
		jars: filepath.Join(tools, "kafka-4.4.0"), classes: filepath.Join(tools, streamsAppDir),
		app: topic + "-wordcount-eos", in: topic + "-lines", out: topic + "-counts", want: map[string]int{}}
	steps := scen.CoreSteps
	fail := func(from int, why string) {
		scen.Report(steps[from], "fail", why)
		for _, s := range steps[from+1:] {
			scen.Report(s, "skip", "an earlier step failed")
		}
	}
	if _, err := os.Stat(filepath.Join(r.classes, "WordCount.class")); err != nil {
		for _, s := range steps {
			scen.Report(s, "fail", fmt.Sprintf("%s/WordCount.class missing (run compat/setup)", r.classes))
		}
		return
	}
	scen.Info("version", "Apache Kafka Streams 4.4.0, exactly_once_v2, "+javaVersion(context.Background()))
	var err error
	if r.dir, err = os.MkdirTemp("", "disgw-compat-streams-eos-"); err != nil {
		fail(0, err.Error())
		return
	}
	fmt.Fprintln(os.Stderr, "logs:", r.dir)
	var gw *disgwProc
	var gwDir string
	gwEnv := []string{cleanerEnv, streamsEOSRebalanceDelayEnv}
	var nodesRun *disgwCluster // with several nodes, in place of gw
	if nodes > 1 {
		nodesRun, gwDir, err = startCluster(bin, nodes, filepath.Join(r.dir, "cluster.disgw.log"), nil, gwEnv...)
		if gwDir != "" {
			defer os.RemoveAll(gwDir)
		}
		if err != nil {
			fail(0, fmt.Sprintf("start %d nodes: %v", nodes, err))
			return
		}
		defer nodesRun.stop()
		r.broker = nodesRun.bootstrap()
	} else {
		gwLog := filepath.Join(r.dir, "disgw.log")
		gw, gwDir, err = startDisgwWith(bin, backend, gwLog, nil, gwEnv...)
		if err != nil {
			fail(0, fmt.Sprintf("start disgw: %v", err))
			return
		}
		defer func() {
			if gw != nil {
				gw.stop()
			}
			_ = os.RemoveAll(gwDir)
		}()
		r.broker = gw.addr
	}
	defer r.stop(false)
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(r.broker, ",")...))
	if err != nil {
		fail(0, err.Error())
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), streamsTimeout-time.Minute)
	defer cancel()
	for _, t := range []string{r.in, r.out} {
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, t); err != nil {
			fail(0, fmt.Sprintf("create %s: %v", t, err))
			return
		}
	}
	scen.Report(scen.StepCreate, "pass", fmt.Sprintf("topics %s and %s, 2 partitions", r.in, r.out))

	if err := r.produceN(ctx, cl, 0, streamsEOSFirst); err != nil {
		fail(1, err.Error())
		return
	}
	if err := r.start(); err != nil {
		fail(2, err.Error())
		return
	}
	// The lines keep coming while the application is killed and started:
	// 100 a second for the first streamsEOSLines, then 20 a second until
	// the kills are done (each waits for the application's progress).
	produced := make(chan error, 1)
	killsDone := make(chan struct{})
	lines := 0 // how many came while it ran (read once produced answered)
	go func() {
		for i := streamsEOSFirst; ; i += 20 {
			pause := 200 * time.Millisecond
			if n := i - streamsEOSFirst; n >= streamsEOSLines {
				select {
				case <-killsDone:
					lines = n
					produced <- nil
					return
				default:
				}
				pause = time.Second
			}
			if err := r.produceN(ctx, cl, i, 20); err != nil {
				produced <- err
				return
			}
			time.Sleep(pause)
		}
	}()
	// killGateway kills disgw (one node) or the node of killStreamsNode
	// (SIGKILL), starts it again on its address and data, and says which.
	killGateway := func() (string, error) {
		if nodesRun != nil {
			return killStreamsNode(ctx, nodesRun, adm, r)
		}
		r.mark("killing disgw (SIGKILL)")
		_ = gw.cmd.Process.Kill()
		<-gw.exited
		again, err := restartDisgw(gw, bin, backend, gwDir, filepath.Join(r.dir, "disgw-restarted.log"), gwEnv...)
		if err != nil {
			return "", fmt.Errorf("start disgw again after kill -9: %w", err)
		}
		gw = again
		return "disgw", nil
	}
	// Each kill once the instance running committed a transaction (its
	// group's offsets moved), 1 s into the next one (commit.interval.ms
	// 2 s): mid-run, a transaction open. The gateway's too (between the
	// application's first and second), and the application must commit
	// again after it before it is killed.
	var killed string // the gateway killed: disgw, or which node and what it coordinated
	var committed int64 = -1
	for k := 1; k <= streamsEOSKills; k++ {
		if committed, err = r.waitProgress(ctx, adm, committed); err != nil {
			fail(2, fmt.Sprintf("before kill %d: %v", k, err))
			return
		}
		r.mark(fmt.Sprintf("the group committed %d", committed))
		time.Sleep(time.Second)
		if k == 2 {
			if killed, err = killGateway(); err != nil {
				fail(2, err.Error())
				return
			}
			// What the restarted gateway holds first (a commit just before
			// the kill may be there), then a commit past it.
			if committed, err = r.waitProgress(ctx, adm, committed-1); err == nil {
				committed, err = r.waitProgress(ctx, adm, committed)
			}
			if err != nil {
				fail(2, fmt.Sprintf("after %s's kill: %v", killed, err))
				return
			}
			r.mark(fmt.Sprintf("the group committed %d", committed))
			time.Sleep(time.Second)
		}
		select {
		case err := <-r.procDone:
			r.proc = nil
			fail(2, fmt.Sprintf("the application exited before kill %d: %v; %s", k, err, r.logTail()))
			return
		default:
		}
		r.mark(fmt.Sprintf("kill %d of the application (SIGKILL)", k))
		r.stop(true)
		if err := r.start(); err != nil {
			fail(2, err.Error())
			return
		}
	}
	close(killsDone)
	if err := <-produced; err != nil {
		fail(1, err.Error())
		return
	}
	scen.Report(scen.StepProduce, "pass", fmt.Sprintf("%d lines, then %d while the application ran and was killed", streamsEOSFirst, lines))
	if err := r.waitExactCounts(ctx); err != nil {
		fail(2, err.Error())
		return
	}
	boot := ""
	if nodesRun != nil {
		boot = fmt.Sprintf("bootstrapped with %d nodes, ", nodes)
	}
	scen.Report(scen.StepConsume, "pass", fmt.Sprintf("%skilled (SIGKILL) %d times mid-run (each time 1 s after a transaction of its committed) and restarted, and %s killed (SIGKILL) under it and restarted once (likewise 1 s after a commit), the application committing again after; every word's last count is its total",
		boot, streamsEOSKills, killed))
	scen.Report(scen.StepResume, "pass", fmt.Sprintf("read_committed, each of %d words' counts are exactly 1..N in order, none twice: exactly once across the kills", len(r.want)))
	if err := r.waitCommitted(ctx, adm); err != nil {
		fail(4, err.Error())
		return
	}
	scen.Report(scen.StepDescribe, "pass", fmt.Sprintf("group %s committed the input's end offsets (transactional offset commits)", r.app))
}

// waitProgress waits until the application's group committed offsets of
// the input adding up to more than after (a transaction of the instance
// running committed; -1: any), and returns their sum. With several nodes a
// request failing while a node is down is asked again.
func (r *streamsRun) waitProgress(ctx context.Context, adm *kadm.Client, after int64) (int64, error) {
	deadline := time.Now().Add(150 * time.Second)
	var sum int64 = -1
	var last error
	for time.Now().Before(deadline) {
		select {
		case err := <-r.procDone:
			r.proc = nil
			return 0, fmt.Errorf("the application exited: %v; %s", err, r.logTail())
		default:
		}
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		committed, err := adm.FetchOffsets(fctx, r.app)
		cancel()
		if err == nil {
			err = committed.Error()
		}
		if last = err; err == nil {
			sum = -1
			committed.Each(func(o kadm.OffsetResponse) {
				if o.Topic == r.in && o.At >= 0 {
					sum = max(sum, 0) + o.At
				}
			})
			if sum > after {
				return sum, nil
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	return 0, fmt.Errorf("the group's committed offsets of %s add up to %d after 150 s, want more than %d (last error %v); %s", r.in, sum, after, last, r.logTail())
}

// mark writes "HH:MM:SS.mmm compat: what" to the scenario's stderr and to
// the application's log (app.log, between its STATE lines): the log shows
// each kill after the commit it waited for.
func (r *streamsRun) mark(what string) {
	line := time.Now().Format("15:04:05.000") + " compat: " + what + "\n"
	fmt.Fprint(os.Stderr, line)
	if f, err := os.OpenFile(filepath.Join(r.dir, "app.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
		_, _ = f.WriteString(line)
		f.Close()
	}
}

// produceN writes n lines from line from on and adds their words to the
// expected counts (r.want: read it once the producing goroutine is done).
func (r *streamsRun) produceN(ctx context.Context, cl *kgo.Client, from, n int) error {
	var rs []*kgo.Record
	for i := from; i < from+n; i++ {
		words := []string{fmt.Sprintf("w%02d", i%23), fmt.Sprintf("w%02d", i%7), "all"}
		for _, w := range words {
			r.want[w]++
		}
		rs = append(rs, &kgo.Record{Topic: r.in, Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprint(words[0], " ", words[1], " ", words[2]))})
	}
	return cl.ProduceSync(ctx, rs...).FirstErr()
}

// waitExactCounts reads the output with read_committed until every word's
// last count is its total, then checks each word's counts are 1..N in
// order, each once.
func (r *streamsRun) waitExactCounts(ctx context.Context) error {
	deadline := time.Now().Add(3 * time.Minute)
	var bad string
	for time.Now().Before(deadline) {
		select {
		case err := <-r.procDone:
			r.proc = nil
			return fmt.Errorf("the application exited: %v; %s", err, r.logTail())
		default:
		}
		seqs, err := readCommitted(ctx, r.broker, r.out)
		if err != nil {
			return err
		}
		bad = ""
		for w, n := range r.want {
			s := seqs[w]
			if len(s) == 0 || s[len(s)-1] != strconv.Itoa(n) {
				bad = fmt.Sprintf("word %s: %d counts, last %v, want %d", w, len(s), last(s), n)
				break
			}
		}
		if bad == "" {
			for w, n := range r.want {
				s := seqs[w]
				if len(s) != n {
					return fmt.Errorf("word %s: %d counts for a total of %d: some repeated or missing", w, len(s), n)
				}
				for i, v := range s {
					if v != strconv.Itoa(i+1) {
						return fmt.Errorf("word %s: count %d is %q, want %d (counts repeated or skipped: not exactly once)", w, i+1, v, i+1)
					}
				}
			}
			return nil
		}
		time.Sleep(2 * time.Second)
	}
	return fmt.Errorf("after 3 minutes, %s; %s", bad, r.logTail())
}

func last(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return s[len(s)-1]
}

// readCommitted reads topic from the start with read_committed until a
// poll of 3 s brings nothing more, and returns each key's values in offset
// order (the caller reads again until what it waits for is there). broker
// may be several nodes' addresses, comma-separated.
func readCommitted(ctx context.Context, broker, topic string) (map[string][]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(broker, ",")...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	out := map[string][]string{}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		n := 0
		fs.EachRecord(func(rec *kgo.Record) {
			n++
			out[string(rec.Key)] = append(out[string(rec.Key)], string(rec.Value))
		})
		if n == 0 {
			break
		}
	}
	return out, ctx.Err()
}

// killStreamsNode kills (SIGKILL) the node that coordinates most of the
// application's transactional ids (ListTransactions, then FindCoordinator
// for each; the group's coordinator on a tie or when none is listed; node 1
// when neither answers), starts it again on its address and data directory
// and waits until every node holds a view of all (disgwCluster.restart).
// It returns what the step says of the node.
func killStreamsNode(ctx context.Context, c *disgwCluster, adm *kadm.Client, r *streamsRun) (string, error) {
	fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	group := -1
	if co := adm.FindGroupCoordinators(fctx, r.app)[r.app]; co.Err == nil && int(co.NodeID) >= 0 && int(co.NodeID) < len(c.nodes) {
		group = int(co.NodeID)
	}
	// The ids of exactly_once_v2 are APP-PROCESSID-THREAD; a node that
	// fails to answer the listing leaves its ids out.
	listed, _ := adm.ListTransactions(fctx, nil, nil)
	var ids []string
	for id := range listed {
		if strings.HasPrefix(id, r.app+"-") {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	txns := map[int][]string{}
	if len(ids) > 0 {
		for id, co := range adm.FindTxnCoordinators(fctx, ids...) {
			if co.Err == nil && int(co.NodeID) >= 0 && int(co.NodeID) < len(c.nodes) {
				txns[int(co.NodeID)] = append(txns[int(co.NodeID)], id)
			}
		}
	}
	node := -1 // the most ids; on a tie the group's coordinator, else the lowest id
	for n := range len(c.nodes) {
		if len(txns[n]) > 0 && (node < 0 || len(txns[n]) > len(txns[node]) || len(txns[n]) == len(txns[node]) && n == group) {
			node = n
		}
	}
	if node < 0 {
		node = group
	}
	why := "node 1 (neither the group's nor a transactional id's coordinator found)"
	if node < 0 {
		node = 1
	} else {
		var what []string
		if len(txns[node]) > 0 {
			slices.Sort(txns[node])
			what = append(what, fmt.Sprintf("of %d of the application's %d transactional ids (%s)", len(txns[node]), len(ids), strings.Join(txns[node], ", ")))
		}
		if node == group {
			what = append(what, "of its group "+r.app)
		}
		why = fmt.Sprintf("node %d (coordinator %s)", node, strings.Join(what, " and "))
	}
	r.mark("killing " + why + " (SIGKILL)")
	c.kill(node)
	if err := c.restart(node); err != nil {
		return "", fmt.Errorf("node %d not started again after kill -9: %w", node, err)
	}
	return why, nil
}
