package main

// Clients other than franz-go against three cluster nodes
// (startRollCluster): kcat (librdkafka), kafka-python and
// confluent-kafka-python, and admin writes through a node that is not the
// controller (franz-go's kadm and Kafka's Java tools), which the node
// forwards to the controller (docs/cluster.md §7).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	kcatBroker    = regexp.MustCompile(`^\s+broker (-?\d+) at (\S+)( \(controller\))?$`)
	kcatTopic     = regexp.MustCompile(`^\s+topic "(.*)" with (\d+) partitions`)
	kcatPartition = regexp.MustCompile(`^\s+partition (\d+), leader (-?\d+),`)
)

// kcatMetadata reads `kcat -L`: the brokers ("id=host:port", the
// controller's marked with a "*"), and each partition's leader
// ("topic/partition=leader"), each sorted.
func kcatMetadata(t *testing.T, out string) (brokers, leaders []string) {
	t.Helper()
	topic := ""
	for _, line := range strings.Split(out, "\n") {
		if m := kcatBroker.FindStringSubmatch(line); m != nil {
			b := m[1] + "=" + m[2]
			if m[3] != "" {
				b += "*"
			}
			brokers = append(brokers, b)
		} else if m := kcatTopic.FindStringSubmatch(line); m != nil {
			topic = m[1]
		} else if m := kcatPartition.FindStringSubmatch(line); m != nil {
			leaders = append(leaders, topic+"/"+m[1]+"="+m[2])
		}
	}
	sort.Strings(brokers)
	sort.Strings(leaders)
	return brokers, leaders
}

// TestClusterKcat: three nodes. `kcat -L` against each node lists the
// three brokers at their addresses, the same controller and the same
// leader of every partition. kcat produces 300 records through one node
// to a topic of 4 partitions and consumes them through another, each
// once; it does the same with a topic it auto-creates through a node that
// is not the controller. kafka-python and confluent-kafka-python (the
// compat venv's, when there) see the three brokers through one node.
func TestClusterKcat(t *testing.T) {
	if testing.Short() {
		t.Skip("long: kcat against three cluster nodes")
	}
	t.Parallel()
	kcat := needTool(t, "/usr/bin/kcat", "-V")
	c := startRollCluster(t, rollClusterOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic = "kcat-cluster"
	c.createTopic(ctx, topic, 4)
	view := c.waitView(0)

	var want []string
	for _, n := range c.nodes {
		b := fmt.Sprintf("%d=%s", n.id, n.addr)
		if n.id == view.controller {
			b += "*"
		}
		want = append(want, b)
	}
	sort.Strings(want)
	var firstLeaders []string
	for i, n := range c.nodes {
		out := runTool(t, 30*time.Second, "", kcat, "-L", "-b", n.addr, "-m", "10")
		brokers, leaders := kcatMetadata(t, out)
		if !slices.Equal(brokers, want) {
			t.Fatalf("kcat -L -b node %d: brokers %q, want %q\n%s", n.id, brokers, want, out)
		}
		if !slices.ContainsFunc(leaders, func(l string) bool { return strings.HasPrefix(l, topic+"/") }) {
			t.Fatalf("kcat -L -b node %d: no partition of %s\n%s", n.id, topic, out)
		}
		if i == 0 {
			firstLeaders = leaders
			led := map[string]int{}
			for _, l := range leaders {
				_, leader, _ := strings.Cut(l, "=")
				led[leader]++
			}
			t.Logf("kcat -L: brokers %q; partitions led by node: %v", brokers, led)
			continue
		}
		if !slices.Equal(leaders, firstLeaders) {
			t.Fatalf("kcat -L -b node %d lists other leaders than node %d:\n%q\n%q", n.id, c.nodes[0].id, leaders, firstLeaders)
		}
	}

	// Through one node and back through another; the second topic is
	// auto-created by a node that is not the controller.
	var other *rollNode
	for _, n := range c.nodes {
		if n.id != view.controller {
			other = n
		}
	}
	for _, tc := range []struct {
		topic    string
		from, to *rollNode
	}{
		{topic, c.nodes[0], c.nodes[1]},
		{"kcat-auto", other, c.node(view.controller)},
	} {
		var in strings.Builder
		var sent []string
		for i := range 300 {
			v := fmt.Sprintf("%s-%d", tc.topic, i)
			sent = append(sent, v)
			fmt.Fprintln(&in, v)
		}
		runTool(t, 60*time.Second, in.String(), kcat, "-P", "-b", tc.from.addr, "-t", tc.topic, "-X", "message.timeout.ms=30000")
		got := runTool(t, 60*time.Second, "", kcat, "-C", "-b", tc.to.addr, "-t", tc.topic, "-o", "beginning", "-e", "-q", "-f", `%s\n`)
		lines := strings.Fields(got)
		sort.Strings(lines)
		sort.Strings(sent)
		if !slices.Equal(lines, sent) {
			t.Fatalf("kcat produced %d records to %s through node %d, consumed %d through node %d, want the same, each once",
				len(sent), tc.topic, tc.from.id, len(lines), tc.to.id)
		}
		t.Logf("kcat: %d records to %s through node %d, all back once through node %d", len(sent), tc.topic, tc.from.id, tc.to.id)
	}

	pythonBrokers(t, c.nodes[1].addr, c)
}

// pythonBrokers checks, when the compat venv has them, that kafka-python
// (KafkaAdminClient.describe_cluster: DescribeCluster) and confluent-kafka-python
// (AdminClient.list_topics: Metadata) see every node through addr.
func pythonBrokers(t *testing.T, addr string, c *rollCluster) {
	t.Helper()
	home, _ := os.UserHomeDir()
	py := filepath.Join(home, ".cache", "disgw-compat", "venv", "bin", "python")
	var want []string
	for _, n := range c.nodes {
		want = append(want, fmt.Sprintf("%d=%s", n.id, n.addr))
	}
	sort.Strings(want)
	for _, tc := range []struct{ name, module, script string }{
		{"kafka-python", "kafka", `
from kafka import KafkaAdminClient
a = KafkaAdminClient(bootstrap_servers=sys.argv[1], request_timeout_ms=20000)
d = a.describe_cluster()
print(json.dumps(sorted("%d=%s:%d" % (b["broker_id"], b["host"], b["port"]) for b in d["brokers"])))
a.close()
`},
		{"confluent-kafka-python", "confluent_kafka", `
from confluent_kafka.admin import AdminClient
m = AdminClient({"bootstrap.servers": sys.argv[1]}).list_topics(timeout=20)
print(json.dumps(sorted("%d=%s:%d" % (b.id, b.host, b.port) for b in m.brokers.values())))
`},
	} {
		if exec.Command(py, "-c", "import "+tc.module).Run() != nil {
			t.Logf("%s not run: no %s in %s", tc.name, tc.module, py)
			continue
		}
		out := runTool(t, 60*time.Second, "", py, "-c", "import sys, json\n"+tc.script, addr)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var got []string
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
			t.Fatalf("%s: %v\n%s", tc.name, err, out)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s through %s: brokers %q, want %q", tc.name, addr, got, want)
		}
		t.Logf("%s through %s: brokers %q", tc.name, addr, got)
	}
}

// TestClusterAdminForwarded: three nodes with the authorizer on (super
// user ANONYMOUS), dis_metadata_refresh and acl_refresh_interval 2 s.
// Through a node that is not the controller, and only it (every
// connection of the client goes to that node), kadm creates a topic,
// alters its retention.ms (DIS keeps 24 to 168 hours) and creates an ACL:
// the node forwards each to the controller, and every node shows the
// change within its refresh interval (plus 2 s of slack for the polling,
// each poll a request to each node): topics in a listing of every topic,
// the config in DescribeConfigs, the ACL in DescribeAcls. Kafka's Java
// tools (TopicCommand, ConfigCommand, AclCommand), bootstrapped at that
// node, do the same when their jars are installed (the Java admin client
// sends CreateTopics to the controller itself, the others to a node of
// its choosing).
func TestClusterAdminForwarded(t *testing.T) {
	if testing.Short() {
		t.Skip("long: admin writes through three cluster nodes")
	}
	t.Parallel()
	const refresh = 2 * time.Second
	c := startRollCluster(t, rollClusterOpts{env: []string{
		"DISGW_AUTHORIZER=true", "DISGW_SUPER_USERS=User:ANONYMOUS",
		"DISGW_DIS_METADATA_REFRESH=" + refresh.String(), "DISGW_ACL_REFRESH_INTERVAL=" + refresh.String(),
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	view := c.waitView(0)
	var via *rollNode
	for _, n := range c.nodes {
		if n.id != view.controller {
			via = n
			break
		}
	}
	t.Logf("controller %d; admin writes through node %d", view.controller, via.id)

	// visible waits until check passes on every node, logs the longest
	// wait and fails the test when it is over bound (+2 s).
	visible := func(what string, bound time.Duration, check func(addr string) string) {
		t.Helper()
		start := time.Now()
		var slowest time.Duration
		for _, n := range c.nodes {
			for {
				msg := check(n.addr)
				if msg == "" {
					slowest = max(slowest, time.Since(start))
					break
				}
				if time.Since(start) > 30*time.Second {
					t.Fatalf("%s: node %d after 30s: %s", what, n.id, msg)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		t.Logf("%s: on every node within %v", what, slowest.Round(time.Millisecond))
		if slowest > bound+2*time.Second {
			t.Errorf("%s: node showed it after %v, more than %v", what, slowest, bound)
		}
	}
	clients := map[string]*kgo.Client{} // one per node, every connection to it
	pinned := func(addr string) *kgo.Client {
		if cl := clients[addr]; cl != nil {
			return cl
		}
		cl, err := kgo.NewClient(append(pinToNode(addr), kgo.SeedBrokers(addr), kgo.RetryTimeout(20*time.Second))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		clients[addr] = cl
		return cl
	}
	// partitions is how many partitions addr's node lists for topic in
	// a Metadata of every topic (a topic named in a request is looked up
	// in DIS when unknown, a listing shows what the node knows).
	partitions := func(addr, topic string) int {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, pinned(addr))
		if err != nil {
			return 0
		}
		for _, tp := range resp.Topics {
			if tp.Topic != nil && *tp.Topic == topic && tp.ErrorCode == 0 {
				return len(tp.Partitions)
			}
		}
		return 0
	}
	topicConfig := func(addr, topic, key string) string {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		rcs, err := kadm.NewClient(pinned(addr)).DescribeTopicConfigs(ctx, topic)
		if err != nil {
			return err.Error()
		}
		rc, err := rcs.On(topic, nil)
		if err != nil {
			return err.Error()
		}
		return configValue(rc.Configs, key)
	}
	hasACL := func(addr, line string) bool {
		return slices.Contains(kadmACLs(ctx, t, addr, pinToNode(addr)...), line)
	}
	adm := kadm.NewClient(pinned(via.addr))
	if r, err := adm.CreateTopic(ctx, 3, -1, nil, "forwarded-kadm"); err != nil || r.Err != nil {
		t.Fatalf("CreateTopics through node %d: %v %v", via.id, err, r.Err)
	}
	visible("kadm: topic forwarded-kadm created", refresh, func(addr string) string {
		if n := partitions(addr, "forwarded-kadm"); n != 3 {
			return fmt.Sprintf("%d partitions", n)
		}
		return ""
	})
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("172800000")}}, "forwarded-kadm")
	if err == nil {
		var r kadm.AlterConfigsResponse
		if r, err = rs.On("forwarded-kadm", nil); err == nil {
			err = r.Err
		}
	}
	if err != nil {
		t.Fatalf("IncrementalAlterConfigs through node %d: %v", via.id, err)
	}
	visible("kadm: retention.ms of forwarded-kadm altered", refresh, func(addr string) string {
		if v := topicConfig(addr, "forwarded-kadm", "retention.ms"); v != "172800000" {
			return "retention.ms " + v
		}
		return ""
	})
	cr, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("forwarded-kadm").Allow("User:bob").AllowHosts("*").Operations(kadm.OpRead))
	if err == nil {
		for _, r := range cr {
			err = firstErr(err, r.Err)
		}
	}
	if err != nil {
		t.Fatalf("CreateACLs through node %d: %v", via.id, err)
	}
	visible("kadm: ACL created", refresh, func(addr string) string {
		if !hasACL(addr, "TOPIC forwarded-kadm LITERAL User:bob * READ ALLOW") {
			return "not listed"
		}
		return ""
	})

	java := kafkaTools(t)
	if java == nil {
		return
	}
	java(t, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", via.addr, "--create", "--topic", "forwarded-java", "--partitions", "2")
	visible("Java: topic forwarded-java created", refresh, func(addr string) string {
		if n := partitions(addr, "forwarded-java"); n != 2 {
			return fmt.Sprintf("%d partitions", n)
		}
		return ""
	})
	java(t, "org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", via.addr, "--alter", "--entity-type", "topics",
		"--entity-name", "forwarded-java", "--add-config", "retention.ms=259200000")
	visible("Java: retention.ms of forwarded-java altered", refresh, func(addr string) string {
		if v := topicConfig(addr, "forwarded-java", "retention.ms"); v != "259200000" {
			return "retention.ms " + v
		}
		return ""
	})
	java(t, "org.apache.kafka.tools.AclCommand", "--bootstrap-server", via.addr, "--add", "--allow-principal", "User:carol",
		"--operation", "Read", "--topic", "forwarded-java")
	visible("Java: ACL created", refresh, func(addr string) string {
		if !hasACL(addr, "TOPIC forwarded-java LITERAL User:carol * READ ALLOW") {
			return "not listed"
		}
		return ""
	})
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
