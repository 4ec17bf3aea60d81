package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The answers below are those of a one-node Apache Kafka 4.4 (node id 1,
// KRaft) to the same requests, with its node id replaced by the gateway's
// (0): topics admin-t1, admin-t3 and admin-t5 of 1, 3 and 5 partitions.

const (
	// Kafka 4.4 with no authorizer: every operation of the resource type.
	wantTopicOps   = 3576
	wantClusterOps = 8096
	notRequested   = math.MinInt32
)

// adminTopics creates t1, t3 and t5 (1, 3 and 5 partitions) and returns
// their names.
func adminTopics(t *testing.T, g *testGateway) (t1, t3, t5 string) {
	t.Helper()
	adm := kadm.NewClient(g.client(t))
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		n    int32
	}{{"admin-t1", 1}, {"admin-t3", 3}, {"admin-t5", 5}} {
		resp, err := adm.CreateTopic(ctx, tc.n, 1, nil, tc.name)
		if err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", tc.name, err, resp.Err)
		}
	}
	return "admin-t1", "admin-t3", "admin-t5"
}

func TestMetadataAuthorizedOperations(t *testing.T) {
	g := startGateway(t)
	t1, _, _ := adminTopics(t, g)
	raw := g.raw(t)
	for _, v := range []int16{8, 10, 11, 13} {
		for _, asked := range []bool{true, false} {
			t.Run(fmt.Sprintf("v%d/asked=%v", v, asked), func(t *testing.T) {
				req := kmsg.NewMetadataRequest()
				for _, n := range []string{t1, "admin-nosuch", "bad name!"} {
					rt := kmsg.NewMetadataRequestTopic()
					rt.Topic = kmsg.StringPtr(n)
					req.Topics = append(req.Topics, rt)
				}
				req.IncludeClusterAuthorizedOperations = asked
				req.IncludeTopicAuthorizedOperations = asked
				resp := raw.roundTrip(v, &req).(*kmsg.MetadataResponse)
				wantCluster, wantTopic := int32(notRequested), int32(notRequested)
				if asked {
					wantTopic = wantTopicOps
					if v <= 10 { // the cluster field is gone from v11 (KIP-700)
						wantCluster = wantClusterOps
					}
				}
				if resp.AuthorizedOperations != wantCluster {
					t.Errorf("cluster ops %d, want %d", resp.AuthorizedOperations, wantCluster)
				}
				if len(resp.Topics) != 3 {
					t.Fatalf("%d topics", len(resp.Topics))
				}
				// Kafka sets them on unknown and invalid topics too.
				for _, rt := range resp.Topics {
					if rt.AuthorizedOperations != wantTopic {
						t.Errorf("topic %s (error %d) ops %d, want %d", *rt.Topic, rt.ErrorCode, rt.AuthorizedOperations, wantTopic)
					}
				}
			})
		}
	}
}

func TestDescribeCluster(t *testing.T) {
	g := startGateway(t)
	raw := g.raw(t)
	md := raw.roundTrip(12, kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	for _, v := range []int16{0, 1, 2} {
		for _, asked := range []bool{true, false} {
			t.Run(fmt.Sprintf("v%d/asked=%v", v, asked), func(t *testing.T) {
				req := kmsg.NewDescribeClusterRequest()
				req.IncludeClusterAuthorizedOperations = asked
				req.IncludeFencedBrokers = true
				resp := raw.roundTrip(v, &req).(*kmsg.DescribeClusterResponse)
				if resp.ErrorCode != 0 || resp.ErrorMessage != nil {
					t.Fatalf("error %d %v", resp.ErrorCode, resp.ErrorMessage)
				}
				if md.ClusterID == nil || resp.ClusterID != *md.ClusterID || resp.ClusterID == "" {
					t.Errorf("cluster id %q, Metadata's %v", resp.ClusterID, md.ClusterID)
				}
				if resp.ControllerID != 0 || resp.EndpointType != 1 {
					t.Errorf("controller %d endpoint type %d", resp.ControllerID, resp.EndpointType)
				}
				want := kmsg.NewDescribeClusterResponseBroker()
				want.NodeID, want.Host, want.Port = 0, md.Brokers[0].Host, md.Brokers[0].Port
				if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != want.NodeID || resp.Brokers[0].Host != want.Host ||
					resp.Brokers[0].Port != want.Port || resp.Brokers[0].IsFenced || resp.Brokers[0].Rack != nil {
					t.Errorf("brokers %+v, want [%+v]", resp.Brokers, want)
				}
				wantOps := int32(notRequested)
				if asked {
					wantOps = wantClusterOps
				}
				if resp.ClusterAuthorizedOperations != wantOps {
					t.Errorf("ops %d, want %d", resp.ClusterAuthorizedOperations, wantOps)
				}
			})
		}
	}
	for _, tc := range []struct {
		endpoint int8
		code     int16
		msg      string
	}{
		{2, kerr.MismatchedEndpointType.Code, "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"},
		{3, kerr.UnsupportedEndpointType.Code, "Unsupported endpoint type 3"},
	} {
		for _, v := range []int16{1, 2} {
			req := kmsg.NewDescribeClusterRequest()
			req.EndpointType = tc.endpoint
			req.IncludeClusterAuthorizedOperations = true
			resp := raw.roundTrip(v, &req).(*kmsg.DescribeClusterResponse)
			if resp.ErrorCode != tc.code || resp.ErrorMessage == nil || *resp.ErrorMessage != tc.msg ||
				resp.ClusterID != "" || resp.ControllerID != -1 || len(resp.Brokers) != 0 ||
				resp.ClusterAuthorizedOperations != notRequested {
				t.Errorf("v%d endpoint type %d: %+v", v, tc.endpoint, resp)
			}
		}
	}

	// kadm reads the cluster through Metadata; DescribeCluster's id must
	// be the one it sees.
	m, err := kadm.NewClient(g.client(t)).BrokerMetadata(context.Background())
	if err != nil || m.Cluster != *md.ClusterID || m.Controller != 0 {
		t.Errorf("kadm broker metadata: %v %q %d", err, m.Cluster, m.Controller)
	}
}

func TestElectLeaders(t *testing.T) {
	g := startGateway(t)
	t1, t3, t5 := adminTopics(t, g)
	raw := g.raw(t)
	notNeeded := func(p int32) kmsg.ElectLeadersResponseTopicPartition {
		return elPart(p, kerr.ElectionNotNeeded.Code, "Leader election not needed for topic partition.")
	}
	for _, v := range []int16{0, 1, 2} {
		for _, et := range []int8{0, 1} {
			if v == 0 && et == 1 {
				continue // v0 has no election type
			}
			t.Run(fmt.Sprintf("v%d/type=%d", v, et), func(t *testing.T) {
				req := kmsg.NewElectLeadersRequest()
				req.ElectionType = et
				req.TimeoutMillis = 5000
				req.Topics = []kmsg.ElectLeadersRequestTopic{
					{Topic: t3, Partitions: []int32{0, 2, 7, -1}},
					{Topic: "admin-nosuch", Partitions: []int32{0}},
				}
				resp := raw.roundTrip(v, &req).(*kmsg.ElectLeadersResponse)
				want := []kmsg.ElectLeadersResponseTopic{
					{Topic: t3, Partitions: []kmsg.ElectLeadersResponseTopicPartition{
						notNeeded(0), notNeeded(2),
						elPart(7, 3, "No such partition as admin-t3-7"),
						elPart(-1, 3, "No such partition as admin-t3--1"),
					}},
					{Topic: "admin-nosuch", Partitions: []kmsg.ElectLeadersResponseTopicPartition{
						elPart(0, 3, "No such topic as admin-nosuch"),
					}},
				}
				if resp.ErrorCode != 0 || !sameElect(resp.Topics, want) {
					t.Errorf("got %d %+v\nwant %+v", resp.ErrorCode, resp.Topics, want)
				}

				// Null topics: every topic, no partition needs an election;
				// Kafka lists its __consumer_offsets too (the harness
				// kafka-diff checks it against Kafka 4.4).
				req.Topics = nil
				resp = raw.roundTrip(v, &req).(*kmsg.ElectLeadersResponse)
				want = []kmsg.ElectLeadersResponseTopic{{Topic: t1}, {Topic: t3}, {Topic: t5}, {Topic: "__consumer_offsets"}}
				if resp.ErrorCode != 0 || !sameElect(resp.Topics, want) {
					t.Errorf("all: got %+v, want %+v", resp.Topics, want)
				}

				// An empty list: nothing; a topic twice without partitions:
				// twice, with no partitions.
				req.Topics = []kmsg.ElectLeadersRequestTopic{}
				if resp = raw.roundTrip(v, &req).(*kmsg.ElectLeadersResponse); len(resp.Topics) != 0 {
					t.Errorf("empty list: %+v", resp.Topics)
				}
				req.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: t1}, {Topic: t1}}
				resp = raw.roundTrip(v, &req).(*kmsg.ElectLeadersResponse)
				if want = []kmsg.ElectLeadersResponseTopic{{Topic: t1}, {Topic: t1}}; !sameElect(resp.Topics, want) {
					t.Errorf("twice: %+v", resp.Topics)
				}
			})
		}
	}
	req := kmsg.NewElectLeadersRequest()
	req.ElectionType = 5
	if resp := raw.roundTrip(2, &req).(*kmsg.ElectLeadersResponse); resp.ErrorCode != kerr.InvalidRequest.Code || len(resp.Topics) != 0 {
		t.Errorf("election type 5: %+v", resp)
	}

	// kadm, as kafka-leader-election's callers use it.
	adm := kadm.NewClient(g.client(t))
	ctx := context.Background()
	res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{t3: {0: {}, 1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		if r := res[t3][p]; !errors.Is(r.Err, kerr.ElectionNotNeeded) {
			t.Errorf("kadm %s/%d: %+v", t3, p, r)
		}
	}
	if _, err := adm.ElectLeaders(ctx, kadm.ElectLiveReplica, nil); err != nil {
		t.Errorf("kadm every partition: %v", err)
	}
}

func elPart(p int32, code int16, msg string) kmsg.ElectLeadersResponseTopicPartition {
	return kmsg.ElectLeadersResponseTopicPartition{Partition: p, ErrorCode: code, ErrorMessage: kmsg.StringPtr(msg)}
}

func sameElect(got, want []kmsg.ElectLeadersResponseTopic) bool {
	return slices.EqualFunc(got, want, func(a, b kmsg.ElectLeadersResponseTopic) bool {
		return a.Topic == b.Topic && slices.EqualFunc(a.Partitions, b.Partitions, func(x, y kmsg.ElectLeadersResponseTopicPartition) bool {
			return x.Partition == y.Partition && x.ErrorCode == y.ErrorCode && *x.ErrorMessage == *y.ErrorMessage
		})
	})
}

func TestPartitionReassignments(t *testing.T) {
	g := startGateway(t)
	_, t3, _ := adminTopics(t, g)
	raw := g.raw(t)

	t.Run("list", func(t *testing.T) {
		for _, topics := range [][]kmsg.ListPartitionReassignmentsRequestTopic{
			nil, {}, {{Topic: t3, Partitions: []int32{0, 9}}, {Topic: "admin-nosuch", Partitions: []int32{0}}},
		} {
			req := kmsg.NewListPartitionReassignmentsRequest()
			req.Topics = topics
			resp := raw.roundTrip(0, &req).(*kmsg.ListPartitionReassignmentsResponse)
			if resp.ErrorCode != 0 || resp.ErrorMessage != nil || len(resp.Topics) != 0 {
				t.Errorf("topics %v: %+v", topics, resp)
			}
		}
	})

	const (
		noBroker = "The manual partition assignment includes broker %d, but no such broker is registered."
		twice    = "The manual partition assignment includes the broker %d more than once."
	)
	for _, v := range []int16{0, 1} {
		for _, tc := range []struct {
			name     string
			topic    string
			part     int32
			replicas []int32
			code     int16
			msg      string
		}{
			{"cancel", t3, 0, nil, kerr.NoReassignmentInProgress.Code, ""},
			{"self", t3, 0, []int32{0}, 0, ""},
			{"other", t3, 0, []int32{2}, 39, fmt.Sprintf(noBroker, 2)},
			{"self and other", t3, 0, []int32{0, 2}, 39, fmt.Sprintf(noBroker, 2)},
			{"ascending order", t3, 0, []int32{0, 0, -1}, 39, fmt.Sprintf(noBroker, -1)},
			{"twice", t3, 0, []int32{0, 0}, 39, fmt.Sprintf(twice, 0)},
			{"empty", t3, 0, []int32{}, 39, "The manual partition assignment includes an empty replica list."},
			{"unknown partition", t3, 9, []int32{0}, 3, "Unable to find partition admin-t3:9."},
			{"unknown partition cancel", t3, 9, nil, 3, "Unable to find partition admin-t3:9."},
			{"unknown topic", "admin-nosuch", 0, []int32{0}, 3, "Unable to find a topic named admin-nosuch."},
			{"unknown topic cancel", "admin-nosuch", 0, nil, 3, "Unable to find a topic named admin-nosuch."},
		} {
			t.Run(fmt.Sprintf("alter v%d/%s", v, tc.name), func(t *testing.T) {
				req := kmsg.NewAlterPartitionAssignmentsRequest()
				req.TimeoutMillis = 5000
				req.AllowReplicationFactorChange = false
				req.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{{Topic: tc.topic,
					Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: tc.part, Replicas: tc.replicas}}}}
				resp := raw.roundTrip(v, &req).(*kmsg.AlterPartitionAssignmentsResponse)
				if resp.ErrorCode != 0 || resp.ErrorMessage != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
					t.Fatalf("%+v", resp)
				}
				if v >= 1 && resp.AllowReplicationFactorChange {
					t.Errorf("AllowReplicationFactorChange not echoed")
				}
				p := resp.Topics[0].Partitions[0]
				msg := ""
				if p.ErrorMessage != nil {
					msg = *p.ErrorMessage
				}
				if resp.Topics[0].Topic != tc.topic || p.Partition != tc.part || p.ErrorCode != tc.code || msg != tc.msg ||
					(tc.msg == "") != (p.ErrorMessage == nil) {
					t.Errorf("got %s/%d %d %v, want %d %q", resp.Topics[0].Topic, p.Partition, p.ErrorCode, p.ErrorMessage, tc.code, tc.msg)
				}
			})
		}
		req := kmsg.NewAlterPartitionAssignmentsRequest()
		resp := raw.roundTrip(v, &req).(*kmsg.AlterPartitionAssignmentsResponse)
		if resp.ErrorCode != 0 || resp.ErrorMessage == nil || *resp.ErrorMessage != "" || len(resp.Topics) != 0 {
			t.Errorf("v%d no topics: %+v", v, resp)
		}
	}

	t.Run("kadm", func(t *testing.T) {
		adm := kadm.NewClient(g.client(t))
		ctx := context.Background()
		lr, err := adm.ListPartitionReassignments(ctx, nil)
		if err != nil || len(lr) != 0 {
			t.Errorf("list: %v %v", err, lr)
		}
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign(t3, 0, []int32{0})
		req.Assign(t3, 1, []int32{1})
		req.CancelAssign(t3, 2)
		res, err := adm.AlterPartitionAssignments(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if r := res[t3][0]; r.Err != nil {
			t.Errorf("to [0]: %v", r.Err)
		}
		if r := res[t3][1]; !errors.Is(r.Err, kerr.InvalidReplicaAssignment) {
			t.Errorf("to [1]: %v", r.Err)
		}
		if r := res[t3][2]; !errors.Is(r.Err, kerr.NoReassignmentInProgress) {
			t.Errorf("cancel: %v", r.Err)
		}
	})
}

func TestDescribeTopicPartitions(t *testing.T) {
	g := startGateway(t)
	t1, t3, t5 := adminTopics(t, g)
	raw := g.raw(t)
	topicIDs := map[string][16]byte{}
	md := raw.roundTrip(12, kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	for _, mt := range md.Topics {
		topicIDs[*mt.Topic] = mt.TopicID
	}

	// want describes one answered topic: its name, error code and the
	// partitions [from, to).
	type want struct {
		topic    string
		code     int16
		from, to int32
	}
	type cursor struct {
		topic string
		part  int32
	}
	check := func(t *testing.T, resp *kmsg.DescribeTopicPartitionsResponse, topics []want, next *cursor) {
		t.Helper()
		if len(resp.Topics) != len(topics) {
			t.Fatalf("%d topics, want %d: %+v", len(resp.Topics), len(topics), resp.Topics)
		}
		for i, w := range topics {
			rt := resp.Topics[i]
			if *rt.Topic != w.topic || rt.ErrorCode != w.code || rt.IsInternal != (w.topic == "__consumer_offsets") {
				t.Errorf("topic %d: %s error %d, want %s %d", i, *rt.Topic, rt.ErrorCode, w.topic, w.code)
			}
			wantID, wantOps := topicIDs[w.topic], int32(wantTopicOps)
			if w.code == kerr.InvalidRequest.Code {
				wantOps = notRequested
			}
			if w.code != 0 {
				wantID = [16]byte{}
			}
			if rt.TopicID != wantID || rt.AuthorizedOperations != wantOps {
				t.Errorf("%s: id %x ops %d, want %x %d", w.topic, rt.TopicID, rt.AuthorizedOperations, wantID, wantOps)
			}
			if int32(len(rt.Partitions)) != w.to-w.from {
				t.Errorf("%s: %d partitions, want %d-%d", w.topic, len(rt.Partitions), w.from, w.to)
				continue
			}
			for j, p := range rt.Partitions {
				if p.ErrorCode != 0 || p.Partition != w.from+int32(j) || p.LeaderID != 0 || p.LeaderEpoch != 0 ||
					!slices.Equal(p.Replicas, []int32{0}) || !slices.Equal(p.ISR, []int32{0}) ||
					p.EligibleLeaderReplicas == nil || len(p.EligibleLeaderReplicas) != 0 ||
					p.LastKnownELR == nil || len(p.LastKnownELR) != 0 || len(p.OfflineReplicas) != 0 {
					t.Errorf("%s partition %d: %+v", w.topic, w.from+int32(j), p)
				}
			}
		}
		switch {
		case next == nil && resp.NextCursor != nil:
			t.Errorf("next cursor %+v, want none", *resp.NextCursor)
		case next != nil && (resp.NextCursor == nil || resp.NextCursor.Topic != next.topic || resp.NextCursor.Partition != next.part):
			t.Errorf("next cursor %+v, want %+v", resp.NextCursor, *next)
		}
	}
	names := func(ns ...string) []kmsg.DescribeTopicPartitionsRequestTopic {
		out := []kmsg.DescribeTopicPartitionsRequestTopic{}
		for _, n := range ns {
			out = append(out, kmsg.DescribeTopicPartitionsRequestTopic{Topic: n})
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		topics []kmsg.DescribeTopicPartitionsRequestTopic
		limit  int32
		cursor *cursor
		want   []want
		next   *cursor
	}{
		{"limit 2", names(t3, t1, t5), 2, nil, []want{{t1, 0, 0, 1}, {t3, 0, 0, 1}}, &cursor{t3, 1}},
		{"from t3/2", names(t3, t1, t5), 2, &cursor{t3, 2}, []want{{t3, 0, 2, 3}, {t5, 0, 0, 1}}, &cursor{t5, 1}},
		{"from t5/1", names(t3, t1, t5), 3, &cursor{t5, 1}, []want{{t5, 0, 1, 4}}, &cursor{t5, 4}},
		{"topic boundary", names(t3, t1, t5), 4, &cursor{t1, 0}, []want{{t1, 0, 0, 1}, {t3, 0, 0, 3}}, &cursor{t5, 0}},
		{"cursor past the topic", names(t3, t1, t5), 4, &cursor{t1, 5}, []want{{t1, 0, 0, 0}, {t3, 0, 0, 3}, {t5, 0, 0, 1}}, &cursor{t5, 1}},
		{"limit 0 is 1", names(t3), 0, nil, []want{{t3, 0, 0, 1}}, &cursor{t3, 1}},
		{"limit -1 is 1", names(t1), -1, nil, []want{{t1, 0, 0, 1}}, nil},
		{"unknown, twice, invalid", names("admin-nosuch", t1, t1, "bad name!"), 2000, nil,
			[]want{{"admin-nosuch", 3, 0, 0}, {t1, 0, 0, 1}, {"bad name!", kerr.InvalidTopicException.Code, 0, 0}}, nil},
		{"cursor topic not listed", names(t3, t1, t5), 2, &cursor{"admin-nosuch", 0},
			[]want{{t3, 42, 0, 0}, {t1, 42, 0, 0}, {t5, 42, 0, 0}}, nil},
		{"negative cursor partition", names(t3), 2, &cursor{t3, -1}, []want{{t3, 42, 0, 0}}, nil},
		// Every topic: Kafka 4.4 lists its __consumer_offsets too (50
		// partitions here), first in name order.
		{"all topics", nil, 3, nil, []want{{"__consumer_offsets", 0, 0, 3}}, &cursor{"__consumer_offsets", 3}},
		{"all topics from the internal topic's end", nil, 3, &cursor{"__consumer_offsets", 49}, []want{{"__consumer_offsets", 0, 49, 50}, {t1, 0, 0, 1}, {t3, 0, 0, 1}}, &cursor{t3, 1}},
		{"all topics from a prefix", nil, 3, &cursor{"admin-t2", 0}, []want{{t3, 0, 0, 3}}, &cursor{t5, 0}},
		{"all topics, no limit", nil, 2000, nil, []want{{"__consumer_offsets", 0, 0, 50}, {t1, 0, 0, 1}, {t3, 0, 0, 3}, {t5, 0, 0, 5}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewDescribeTopicPartitionsRequest()
			req.Topics = tc.topics
			req.ResponsePartitionLimit = tc.limit
			if tc.cursor != nil {
				req.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: tc.cursor.topic, Partition: tc.cursor.part}
			}
			check(t, raw.roundTrip(0, &req).(*kmsg.DescribeTopicPartitionsResponse), tc.want, tc.next)
		})
	}

	// Paging through every topic two partitions at a time visits each
	// partition once, in order.
	var seen []string
	req := kmsg.NewDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit = 2
	for range 40 {
		resp := raw.roundTrip(0, &req).(*kmsg.DescribeTopicPartitionsResponse)
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				seen = append(seen, fmt.Sprintf("%s/%d", *rt.Topic, p.Partition))
			}
		}
		if resp.NextCursor == nil {
			break
		}
		req.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	var wantSeen []string
	for p := range 50 {
		wantSeen = append(wantSeen, fmt.Sprintf("__consumer_offsets/%d", p))
	}
	wantSeen = append(wantSeen, t1+"/0")
	for p := range 3 {
		wantSeen = append(wantSeen, fmt.Sprintf("%s/%d", t3, p))
	}
	for p := range 5 {
		wantSeen = append(wantSeen, fmt.Sprintf("%s/%d", t5, p))
	}
	if !slices.Equal(seen, wantSeen) {
		t.Errorf("paged %v, want %v", seen, wantSeen)
	}
}

func TestDescribeProducers(t *testing.T) {
	g := startGateway(t)
	_, t3, _ := adminTopics(t, g)
	cl := g.client(t, kgo.DefaultProduceTopic(t3), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Then a batch of three (sequences 5-7): the last sequence is its last.
	three := []*kgo.Record{{Partition: 0, Value: []byte("a")}, {Partition: 0, Value: []byte("b")}, {Partition: 0, Value: []byte("c")}}
	if err := cl.ProduceSync(ctx, three...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if three[0].Offset+2 != three[2].Offset {
		t.Fatalf("offsets %d, %d", three[0].Offset, three[2].Offset)
	}
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil || pid < 0 {
		t.Fatalf("producer id %d: %v", pid, err)
	}

	raw := g.raw(t)
	req := kmsg.NewDescribeProducersRequest()
	req.Topics = []kmsg.DescribeProducersRequestTopic{
		{Topic: t3, Partitions: []int32{0, 1, 9}},
		{Topic: "admin-nosuch", Partitions: []int32{0}},
	}
	resp := raw.roundTrip(0, &req).(*kmsg.DescribeProducersResponse)
	if len(resp.Topics) != 2 || len(resp.Topics[0].Partitions) != 3 || len(resp.Topics[1].Partitions) != 1 {
		t.Fatalf("%+v", resp)
	}
	p0, p1, p9 := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1], resp.Topics[0].Partitions[2]
	if p0.ErrorCode != 0 || p0.ErrorMessage != nil || len(p0.ActiveProducers) != 1 {
		t.Fatalf("partition 0: %+v", p0)
	}
	ap := p0.ActiveProducers[0]
	if ap.ProducerID != pid || ap.ProducerEpoch != int32(epoch) || ap.LastSequence != 7 ||
		ap.CoordinatorEpoch != -1 || ap.CurrentTxnStartOffset != -1 || ap.LastTimestamp <= 0 {
		t.Errorf("producer %+v, want id %d epoch %d last sequence 7", ap, pid, epoch)
	}
	if p1.ErrorCode != 0 || len(p1.ActiveProducers) != 0 {
		t.Errorf("partition 1: %+v", p1)
	}
	if p9.Partition != 9 || p9.ErrorCode != kerr.UnknownTopicOrPartition.Code || p9.ErrorMessage != nil {
		t.Errorf("partition 9: %+v", p9)
	}
	if u := resp.Topics[1].Partitions[0]; u.ErrorCode != kerr.UnknownTopicOrPartition.Code || u.ErrorMessage == nil ||
		*u.ErrorMessage != "This server does not host this topic-partition." {
		t.Errorf("unknown topic: %+v", u)
	}

	// kadm, as kafka-transactions describe-producers' callers use it.
	dp, err := kadm.NewClient(g.client(t)).DescribeProducers(ctx, kadm.TopicsSet{t3: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	got := dp[t3].Partitions[0]
	if got.Err != nil || len(got.ActiveProducers) != 1 || got.ActiveProducers[pid].LastSequence != 7 {
		t.Errorf("kadm: %+v", got)
	}
}

func TestDescribeGroupsAuthorizedOperations(t *testing.T) {
	g := startGateway(t)
	_, t3, _ := adminTopics(t, g)
	adm := kadm.NewClient(g.client(t))
	ctx := context.Background()
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: t3, Partition: 0, At: 0, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "admin-grp", offs); err != nil {
		t.Fatal(err)
	}
	raw := g.raw(t)
	// Kafka 4.4: 3400 for a group answered without an error (an unknown
	// group is Dead with no error before v6), "not requested" otherwise.
	for _, v := range []int16{3, 5, 6} {
		for _, asked := range []bool{true, false} {
			req := kmsg.NewDescribeGroupsRequest()
			req.Groups = []string{"admin-grp", "admin-nogroup"}
			req.IncludeAuthorizedOperations = asked
			resp := raw.roundTrip(v, &req).(*kmsg.DescribeGroupsResponse)
			if len(resp.Groups) != 2 {
				t.Fatalf("v%d: %+v", v, resp)
			}
			wantKnown, wantUnknown := int32(notRequested), int32(notRequested)
			if asked {
				wantKnown = 3400
				if v < 6 {
					wantUnknown = 3400
				}
			}
			if got := resp.Groups[0]; got.State != "Empty" || got.AuthorizedOperations != wantKnown {
				t.Errorf("v%d asked=%v group: %s ops %d, want %d", v, asked, got.State, got.AuthorizedOperations, wantKnown)
			}
			if got := resp.Groups[1]; got.State != "Dead" || got.AuthorizedOperations != wantUnknown {
				t.Errorf("v%d asked=%v unknown group: %s error %d ops %d, want %d", v, asked, got.State, got.ErrorCode, got.AuthorizedOperations, wantUnknown)
			}
		}
	}
}
