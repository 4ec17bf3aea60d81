package main

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
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

// TestGroupConfigsCluster: two `disgw serve --backend dis` nodes in
// cluster mode in front of one dislocal. GROUP configs of four groups
// (their coordinators spread over the nodes) altered through a client of
// both nodes are written by each group's coordinator (DIS's fence lets
// them through; a node call from the controller when it is not the
// coordinator): each group's heartbeat answers give its interval, and each
// node describes every group's value.
func TestGroupConfigsCluster(t *testing.T) {
	t.Parallel()
	d := startOpsDIS(t)
	nodes := []*opsNode{startOpsNode(t, d, 1), startOpsNode(t, d, 2)}
	eventually(t, "both nodes ready in one view", func() string {
		for _, n := range nodes {
			if body, code := httpGet(t, n.admin+"/readyz"); code != 200 {
				return fmt.Sprintf("node %d: %d %s", n.id, code, body)
			}
		}
		return ""
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(nodes[0].addr, nodes[1].addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	groups := map[string]string{"cfg-a": "6000", "cfg-b": "7000", "cfg-c": "8000", "cfg-d": "9000"}
	for g, v := range groups {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, g
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "consumer.heartbeat.interval.ms", kmsg.StringPtr(v)
		res.Configs = append(res.Configs, c)
		req.Resources = append(req.Resources, res)
		// Right after the view formed, a group's first write waits for the
		// fence's takeover (docs/cluster.md §6): an alter meanwhile may
		// time out, retriable, as a client retries it.
		eventually(t, "the alter of "+g, func() string {
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			r := resp.Resources[0]
			switch err := kerr.ErrorForCode(r.ErrorCode); {
			case err == nil:
				return ""
			case kerr.IsRetriable(err):
				return err.Error()
			}
			t.Fatalf("alter %s: %d %v", g, r.ErrorCode, *r.ErrorMessage)
			return ""
		})
	}
	for g, v := range groups {
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = g, "member-"+g, 0, 30000
		hb.SubscribedTopicNames, hb.Topics = []string{"any"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		var hr *kmsg.ConsumerGroupHeartbeatResponse
		eventually(t, "the coordinator of "+g+" loaded it", func() string {
			var err error
			if hr, err = hb.RequestWith(ctx, cl); err != nil {
				t.Fatal(err)
			}
			if hr.ErrorCode == kerr.CoordinatorLoadInProgress.Code {
				return "loading"
			}
			return ""
		})
		if hr.ErrorCode != 0 || fmt.Sprint(hr.HeartbeatIntervalMillis) != v {
			t.Errorf("heartbeat of %s: error %d, interval %d ms, want %s", g, hr.ErrorCode, hr.HeartbeatIntervalMillis, v)
		}
	}
	for _, n := range nodes {
		for g, v := range groups {
			// A raw connection to this node: kgo may send a group's
			// DescribeConfigs to any broker.
			conn, err := kgo.NewClient(kgo.SeedBrokers(n.addr))
			if err != nil {
				t.Fatal(err)
			}
			req := kmsg.NewPtrDescribeConfigsRequest()
			res := kmsg.NewDescribeConfigsRequestResource()
			res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, g
			res.ConfigNames = []string{"consumer.heartbeat.interval.ms"}
			req.Resources = append(req.Resources, res)
			resp, err := conn.Broker(n.id).RetriableRequest(ctx, req)
			conn.Close()
			if err != nil {
				t.Fatal(err)
			}
			dr := resp.(*kmsg.DescribeConfigsResponse).Resources[0]
			if len(dr.Configs) != 1 || *dr.Configs[0].Value != v {
				t.Errorf("node %d describes %s: %d %+v, want %s", n.id, g, dr.ErrorCode, dr.Configs, v)
			}
		}
	}
}
