package disrest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/dislocal"
	"github.com/disgw/disgw/internal/metrics"
)

// The timings of the cluster tests: dislocal's group session and join
// window, and the nodes' settings, short so that a test takes seconds.
const (
	testSession    = 2 * time.Second
	testSyncDelay  = 300 * time.Millisecond
	testHeartbeat  = 100 * time.Millisecond
	testJoinWindow = time.Second
	testSettle     = 300 * time.Millisecond
	testLease      = 600 * time.Millisecond
)

// clusterTest is one test's dislocal and the logs of its nodes.
type clusterTest struct {
	t    *testing.T
	url  string
	logs *observer.ObservedLogs
	core zapcore.Core
}

// newClusterTest starts dislocal with short group timings, and checks at
// the end of the test that the nodes' goroutines have ended (goleak).
func newClusterTest(t *testing.T, mod func(*dislocal.Options)) *clusterTest {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	o := dislocal.Options{GroupSessionTimeout: testSession, GroupSyncDelay: testSyncDelay}
	if mod != nil {
		mod(&o)
	}
	_, url := startDIS(t, o)
	core, logs := observer.New(zapcore.InfoLevel)
	return &clusterTest{t: t, url: url, logs: logs, core: core}
}

// node opens a Store in cluster mode with node id id and starts it,
// advertising 127.0.0.1:9000+id.
func (c *clusterTest) node(id int32, mod func(*Options)) *Store {
	c.t.Helper()
	s := c.open(id, mod)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.StartCluster(ctx, listenersOf(id)); err != nil {
		c.t.Fatalf("node %d: start cluster: %v", id, err)
	}
	return s
}

func (c *clusterTest) open(id int32, mod func(*Options)) *Store {
	c.t.Helper()
	return newStore(c.t, c.url, func(o *Options) {
		o.Cluster, o.NodeID = true, id
		o.ClusterHeartbeat, o.ClusterJoinWindow, o.ClusterSettle, o.ClusterLease = testHeartbeat, testJoinWindow, testSettle, testLease
		o.NoCompactor = true
		o.Logger = zap.New(zapcore.NewTee(zaptest.NewLogger(c.t).Core(), c.core))
		if mod != nil {
			mod(o)
		}
	})
}

func listenersOf(id int32) map[string]string {
	return map[string]string{"PLAINTEXT": fmt.Sprintf("127.0.0.1:%d", 9000+id)}
}

// agree waits until every store holds a Ready view with the nodes ids,
// the same for all, and returns it.
func agree(t *testing.T, within time.Duration, ids []int32, stores ...*Store) *disbackend.View {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		v, why := agreed(ids, stores)
		if v != nil {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("no agreed view of nodes %v within %v: %s", ids, within, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func agreed(ids []int32, stores []*Store) (*disbackend.View, string) {
	var first *disbackend.View
	for _, s := range stores {
		v := s.Cluster().View()
		if !v.Ready {
			return nil, fmt.Sprintf("node %d has no view", v.Self)
		}
		got := make([]int32, len(v.Nodes))
		for i, n := range v.Nodes {
			got[i] = n.ID
		}
		if fmt.Sprint(got) != fmt.Sprint(ids) {
			return nil, fmt.Sprintf("node %d's view (generation %d, epoch %d) has nodes %v", v.Self, v.Generation, v.Epoch, got)
		}
		if first == nil {
			first = v
			continue
		}
		if v.Generation != first.Generation || v.Epoch != first.Epoch || v.Controller != first.Controller {
			return nil, fmt.Sprintf("node %d holds generation %d epoch %d controller %d, node %d generation %d epoch %d controller %d",
				first.Self, first.Generation, first.Epoch, first.Controller, v.Self, v.Generation, v.Epoch, v.Controller)
		}
	}
	return first, ""
}

// owner returns the node owning key in s's view.
func owner(s *Store, key string) int32 { return s.Cluster().View().Owner(key) }

// controllers counts, by generation, the nodes that became its
// controller, from the logs since the last call (DIS numbers generations
// from 1 again when the group empties).
func (c *clusterTest) controllers() map[int64]int {
	out := map[int64]int{}
	for _, e := range c.logs.TakeAll() {
		if e.Message != "controller of the generation: writing its view after the settle time" {
			continue
		}
		out[e.ContextMap()["generation"].(int64)]++
	}
	return out
}

func (c *clusterTest) checkOneControllerEach() {
	c.t.Helper()
	for gen, n := range c.controllers() {
		if n != 1 {
			c.t.Errorf("generation %d had %d controllers", gen, n)
		}
	}
}

// watchEpochs records every view epoch the stores adopt, and fails the
// test when one goes down.
func watchEpochs(t *testing.T, stores ...*Store) {
	var wg sync.WaitGroup
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); wg.Wait() })
	for _, s := range stores {
		cl := s.Cluster()
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := int32(0)
			for {
				ch := cl.ViewChanged()
				v := cl.View()
				if v.Ready {
					if v.Epoch < last {
						t.Errorf("node %d: view epoch %d after %d", v.Self, v.Epoch, last)
					}
					last = v.Epoch
				}
				select {
				case <-stop:
					return
				case <-ch:
				}
			}
		}()
	}
}

// Three nodes agree on one view: the same generation, epoch, controller
// and owners; the owners hold their keys (lease and view) and the others
// are refused with the cluster sentinels; the controller is unique.
func TestClusterAgree(t *testing.T) {
	c := newClusterTest(t, nil)
	admin := newStore(t, c.url, nil)
	mkStream(t, admin, "orders", 12)
	mkStream(t, admin, "payments", 3)
	if _, err := admin.CreateApp(ctxT(t), disbackend.App{Name: "billing", GroupID: "billing"}); err != nil {
		t.Fatal(err)
	}
	stores := []*Store{c.node(1, nil), c.node(2, nil), c.node(3, nil)}
	watchEpochs(t, stores...)
	start := time.Now()
	v := agree(t, 15*time.Second, []int32{1, 2, 3}, stores...)
	t.Logf("agreed in %v: generation %d, epoch %d, controller %d", time.Since(start), v.Generation, v.Epoch, v.Controller)

	keys := []string{disbackend.GroupKey("billing"), disbackend.PartitionKey(GroupStream, 0)}
	for p := int32(0); p < 12; p++ {
		keys = append(keys, disbackend.PartitionKey("orders", p))
	}
	for i := len(keys); i < 1000; i++ {
		keys = append(keys, disbackend.PartitionKey(fmt.Sprintf("t%d", i%37), int32(i)))
	}
	load := map[int32]int{}
	for _, k := range keys {
		o := owner(stores[0], k)
		load[o]++
		for _, s := range stores[1:] {
			if got := owner(s, k); got != o {
				t.Fatalf("%s: node %d says node %d owns it, node 1 says %d", k, s.cluster.nodeID, got, o)
			}
		}
	}
	t.Logf("owners of %d keys: %v", len(keys), load)
	if len(load) != 3 {
		t.Errorf("keys owned by %v, want all three nodes", load)
	}
	if d := stores[0].cluster.cur.Load().doc; d == nil || d.keys() < 16 {
		t.Errorf("the view document places %v keys, want the 15 partitions and the group", d.keys())
	}

	// The owner may write (once its lease holds), the others not.
	waitFor(t, 5*time.Second, "every owner's lease", func() bool {
		for _, k := range keys[:20] {
			if stores[owner(stores[0], k)-1].fence.mayWrite(k) != nil {
				return false
			}
		}
		return true
	})
	for _, k := range keys[:20] {
		for _, s := range stores {
			err := s.fence.mayWrite(k)
			if s.cluster.nodeID == owner(s, k) {
				continue
			}
			want := disbackend.ErrNotLeader
			if strings.HasPrefix(k, "g/") {
				want = disbackend.ErrNotCoordinator
			}
			if !errors.Is(err, want) {
				t.Errorf("node %d, %s owned by %d: mayWrite = %v, want %v", s.cluster.nodeID, k, owner(s, k), err, want)
			}
		}
	}
	for _, s := range stores {
		err := s.fence.mayWrite(controllerKey)
		if isCtl := s.cluster.nodeID == v.Controller; isCtl != (err == nil) {
			t.Errorf("node %d (controller %d): mayWrite(controller) = %v", s.cluster.nodeID, v.Controller, err)
		}
		if !s.cluster.nodeIsController() == (s.cluster.nodeID == v.Controller) {
			t.Errorf("node %d: controller task running = %v, view's controller %d", s.cluster.nodeID, s.cluster.nodeIsController(), v.Controller)
		}
		id, gen, ok := s.fence.member()
		if !ok || gen != v.Generation || !strings.HasPrefix(id, fmt.Sprintf("node-%d-", s.cluster.nodeID)) {
			t.Errorf("node %d: member() = %q, %d, %v; want node-%d-…, %d", s.cluster.nodeID, id, gen, ok, s.cluster.nodeID, v.Generation)
		}
		if n, ok := v.Node(s.cluster.nodeID); !ok || n.Listeners["PLAINTEXT"] != listenersOf(s.cluster.nodeID)["PLAINTEXT"] {
			t.Errorf("node %d in the view: %+v", s.cluster.nodeID, n)
		}
	}
	c.checkOneControllerEach()
}

// nodeIsController reports whether the node runs the controller's task of
// its generation.
func (m *membership) nodeIsController() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopControl != nil
}

func waitFor(t *testing.T, within time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A node that closes leaves the group: the others hold a view without it
// well within the session (so not by its expiry). A key that moves to a
// node is first written after the takeover wait; one it kept, at once.
func TestClusterCloseLeaves(t *testing.T) {
	// A session long enough that a view without node 3 cannot come from
	// its expiry, however slow the machine (the join window, the settle
	// time and a few heartbeats are under 2 s).
	const session = 20 * time.Second
	c := newClusterTest(t, func(o *dislocal.Options) { o.GroupSessionTimeout = session })
	short := func(o *Options) { o.RequestTimeout = time.Second }
	stores := []*Store{c.node(1, short), c.node(2, short), c.node(3, short)}
	watchEpochs(t, stores...)
	v := agree(t, 15*time.Second, []int32{1, 2, 3}, stores...)
	start := time.Now()
	if err := stores[2].Close(); err != nil {
		t.Fatal(err)
	}
	w := agree(t, session/2, []int32{1, 2}, stores[:2]...)
	t.Logf("view without node 3 in %v (join window %v + settle %v; session %v): generation %d, epoch %d",
		time.Since(start), testSyncDelay, testSettle, session, w.Generation, w.Epoch)
	if w.Epoch <= v.Epoch {
		t.Errorf("epoch %d after %d", w.Epoch, v.Epoch)
	}

	// Node 1 takes over some of node 3's keys: it waits for node 3's
	// lease and requests to end; the keys it kept it writes at once.
	var moved, kept string
	for i := 0; moved == "" || kept == ""; i++ {
		k := disbackend.PartitionKey("orders", int32(i))
		was := v.Owner(k)
		switch {
		case was == 3 && owner(stores[0], k) == 1 && moved == "":
			moved = k
		case was == 1 && kept == "":
			kept = k
		}
	}
	m1 := stores[0].cluster
	waitFor(t, 5*time.Second, "node 1's lease", func() bool { return m1.mayWrite(kept) == nil })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if w := m1.takeoverWait(kept); w != 0 {
		t.Errorf("takeover wait of %s (node 1's before) = %v, want 0", kept, w)
	}
	// Checked only with the handover well ahead: on a loaded machine it
	// may pass between the check and the call.
	if m1.mono()+200*time.Millisecond < m1.cur.Load().handover {
		if w := m1.takeoverWait(moved); w <= 0 {
			t.Errorf("takeover wait of %s (node 3's) before the handover = %v, want > 0", moved, w)
		}
		if err := m1.takeover(ctx, moved); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("takeover of %s (node 3's) before the handover = %v, want the context's deadline", moved, err)
		}
	}
	// A key it kept does not wait for the handover.
	begin, handover := m1.mono(), m1.cur.Load().handover
	if err := m1.takeover(ctxT(t), kept); err != nil || begin+200*time.Millisecond < handover && m1.mono() >= handover {
		t.Errorf("takeover of %s (node 1's before) = %v, begun at %v, returned at %v, handover %v: want nil before the handover",
			kept, err, begin, m1.mono(), handover)
	}
	if err := m1.takeover(ctxT(t), moved); err != nil {
		t.Fatalf("takeover of %s: %v", moved, err)
	}
	st := m1.cur.Load()
	m1.mu.Lock()
	joined := m1.genJoinedAt
	m1.mu.Unlock()
	if m1.mono() < st.handover || st.handover < joined+testLease+time.Second {
		t.Errorf("takeover of %s returned at %v, handover %v (joined %v, lease %v, request timeout 1s)", moved, m1.mono(), st.handover, joined, testLease)
	}
	if w := m1.takeoverWait(moved); w != 0 {
		t.Errorf("takeover wait of %s after the handover = %v, want 0", moved, w)
	}
	if err := stores[1].cluster.takeover(ctxT(t), moved); !errors.Is(err, disbackend.ErrNotLeader) {
		t.Errorf("takeover of %s by node 2, not its owner: %v, want ErrNotLeader", moved, err)
	}
	c.checkOneControllerEach()
}

// A node that stops (as under SIGSTOP) stops writing once its lease has
// passed, is dropped after the session, gets its lease refused when it
// resumes, then joins again and gets a view.
func TestClusterPausedNode(t *testing.T) {
	c := newClusterTest(t, nil)
	m3 := metrics.New(metrics.Options{})
	stores := []*Store{c.node(1, nil), c.node(2, nil), c.node(3, func(o *Options) { o.Metrics = m3 })}
	watchEpochs(t, stores...)
	v := agree(t, 15*time.Second, []int32{1, 2, 3}, stores...)
	var key string
	for i := 0; key == ""; i++ {
		if k := disbackend.PartitionKey("orders", int32(i)); owner(stores[2], k) == 3 {
			key = k
		}
	}
	waitFor(t, 5*time.Second, "node 3's lease", func() bool { return stores[2].fence.mayWrite(key) == nil })

	stores[2].cluster.pause.pause()
	paused := time.Now()
	waitFor(t, testLease+time.Second, "node 3 refusing to write", func() bool { return stores[2].fence.mayWrite(key) != nil })
	if d := time.Since(paused); d < testLease-2*testHeartbeat {
		t.Errorf("node 3 stopped writing %v after its pause, before its lease could end (%v)", d, testLease)
	}
	if err := stores[2].fence.mayWrite(key); !errors.Is(err, disbackend.ErrNotLeader) {
		t.Errorf("paused node 3: mayWrite(%s) = %v, want ErrNotLeader", key, err)
	}
	w := agree(t, testSession+5*time.Second, []int32{1, 2}, stores[:2]...)
	t.Logf("view without the paused node %v after its pause (session %v): generation %d, epoch %d", time.Since(paused), testSession, w.Generation, w.Epoch)
	if w.Epoch <= v.Epoch {
		t.Errorf("epoch %d after %d", w.Epoch, v.Epoch)
	}

	refusedBefore := gathered(t, m3, "disgw_cluster_lease_refused_total")
	stores[2].cluster.pause.resume()
	waitFor(t, 5*time.Second, "node 3's lease refused", func() bool {
		return gathered(t, m3, "disgw_cluster_lease_refused_total") > refusedBefore
	})
	x := agree(t, 15*time.Second, []int32{1, 2, 3}, stores...)
	if x.Epoch <= w.Epoch {
		t.Errorf("epoch %d after %d", x.Epoch, w.Epoch)
	}
	if got := gathered(t, m3, "disgw_cluster_view_epoch"); got != float64(x.Epoch) {
		t.Errorf("node 3's disgw_cluster_view_epoch = %v, want %d", got, x.Epoch)
	}
	if got := gathered(t, m3, "disgw_cluster_members"); got != 3 {
		t.Errorf("node 3's disgw_cluster_members = %v, want 3", got)
	}
	c.checkOneControllerEach()
}

// gathered is the value of a metric without labels.
func gathered(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) == 0 {
			continue
		}
		mt := mf.GetMetric()[0]
		switch {
		case mt.GetCounter() != nil:
			return mt.GetCounter().GetValue()
		case mt.GetGauge() != nil:
			return mt.GetGauge().GetValue()
		}
	}
	return -1
}

// Epochs only grow, also when every node restarts (DIS numbers the
// generations from 1 again when the group empties).
func TestClusterEpochsGrowAcrossRestarts(t *testing.T) {
	c := newClusterTest(t, nil)
	var last *disbackend.View
	for round := 0; round < 2; round++ {
		stores := []*Store{c.node(1, nil), c.node(2, nil), c.node(3, nil)}
		watchEpochs(t, stores...)
		v := agree(t, 15*time.Second, []int32{1, 2, 3}, stores...)
		t.Logf("round %d: generation %d, epoch %d", round, v.Generation, v.Epoch)
		if last != nil && v.Epoch <= last.Epoch {
			t.Errorf("after restarting every node: epoch %d, before %d", v.Epoch, last.Epoch)
		}
		last = v
		for _, s := range stores {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
		c.checkOneControllerEach()
	}
}

// A node whose id another live node holds stops, naming both; the other
// goes on.
func TestClusterDuplicateNodeID(t *testing.T) {
	c := newClusterTest(t, nil)
	first := c.node(1, nil)
	agree(t, 15*time.Second, []int32{1}, first)
	second := c.node(1, nil)
	select {
	case err := <-second.ClusterFailed():
		for _, want := range []string{"node id 1", first.cluster.clientID, second.cluster.clientID} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the second node with id 1 did not stop")
	}
	if second.Cluster().View().Ready {
		t.Error("the stopped node holds a view")
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	agree(t, 15*time.Second, []int32{1}, first)
	select {
	case err := <-first.ClusterFailed():
		t.Errorf("the first node stopped: %v", err)
	default:
	}
}

// A DIS that takes a commit of a stale group member cannot fence: a node
// refuses to start cluster mode in front of it.
func TestClusterStartRefusesDISWithoutFencing(t *testing.T) {
	c := newClusterTest(t, func(o *dislocal.Options) { o.NoGroupFencing = true })
	s := c.open(1, nil)
	err := s.StartCluster(ctxT(t), listenersOf(1))
	if err == nil || !strings.Contains(err.Error(), "DIS does not fence stale group members") {
		t.Fatalf("StartCluster = %v, want DIS does not fence stale group members", err)
	}
	if v := s.Cluster().View(); v.Ready || v.Self != 1 {
		t.Errorf("view %+v", v)
	}
}

// Before its first view a node owns nothing: a View that is not Ready,
// with itself and no owners, and every write refused.
func TestClusterNoViewBeforeStart(t *testing.T) {
	c := newClusterTest(t, nil)
	s := c.open(7, nil)
	v := s.Cluster().View()
	if v.Ready || v.Self != 7 || v.Controller != -1 || v.Owner("p/a/0") != -1 {
		t.Errorf("view before start: %+v", v)
	}
	for key, want := range map[string]error{"p/a/0": disbackend.ErrNotLeader, "g/x": disbackend.ErrNotCoordinator, controllerKey: disbackend.ErrNotController} {
		if err := s.fence.mayWrite(key); !errors.Is(err, want) {
			t.Errorf("mayWrite(%s) = %v, want %v", key, err, want)
		}
	}
	if id, gen, ok := s.fence.member(); !ok || gen != -1 || !strings.HasPrefix(id, "node-7-") {
		t.Errorf("member() = %q, %d, %v", id, gen, ok)
	}
	if newStore(t, c.url, nil).Cluster() != nil {
		t.Error("a Store without cluster mode has a Cluster")
	}
}

// Keys created after the view (owned by the rendezvous hash) that load one
// node above 1.1 times the mean make the controller start a new
// generation, whose view places them.
func TestClusterRebalancesNewKeys(t *testing.T) {
	c := newClusterTest(t, nil)
	fast := func(o *Options) { o.ClusterRebalanceInterval = 300 * time.Millisecond }
	stores := []*Store{c.node(1, fast), c.node(2, fast)}
	v := agree(t, 15*time.Second, []int32{1, 2}, stores...)
	if v.Epoch < 1 {
		t.Fatal(v)
	}
	// A topic whose partitions the rendezvous hash puts unevenly.
	admin := newStore(t, c.url, nil)
	var n int32
	for n = 4; ; n++ {
		load := map[int32]int{}
		for p := int32(0); p < n; p++ {
			load[v.Owner(disbackend.PartitionKey("skewed", p))]++
		}
		if float64(max(load[1], load[2])) > 1.1*float64(n+1)/2 { // +1: __disgw_groups' partition, if placed
			break
		}
	}
	mkStream(t, admin, "skewed", n)
	w := agree(t, 10*time.Second, []int32{1, 2}, stores...)
	for w.Epoch == v.Epoch {
		time.Sleep(20 * time.Millisecond)
		w = agree(t, 10*time.Second, []int32{1, 2}, stores...)
	}
	doc := stores[0].cluster.cur.Load().doc
	placed := doc.ownerMap()
	load := map[int32]int{}
	for p := int32(0); p < n; p++ {
		k := disbackend.PartitionKey("skewed", p)
		if _, ok := placed[k]; !ok {
			t.Errorf("%s is not in the new view's document", k)
		}
		load[w.Owner(k)]++
	}
	t.Logf("%d partitions: epoch %d → %d, owners %v", n, v.Epoch, w.Epoch, load)
	c.checkOneControllerEach()
}

// The write paths answer to the membership: an Append goes through the
// partition's owner only, and after the owner leaves, through the node
// that takes it over.
func TestClusterAppendFollowsTheView(t *testing.T) {
	c := newClusterTest(t, nil)
	admin := newStore(t, c.url, nil)
	mkStream(t, admin, "orders", 4)
	short := func(o *Options) { o.RequestTimeout = time.Second }
	s1, s2 := c.node(1, short), c.node(2, short)
	v := agree(t, 15*time.Second, []int32{1, 2}, s1, s2)
	part := int32(-1)
	for p := int32(0); p < 4 && part < 0; p++ {
		if v.Leader("orders", p) == 1 {
			part = p
		}
	}
	if part < 0 {
		t.Fatalf("node 1 leads no partition of orders in %+v", v)
	}
	if _, err := s1.Append("orders", part, valuesBatch("a")).Wait(ctxT(t)); err != nil {
		t.Fatalf("append through the leader: %v", err)
	}
	if _, err := s2.Append("orders", part, valuesBatch("b")).Wait(ctxT(t)); !errors.Is(err, disbackend.ErrNotLeader) {
		t.Fatalf("append through node 2, not the leader: %v, want ErrNotLeader", err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	agree(t, testSession, []int32{2}, s2)
	res, err := s2.Append("orders", part, valuesBatch("c")).Wait(ctxT(t))
	if err != nil {
		t.Fatalf("append through node 2 once it leads: %v", err)
	}
	if res.BaseOffset != 1 {
		t.Errorf("node 2's first record at offset %d, want 1 (after node 1's)", res.BaseOffset)
	}
}
