package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestExplicitTopicConfigs, through a real gateway process on each
// backend: a topic config set explicitly to its default value is
// DYNAMIC_TOPIC_CONFIG in DescribeConfigs, as Apache Kafka 4.4 reports
// it; IncrementalAlterConfigs DELETE and AlterConfigs (which replaces the
// whole set) make keys DEFAULT_CONFIG again; cleanup.policy keeps the
// order given, trimmed and without repeats ("delete,compact" stays so, "
// compact , delete,compact" is "compact,delete"), as Kafka 4.4 answered.
// All of it is kept across a gateway restart (the embedded store's stream
// metadata; on DIS the stream's tags and ext config checkpoint, read by a
// new gateway node).
func TestExplicitTopicConfigs(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backendFixture) {
		retention := "604800000" // the gateway's default retention.ms
		if b.dis != nil {
			retention = "86400000"
		}
		gw := b.gateway(t, gatewayOpts{args: append([]string{"--log-level", "warn"}, b.onDIS("--dis-region", "cn-north-4")...)})
		addr := gw.addr
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		str := func(s string) *string { return &s }
		if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
			"cleanup.policy": str("delete"), "segment.ms": str("604800000"),
			"message.timestamp.type": str("CreateTime"), "retention.ms": str(retention),
		}, "explicit.a"); err != nil {
			t.Fatal(err)
		}
		if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
			"cleanup.policy": str(" compact , delete,compact"), "message.timestamp.type": str("CreateTime"),
		}, "explicit.b"); err != nil {
			t.Fatal(err)
		}
		describe := func(addr string) map[string]string {
			t.Helper()
			c, err := kgo.NewClient(kgo.SeedBrokers(addr))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			req := kmsg.NewPtrDescribeConfigsRequest()
			req.IncludeSynonyms = true
			for _, name := range []string{"explicit.a", "explicit.b"} {
				res := kmsg.NewDescribeConfigsRequestResource()
				res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, name
				req.Resources = append(req.Resources, res)
			}
			resp, err := req.RequestWith(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, res := range resp.Resources {
				if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
					t.Fatalf("describe %s: %v", res.ResourceName, err)
				}
				for _, cfg := range res.Configs {
					s := "<null>"
					if cfg.Value != nil {
						s = *cfg.Value
					}
					s += " " + cfg.Source.String()
					if len(cfg.ConfigSynonyms) > 0 {
						s += " " + cfg.ConfigSynonyms[0].Source.String()
					}
					got[res.ResourceName+" "+cfg.Name] = s
				}
			}
			return got
		}
		expect := func(what string, got, want map[string]string) {
			t.Helper()
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: %s = %q, want %q", what, k, got[k], v)
				}
			}
		}
		const dyn = " DYNAMIC_TOPIC_CONFIG DYNAMIC_TOPIC_CONFIG"
		expect("created", describe(addr), map[string]string{
			"explicit.a cleanup.policy":         "delete" + dyn,
			"explicit.a segment.ms":             "604800000" + dyn,
			"explicit.a message.timestamp.type": "CreateTime" + dyn,
			"explicit.a retention.ms":           retention + dyn,
			"explicit.a segment.bytes":          "1073741824 DEFAULT_CONFIG DEFAULT_CONFIG",
			"explicit.b cleanup.policy":         "compact,delete" + dyn,
			"explicit.b message.timestamp.type": "CreateTime" + dyn,
		})

		// IncrementalAlterConfigs: DELETE unsets, SET keeps the order.
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.DeleteConfig, Name: "segment.ms"},
			{Op: kadm.SetConfig, Name: "cleanup.policy", Value: str("delete,compact")},
		}, "explicit.a")
		if err != nil || rs[0].Err != nil {
			t.Fatalf("IncrementalAlterConfigs: %v %v", err, rs)
		}
		// AlterConfigs replaces the whole set.
		areq := kmsg.NewPtrAlterConfigsRequest()
		ares := kmsg.NewAlterConfigsRequestResource()
		ares.ResourceType, ares.ResourceName = kmsg.ConfigResourceTypeTopic, "explicit.b"
		acfg := kmsg.NewAlterConfigsRequestResourceConfig()
		acfg.Name, acfg.Value = "retention.ms", str(retention)
		ares.Configs = append(ares.Configs, acfg)
		areq.Resources = append(areq.Resources, ares)
		aresp, err := areq.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if err := kerr.ErrorForCode(aresp.Resources[0].ErrorCode); err != nil {
			t.Fatalf("AlterConfigs: %v", err)
		}
		altered := map[string]string{
			"explicit.a cleanup.policy":         "delete,compact" + dyn,
			"explicit.a segment.ms":             "604800000 DEFAULT_CONFIG", // log.roll.ms has no default
			"explicit.a message.timestamp.type": "CreateTime" + dyn,
			"explicit.a retention.ms":           retention + dyn,
			"explicit.b cleanup.policy":         "delete DEFAULT_CONFIG DEFAULT_CONFIG",
			"explicit.b message.timestamp.type": "CreateTime DEFAULT_CONFIG DEFAULT_CONFIG",
			"explicit.b retention.ms":           retention + dyn,
		}
		expect("altered", describe(addr), altered)
		if code := gw.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("exit code %d", code)
		}
		addr = gw.restart(t).addr
		expect("after a restart", describe(addr), altered)
	}, credsAccount)
}
