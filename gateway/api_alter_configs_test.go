package gateway_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/gateway"
)

// TestAlterConfigs: kadm's IncrementalAlterConfigs (SET, DELETE, APPEND,
// validate-only) and legacy AlterConfigs (replace) on topics, read back
// with DescribeConfigs; the errors Kafka gives for a bad value, an unknown
// key, a non-list APPEND, an unknown topic, a key listed twice and a
// broker resource.
func TestAlterConfigs(t *testing.T) {
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(g.client(t))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "alter.me"); err != nil {
		t.Fatal(err)
	}
	describe := func() map[string]kadm.Config {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, "alter.me")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("alter.me", nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]kadm.Config{}
		for _, c := range rc.Configs {
			out[c.Key] = c
		}
		return out
	}
	value := func(c kadm.Config) string {
		if c.Value == nil {
			return "<nil>"
		}
		return *c.Value
	}
	alter := func(validate bool, ops ...kadm.AlterConfig) error {
		t.Helper()
		var rs kadm.AlterConfigsResponses
		var err error
		if validate {
			rs, err = adm.ValidateAlterTopicConfigs(ctx, ops, "alter.me")
		} else {
			rs, err = adm.AlterTopicConfigs(ctx, ops, "alter.me")
		}
		if err != nil {
			return err
		}
		return rs[0].Err
	}
	str := func(s string) *string { return &s }
	defRetention := value(describe()["retention.ms"])

	if err := alter(false, kadm.AlterConfig{Name: "retention.ms", Value: str("3600000")},
		kadm.AlterConfig{Name: "message.timestamp.type", Value: str("LogAppendTime")}); err != nil {
		t.Fatalf("SET: %v", err)
	}
	cs := describe()
	if value(cs["retention.ms"]) != "3600000" || cs["retention.ms"].Source != kmsg.ConfigSourceDynamicTopicConfig ||
		value(cs["message.timestamp.type"]) != "LogAppendTime" {
		t.Fatalf("after SET: retention.ms %s (%v), message.timestamp.type %s", value(cs["retention.ms"]), cs["retention.ms"].Source, value(cs["message.timestamp.type"]))
	}
	if err := alter(true, kadm.AlterConfig{Name: "retention.ms", Value: str("7200000")}); err != nil {
		t.Fatalf("validate-only SET: %v", err)
	}
	if v := value(describe()["retention.ms"]); v != "3600000" {
		t.Fatalf("a validate-only SET changed retention.ms to %s", v)
	}
	if err := alter(false, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"}); err != nil {
		t.Fatalf("DELETE: %v", err)
	}
	if cs := describe(); value(cs["retention.ms"]) != defRetention || cs["retention.ms"].Source != kmsg.ConfigSourceDefaultConfig ||
		value(cs["message.timestamp.type"]) != "LogAppendTime" {
		t.Fatalf("after DELETE: retention.ms %s (%v), want the default %s; message.timestamp.type %s kept",
			value(cs["retention.ms"]), cs["retention.ms"].Source, defRetention, value(cs["message.timestamp.type"]))
	}

	// DELETE of a key disgw does not know (Kafka 4.4's own, or none at
	// all) succeeds and changes nothing, as in Kafka 4.4: MirrorMaker 2
	// DELETEs every config its source cluster reports at the default.
	if err := alter(false, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "errors.deadletterqueue.group.enable"},
		kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "no.such.config"},
		kadm.AlterConfig{Name: "retention.ms", Value: str("7200000")}); err != nil {
		t.Fatalf("DELETE of unknown keys with a SET: %v", err)
	}
	if cs := describe(); value(cs["retention.ms"]) != "7200000" || value(cs["message.timestamp.type"]) != "LogAppendTime" {
		t.Fatalf("after DELETE of unknown keys with a SET: retention.ms %s, message.timestamp.type %s",
			value(cs["retention.ms"]), value(cs["message.timestamp.type"]))
	}

	for _, tc := range []struct {
		name string
		op   kadm.AlterConfig
		want error
	}{
		{"bad value", kadm.AlterConfig{Name: "retention.ms", Value: str("soon")}, kerr.InvalidConfig},
		{"unknown key", kadm.AlterConfig{Name: "no.such.config", Value: str("1")}, kerr.InvalidConfig},
		{"bad policy", kadm.AlterConfig{Name: "cleanup.policy", Value: str("compacted")}, kerr.InvalidConfig},
		{"append", kadm.AlterConfig{Op: kadm.AppendConfig, Name: "retention.ms", Value: str("1")}, kerr.InvalidConfig},
	} {
		if err := alter(false, tc.op); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: str("1")}}, "no.such.topic"); err != nil ||
		!errors.Is(rs[0].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("unknown topic: %v, %v", rs, err)
	}
	if rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: str("1")}}, 0); err != nil ||
		!errors.Is(rs[0].Err, kerr.InvalidRequest) {
		t.Errorf("broker resource: %v, %v", rs, err)
	}

	// The same key twice in one resource: INVALID_REQUEST.
	r := g.raw(t)
	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "alter.me"
	for range 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "retention.ms", str("3600000")
		res.Configs = append(res.Configs, c)
	}
	inc.Resources = append(inc.Resources, res)
	if resp := r.roundTrip(1, inc).(*kmsg.IncrementalAlterConfigsResponse); resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("a key listed twice: error %d, want INVALID_REQUEST", resp.Resources[0].ErrorCode)
	}

	// Legacy AlterConfigs replaces: message.timestamp.type, not listed,
	// goes back to CreateTime.
	if rs, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: str("2000000")}}, "alter.me"); err != nil || rs[0].Err != nil {
		t.Fatalf("AlterConfigs: %v, %v", rs, err)
	}
	if cs := describe(); value(cs["max.message.bytes"]) != "2000000" || value(cs["message.timestamp.type"]) != "CreateTime" {
		t.Fatalf("after AlterConfigs: max.message.bytes %s, message.timestamp.type %s (want CreateTime: replaced)",
			value(cs["max.message.bytes"]), value(cs["message.timestamp.type"]))
	}
}

// TestTopicFromBackend: a stream created in the backend behind the
// gateway's back (another node, DIS tools, or a CreateTopics whose answer
// was lost) is found when a client asks for it by name, and a CreateTopics
// for it gets TOPIC_ALREADY_EXISTS and makes it known too.
func TestTopicFromBackend(t *testing.T) {
	g := startGateway(t, func(c *gateway.Config) { c.AutoCreateTopics = false })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, topic := range []string{"behind.a", "behind.b"} {
		name, err := disbackend.StreamNameForTopic(topic)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.store.CreateStream(ctx, disbackend.StreamSpec{Name: name, TopicName: topic, PartitionCount: 2,
			Config: disbackend.StreamConfig{Retention: time.Hour, MaxMessageBytes: 1 << 20}}); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(g.client(t))
	md, err := adm.Metadata(ctx, "behind.a")
	if err != nil {
		t.Fatal(err)
	}
	if d := md.Topics["behind.a"]; d.Err != nil || len(d.Partitions) != 2 {
		t.Fatalf("metadata of a topic created behind the gateway: %v, %d partitions", d.Err, len(d.Partitions))
	}
	rs, err := adm.CreateTopic(ctx, 2, 1, nil, "behind.b")
	if (err != nil && !errors.Is(err, kerr.TopicAlreadyExists)) || !errors.Is(rs.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("create of a topic created behind the gateway: %v, %v; want TOPIC_ALREADY_EXISTS", rs.Err, err)
	}
	if tds, err := adm.ListTopics(ctx); err != nil || !tds.Has("behind.b") {
		t.Fatalf("list after the create: %v, %v", tds.Names(), err)
	}
}

// TestExplicitDefaultConfigs: a topic config set to its default value is
// DYNAMIC_TOPIC_CONFIG, as Apache Kafka 4.4 reports it (CreateTopics,
// IncrementalAlterConfigs SET and APPEND); DELETE and legacy AlterConfigs
// (which replaces every key) make it DEFAULT_CONFIG again; cleanup.policy
// keeps the order given, trimmed and without repeats. A stream made
// without the record (behind the gateway, or before it was kept) shows a
// key as set when its value is not the default.
func TestExplicitDefaultConfigs(t *testing.T) {
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := g.store.CreateStream(ctx, disbackend.StreamSpec{Name: "old_cfg", TopicName: "old.cfg", PartitionCount: 1,
		Config: disbackend.StreamConfig{Retention: time.Hour, MaxMessageBytes: 1048588}}); err != nil {
		t.Fatal(err)
	}
	cl := g.client(t)
	adm := kadm.NewClient(cl)
	if md, err := adm.Metadata(ctx, "old.cfg"); err != nil || md.Topics["old.cfg"].Err != nil {
		t.Fatalf("metadata of a topic made behind the gateway: %v %v", err, md.Topics["old.cfg"].Err)
	}
	str := func(s string) *string { return &s }
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy": str("delete"), "retention.ms": str("604800000"), "max.message.bytes": str("1048588"),
	}, "set.cfg"); err != nil {
		t.Fatal(err)
	}
	source := func(topic, key string) string {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rc.Configs {
			if c.Key == key {
				return c.MaybeValue() + " " + c.Source.String()
			}
		}
		return "missing"
	}
	expect := func(what, topic string, want map[string]string) {
		t.Helper()
		for k, v := range want {
			if got := source(topic, k); got != v {
				t.Errorf("%s: %s %s = %q, want %q", what, topic, k, got, v)
			}
		}
	}
	expect("old stream", "old.cfg", map[string]string{
		"retention.ms":      "3600000 DYNAMIC_TOPIC_CONFIG",
		"max.message.bytes": "1048588 DEFAULT_CONFIG",
		"cleanup.policy":    "delete DEFAULT_CONFIG",
	})
	expect("created", "set.cfg", map[string]string{
		"retention.ms":      "604800000 DYNAMIC_TOPIC_CONFIG",
		"max.message.bytes": "1048588 DYNAMIC_TOPIC_CONFIG",
		"cleanup.policy":    "delete DYNAMIC_TOPIC_CONFIG",
		"segment.ms":        "604800000 DEFAULT_CONFIG",
	})
	alter := func(topic string, cs ...kadm.AlterConfig) {
		t.Helper()
		rs, err := adm.AlterTopicConfigs(ctx, cs, topic)
		if err != nil || rs[0].Err != nil {
			t.Fatalf("IncrementalAlterConfigs %s: %v %v", topic, err, rs[0].Err)
		}
	}
	alter("set.cfg", kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"},
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "segment.ms", Value: str("604800000")},
		kadm.AlterConfig{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: str("compact")})
	expect("altered", "set.cfg", map[string]string{
		"retention.ms":      "604800000 DEFAULT_CONFIG",
		"max.message.bytes": "1048588 DYNAMIC_TOPIC_CONFIG",
		"cleanup.policy":    "delete,compact DYNAMIC_TOPIC_CONFIG",
		"segment.ms":        "604800000 DYNAMIC_TOPIC_CONFIG",
	})
	alter("old.cfg", kadm.AlterConfig{Op: kadm.SetConfig, Name: "cleanup.policy", Value: str(" compact , delete,compact")})
	expect("altered", "old.cfg", map[string]string{
		"retention.ms":   "3600000 DYNAMIC_TOPIC_CONFIG",
		"cleanup.policy": "compact,delete DYNAMIC_TOPIC_CONFIG",
	})
	areq := kmsg.NewPtrAlterConfigsRequest()
	ares := kmsg.NewAlterConfigsRequestResource()
	ares.ResourceType, ares.ResourceName = kmsg.ConfigResourceTypeTopic, "set.cfg"
	acfg := kmsg.NewAlterConfigsRequestResourceConfig()
	acfg.Name, acfg.Value = "min.compaction.lag.ms", str("0")
	ares.Configs = append(ares.Configs, acfg)
	areq.Resources = append(areq.Resources, ares)
	if aresp, err := areq.RequestWith(ctx, cl); err != nil || aresp.Resources[0].ErrorCode != 0 {
		t.Fatalf("AlterConfigs: %v %v", err, aresp)
	}
	expect("replaced", "set.cfg", map[string]string{
		"max.message.bytes":     "1048588 DEFAULT_CONFIG",
		"cleanup.policy":        "delete DEFAULT_CONFIG",
		"segment.ms":            "604800000 DEFAULT_CONFIG",
		"min.compaction.lag.ms": "0 DYNAMIC_TOPIC_CONFIG",
	})
}

// TestGroupOffsetsOfTopicFromBackend: a DIS application's checkpoints on a
// stream it created behind the gateway's back are the group's offsets: an
// OffsetFetch of all the group's offsets lists them without the topic being
// asked for by name first, and an OffsetCommit to another such topic is
// written to the app.
func TestGroupOffsetsOfTopicFromBackend(t *testing.T) {
	g := startGateway(t, func(c *gateway.Config) { c.AutoCreateTopics = false })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, topic := range []string{"dis-app-a", "dis-app-b"} {
		if _, err := g.store.CreateStream(ctx, disbackend.StreamSpec{Name: topic, TopicName: topic, PartitionCount: 2,
			Config: disbackend.StreamConfig{Retention: time.Hour, MaxMessageBytes: 1 << 20}}); err != nil {
			t.Fatal(err)
		}
	}
	const group = "dis-app"
	if _, err := g.store.CreateApp(ctx, disbackend.App{Name: group, GroupID: group, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := g.store.CommitCheckpoints(ctx, group, []disbackend.Checkpoint{
		{Stream: "dis-app-a", Partition: 0, SequenceNumber: 7, LeaderEpoch: -1},
		{Stream: "dis-app-a", Partition: 1, SequenceNumber: 9, LeaderEpoch: -1},
	}); err != nil {
		t.Fatal(err)
	}
	// Kafka 3.x's versions: OffsetCommit names its topics (v10 has ids,
	// which a client learns from metadata).
	cl := g.client(t, kgo.MaxVersions(kversion.V3_9_0()))
	adm := kadm.NewClient(cl)
	// A raw OffsetCommit first: kadm's helpers may ask for metadata.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = group, -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "dis-app-b"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 1, 5
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	cresp, err := commit.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := cresp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("OffsetCommit to a topic created behind the gateway: %v", kerr.ErrorForCode(code))
	}
	cps, err := g.store.Checkpoints(ctx, group, "dis-app-b")
	if err != nil || len(cps) != 1 || cps[0].Partition != 1 || cps[0].SequenceNumber != 5 {
		t.Fatalf("the app's checkpoints on dis-app-b: %+v, %v", cps, err)
	}
	fetched, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = fetched.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	o0, ok0 := fetched.Lookup("dis-app-a", 0)
	o1, ok1 := fetched.Lookup("dis-app-a", 1)
	if !ok0 || !ok1 || o0.At != 7 || o1.At != 9 {
		t.Fatalf("FetchOffsets of the app's checkpoints: %v", fetched)
	}
}
