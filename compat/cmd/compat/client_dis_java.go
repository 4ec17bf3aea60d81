package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/disgw/disgw/compat/internal/scen"
)

// The official DIS Java clients, unchanged, against the dislocal behind
// disgw (backend dis only; the scenario gets its endpoint and AK/SK in
// DISGW_COMPAT_DIS_*): compat/java/dis/DisCompat.java, compiled by
// compat/setup into TOOLS/dis-java-app against the jars of
// compat/java/dis/pom.xml in TOOLS/dis-java.
//
//   - dis-java-sdk, dis-java-sdk-protobuf: the DIS Java SDK 1.3.21
//     (DISClient, body.serialize.type json or protobuf). create:
//     createStream of 3 partitions, describeStream ranges [0:0]. produce:
//     putRecords of 1,000 keyed records (JSON: the 4 requests plain and
//     with body.compress.type lz4, snappy, zstd), failed_record_count 0,
//     sequence numbers 0,1,2,... per partition. consume: createApp (the group),
//     getPartitionCursor AT_SEQUENCE_NUMBER 0 and getRecords (app_name)
//     of 500 records round-robin over the partitions, each with its key
//     (partition_key), value, partition and sequence number as put, then
//     commitCheckpoint LAST_READ of the next sequence number of each
//     partition. resume: a fresh DISClient reads getCheckpoint (equal to
//     the commits) and from there exactly the other 500 records. describe:
//     describeStream ranges [0:end] holding 1,000 records and getCheckpoint
//     of every partition equal to its end.
//   - dis-kafka-adapter: the DIS Kafka Adapter 1.2.2 (DISKafkaProducer,
//     DISKafkaConsumer of com.huaweicloud.dis.adapter.kafka.clients).
//     create: createStream through the SDK (the adapter has no admin API),
//     partitionsFor gives 3. produce: 1,000 keyed sends, flush, every
//     callback without an exception, offsets 0,1,2,... per partition.
//     consume: assign() of the 3 partitions, 500 records as produced,
//     commitSync of the next offsets. resume: a new consumer assigned
//     again: committed() equals the commits, it reads exactly the other
//     500, then commitSync(). describe: beginningOffsets 0, endOffsets
//     summing to 1,000, committed() equal to them. subscribe group of two:
//     two consumers of one group.id with distinct client.id subscribe() to
//     an empty stream until their assignments are disjoint and cover its 3
//     partitions; then 600 records are produced, and together they read
//     each exactly once, from partitions they are assigned, committing.
//     group restart: both closed, two new consumers (new client.id)
//     subscribe; of 300 records produced then they read each exactly once
//     and nothing produced before.
//   - dis-interop: Kafka and DIS through the same dislocal, this Go
//     scenario (franz-go through disgw) calling DisCompat's helpers for
//     the DIS side; see runDISInterop.
const (
	disJavaJars = "dis-java"
	disJavaApp  = "dis-java-app"
	// disJavaTimeout bounds one DisCompat run.
	disJavaTimeout = 4 * time.Minute
)

var disAdapterExtra = []string{"subscribe group of two", "group restart"}

var disInteropExtra = []string{"DIS to Kafka"}

// disJavaCmd is the java command line of DisCompat with args.
func disJavaCmd(tools string, args ...string) ([]string, error) {
	app := filepath.Join(tools, disJavaApp)
	if _, err := os.Stat(filepath.Join(app, "DisCompat.class")); err != nil {
		return nil, fmt.Errorf("%s/DisCompat.class missing (run compat/setup)", app)
	}
	return append([]string{"java", "-Xshare:auto", "-XX:TieredStopAtLevel=1",
		"-cp", filepath.Join(tools, disJavaJars, "*") + string(os.PathListSeparator) + app, "DisCompat"}, args...), nil
}

// disJavaRow runs DisCompat's row cmd (sdk json, sdk protobuf, adapter)
// on the client's topic (the DIS stream) and group (the DIS app).
func disJavaRow(cmd ...string) func(e env) ([]string, error) {
	return func(e env) ([]string, error) {
		if e.disEndpoint == "" {
			return nil, fmt.Errorf("no dislocal (the DIS clients run on backend dis)")
		}
		return disJavaCmd(e.tools, append(cmd, e.topic, e.group)...)
	}
}

// disRec is a record as DisCompat prints it (##REC) or franz-go read it.
type disRec struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Key       string `json:"key"`
	Value     string `json:"value"`
}

// disOff is a partition's offset as DisCompat prints it (##OFF): a
// checkpoint or commit (-1: none), or a range start with its end.
type disOff struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
	End       int64 `json:"end"`
}

// disJava runs a DisCompat helper and returns its ##REC and ##OFF lines;
// its stderr (the SDK's log) goes to the scenario's.
func disJava(ctx context.Context, tools string, args ...string) ([]disRec, map[int32]disOff, error) {
	argv, err := disJavaCmd(tools, args...)
	if err != nil {
		return nil, nil, err
	}
	out, errOut, err := runCmd(ctx, disJavaTimeout, "", argv[0], argv[1:]...)
	fmt.Fprintf(os.Stderr, "$ DisCompat %s\n%s", strings.Join(args, " "), errOut)
	if err != nil {
		return nil, nil, fmt.Errorf("DisCompat %s: %s", args[0], lastLine(errOut, "DisCompat "+args[0]+": ", err))
	}
	var recs []disRec
	offs := map[int32]disOff{}
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "##REC "):
			var r disRec
			if err := json.Unmarshal([]byte(l[len("##REC "):]), &r); err != nil {
				return nil, nil, fmt.Errorf("DisCompat %s: %q: %v", args[0], l, err)
			}
			recs = append(recs, r)
		case strings.HasPrefix(l, "##OFF "):
			var o disOff
			if err := json.Unmarshal([]byte(l[len("##OFF "):]), &o); err != nil {
				return nil, nil, fmt.Errorf("DisCompat %s: %q: %v", args[0], l, err)
			}
			offs[o.Partition] = o
		}
	}
	return recs, offs, nil
}

// lastLine is the line of errOut that starts with prefix (DisCompat's
// error), else err.
func lastLine(errOut, prefix string, err error) string {
	for _, l := range strings.Split(errOut, "\n") {
		if strings.HasPrefix(l, prefix) {
			return tail(strings.TrimPrefix(l, prefix), 600)
		}
	}
	return err.Error()
}

// sameRecords checks that got holds exactly the records of want (by key),
// each at the same partition and offset with the same value.
func sameRecords(what string, got []disRec, want map[string]disRec) error {
	seen := map[string]bool{}
	for _, r := range got {
		w, ok := want[r.Key]
		switch {
		case !ok:
			return fmt.Errorf("%s: key %q (p%d@%d) was not produced", what, r.Key, r.Partition, r.Offset)
		case seen[r.Key]:
			return fmt.Errorf("%s: key %s twice", what, r.Key)
		case r != w:
			return fmt.Errorf("%s: read %+v, produced %+v", what, r, w)
		}
		seen[r.Key] = true
	}
	if len(seen) != len(want) {
		return fmt.Errorf("%s: %d of %d records", what, len(seen), len(want))
	}
	return nil
}

func offsString(m map[int32]int64) string {
	var ps []int
	for p := range m {
		ps = append(ps, int(p))
	}
	sort.Ints(ps)
	var b []string
	for _, p := range ps {
		b = append(b, fmt.Sprintf("p%d=%d", p, m[int32(p)]))
	}
	return strings.Join(b, " ")
}

// runDISInterop is the dis-interop row: Kafka clients through disgw and
// the DIS Java SDK and DIS Kafka Adapter directly on disgw's dislocal,
// on one topic (stream, the same name) and group (app, the same name).
//
//   - create: the topic created through disgw (kadm, 3 partitions) is a
//     stream of 3 partitions, ranges [0:0], to the SDK (describeStream).
//   - produce: franz-go produces 1,000 keyed records without headers
//     (stored plain: partition_key and data).
//   - consume: the SDK (getRecords) and the adapter (assign, from the
//     beginning) each read exactly those records: keys, values,
//     partitions, offsets = sequence numbers.
//   - resume: offsets the group committed through disgw (kadm) are what
//     the adapter's committed() and the SDK's getCheckpoint read, the next
//     offset without ±1; the adapter's commitSync in a second group is
//     what disgw's OffsetFetch (kadm) gives, and a franz-go consumer of
//     that group resumes exactly there and reads the rest.
//   - describe: disgw's ListOffsets (earliest, latest) equal the SDK's
//     describeStream ranges.
//   - DIS to Kafka: 300 records put with the SDK and 300 sent with the
//     adapter are read through disgw by franz-go at the partitions and
//     offsets DIS gave them, with their keys and values and no headers.
func runDISInterop(broker, topic, group, tools string) {
	steps := append(append([]string{}, scen.CoreSteps...), disInteropExtra...)
	fail := func(from int, why string) {
		scen.Report(steps[from], "fail", why)
		for _, s := range steps[from+1:] {
			scen.Skip(s, "an earlier step failed")
		}
	}
	scen.Info("version", "franz-go through disgw; huaweicloud-sdk-java-dis 1.3.21 and huaweicloud-dis-kafka-adapter 1.2.2 on dislocal, "+javaVersion(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		fail(0, err.Error())
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	// create
	if _, err := adm.CreateTopic(ctx, scen.Partitions, 1, nil, topic); err != nil {
		fail(0, fmt.Sprintf("create %s: %v", topic, err))
		return
	}
	_, ranges, err := disJava(ctx, tools, "sdk-describe", topic)
	if err == nil && len(ranges) != scen.Partitions {
		err = fmt.Errorf("describeStream %s: %d partitions, want %d", topic, len(ranges), scen.Partitions)
	}
	for p, r := range ranges {
		if err == nil && (r.Offset != 0 || r.End != 0) {
			err = fmt.Errorf("describeStream %s: partition %d range [%d:%d], want [0:0]", topic, p, r.Offset, r.End)
		}
	}
	if err != nil {
		fail(0, err.Error())
		return
	}
	scen.Report(scen.StepCreate, "pass", fmt.Sprintf("topic %s (kadm, 3 partitions) is the DIS stream %s: describeStream (SDK) gives 3 partitions, ranges [0:0]", topic, topic))

	// produce
	want := map[string]disRec{}
	var rs []*kgo.Record
	for i := 0; i < scen.N; i++ {
		rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(scen.Key(i)), Value: []byte(scen.Value(i))})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		fail(1, err.Error())
		return
	}
	ends := map[int32]int64{}
	for _, r := range rs {
		want[string(r.Key)] = disRec{r.Partition, r.Offset, string(r.Key), string(r.Value)}
		ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
	}
	scen.Report(scen.StepProduce, "pass", fmt.Sprintf("franz-go produced %d keyed records without headers through disgw: %s", scen.N, offsString(ends)))

	// consume
	sdkRecs, _, err := disJava(ctx, tools, "sdk-read", topic)
	if err == nil {
		err = sameRecords("the SDK's getRecords", sdkRecs, want)
	}
	if err != nil {
		fail(2, err.Error())
		return
	}
	adRecs, _, err := disJava(ctx, tools, "adapter-read", topic)
	if err == nil {
		err = sameRecords("the adapter's poll", adRecs, want)
	}
	if err != nil {
		fail(2, err.Error())
		return
	}
	scen.Report(scen.StepConsume, "pass", fmt.Sprintf("the SDK (getRecords) and the adapter (assign, poll) read from dislocal the %d records franz-go produced: the same keys (partition_key), values, partitions, and offsets as sequence numbers", scen.N))

	// resume
	if detail, err := disInteropOffsets(ctx, broker, adm, tools, topic, group, ends, want); err != nil {
		fail(3, err.Error())
		return
	} else {
		scen.Report(scen.StepResume, "pass", detail)
	}

	// describe
	starts, err1 := adm.ListStartOffsets(ctx, topic)
	lends, err2 := adm.ListEndOffsets(ctx, topic)
	_, ranges, err3 := disJava(ctx, tools, "sdk-describe", topic)
	err = firstErr(err1, err2, err3)
	for p := int32(0); err == nil && p < scen.Partitions; p++ {
		s, _ := starts.Lookup(topic, p)
		e, _ := lends.Lookup(topic, p)
		r := ranges[p]
		if s.Offset != r.Offset || e.Offset != r.End || e.Offset != ends[p] {
			err = fmt.Errorf("partition %d: ListOffsets earliest %d latest %d, describeStream [%d:%d], produced up to %d", p, s.Offset, e.Offset, r.Offset, r.End, ends[p])
		}
	}
	if err != nil {
		fail(4, err.Error())
		return
	}
	scen.Report(scen.StepDescribe, "pass", fmt.Sprintf("ListOffsets through disgw (earliest, latest) = describeStream's sequence_number_range of every partition: %s", offsString(ends)))

	// DIS to Kafka
	if detail, err := disToKafka(ctx, broker, tools, topic, ends); err != nil {
		fail(5, err.Error())
	} else {
		scen.Report(disInteropExtra[0], "pass", detail)
	}
}

// disInteropOffsets checks group offsets both ways between disgw and DIS
// (the resume step of dis-interop).
func disInteropOffsets(ctx context.Context, broker string, adm *kadm.Client, tools, topic, group string, ends map[int32]int64, want map[string]disRec) (string, error) {
	// Kafka -> DIS: kadm commits through disgw, the adapter and the SDK read.
	commit := map[int32]int64{}
	offs := kadm.Offsets{}
	for p, e := range ends {
		commit[p] = e/2 + int64(p)
		offs.Add(kadm.Offset{Topic: topic, Partition: p, At: commit[p], LeaderEpoch: -1})
	}
	cr, err := adm.CommitOffsets(ctx, group, offs)
	if err == nil {
		err = cr.Error()
	}
	if err != nil {
		return "", fmt.Errorf("kadm commit %s: %v", offsString(commit), err)
	}
	_, adCommitted, err := disJava(ctx, tools, "adapter-committed", topic, group)
	if err != nil {
		return "", err
	}
	_, sdkCheckpoints, err := disJava(ctx, tools, "sdk-checkpoints", topic, group)
	if err != nil {
		return "", err
	}
	for p, c := range commit {
		if adCommitted[p].Offset != c || sdkCheckpoints[p].Offset != c {
			return "", fmt.Errorf("group %s partition %d: committed %d through disgw; the adapter's committed() %d, the SDK's getCheckpoint %d",
				group, p, c, adCommitted[p].Offset, sdkCheckpoints[p].Offset)
		}
	}

	// DIS -> Kafka: the adapter commits, disgw's OffsetFetch reads, a
	// franz-go group consumer resumes there.
	group2 := group + "-adapter"
	commit2 := map[int32]int64{}
	var spec []string
	for p, e := range ends {
		commit2[p] = e - 10 - int64(p)
		spec = append(spec, fmt.Sprintf("%d=%d", p, commit2[p]))
	}
	if _, _, err := disJava(ctx, tools, "adapter-commit", topic, group2, strings.Join(spec, ",")); err != nil {
		return "", err
	}
	fetched, err := adm.FetchOffsets(ctx, group2)
	if err == nil {
		err = fetched.Error()
	}
	if err != nil {
		return "", fmt.Errorf("OffsetFetch %s through disgw: %v", group2, err)
	}
	for p, c := range commit2 {
		o, ok := fetched.Lookup(topic, p)
		if !ok || o.At != c {
			return "", fmt.Errorf("group %s partition %d: the adapter's commitSync %d; OffsetFetch through disgw %d (present %v)", group2, p, c, o.At, ok)
		}
	}
	rest := 0
	for p := range commit2 {
		rest += int(ends[p] - commit2[p])
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumerGroup(group2), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
	if err != nil {
		return "", err
	}
	defer cons.Close()
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	next := map[int32]int64{}
	for p, c := range commit2 {
		next[p] = c
	}
	n := 0
	for n < rest {
		fs := cons.PollFetches(rctx)
		if rctx.Err() != nil {
			return "", fmt.Errorf("franz-go in group %s read %d of the %d records after the adapter's commits in a minute", group2, n, rest)
		}
		var bad error
		fs.EachError(func(t string, p int32, err error) { bad = fmt.Errorf("fetch %s/%d: %v", t, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if bad == nil && r.Offset != next[r.Partition] {
				bad = fmt.Errorf("franz-go in group %s: partition %d offset %d, want %d (the adapter committed %d)", group2, r.Partition, r.Offset, next[r.Partition], commit2[r.Partition])
			}
			if w := want[string(r.Key)]; bad == nil && (w != disRec{r.Partition, r.Offset, string(r.Key), string(r.Value)}) {
				bad = fmt.Errorf("franz-go read %s p%d@%d = %q, produced %+v", r.Key, r.Partition, r.Offset, r.Value, w)
			}
			next[r.Partition] = r.Offset + 1
			n++
		})
		if bad != nil {
			return "", bad
		}
	}
	return fmt.Sprintf("group %s committed through disgw (kadm) %s: the adapter's committed() and the SDK's getCheckpoint read the same, no ±1; "+
		"the adapter's commitSync in group %s %s is what OffsetFetch through disgw gives, and a franz-go consumer of the group resumed exactly there (%d records)",
		group, offsString(commit), group2, offsString(commit2), rest), nil
}

// disToKafka puts records with the SDK and sends with the adapter, and
// reads them through disgw with franz-go (the DIS to Kafka step).
func disToKafka(ctx context.Context, broker, tools, topic string, ends map[int32]int64) (string, error) {
	const each = 300
	sdkPut, _, err := disJava(ctx, tools, "sdk-put", topic, strconv.Itoa(scen.N), strconv.Itoa(each))
	if err != nil {
		return "", err
	}
	adPut, _, err := disJava(ctx, tools, "adapter-put", topic, strconv.Itoa(scen.N+each), strconv.Itoa(each))
	if err != nil {
		return "", err
	}
	want := map[string]disRec{}
	for _, r := range append(sdkPut, adPut...) {
		want[r.Key] = r
	}
	if len(want) != 2*each {
		return "", fmt.Errorf("DisCompat put %d records, want %d", len(want), 2*each)
	}
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	for p, e := range ends {
		offsets[topic][p] = kgo.NewOffset().At(e)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumePartitions(offsets))
	if err != nil {
		return "", err
	}
	defer cons.Close()
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var got []disRec
	for len(got) < len(want) {
		fs := cons.PollFetches(rctx)
		if rctx.Err() != nil {
			return "", fmt.Errorf("franz-go read %d of the %d records DIS clients put, in a minute", len(got), len(want))
		}
		var bad error
		fs.EachError(func(t string, p int32, err error) { bad = fmt.Errorf("fetch %s/%d: %v", t, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Headers) > 0 && bad == nil {
				bad = fmt.Errorf("%s p%d@%d has headers %v", r.Key, r.Partition, r.Offset, r.Headers)
			}
			got = append(got, disRec{r.Partition, r.Offset, string(r.Key), string(r.Value)})
		})
		if bad != nil {
			return "", bad
		}
	}
	if err := sameRecords("franz-go through disgw", got, want); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d records put with the SDK (putRecords) and %d sent with the adapter (DISKafkaProducer) read through disgw by franz-go: the same keys, values, partitions and offsets (sequence numbers), no headers", each, each), nil
}
