package dislocal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/auth/signer"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/request"
	"go.uber.org/goleak"

	"github.com/disgw/disgw/disbackend/localstore"
)

// coordClient drives the consumer-group API of one app as the DIS Kafka
// Adapter's InnerDisClient does (paths with the SDK's trailing slash,
// camelCase bodies), through send (unsigned, or signed).
type coordClient struct {
	t    *testing.T
	app  string
	send func(method, path string, body any) (int, map[string]any)
}

func newCoord(t *testing.T, hs *httptest.Server, app string) *coordClient {
	return &coordClient{t: t, app: app, send: func(method, path string, body any) (int, map[string]any) {
		return call(t, hs, method, path, body)
	}}
}

func (c *coordClient) join(client string, body map[string]any) (state string, delayMs float64, sub []string) {
	c.t.Helper()
	b := map[string]any{"groupId": c.app, "clientId": client}
	for k, v := range body {
		b[k] = v
	}
	st, m := c.send("POST", "/v2/p/apps/"+c.app+"/consumers/", b)
	mustStatus(c.t, st, m, 200)
	state, _ = m["state"].(string)
	delayMs, _ = m["syncDelayedTimeMs"].(float64)
	for _, s := range asSlice(m["subscription"]) {
		sub = append(sub, s.(string))
	}
	return state, delayMs, sub
}

func (c *coordClient) joinStreams(client string, streams ...string) {
	c.t.Helper()
	if st, _, _ := c.join(client, map[string]any{"interestedStream": streams}); st != "OK" {
		c.t.Fatalf("join %s: %s", client, st)
	}
}

func (c *coordClient) sync(client string, gen int64) (state string, generation int64, a map[string][]int) {
	c.t.Helper()
	st, m := c.send("POST", "/v2/p/apps/"+c.app+"/consumers/"+client+"/partitions/",
		map[string]any{"groupId": c.app, "clientId": client, "generation": gen})
	mustStatus(c.t, st, m, 200)
	state, _ = m["state"].(string)
	if g, ok := m["generation"].(float64); ok {
		generation = int64(g)
	}
	if as, ok := m["assignment"].(map[string]any); ok {
		a = map[string][]int{}
		for k, v := range as {
			a[k] = []int{}
			for _, p := range asSlice(v) {
				a[k] = append(a[k], int(p.(float64)))
			}
		}
	}
	return state, generation, a
}

// mustSync syncs and wants OK.
func (c *coordClient) mustSync(client string) (int64, map[string][]int) {
	c.t.Helper()
	st, gen, a := c.sync(client, -1)
	if st != "OK" || a == nil {
		c.t.Fatalf("sync %s: %s %v", client, st, a)
	}
	return gen, a
}

func (c *coordClient) heartbeat(client string, gen int64) string {
	c.t.Helper()
	st, m := c.send("POST", "/v2/p/apps/"+c.app+"/consumers/"+client+"/heartbeats/",
		map[string]any{"groupId": c.app, "clientId": client, "generation": gen})
	mustStatus(c.t, st, m, 200)
	s, _ := m["state"].(string)
	return s
}

func (c *coordClient) wantHeartbeat(client string, gen int64, want string) {
	c.t.Helper()
	if got := c.heartbeat(client, gen); got != want {
		c.t.Fatalf("heartbeat %s generation %d: %s, want %s", client, gen, got, want)
	}
}

func (c *coordClient) leave(client string) {
	c.t.Helper()
	st, m := c.send("DELETE", "/v2/p/apps/"+c.app+"/consumers/"+client+"/", nil)
	mustStatus(c.t, st, m, 200)
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func createApp(t *testing.T, hs *httptest.Server, name string) {
	t.Helper()
	st, m := call(t, hs, "POST", "/v2/p/apps", map[string]any{"app_name": name})
	mustStatus(t, st, m, 201)
}

// wantPartition checks that the members' assignments are disjoint, that
// together they are exactly want (stream key -> partition count), and that
// every member has at least min partitions.
func wantPartition(t *testing.T, want map[string]int, min int, as ...map[string][]int) {
	t.Helper()
	seen := map[string]bool{}
	for i, a := range as {
		n := 0
		for k, ps := range a {
			for _, p := range ps {
				tp := fmt.Sprintf("%s/%d", k, p)
				if seen[tp] {
					t.Fatalf("%s assigned twice: %v", tp, as)
				}
				seen[tp] = true
				n++
			}
		}
		if n < min {
			t.Fatalf("member %d got %d partitions, want >= %d: %v", i, n, min, as)
		}
	}
	total := 0
	for k, n := range want {
		for p := 0; p < n; p++ {
			if !seen[fmt.Sprintf("%s/%d", k, p)] {
				t.Fatalf("%s/%d not assigned: %v", k, p, as)
			}
		}
		total += n
	}
	if len(seen) != total {
		t.Fatalf("assigned %d partitions, want %d: %v", len(seen), total, as)
	}
}

// TestGroupRebalances drives a group through its life: two members join,
// sync and heartbeat until STABLE with disjoint complete assignments; a
// third joins (rebalance), one leaves (rebalance), one stops
// heartbeating (session expiry, rebalance), one does not rejoin within its
// rebalanceTimeoutMs (dropped); commits are checked against the group.
func TestGroupRebalances(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	_, hs := startServer(t, Options{Now: clk.Now, GroupSessionTimeout: 10 * time.Second, GroupSyncDelay: time.Second})
	createStream(t, hs, "s1", 4)
	createStream(t, hs, "s2", 2)
	createApp(t, hs, "g")
	c := newCoord(t, hs, "g")
	all := map[string]int{"s1": 4, "s2": 2}

	// A new consumer's first heartbeat (generation -1): unknown, JOINING.
	c.wantHeartbeat("a", -1, "JOINING")
	st, delay, sub := c.join("a", map[string]any{"interestedStream": []string{"s1", "s2"}})
	if st != "OK" || delay != 1000 || strings.Join(sub, ",") != "s1,s2" {
		t.Fatalf("join a: %s %v %v", st, delay, sub)
	}
	if st, _, _ := c.sync("a", -1); st != "WAITING" {
		t.Fatalf("sync before the window closed: %s", st)
	}
	c.wantHeartbeat("a", -1, "SYNCING")
	clk.Advance(400 * time.Millisecond)
	st, delay, _ = c.join("b", map[string]any{"interestedStream": []string{"s1", "s2"}})
	if st != "OK" || delay != 600 {
		t.Fatalf("join b: %s %v, want OK 600 (the rest of the window)", st, delay)
	}
	clk.Advance(600 * time.Millisecond)
	genA, a := c.mustSync("a")
	genB, b := c.mustSync("b")
	if genA != 1 || genB != 1 {
		t.Fatalf("generations %d %d, want 1", genA, genB)
	}
	wantPartition(t, all, 3, a, b)
	c.wantHeartbeat("a", 1, "STABLE")
	c.wantHeartbeat("b", -1, "SYNCING") // not synced with this generation
	c.wantHeartbeat("b", 1, "STABLE")

	// A third member joins: the others are told to rejoin.
	c.joinStreams("c", "s1", "s2")
	c.wantHeartbeat("a", 1, "JOINING")
	if st, _, _ := c.sync("a", 1); st != "REJOIN" {
		t.Fatalf("sync of a member that has not rejoined: %s", st)
	}
	c.joinStreams("a", "s1", "s2")
	c.wantHeartbeat("a", 1, "SYNCING")
	clk.Advance(time.Second)
	if st, _, _ := c.sync("c", -1); st != "WAITING" {
		t.Fatalf("sync while b has not rejoined: %s", st)
	}
	c.joinStreams("b", "s1", "s2")
	gen, a := c.mustSync("a")
	_, b = c.mustSync("b")
	_, cc := c.mustSync("c")
	if gen != 2 {
		t.Fatalf("generation %d, want 2", gen)
	}
	wantPartition(t, all, 2, a, b, cc)

	// Commits of the group's members are checked against the generation.
	commit := func(client string, gen int64) (int, map[string]any) {
		return call(t, hs, "POST", "/v2/p/checkpoints/", map[string]any{"app_name": "g", "checkpoint_type": "LAST_READ",
			"stream_name": "s1", "partition_id": "shardId-0000000000", "sequence_number": "0", "client_id": client, "generation_id": gen})
	}
	st2, m := commit("a", 2)
	mustStatus(t, st2, m, 201)
	st2, m = commit("a", 1)
	wantCode(t, st2, m, 400, "DIS.4703")
	st2, m = commit("x", 2)
	wantCode(t, st2, m, 400, "DIS.4702")

	// b leaves: a rebalance.
	c.leave("b")
	st2, m = commit("a", 2)
	wantCode(t, st2, m, 400, "DIS.4701")
	c.wantHeartbeat("a", 2, "JOINING")
	c.joinStreams("a", "s1", "s2")
	c.joinStreams("c", "s1", "s2")
	clk.Advance(time.Second)
	gen, a = c.mustSync("a")
	_, cc = c.mustSync("c")
	if gen != 3 {
		t.Fatalf("generation %d, want 3", gen)
	}
	wantPartition(t, all, 3, a, cc)
	c.wantHeartbeat("a", 3, "STABLE")
	c.wantHeartbeat("c", 3, "STABLE")

	// c stops heartbeating: after the session timeout a is told to rejoin
	// and gets everything.
	clk.Advance(6 * time.Second)
	c.wantHeartbeat("a", 3, "STABLE")
	clk.Advance(5 * time.Second)
	c.wantHeartbeat("a", 3, "JOINING")
	c.wantHeartbeat("c", 3, "JOINING") // dropped: unknown now
	c.joinStreams("a", "s1", "s2")
	clk.Advance(time.Second)
	gen, a = c.mustSync("a")
	if gen != 4 {
		t.Fatalf("generation %d, want 4", gen)
	}
	wantPartition(t, all, 6, a)
	c.wantHeartbeat("a", 4, "STABLE")

	// A member with rebalanceTimeoutMs that does not rejoin in time is
	// dropped, though it keeps heartbeating.
	if st, _, _ := c.join("a", map[string]any{"interestedStream": []string{"s1", "s2"}, "rebalanceTimeoutMs": 3000}); st != "OK" {
		t.Fatal(st)
	}
	clk.Advance(time.Second)
	c.mustSync("a")
	c.joinStreams("d", "s1", "s2")
	for i := 0; i < 3; i++ {
		c.wantHeartbeat("a", 5, "JOINING")
		clk.Advance(time.Second)
	}
	gen, d := c.mustSync("d")
	if gen != 6 {
		t.Fatalf("generation %d, want 6", gen)
	}
	wantPartition(t, all, 6, d)
	c.wantHeartbeat("a", 5, "JOINING")
	if st, _, _ := c.sync("a", 5); st != "REJOIN" {
		t.Fatalf("sync of a dropped member: %s", st)
	}

	// Without rebalanceTimeoutMs, a member that heartbeats but does not
	// rejoin is dropped after the session timeout.
	c.wantHeartbeat("d", 6, "STABLE")
	c.joinStreams("e", "s1", "s2")
	for i := 0; i < 10; i++ {
		c.wantHeartbeat("d", 6, "JOINING")
		if st, _, _ := c.sync("e", -1); st != "WAITING" {
			t.Fatalf("sync at %d s: %s, want WAITING for d", i, st)
		}
		clk.Advance(time.Second)
	}
	gen, e := c.mustSync("e")
	if gen != 7 {
		t.Fatalf("generation %d, want 7", gen)
	}
	wantPartition(t, all, 6, e)
}

// TestGroupSubscriptions: streamPattern (matched whole, answered as the
// subscription), interestedStreamIdList (assignment keyed by stream_id),
// members with different subscriptions, and a scale-up seen at the next
// rebalance.
func TestGroupSubscriptions(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	_, hs := startServer(t, Options{Now: clk.Now, GroupSyncDelay: time.Millisecond, NoScalingLimits: true, RetentionUnit: time.Minute})
	createStream(t, hs, "orders-1", 2)
	createStream(t, hs, "orders-2", 1)
	createStream(t, hs, "xorders-3", 1)
	createStream(t, hs, "other", 3)
	createApp(t, hs, "g")
	c := newCoord(t, hs, "g")
	_, desc := call(t, hs, "GET", "/v2/p/streams/other", nil)
	otherID, _ := desc["stream_id"].(string)
	if otherID == "" {
		t.Fatalf("no stream_id: %v", desc)
	}

	st, _, sub := c.join("p", map[string]any{"streamPattern": "orders-.*"})
	if st != "OK" || strings.Join(sub, ",") != "orders-1,orders-2" {
		t.Fatalf("pattern join: %s %v", st, sub)
	}
	st, _, sub = c.join("i", map[string]any{"interestedStreamIdList": []string{otherID}})
	if st != "OK" || strings.Join(sub, ",") != otherID {
		t.Fatalf("ID join: %s %v", st, sub)
	}
	clk.Advance(time.Millisecond)
	_, p := c.mustSync("p")
	_, i := c.mustSync("i")
	wantPartition(t, map[string]int{"orders-1": 2, "orders-2": 1}, 3, p)
	wantPartition(t, map[string]int{otherID: 3}, 3, i)

	// The same stream by name and by ID is refused, as the adapter's log
	// says.
	if st, _, _ := c.join("x", map[string]any{"interestedStream": []string{"other"}, "interestedStreamIdList": []string{otherID}}); st != "ERR_SUBSCRIPTION" {
		t.Fatalf("name and ID of one stream: %s", st)
	}

	// Scale orders-1 up to 3: the next rebalance hands out partition 2.
	st2, m := call(t, hs, "PUT", "/v2/p/streams/orders-1", map[string]any{"stream_name": "orders-1", "target_partition_count": 3})
	mustStatus(t, st2, m, 200)
	c.join("p", map[string]any{"streamPattern": "orders-.*"})
	c.join("i", map[string]any{"interestedStreamIdList": []string{otherID}})
	clk.Advance(time.Millisecond)
	_, p = c.mustSync("p")
	wantPartition(t, map[string]int{"orders-1": 3, "orders-2": 1}, 4, p)

	// Two members on one pattern share it.
	c.join("p", map[string]any{"streamPattern": "orders-.*"})
	c.join("i", map[string]any{"streamPattern": "orders-.*"})
	clk.Advance(time.Millisecond)
	_, p = c.mustSync("p")
	_, i = c.mustSync("i")
	wantPartition(t, map[string]int{"orders-1": 3, "orders-2": 1}, 2, p, i)

	// Scaled down to 1, orders-1 keeps 3 readable partitions (two DELETED)
	// until their data expires (data_duration 24 "hours" of a minute).
	st2, m = call(t, hs, "PUT", "/v2/p/streams/orders-1", map[string]any{"stream_name": "orders-1", "target_partition_count": 1})
	mustStatus(t, st2, m, 200)
	rejoin := func() {
		c.join("p", map[string]any{"streamPattern": "orders-.*"})
		c.join("i", map[string]any{"streamPattern": "orders-.*"})
		clk.Advance(time.Millisecond)
		_, p = c.mustSync("p")
		_, i = c.mustSync("i")
	}
	rejoin()
	wantPartition(t, map[string]int{"orders-1": 3, "orders-2": 1}, 2, p, i)
	clk.Advance(25 * time.Minute)
	rejoin()
	wantPartition(t, map[string]int{"orders-1": 1, "orders-2": 1}, 1, p, i)
}

// TestGroupErrors: the states and DIS errors of bad joins and of groups
// whose app does not exist.
func TestGroupErrors(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	_, hs := startServer(t, Options{Now: clk.Now})
	createStream(t, hs, "s", 1)
	createApp(t, hs, "g")
	c := newCoord(t, hs, "g")
	for _, tc := range []struct {
		name string
		body map[string]any
		want string
	}{
		{"missing stream", map[string]any{"interestedStream": []string{"s", "nope"}}, "ERR_SUBSCRIPTION"},
		{"missing stream id", map[string]any{"interestedStreamIdList": []string{"0000000000000000000"}}, "ERR_SUBSCRIPTION"},
		{"no subscription", map[string]any{}, "ERR_SUBSCRIPTION"},
		{"pattern Go cannot compile", map[string]any{"streamPattern": "(?=s)s"}, "ERROR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &coordClient{t: t, app: c.app, send: c.send}
			if st, _, _ := c.join("a", tc.body); st != tc.want {
				t.Fatalf("got %s, want %s", st, tc.want)
			}
		})
	}
	// A failed join adds no member.
	c.wantHeartbeat("a", -1, "JOINING")

	// The app does not exist.
	n := newCoord(t, hs, "nope")
	if st, _, _ := n.join("a", map[string]any{"interestedStream": []string{"s"}}); st != "GROUP_NOT_EXIST" {
		t.Fatalf("join: %s", st)
	}
	if st, _, _ := n.sync("a", -1); st != "GROUP_NOT_EXIST" {
		t.Fatalf("sync: %s", st)
	}
	n.wantHeartbeat("a", -1, "GROUP_NOT_EXIST")
	st, m := call(t, hs, "DELETE", "/v2/p/apps/nope/consumers/a/", nil)
	wantCode(t, st, m, 400, "DIS.4332")

	// The app is deleted under a running group.
	c.joinStreams("a", "s")
	st, m = call(t, hs, "DELETE", "/v2/p/apps/g", nil)
	mustStatus(t, st, m, 204)
	c.wantHeartbeat("a", -1, "GROUP_NOT_EXIST")

	// Malformed requests get DIS errors.
	st, m = call(t, hs, "POST", "/v2/p/apps/g/consumers/", map[string]any{"interestedStream": []string{"s"}})
	wantCode(t, st, m, 400, "DIS.4200")
	st, m = call(t, hs, "POST", "/v2/p/apps/g/consumers", map[string]any{"clientId": strings.Repeat("x", 300), "interestedStream": []string{"s"}})
	wantCode(t, st, m, 400, "DIS.4200")
	st, m = call(t, hs, "POST", "/v2/p/apps/g/consumers", "not an object")
	wantCode(t, st, m, 400, "DIS.4300")
	st, m = call(t, hs, "POST", "/v2/p/apps/g/consumers/a/heartbeats", map[string]any{"generation": "one"})
	wantCode(t, st, m, 400, "DIS.4300")
	st, m = call(t, hs, "GET", "/v2/p/apps/g/consumers/a/heartbeats", nil)
	wantCode(t, st, m, 405, "DIS.4200")
}

// signedCall sends a request signed by the official Go SDK's signer.
func signedCall(t *testing.T, hs *httptest.Server, method, path string, body any) (int, map[string]any) {
	t.Helper()
	u, err := url.Parse(hs.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	b := request.NewHttpRequestBuilder().WithEndpoint(u.Scheme+"://"+u.Host).WithPath(u.Path).
		WithMethod(method).AddHeaderParam("Host", u.Host).AddHeaderParam("Content-Type", "application/json")
	if raw != nil {
		b = b.WithBody("application/json", string(raw))
	}
	sr := b.Build()
	extra, err := signer.Sign(sr, testAK, testSK)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(method, u.String(), bytes.NewReader(raw))
	for k, v := range sr.GetHeaderParams() {
		req.Header.Set(k, v)
	}
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(out) > 0 {
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("%s %s: %d %q is not JSON", method, path, resp.StatusCode, out)
		}
	}
	return resp.StatusCode, m
}

// TestGroupSigned: with AK/SK configured, the coordinator paths need a
// signature like every DIS operation, and serve signed requests. It runs
// alone (not parallel) and checks that no goroutine outlives the server:
// groups start none.
func TestGroupSigned(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	clk := &fakeClock{t: time.Now()}
	func() {
		store, err := localstoreOpen(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		srv, err := New(store, Options{Now: clk.Now, AK: testAK, SK: testSK, GroupSyncDelay: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv)
		defer hs.Close()
		defer hs.Client().CloseIdleConnections()
		st, m := call(t, hs, "POST", "/v2/p/apps/g/consumers/", map[string]any{"clientId": "a", "interestedStream": []string{"s"}})
		if st != 441 {
			t.Fatalf("unsigned JoinGroup: %d %v, want 441", st, m)
		}
		st, m = signedCall(t, hs, "POST", "/v2/p/streams", map[string]any{"stream_name": "s", "partition_count": 3})
		mustStatus(t, st, m, 201)
		st, m = signedCall(t, hs, "POST", "/v2/p/apps", map[string]any{"app_name": "g"})
		mustStatus(t, st, m, 201)
		c := &coordClient{t: t, app: "g", send: func(method, path string, body any) (int, map[string]any) {
			return signedCall(t, hs, method, path, body)
		}}
		c.joinStreams("a", "s")
		c.joinStreams("b", "s")
		clk.Advance(time.Second)
		_, a := c.mustSync("a")
		_, b := c.mustSync("b")
		wantPartition(t, map[string]int{"s": 3}, 1, a, b)
		c.wantHeartbeat("a", 1, "STABLE")
		c.leave("a")
		c.wantHeartbeat("b", 1, "JOINING")
	}()
}

// FuzzJoinGroup feeds arbitrary JoinGroup, SyncGroup and Heartbeat bodies:
// no panic, and every answer is a state (200) or a DIS error (400).
func FuzzJoinGroup(f *testing.F) {
	for _, s := range []string{
		`{"groupId":"g","clientId":"a","interestedStream":["s"]}`,
		`{"groupId":"g","clientId":"a","streamPattern":"s.*","rebalanceTimeoutMs":20000,"accelerateAssignEnabled":false}`,
		`{"clientId":"a","interestedStreamIdList":["x"],"streamPattern":"("}`,
		`{"clientId":"a","generation":-1}`,
		`{"clientId":"","rebalanceTimeoutMs":-5}`,
		`[]`, `null`, ``,
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	st, err := localstoreOpen(dir)
	if err != nil {
		f.Fatal(err)
	}
	defer st.Close()
	s, err := New(st, Options{GroupSyncDelay: time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	for _, req := range []struct{ path, body string }{
		{"/v2/p/streams", `{"stream_name":"s","partition_count":2}`},
		{"/v2/p/apps", `{"app_name":"g"}`},
	} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("POST", req.path, strings.NewReader(req.body)))
		if w.Code != 201 {
			f.Fatalf("%s: %d %s", req.path, w.Code, w.Body)
		}
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, path := range []string{"/v2/p/apps/g/consumers/", "/v2/p/apps/g/consumers/a/partitions/", "/v2/p/apps/g/consumers/a/heartbeats/"} {
			w := httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest("POST", path, strings.NewReader(body)))
			if w.Code != 200 && w.Code != 400 {
				t.Fatalf("%s %q: %d %s", path, body, w.Code, w.Body)
			}
			var m map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
				t.Fatalf("%s %q: answer %q is not JSON", path, body, w.Body)
			}
			if _, ok := m["state"]; !ok && w.Code == 200 {
				t.Fatalf("%s %q: 200 without a state: %v", path, body, m)
			}
		}
	})
}

func localstoreOpen(dir string) (*localstore.Store, error) {
	return localstore.Open(dir, localstore.Options{RetentionCheckInterval: -1})
}
