package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestKafkaACLsSASLConsumer: principals from SASL, on both backends. The
// binary runs a SASL_PLAINTEXT listener only, with the authorizer on,
// super user User:admin (SCRAM-SHA-512) and User:alice (SCRAM-SHA-256)
// from the users file. admin adds a consumer ACL for alice on the prefix
// team-a. with kafka-acls (Kafka 4.4's AclCommand with a client.properties
// where its jars are installed, else kadm). alice then reads team-a.x in a
// group, does not see team-b.x in Metadata, gets TOPIC_AUTHORIZATION_FAILED
// fetching it and deleting either topic; kafka-acls --list shows exactly
// what was added, and after a restart the same holds.
func TestKafkaACLsSASLConsumer(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backendFixture) {
		dir := t.TempDir()
		users := filepath.Join(dir, "users")
		const adminPass, alicePass = "admin-secret-512", "alice-secret-256"
		if err := os.WriteFile(users, []byte("SCRAM-SHA-512 admin "+adminPass+"\nSCRAM-SHA-256 alice "+alicePass+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
		defer cancel()
		gw := b.gateway(t, gatewayOpts{listeners: "SASL_PLAINTEXT://127.0.0.1:0", env: []string{"DISGW_SASL_USERS_FILE=" + users,
			"DISGW_AUTHORIZER=true", "DISGW_SUPER_USERS=User:admin"}})
		addr := gw.addr

		adminOpt := kgo.SASL(scram.Auth{User: "admin", Pass: adminPass}.AsSha512Mechanism())
		aliceOpt := kgo.SASL(scram.Auth{User: "alice", Pass: alicePass}.AsSha256Mechanism())
		client := func(addr string, opts ...kgo.Opt) *kgo.Client {
			t.Helper()
			cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cl.Close)
			return cl
		}

		// admin: the topics, one record each.
		admin := client(addr, adminOpt)
		adm := kadm.NewClient(admin)
		for _, topic := range []string{"team-a.x", "team-b.x"} {
			if r, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil || r.Err != nil {
				t.Fatalf("admin creates %s: %v %v", topic, err, r.Err)
			}
			if err := admin.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("in " + topic)}).FirstErr(); err != nil {
				t.Fatalf("admin produces to %s: %v", topic, err)
			}
		}

		want := []string{
			"GROUP team-a- PREFIXED User:alice * READ ALLOW",
			"TOPIC team-a. PREFIXED User:alice * DESCRIBE ALLOW",
			"TOPIC team-a. PREFIXED User:alice * READ ALLOW",
		}
		java := kafkaTools(t)
		props := filepath.Join(dir, "admin.properties")
		if err := os.WriteFile(props, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"+
			`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="`+adminPass+"\";\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		list := func(addr string) []string {
			t.Helper()
			if java != nil {
				return parseACLList(java(t, "org.apache.kafka.tools.AclCommand", "--bootstrap-server", addr, "--command-config", props, "--list"))
			}
			return kadmACLs(ctx, t, addr, adminOpt)
		}
		if java != nil {
			java(t, "org.apache.kafka.tools.AclCommand", "--bootstrap-server", addr, "--command-config", props, "--add",
				"--allow-principal", "User:alice", "--consumer", "--topic", "team-a.", "--group", "team-a-", "--resource-pattern-type", "prefixed")
		} else {
			for _, b := range []*kadm.ACLBuilder{
				kadm.NewACLs().Topics("team-a.").ResourcePatternType(kadm.ACLPatternPrefixed).Allow("User:alice").AllowHosts("*").Operations(kadm.OpRead, kadm.OpDescribe),
				kadm.NewACLs().Groups("team-a-").ResourcePatternType(kadm.ACLPatternPrefixed).Allow("User:alice").AllowHosts("*").Operations(kadm.OpRead),
			} {
				if _, err := adm.CreateACLs(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
		}
		if got := list(addr); !slices.Equal(got, want) {
			t.Fatalf("kafka-acls --list = %q, want %q", got, want)
		}

		check := func(addr, group string) {
			t.Helper()
			// alice reads team-a.x in a group of the prefix team-a-.
			cons := client(addr, aliceOpt, kgo.ConsumerGroup(group), kgo.ConsumeTopics("team-a.x"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
			fs := cons.PollFetches(fctx)
			fcancel()
			if err := fs.Err(); err != nil {
				t.Fatalf("alice consuming team-a.x: %v", err)
			}
			if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "in team-a.x" {
				t.Fatalf("alice read %d records from team-a.x, want the 1 produced", len(recs))
			}
			cons.Close()

			alice := client(addr, aliceOpt)
			md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, alice)
			if err != nil {
				t.Fatal(err)
			}
			var seen []string
			for _, tp := range md.Topics {
				seen = append(seen, *tp.Topic)
			}
			if !slices.Equal(seen, []string{"team-a.x"}) {
				t.Fatalf("alice's Metadata of all topics lists %q, want only team-a.x", seen)
			}

			fetch := kmsg.NewPtrFetchRequest()
			fetch.MaxWaitMillis, fetch.MaxBytes = 100, 1<<20
			ft := kmsg.NewFetchRequestTopic()
			ft.Topic = "team-b.x"
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.PartitionMaxBytes = 1 << 20
			ft.Partitions = append(ft.Partitions, fp)
			fetch.Topics = append(fetch.Topics, ft)
			// Fetch v12 (Kafka 3.0's newest): by topic name; v13+ names
			// topics by id, which Metadata does not give alice.
			old := client(addr, aliceOpt, kgo.MaxVersions(kversion.V3_0_0()))
			resp, err := fetch.RequestWith(ctx, old)
			if err != nil {
				t.Fatal(err)
			}
			fr := resp
			if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
				t.Fatalf("Fetch of team-b.x: %+v", fr)
			}
			p := fr.Topics[0].Partitions[0]
			if err := kerr.ErrorForCode(p.ErrorCode); !errors.Is(err, kerr.TopicAuthorizationFailed) || len(p.RecordBatches) != 0 {
				t.Fatalf("alice fetching team-b.x: %v with %d bytes, want TOPIC_AUTHORIZATION_FAILED and none", err, len(p.RecordBatches))
			}

			del, err := kadm.NewClient(alice).DeleteTopics(ctx, "team-a.x", "team-b.x")
			if err != nil {
				t.Fatal(err)
			}
			for _, topic := range []string{"team-a.x", "team-b.x"} {
				if !errors.Is(del[topic].Err, kerr.TopicAuthorizationFailed) {
					t.Fatalf("alice deleting %s: %v, want TOPIC_AUTHORIZATION_FAILED", topic, del[topic].Err)
				}
			}
		}
		check(addr, "team-a-1")

		if code := gw.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("exit code after SIGTERM = %d, want 0", code)
		}
		gw = gw.restart(t)
		addr = gw.addr
		if got := list(addr); !slices.Equal(got, want) {
			t.Fatalf("after a restart kafka-acls --list = %q, want %q", got, want)
		}
		check(addr, "team-a-2")
		if code := gw.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("exit code after SIGTERM = %d, want 0", code)
		}
	}, disAccount{"acl-sasl-access-key", "acl-sasl-secret-key", "aclsaslproject"})
}

// TestKcatFetchRefused: kcat (librdkafka) as a user that may DESCRIBE a
// topic but not READ it gets TOPIC_AUTHORIZATION_FAILED from its Fetch
// and exits with that error (-e). The refused partitions used to carry a
// null record set, which librdkafka reads as "invalid MessageSetSize -1"
// and fetches again at once, tens of thousands of times a second.
func TestKcatFetchRefused(t *testing.T) {
	t.Parallel()
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("kcat not installed")
		}
		t.Skip("kcat not installed")
	}
	dir := t.TempDir()
	users := filepath.Join(dir, "users")
	if err := os.WriteFile(users, []byte("SCRAM-SHA-512 admin admin-secret\nSCRAM-SHA-256 carol carol-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, gatewayOpts{listeners: "SASL_PLAINTEXT://127.0.0.1:0", env: []string{"DISGW_SASL_USERS_FILE=" + users,
		"DISGW_AUTHORIZER=true", "DISGW_SUPER_USERS=User:admin"}})
	addr := gw.addr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if r, err := kadm.NewClient(admin).CreateTopic(ctx, 1, 1, nil, "t1"); err != nil || r.Err != nil {
		t.Fatalf("create t1: %v %v", err, r.Err)
	}
	if err := admin.ProduceSync(ctx, &kgo.Record{Topic: "t1", Value: []byte("secret")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(admin).CreateACLs(ctx, kadm.NewACLs().Topics("t1").Allow("User:carol").AllowHosts("*").
		Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)); err != nil {
		t.Fatal(err)
	}
	kctx, kcancel := context.WithTimeout(ctx, 30*time.Second)
	defer kcancel()
	out, err := exec.CommandContext(kctx, kcat, "-b", addr, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-256",
		"-X", "sasl.username=carol", "-X", "sasl.password=carol-secret", "-C", "-t", "t1", "-o", "beginning", "-e").CombinedOutput()
	if kctx.Err() != nil {
		t.Fatalf("kcat did not exit within 30 s; %d bytes of output, the last: %s", len(out), out[max(0, len(out)-300):])
	}
	if err == nil || !strings.Contains(string(out), "Topic authorization failed") || strings.Contains(string(out), "secret") {
		t.Fatalf("kcat: %v, want it to fail with Topic authorization failed and no record:\n%s", err, out[:min(len(out), 2000)])
	}
	if strings.Contains(string(out), "MessageSetSize") {
		t.Fatalf("kcat could not parse the Fetch response:\n%s", out[:min(len(out), 2000)])
	}
}
