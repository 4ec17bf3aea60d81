package main

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupConfigsOnBothBackends, through a real gateway process on each
// backend: a GROUP config set with IncrementalAlterConfigs (as
// kafka-configs --entity-type groups --alter does) is described as
// GROUP_CONFIG and listed by ListConfigResources, after a restart too (the
// embedded store's Pebble; on DIS the stream __disgw_groups), and on DIS by
// a second gateway in front of the same project, which never saw the
// alter: nothing lives only on a gateway host. The restarted gateway's
// consumer group heartbeat answers give the group's interval.
func TestGroupConfigsOnBothBackends(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backendFixture) {
		gw := b.gateway(t, gatewayOpts{})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		client := func(addr string) *kgo.Client {
			t.Helper()
			c, err := kgo.NewClient(kgo.SeedBrokers(addr))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			return c
		}
		alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
		ar := kmsg.NewIncrementalAlterConfigsRequestResource()
		ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "cfg-group"
		ac := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		ac.Name, ac.Value = "consumer.heartbeat.interval.ms", kmsg.StringPtr("7000")
		ar.Configs = append(ar.Configs, ac)
		alter.Resources = append(alter.Resources, ar)
		resp, err := alter.RequestWith(ctx, client(gw.addr))
		if err != nil {
			t.Fatal(err)
		}
		if res := resp.Resources[0]; res.ErrorCode != 0 {
			t.Fatalf("alter: %d %v", res.ErrorCode, res.ErrorMessage)
		}

		check := func(addr, when string) {
			t.Helper()
			c := client(addr)
			req := kmsg.NewPtrDescribeConfigsRequest()
			res := kmsg.NewDescribeConfigsRequestResource()
			res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "cfg-group"
			res.ConfigNames = []string{"consumer.heartbeat.interval.ms"}
			req.Resources = append(req.Resources, res)
			dr, err := req.RequestWith(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if cfgs := dr.Resources[0].Configs; len(cfgs) != 1 || *cfgs[0].Value != "7000" || cfgs[0].Source != kmsg.ConfigSourceGroupConfig {
				t.Fatalf("%s: described %+v", when, cfgs)
			}
			list := kmsg.NewPtrListConfigResourcesRequest()
			list.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeGroupConfig)}
			lr, err := list.RequestWith(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, r := range lr.ConfigResources {
				names = append(names, r.Name)
			}
			if !slices.Equal(names, []string{"cfg-group"}) {
				t.Fatalf("%s: listed %q", when, names)
			}
		}
		check(gw.addr, "after the alter")
		if b.dis != nil {
			other := b.gateway(t, gatewayOpts{})
			check(other.addr, "at another gateway")
			if code := other.stop(t, syscall.SIGTERM); code != 0 {
				t.Fatalf("exit code %d", code)
			}
		}
		if code := gw.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("exit code %d", code)
		}
		gw = gw.restart(t)
		check(gw.addr, "after a restart")

		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "cfg-group", "member-1", 0, 30000
		hb.SubscribedTopicNames, hb.Topics = []string{"any"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		hr, err := hb.RequestWith(ctx, client(gw.addr))
		if err != nil {
			t.Fatal(err)
		}
		if hr.ErrorCode != 0 || hr.HeartbeatIntervalMillis != 7000 {
			t.Fatalf("heartbeat: error %d, interval %d ms, want 7000", hr.ErrorCode, hr.HeartbeatIntervalMillis)
		}
		if code := gw.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("exit code %d", code)
		}
	})
}
