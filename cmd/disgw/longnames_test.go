package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/auth/basic"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/config"
	dis "github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
)

// needTool returns path when it is usable (probe, when given, exits 0);
// otherwise the test is skipped, or fails under CI=true, where .ci/run
// installs every tool.
func needTool(t *testing.T, path string, probe ...string) string {
	t.Helper()
	if _, err := os.Stat(path); err == nil {
		if len(probe) == 0 || exec.Command(path, probe...).Run() == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s %v is required under CI=true but is not usable", path, probe)
	}
	t.Skipf("%s not available", path)
	return ""
}

// javaJars is the directory of Apache Kafka 4.4.0's tools and clients
// (compat/setup fetches them), "" when they or java are missing: CI's make
// test runs before compat/setup, so the Java steps are then done with
// franz-go, and compat's kafka-java step "kafka-topics 249-character name"
// checks the Java tools on a long name.
func javaJars(t *testing.T) string {
	t.Helper()
	home, _ := os.UserHomeDir()
	dir := filepath.Join(home, ".cache", "disgw-compat", "kafka-4.4.0")
	if _, err := os.Stat(filepath.Join(dir, "kafka-tools-4.4.0.jar")); err != nil {
		t.Logf("Kafka 4.4.0 jars missing under %s: franz-go stands in for the Java tools", dir)
		return ""
	}
	if exec.Command("java", "-version").Run() != nil {
		t.Log("java missing: franz-go stands in for the Java tools")
		return ""
	}
	return dir
}

// runTool runs name with args and stdin and returns its stdout; it fails the
// test on an error, with stderr.
func runTool(t *testing.T, timeout time.Duration, stdin, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout: %s\nstderr: %s", filepath.Base(name), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// TestLongTopicNames: topics of 249 characters (Kafka's limit), two of them
// equal but for their last character, on the embedded store and on DIS
// (`serve --backend dis` in front of `dislocal`, where such a name maps to a
// hashed stream name of 64 characters): created by Kafka's Java
// TopicCommand and by franz-go, produced by kcat, Kafka's ConsoleProducer
// and franz-go, consumed by kcat, Kafka's ConsoleConsumer and a franz-go
// group that commits (franz-go stands in for the Java tools where their
// jars are missing, see javaJars); on DIS a second gateway node lists them;
// after a gateway restart both are listed under their names, the records
// and the group's committed offset are read back, and deleting one leaves
// the other.
func TestLongTopicNames(t *testing.T) {
	if testing.Short() {
		t.Skip("long: Kafka's Java tools and kcat on both backends")
	}
	t.Parallel()
	kcat := needTool(t, "/usr/bin/kcat", "-V")
	jars := javaJars(t)
	forEachBackend(t, func(t *testing.T, b backendFixture) {
		testLongTopicNames(t, b, kcat, jars)
	}, disAccount{"names-ak", "names-sk", "namesproject"})
}

func testLongTopicNames(t *testing.T, b backendFixture, kcat, jars string) {
	opts := gatewayOpts{args: b.onDIS("--dis-region", "cn-north-4")}
	var sdk *dis.DisClient
	if b.dis != nil {
		a := b.dis.opts.account
		cred, err := basic.NewCredentialsBuilder().WithAk(a.ak).WithSk(a.sk).WithProjectId(a.project).SafeBuild()
		if err != nil {
			t.Fatal(err)
		}
		hc, err := dis.DisClientBuilder().WithEndpoints([]string{b.dis.endpoint}).WithCredential(cred).
			WithHttpConfig(config.DefaultHttpConfig().WithTimeout(10 * time.Second)).SafeBuild()
		if err != nil {
			t.Fatal(err)
		}
		sdk = dis.NewDisClient(hc)
	}
	gw := b.gateway(t, opts)
	addr := gw.addr

	base := strings.Repeat("names.long-topic_", 4) // 68 characters
	long1 := base + strings.Repeat("x", 249-len(base)-1) + "1"
	long2 := base + strings.Repeat("x", 249-len(base)-1) + "2"
	if len(long1) != disbackend.MaxTopicNameLen || len(long2) != disbackend.MaxTopicNameLen {
		t.Fatalf("test names of %d and %d characters", len(long1), len(long2))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	listedOn := func(c *kgo.Client) []string { // Metadata v12 of all topics, uncached
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		resp, err := req.RequestWith(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tp := range resp.Topics {
			if tp.ErrorCode == 0 && tp.Topic != nil {
				names = append(names, *tp.Topic)
			}
		}
		return names
	}
	java := func(stdin, class string, args ...string) string {
		t.Helper()
		a := append([]string{"-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", filepath.Join(jars, "*"), class,
			"--bootstrap-server", addr}, args...)
		return runTool(t, 3*time.Minute, stdin, "java", a...)
	}

	// Created by Kafka's TopicCommand and by franz-go.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if jars != "" {
		java("", "org.apache.kafka.tools.TopicCommand", "--create", "--topic", long1, "--partitions", "1", "--replication-factor", "1")
	} else if rs, err := adm.CreateTopics(ctx, 1, 1, nil, long1); err != nil || rs[long1].Err != nil {
		t.Fatalf("CreateTopics(long1): %v, %v", rs[long1].Err, err)
	}
	if rs, err := adm.CreateTopics(ctx, 1, 1, nil, long2); err != nil || rs[long2].Err != nil {
		t.Fatalf("CreateTopics(long2): %v, %v", rs[long2].Err, err)
	}
	if rs, err := adm.CreateTopics(ctx, 1, 1, nil, long2); err != nil || rs[long2].Err == nil {
		t.Fatalf("CreateTopics(long2) again: %v, %v; want TOPIC_ALREADY_EXISTS", rs[long2].Err, err)
	}
	if sdk != nil {
		// On DIS each lives in its hashed stream.
		for _, topic := range []string{long1, long2} {
			name := disbackend.HashedStreamName(topic)
			if _, err := sdk.ShowStream(&model.ShowStreamRequest{StreamName: name}); err != nil {
				t.Fatalf("DIS stream %q of topic %q: %v", name, topic, err)
			}
		}
	}

	// Produced by kcat, Kafka's ConsoleProducer and franz-go.
	runTool(t, time.Minute, "kcat-0\nkcat-1\n", kcat, "-b", addr, "-t", long1, "-P")
	if jars != "" {
		java("java-0\njava-1\n", "org.apache.kafka.tools.ConsoleProducer", "--topic", long1)
	} else if err := cl.ProduceSync(ctx, &kgo.Record{Topic: long1, Value: []byte("java-0")}, &kgo.Record{Topic: long1, Value: []byte("java-1")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: long1, Value: []byte("kgo-0")}, &kgo.Record{Topic: long1, Value: []byte("kgo-1")},
		&kgo.Record{Topic: long2, Value: []byte("other")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	want := []string{"kcat-0", "kcat-1", "java-0", "java-1", "kgo-0", "kgo-1"}

	// Consumed by kcat, Kafka's ConsoleConsumer and a franz-go group.
	if got := strings.Fields(runTool(t, time.Minute, "", kcat, "-b", addr, "-t", long1, "-C", "-e", "-q", "-f", "%s\n")); !slices.Equal(got, want) {
		t.Fatalf("kcat -C: %q, want %q", got, want)
	}
	if jars != "" {
		out := java("", "org.apache.kafka.tools.consumer.ConsoleConsumer", "--topic", long1, "--from-beginning",
			"--max-messages", fmt.Sprint(len(want)), "--timeout-ms", "60000")
		if got := strings.Fields(out); !slices.Equal(got, want) {
			t.Fatalf("ConsoleConsumer: %q, want %q", got, want)
		}
	}
	const group = "names.group"
	consumeGroup := func() []string {
		t.Helper()
		gc, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(long1), kgo.ConsumerGroup(group),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
		if err != nil {
			t.Fatal(err)
		}
		defer gc.Close()
		var got []string
		for len(got) < len(want) {
			fs := gc.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("group consumed %q: %v", got, ctx.Err())
			}
			fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s[%d]: %v", topic, p, err) })
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		if err := gc.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
		return got
	}
	if got := consumeGroup(); !slices.Equal(got, want) {
		t.Fatalf("franz-go group: %q, want %q", got, want)
	}
	readLong2 := func(c *kgo.Client) {
		t.Helper()
		rc, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(long2), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		fs := rc.PollFetches(ctx)
		if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "other" {
			t.Fatalf("long2 holds %d records (%v), want its own one", len(recs), fs.Errors())
		}
		if ends, err := kadm.NewClient(c).ListEndOffsets(ctx, long2); err != nil {
			t.Fatal(err)
		} else if o, _ := ends.Lookup(long2, 0); o.Offset != 1 {
			t.Fatalf("long2 end offset %d, want 1", o.Offset)
		}
	}
	readLong2(cl)
	if b.dis != nil {
		// Another gateway node in front of the same DIS lists them too.
		gw2 := b.gateway(t, opts)
		cl2, err := kgo.NewClient(kgo.SeedBrokers(gw2.addr))
		if err != nil {
			t.Fatal(err)
		}
		if names := listedOn(cl2); !slices.Contains(names, long1) || !slices.Contains(names, long2) {
			t.Fatalf("a second gateway lists %q, want both long names", names)
		}
		cl2.Close()
		if code := gw2.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("second gateway's exit code after SIGTERM = %d", code)
		}
	}
	cl.Close()

	// After a restart: listed under their names, records and offsets kept.
	if code := gw.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d", code)
	}
	gw = gw.restart(t)
	addr = gw.addr
	cl, err = kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm = kadm.NewClient(cl)
	listed := func() []string { return listedOn(cl) }
	if names := listed(); !slices.Contains(names, long1) || !slices.Contains(names, long2) {
		t.Fatalf("after restart topics %q, want both long names", names)
	}
	if got := strings.Fields(runTool(t, time.Minute, "", kcat, "-b", addr, "-t", long1, "-C", "-e", "-q", "-f", "%s\n")); !slices.Equal(got, want) {
		t.Fatalf("after restart kcat -C: %q, want %q", got, want)
	}
	readLong2(cl)
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(long1, 0); !ok || o.At != int64(len(want)) {
		t.Fatalf("after restart group offset of long1 = %+v (%v), want %d", o, ok, len(want))
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, long1)
	if err != nil {
		t.Fatal(err)
	}
	if rc, err := rcs.On(long1, nil); err != nil || len(rc.Configs) == 0 {
		t.Fatalf("DescribeConfigs(long1): %+v, %v", rc, err)
	}

	// Deleting one leaves the other.
	if rs, err := adm.DeleteTopics(ctx, long2); err != nil || rs[long2].Err != nil {
		t.Fatalf("DeleteTopics(long2): %v, %v", rs[long2].Err, err)
	}
	if names := listed(); !slices.Contains(names, long1) || slices.Contains(names, long2) {
		t.Fatalf("after deleting long2 topics %q, want long1 alone", names)
	}
	if sdk != nil {
		if _, err := sdk.ShowStream(&model.ShowStreamRequest{StreamName: disbackend.HashedStreamName(long2)}); err == nil {
			t.Fatal("long2's DIS stream is still there after DeleteTopics")
		}
	}
	if code := gw.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d", code)
	}
}
