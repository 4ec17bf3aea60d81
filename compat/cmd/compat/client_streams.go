package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/disgw/disgw/compat/internal/scen"
)

// Apache Kafka Streams 4.4.0: compat/java/streams/WordCount.java (compiled
// by compat/setup into TOOLS/streams-app), a word count with a state store
// backed by its compacted changelog topic, at-least-once. Its steps, in the
// matrix's columns:
//
//   - create: the input and output topics (kadm); the application creates
//     its repartition and changelog topics itself.
//   - produce: 1,000 lines of words (franz-go).
//   - consume: the application runs; the output topic's last count of
//     every word is the expected one.
//   - resume: the application is killed (SIGKILL, once its offsets are
//     committed), its local state deleted, the changelog compacted by
//     disgw's log cleaner, 1,000 more lines produced, and the application
//     started again: it restores the store from the changelog, and every
//     word's last count is the expected total. On the DIS backend, which
//     has no log cleaner, the changelog's records are left to expire
//     instead: dislocal runs with --retention-unit 500ms (a 168-hour
//     stream keeps records 84 s), and the application is restarted once
//     every record the changelog had at the kill has expired, so that it
//     restores from the compactor's copies of the live keys alone.
//   - describe: the application's group committed the input's end offsets;
//     its changelog topic says cleanup.policy=compact.
const (
	streamsAppDir = "streams-app"
	streamsLines  = 1000
	// streamsRetentionUnit is dislocal's --retention-unit on backend dis:
	// the 168 hours of the compacted changelog (and of every other topic
	// of the scenario: none keeps longer on DIS) are 84 s.
	streamsRetentionUnit = 500 * time.Millisecond
	// streamsTimeout is the scenario's time limit (the driver's
	// -client-timeout when that is longer).
	streamsTimeout = 8 * time.Minute
)

var streamsExtra []string

type streamsRun struct {
	broker, backend    string
	guarantee          string // processing.guarantee; "" is at_least_once
	commitMS           int    // commit.interval.ms with guarantee; 0 is 200
	sessionMS          int    // session.timeout.ms with guarantee; 0 is Kafka's 45 s
	jars, classes, dir string
	app, in, out       string
	proc               *exec.Cmd
	procDone           chan error
	want               map[string]int
}

func runStreams(broker, backend, topic, tools string) {
	r := &streamsRun{broker: broker, backend: backend, jars: filepath.Join(tools, "kafka-4.4.0"), classes: filepath.Join(tools, streamsAppDir),
		app: topic + "-wordcount", in: topic + "-lines", out: topic + "-counts", want: map[string]int{}}
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
	scen.Info("version", "Apache Kafka Streams 4.4.0, "+javaVersion(context.Background()))
	var err error
	if r.dir, err = os.MkdirTemp("", "disgw-compat-streams-"); err != nil {
		fail(0, err.Error())
		return
	}
	fmt.Fprintln(os.Stderr, "logs:", r.dir)
	defer r.stop(false)
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
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

	if err := r.produce(ctx, cl, 0); err != nil {
		fail(1, err.Error())
		return
	}
	scen.Report(scen.StepProduce, "pass", fmt.Sprintf("%d lines of words", streamsLines))

	if err := r.start(); err != nil {
		fail(2, err.Error())
		return
	}
	if err := r.waitCounts(ctx, cl); err != nil {
		fail(2, err.Error())
		return
	}
	scen.Report(scen.StepConsume, "pass", fmt.Sprintf("the last count of each of %d words is right", len(r.want)))

	// resume: offsets committed, then killed; no local state; the changelog
	// compacted (DIS: its records expired); more lines; a restore from the
	// changelog.
	if err := r.waitCommitted(ctx, adm); err != nil {
		fail(3, err.Error())
		return
	}
	// Every record of the repartition topic processed and committed too:
	// killed before, an at-least-once application processes the rest
	// again after the restart and counts those words twice (seen in CI:
	// w18 at 130 for 87). On DIS they also expire with the changelog's.
	repartition := r.app + "-counts-repartition"
	if err := r.waitCommittedTopic(ctx, adm, repartition); err != nil {
		fail(3, err.Error())
		return
	}
	r.stop(true)
	if err := os.RemoveAll(filepath.Join(r.dir, "state")); err != nil {
		fail(3, err.Error())
		return
	}
	changelog := r.app + "-counts-changelog"
	what := "changelog compacted"
	if r.backend == "dis" {
		expired, err := waitExpired(adm, 168*streamsRetentionUnit+2*time.Minute, changelog)
		if err != nil {
			fail(3, err.Error())
			return
		}
		what = fmt.Sprintf("every record of the changelog expired in DIS (dislocal --retention-unit %v: %s), so the restore reads only the compactor's copies",
			streamsRetentionUnit, expired)
	} else if err := compactNow(ctx, r.broker, adm, changelog); err != nil {
		fail(3, err.Error())
		return
	}
	if err := r.produce(ctx, cl, streamsLines); err != nil {
		fail(3, err.Error())
		return
	}
	if err := r.start(); err != nil {
		fail(3, err.Error())
		return
	}
	if err := r.waitCounts(ctx, cl); err != nil {
		fail(3, err.Error())
		return
	}
	scen.Report(scen.StepResume, "pass", fmt.Sprintf("killed (SIGKILL) after its commit, local state deleted, %s; "+
		"restarted, it restored the store from the changelog: after %d more lines every count is right", what, streamsLines))

	if err := r.waitCommitted(ctx, adm); err != nil {
		fail(4, err.Error())
		return
	}
	rc, err := adm.DescribeTopicConfigs(ctx, changelog)
	policy := ""
	if err == nil && len(rc) == 1 {
		for _, c := range rc[0].Configs {
			if c.Key == "cleanup.policy" && c.Value != nil {
				policy = *c.Value
			}
		}
	}
	if policy != "compact" {
		fail(4, fmt.Sprintf("changelog %s cleanup.policy=%q, %v", changelog, policy, err))
		return
	}
	scen.Report(scen.StepDescribe, "pass", fmt.Sprintf("group %s committed the input's end offsets; %s cleanup.policy=compact", r.app, changelog))
}

// produce writes streamsLines lines from line from on, and adds their words
// to the expected counts.
func (r *streamsRun) produce(ctx context.Context, cl *kgo.Client, from int) error {
	var rs []*kgo.Record
	for i := from; i < from+streamsLines; i++ {
		words := []string{fmt.Sprintf("w%02d", i%23), fmt.Sprintf("w%02d", i%7), "all"}
		for _, w := range words {
			r.want[w]++
		}
		rs = append(rs, &kgo.Record{Topic: r.in, Key: []byte(strconv.Itoa(i)), Value: []byte(strings.Join(words, " "))})
	}
	return cl.ProduceSync(ctx, rs...).FirstErr()
}

func (r *streamsRun) start() error {
	logf, err := os.OpenFile(filepath.Join(r.dir, "app.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command("java", "-Xshare:auto", "-XX:TieredStopAtLevel=1",
		"-cp", filepath.Join(r.jars, "*")+string(os.PathListSeparator)+r.classes,
		"WordCount", r.broker, r.app, filepath.Join(r.dir, "state"), r.in, r.out)
	if r.guarantee != "" {
		cmd.Args = append(cmd.Args, r.guarantee, strconv.Itoa(cmp.Or(r.commitMS, 200)))
		if r.sessionMS > 0 {
			cmd.Args = append(cmd.Args, strconv.Itoa(r.sessionMS))
		}
	}
	done, err := startLogged(cmd, logf)
	if err != nil {
		return err
	}
	r.proc, r.procDone = cmd, done
	return nil
}

// stop kills the application (SIGKILL with kill, else SIGTERM).
func (r *streamsRun) stop(kill bool) {
	if r.proc == nil {
		return
	}
	sig := os.Interrupt
	if kill {
		sig = os.Kill
	}
	stopProcess(r.proc, r.procDone, sig, 30*time.Second)
	r.proc = nil
}

func (r *streamsRun) logTail() string {
	b, _ := os.ReadFile(filepath.Join(r.dir, "app.log"))
	if errs := errorLines(b, "Exception"); len(errs) > 0 {
		return "application errors: " + tail(strings.Join(errs, " | "), 600)
	}
	return "application log: " + tail(string(b), 400)
}

// waitCounts reads the output topic until every word's last count is the
// expected one.
func (r *streamsRun) waitCounts(ctx context.Context, cl *kgo.Client) error {
	deadline := time.Now().Add(2 * time.Minute)
	var bad string
	for time.Now().Before(deadline) {
		select {
		case err := <-r.procDone:
			r.proc = nil
			return fmt.Errorf("the application exited: %v; %s", err, r.logTail())
		default:
		}
		if b, _ := os.ReadFile(filepath.Join(r.dir, "app.log")); strings.Contains(string(b), "STATE ERROR") {
			return fmt.Errorf("the application stopped in state ERROR; %s", r.logTail())
		}
		last, err := readLastValues(ctx, r.broker, r.out)
		if err != nil {
			return err
		}
		bad = ""
		for w, n := range r.want {
			if last[w] != strconv.Itoa(n) {
				bad = fmt.Sprintf("word %s: last count %q, want %d", w, last[w], n)
				break
			}
		}
		if bad == "" {
			return nil
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("after 2 minutes, %s; %s", bad, r.logTail())
}

// waitCommitted waits until the application's group committed the input's
// end offsets.
func (r *streamsRun) waitCommitted(ctx context.Context, adm *kadm.Client) error {
	return r.waitCommittedTopic(ctx, adm, r.in)
}

// waitCommittedTopic waits until the application's group committed the
// end offsets of topic.
func (r *streamsRun) waitCommittedTopic(ctx context.Context, adm *kadm.Client, topic string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		ends, err1 := adm.ListEndOffsets(ctx, topic)
		committed, err2 := adm.FetchOffsets(ctx, r.app)
		if err := firstErr(err1, err2); err != nil {
			return err
		}
		same := true
		var got []string
		ends.Each(func(o kadm.ListedOffset) {
			cm, _ := committed.Lookup(topic, o.Partition)
			same = same && cm.At == o.Offset
			got = append(got, fmt.Sprintf("p%d=%d/%d", o.Partition, cm.At, o.Offset))
		})
		if same {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("group %s committed/end of %s: %s", r.app, topic, strings.Join(got, " "))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// readLastValues reads topic from the start to its end offsets and returns
// each key's last value.
func readLastValues(ctx context.Context, broker, topic string) (map[string]string, error) {
	last := map[string]string{}
	err := readAll(ctx, broker, topic, func(rec *kgo.Record) { last[string(rec.Key)] = string(rec.Value) })
	return last, err
}

// readAll reads topic from the start to the end offsets it has now, giving
// each record to f. A partition whose last records a compaction removed
// ends at its last record kept.
func readAll(ctx context.Context, broker, topic string, f func(*kgo.Record)) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		return err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			offsets[topic][o.Partition] = kgo.NewOffset().AtStart()
			want[o.Partition] = o.Offset
		}
	})
	if len(want) == 0 {
		return nil
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumePartitions(offsets))
	if err != nil {
		return err
	}
	defer cons.Close()
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for len(want) > 0 {
		fs := cons.PollFetches(rctx)
		if rctx.Err() != nil {
			return nil // what is left was compacted away: no more records to come
		}
		fs.EachRecord(func(rec *kgo.Record) {
			f(rec)
			if rec.Offset+1 >= want[rec.Partition] {
				delete(want, rec.Partition)
			}
		})
	}
	return nil
}

// compactNow makes topic cleanable at once (segment.ms 500,
// min.cleanable.dirty.ratio 0.01) and waits until disgw's log cleaner took
// it: a read from the start gives each key once.
func compactNow(ctx context.Context, broker string, adm *kadm.Client, topic string) error {
	seg, ratio := "500", "0.01"
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "segment.ms", Value: &seg}, {Name: "min.cleanable.dirty.ratio", Value: &ratio}}, topic)
	if err == nil && len(rs) == 1 {
		err = rs[0].Err
	}
	if err != nil {
		return err
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		counts := map[string]int{}
		err := readAll(ctx, broker, topic, func(rec *kgo.Record) { counts[string(rec.Key)]++ })
		if err != nil {
			return err
		}
		twice := ""
		for k, n := range counts {
			if n > 1 {
				twice = fmt.Sprintf("key %q %d times", k, n)
				break
			}
		}
		if twice == "" && len(counts) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not compacted after 90s: %s", topic, twice)
		}
		time.Sleep(time.Second)
	}
}
