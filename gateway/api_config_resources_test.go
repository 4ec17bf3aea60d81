package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"go.uber.org/zap/zaptest"

	"github.com/disgw/disgw/disbackend/dislocal"
	"github.com/disgw/disgw/disbackend/localstore"
	"github.com/disgw/disgw/gateway"
)

// configResources lists a ListConfigResources answer as "TYPE name", in
// its order.
func configResources(resp *kmsg.ListConfigResourcesResponse) []string {
	out := []string{}
	for _, r := range resp.ConfigResources {
		out = append(out, fmt.Sprintf("%s %s", kmsg.ConfigResourceType(r.Type), r.Name))
	}
	return out
}

// TestListConfigResources: ListConfigResources v0 and v1 answer as Kafka
// 4.4 answers a cluster without group configs or client metrics
// resources (issue 26: kafka-python's test_list_config_resources): v0 no
// resources; v1 this node as broker logger and broker, then every topic
// (__consumer_offsets included), each type asked listed once; a type the
// version does not know is UNSUPPORTED_VERSION with no resources.
func TestListConfigResources(t *testing.T) {
	g := startGateway(t, func(c *gateway.Config) { c.NodeID = 3 })
	r := g.raw(t)
	for _, topic := range []string{"b.t", "a.t"} {
		if tp := r.roundTrip(7, createTopicsReq(topic, 1, nil)).(*kmsg.CreateTopicsResponse).Topics[0]; tp.ErrorCode != 0 {
			t.Fatalf("create %s: %+v", topic, tp)
		}
	}
	topics := []string{"TOPIC __consumer_offsets", "TOPIC a.t", "TOPIC b.t"}
	node := []string{"BROKER_LOGGER 3", "BROKER 3"}
	cases := []struct {
		name    string
		version int16
		types   []kmsg.ConfigResourceType
		code    int16
		want    []string
	}{
		{"v0: client metrics resources, none", 0, nil, 0, []string{}},
		{"v1 every type", 1, nil, 0, append(slices.Clone(node), topics...)},
		{"v1 TOPIC", 1, []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeTopic}, 0, topics},
		{"v1 TOPIC, BROKER: in Kafka's order", 1, []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker}, 0,
			append([]string{"BROKER 3"}, topics...)},
		{"v1 BROKER twice", 1, []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBroker}, 0, []string{"BROKER 3"}},
		{"v1 BROKER_LOGGER", 1, []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeBrokerLogger}, 0, []string{"BROKER_LOGGER 3"}},
		{"v1 GROUP, CLIENT_METRICS: none", 1, []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeGroupConfig, kmsg.ConfigResourceTypeClientMetrics}, 0, []string{}},
		{"v1 TOPIC and type 3", 1, []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeTopic, 3}, kerr.UnsupportedVersion.Code, []string{}},
		{"v1 UNKNOWN", 1, []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeUnknown}, kerr.UnsupportedVersion.Code, []string{}},
	}
	for _, tc := range cases {
		req := kmsg.NewPtrListConfigResourcesRequest()
		for _, rt := range tc.types {
			req.ResourceTypes = append(req.ResourceTypes, int8(rt))
		}
		resp := r.roundTrip(tc.version, req).(*kmsg.ListConfigResourcesResponse)
		if got := configResources(resp); resp.ErrorCode != tc.code || !slices.Equal(got, tc.want) {
			t.Errorf("%s: error %d, %q; want error %d, %q", tc.name, resp.ErrorCode, got, tc.code, tc.want)
		}
	}

	// kadm (the version kgo negotiates: the newest, v1).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	listed, err := kadm.NewClient(g.client(t)).ListConfigResources(ctx, kadm.ConfigResourceTopic)
	if err != nil || listed.Err != nil {
		t.Fatalf("kadm ListConfigResources: %v %v", err, listed.Err)
	}
	if names := listed.Names(); !slices.Equal(names, []string{"__consumer_offsets", "a.t", "b.t"}) {
		t.Errorf("kadm ListConfigResources of the topics: %v", names)
	}
}

// TestListConfigResourcesAuthorized: with the authorizer on,
// ListConfigResources needs DESCRIBE_CONFIGS on the cluster (or
// ALTER_CONFIGS, which implies it), as Kafka's: else
// CLUSTER_AUTHORIZATION_FAILED and no resources. DESCRIBE on the cluster
// is not enough; the topics listed are not checked one by one.
func TestListConfigResourcesAuthorized(t *testing.T) {
	g := setPrincipals(startGateway(t, authConfig))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(g.client(t, from(ipAdmin)))
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "team-a.x", "team-b.x"); err != nil {
		t.Fatal(err)
	}
	list := func(ip string) (*kmsg.ListConfigResourcesResponse, error) {
		req := kmsg.NewPtrListConfigResourcesRequest()
		req.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeTopic)}
		return req.RequestWith(ctx, g.client(t, from(ip)))
	}
	wantTopics := []string{"TOPIC __consumer_offsets", "TOPIC team-a.x", "TOPIC team-b.x"}
	check := func(who, ip string, allowed bool) {
		t.Helper()
		resp, err := list(ip)
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		got := configResources(resp)
		switch {
		case allowed && (resp.ErrorCode != 0 || !slices.Equal(got, wantTopics)):
			t.Errorf("%s: error %d, %q; want every topic", who, resp.ErrorCode, got)
		case !allowed && (resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(got) != 0):
			t.Errorf("%s: error %d, %q; want CLUSTER_AUTHORIZATION_FAILED and no resources", who, resp.ErrorCode, got)
		}
	}
	check("admin (super user)", ipAdmin, true)
	check("alice (no ACL)", ipAlice, false)
	if _, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("team-a.x", "team-b.x").Clusters().Allow("User:alice").AllowHosts("*").
		Operations(kadm.OpDescribe, kadm.OpRead)); err != nil {
		t.Fatal(err)
	}
	check("alice (DESCRIBE and READ on the cluster and the topics)", ipAlice, false)
	if _, err := adm.CreateACLs(ctx, kadm.NewACLs().Clusters().Allow("User:alice").AllowHosts("*").Operations(kadm.OpDescribeConfigs)); err != nil {
		t.Fatal(err)
	}
	check("alice (DESCRIBE_CONFIGS on the cluster)", ipAlice, true)
	if _, err := adm.CreateACLs(ctx, kadm.NewACLs().Clusters().Allow("User:bob").AllowHosts("*").Operations(kadm.OpAlterConfigs)); err != nil {
		t.Fatal(err)
	}
	check("bob (ALTER_CONFIGS on the cluster, no topic ACL)", ipBob, true)

	// kadm's ListConfigResources reports the refusal as an auth error.
	if _, err := adm.DeleteACLs(ctx, kadm.NewACLs().Clusters().Allow("User:bob").AllowHosts("*").Operations(kadm.OpAlterConfigs)); err != nil {
		t.Fatal(err)
	}
	_, err := kadm.NewClient(g.client(t, from(ipBob))).ListConfigResources(ctx)
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("kadm ListConfigResources as bob after DeleteAcls: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
}

// TestListConfigResourcesDISAuthentication: in the dis authentication
// mode, ListConfigResources leaves out the topics DIS does not let the
// principal describe, as Metadata leaves them out of every topic.
func TestListConfigResourcesDISAuthentication(t *testing.T) {
	const (
		ak1, sk1 = "LCRPRINCIPALONE00001", "lcr-principal-one-secret-key-000000000001"
		ak2, sk2 = "LCRPRINCIPALTWO00002", "lcr-principal-two-secret-key-000000000002"
	)
	st, err := localstore.Open("dis", localstore.Options{FS: vfs.NewMem(), RetentionCheckInterval: -1, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dislocal.New(st, dislocal.Options{AK: testDISAK, SK: testDISSK, ProjectID: testDISProject, NoScalingLimits: true,
		Keys: map[string]string{ak1: sk1, ak2: sk2}, Deny: map[string][]string{ak2: {"deny-"}}, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(d)
	t.Cleanup(func() {
		hs.Close()
		_ = st.Close()
	})
	g := startGatewayOverDIS(t, hs.URL, func(c *gateway.Config) {
		c.Listeners = []gateway.Listener{{Name: "SASL", SecurityProtocol: gateway.ProtocolSASLPlaintext, Listen: "127.0.0.1:0"}}
		c.SASL = gateway.SASLConfig{Mechanisms: []string{"PLAIN"}, PlainDIS: true}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	as := func(ak, sk string) *kgo.Client {
		return g.client(t, kgo.SASL(plain.Auth{User: ak, Pass: sk}.AsMechanism()))
	}
	one, two := as(ak1, sk1), as(ak2, sk2)
	if _, err := kadm.NewClient(one).CreateTopics(ctx, 1, 1, nil, "deny-x", "ok-x"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who  string
		cl   *kgo.Client
		want []string
	}{
		{"principal one", one, []string{"TOPIC __consumer_offsets", "TOPIC deny-x", "TOPIC ok-x"}},
		{"principal two, denied deny-*", two, []string{"TOPIC __consumer_offsets", "TOPIC ok-x"}},
	} {
		req := kmsg.NewPtrListConfigResourcesRequest()
		req.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeTopic)}
		resp, err := req.RequestWith(ctx, tc.cl)
		if err != nil {
			t.Fatalf("%s: %v", tc.who, err)
		}
		if got := configResources(resp); resp.ErrorCode != 0 || !slices.Equal(got, tc.want) {
			t.Errorf("%s: error %d, %q; want %q", tc.who, resp.ErrorCode, got, tc.want)
		}
		md, err := kadm.NewClient(tc.cl).ListTopicsWithInternal(ctx)
		if err != nil {
			t.Fatalf("%s: Metadata: %v", tc.who, err)
		}
		var names []string
		for _, n := range md.Names() {
			names = append(names, "TOPIC "+n)
		}
		if !slices.Equal(names, tc.want) {
			t.Errorf("%s: Metadata lists %q, ListConfigResources %q", tc.who, names, tc.want)
		}
	}
}
