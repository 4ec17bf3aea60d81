package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/disgw/disgw/compat/internal/scen"
)

// Apache Flink 2.2.1 with flink-connector-kafka 5.0.0-2.2:
// compat/java/flink/FlinkCount.java (compiled by compat/setup into
// TOOLS/flink-app), a job in a MiniCluster in one JVM that reads a topic
// with KafkaSource (offsets committed on checkpoints, partition discovery
// every 5 s), counts each word in keyed state and writes "word -> running
// count" with KafkaSink, checkpointing every 2 s to a directory (retained
// checkpoints). It runs three times on a disgw of its own (and dislocal on
// backend dis), which it kills too, each run on topics of its own: with
// KafkaSink AT_LEAST_ONCE; with EXACTLY_ONCE (transactions,
// docs/transactions.md) and Flink's default transactional ids
// (TransactionNamingStrategy INCREMENTING: lingering transactions found
// by probing ids with InitProducerId); and with EXACTLY_ONCE and POOLING
// ids (lingering transactions found with ListTransactions). Each run:
//
//   - 2,000 records before the job starts, then 400 a second while it runs
//     and is killed (at least flinkMinRecords in all), each record's value
//     one of flinkWords words;
//   - once the job completed a checkpoint, 1 s later (mid-interval), its
//     JVM is killed (SIGKILL) and a new JVM started from the last retained
//     checkpoint (execution.state-recovery.path);
//   - the input gets 2 partitions more (CreatePartitions) while the
//     restored job runs, and the records' keys spread onto them: the
//     job's partition discovery must find them;
//   - once the restored job completed a checkpoint, 1 s later disgw is
//     killed (SIGKILL) and started again on the same data and port (the
//     job's clients reconnect; were it to fail, it would restart in its
//     JVM from its last checkpoint), and the job must complete two
//     checkpoints after;
//   - the JVM is killed again at once when the next checkpoint completes
//     (polled every 2 ms: most times before the sink commits that checkpoint's
//     transactions, which the restored job then commits by resuming them
//     with their producer id and epoch) and started from that checkpoint,
//     which must be followed by another;
//   - the records stop, and the output is read (read_committed): for
//     at-least-once every count 1..N of each word is there (none lost) and
//     the highest is the word's total N, repeats counted; for exactly-once
//     each word's counts are exactly 1..N in order, each once.
//
// Steps: create: the topics, 4 partitions each (kadm). produce: the
// records of the first run. consume: the at-least-once run. resume: the
// exactly-once run. describe: the two jobs' groups committed their input's
// end offsets (KafkaSource commits on checkpoints). "EOS, POOLING ids":
// the third run.
const (
	flinkJarsDir   = "flink-2.2.1"
	flinkAppDir    = "flink-app"
	flinkPartition = 4
	// flinkAddPartitions are added to the input while the restored job
	// runs (CreatePartitions; on DIS an UpdatePartitionCount, allowed once
	// an hour per stream): its partition discovery must find them.
	flinkAddPartitions = 2
	flinkWords         = 40
	// flinkFirst records come before the job starts, then flinkBatch every
	// flinkPause (400 a second) until the kills are done and at least
	// flinkMinRecords were written.
	flinkFirst      = 2000
	flinkBatch      = 100
	flinkPause      = 250 * time.Millisecond
	flinkMinRecords = 10000
	// flinkCheckpointMS is the job's checkpoint interval (milliseconds).
	flinkCheckpointMS = 2000
	// flinkTimeout is the scenario's time limit (the driver's
	// -client-timeout when that is longer).
	flinkTimeout = 6 * time.Minute
)

// flinkRun is one run of the job (at-least-once or exactly-once) and the
// JVM running it.
type flinkRun struct {
	guarantee      string // at_least_once or exactly_once
	naming         string // KafkaSink's TransactionNamingStrategy with exactly_once
	broker         string
	jars, classes  string
	dir, ckDir     string
	in, out, group string
	proc           *exec.Cmd
	procDone       chan error
	mu             sync.Mutex
	want           map[string]int // word -> records written (under mu)
	produced       int
	// committed is what the describe step found of the job's group:
	// nil once it committed the input's end offsets.
	committed error
}

func runFlink(bin, backend, topic, tools string) {
	steps := append(append([]string{}, scen.CoreSteps...), flinkExtra...)
	fail := func(from int, why string) {
		scen.Report(steps[from], "fail", why)
		for _, s := range steps[from+1:] {
			scen.Report(s, "skip", "an earlier step failed")
		}
	}
	jars, classes := filepath.Join(tools, flinkJarsDir), filepath.Join(tools, flinkAppDir)
	if _, err := os.Stat(filepath.Join(classes, "FlinkCount.class")); err != nil {
		for _, s := range steps {
			scen.Report(s, "fail", fmt.Sprintf("%s/FlinkCount.class missing (run compat/setup)", classes))
		}
		return
	}
	scen.Info("version", "Apache Flink 2.2.1, flink-connector-kafka 5.0.0-2.2 (kafka-clients 4.2.0), "+javaVersion(context.Background()))
	dir, err := os.MkdirTemp("", "disgw-compat-flink-")
	if err != nil {
		fail(0, err.Error())
		return
	}
	fmt.Fprintln(os.Stderr, "logs:", dir)
	var disArgs []string
	if backend == "dis" {
		// DIS's per-partition limits (1,000 records and 1 MB a second a
		// partition), answered as DIS.4303: the job's bursts after a
		// restore meet them.
		disArgs = []string{"--flow-control"}
	}
	gw, gwDir, err := startDisgwWith(bin, backend, filepath.Join(dir, "disgw.log"), disArgs)
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
	cl, err := kgo.NewClient(kgo.SeedBrokers(gw.addr), kgo.RetryTimeout(time.Minute))
	if err != nil {
		fail(0, err.Error())
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), flinkTimeout-30*time.Second)
	defer cancel()

	runs := []*flinkRun{}
	var topics []string
	for _, short := range []string{"alo", "eos", "pool"} {
		g := "exactly_once"
		if short == "alo" {
			g = "at_least_once"
		}
		r := &flinkRun{guarantee: g, broker: gw.addr, jars: jars, classes: classes, dir: filepath.Join(dir, short),
			in: topic + "-" + short + "-words", out: topic + "-" + short + "-counts", group: topic + "-" + short, want: map[string]int{}}
		r.ckDir = filepath.Join(r.dir, "checkpoints")
		switch short {
		case "eos":
			r.naming = "INCREMENTING"
		case "pool":
			r.naming = "POOLING"
		}
		if err := os.MkdirAll(r.ckDir, 0o755); err != nil {
			fail(0, err.Error())
			return
		}
		runs = append(runs, r)
		topics = append(topics, r.in, r.out)
	}
	for _, t := range topics {
		if _, err := adm.CreateTopic(ctx, flinkPartition, 1, nil, t); err != nil {
			fail(0, fmt.Sprintf("create %s: %v", t, err))
			return
		}
	}
	scen.Report(scen.StepCreate, "pass", fmt.Sprintf("%s, %d partitions each (each input gets %d more while its job runs)", strings.Join(topics, ", "), flinkPartition, flinkAddPartitions))

	// killGateway kills disgw (SIGKILL) and starts it again on its address
	// and data.
	killGateway := func(r *flinkRun) error {
		r.mark("killing disgw (SIGKILL)")
		_ = gw.cmd.Process.Kill()
		<-gw.exited
		again, err := restartDisgw(gw, bin, backend, gwDir, filepath.Join(r.dir, "disgw-restarted.log"))
		if err != nil {
			return fmt.Errorf("start disgw again after kill -9: %w", err)
		}
		gw = again
		r.mark("disgw started again")
		return nil
	}
	// The runs' steps (indexes in steps): consume, resume, the extra one.
	stepOf := []int{2, 3, 5}
	for i, r := range runs {
		detail, err := r.run(ctx, cl, adm, killGateway)
		r.stop()
		if i == 0 {
			if errors.Is(err, errFlinkProduce) {
				fail(1, err.Error())
				return
			}
			scen.Report(scen.StepProduce, "pass", fmt.Sprintf("%d records of %d words into %s, 2,000 before the job started and the rest 400 a second while it ran and was killed (as many for each later run)",
				r.produced, flinkWords, r.in))
		}
		if err != nil {
			fail(stepOf[i], err.Error())
			return
		}
		scen.Report(steps[stepOf[i]], "pass", detail)
		if i == 1 {
			for _, r := range runs[:2] {
				if r.committed != nil {
					fail(4, r.committed.Error())
					return
				}
				// KafkaSource assigns partitions itself: its group has
				// offsets and no member.
				described, err := adm.DescribeGroups(ctx, r.group)
				if err == nil {
					err = described.Error()
				}
				if err != nil {
					fail(4, fmt.Sprintf("describe group %s: %v", r.group, err))
					return
				}
				if g := described[r.group]; g.State != "Empty" || len(g.Members) != 0 {
					fail(4, fmt.Sprintf("group %s: state %q with %d members, want Empty with none (KafkaSource has no members)", r.group, g.State, len(g.Members)))
					return
				}
			}
			scen.Report(scen.StepDescribe, "pass", fmt.Sprintf("groups %s and %s committed their input's end offsets (KafkaSource, on checkpoints); described, each is Empty with no member (KafkaSource assigns partitions itself)", runs[0].group, runs[1].group))
		}
	}
}

// errFlinkProduce: writing the input failed (the produce step's failure).
var errFlinkProduce = errors.New("produce")

// flinkExtra is the scenario's step beyond the core ones: the exactly-once
// run again with KafkaSink's POOLING transactional ids (it finds lingering
// transactions with ListTransactions).
var flinkExtra = []string{"EOS, POOLING ids"}

// run runs the job through its kills and checks its output; it returns the
// step's detail.
func (r *flinkRun) run(ctx context.Context, cl *kgo.Client, adm *kadm.Client, killGateway func(*flinkRun) error) (string, error) {
	if err := r.produceN(ctx, cl, flinkFirst); err != nil {
		return "", err
	}
	if err := r.start(""); err != nil {
		return "", err
	}
	killsDone := make(chan struct{})
	produced := make(chan error, 1)
	go func() {
		for {
			select {
			case <-killsDone:
				if r.produced >= flinkMinRecords {
					produced <- nil
					return
				}
			default:
			}
			if err := r.produceN(ctx, cl, flinkBatch); err != nil {
				produced <- err
				return
			}
			time.Sleep(flinkPause)
		}
	}()
	stopProducing := func() error {
		close(killsDone)
		return <-produced
	}
	// The job's first checkpoint, then 1 s (mid-interval) and SIGKILL.
	ck, err := r.waitCheckpoint(ctx, "")
	if err != nil {
		_ = stopProducing()
		return "", fmt.Errorf("first run: %w", err)
	}
	time.Sleep(time.Second)
	r.mark("kill of the job's JVM (SIGKILL), its last checkpoint " + ck)
	r.kill()
	ck, err = r.lastCheckpoint()
	if err != nil {
		_ = stopProducing()
		return "", err
	}
	if err := r.start(ck); err != nil {
		_ = stopProducing()
		return "", err
	}
	restored := ck
	// Partition discovery: the input gets flinkAddPartitions more while
	// the restored job runs; the records' keys spread onto them at once,
	// and the job must find them (partition.discovery.interval.ms 5 s) and
	// read them from their start.
	resp, err := adm.CreatePartitions(ctx, flinkAddPartitions, r.in)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		_ = stopProducing()
		return "", fmt.Errorf("add %d partitions to %s: %w", flinkAddPartitions, r.in, err)
	}
	cl.ForceMetadataRefresh()
	r.mark(fmt.Sprintf("%d partitions added to %s", flinkAddPartitions, r.in))
	// A checkpoint of the restored job, then 1 s and disgw's kill; then a
	// checkpoint after disgw's restart.
	if ck, err = r.waitCheckpoint(ctx, ck); err != nil {
		_ = stopProducing()
		return "", fmt.Errorf("restored from %s: %w", restored, err)
	}
	time.Sleep(time.Second)
	if err := killGateway(r); err != nil {
		_ = stopProducing()
		return "", err
	}
	// Two checkpoints: the first may have begun before the kill.
	for range 2 {
		if ck, err = r.waitCheckpoint(ctx, ck); err != nil {
			_ = stopProducing()
			return "", fmt.Errorf("after disgw's kill: %w", err)
		}
	}
	// The JVM killed again, at once when a checkpoint completes (polled
	// every 2 ms): most times before the sink commits that checkpoint's
	// transactions, which the restored job must commit (resuming them by
	// producer id and epoch), and against the restarted disgw.
	if ck, err = r.waitCheckpointEvery(ctx, ck, 2*time.Millisecond); err != nil {
		_ = stopProducing()
		return "", fmt.Errorf("after disgw's kill: %w", err)
	}
	r.mark("kill of the job's JVM (SIGKILL) as checkpoint " + ck + " completed")
	r.kill()
	if ck, err = r.lastCheckpoint(); err == nil {
		err = r.start(ck)
	}
	if err != nil {
		_ = stopProducing()
		return "", err
	}
	restoredAgain := ck
	if _, err = r.waitCheckpoint(ctx, ck); err != nil {
		_ = stopProducing()
		return "", fmt.Errorf("restored from %s: %w", restoredAgain, err)
	}
	if err := stopProducing(); err != nil {
		return "", err
	}
	r.mark(fmt.Sprintf("%d records written", r.produced))
	dups, err := r.waitCounts(ctx)
	if err != nil {
		return "", err
	}
	// The records of the added partitions are among those counted: the
	// job found them.
	ends, err := adm.ListEndOffsets(ctx, r.in)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return "", fmt.Errorf("end offsets of %s: %w", r.in, err)
	}
	var added int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Partition >= flinkPartition {
			added += o.Offset
		}
	})
	if added == 0 {
		return "", fmt.Errorf("no record went to the %d partitions added to %s: partition discovery untested", flinkAddPartitions, r.in)
	}
	// The describe step's check, while the job runs (it commits on
	// checkpoints).
	r.committed = waitGroupCommitted(ctx, adm, r.group, r.in)
	sink := "KafkaSink " + strings.ToUpper(r.guarantee)
	if r.naming != "" {
		sink += " (TransactionNamingStrategy " + r.naming + ")"
	}
	what := fmt.Sprintf("%s: the job's JVM killed (SIGKILL) 1 s after a checkpoint and restored from it (%s), %d partitions added to the input under the restored job (%d records went there, read: found by its partition discovery), disgw killed (SIGKILL) and restarted under the restored job, which checkpointed twice after, and the JVM killed again as a checkpoint completed (before its transactions were committed) and restored from it (%s); ",
		sink, filepath.Base(restored), flinkAddPartitions, added, filepath.Base(restoredAgain))
	if r.guarantee == "exactly_once" {
		return what + fmt.Sprintf("read_committed, each of %d words' counts are exactly 1..N in order, none twice, N its total of %d records: exactly once", len(r.want), r.produced), nil
	}
	return fmt.Sprintf("%d duplicates, none lost: ", dups) + what + fmt.Sprintf("every count 1..N of each of %d words is there and the last is its total (%d records); %d counts written twice (after the restores)", len(r.want), r.produced, dups), nil
}

// produceN writes n records, words flinkWords round, and adds them to the
// expected counts.
func (r *flinkRun) produceN(ctx context.Context, cl *kgo.Client, n int) error {
	r.mu.Lock()
	from := r.produced
	r.mu.Unlock()
	var rs []*kgo.Record
	words := map[string]int{}
	for i := from; i < from+n; i++ {
		w := fmt.Sprintf("w%02d", (i*7)%flinkWords)
		words[w]++
		rs = append(rs, &kgo.Record{Topic: r.in, Key: []byte(w), Value: []byte(w)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return fmt.Errorf("%w to %s: %v", errFlinkProduce, r.in, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for w, k := range words {
		r.want[w] += k
	}
	r.produced += n
	return nil
}

// start starts the job's JVM, from a retained checkpoint unless restore is
// empty.
func (r *flinkRun) start(restore string) error {
	logf, err := os.OpenFile(filepath.Join(r.dir, "job.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	// Flink's temporary files (the RPC jar it unpacks, its io dirs) in
	// the run's directory, not /tmp: a killed JVM leaves them.
	tmp := filepath.Join(r.dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		logf.Close()
		return err
	}
	cmd := exec.Command("java", "-Xmx768m", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.io.tmpdir="+tmp,
		"-cp", filepath.Join(r.jars, "*")+string(os.PathListSeparator)+r.classes,
		"FlinkCount", r.broker, r.in, r.out, r.group, r.ckDir, r.guarantee, strconv.Itoa(flinkCheckpointMS), restore, r.group, cmp.Or(r.naming, "INCREMENTING"))
	done, err := startLogged(cmd, logf)
	if err != nil {
		return err
	}
	r.proc, r.procDone = cmd, done
	return nil
}

// kill kills the job's JVM (SIGKILL).
func (r *flinkRun) kill() {
	if r.proc == nil {
		return
	}
	stopProcess(r.proc, r.procDone, os.Kill, 30*time.Second)
	r.proc = nil
}

// stop ends the job's JVM (SIGKILL: the job runs until killed) and
// removes its temporary files and checkpoints (the log stays).
func (r *flinkRun) stop() {
	r.kill()
	_ = os.RemoveAll(filepath.Join(r.dir, "tmp"))
	_ = os.RemoveAll(r.ckDir)
}

// lastCheckpoint is the newest completed checkpoint in the job's checkpoint
// directory (CKDIR/JOBID/chk-N with its _metadata), by the _metadata's
// modification time.
func (r *flinkRun) lastCheckpoint() (string, error) {
	metas, _ := filepath.Glob(filepath.Join(r.ckDir, "*", "chk-*", "_metadata"))
	var best string
	var bestTime time.Time
	for _, m := range metas {
		st, err := os.Stat(m)
		if err != nil || st.Size() == 0 {
			continue
		}
		if best == "" || st.ModTime().After(bestTime) {
			best, bestTime = filepath.Dir(m), st.ModTime()
		}
	}
	if best == "" {
		return "", fmt.Errorf("no completed checkpoint in %s; %s", r.ckDir, r.logTail())
	}
	return best, nil
}

// waitCheckpoint waits until the job completed a checkpoint other than
// after (and newer), and returns it.
func (r *flinkRun) waitCheckpoint(ctx context.Context, after string) (string, error) {
	return r.waitCheckpointEvery(ctx, after, 200*time.Millisecond)
}

// waitCheckpointEvery is waitCheckpoint looking every poll.
func (r *flinkRun) waitCheckpointEvery(ctx context.Context, after string, poll time.Duration) (string, error) {
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case err := <-r.procDone:
			r.proc = nil
			return "", fmt.Errorf("the job's JVM exited: %v; %s", err, r.logTail())
		default:
		}
		if ck, err := r.lastCheckpoint(); err == nil && ck != after {
			r.mark("checkpoint " + ck)
			return ck, nil
		}
		time.Sleep(poll)
	}
	return "", fmt.Errorf("no checkpoint after %q within 90 s; %s", after, r.logTail())
}

// waitCounts reads the output (read_committed) until every word's highest
// count is its total, then checks the counts: every 1..N there (at least
// once); for exactly_once each once and in order. It returns how many
// counts were written more than once.
func (r *flinkRun) waitCounts(ctx context.Context) (int, error) {
	deadline := time.Now().Add(2 * time.Minute)
	var bad string
	for time.Now().Before(deadline) {
		select {
		case err := <-r.procDone:
			r.proc = nil
			return 0, fmt.Errorf("the job's JVM exited: %v; %s", err, r.logTail())
		default:
		}
		seqs, err := readCommitted(ctx, r.broker, r.out)
		if err != nil {
			return 0, err
		}
		bad = ""
		for w, n := range r.want {
			top := 0
			for _, v := range seqs[w] {
				if c, err := strconv.Atoi(v); err == nil {
					top = max(top, c)
				}
			}
			if top != n {
				bad = fmt.Sprintf("word %s: %d counts, highest %d, want %d", w, len(seqs[w]), top, n)
				break
			}
		}
		if bad != "" {
			time.Sleep(2 * time.Second)
			continue
		}
		dups := 0
		for w, n := range r.want {
			s := seqs[w]
			seen := map[string]int{}
			for _, v := range s {
				seen[v]++
			}
			for c := 1; c <= n; c++ {
				if seen[strconv.Itoa(c)] == 0 {
					return 0, fmt.Errorf("word %s: count %d never written (%d counts for a total of %d): a record lost", w, c, len(s), n)
				}
			}
			dups += len(s) - n
			if r.guarantee != "exactly_once" {
				continue
			}
			if len(s) != n {
				return 0, fmt.Errorf("word %s: %d counts for a total of %d: some written twice, not exactly once", w, len(s), n)
			}
			for i, v := range s {
				if v != strconv.Itoa(i+1) {
					return 0, fmt.Errorf("word %s: count %d is %q, want %d (not exactly once)", w, i+1, v, i+1)
				}
			}
		}
		return dups, nil
	}
	return 0, errors.New("after 2 minutes, " + bad + "; " + r.logTail())
}

// mark writes "HH:MM:SS.mmm compat: what" to the scenario's stderr and the
// job's log.
func (r *flinkRun) mark(what string) {
	line := time.Now().Format("15:04:05.000") + " compat: " + r.guarantee + ": " + what + "\n"
	fmt.Fprint(os.Stderr, line)
	if f, err := os.OpenFile(filepath.Join(r.dir, "job.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
		_, _ = f.WriteString(line)
		f.Close()
	}
}

// logTail is the job log's errors (or its end), for a failure's detail.
func (r *flinkRun) logTail() string {
	b, _ := os.ReadFile(filepath.Join(r.dir, "job.log"))
	if errs := errorLines(b, "Exception:"); len(errs) > 0 {
		return "job errors: " + tail(strings.Join(errs, " | "), 800)
	}
	return "job log: " + tail(string(b), 400)
}

// waitGroupCommitted waits until group committed topic's end offsets.
func waitGroupCommitted(ctx context.Context, adm *kadm.Client, group, topic string) error {
	var last string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			last = err.Error()
			continue
		}
		committed, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = committed.Error()
		}
		if err != nil {
			last = err.Error()
			continue
		}
		last = ""
		ends.Each(func(e kadm.ListedOffset) {
			if c, ok := committed.Lookup(topic, e.Partition); !ok || c.At != e.Offset {
				if last == "" {
					last = fmt.Sprintf("partition %d committed %d, end %d", e.Partition, c.At, e.Offset)
				}
			}
		})
		if last == "" {
			return nil
		}
	}
	return fmt.Errorf("group %s did not commit %s's end offsets within 1 minute: %s", group, topic, last)
}
