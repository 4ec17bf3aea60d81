package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConfigsOnBothBackends, through a real gateway process on each
// backend: a topic created with compression.type=zstd and a zstd level
// takes gzip batches from franz-go and gives the records back intact;
// DescribeConfigs shows the values set as DYNAMIC_TOPIC_CONFIG with Kafka
// 4.4's synonyms, the backend's real retention default (DIS: 24 h, as
// STATIC_BROKER_CONFIG log.retention.ms) and the broker's real
// advertised.listeners; Metadata lists __consumer_offsets as internal; a
// gateway restart keeps the configs (the embedded store's metadata; on
// DIS, the stream's ext config checkpoint).
func TestConfigsOnBothBackends(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backendFixture) {
		wantRetention := "604800000 DEFAULT_CONFIG"
		if b.dis != nil {
			wantRetention = "86400000 STATIC_BROKER_CONFIG [log.retention.ms=86400000/STATIC_BROKER_CONFIG]"
		}
		gw := b.gateway(t, gatewayOpts{args: b.onDIS("--dis-region", "cn-north-4")})
		addr := gw.addr
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("cfg.zstd"),
			kgo.ProducerBatchCompression(kgo.GzipCompression()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		str := func(s string) *string { return &s }
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{
			"compression.type": str("zstd"), "compression.zstd.level": str("10"),
		}, "cfg.zstd"); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for i := range 10 {
			recs = append(recs, &kgo.Record{Key: fmt.Append(nil, i), Value: []byte(strings.Repeat("x", 100) + fmt.Sprint(i))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("cfg.zstd"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		for n := 0; n < 10; {
			fs := cons.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if string(r.Value) != strings.Repeat("x", 100)+string(r.Key) {
					t.Errorf("record %q = %q", r.Key, r.Value)
				}
				n++
			})
		}

		check := func(addr string) {
			t.Helper()
			c, err := kgo.NewClient(kgo.SeedBrokers(addr))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			req := kmsg.NewPtrDescribeConfigsRequest()
			req.IncludeSynonyms = true
			for _, rr := range []struct {
				typ  kmsg.ConfigResourceType
				name string
			}{{kmsg.ConfigResourceTypeTopic, "cfg.zstd"}, {kmsg.ConfigResourceTypeBroker, ""}} {
				res := kmsg.NewDescribeConfigsRequestResource()
				res.ResourceType, res.ResourceName = rr.typ, rr.name
				req.Resources = append(req.Resources, res)
			}
			resp, err := req.RequestWith(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, res := range resp.Resources {
				for _, cfg := range res.Configs {
					v := "<null>"
					if cfg.Value != nil {
						v = *cfg.Value
					}
					s := v + " " + cfg.Source.String()
					var syn []string
					for _, sy := range cfg.ConfigSynonyms {
						if sy.Source != kmsg.ConfigSourceDefaultConfig {
							syn = append(syn, sy.Name+"="+*sy.Value+"/"+sy.Source.String())
						}
					}
					if len(syn) > 0 {
						s += " [" + strings.Join(syn, " ") + "]"
					}
					got[res.ResourceType.String()+" "+cfg.Name] = s
				}
			}
			for k, v := range map[string]string{
				"TOPIC compression.type":       "zstd DYNAMIC_TOPIC_CONFIG [compression.type=zstd/DYNAMIC_TOPIC_CONFIG]",
				"TOPIC compression.zstd.level": "10 DYNAMIC_TOPIC_CONFIG [compression.zstd.level=10/DYNAMIC_TOPIC_CONFIG]",
				"TOPIC retention.ms":           wantRetention,
				"BROKER advertised.listeners":  "PLAINTEXT://" + addr + " STATIC_BROKER_CONFIG [advertised.listeners=PLAINTEXT://" + addr + "/STATIC_BROKER_CONFIG]",
			} {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			meta := kmsg.NewPtrMetadataRequest()
			mresp, err := meta.RequestWith(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			internal := false
			for _, tp := range mresp.Topics {
				internal = internal || *tp.Topic == "__consumer_offsets" && tp.IsInternal
			}
			if !internal {
				t.Error("__consumer_offsets is not listed as internal")
			}
		}
		check(addr)
		if code := gw.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("exit code %d", code)
		}
		addr = gw.restart(t).addr
		check(addr)
	}, credsAccount)
}
