package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/auth/basic"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/config"
	dis "github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCommittedLeaderEpoch commits offsets with leader epochs (kadm,
// OffsetCommit at the highest version) to the real binary on both
// backends, reads them back with OffsetFetch, restarts the gateway and
// reads them again: the epoch is kept as given (7), -1 where the commit had
// none, as Kafka 4.4 answers. On DIS, a DIS application reading the group's
// checkpoint still sees the committed sequence number and metadata.
// ListGroups shows an emptied consumer group with its protocol type
// ("consumer") before and after the restart, as Kafka does.
func TestCommittedLeaderEpoch(t *testing.T) {
	t.Parallel()
	const topic, group = "epoch.t", "epoch.group"
	const ak, sk, project = "epoch-ak", "epoch-sk", "epochproject"
	forEachBackend(t, func(t *testing.T, b backendFixture) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()

		gw := b.gateway(t, gatewayOpts{args: append([]string{"--log-level", "warn"}, b.onDIS("--dis-region", "cn-north-4")...)})
		addr := gw.addr
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		adm := kadm.NewClient(cl)
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		for p := range int32(2) {
			for i := range 3 {
				if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}, Partition: p}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 2, LeaderEpoch: 7, Metadata: "meta-0"})
		offs.Add(kadm.Offset{Topic: topic, Partition: 1, At: 3, LeaderEpoch: -1, Metadata: ""})
		if r, err := adm.CommitOffsets(ctx, group, offs); err != nil || r.Error() != nil {
			t.Fatalf("commit: %v %v", err, r.Error())
		}
		check := func(what string, adm *kadm.Client) {
			t.Helper()
			r, err := adm.FetchOffsets(ctx, group)
			if err != nil || r.Error() != nil {
				t.Fatalf("%s: fetch: %v %v", what, err, r.Error())
			}
			for p, want := range map[int32]kadm.Offset{0: {At: 2, LeaderEpoch: 7, Metadata: "meta-0"}, 1: {At: 3, LeaderEpoch: -1}} {
				got, ok := r.Lookup(topic, p)
				if !ok || got.At != want.At || got.LeaderEpoch != want.LeaderEpoch || got.Metadata != want.Metadata {
					t.Fatalf("%s: partition %d: %+v (found %v), want offset %d epoch %d metadata %q",
						what, p, got.Offset, ok, want.At, want.LeaderEpoch, want.Metadata)
				}
			}
		}
		// A consumer group whose member left: Empty, protocol type
		// "consumer" (the offsets-only group has none), as Kafka lists them.
		cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("epoch.members"), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n < 6; {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of 6", n)
			}
			n += fs.NumRecords()
		}
		cons.Close() // leaves the group
		listed := func(what string, adm *kadm.Client) {
			t.Helper()
			ls, err := adm.ListGroups(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for g, want := range map[string]string{group: "", "epoch.members": "consumer"} {
				if l, ok := ls[g]; !ok || l.State != "Empty" || l.ProtocolType != want {
					t.Fatalf("%s: ListGroups %s: %+v (found %v), want Empty with protocol type %q", what, g, l, ok, want)
				}
			}
		}
		listed("before the restart", adm)
		check("before the restart", adm)
		cl.Close()
		if code := gw.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("exit code %d", code)
		}

		gw = gw.restart(t)
		addr = gw.addr
		cl, err = kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		check("after the restart", kadm.NewClient(cl))
		listed("after the restart", kadm.NewClient(cl))

		if b.dis == nil {
			return
		}
		cred, err := basic.NewCredentialsBuilder().WithAk(ak).WithSk(sk).WithProjectId(project).SafeBuild()
		if err != nil {
			t.Fatal(err)
		}
		hc, err := dis.DisClientBuilder().WithEndpoints([]string{b.dis.endpoint}).WithCredential(cred).
			WithHttpConfig(config.DefaultHttpConfig().WithTimeout(10 * time.Second)).SafeBuild()
		if err != nil {
			t.Fatal(err)
		}
		c := dis.NewDisClient(hc)
		cp, err := c.ShowCheckpoint(&model.ShowCheckpointRequest{AppName: "epoch_2Egroup", StreamName: "epoch_t", PartitionId: "0",
			CheckpointType: model.GetShowCheckpointRequestCheckpointTypeEnum().LAST_READ})
		if err != nil || cp.SequenceNumber == nil || *cp.SequenceNumber != "2" || cp.Metadata == nil || *cp.Metadata != "meta-0" {
			t.Fatalf("DIS checkpoint: %+v, %v; want sequence number 2 and metadata meta-0", cp, err)
		}
	}, disAccount{ak, sk, project})
}
