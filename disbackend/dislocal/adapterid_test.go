package dislocal

import (
	"encoding/base64"
	"fmt"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
	"github.com/disgw/disgw/disbackend/dislocal/disproto"
)

// The DIS Kafka Adapter on Maven Central is 1.2.2, older than ID
// subscriptions (adapter 1.2.19, on the Java SDK 1.3.19+), so no compat row
// can run one. TestAdapterConsumesByStreamID sends instead exactly what the
// adapter's current source sends (huaweicloud-dis-kafka-adapter at d9154bf,
// 1.2.20, over huaweicloud-sdk-java-dis 1.3.21 in JSON mode) when a
// DISKafkaConsumer subscribes by id (subscribe(null, [id])) with group.id
// g and auto.offset.reset=earliest, polls and commits, and what its
// DISKafkaProducer sends for a ProducerRecord with only a streamId:
//
//   - AutoCreateAppTask: DescribeApp, then CreateApp on DIS.4332;
//   - the first Heartbeat (generation -1), JoinGroup with
//     interestedStreamIdList [id] and interestedStream [] (the subscription
//     less the ids), SyncGroup after syncDelayedTimeMs, Heartbeat until
//     STABLE (Coordinator.HeartbeatDelayedRequest, doJoinGroup,
//     doSyncGroup); the assignment is keyed by the id, and each partition
//     becomes StreamPartition("", p, id);
//   - getSubscribeStreamPartitionCount: a DescribeStreamRequest with only
//     streamId, which the SDK sends as GET /v2/{pid}/streams/ (no name in
//     the path) with stream_id and limit_partitions;
//   - refreshCommittedOffsetsIfNeeded: GetCheckpoint with stream_id only;
//   - resetOffsetByTopic, per partition: DescribeStream with the id as
//     path and stream_name, and stream_id, start_partitionId the previous
//     partition ("" for 0), limit_partitions 100;
//   - seek: GetCursor with stream-name "" and stream-id, no cursor-type;
//   - Fetcher: GetRecords with partition-cursor and app_name;
//   - commit: CommitCheckpoint with stream_id only, client_id and
//     generation_id, metadata "".
//
// The Java SDK sends a GET's or DELETE's request object as its query (null
// fields left out, "" kept), and every path ends with "/".
func TestAdapterConsumesByStreamID(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	_, hs := startServer(t, Options{Now: clk.Now})
	createStream(t, hs, "orders", 2)
	id := streamIDOf(t, hs, "orders")
	a := &adapterClient{t: t, hs: hs, app: "g", id: id}

	// DISKafkaProducer.send(new ProducerRecord(null, id, p, ts, key, value)).
	a.produce(0, "k0", "a", "b", "c")
	a.produce(1, "k1", "d", "e")

	// The consumer's first poll: the app, then the group.
	st, m := a.send("GET", "/v2/p/apps/g/", nil)
	wantCode(t, st, m, 400, disapi.CodeAppNotFound)
	st, m = a.send("POST", "/v2/p/apps/", map[string]any{"app_name": "g"})
	mustStatus(t, st, m, 201)
	c1 := "consumer-1"
	gen := a.joinByID(clk, c1)
	if gen != 1 {
		t.Fatalf("first generation %d, want 1", gen)
	}

	// Positions: no checkpoint, so the earliest of each partition.
	want := map[int][]string{0: {"a", "b", "c"}, 1: {"d", "e"}}
	for p := range 2 {
		if sn := a.checkpoint(p); sn != "-1" {
			t.Fatalf("partition %d: checkpoint %s before any commit, want -1", p, sn)
		}
		first, next := a.describeForReset(p)
		if first != 0 || next != int64(len(want[p])) {
			t.Fatalf("partition %d: range [%d : %d], want [0 : %d]", p, first, next, len(want[p]))
		}
		cur := a.cursor(p, first)
		got, nextCursor := a.records(cur, false)
		if len(got) != len(want[p]) {
			t.Fatalf("partition %d: read %v, want %v", p, got, want[p])
		}
		for i, r := range got {
			if r.data != want[p][i] || r.sn != strconv.Itoa(i) || r.key != "k"+strconv.Itoa(p) {
				t.Fatalf("partition %d record %d: %+v, want %s at %d with key k%d", p, i, r, want[p][i], i, p)
			}
		}
		if more, _ := a.records(nextCursor, false); len(more) != 0 {
			t.Fatalf("partition %d: the next cursor read %v, want nothing yet", p, more)
		}
		// Auto-commit: the position, the next sequence number to read.
		a.commit(p, next, c1, gen, 201, "")
		if sn := a.checkpoint(p); sn != strconv.FormatInt(next, 10) {
			t.Fatalf("partition %d: checkpoint %s after the commit, want %d", p, sn, next)
		}
	}

	// The consumer stops without leaving (close() sends no LeaveGroup);
	// more records come; a new consumer of the group takes over once the
	// first one's session has expired, resumes at the checkpoints, and the
	// old member's late commit is refused.
	a.produce(0, "k0", "f", "g")
	clk.Advance(DefaultGroupSessionTimeout + time.Second)
	c2 := "consumer-2"
	gen2 := a.joinByID(clk, c2)
	a.commit(0, 4, c1, gen, 400, disapi.CodeGroupMemberNotFound)
	for p, rest := range map[int][]string{0: {"f", "g"}, 1: {}} {
		sn, err := strconv.ParseInt(a.checkpoint(p), 10, 64)
		if err != nil || sn != int64(len(want[p])) {
			t.Fatalf("partition %d: checkpoint %d (%v), want %d", p, sn, err, len(want[p]))
		}
		got, _ := a.records(a.cursor(p, sn), true) // body.serialize.type=protobuf
		if len(got) != len(rest) {
			t.Fatalf("partition %d: resumed with %v, want %v", p, got, rest)
		}
		for i, r := range got {
			if r.data != rest[i] || r.sn != strconv.FormatInt(sn+int64(i), 10) {
				t.Fatalf("partition %d: resumed with %+v, want %s at %d", p, r, rest[i], sn+int64(i))
			}
		}
		a.commit(p, sn+int64(len(rest)), c2, gen2, 201, "")
	}
	if sn := a.checkpoint(0); sn != "5" {
		t.Fatalf("partition 0: checkpoint %s, want 5", sn)
	}
}

// adapterClient sends the requests of the DIS Kafka Adapter and its Java
// SDK for one app and one stream subscribed by id.
type adapterClient struct {
	t   *testing.T
	hs  *httptest.Server
	app string
	id  string
}

// send is one SDK request, with the Java SDK's JSON Content-Type.
func (a *adapterClient) send(method, path string, body any) (int, map[string]any) {
	a.t.Helper()
	return call(a.t, a.hs, method, path, body, "Content-Type", "application/json; charset=utf-8", "accept", "*/*; charset=utf-8")
}

// produce is DISKafkaProducer.send of one ProducerRecord per value with a
// streamId and no topic: stream_name is null, so left out.
func (a *adapterClient) produce(p int, key string, values ...string) {
	a.t.Helper()
	for _, v := range values {
		st, m := a.send("POST", "/v2/p/records/", map[string]any{"stream_id": a.id, "records": []map[string]any{{
			"data": base64.StdEncoding.EncodeToString([]byte(v)), "partition_id": strconv.Itoa(p), "partition_key": key, "timestamp": 1700000000000,
		}}})
		mustStatus(a.t, st, m, 200)
		if m["failed_record_count"] != 0.0 {
			a.t.Fatalf("produce %s: %v", v, m)
		}
	}
}

// joinByID runs the adapter's group cycle for a member subscribed to the
// stream by id until its heartbeat answers STABLE, sleeping (on the fake
// clock) the syncDelayedTimeMs it is told; it checks the assignment (every
// partition of the stream, keyed by the id) and the adapter's describe of
// the subscription, and returns the generation.
func (a *adapterClient) joinByID(clk *fakeClock, client string) int64 {
	a.t.Helper()
	consumers := "/v2/p/apps/" + a.app + "/consumers/"
	hb := func(gen int64) string {
		st, m := a.send("POST", consumers+client+"/heartbeats/", map[string]any{"clientId": client, "groupId": a.app, "generation": gen})
		mustStatus(a.t, st, m, 200)
		return m["state"].(string)
	}
	if s := hb(-1); s != "JOINING" {
		a.t.Fatalf("%s: first heartbeat %s, want JOINING", client, s)
	}
	st, m := a.send("POST", consumers, map[string]any{"clientId": client, "groupId": a.app, "accelerateAssignEnabled": false,
		"rebalanceTimeoutMs": 20000, "interestedStreamIdList": []string{a.id}, "interestedStream": []string{}})
	mustStatus(a.t, st, m, 200)
	if sub := asSlice(m["subscription"]); m["state"] != "OK" || len(sub) != 1 || sub[0] != a.id {
		a.t.Fatalf("%s: JoinGroup %v, want OK with subscription [%s]", client, m, a.id)
	}
	clk.Advance(time.Duration(m["syncDelayedTimeMs"].(float64)) * time.Millisecond)
	st, m = a.send("POST", consumers+client+"/partitions/", map[string]any{"clientId": client, "groupId": a.app, "generation": -1})
	mustStatus(a.t, st, m, 200)
	assignment, _ := m["assignment"].(map[string]any)
	ps := asSlice(assignment[a.id])
	if m["state"] != "OK" || len(assignment) != 1 || len(ps) != 2 || ps[0] != 0.0 || ps[1] != 1.0 {
		a.t.Fatalf("%s: SyncGroup %v, want OK with {%s: [0, 1]}", client, m, a.id)
	}
	gen := int64(m["generation"].(float64))
	if s := hb(gen); s != "STABLE" {
		a.t.Fatalf("%s: heartbeat %s at generation %d, want STABLE", client, s, gen)
	}
	// getSubscribeStreamPartitionCount: a describe by id alone reaches
	// ListStreams' path; the adapter reads readable_partition_count (absent,
	// so 0) into a map it consults only under the partitions' (empty)
	// stream names: it must only not fail.
	st, m = a.send("GET", "/v2/p/streams/?"+query("limit_partitions", "1", "stream_id", a.id), nil)
	mustStatus(a.t, st, m, 200)
	return gen
}

// checkpoint is refreshCommittedOffsetsIfNeeded's GetCheckpoint of
// partition p: its sequence_number ("-1" when none).
func (a *adapterClient) checkpoint(p int) string {
	a.t.Helper()
	st, m := a.send("GET", "/v2/p/checkpoints/?"+query("partition_id", shardID(p), "checkpoint_type", "LAST_READ", "app_name", a.app, "stream_id", a.id), nil)
	mustStatus(a.t, st, m, 200)
	return m["sequence_number"].(string)
}

// describeForReset is resetOffsetByTopic's DescribeStream of partition p:
// the range of the answer's partition p (the first one listed).
func (a *adapterClient) describeForReset(p int) (first, next int64) {
	a.t.Helper()
	start := ""
	if p > 0 {
		start = shardID(p - 1)
	}
	st, m := a.send("GET", "/v2/p/streams/"+a.id+"/?"+query("stream_name", a.id, "start_partitionId", start, "limit_partitions", "100", "stream_id", a.id), nil)
	mustStatus(a.t, st, m, 200)
	ps := partitions(m)
	if m["stream_id"] != a.id || len(ps) == 0 || ps[0]["partition_id"] != shardID(p) {
		a.t.Fatalf("describe for partition %d: %v", p, m)
	}
	r, _ := ps[0]["sequence_number_range"].(string)
	var f, n int64
	if _, err := fmt.Sscanf(r, "[%d : %d]", &f, &n); err != nil {
		a.t.Fatalf("partition %d: sequence_number_range %q: %v", p, r, err)
	}
	return f, n
}

// cursor is seek's GetCursor at sn.
func (a *adapterClient) cursor(p int, sn int64) string {
	a.t.Helper()
	st, m := a.send("GET", "/v2/p/cursors/?"+query("stream-name", "", "stream-id", a.id, "partition-id", shardID(p), "starting-sequence-number", strconv.FormatInt(sn, 10)), nil)
	mustStatus(a.t, st, m, 200)
	return m["partition_cursor"].(string)
}

// adapterRecord is what DISKafkaConsumer.poll makes of a record.
type adapterRecord struct{ sn, key, data string }

// records is the Fetcher's GetRecords, in JSON or (pb) protobuf.
func (a *adapterClient) records(cursor string, pb bool) ([]adapterRecord, string) {
	a.t.Helper()
	path := "/v2/p/records/?" + query("partition-cursor", cursor, "app_name", a.app)
	var out []adapterRecord
	if pb {
		st, ct, body := rawCall(a.t, a.hs, "GET", path, nil, "Content-Type", sdkProtobufContentType)
		res := wantProtoAnswer[disproto.GetRecordsResult](a.t, st, ct, body)
		for _, r := range res.Records {
			out = append(out, adapterRecord{r.GetSequenceNumber(), r.GetPartitionKey(), string(r.Data)})
		}
		return out, res.GetNextShardIterator()
	}
	st, m := a.send("GET", path, nil)
	mustStatus(a.t, st, m, 200)
	for _, v := range asSlice(m["records"]) {
		r := v.(map[string]any)
		data, _ := base64.StdEncoding.DecodeString(r["data"].(string))
		key, _ := r["partition_key"].(string)
		out = append(out, adapterRecord{r["sequence_number"].(string), key, string(data)})
	}
	return out, m["next_partition_cursor"].(string)
}

// commit is the Coordinator's CommitCheckpoint of partition p at sn by a
// group member, wanting status (and code when an error).
func (a *adapterClient) commit(p int, sn int64, client string, gen int64, status int, code string) {
	a.t.Helper()
	st, m := a.send("POST", "/v2/p/checkpoints/", map[string]any{"app_name": a.app, "checkpoint_type": "LAST_READ",
		"partition_id": shardID(p), "sequence_number": strconv.FormatInt(sn, 10), "metadata": "",
		"client_id": client, "generation_id": gen, "stream_id": a.id})
	if code != "" {
		wantCode(a.t, st, m, status, code)
		return
	}
	mustStatus(a.t, st, m, status)
}

func shardID(p int) string { return disbackend.PartitionID(int32(p)) }
