package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
)

// groupConfigOp is one IncrementalAlterConfigs entry.
func groupConfigOp(name string, op int8, value *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = name, kmsg.IncrementalAlterConfigOp(op), value
	return c
}

// alterGroupConfigs sends IncrementalAlterConfigs v1 for group and returns
// its resource's answer.
func alterGroupConfigs(r *rawConn, group string, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsResponseResource {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.Configs = kmsg.ConfigResourceTypeGroupConfig, group, ops
	req.Resources = append(req.Resources, res)
	return r.roundTrip(1, req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
}

// describeGroupConfigs sends DescribeConfigs v4 (synonyms, documentation)
// for groups and lists each config as "name=value source [synonyms]".
func describeGroupConfigs(t *testing.T, r *rawConn, groups ...string) *kmsg.DescribeConfigsResponse {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms, req.IncludeDocumentation = true, true
	for _, g := range groups {
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, g
		req.Resources = append(req.Resources, res)
	}
	return r.roundTrip(4, req).(*kmsg.DescribeConfigsResponse)
}

func groupConfigLines(res kmsg.DescribeConfigsResponseResource) []string {
	var out []string
	for _, c := range res.Configs {
		var syn []string
		for _, s := range c.ConfigSynonyms {
			syn = append(syn, fmt.Sprintf("%s=%s %s", s.Name, *s.Value, s.Source))
		}
		out = append(out, fmt.Sprintf("%s=%s %s %s [%s]", c.Name, *c.Value, c.Source, c.ConfigType, strings.Join(syn, ", ")))
	}
	return out
}

// TestGroupConfigs: GROUP config resources (kafka-configs --entity-type
// groups) answer as a one-node Kafka 4.4 broker answered the same
// requests: DescribeConfigs of any group (existing or not) lists the
// consumer group configs at the broker's defaults with their broker
// synonyms, an override as GROUP_CONFIG with itself then the default as
// synonyms; IncrementalAlterConfigs' refusals carry Kafka's codes and
// messages; ListConfigResources lists the groups with overrides first. The
// overrides survive a restart, and a consumer group's heartbeat answers
// give its consumer.heartbeat.interval.ms.
func TestGroupConfigs(t *testing.T) {
	g := startGateway(t, consumerProtocol)
	r := g.raw(t)
	s := func(v string) *string { return &v }

	defaults := []string{
		"consumer.assignment.interval.ms=0 DEFAULT_CONFIG INT [group.consumer.assignment.interval.ms=0 DEFAULT_CONFIG]",
		"consumer.heartbeat.interval.ms=5000 DEFAULT_CONFIG INT [group.consumer.heartbeat.interval.ms=5000 DEFAULT_CONFIG]",
		"consumer.session.timeout.ms=45000 DEFAULT_CONFIG INT [group.consumer.session.timeout.ms=45000 DEFAULT_CONFIG]",
	}
	d := describeGroupConfigs(t, r, "nonexistent", "")
	if res := d.Resources[0]; res.ErrorCode != 0 || !slices.Equal(groupConfigLines(res), defaults) {
		t.Fatalf("described: %v %q, want %q", kerr.ErrorForCode(res.ErrorCode), groupConfigLines(res), defaults)
	}
	if doc := d.Resources[0].Configs[2].Documentation; doc == nil || *doc != "The timeout to detect client failures when using the consumer group protocol." {
		t.Errorf("documentation %v", doc)
	}
	if res := d.Resources[1]; res.ErrorCode != kerr.InvalidRequest.Code || res.ErrorMessage == nil || *res.ErrorMessage != "Group name must not be empty" {
		t.Errorf("empty group name: %v %v", kerr.ErrorForCode(res.ErrorCode), res.ErrorMessage)
	}

	for _, tc := range []struct {
		name  string
		group string
		ops   []kmsg.IncrementalAlterConfigsRequestResourceConfig
		code  int16
		msg   string
	}{
		{"not an INT", "g", []kmsg.IncrementalAlterConfigsRequestResourceConfig{groupConfigOp("consumer.session.timeout.ms", 0, s("abc"))},
			kerr.InvalidConfig.Code, "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"},
		{"below the broker's minimum", "g", []kmsg.IncrementalAlterConfigsRequestResourceConfig{groupConfigOp("consumer.session.timeout.ms", 0, s("5"))},
			kerr.InvalidConfig.Code, "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."},
		{"above the broker's maximum", "g", []kmsg.IncrementalAlterConfigsRequestResourceConfig{groupConfigOp("consumer.heartbeat.interval.ms", 0, s("46000"))},
			kerr.InvalidConfig.Code, "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."},
		{"negative assignment interval", "g", []kmsg.IncrementalAlterConfigsRequestResourceConfig{groupConfigOp("consumer.assignment.interval.ms", 0, s("-1"))},
			kerr.InvalidConfig.Code, "Invalid value -1 for configuration consumer.assignment.interval.ms: Value must be at least 0"},
		{"null SET", "g", []kmsg.IncrementalAlterConfigsRequestResourceConfig{groupConfigOp("consumer.session.timeout.ms", 0, nil)},
			kerr.InvalidRequest.Code, "Null value not supported for : consumer.session.timeout.ms"},
		{"APPEND", "g", []kmsg.IncrementalAlterConfigsRequestResourceConfig{groupConfigOp("consumer.session.timeout.ms", 2, s("50000"))},
			kerr.InvalidConfig.Code, "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST."},
		{"unknown", "g", []kmsg.IncrementalAlterConfigsRequestResourceConfig{groupConfigOp("foo.bar", 0, s("1"))},
			kerr.InvalidConfig.Code, "Unknown group config name: foo.bar"},
		{"a share group's", "g", []kmsg.IncrementalAlterConfigsRequestResourceConfig{groupConfigOp("share.session.timeout.ms", 0, s("50000"))},
			kerr.InvalidConfig.Code, "Group config share.session.timeout.ms is not supported: disgw serves no share groups (KIP-932)"},
		{"duplicate", "g", []kmsg.IncrementalAlterConfigsRequestResourceConfig{groupConfigOp("consumer.session.timeout.ms", 0, s("50000")), groupConfigOp("consumer.session.timeout.ms", 1, nil)},
			kerr.InvalidRequest.Code, "Error due to duplicate config keys"},
		{"empty group", "", []kmsg.IncrementalAlterConfigsRequestResourceConfig{groupConfigOp("consumer.heartbeat.interval.ms", 0, s("6000"))},
			kerr.InvalidRequest.Code, "Default group resources are not allowed."},
		{"DELETE of an unknown key", "g3", []kmsg.IncrementalAlterConfigsRequestResourceConfig{groupConfigOp("foo", 1, nil)}, 0, ""},
		{"set", "g", []kmsg.IncrementalAlterConfigsRequestResourceConfig{groupConfigOp("consumer.session.timeout.ms", 0, s("50000")), groupConfigOp("consumer.heartbeat.interval.ms", 0, s(" 6000"))}, 0, ""},
	} {
		res := alterGroupConfigs(r, tc.group, tc.ops...)
		msg := ""
		if res.ErrorMessage != nil {
			msg = *res.ErrorMessage
		}
		if res.ErrorCode != tc.code || msg != tc.msg {
			t.Errorf("%s: %v %q, want %v %q", tc.name, kerr.ErrorForCode(res.ErrorCode), msg, kerr.ErrorForCode(tc.code), tc.msg)
		}
	}

	set := []string{
		defaults[0],
		"consumer.heartbeat.interval.ms=6000 GROUP_CONFIG INT [consumer.heartbeat.interval.ms=6000 GROUP_CONFIG, group.consumer.heartbeat.interval.ms=5000 DEFAULT_CONFIG]",
		"consumer.session.timeout.ms=50000 GROUP_CONFIG INT [consumer.session.timeout.ms=50000 GROUP_CONFIG, group.consumer.session.timeout.ms=45000 DEFAULT_CONFIG]",
	}
	check := func(r *rawConn, when string) {
		t.Helper()
		if got := groupConfigLines(describeGroupConfigs(t, r, "g").Resources[0]); !slices.Equal(got, set) {
			t.Fatalf("%s: described %q, want %q", when, got, set)
		}
		list := kmsg.NewPtrListConfigResourcesRequest()
		got := configResources(r.roundTrip(1, list).(*kmsg.ListConfigResourcesResponse))
		if len(got) < 1 || got[0] != "GROUP_CONFIG g" || slices.Contains(got, "GROUP_CONFIG g3") {
			t.Fatalf("%s: listed %q, want GROUP_CONFIG g first and no g3", when, got)
		}
	}
	check(r, "after the alter")
	g.stop(t)
	g = startGatewayAt(t, g.dir, consumerProtocol)
	r = g.raw(t)
	check(r, "after a restart")

	// A consumer group's heartbeat answers give its interval.
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "g", "member-1", 0, 30000
	hb.SubscribedTopicNames, hb.Topics = []string{"any"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if resp := r.roundTrip(1, hb).(*kmsg.ConsumerGroupHeartbeatResponse); resp.ErrorCode != 0 || resp.HeartbeatIntervalMillis != 6000 {
		t.Fatalf("heartbeat: %v, interval %d ms, want 6000", kerr.ErrorForCode(resp.ErrorCode), resp.HeartbeatIntervalMillis)
	}

	// DELETE puts a key back to the default; none left: not listed.
	if res := alterGroupConfigs(r, "g", groupConfigOp("consumer.session.timeout.ms", 1, nil), groupConfigOp("consumer.heartbeat.interval.ms", 1, nil)); res.ErrorCode != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(res.ErrorCode))
	}
	if got := groupConfigLines(describeGroupConfigs(t, r, "g").Resources[0]); !slices.Equal(got, defaults) {
		t.Fatalf("after DELETE: %q", got)
	}
	list := kmsg.NewPtrListConfigResourcesRequest()
	list.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeGroupConfig)}
	if got := configResources(r.roundTrip(1, list).(*kmsg.ListConfigResourcesResponse)); len(got) != 0 {
		t.Fatalf("listed after DELETE: %q", got)
	}

	// AlterConfigs (API 33) replaces every override, as Kafka 4.4's does.
	if res := alterGroupConfigs(r, "g", groupConfigOp("consumer.session.timeout.ms", 0, s("50000"))); res.ErrorCode != 0 {
		t.Fatalf("set: %v", kerr.ErrorForCode(res.ErrorCode))
	}
	ac := kmsg.NewPtrAlterConfigsRequest()
	acr := kmsg.NewAlterConfigsRequestResource()
	acr.ResourceType, acr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
	acc := kmsg.NewAlterConfigsRequestResourceConfig()
	acc.Name, acc.Value = "consumer.heartbeat.interval.ms", s("6000")
	acr.Configs = append(acr.Configs, acc)
	ac.Resources = append(ac.Resources, acr)
	if res := r.roundTrip(2, ac).(*kmsg.AlterConfigsResponse).Resources[0]; res.ErrorCode != 0 {
		t.Fatalf("AlterConfigs: %v", kerr.ErrorForCode(res.ErrorCode))
	}
	if got := groupConfigLines(describeGroupConfigs(t, r, "g").Resources[0]); !slices.Equal(got, []string{defaults[0], set[1], defaults[2]}) {
		t.Fatalf("after AlterConfigs: %q", got)
	}
	if res := alterGroupConfigs(r, "g", groupConfigOp("consumer.heartbeat.interval.ms", 1, nil)); res.ErrorCode != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(res.ErrorCode))
	}
	if got := configResources(r.roundTrip(1, list).(*kmsg.ListConfigResourcesResponse)); len(got) != 0 {
		t.Fatalf("listed after DELETE: %q", got)
	}
}

// TestGroupConfigsACL: with the authorizer, describing a group's configs
// needs DESCRIBE_CONFIGS on the group and altering them ALTER_CONFIGS on
// it, else GROUP_AUTHORIZATION_FAILED for that resource, as Kafka 4.4's
// ConfigHelper and AuthHelper check them (READ on the group is not
// enough).
func TestGroupConfigsACL(t *testing.T) {
	g := setPrincipals(startGateway(t, authConfig))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(g.client(t, from(ipAdmin)))
	if _, err := adm.CreateACLs(ctx, kadm.NewACLs().Groups("team-a-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow("User:alice").AllowHosts("*").Operations(kadm.OpRead, kadm.OpDescribeConfigs)); err != nil {
		t.Fatal(err)
	}
	alice := g.client(t, from(ipAlice))
	describe := func(group string) int16 {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		if rr := resp.Resources[0]; rr.ErrorCode != 0 || len(rr.Configs) == 3 {
			return rr.ErrorCode
		}
		t.Fatalf("described %s with %d configs", group, len(resp.Resources[0].Configs))
		return 0
	}
	alter := func(group string) int16 {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		res.Configs = append(res.Configs, groupConfigOp("consumer.heartbeat.interval.ms", 0, kmsg.StringPtr("6000")))
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Resources[0].ErrorCode
	}
	for _, tc := range []struct {
		what string
		got  int16
		want int16
	}{
		{"describe team-a-g (DESCRIBE_CONFIGS)", describe("team-a-g"), 0},
		{"describe other-g", describe("other-g"), kerr.GroupAuthorizationFailed.Code},
		{"alter team-a-g (no ALTER_CONFIGS)", alter("team-a-g"), kerr.GroupAuthorizationFailed.Code},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.what, kerr.ErrorForCode(tc.got), kerr.ErrorForCode(tc.want))
		}
	}
	if _, err := adm.CreateACLs(ctx, kadm.NewACLs().Groups("team-a-g").Allow("User:alice").AllowHosts("*").Operations(kadm.OpAlterConfigs)); err != nil {
		t.Fatal(err)
	}
	if code := alter("team-a-g"); code != 0 {
		t.Fatalf("alter with ALTER_CONFIGS: %v", kerr.ErrorForCode(code))
	}
}

// TestGroupConfigsCluster: with two nodes, a group's configs are written
// by its coordinator: an alter sent to the controller (node 0) for a
// group node 1 coordinates is applied by node 1 (a node call), one sent
// to node 1 reaches it through the controller; both nodes describe and
// list the values, and node 1's heartbeat answers give the interval.
func TestGroupConfigsCluster(t *testing.T) {
	tc := startCluster(t, 2, nil, consumerProtocol)
	group := ""
	for i := 0; group == ""; i++ {
		if g := fmt.Sprintf("cluster-group-%d", i); tc.owner(disbackend.GroupKey(g)) == 1 {
			group = g
		}
	}
	s := func(v string) *string { return &v }
	for _, step := range []struct {
		via   int32
		value string
	}{{0, "6000"}, {1, "7000"}} {
		if res := alterGroupConfigs(tc.raw(t, step.via), group, groupConfigOp("consumer.heartbeat.interval.ms", 0, s(step.value))); res.ErrorCode != 0 {
			t.Fatalf("alter via node %d: %v %v", step.via, kerr.ErrorForCode(res.ErrorCode), *res.ErrorMessage)
		}
		want := "consumer.heartbeat.interval.ms=" + step.value + " GROUP_CONFIG INT [consumer.heartbeat.interval.ms=" + step.value +
			" GROUP_CONFIG, group.consumer.heartbeat.interval.ms=5000 DEFAULT_CONFIG]"
		for _, node := range []int32{0, 1} {
			r := tc.raw(t, node)
			if got := groupConfigLines(describeGroupConfigs(t, r, group).Resources[0]); len(got) != 3 || got[1] != want {
				t.Fatalf("altered via node %d, described at node %d: %q", step.via, node, got)
			}
			list := kmsg.NewPtrListConfigResourcesRequest()
			list.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeGroupConfig)}
			if got := configResources(r.roundTrip(1, list).(*kmsg.ListConfigResourcesResponse)); !slices.Equal(got, []string{"GROUP_CONFIG " + group}) {
				t.Fatalf("listed at node %d: %q", node, got)
			}
		}
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = group, "member-"+step.value, 0, 30000
		hb.SubscribedTopicNames, hb.Topics = []string{"any"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		r := tc.raw(t, 1)
		var resp *kmsg.ConsumerGroupHeartbeatResponse
		eventually(t, 10*time.Second, "the coordinator loaded the group", func() bool {
			resp = r.roundTrip(1, hb).(*kmsg.ConsumerGroupHeartbeatResponse)
			return resp.ErrorCode != kerr.CoordinatorLoadInProgress.Code
		})
		if resp.ErrorCode != 0 || fmt.Sprint(resp.HeartbeatIntervalMillis) != step.value {
			t.Fatalf("heartbeat at the coordinator: %v, interval %d ms, want %s", kerr.ErrorForCode(resp.ErrorCode), resp.HeartbeatIntervalMillis, step.value)
		}
	}
	// A validation error is the coordinator's, with its message.
	res := alterGroupConfigs(tc.raw(t, 0), group, groupConfigOp("consumer.session.timeout.ms", 0, s("5")))
	if res.ErrorCode != kerr.InvalidConfig.Code || res.ErrorMessage == nil || *res.ErrorMessage != "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive." {
		t.Fatalf("invalid value via the controller: %v %v", kerr.ErrorForCode(res.ErrorCode), res.ErrorMessage)
	}
}
