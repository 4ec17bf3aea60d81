package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/auth/basic"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/config"
	dis "github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/disgw/disgw/compat/internal/scen"
)

// The dis-go-sdk row: huaweicloud-sdk-go-v3's DIS client (services/dis/v2),
// unchanged, against the dislocal behind the scenario's disgw (backend dis;
// DISGW_COMPAT_DIS_*), with the same columns as the Python DIS SDK's rows
// (compat/python/dis_scenario.py), and one more step: the SDK's checkpoints
// and the Kafka view through disgw agree.

// stepKafkaView is dis-go-sdk's extra step.
const stepKafkaView = "kadm = checkpoints"

var disGoExtra = []string{stepKafkaView}

const (
	disReadBytes = 1000 // max_fetch_bytes of a ConsumeRecords: 100 records of 10 bytes
	// disKafkaShift is how far below the committed checkpoints the Kafka
	// view step commits through disgw before it commits them back.
	disKafkaShift = 7
)

// disGoRun is one run's state, filled by the steps in order.
type disGoRun struct {
	c            *dis.DisClient
	broker       string
	stream, app  string
	topic, group string
	where        map[string][2]int64 // key -> partition, sequence number (from SendRecords)
	ends         map[int32]int64     // records per partition
	first        map[string]bool     // keys the consume step processed
	committed    map[int32]int64     // the consume step's checkpoints
}

func disPartitionID(p int32) string { return fmt.Sprintf("shardId-%010d", p) }

func disParsePartition(id string) (int32, error) {
	n, err := strconv.ParseInt(strings.TrimPrefix(id, "shardId-"), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("partition id %q: %v", id, err)
	}
	return int32(n), nil
}

func newDISGoClient() (*dis.DisClient, error) {
	ep := os.Getenv("DISGW_COMPAT_DIS_ENDPOINT")
	if ep == "" {
		return nil, fmt.Errorf("no DISGW_COMPAT_DIS_ENDPOINT: run with compat -backend dis")
	}
	cred, err := basic.NewCredentialsBuilder().WithAk(os.Getenv("DISGW_COMPAT_DIS_AK")).WithSk(os.Getenv("DISGW_COMPAT_DIS_SK")).
		WithProjectId(os.Getenv("DISGW_COMPAT_DIS_PROJECT")).SafeBuild()
	if err != nil {
		return nil, err
	}
	hc, err := dis.DisClientBuilder().WithEndpoints([]string{ep}).WithCredential(cred).
		WithHttpConfig(config.DefaultHttpConfig().WithTimeout(20 * time.Second)).SafeBuild()
	if err != nil {
		return nil, err
	}
	return dis.NewDisClient(hc), nil
}

// runDISGo runs the dis-go-sdk row. The stream is named as disgw names
// topic's (no '.' in compat's names), the app as disgw names group's
// (compat's group names are letters, digits and '-', which
// AppNameForGroup keeps).
func runDISGo(broker, topic, group string) {
	scenInfoModule("github.com/huaweicloud/huaweicloud-sdk-go-v3")
	r := &disGoRun{broker: broker, topic: topic, group: group, stream: strings.ReplaceAll(topic, ".", "_"), app: group}
	c, err := newDISGoClient()
	if err != nil {
		for _, s := range append(append([]string{}, scen.CoreSteps...), disGoExtra...) {
			scen.Report(s, "fail", err.Error())
		}
		return
	}
	r.c = c
	ok := scen.Run(scen.StepCreate, r.create) && scen.Run(scen.StepProduce, r.produce)
	if !ok {
		for _, s := range []string{scen.StepConsume, stepKafkaView, scen.StepResume, scen.StepDescribe} {
			scen.Skip(s, "needs the records (create or produce failed)")
		}
		return
	}
	if !scen.Run(scen.StepConsume, r.consume) {
		for _, s := range []string{stepKafkaView, scen.StepResume, scen.StepDescribe} {
			scen.Skip(s, "needs the checkpoints (consume failed)")
		}
		return
	}
	scen.Run(stepKafkaView, r.kafkaView)
	scen.Run(scen.StepResume, r.resume)
	scen.Run(scen.StepDescribe, r.describe)
}

// create: CreateStream (3 partitions, COMMON, BLOB), ShowStream has 3
// ACTIVE partitions.
func (r *disGoRun) create() (string, error) {
	_, err := r.c.CreateStream(&model.CreateStreamRequest{Body: &model.CreateStreamReq{
		StreamName: r.stream, PartitionCount: scen.Partitions,
		StreamType: ptr(model.GetCreateStreamReqStreamTypeEnum().COMMON),
		DataType:   ptr(model.GetCreateStreamReqDataTypeEnum().BLOB),
	}})
	if err != nil {
		return "", fmt.Errorf("CreateStream: %w", err)
	}
	st, err := r.c.ShowStream(&model.ShowStreamRequest{StreamName: r.stream})
	if err != nil {
		return "", fmt.Errorf("ShowStream: %w", err)
	}
	var active []string
	for _, p := range deref(st.Partitions) {
		if p.Status != nil && p.Status.Value() == "ACTIVE" {
			active = append(active, deref(p.PartitionId))
		}
	}
	if len(active) != scen.Partitions || active[0] != disPartitionID(0) || active[2] != disPartitionID(2) {
		return "", fmt.Errorf("ShowStream after CreateStream: ACTIVE partitions %v, want %d", active, scen.Partitions)
	}
	return fmt.Sprintf("CreateStream %s made %d partitions (ShowStream: %s, %s)", r.stream, scen.Partitions, st.Status.Value(), st.StreamType.Value()), nil
}

// produce: one SendRecords of 1,000 keyed records; none failed, all three
// partitions got some, each partition's sequence numbers 0, 1, 2, ... in
// the request's order.
func (r *disGoRun) produce() (string, error) {
	entries := make([]model.PutRecordsRequestEntry, scen.N)
	for i := range entries {
		entries[i] = model.PutRecordsRequestEntry{Data: base64.StdEncoding.EncodeToString([]byte(scen.Value(i))), PartitionKey: ptr(scen.Key(i))}
	}
	resp, err := r.c.SendRecords(&model.SendRecordsRequest{Body: &model.PutRecordsRequest{StreamName: r.stream, Records: entries}})
	if err != nil {
		return "", fmt.Errorf("SendRecords: %w", err)
	}
	res := deref(resp.Records)
	if n := deref(resp.FailedRecordCount); n != 0 || len(res) != scen.N {
		return "", fmt.Errorf("SendRecords: %d failed, %d results for %d records", n, len(res), scen.N)
	}
	r.where, r.ends = map[string][2]int64{}, map[int32]int64{}
	for i, e := range res {
		p, err := disParsePartition(deref(e.PartitionId))
		if err != nil || p < 0 || p >= scen.Partitions {
			return "", fmt.Errorf("SendRecords: record %d answered partition %q", i, deref(e.PartitionId))
		}
		sn, err := strconv.ParseInt(deref(e.SequenceNumber), 10, 64)
		if err != nil || sn != r.ends[p] {
			return "", fmt.Errorf("SendRecords: record %d got %s@%q, want sequence number %d (0, 1, 2, ... per partition)", i, deref(e.PartitionId), deref(e.SequenceNumber), r.ends[p])
		}
		r.ends[p] = sn + 1
		r.where[scen.Key(i)] = [2]int64{int64(p), sn}
	}
	if len(r.ends) != scen.Partitions {
		return "", fmt.Errorf("SendRecords: the keys went to %d partitions, want %d", len(r.ends), scen.Partitions)
	}
	return fmt.Sprintf("SendRecords of %d keyed records, none failed, %s", scen.N, scen.FmtOffsets(r.ends)), nil
}

// checkRecord checks one read record against what SendRecords answered
// and that its key was not read before.
func (r *disGoRun) checkRecord(p int32, rec model.Record, seen map[string]bool) (int64, error) {
	sn, err := strconv.ParseInt(deref(rec.SequenceNumber), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("p%d: sequence number %q: %v", p, deref(rec.SequenceNumber), err)
	}
	k := deref(rec.PartitionKey)
	i, err := scen.Index(k)
	if err != nil {
		return 0, fmt.Errorf("p%d@%d: %v", p, sn, err)
	}
	data, err := base64.StdEncoding.DecodeString(deref(rec.Data))
	if err != nil || string(data) != scen.Value(i) {
		return 0, fmt.Errorf("p%d@%d: key %s has data %q (%v), want %q", p, sn, k, data, err, scen.Value(i))
	}
	if w := r.where[k]; w != [2]int64{int64(p), sn} {
		return 0, fmt.Errorf("p%d@%d: key %s, which SendRecords put at p%d@%d", p, sn, k, w[0], w[1])
	}
	if seen[k] {
		return 0, fmt.Errorf("key %s read twice (p%d@%d)", k, p, sn)
	}
	seen[k] = true
	return sn, nil
}

func (r *disGoRun) cursor(p int32, typ model.ShowCursorRequestCursorType, at *string) (string, error) {
	resp, err := r.c.ShowCursor(&model.ShowCursorRequest{StreamName: r.stream, PartitionId: disPartitionID(p), CursorType: &typ, StartingSequenceNumber: at})
	if err != nil {
		return "", fmt.Errorf("ShowCursor p%d %s: %w", p, typ.Value(), err)
	}
	return deref(resp.PartitionCursor), nil
}

func (r *disGoRun) read(cur string) ([]model.Record, string, error) {
	resp, err := r.c.ConsumeRecords(&model.ConsumeRecordsRequest{PartitionCursor: cur, MaxFetchBytes: ptr(int32(disReadBytes))})
	if err != nil {
		return nil, "", fmt.Errorf("ConsumeRecords: %w", err)
	}
	return deref(resp.Records), deref(resp.NextPartitionCursor), nil
}

func (r *disGoRun) commit(p int32, sn int64) error {
	_, err := r.c.CommitCheckpoint(&model.CommitCheckpointRequest{Body: &model.CommitCheckpointReq{
		AppName: r.app, CheckpointType: model.GetCommitCheckpointReqCheckpointTypeEnum().LAST_READ,
		StreamName: r.stream, PartitionId: disPartitionID(p), SequenceNumber: strconv.FormatInt(sn, 10),
	}})
	if err != nil {
		return fmt.Errorf("CommitCheckpoint p%d %d: %w", p, sn, err)
	}
	return nil
}

// checkpoint is ShowCheckpoint's sequence number of partition p (-1: none).
func (r *disGoRun) checkpoint(p int32) (int64, error) {
	resp, err := r.c.ShowCheckpoint(&model.ShowCheckpointRequest{StreamName: r.stream, PartitionId: disPartitionID(p), AppName: r.app,
		CheckpointType: model.GetShowCheckpointRequestCheckpointTypeEnum().LAST_READ})
	if err != nil {
		return 0, fmt.Errorf("ShowCheckpoint p%d: %w", p, err)
	}
	if resp.SequenceNumber == nil {
		return -1, nil
	}
	return strconv.ParseInt(*resp.SequenceNumber, 10, 64)
}

func (r *disGoRun) checkpoints() (map[int32]int64, error) {
	out := map[int32]int64{}
	for p := int32(0); p < scen.Partitions; p++ {
		sn, err := r.checkpoint(p)
		if err != nil {
			return nil, err
		}
		out[p] = sn
	}
	return out, nil
}

// consume: CreateApp (the group); TRIM_HORIZON cursors; ConsumeRecords
// (max_fetch_bytes 1000: 100 records) of each partition in turn until 500
// records are processed; CommitCheckpoint LAST_READ of each partition's
// next sequence number.
func (r *disGoRun) consume() (string, error) {
	if _, err := r.c.CreateApp(&model.CreateAppRequest{Body: &model.CreateAppReq{AppName: r.app}}); err != nil {
		return "", fmt.Errorf("CreateApp %s: %w", r.app, err)
	}
	curs := map[int32]string{}
	for p := int32(0); p < scen.Partitions; p++ {
		cur, err := r.cursor(p, model.GetShowCursorRequestCursorTypeEnum().TRIM_HORIZON, nil)
		if err != nil {
			return "", err
		}
		curs[p] = cur
	}
	r.first, r.committed = map[string]bool{}, map[int32]int64{}
	done := 0
	for done < scen.Half {
		progressed := false
		for p := int32(0); p < scen.Partitions && done < scen.Half; p++ {
			recs, next, err := r.read(curs[p])
			if err != nil {
				return "", err
			}
			curs[p] = next
			for _, rec := range recs {
				if done >= scen.Half {
					break // read, not processed: the checkpoint stays before it
				}
				sn, err := r.checkRecord(p, rec, r.first)
				if err != nil {
					return "", err
				}
				if sn != r.committed[p] {
					return "", fmt.Errorf("p%d: read sequence number %d, want %d (from TRIM_HORIZON, no gap)", p, sn, r.committed[p])
				}
				r.committed[p] = sn + 1
				done++
				progressed = true
			}
		}
		if !progressed {
			return "", fmt.Errorf("ConsumeRecords returned nothing more after %d of %d records", done, scen.Half)
		}
	}
	for p, sn := range r.committed {
		if err := r.commit(p, sn); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("CreateApp %s, ConsumeRecords processed %d records, CommitCheckpoint LAST_READ %s", r.app, done, scen.FmtOffsets(r.committed)), nil
}

// kafkaView: through disgw, kadm FetchOffsets of the group equals the
// checkpoints the consume step committed (the next sequence number is the
// Kafka committed offset, no ±1); kadm CommitOffsets of other offsets
// (disKafkaShift lower) is what ShowCheckpoint reads; the committed ones
// committed back through kadm read back as well.
func (r *disGoRun) kafkaView() (string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.broker))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	fetched, err := adm.FetchOffsets(ctx, r.group)
	if err == nil {
		err = fetched.Error()
	}
	if err != nil {
		return "", fmt.Errorf("kadm FetchOffsets %s: %w", r.group, err)
	}
	kafka := map[int32]int64{}
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.Topic == r.topic {
			kafka[o.Partition] = o.At
		}
	})
	if scen.FmtOffsets(kafka) != scen.FmtOffsets(r.committed) {
		return "", fmt.Errorf("kadm FetchOffsets of %s through disgw: %s, the SDK's CommitCheckpoint: %s", r.group, scen.FmtOffsets(kafka), scen.FmtOffsets(r.committed))
	}
	commitAndRead := func(want map[int32]int64) error {
		offs := kadm.Offsets{}
		for p, o := range want {
			offs.Add(kadm.Offset{Topic: r.topic, Partition: p, At: o, LeaderEpoch: -1})
		}
		resp, err := adm.CommitOffsets(ctx, r.group, offs)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return fmt.Errorf("kadm CommitOffsets %s: %w", scen.FmtOffsets(want), err)
		}
		got, err := r.checkpoints()
		if err != nil {
			return err
		}
		if scen.FmtOffsets(got) != scen.FmtOffsets(want) {
			return fmt.Errorf("kadm CommitOffsets %s through disgw, the SDK's ShowCheckpoint reads %s", scen.FmtOffsets(want), scen.FmtOffsets(got))
		}
		return nil
	}
	shifted := map[int32]int64{}
	for p, o := range r.committed {
		shifted[p] = o - disKafkaShift
	}
	for p := int32(0); p < scen.Partitions; p++ {
		if _, ok := shifted[p]; !ok {
			return "", fmt.Errorf("p%d: the consume step committed no checkpoint", p)
		}
	}
	if err := commitAndRead(shifted); err != nil {
		return "", err
	}
	if err := commitAndRead(r.committed); err != nil {
		return "", fmt.Errorf("committing back: %w", err)
	}
	return fmt.Sprintf("kadm FetchOffsets through disgw = CommitCheckpoint %s; kadm CommitOffsets %s, then %s, each read back by ShowCheckpoint",
		scen.FmtOffsets(kafka), scen.FmtOffsets(shifted), scen.FmtOffsets(r.committed)), nil
}

// resume: a fresh client reads ShowCheckpoint of each partition, reads
// from AT_SEQUENCE_NUMBER there to the end, and commits the end.
func (r *disGoRun) resume() (string, error) {
	c, err := newDISGoClient()
	if err != nil {
		return "", err
	}
	fresh := *r
	fresh.c = c
	seen := map[string]bool{}
	for k := range r.first {
		seen[k] = true
	}
	starts, read := map[int32]int64{}, 0
	for p := int32(0); p < scen.Partitions; p++ {
		cp, err := fresh.checkpoint(p)
		if err != nil {
			return "", err
		}
		if cp != r.committed[p] {
			return "", fmt.Errorf("p%d: ShowCheckpoint %d, committed %d", p, cp, r.committed[p])
		}
		starts[p] = cp
		cur, err := fresh.cursor(p, model.GetShowCursorRequestCursorTypeEnum().AT_SEQUENCE_NUMBER, ptr(strconv.FormatInt(cp, 10)))
		if err != nil {
			return "", err
		}
		next := cp
		for {
			recs, nc, err := fresh.read(cur)
			if err != nil {
				return "", err
			}
			if len(recs) == 0 {
				break
			}
			cur = nc
			for _, rec := range recs {
				sn, err := fresh.checkRecord(p, rec, seen)
				if err != nil {
					return "", err
				}
				if sn != next {
					return "", fmt.Errorf("p%d: read sequence number %d, want %d (from the checkpoint, no gap)", p, sn, next)
				}
				next++
				read++
			}
		}
		if next != r.ends[p] {
			return "", fmt.Errorf("p%d: read to %d, SendRecords put %d there", p, next, r.ends[p])
		}
		if err := fresh.commit(p, next); err != nil {
			return "", err
		}
	}
	for i := 0; i < scen.N; i++ {
		if !seen[scen.Key(i)] {
			return "", fmt.Errorf("record %s read by neither client", scen.Key(i))
		}
	}
	return fmt.Sprintf("fresh client resumed at ShowCheckpoint %s and read the other %d records; committed the end", scen.FmtOffsets(starts), read), nil
}

// describe: ShowStream's sequence_number_range of each partition ends at
// its end, and ShowCheckpoint equals it.
func (r *disGoRun) describe() (string, error) {
	st, err := r.c.ShowStream(&model.ShowStreamRequest{StreamName: r.stream})
	if err != nil {
		return "", fmt.Errorf("ShowStream: %w", err)
	}
	hi := map[int32]int64{}
	for _, p := range deref(st.Partitions) {
		n, err := disParsePartition(deref(p.PartitionId))
		if err != nil {
			return "", err
		}
		rng := strings.Trim(deref(p.SequenceNumberRange), "[]")
		_, end, _ := strings.Cut(rng, ":")
		if hi[n], err = strconv.ParseInt(strings.TrimSpace(end), 10, 64); err != nil {
			return "", fmt.Errorf("p%d: sequence_number_range %q", n, deref(p.SequenceNumberRange))
		}
	}
	if scen.FmtOffsets(hi) != scen.FmtOffsets(r.ends) {
		return "", fmt.Errorf("ShowStream sequence_number_range ends %s, SendRecords put %s", scen.FmtOffsets(hi), scen.FmtOffsets(r.ends))
	}
	cps, err := r.checkpoints()
	if err != nil {
		return "", err
	}
	if scen.FmtOffsets(cps) != scen.FmtOffsets(r.ends) {
		return "", fmt.Errorf("ShowCheckpoint %s, end %s", scen.FmtOffsets(cps), scen.FmtOffsets(r.ends))
	}
	return fmt.Sprintf("ShowStream ranges end at %s = ShowCheckpoint", scen.FmtOffsets(hi)), nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
