package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/disgw/disgw/compat/internal/scen"
)

// Apache Kafka MirrorMaker 2 (connect-mirror 4.3.1 from Maven Central, the
// newest Connect there) in dedicated mode
// (org.apache.kafka.connect.mirror.MirrorMaker), replicating a topic and a
// consumer group's offsets from an Apache Kafka 4.4.0 broker (KRaft, one
// node; kafkabroker.go) into disgw, with sync.group.offsets.enabled=true and
// the DefaultReplicationPolicy: the topic T arrives on disgw as kafka.T.
// The scenario runs its own disgw (and, for the DIS backend, its own
// dislocal). Its steps, in the matrix's columns and after them:
//
//   - create: the Kafka broker started and T created on it with 3
//     partitions (kadm); disgw started.
//   - produce: 3,000 keyed records with headers produced to T on Kafka.
//   - consume: a group consumer on Kafka processes 1,500 of them (from every
//     partition) and commits exactly those, then leaves: the group is Empty.
//   - mirror: MirrorMaker 2 started (kafka->disgw); kafka.T on disgw has 3
//     partitions and each holds exactly the records of T's partition, in
//     the same order at the same offsets, keys, values and headers intact.
//   - mirror more: 1,000 more records produced on Kafka arrive once too;
//     retention.ms set on T on Kafka reaches kafka.T on disgw (MirrorMaker's
//     topic config sync).
//   - offsets translated: the group's offsets appear on disgw (MirrorMaker
//     writes them to the target group while it is empty); in every
//     partition the translated offset is at or before the one committed on
//     Kafka, never after.
//   - stop MM2: MirrorMaker stops on SIGTERM within 60s and logs that it
//     stopped. It is stopped before the consumers move, as the recipe of
//     docs/migration.md says: while its group offset sync runs, it may
//     write the translated offsets into the group again whenever the group
//     is empty (a restarted MirrorCheckpointTask has no view of the target
//     group yet and writes them unconditionally), rewinding a group that
//     consumed on disgw meanwhile. Seen once on the DIS backend, whose
//     compactor's copies of mm2-configs make MirrorMaker restart its
//     tasks.
//   - resume: a consumer in the group on disgw starts in every partition
//     exactly at the translated offset and reads every record from there
//     to the end: none of those the Kafka consumer had not processed is
//     skipped; how many it read again (committed on Kafka - translated) is
//     reported.
//   - describe: on disgw the group is Empty with committed = end offsets of
//     kafka.T; MirrorMaker's internal topics on disgw and their
//     cleanup.policy.
const (
	mirrorJarsDir = "mirror-4.3.1"
	mirrorClass   = "org.apache.kafka.connect.mirror.MirrorMaker"
	mirrorN       = 3000 // records produced before the mirror starts
	mirrorHalf    = 1500 // records the Kafka group processes and commits
	mirrorMore    = 1000 // records produced while it runs
	mirrorSource  = "kafka"
	mirrorTarget  = "disgw"
	mirrorClient  = "kafka-mirrormaker2"
)

var mirrorExtra = []string{"mirror", "mirror more", "offsets translated", "stop MM2"}

// The order the steps run in (the matrix shows the core ones first).
var mirrorOrder = []string{scen.StepCreate, scen.StepProduce, scen.StepConsume, "mirror", "mirror more",
	"offsets translated", "stop MM2", scen.StepResume, scen.StepDescribe}

type mirrorRun struct {
	bin, backend, tools, dir string
	topic, target, group     string
	kafka                    *kafkaBroker
	disgw                    *disgwProc
	// targetKafka: a second Apache Kafka broker in disgw's place (compat
	// scenario kafka-mirrormaker2 -mirror-target kafka), to see what MM2
	// does against Kafka itself; targetAddr is disgw's or its address.
	targetKafka *kafkaBroker
	targetAddr  string
	dataDir     string
	mm          *exec.Cmd
	mmDone      chan error
	mmLog       string
	mmStarted   time.Time
	// source: T's records on Kafka per partition, in offset order.
	source map[int32][]scen.Rec
	// committed: what the Kafka group committed; translated: what
	// MirrorMaker wrote to the group on disgw.
	first      []scen.Rec
	committed  map[int32]int64
	translated map[int32]int64
}

func runMirror(bin, backend, tools, topic, group string, targetKafka bool) {
	r := &mirrorRun{bin: bin, backend: backend, tools: tools, topic: topic, target: mirrorSource + "." + topic, group: group}
	if targetKafka {
		r.backend = "kafka"
	}
	step := 0
	fail := func(why string) {
		scen.Report(mirrorOrder[step], "fail", why)
		for _, s := range mirrorOrder[step+1:] {
			scen.Report(s, "skip", "an earlier step failed")
		}
	}
	pass := func(detail string) {
		scen.Report(mirrorOrder[step], "pass", detail)
		step++
	}
	jars := filepath.Join(tools, mirrorJarsDir)
	if _, err := os.Stat(filepath.Join(jars, "connect-mirror-4.3.1.jar")); err != nil {
		fail(fmt.Sprintf("MirrorMaker 2 (connect-mirror 4.3.1) jars missing under %s (run compat/setup)", jars))
		return
	}
	scen.Info("version", "MirrorMaker 2 (connect-mirror 4.3.1, dedicated mode) from Apache Kafka 4.4.0 (KRaft), "+javaVersion(context.Background()))
	var err error
	if r.dir, err = os.MkdirTemp("", "disgw-compat-mirror-"); err != nil {
		fail(err.Error())
		return
	}
	fmt.Fprintln(os.Stderr, "logs:", r.dir)
	defer r.close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	steps := []func() (string, error){
		r.create, r.produceFirst, r.consumeOnKafka, r.mirror, r.mirrorMore, r.offsetsTranslated, r.stopMirror, r.resume, r.describe,
	}
	for _, f := range steps {
		if ctx.Err() != nil {
			fail("the scenario's 4 minutes are up")
			return
		}
		d, err := f()
		if err != nil {
			fail(err.Error())
			return
		}
		pass(d)
	}
}

func (r *mirrorRun) close() {
	r.stopMM()
	if r.disgw != nil {
		r.disgw.stop()
	}
	if r.dataDir != "" {
		_ = os.RemoveAll(r.dataDir)
	}
	for _, b := range []*kafkaBroker{r.kafka, r.targetKafka} {
		if b != nil {
			b.Stop()
			b.Remove()
		}
	}
}

func client(addr string, opts ...kgo.Opt) (*kgo.Client, *kadm.Client, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		return nil, nil, err
	}
	return cl, kadm.NewClient(cl), nil
}

func (r *mirrorRun) create() (string, error) {
	start := time.Now()
	var err error
	if r.kafka, err = startKafkaBroker(r.tools); err != nil {
		return "", err
	}
	fmt.Fprintln(os.Stderr, "Kafka broker:", r.kafka.Addr, r.kafka.Dir)
	up := time.Since(start)
	cl, adm, err := client(r.kafka.Addr)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, scen.Partitions, 1, nil, r.topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return "", fmt.Errorf("create %s on Kafka: %v", r.topic, err)
	}
	if r.backend == "kafka" {
		if r.targetKafka, err = startKafkaBroker(r.tools); err != nil {
			return "", fmt.Errorf("the target Kafka broker: %v", err)
		}
		r.targetAddr = r.targetKafka.Addr
		fmt.Fprintln(os.Stderr, "target Kafka broker (in disgw's place):", r.targetAddr, r.targetKafka.Dir)
		return fmt.Sprintf("Apache Kafka 4.4.0 broker up in %.1fs on %s; %s created there with %d partitions; a second Kafka broker in disgw's place on %s",
			up.Seconds(), r.kafka.Addr, r.topic, scen.Partitions, r.targetAddr), nil
	}
	r.disgw, r.dataDir, err = startDisgw(r.bin, r.backend, filepath.Join(r.dir, "disgw.log"))
	if err != nil {
		return "", err
	}
	r.targetAddr = r.disgw.addr
	return fmt.Sprintf("Apache Kafka 4.4.0 broker (KRaft, broker+controller, node 1) up in %.1fs on %s; %s created there with %d partitions; disgw (%s backend) on %s",
		up.Seconds(), r.kafka.Addr, r.topic, scen.Partitions, r.backend, r.targetAddr), nil
}

// produceOnKafka produces records from..to-1 to T on Kafka, 30 to a
// request, so that batches are small and a consumer's fetch can take a
// few from every partition.
func (r *mirrorRun) produceOnKafka(from, to int) error {
	cl, _, err := client(r.kafka.Addr)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), produceTimeout)
	defer cancel()
	for i := from; i < to; i += 30 {
		var rs []*kgo.Record
		for j := i; j < min(i+30, to); j++ {
			rec := &kgo.Record{Topic: r.topic, Key: []byte(scen.Key(j)), Value: []byte(scen.Value(j))}
			for _, h := range scen.Headers(j, mirrorClient) {
				rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
			}
			rs = append(rs, rec)
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			return fmt.Errorf("produce to Kafka: %w", err)
		}
	}
	return nil
}

func (r *mirrorRun) produceFirst() (string, error) {
	if err := r.produceOnKafka(0, mirrorN); err != nil {
		return "", err
	}
	src, err := readPartitions(r.kafka.Addr, r.topic, mirrorN)
	if err != nil {
		return "", fmt.Errorf("reading %s back from Kafka: %v", r.topic, err)
	}
	r.source = src
	return fmt.Sprintf("%d keyed records with headers idx and client acknowledged by Kafka (franz-go, acks=all): %s",
		mirrorN, fmtCounts(src)), nil
}

// consumeOnKafka: a group consumer on Kafka processes mirrorHalf records,
// one at a time, and commits exactly those. Fetches are small (one batch a
// partition) so that it processes records of every partition.
func (r *mirrorRun) consumeOnKafka() (string, error) {
	cl, _, err := client(r.kafka.Addr, kgo.ConsumerGroup(r.group), kgo.ConsumeTopics(r.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.FetchMaxPartitionBytes(1024), kgo.FetchMaxBytes(4096))
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), consumeTimeout)
	defer cancel()
	var out []scen.Rec
	var processed []*kgo.Record
	for len(out) < mirrorHalf {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			cl.Close()
			return "", fmt.Errorf("the Kafka group consumer processed %d of %d records in %s", len(out), mirrorHalf, consumeTimeout)
		}
		fs.EachRecord(func(k *kgo.Record) {
			if len(out) < mirrorHalf {
				out = append(out, toRec(k))
				processed = append(processed, k)
			}
		})
	}
	if err := cl.CommitRecords(ctx, processed...); err != nil {
		cl.Close()
		return "", fmt.Errorf("commit on Kafka: %w", err)
	}
	cl.Close() // leaves the group
	if err := scen.CheckFirst(out, mirrorClient, true); err != nil {
		return "", err
	}
	r.first, r.committed = out, scen.Committed(out)
	if len(r.committed) != scen.Partitions {
		return "", fmt.Errorf("the Kafka group processed records of %d partitions only (%s)", len(r.committed), scen.FmtOffsets(r.committed))
	}
	// What Kafka says it committed, and that the group is empty.
	acl, aadm, err := client(r.kafka.Addr)
	if err != nil {
		return "", err
	}
	defer acl.Close()
	got, err := fetchCommitted(ctx, aadm, r.group, r.topic)
	if err != nil {
		return "", err
	}
	if scen.FmtOffsets(got) != scen.FmtOffsets(r.committed) {
		return "", fmt.Errorf("the Kafka cluster has %s committed for the group, the consumer committed %s", scen.FmtOffsets(got), scen.FmtOffsets(r.committed))
	}
	state, err := waitGroupState(ctx, aadm, r.group, "Empty")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("group %s on Kafka processed %d records and committed %s, then left (state %s)",
		r.group, len(out), scen.FmtOffsets(r.committed), state), nil
}

func toRec(k *kgo.Record) scen.Rec {
	rec := scen.Rec{Partition: k.Partition, Offset: k.Offset, Key: string(k.Key), Value: string(k.Value), Headers: map[string]string{}}
	for _, h := range k.Headers {
		rec.Headers[h.Key] = string(h.Value)
	}
	return rec
}

// fetchCommitted is group's committed offsets for topic.
func fetchCommitted(ctx context.Context, adm *kadm.Client, group, topic string) (map[int32]int64, error) {
	ors, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = ors.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("OffsetFetch %s: %w", group, err)
	}
	got := map[int32]int64{}
	ors.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.At >= 0 {
			got[o.Partition] = o.At
		}
	})
	return got, nil
}

// waitGroupState waits up to 20s for group to be in state want.
func waitGroupState(ctx context.Context, adm *kadm.Client, group, want string) (string, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		dgs, err := adm.DescribeGroups(ctx, group)
		state := ""
		if err == nil {
			dg := dgs[group]
			err, state = dg.Err, dg.State
			if err == nil && state == want && len(dg.Members) == 0 {
				return state, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("group %s: state %q (%v) after 20s, want %s with no members", group, state, err, want)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// readPartitions reads topic from the start until it holds n records, and
// returns them per partition in offset order.
func readPartitions(broker, topic string, n int) (map[int32][]scen.Rec, error) {
	out := map[int32][]scen.Rec{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := readAll(ctx, broker, topic, func(k *kgo.Record) { out[k.Partition] = append(out[k.Partition], toRec(k)) })
	if err != nil {
		return nil, err
	}
	total := 0
	for _, rs := range out {
		total += len(rs)
	}
	if total != n {
		return out, fmt.Errorf("%s holds %d records, want %d", topic, total, n)
	}
	return out, nil
}

func fmtCounts(m map[int32][]scen.Rec) string {
	c := map[int32]int64{}
	for p, rs := range m {
		c[p] = int64(len(rs))
	}
	return "records per partition " + scen.FmtOffsets(c)
}

// mm2Properties is MirrorMaker's configuration: the kafka->disgw flow
// only, the one topic and group, offsets synced to the target group every
// second, every topic it creates at replication factor 1.
func (r *mirrorRun) mm2Properties() []string {
	return []string{
		"clusters = " + mirrorSource + ", " + mirrorTarget,
		mirrorSource + ".bootstrap.servers = " + r.kafka.Addr,
		mirrorTarget + ".bootstrap.servers = " + r.targetAddr,
		mirrorSource + "->" + mirrorTarget + ".enabled = true",
		mirrorSource + "->" + mirrorTarget + ".topics = " + r.topic,
		mirrorSource + "->" + mirrorTarget + ".groups = " + r.group,
		mirrorTarget + "->" + mirrorSource + ".enabled = false",
		"replication.policy.class = org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
		"sync.group.offsets.enabled = true",
		"sync.group.offsets.interval.seconds = 1",
		"emit.checkpoints.interval.seconds = 1",
		"refresh.topics.interval.seconds = 5",
		"refresh.groups.interval.seconds = 5",
		"sync.topic.configs.interval.seconds = 2",
		"replication.factor = 1",
		"offset-syncs.topic.replication.factor = 1",
		"heartbeats.topic.replication.factor = 1",
		"checkpoints.topic.replication.factor = 1",
		"config.storage.replication.factor = 1",
		"offset.storage.replication.factor = 1",
		"status.storage.replication.factor = 1",
		"offset.flush.interval.ms = 1000",
	}
}

func (r *mirrorRun) startMM() error {
	props := filepath.Join(r.dir, "mm2.properties")
	if err := os.WriteFile(props, []byte(strings.Join(r.mm2Properties(), "\n")+"\n"), 0o644); err != nil {
		return err
	}
	log4j := filepath.Join(r.dir, "mm2-log4j.properties")
	if err := os.WriteFile(log4j, []byte("log4j.rootLogger=INFO, stdout\nlog4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"+
		"log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\nlog4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n"), 0o644); err != nil {
		return err
	}
	r.mmLog = filepath.Join(r.dir, "mm2.log")
	logf, err := os.Create(r.mmLog)
	if err != nil {
		return err
	}
	cmd := exec.Command("java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx512m", "-Dlog4j.configuration=file:"+log4j,
		"-cp", filepath.Join(r.tools, mirrorJarsDir, "*"), mirrorClass, props, "--clusters", mirrorTarget)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	r.mm, r.mmDone, r.mmStarted = cmd, make(chan error, 1), time.Now()
	go func() { r.mmDone <- cmd.Wait(); logf.Close() }()
	return nil
}

// stopMM stops MirrorMaker with SIGTERM, killing it after 60s; it reports
// whether it had to kill it.
func (r *mirrorRun) stopMM() (killed bool, err error) {
	if r.mm == nil {
		return false, nil
	}
	_ = r.mm.Process.Signal(syscall.SIGTERM)
	select {
	case err = <-r.mmDone:
	case <-time.After(60 * time.Second):
		_ = r.mm.Process.Kill()
		err = <-r.mmDone
		killed = true
	}
	r.mm = nil
	return killed, err
}

func (r *mirrorRun) mmTail() string { return "MirrorMaker " + logErrors(r.mmLog, 700) }

// mmExited is an error if MirrorMaker has exited.
func (r *mirrorRun) mmExited() error {
	select {
	case err := <-r.mmDone:
		r.mm = nil
		return fmt.Errorf("MirrorMaker exited: %v; %s", err, r.mmTail())
	default:
		return nil
	}
}

// waitMirrored waits until the target topic on disgw holds n records (and
// no more come for a moment), then checks each partition holds exactly the
// source partition's records, in order, at the same offsets.
func (r *mirrorRun) waitMirrored(n int, start time.Time, limit time.Duration) (string, error) {
	cl, adm, err := client(r.targetAddr)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	deadline := time.Now().Add(limit)
	var have int64
	var lastErr error
	for {
		if err := r.mmExited(); err != nil {
			return "", err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ends, err := adm.ListEndOffsets(ctx, r.target)
		cancel()
		lastErr = err
		if err == nil && ends.Error() == nil {
			have = 0
			ends.Each(func(o kadm.ListedOffset) { have += o.Offset })
			if have >= int64(n) {
				break
			}
		} else if err == nil {
			lastErr = ends.Error()
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%s on disgw holds %d records after %s, want %d (last error %v); %s", r.target, have, limit, n, lastErr, r.mmTail())
		}
		time.Sleep(500 * time.Millisecond)
	}
	took := time.Since(start)
	time.Sleep(2 * time.Second) // anything sent twice would be there by now
	tds, err := adm.ListTopics(context.Background(), r.target)
	if err != nil {
		return "", err
	}
	if np := len(tds[r.target].Partitions); np != scen.Partitions {
		return "", fmt.Errorf("%s on disgw has %d partitions, %s on Kafka %d", r.target, np, r.topic, scen.Partitions)
	}
	got, err := readPartitions(r.targetAddr, r.target, n)
	if err != nil {
		return "", fmt.Errorf("on disgw: %v", err)
	}
	seen := map[string]bool{}
	for p := int32(0); p < scen.Partitions; p++ {
		src, dst := r.source[p], got[p]
		if len(dst) != len(src) {
			return "", fmt.Errorf("partition %d: %d records on disgw, %d on Kafka", p, len(dst), len(src))
		}
		for i, d := range dst {
			s := src[i]
			if err := scen.Check(d, mirrorClient, true); err != nil {
				return "", fmt.Errorf("on disgw: %v", err)
			}
			if seen[d.Key] {
				return "", fmt.Errorf("key %s twice on disgw", d.Key)
			}
			seen[d.Key] = true
			if d.Key != s.Key || d.Offset != s.Offset {
				return "", fmt.Errorf("partition %d: disgw has %s at offset %d, Kafka has %s at offset %d", p, d.Key, d.Offset, s.Key, s.Offset)
			}
		}
	}
	return fmt.Sprintf("%s on disgw: %d partitions, %d records in %.1fs, each once, in each partition the Kafka partition's records in order at the same offsets, values and headers intact (%s)",
		r.target, scen.Partitions, n, took.Seconds(), fmtCounts(got)), nil
}

func (r *mirrorRun) mirror() (string, error) {
	if err := r.startMM(); err != nil {
		return "", err
	}
	d, err := r.waitMirrored(mirrorN, r.mmStarted, 90*time.Second)
	if err != nil {
		return "", err
	}
	return "MirrorMaker 2 (dedicated, kafka->disgw, DefaultReplicationPolicy): " + d, nil
}

func (r *mirrorRun) mirrorMore() (string, error) {
	start := time.Now()
	if err := r.produceOnKafka(mirrorN, mirrorN+mirrorMore); err != nil {
		return "", err
	}
	src, err := readPartitions(r.kafka.Addr, r.topic, mirrorN+mirrorMore)
	if err != nil {
		return "", fmt.Errorf("reading %s back from Kafka: %v", r.topic, err)
	}
	r.source = src
	d, err := r.waitMirrored(mirrorN+mirrorMore, start, 60*time.Second)
	if err != nil {
		return "", err
	}
	c, err := r.syncedConfig()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d more produced on Kafka while MirrorMaker runs: %s; %s", mirrorMore, d, c), nil
}

// syncedConfig sets retention.ms on the topic on Kafka and waits for
// MirrorMaker to carry it to the target topic (sync.topic.configs, every
// 2s here: an IncrementalAlterConfigs that SETs the source's non-default
// configs and DELETEs every other config the source reports).
func (r *mirrorRun) syncedConfig() (string, error) {
	const key, value = "retention.ms", "172800000" // 48h: DIS takes 24h to 168h
	kcl, kadmc, err := client(r.kafka.Addr)
	if err != nil {
		return "", err
	}
	defer kcl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	v := value
	rs, err := kadmc.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: key, Value: &v}}, r.topic)
	if err == nil && len(rs) == 1 {
		err = rs[0].Err
	}
	if err != nil {
		return "", fmt.Errorf("setting %s on Kafka: %v", key, err)
	}
	cl, adm, err := client(r.targetAddr)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	start := time.Now()
	var got string
	for {
		rc, err := adm.DescribeTopicConfigs(ctx, r.target)
		if err == nil && len(rc) == 1 && rc[0].Err == nil {
			for _, c := range rc[0].Configs {
				if c.Key == key && c.Value != nil {
					got = *c.Value
				}
			}
			if got == value {
				return fmt.Sprintf("%s=%s set on Kafka reached %s on disgw in %.1fs (topic config sync)", key, value, r.target, time.Since(start).Seconds()), nil
			}
		}
		if ctx.Err() != nil {
			warn := ""
			if b, _ := os.ReadFile(r.mmLog); strings.Contains(string(b), "Could not alter configuration of topic") {
				i := strings.LastIndex(string(b), "Could not alter configuration of topic")
				warn = "; MirrorMaker: " + oneLine(string(b[i:min(len(b), i+400)]), 400)
			}
			return "", fmt.Errorf("%s=%s set on Kafka, %s on disgw has %s=%s after 30s%s", key, value, r.target, key, got, warn)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// offsetsTranslated waits for the group's offsets on disgw (every partition
// the Kafka group committed, and unchanged for 3s), then checks each is at
// or before the offset committed on Kafka (the offsets of both topics are
// the same, mirror checked that).
func (r *mirrorRun) offsetsTranslated() (string, error) {
	cl, adm, err := client(r.targetAddr)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	deadline := time.Now().Add(60 * time.Second)
	var got map[int32]int64
	var stableSince time.Time
	var prev string
	for {
		if err := r.mmExited(); err != nil {
			return "", err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		g, err := fetchCommitted(ctx, adm, r.group, r.target)
		cancel()
		if err == nil && len(g) == len(r.committed) {
			if s := scen.FmtOffsets(g); s != prev {
				prev, stableSince = s, time.Now()
			} else if time.Since(stableSince) >= 3*time.Second {
				got = g
				break
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("group %s on disgw has offsets %s for %s after 60s (%v), want every partition of %s; %s",
				r.group, scen.FmtOffsets(g), r.target, err, scen.FmtOffsets(r.committed), r.mmTail())
		}
		time.Sleep(500 * time.Millisecond)
	}
	var after []string
	for p, c := range r.committed {
		if got[p] > c {
			after = append(after, fmt.Sprintf("partition %d: translated %d, after %d committed on Kafka", p, got[p], c))
		}
		if got[p] < 0 {
			after = append(after, fmt.Sprintf("partition %d: translated %d", p, got[p]))
		}
	}
	if len(after) > 0 {
		sort.Strings(after)
		return "", errors.New(strings.Join(after, "; "))
	}
	r.translated = got
	return fmt.Sprintf("group %s on disgw: %s translated for %s (first seen %.1fs after MirrorMaker started, then unchanged for 3s), committed on Kafka %s: each at or before",
		r.group, scen.FmtOffsets(got), r.target, stableSince.Sub(r.mmStarted).Seconds(), scen.FmtOffsets(r.committed)), nil
}

// resume: a consumer in the group on disgw starts at the translated
// offsets and reads to the end; with what the Kafka consumer processed,
// nothing is missing, and what it read again is counted.
func (r *mirrorRun) resume() (string, error) {
	ends := map[int32]int64{}
	total := 0
	for p, rs := range r.source {
		ends[p] = int64(len(rs))
		total += len(rs)
	}
	cl, _, err := client(r.targetAddr, kgo.ConsumerGroup(r.group), kgo.ConsumeTopics(r.target),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), consumeTimeout)
	defer cancel()
	var recs []scen.Rec
	var processed []*kgo.Record
	want := 0
	for p, e := range ends {
		want += int(e - r.translated[p])
	}
	for len(recs) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachRecord(func(k *kgo.Record) { recs = append(recs, toRec(k)); processed = append(processed, k) })
	}
	if len(recs) < want {
		cl.Close()
		return "", fmt.Errorf("the consumer on disgw read %d records in %s, want %d (from the translated %s to the end %s)",
			len(recs), consumeTimeout, want, scen.FmtOffsets(r.translated), scen.FmtOffsets(ends))
	}
	if err := cl.CommitRecords(ctx, processed...); err != nil {
		cl.Close()
		return "", fmt.Errorf("commit on disgw: %w", err)
	}
	cl.Close()
	// In each partition it starts at the translated offset, reads on
	// without a gap; the records before the Kafka commit are read again.
	next := map[int32]int64{}
	started := map[int32]bool{}
	seen := map[string]bool{}
	for _, rec := range r.first {
		seen[rec.Key] = true
	}
	reread := 0
	for _, rec := range recs {
		if err := scen.Check(rec, mirrorClient, true); err != nil {
			return "", err
		}
		if !started[rec.Partition] {
			started[rec.Partition] = true
			if rec.Offset != r.translated[rec.Partition] {
				return "", fmt.Errorf("partition %d: resumed at offset %d, translated offset is %d", rec.Partition, rec.Offset, r.translated[rec.Partition])
			}
		} else if rec.Offset != next[rec.Partition] {
			return "", fmt.Errorf("partition %d: offset %d after %d (gap or rewind)", rec.Partition, rec.Offset, next[rec.Partition]-1)
		}
		next[rec.Partition] = rec.Offset + 1
		if rec.Offset < r.committed[rec.Partition] {
			reread++
		}
		seen[rec.Key] = true
	}
	for p, e := range ends {
		if next[p] != e && !(e == r.translated[p] && !started[p]) {
			return "", fmt.Errorf("partition %d: the consumer on disgw stopped at %d, end %d", p, next[p], e)
		}
	}
	var missing []string
	for i := 0; i < total; i++ {
		if !seen[scen.Key(i)] {
			missing = append(missing, scen.Key(i))
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%d records neither the Kafka consumer nor the disgw consumer read (first %s)", len(missing), missing[0])
	}
	wantReread := 0
	for p, c := range r.committed {
		wantReread += int(c - r.translated[p])
	}
	if reread != wantReread {
		return "", fmt.Errorf("read again %d records, committed on Kafka - translated = %d", reread, wantReread)
	}
	return fmt.Sprintf("a consumer of group %s on disgw resumed at the translated %s and read %d records to the end %s, none skipped: "+
		"with the Kafka consumer's %d every one of the %d; it read again %d that were committed on Kafka (committed - translated)",
		r.group, scen.FmtOffsets(r.translated), len(recs), scen.FmtOffsets(ends), len(r.first), total, reread), nil
}

// describe: the group on disgw after the resumed consumer, and
// MirrorMaker's topics on disgw.
func (r *mirrorRun) describe() (string, error) {
	st, err := franzClient{r.targetAddr}.Describe(context.Background(), r.target, r.group)
	if err != nil {
		return "", err
	}
	if !strings.EqualFold(st.State, "Empty") || st.Members != 0 {
		return "", fmt.Errorf("group %s on disgw: state %q with %d members, want Empty with 0", r.group, st.State, st.Members)
	}
	if err := scen.CheckCommittedAtEnd(st.Committed, st.Ends); err != nil {
		return "", fmt.Errorf("group %s on disgw: %v", r.group, err)
	}
	cl, adm, err := client(r.targetAddr)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	tds, err := adm.ListTopics(ctx)
	if err != nil {
		return "", err
	}
	var names []string
	for _, n := range tds.Names() {
		if n != r.target && !strings.HasPrefix(n, "__") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var topics []string
	if len(names) > 0 {
		rc, err := adm.DescribeTopicConfigs(ctx, names...)
		if err != nil {
			return "", err
		}
		policy := map[string]string{}
		for _, c := range rc {
			for _, cfg := range c.Configs {
				if cfg.Key == "cleanup.policy" && cfg.Value != nil {
					policy[c.Name] = *cfg.Value
				}
			}
		}
		for _, n := range names {
			topics = append(topics, n+" ("+policy[n]+")")
		}
	}
	checkpoints := mirrorSource + ".checkpoints.internal"
	if _, ok := tds[checkpoints]; !ok {
		return "", fmt.Errorf("no %s on disgw: topics %s", checkpoints, strings.Join(names, ", "))
	}
	return fmt.Sprintf("group %s on disgw: state %q, %d members, committed %s = end offsets of %s; MirrorMaker's topics on disgw: %s",
		r.group, st.State, st.Members, scen.FmtOffsets(st.Committed), r.target, strings.Join(topics, ", ")), nil
}

func (r *mirrorRun) stopMirror() (string, error) {
	if err := r.mmExited(); err != nil {
		return "", err
	}
	start := time.Now()
	killed, err := r.stopMM()
	took := time.Since(start)
	if killed {
		return "", fmt.Errorf("MirrorMaker did not stop within 60s of SIGTERM (killed); %s", r.mmTail())
	}
	b, _ := os.ReadFile(r.mmLog)
	if !strings.Contains(string(b), "Kafka MirrorMaker stopped") {
		return "", fmt.Errorf("MirrorMaker exited (%v) in %.1fs without logging that it stopped; %s", err, took.Seconds(), r.mmTail())
	}
	log, stopping, _ := strings.Cut(string(b), "Kafka MirrorMaker stopping")
	exit := "exit status 0"
	if err != nil {
		exit = err.Error() // 143: the JVM's status after SIGTERM and its shutdown hooks
	}
	return fmt.Sprintf("MirrorMaker stopped on SIGTERM in %.1fs (%s, \"Kafka MirrorMaker stopped.\"); its log has %d ERROR lines before it was stopped, %d while stopping",
		took.Seconds(), exit, strings.Count(log, "] ERROR "), strings.Count(stopping, "] ERROR ")), nil
}
