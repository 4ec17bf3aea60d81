package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/auth/signer"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/request"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// disModeCall is one PutRecords of dislocal's call log (GET
// /dislocal/calls).
type disModeCall struct {
	Op        string   `json:"op"`
	AccessKey string   `json:"access_key"`
	Stream    string   `json:"stream"`
	Data      [][]byte `json:"data"`
}

// dislocalCalls reads dislocal's call log, signed with ak/sk by the
// official SDK's signer.
func dislocalCalls(t *testing.T, endpoint, ak, sk string) []disModeCall {
	t.Helper()
	u, err := url.Parse(endpoint + "/dislocal/calls")
	if err != nil {
		t.Fatal(err)
	}
	sr := request.NewHttpRequestBuilder().WithEndpoint(u.Scheme+"://"+u.Host).WithPath(u.Path).
		WithMethod(http.MethodGet).AddHeaderParam("Host", u.Host).Build()
	extra, err := signer.Sign(sr, ak, sk)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range sr.GetHeaderParams() {
		req.Header.Set(k, v)
	}
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /dislocal/calls: %d %s", resp.StatusCode, b)
	}
	var calls []disModeCall
	if err := json.Unmarshal(b, &calls); err != nil {
		t.Fatalf("GET /dislocal/calls: %v: %s", err, b)
	}
	return calls
}

// TestDISAuthenticationMode: sasl_plain_authentication dis against
// dislocal with signatures on and three key pairs (the gateway's and two
// principals'). A connection authenticated with pair 2 writes as pair 2
// and one with pair 1 as pair 1 (dislocal's call log has each
// PutRecords' access key); two principals producing at once to one
// partition never share a PutRecords; a wrong SK or an unknown AK is
// refused at SaslAuthenticate; a principal DIS denies a stream gets
// TOPIC_AUTHORIZATION_FAILED from Metadata, Produce and Fetch, also
// right after another principal filled the gateway's read cache of that
// stream; with DIS down, authentication fails saying DIS could not be
// reached; no SK reaches the gateway's or dislocal's log.
func TestDISAuthenticationMode(t *testing.T) {
	t.Parallel()
	const (
		project      = "modeproject"
		gwAK, gwSK   = "gw-access-key", "gw-secret-key-not-logged"
		p1AK, p1SK   = "p1-access-key", "p1-secret-key-not-logged"
		p2AK, p2SK   = "p2-access-key", "p2-secret-key-not-logged"
		wrongSK      = "p1-wrong-secret-not-logged"
		shared       = "shared"
		secretTopic  = "secret-topic"
		perPrincipal = 300
	)
	d := startDISLocal(t, disLocalOpts{account: disAccount{gwAK, gwSK, project},
		env:  []string{"DISGW_DISLOCAL_KEYS=" + p1AK + ":" + p1SK + "," + p2AK + ":" + p2SK},
		args: []string{"--deny", p2AK + ":secret-", "--call-log", "100000"}})
	endpoint := d.endpoint
	// A long linger, so that batches of both principals wait together in
	// the accumulator and would share a PutRecords if it merged them.
	gw := startGateway(t, gatewayOpts{dis: d, listeners: "SASL_PLAINTEXT://127.0.0.1:0",
		env: []string{"DISGW_SASL_ENABLED_MECHANISMS=PLAIN", "DISGW_SASL_PLAIN_AUTHENTICATION=dis", "DISGW_DIS_LINGER=300ms"}})
	addr := gw.addr

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	client := func(ak, sk string, opts ...kgo.Opt) *kgo.Client {
		t.Helper()
		opts = append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: ak, Pass: sk}.AsMechanism()),
			kgo.RequestRetries(0), kgo.ProducerLinger(0)}, opts...)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	p1, p2 := client(p1AK, p1SK), client(p2AK, p2SK)

	// Refused at SaslAuthenticate: a wrong SK, an unknown AK.
	for _, bad := range []struct{ name, ak, sk string }{{"wrong SK", p1AK, wrongSK}, {"unknown AK", "no-such-ak", p1SK}} {
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, client(bad.ak, bad.sk))
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s: %v, want SASL_AUTHENTICATION_FAILED", bad.name, err)
		}
	}

	// Topics created by pair 1 (CreateStream signed with it).
	res, err := kadm.NewClient(p1).CreateTopics(ctx, 1, -1, nil, shared, secretTopic)
	if err != nil || res.Error() != nil {
		t.Fatalf("create topics: %v %v", err, res.Error())
	}

	// Pair 2 writes as pair 2, pair 1 as pair 1.
	if err := p2.ProduceSync(ctx, &kgo.Record{Topic: shared, Value: []byte("p2-first")}).FirstErr(); err != nil {
		t.Fatalf("produce as pair 2: %v", err)
	}
	if err := p1.ProduceSync(ctx, &kgo.Record{Topic: shared, Value: []byte("p1-first")}).FirstErr(); err != nil {
		t.Fatalf("produce as pair 1: %v", err)
	}

	// Both at once, to one partition.
	var wg sync.WaitGroup
	errs := make(chan error, 2*perPrincipal)
	for _, p := range []struct {
		cl     *kgo.Client
		prefix string
	}{{p1, "p1-"}, {p2, "p2-"}} {
		for i := 0; i < perPrincipal; i++ {
			wg.Add(1)
			p.cl.Produce(ctx, &kgo.Record{Topic: shared, Value: []byte(fmt.Sprintf("%s%d", p.prefix, i))}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent produce: %v", err)
	}

	calls := dislocalCalls(t, endpoint, gwAK, gwSK)
	owner := map[string]string{"p1-": p1AK, "p2-": p2AK}
	var puts, mixed, wrong int
	firstWrong := ""
	seen := map[string]int{}
	for _, c := range calls {
		if c.Stream != shared {
			continue
		}
		puts++
		aks := map[string]bool{}
		for _, v := range c.Data {
			want := owner[string(v[:min(3, len(v))])]
			aks[want] = true
			if want != c.AccessKey {
				if wrong++; wrong == 1 {
					firstWrong = fmt.Sprintf("record %q written in a PutRecords signed by %q, want %q", v, c.AccessKey, want)
				}
			}
			seen[c.AccessKey]++
		}
		if len(aks) > 1 {
			mixed++
		}
	}
	if wrong > 0 {
		t.Errorf("%d records written with another principal's access key; the first: %s", wrong, firstWrong)
	}
	if mixed > 0 {
		t.Errorf("%d of %d PutRecords carried records of both principals", mixed, puts)
	}
	if seen[p1AK] != perPrincipal+1 || seen[p2AK] != perPrincipal+1 {
		t.Errorf("records written per access key: %v, want %d each", seen, perPrincipal+1)
	}

	// Pair 1 reads the secret topic, filling the gateway's read caches.
	if err := p1.ProduceSync(ctx, &kgo.Record{Topic: secretTopic, Value: []byte("p1-secret")}).FirstErr(); err != nil {
		t.Fatalf("produce to %s as pair 1: %v", secretTopic, err)
	}
	meta, err := kadm.NewClient(p1).Metadata(ctx, secretTopic)
	if err != nil || meta.Topics[secretTopic].Err != nil {
		t.Fatalf("metadata of %s as pair 1: %v %v", secretTopic, err, meta.Topics[secretTopic].Err)
	}
	topicID := meta.Topics[secretTopic].ID
	fetch := func(cl *kgo.Client) (*kmsg.FetchResponseTopicPartition, error) {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 100, 1, 1<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = secretTopic, topicID
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = 0, 0, 1<<20, -1, -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
		if err != nil {
			return nil, err
		}
		return &resp.Topics[0].Partitions[0], nil
	}
	got, err := fetch(p1)
	if err != nil || got.ErrorCode != 0 || len(got.RecordBatches) == 0 {
		t.Fatalf("fetch of %s as pair 1: %v, code %d, %d bytes", secretTopic, err, gotCode(got), gotLen(got))
	}

	// Pair 2 is denied the secret topic by DIS: Metadata, Produce and
	// Fetch (the read cache pair 1 just filled included).
	// kadm returns the topic's TOPIC_AUTHORIZATION_FAILED as its error.
	meta, err = kadm.NewClient(p2).Metadata(ctx, secretTopic)
	if err == nil {
		err = meta.Topics[secretTopic].Err
	}
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("metadata of %s as pair 2: %v, want TOPIC_AUTHORIZATION_FAILED", secretTopic, err)
	}
	if all, err := kadm.NewClient(p2).Metadata(ctx); err != nil {
		t.Errorf("metadata of all topics as pair 2: %v", err)
	} else if _, ok := all.Topics[secretTopic]; ok {
		t.Errorf("all-topics metadata as pair 2 lists %s", secretTopic)
	} else if _, ok := all.Topics[shared]; !ok {
		t.Errorf("all-topics metadata as pair 2 does not list %s", shared)
	}
	got, err = fetch(p2)
	if err != nil || got.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(got.RecordBatches) != 0 {
		t.Errorf("fetch of %s as pair 2: %v, code %d, %d bytes; want TOPIC_AUTHORIZATION_FAILED and no records", secretTopic, err, gotCode(got), gotLen(got))
	}
	// ListOffsets (latest) is answered from the gateway's view of the
	// partition: refused too, for pair 2 only.
	listLatest := func(cl *kgo.Client) (int16, error) {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = secretTopic
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp, lp.CurrentLeaderEpoch = 0, -1, -1
		lt.Partitions = append(lt.Partitions, lp)
		req.Topics = append(req.Topics, lt)
		resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
		if err != nil {
			return 0, err
		}
		return resp.Topics[0].Partitions[0].ErrorCode, nil
	}
	if code, err := listLatest(p1); err != nil || code != 0 {
		t.Errorf("ListOffsets of %s as pair 1: %v, code %d", secretTopic, err, code)
	}
	if code, err := listLatest(p2); err != nil || code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("ListOffsets of %s as pair 2: %v, code %d; want TOPIC_AUTHORIZATION_FAILED", secretTopic, err, code)
	}
	describe := func(cl *kgo.Client) (int16, error) {
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, secretTopic
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
		if err != nil {
			return 0, err
		}
		return resp.Resources[0].ErrorCode, nil
	}
	if code, err := describe(p1); err != nil || code != 0 {
		t.Errorf("DescribeConfigs of %s as pair 1: %v, code %d", secretTopic, err, code)
	}
	if code, err := describe(p2); err != nil || code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("DescribeConfigs of %s as pair 2: %v, code %d; want TOPIC_AUTHORIZATION_FAILED", secretTopic, err, code)
	}
	preq := kmsg.NewPtrProduceRequest()
	preq.Acks, preq.TimeoutMillis = -1, 10000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic, pt.TopicID = secretTopic, topicID
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = wireBatch(1, time.Now().UnixMilli(), -1, -1, -1)
	pt.Partitions = append(pt.Partitions, pp)
	preq.Topics = append(preq.Topics, pt)
	presp, err := preq.RequestWith(ctx, p2.SeedBrokers()[0])
	if err != nil {
		t.Fatalf("produce to %s as pair 2: %v", secretTopic, err)
	}
	if code := presp.Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("produce to %s as pair 2: code %d (%v), want TOPIC_AUTHORIZATION_FAILED", secretTopic, code, kerr.ErrorForCode(code))
	}
	// Committed offsets: pair 1 commits in its group; pair 2 cannot
	// commit on the stream DIS denies it, and does not see pair 1's
	// offsets of it (OffsetFetch of all topics leaves it out; by name it
	// is TOPIC_AUTHORIZATION_FAILED).
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: secretTopic, Partition: 0, At: 1, LeaderEpoch: -1})
	if res, err := kadm.NewClient(p1).CommitOffsets(ctx, "g-p1", offs); err != nil || res.Error() != nil {
		t.Errorf("commit on %s as pair 1: %v %v", secretTopic, err, res.Error())
	}
	// By name, at Kafka 3.0's versions (topic ids would need Metadata,
	// which pair 2 does not get for the stream).
	p2old := client(p2AK, p2SK, kgo.MaxVersions(kversion.V3_0_0()))
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "g-p2", -1
	oct := kmsg.NewOffsetCommitRequestTopic()
	oct.Topic = secretTopic
	ocp := kmsg.NewOffsetCommitRequestTopicPartition()
	ocp.Partition, ocp.Offset, ocp.LeaderEpoch = 0, 1, -1
	oct.Partitions = append(oct.Partitions, ocp)
	oc.Topics = append(oc.Topics, oct)
	if resp, err := oc.RequestWith(ctx, p2old); err != nil {
		t.Errorf("commit on %s as pair 2: %v", secretTopic, err)
	} else if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("commit on %s as pair 2: code %d, want TOPIC_AUTHORIZATION_FAILED", secretTopic, code)
	}
	if got, err := kadm.NewClient(p2).FetchOffsets(ctx, "g-p1"); err != nil {
		t.Errorf("offsets of g-p1 as pair 2: %v", err)
	} else if _, ok := got[secretTopic]; ok {
		t.Errorf("offsets of g-p1 (all topics) as pair 2 list %s: %+v", secretTopic, got[secretTopic])
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group = "g-p1"
	oft := kmsg.NewOffsetFetchRequestTopic()
	oft.Topic, oft.Partitions = secretTopic, []int32{0}
	of.Topics = append(of.Topics, oft)
	if resp, err := of.RequestWith(ctx, p2old); err != nil {
		t.Errorf("offsets of g-p1 for %s as pair 2: %v", secretTopic, err)
	} else if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 ||
		resp.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code || resp.Topics[0].Partitions[0].Offset != -1 {
		t.Errorf("offset of %s in g-p1 as pair 2: %+v, want TOPIC_AUTHORIZATION_FAILED and offset -1", secretTopic, resp.Topics)
	}
	if got, err := kadm.NewClient(p1).FetchOffsets(ctx, "g-p1"); err != nil {
		t.Errorf("offsets of g-p1 as pair 1: %v", err)
	} else if o, ok := got.Lookup(secretTopic, 0); !ok || o.At != 1 {
		t.Errorf("offset of %s in g-p1 as pair 1: %+v, want 1", secretTopic, o)
	}
	// Pair 1's writes still go.
	if err := p1.ProduceSync(ctx, &kgo.Record{Topic: secretTopic, Value: []byte("p1-after")}).FirstErr(); err != nil {
		t.Errorf("produce to %s as pair 1 after pair 2 was refused: %v", secretTopic, err)
	}
	for _, c := range dislocalCalls(t, endpoint, gwAK, gwSK) {
		if c.Stream == secretTopic && c.AccessKey != p1AK && c.AccessKey != p2AK {
			t.Errorf("a PutRecords to %s signed by %q", secretTopic, c.AccessKey)
		}
	}

	// Pair 2's key deleted in DIS while its connection is open: dislocal
	// restarted on the same address without it. The connection's next
	// produce closes it (not UNKNOWN_SERVER_ERROR), and authenticating
	// again is refused.
	p2b := client(p2AK, p2SK)
	if err := p2b.ProduceSync(ctx, &kgo.Record{Topic: shared, Value: []byte("p2-before")}).FirstErr(); err != nil {
		t.Fatalf("produce as pair 2 before its key is gone: %v", err)
	}
	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("dislocal exit code %d", code)
	}
	d = d.restart(t, func(o *disLocalOpts) {
		o.env = []string{"DISGW_DISLOCAL_KEYS=" + p1AK + ":" + p1SK}
		o.args = nil
	})
	preq2 := kmsg.NewPtrProduceRequest()
	preq2.Acks, preq2.TimeoutMillis = -1, 10000
	pt2 := kmsg.NewProduceRequestTopic()
	pt2.Topic = shared
	if m, err := kadm.NewClient(p1).Metadata(ctx, shared); err == nil {
		pt2.TopicID = m.Topics[shared].ID // Produce v13+ names topics by id
	}
	pp2 := kmsg.NewProduceRequestTopicPartition()
	pp2.Records = wireBatch(1, time.Now().UnixMilli(), -1, -1, -1)
	pt2.Partitions = append(pt2.Partitions, pp2)
	preq2.Topics = append(preq2.Topics, pt2)
	if resp, err := preq2.RequestWith(ctx, p2b.Broker(0)); err == nil {
		t.Errorf("produce as pair 2 after its key was deleted: answered (code %d), want the connection closed", resp.Topics[0].Partitions[0].ErrorCode)
	}
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, client(p2AK, p2SK)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("authenticating as pair 2 after its key was deleted: %v, want SASL_AUTHENTICATION_FAILED", err)
	}

	// DIS unreachable: authentication fails, saying so, not as a wrong
	// password.
	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("dislocal exit code %d", code)
	}
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, client(p1AK, p1SK))
	if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "DIS could not be reached") {
		t.Errorf("authentication with DIS down: %v, want SASL_AUTHENTICATION_FAILED saying DIS could not be reached", err)
	}

	for _, p := range []struct {
		name string
		out  string
	}{{"gateway", gw.output(t)}, {"dislocal", d.output(t)}} {
		for _, sk := range []string{gwSK, p1SK, p2SK, wrongSK} {
			if strings.Contains(p.out, sk) {
				t.Errorf("the %s's log holds a secret key", p.name)
			}
		}
	}
}

func gotCode(p *kmsg.FetchResponseTopicPartition) int16 {
	if p == nil {
		return -2
	}
	return p.ErrorCode
}

func gotLen(p *kmsg.FetchResponseTopicPartition) int {
	if p == nil {
		return 0
	}
	return len(p.RecordBatches)
}
