package gateway_test

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/gateway"
)

// kafkaCapture is testdata/kafka44_describe_configs.json: Apache Kafka
// 4.4's DescribeConfigs v4 (one node, KRaft) for the topic configs-ref
// (retention.ms=3600000) and broker 1, made by gen_kafka_configs.go.
type kafkaCapture struct {
	WithSynonyms, Plain *kmsg.DescribeConfigsResponse
}

func loadKafkaCapture(t *testing.T) *kafkaCapture {
	t.Helper()
	b, err := os.ReadFile("testdata/kafka44_describe_configs.json")
	if err != nil {
		t.Fatal(err)
	}
	var c kafkaCapture
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

func captured(resp *kmsg.DescribeConfigsResponse, typ kmsg.ConfigResourceType) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	m := make(map[string]kmsg.DescribeConfigsResponseResourceConfig)
	for _, r := range resp.Resources {
		if r.ResourceType == typ {
			for _, c := range r.Configs {
				m[c.Name] = c
			}
		}
	}
	return m
}

func strp(p *string) string {
	if p == nil {
		return "<null>"
	}
	return strconv.Quote(*p)
}

func synonyms(c kmsg.DescribeConfigsResponseResourceConfig) []string {
	var out []string
	for _, s := range c.ConfigSynonyms {
		out = append(out, s.Name+"="+strp(s.Value)+"/"+s.Source.String())
	}
	return out
}

// describeConfigs sends DescribeConfigs at version for the topic configs-ref
// and broker 1 over a raw connection.
func describeConfigs(t *testing.T, r *rawConn, version int16, syn bool) *kmsg.DescribeConfigsResponse {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms, req.IncludeDocumentation = syn, syn
	for _, rr := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{{kmsg.ConfigResourceTypeTopic, "configs-ref"}, {kmsg.ConfigResourceTypeBroker, "1"}} {
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = rr.typ, rr.name
		req.Resources = append(req.Resources, res)
	}
	resp := r.roundTrip(version, req).(*kmsg.DescribeConfigsResponse)
	for _, res := range resp.Resources {
		if res.ErrorCode != 0 {
			t.Fatalf("%s %s: error %d", res.ResourceType, res.ResourceName, res.ErrorCode)
		}
	}
	return resp
}

func createConfigsRef(t *testing.T, r *rawConn) {
	t.Helper()
	ct := kmsg.NewPtrCreateTopicsRequest()
	tp := kmsg.NewCreateTopicsRequestTopic()
	tp.Topic, tp.NumPartitions, tp.ReplicationFactor = "configs-ref", 1, 1
	c := kmsg.NewCreateTopicsRequestTopicConfig()
	c.Name, c.Value = "retention.ms", kmsg.StringPtr("3600000")
	tp.Configs = append(tp.Configs, c)
	ct.Topics = append(ct.Topics, tp)
	ct.TimeoutMillis = 10000
	if resp := r.roundTrip(4, ct).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %d", resp.Topics[0].ErrorCode)
	}
}

// topicValueDiffs are the topic keys whose value differs from a default
// Kafka 4.4 broker's on purpose: the gateway's real value, at disgw's own
// default (DEFAULT_CONFIG). Values are the gateway's in the test config.
var topicValueDiffs = map[string]string{
	// disgw does not refuse batches from the future.
	"message.timestamp.after.max.ms": "9223372036854775807",
	// The gateway's max_decompressed_message_bytes (100 MiB by default),
	// which it enforces per batch; Kafka's is near 2 GiB.
	"max.decompressed.message.bytes": "104857600",
}

// brokerValueDiffs are the broker keys whose default differs from Kafka's
// on purpose: disgw's own default (DEFAULT_CONFIG).
var brokerValueDiffs = map[string]string{
	"log.message.timestamp.after.max.ms": "9223372036854775807",
	"max.decompressed.message.bytes":     "104857600",
	"max.connections":                    "4096", // max_connections
	"max.connections.per.ip":             "1024", // max_connections_per_ip
}

// TestDescribeConfigsMatchesKafka compares the gateway's DescribeConfigs
// v4 (with synonyms and documentation) for a topic with retention.ms set
// and for the broker with Kafka 4.4's captured answer, field by field.
func TestDescribeConfigsMatchesKafka(t *testing.T) {
	c := loadKafkaCapture(t)
	g := startGateway(t, func(c *gateway.Config) { c.NodeID = 1 })
	r := g.raw(t)
	createConfigsRef(t, r)
	resp := describeConfigs(t, r, 4, true)
	want, got := captured(c.WithSynonyms, kmsg.ConfigResourceTypeTopic), captured(resp, kmsg.ConfigResourceTypeTopic)
	// Kafka's keys and disgw's own dis.record.format.
	if len(got) != len(want)+1 || got["dis.record.format"].Value == nil {
		t.Errorf("topic: %d keys, Kafka has %d and disgw's dis.record.format", len(got), len(want))
	}
	for name, w := range want {
		gc, ok := got[name]
		if !ok {
			t.Errorf("topic key %s missing", name)
			continue
		}
		if v, ok := topicValueDiffs[name]; ok {
			if strp(gc.Value) != strconv.Quote(v) || gc.Source != kmsg.ConfigSourceDefaultConfig || len(gc.ConfigSynonyms) != 1 ||
				strp(gc.ConfigSynonyms[0].Value) != strconv.Quote(v) || gc.ConfigSynonyms[0].Source != kmsg.ConfigSourceDefaultConfig {
				t.Errorf("topic %s = %s (%s) %q, want the gateway's %s (DEFAULT_CONFIG, and as its synonym's)", name, strp(gc.Value), gc.Source, synonyms(gc), v)
			}
		} else {
			if strp(gc.Value) != strp(w.Value) || gc.Source != w.Source {
				t.Errorf("topic %s = %s (%s), Kafka %s (%s)", name, strp(gc.Value), gc.Source, strp(w.Value), w.Source)
			}
			if g, w := synonyms(gc), synonyms(w); !slicesEqual(g, w) {
				t.Errorf("topic %s synonyms %q, Kafka %q", name, g, w)
			}
		}
		if gc.ReadOnly != w.ReadOnly || gc.IsSensitive != w.IsSensitive || gc.ConfigType != w.ConfigType {
			t.Errorf("topic %s ro %v sensitive %v type %s, Kafka %v %v %s", name, gc.ReadOnly, gc.IsSensitive, gc.ConfigType, w.ReadOnly, w.IsSensitive, w.ConfigType)
		}
		if strp(gc.Documentation) != strp(w.Documentation) {
			t.Errorf("topic %s documentation %s, Kafka %s", name, strp(gc.Documentation), strp(w.Documentation))
		}
	}

	want, got = captured(c.WithSynonyms, kmsg.ConfigResourceTypeBroker), captured(resp, kmsg.ConfigResourceTypeBroker)
	if len(got) != len(want) {
		t.Errorf("broker: %d keys, Kafka has %d", len(got), len(want))
	}
	for name, w := range want {
		gc, ok := got[name]
		if !ok {
			t.Errorf("broker key %s missing", name)
			continue
		}
		if gc.IsSensitive != w.IsSensitive || gc.ConfigType != w.ConfigType || strp(gc.Documentation) != strp(w.Documentation) {
			t.Errorf("broker %s sensitive %v type %s doc %.30s, Kafka %v %s %.30s", name, gc.IsSensitive, gc.ConfigType, strp(gc.Documentation), w.IsSensitive, w.ConfigType, strp(w.Documentation))
		}
		if !gc.ReadOnly {
			t.Errorf("broker %s not read-only", name)
		}
		if v, ok := brokerValueDiffs[name]; ok {
			if strp(gc.Value) != strconv.Quote(v) || gc.Source != kmsg.ConfigSourceDefaultConfig {
				t.Errorf("broker %s = %s (%s), want disgw's default %s", name, strp(gc.Value), gc.Source, v)
			}
		} else if gc.Source == kmsg.ConfigSourceDefaultConfig && w.Source == kmsg.ConfigSourceDefaultConfig {
			if strp(gc.Value) != strp(w.Value) || !slicesEqual(synonyms(gc), synonyms(w)) {
				t.Errorf("broker %s = %s %q, Kafka %s %q", name, strp(gc.Value), synonyms(gc), strp(w.Value), synonyms(w))
			}
		}
	}
	// The keys clients read, with the gateway's values.
	for name, v := range map[string]string{
		"advertised.listeners":             "PLAINTEXT://" + g.addr,
		"broker.id":                        "1",
		"node.id":                          "1",
		"auto.create.topics.enable":        "true",
		"offsets.topic.num.partitions":     "50",
		"offsets.topic.replication.factor": "1",
		"min.insync.replicas":              "1",
	} {
		if gv := strp(got[name].Value); gv != strconv.Quote(v) {
			t.Errorf("broker %s = %s, want %q", name, gv, v)
		}
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDescribeConfigsVersions: what each version carries, as in Kafka's
// capture without synonyms and documentation (v4 plain) and by the
// version's fields: v0 IsDefault (Kafka 3.x: source DEFAULT_CONFIG) and
// no synonyms; v1+ synonyms only when asked; v3+ documentation only when
// asked.
func TestDescribeConfigsVersions(t *testing.T) {
	c := loadKafkaCapture(t)
	g := startGateway(t, func(c *gateway.Config) { c.NodeID = 1 })
	r := g.raw(t)
	createConfigsRef(t, r)
	plain := captured(c.Plain, kmsg.ConfigResourceTypeTopic)
	for _, tc := range []struct {
		version  int16
		syn      bool
		wantSyn  bool
		wantDocs bool
	}{
		{0, false, false, false}, {0, true, false, false},
		{1, false, false, false}, {1, true, true, false},
		{3, false, false, false}, {3, true, true, true},
		{4, false, false, false}, {4, true, true, true},
	} {
		resp := describeConfigs(t, r, tc.version, tc.syn)
		got := captured(resp, kmsg.ConfigResourceTypeTopic)
		ret, mib := got["retention.ms"], got["max.message.bytes"]
		if strp(ret.Value) != `"3600000"` || strp(mib.Value) != `"1048588"` {
			t.Fatalf("v%d: retention.ms %s max.message.bytes %s", tc.version, strp(ret.Value), strp(mib.Value))
		}
		if tc.version == 0 && (ret.IsDefault || !mib.IsDefault) {
			t.Errorf("v0: IsDefault of a set retention.ms %v, of max.message.bytes %v", ret.IsDefault, mib.IsDefault)
		}
		if tc.version >= 1 && (ret.Source != kmsg.ConfigSourceDynamicTopicConfig || mib.Source != kmsg.ConfigSourceDefaultConfig) {
			t.Errorf("v%d: sources %s %s", tc.version, ret.Source, mib.Source)
		}
		if hasSyn := len(mib.ConfigSynonyms) > 0; hasSyn != tc.wantSyn {
			t.Errorf("v%d synonyms=%v: max.message.bytes synonyms %q", tc.version, tc.syn, synonyms(mib))
		}
		if hasDoc := mib.Documentation != nil; hasDoc != tc.wantDocs {
			t.Errorf("v%d documentation=%v: documentation %s", tc.version, tc.syn, strp(mib.Documentation))
		}
		if tc.version == 4 && !tc.syn {
			for name, w := range plain {
				gc := got[name]
				if _, diff := topicValueDiffs[name]; diff {
					continue
				}
				if strp(gc.Value) != strp(w.Value) || gc.Source != w.Source || gc.ConfigType != w.ConfigType ||
					len(gc.ConfigSynonyms) != len(w.ConfigSynonyms) || strp(gc.Documentation) != strp(w.Documentation) {
					t.Errorf("v4 plain %s: %s %s %s %d syn %s; Kafka %s %s %s %d syn %s", name, strp(gc.Value), gc.Source, gc.ConfigType, len(gc.ConfigSynonyms), strp(gc.Documentation),
						strp(w.Value), w.Source, w.ConfigType, len(w.ConfigSynonyms), strp(w.Documentation))
				}
			}
		}
	}
}

// TestDescribeConfigsOperatorSet: a broker value the operator set (here
// max_message_bytes) is STATIC_BROKER_CONFIG with Kafka's default as its
// second synonym, and a topic at its default reports it from there, as
// Kafka does for a value in server.properties.
func TestDescribeConfigsOperatorSet(t *testing.T) {
	g := startGateway(t, func(c *gateway.Config) { c.NodeID, c.MaxMessageBytes = 1, 2000000 })
	r := g.raw(t)
	createConfigsRef(t, r)
	resp := describeConfigs(t, r, 4, true)
	b := captured(resp, kmsg.ConfigResourceTypeBroker)["message.max.bytes"]
	tp := captured(resp, kmsg.ConfigResourceTypeTopic)["max.message.bytes"]
	want := []string{`message.max.bytes="2000000"/STATIC_BROKER_CONFIG`, `message.max.bytes="1048588"/DEFAULT_CONFIG`}
	if strp(b.Value) != `"2000000"` || b.Source != kmsg.ConfigSourceStaticBrokerConfig || !slicesEqual(synonyms(b), want) {
		t.Errorf("broker message.max.bytes %s %s %q", strp(b.Value), b.Source, synonyms(b))
	}
	if strp(tp.Value) != `"2000000"` || tp.Source != kmsg.ConfigSourceStaticBrokerConfig || !slicesEqual(synonyms(tp), want) {
		t.Errorf("topic max.message.bytes %s %s %q", strp(tp.Value), tp.Source, synonyms(tp))
	}
}

// TestDescribeConfigsProducerIDExpiration: the broker's
// producer.id.expiration.ms is the producer_id_expiration setting, in ms:
// at disgw's default Kafka's default (DEFAULT_CONFIG), set otherwise
// STATIC_BROKER_CONFIG.
func TestDescribeConfigsProducerIDExpiration(t *testing.T) {
	for _, tc := range []struct {
		set    time.Duration
		value  string
		source kmsg.ConfigSource
	}{
		{0, "86400000", kmsg.ConfigSourceDefaultConfig},
		{90 * time.Minute, "5400000", kmsg.ConfigSourceStaticBrokerConfig},
	} {
		g := startGateway(t, func(c *gateway.Config) { c.NodeID, c.ProducerIDExpiration = 1, tc.set })
		r := g.raw(t)
		createConfigsRef(t, r)
		e := captured(describeConfigs(t, r, 4, true), kmsg.ConfigResourceTypeBroker)["producer.id.expiration.ms"]
		if strp(e.Value) != strconv.Quote(tc.value) || e.Source != tc.source || !e.ReadOnly {
			t.Errorf("set %v: producer.id.expiration.ms = %s (%s, read-only %v), want %q (%s, read-only)",
				tc.set, strp(e.Value), e.Source, e.ReadOnly, tc.value, tc.source)
		}
	}
}
