package gateway_test

import (
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/disgw/disgw/disbackend/dislocal"
	"github.com/disgw/disgw/disbackend/disrest"
	"github.com/disgw/disgw/disbackend/localstore"
	"github.com/disgw/disgw/gateway"
)

// Principals of the authorization tests, by the loopback address each
// client connects from (gateway.SetPrincipalsByIP stands in for SASL).
const (
	ipAdmin = "127.0.0.1" // User:admin, a super user
	ipAlice = "127.0.0.2"
	ipBob   = "127.0.0.3"
)

func authConfig(c *gateway.Config) {
	c.Authorizer = true
	c.SuperUsers = []string{"User:admin"}
	c.GroupInitialRebalanceDelay = -1
}

func setPrincipals(g *testGateway) *testGateway {
	gateway.SetPrincipalsByIP(g.srv, map[string]string{ipAdmin: "User:admin", ipAlice: "User:alice", ipBob: "User:bob"})
	return g
}

// authGateways start a gateway with the authorizer on over each backend:
// the embedded store in dir, and DIS (disrest in front of a dislocal that
// lives as long as the test), keeping their data for the next start.
var authGateways = map[string]func(t *testing.T) func() *testGateway{
	"local": func(t *testing.T) func() *testGateway {
		dir := t.TempDir()
		return func() *testGateway { return setPrincipals(startGatewayAt(t, dir, authConfig)) }
	},
	"dis": func(t *testing.T) func() *testGateway {
		endpoint := startTestDIS(t)
		return func() *testGateway { return setPrincipals(startGatewayOverDIS(t, endpoint, authConfig)) }
	},
}

const (
	testDISAK      = "QTWAOYTTINDUT2QVKYUC"
	testDISSK      = "MFyfvK41ba2giqM7Uio6PznpdUKGpownRZlmVmHc"
	testDISProject = "d575b0b740e54221aeb9a165653b103d"
)

// startTestDIS runs dislocal (signatures checked) over an in-memory
// localstore and returns its endpoint.
func startTestDIS(t *testing.T) string {
	t.Helper()
	st, err := localstore.Open("dis", localstore.Options{FS: vfs.NewMem(), RetentionCheckInterval: -1, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := dislocal.New(st, dislocal.Options{AK: testDISAK, SK: testDISSK, ProjectID: testDISProject, NoScalingLimits: true, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.Close()
		_ = st.Close()
	})
	return hs.URL
}

// startGatewayOverDIS is a gateway on 127.0.0.1:0 over disrest talking to
// the DIS at endpoint.
func startGatewayOverDIS(t *testing.T, endpoint string, mutate ...func(*gateway.Config)) *testGateway {
	t.Helper()
	log := zaptest.NewLogger(t, zaptest.Level(zapcore.InfoLevel))
	store, err := disrest.New(disrest.Options{Endpoint: endpoint, ProjectID: testDISProject, AK: testDISAK, SK: testDISSK,
		PollInterval: -1, RetryBackoff: 10 * time.Millisecond, RetryTimeout: 20 * time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	cfg := gateway.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	for _, m := range mutate {
		m(&cfg)
	}
	srv, err := gateway.New(cfg, store, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	g := &testGateway{srv: srv, addr: srv.AdvertisedAddr()}
	g.stop = func(t testing.TB) {
		if g.stopped {
			return
		}
		g.stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if err := store.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	}
	t.Cleanup(func() { g.stop(t) })
	return g
}

// from dials the gateway from the loopback address ip.
func from(ip string) kgo.Opt {
	return kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return d.DialContext(ctx, network, host)
	})
}

func aclStrings(t *testing.T, adm *kadm.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny)
	b = b.Allow().Deny().AllowHosts().DenyHosts()
	res, err := adm.DescribeACLs(ctx, b)
	if err != nil {
		t.Fatalf("DescribeACLs: %v", err)
	}
	var out []string
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("DescribeACLs filter: %v", r.Err)
		}
		for _, d := range r.Described {
			out = append(out, strings.Join([]string{d.Type.String(), d.Name, d.Pattern.String(), d.Principal, d.Host, d.Operation.String(), d.Permission.String()}, " "))
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// TestACLTeamScenario is issue 16's test, on the embedded store and on
// DIS (dislocal): a consumer ACL on the prefix team-a. lets alice read
// team-a.x (and commit as group team-a-g); she neither reads nor sees
// team-b.x, cannot produce, auto-create or delete topics; bob reads
// nothing; DescribeAcls lists exactly what was added, also after a
// restart; after DeleteAcls alice reads nothing either.
func TestACLTeamScenario(t *testing.T) {
	for name, open := range authGateways {
		t.Run(name, func(t *testing.T) { testACLTeamScenario(t, open(t)) })
	}
}

func testACLTeamScenario(t *testing.T, open func() *testGateway) {
	g := open()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	admCl := g.client(t, from(ipAdmin))
	adm := kadm.NewClient(admCl)
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "team-a.x", "team-b.x"); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"team-a.x", "team-b.x"} {
		if err := admCl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v-" + topic)}).FirstErr(); err != nil {
			t.Fatalf("admin produce %s: %v", topic, err)
		}
	}

	// kafka-acls --add --allow-principal User:alice --consumer --topic team-a.
	//   --group team-a- --resource-pattern-type prefixed
	add := kadm.NewACLs().Topics("team-a.").Groups("team-a-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow("User:alice").AllowHosts("*").Operations(kadm.OpRead, kadm.OpDescribe)
	res, err := adm.CreateACLs(ctx, add)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("CreateACLs: %v", r.Err)
		}
	}
	want := []string{
		"GROUP team-a- PREFIXED User:alice * DESCRIBE ALLOW",
		"GROUP team-a- PREFIXED User:alice * READ ALLOW",
		"TOPIC team-a. PREFIXED User:alice * DESCRIBE ALLOW",
		"TOPIC team-a. PREFIXED User:alice * READ ALLOW",
	}
	if got := aclStrings(t, adm); !slices.Equal(got, want) {
		t.Fatalf("acls = %q, want %q", got, want)
	}

	// alice consumes team-a.x in group team-a-g and commits.
	alice := g.client(t, from(ipAlice), kgo.ConsumeTopics("team-a.x"), kgo.ConsumerGroup("team-a-g"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.DisableIdempotentWrite())
	fs := alice.PollRecords(ctx, 10)
	if err := fs.Err(); err != nil {
		t.Fatalf("alice poll: %v", err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "v-team-a.x" {
		t.Fatalf("alice read %v", recs)
	}
	if err := alice.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("alice commit: %v", err)
	}
	aadm := kadm.NewClient(alice)
	topics, err := aadm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := topics.Names(); !slices.Equal(names, []string{"team-a.x"}) {
		t.Fatalf("alice sees topics %v, want only team-a.x", names)
	}
	// Asked by name, team-b.x is refused, not hidden.
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("team-b.x")
	mreq.Topics = []kmsg.MetadataRequestTopic{mt}
	mresp, err := mreq.RequestWith(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	if len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("alice metadata team-b.x: %+v", mresp.Topics)
	}
	// Auto-creating a topic needs CREATE.
	mt.Topic = kmsg.StringPtr("team-a.new")
	mreq.Topics, mreq.AllowAutoTopicCreation = []kmsg.MetadataRequestTopic{mt}, true
	if mresp, err = mreq.RequestWith(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("alice auto-creating team-a.new: %+v", mresp.Topics)
	}
	// Fetching team-b.x directly.
	ids := map[string][16]byte{}
	amd, err := adm.Metadata(ctx, "team-a.x", "team-b.x")
	if err != nil {
		t.Fatal(err)
	}
	for n, d := range amd.Topics {
		ids[n] = d.ID
	}
	if code := fetchCode(t, alice, "team-b.x", ids["team-b.x"]); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("alice fetch team-b.x: error %d", code)
	}
	if code := fetchCode(t, alice, "team-a.x", ids["team-a.x"]); code != 0 {
		t.Fatalf("alice fetch team-a.x: error %d", code)
	}
	// ListOffsets of team-b.x.
	lo, err := aadm.ListEndOffsets(ctx, "team-b.x")
	if err == nil {
		lo.Each(func(o kadm.ListedOffset) {
			if !errors.Is(o.Err, kerr.TopicAuthorizationFailed) {
				t.Errorf("alice list offsets team-b.x: %v", o.Err)
			}
		})
	}
	// She cannot delete topics, nor produce.
	dr, err := aadm.DeleteTopics(ctx, "team-a.x", "team-b.x")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range dr {
		if !errors.Is(r.Err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("alice delete %s: %v", r.Topic, r.Err)
		}
	}
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "team-a.x", Value: []byte("no")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produce: %v", err)
	}
	// A group outside team-a- is refused.
	other := g.client(t, from(ipAlice), kgo.ConsumeTopics("team-a.x"), kgo.ConsumerGroup("other-g"))
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	fs = other.PollFetches(pctx)
	pcancel()
	if err := fs.Err(); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("alice in group other-g: %v", err)
	}
	other.Close()
	// An idempotent producer needs IDEMPOTENT_WRITE or WRITE on a topic.
	ip := g.client(t, from(ipAlice))
	if err := ip.ProduceSync(ctx, &kgo.Record{Topic: "team-a.x", Value: []byte("no")}).FirstErr(); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice idempotent produce: %v", err)
	}
	// alice may not list or change ACLs.
	if _, err := kadm.NewClient(ip).DescribeACLs(ctx, kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny).Allow().Deny().AllowHosts().DenyHosts()); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		var ok bool
		if res, _ := kadm.NewClient(ip).DescribeACLs(ctx, kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny).Allow().Deny().AllowHosts().DenyHosts()); len(res) > 0 {
			ok = errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed)
		}
		if !ok {
			t.Fatalf("alice DescribeACLs: %v", err)
		}
	}

	// bob reads nothing and sees nothing.
	bob := g.client(t, from(ipBob), kgo.DisableIdempotentWrite())
	if code := fetchCode(t, bob, "team-a.x", ids["team-a.x"]); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("bob fetch team-a.x: error %d", code)
	}
	bt, err := kadm.NewClient(bob).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(bt.Names()) != 0 {
		t.Fatalf("bob sees %v", bt.Names())
	}

	// A restart keeps the ACLs.
	alice.Close()
	ip.Close()
	bob.Close()
	admCl.Close()
	g.stop(t)
	g = open()
	adm = kadm.NewClient(g.client(t, from(ipAdmin)))
	if got := aclStrings(t, adm); !slices.Equal(got, want) {
		t.Fatalf("after restart acls = %q, want %q", got, want)
	}
	alice = g.client(t, from(ipAlice))
	if code := fetchCode(t, alice, "team-a.x", ids["team-a.x"]); code != 0 {
		t.Fatalf("after restart alice fetch team-a.x: error %d", code)
	}

	// DeleteAcls of the topic ACLs: alice can no longer read.
	del := kadm.NewACLs().Topics("team-a.").ResourcePatternType(kadm.ACLPatternPrefixed).Allow("User:alice").AllowHosts("*").Operations(kadm.OpAny)
	dres, err := adm.DeleteACLs(ctx, del)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range dres {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		n += len(r.Deleted)
	}
	if n != 2 {
		t.Fatalf("deleted %d acls, want 2", n)
	}
	if code := fetchCode(t, alice, "team-a.x", ids["team-a.x"]); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("after DeleteAcls alice fetch team-a.x: error %d", code)
	}
	if got := aclStrings(t, adm); !slices.Equal(got, want[:2]) {
		t.Fatalf("after delete acls = %q, want %q", got, want[:2])
	}
}

// fetchCode fetches partition 0 of topic once and returns its error code.
func fetchCode(t *testing.T, cl *kgo.Client, topic string, id [16]byte) int16 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = 1<<20, -1, -1, -1
	rt.Partitions = []kmsg.FetchRequestTopicPartition{rp}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("fetch %s: %v", topic, err)
	}
	for _, tt := range resp.Topics {
		for _, p := range tt.Partitions {
			return p.ErrorCode
		}
	}
	t.Fatalf("fetch %s: no partition in the response", topic)
	return 0
}

// TestACLSecurityDisabled: with no authorizer the ACL APIs answer
// SECURITY_DISABLED, as Kafka does.
func TestACLSecurityDisabled(t *testing.T) {
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := g.client(t)
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType, req.Operation, req.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("DescribeAcls error %d, want SECURITY_DISABLED", resp.ErrorCode)
	}
	res, err := kadm.NewClient(cl).CreateACLs(ctx, kadm.NewACLs().Topics("x").Allow("User:a").AllowHosts("*").Operations(kadm.OpRead))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if !errors.Is(r.Err, kerr.SecurityDisabled) {
			t.Fatalf("CreateAcls: %v", r.Err)
		}
	}
}

// TestEveryAPIAuthorized fails when an API key is served without a
// decision about its authorization: every row of the dispatch table names
// its checks (registerAPI's auth; authNone for none). registerAPI already
// refuses a row without them at start-up; this reads the table as served.
func TestEveryAPIAuthorized(t *testing.T) {
	keys := gateway.RegisteredAPIKeys()
	if len(keys) == 0 {
		t.Fatal("no API registered")
	}
	for _, k := range keys {
		if gateway.AuthorizationChecks(k) == 0 {
			t.Errorf("API key %d (%s) is served but its authorization is not decided", k, kmsg.NameForKey(k))
		}
	}
}

// TestACLRefusals: alice, allowed only READ on the prefix team-a. and its
// group, is refused every other API as Kafka refuses it, with the error
// code Kafka answers; what she may describe she sees.
func TestACLRefusals(t *testing.T) {
	g := setPrincipals(startGateway(t, authConfig))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admCl := g.client(t, from(ipAdmin))
	adm := kadm.NewClient(admCl)
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "team-a.x", "team-b.x"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("team-a.").Groups("team-a-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow("User:alice").AllowHosts("*").Operations(kadm.OpRead)); err != nil {
		t.Fatal(err)
	}
	alice := g.client(t, from(ipAlice), kgo.DisableIdempotentWrite())
	// Commit offsets of two groups as admin, so that there are groups to list.
	for _, grp := range []string{"team-a-g", "other-g"} {
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "team-a.x", Partition: 0, At: 0})
		if _, err := adm.CommitOffsets(ctx, grp, os); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, got int16, want *kerr.Error) {
		t.Helper()
		if got != want.Code {
			t.Errorf("%s: error %d (%v), want %s", what, got, kerr.ErrorForCode(got), want.Message)
		}
	}

	dc := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeTopic, "team-a.x"
	br := kmsg.NewDescribeConfigsRequestResource()
	br.ResourceType, br.ResourceName = kmsg.ConfigResourceTypeBroker, "0"
	dc.Resources = []kmsg.DescribeConfigsRequestResource{dr, br}
	dcr, err := dc.RequestWith(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	// kgo sends the broker resource to that broker and the topic to any,
	// and merges the answers in either order.
	codes := map[kmsg.ConfigResourceType]int16{}
	for _, r := range dcr.Resources {
		codes[r.ResourceType] = r.ErrorCode
	}
	if len(dcr.Resources) != 2 {
		t.Fatalf("DescribeConfigs answered %d resources, want 2", len(dcr.Resources))
	}
	check("DescribeConfigs topic (READ does not imply DESCRIBE_CONFIGS)", codes[kmsg.ConfigResourceTypeTopic], kerr.TopicAuthorizationFailed)
	check("DescribeConfigs broker", codes[kmsg.ConfigResourceTypeBroker], kerr.ClusterAuthorizationFailed)

	ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ir := kmsg.NewIncrementalAlterConfigsRequestResource()
	ir.ResourceType, ir.ResourceName = kmsg.ConfigResourceTypeTopic, "team-a.x"
	ic := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	ic.Name, ic.Value = "retention.ms", kmsg.StringPtr("1")
	ir.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{ic}
	ia.Resources = []kmsg.IncrementalAlterConfigsRequestResource{ir}
	iar, err := ia.RequestWith(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	check("IncrementalAlterConfigs retention.ms=1", iar.Resources[0].ErrorCode, kerr.TopicAuthorizationFailed)

	cp := kmsg.NewPtrCreatePartitionsRequest()
	ct := kmsg.NewCreatePartitionsRequestTopic()
	ct.Topic, ct.Count = "team-a.x", 3
	cp.Topics, cp.TimeoutMillis = []kmsg.CreatePartitionsRequestTopic{ct}, 5000
	cpr, err := cp.RequestWith(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	check("CreatePartitions", cpr.Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)

	drq := kmsg.NewPtrDeleteRecordsRequest()
	dt := kmsg.NewDeleteRecordsRequestTopic()
	dt.Topic = "team-a.x"
	dp := kmsg.NewDeleteRecordsRequestTopicPartition()
	dp.Offset = -1
	dt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{dp}
	drq.Topics, drq.TimeoutMillis = []kmsg.DeleteRecordsRequestTopic{dt}, 5000
	drr, err := drq.RequestWith(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	check("DeleteRecords", drr.Topics[0].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)

	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Groups = []string{"team-a-g"}
	dgr, err := dg.RequestWith(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	check("DeleteGroups (READ does not imply DELETE)", dgr.Groups[0].ErrorCode, kerr.GroupAuthorizationFailed)

	lg := kmsg.NewPtrListGroupsRequest()
	lgr, err := lg.RequestWith(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	var groups []string
	for _, gr := range lgr.Groups {
		groups = append(groups, gr.Group)
	}
	if !slices.Equal(groups, []string{"team-a-g"}) {
		t.Errorf("alice lists groups %v, want only team-a-g", groups)
	}

	dgs := kmsg.NewPtrDescribeGroupsRequest()
	dgs.Groups = []string{"team-a-g", "other-g"}
	// Straight to the broker: the client's own FindCoordinator of other-g
	// is refused first.
	resp, err := alice.Broker(0).Request(ctx, dgs)
	if err != nil {
		t.Fatal(err)
	}
	dgsr := resp.(*kmsg.DescribeGroupsResponse)
	for _, gr := range dgsr.Groups {
		want := kerr.GroupAuthorizationFailed
		if gr.Group == "team-a-g" {
			if gr.ErrorCode != 0 {
				t.Errorf("DescribeGroups team-a-g: %d", gr.ErrorCode)
			}
			continue
		}
		check("DescribeGroups other-g", gr.ErrorCode, want)
	}

	of := kmsg.NewPtrOffsetFetchRequest()
	ofg := kmsg.NewOffsetFetchRequestGroup()
	ofg.Group = "other-g"
	of.Groups = []kmsg.OffsetFetchRequestGroup{ofg}
	resp, err = alice.Broker(0).Request(ctx, of)
	if err != nil {
		t.Fatal(err)
	}
	ofr := resp.(*kmsg.OffsetFetchResponse)
	check("OffsetFetch other-g", ofr.Groups[0].ErrorCode, kerr.GroupAuthorizationFailed)

	dcl := kmsg.NewPtrDescribeClusterRequest()
	dclr, err := dcl.RequestWith(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	check("DescribeCluster", dclr.ErrorCode, kerr.ClusterAuthorizationFailed)

	dld := kmsg.NewPtrDescribeLogDirsRequest()
	if resp, err = alice.Broker(0).Request(ctx, dld); err != nil {
		t.Fatal(err)
	}
	dldr := resp.(*kmsg.DescribeLogDirsResponse)
	check("DescribeLogDirs", dldr.ErrorCode, kerr.ClusterAuthorizationFailed)

	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = kmsg.StringPtr("txn-1"), 60000
	if resp, err = alice.Broker(0).Request(ctx, ip); err != nil {
		t.Fatal(err)
	}
	ipr := resp.(*kmsg.InitProducerIDResponse)
	check("InitProducerId transactional", ipr.ErrorCode, kerr.TransactionalIDAuthorizationFailed)

	el := kmsg.NewPtrElectLeadersRequest()
	el.TimeoutMillis = 5000
	elr, err := el.RequestWith(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	check("ElectLeaders", elr.ErrorCode, kerr.ClusterAuthorizationFailed)

	ct2 := kmsg.NewPtrCreateTopicsRequest()
	nt := kmsg.NewCreateTopicsRequestTopic()
	nt.Topic, nt.NumPartitions, nt.ReplicationFactor = "team-a.y", 1, 1
	ct2.Topics, ct2.TimeoutMillis = []kmsg.CreateTopicsRequestTopic{nt}, 5000
	ctr, err := ct2.RequestWith(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	check("CreateTopics", ctr.Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)

	// The admin's view is unchanged: nothing alice asked was done.
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := topics.Names(); !slices.Equal(names, []string{"team-a.x", "team-b.x"}) {
		t.Errorf("topics after alice's requests: %v", names)
	}
	if d := topics["team-a.x"]; len(d.Partitions) != 1 {
		t.Errorf("team-a.x has %d partitions after alice's CreatePartitions", len(d.Partitions))
	}

	// With CREATE on a topic she creates it, but without DESCRIBE_CONFIGS
	// she is not shown its configs.
	if _, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("team-a.c").Allow("User:alice").AllowHosts("*").Operations(kadm.OpCreate)); err != nil {
		t.Fatal(err)
	}
	nt.Topic = "team-a.c"
	ct2.Topics = []kmsg.CreateTopicsRequestTopic{nt}
	if ctr, err = ct2.RequestWith(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if c := ctr.Topics[0]; c.ErrorCode != 0 || c.ConfigErrorCode != kerr.TopicAuthorizationFailed.Code || len(c.Configs) != 0 {
		t.Errorf("alice CreateTopics team-a.c with CREATE only: error %d, config error %d, %d configs", c.ErrorCode, c.ConfigErrorCode, len(c.Configs))
	}
}

// TestACLsSharedBetweenNodes: two gateways over one DIS; an ACL created
// through one applies on the other within its ACLRefreshInterval.
func TestACLsSharedBetweenNodes(t *testing.T) {
	endpoint := startTestDIS(t)
	fast := func(c *gateway.Config) { c.ACLRefreshInterval = 50 * time.Millisecond }
	a := setPrincipals(startGatewayOverDIS(t, endpoint, authConfig, fast))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(a.client(t, from(ipAdmin)))
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "shared.x"); err != nil {
		t.Fatal(err)
	}
	md, err := adm.Metadata(ctx, "shared.x")
	if err != nil {
		t.Fatal(err)
	}
	id := md.Topics["shared.x"].ID
	b := setPrincipals(startGatewayOverDIS(t, endpoint, authConfig, fast))
	alice := b.client(t, from(ipAlice))
	if code := fetchCode(t, alice, "shared.x", id); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("alice on node b before the ACL: error %d", code)
	}
	if _, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("shared.x").Allow("User:alice").AllowHosts("*").Operations(kadm.OpRead)); err != nil {
		t.Fatal(err)
	}
	for fetchCode(t, alice, "shared.x", id) != 0 {
		if ctx.Err() != nil {
			t.Fatal("node b never applied the ACL created through node a")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
