package admin_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/disgw/disgw/admin"
	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/localstore"
)

// fakeCluster is a disbackend.Cluster and ClusterStatusReporter whose view
// and lease the test sets.
type fakeCluster struct {
	mu      sync.Mutex
	view    *disbackend.View
	status  disbackend.ClusterStatus
	changed chan struct{}
}

func (f *fakeCluster) View() *disbackend.View {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.view
}

func (f *fakeCluster) ViewChanged() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *fakeCluster) Status() disbackend.ClusterStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.status
	st.View = f.view
	return st
}

// set replaces the view and the status.
func (f *fakeCluster) set(v *disbackend.View, st disbackend.ClusterStatus) {
	f.mu.Lock()
	f.view, f.status = v, st
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// clusterStore is the embedded store as one node of a cluster.
type clusterStore struct {
	*localstore.Store
	*fakeCluster
}

// hashOwner places a key on one of n nodes (0..n-1) by its FNV-1a hash.
func hashOwner(n int) func(string) int32 {
	return func(key string) int32 {
		h := fnv.New32a()
		h.Write([]byte(key))
		return int32(h.Sum32() % uint32(n))
	}
}

// threeNodes is a Ready view of nodes 0, 1 and 2 as node self, with
// controller 1.
func threeNodes(self int32) *disbackend.View {
	v := &disbackend.View{Generation: 4, Epoch: 7, Self: self, Controller: 1, Ready: true, Owner: hashOwner(3)}
	for id := int32(0); id < 3; id++ {
		v.Nodes = append(v.Nodes, disbackend.Node{ID: id, Listeners: map[string]string{
			"PLAINTEXT": fmt.Sprintf("gw-%d.example:9092", id), "INTERNAL": fmt.Sprintf("10.0.0.%d:9093", id)}})
	}
	return v
}

func startClusterAdmin(t *testing.T) (*admin.Server, *localstore.Store, *fakeCluster) {
	t.Helper()
	fc := &fakeCluster{view: &disbackend.View{Self: 1, Controller: -1}, changed: make(chan struct{})}
	var store *localstore.Store
	s, _ := startAdminOn(t, func(ls *localstore.Store) disbackend.Backend {
		store = ls
		return clusterStore{ls, fc}
	}, nil)
	return s, store, fc
}

// metricValue is the value of a sample without labels in a text
// exposition, and whether there is one.
func metricValue(body, name string) (float64, bool) {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

// ended returns v as View answers it once v's generation ended: not Ready.
func ended(v *disbackend.View) *disbackend.View {
	e := *v
	e.Ready = false
	return &e
}

// TestAdminClusterReadyz: a cluster-mode node's /readyz is 503 with the
// reason before its first view, with its lease refused (DIS.4702) or
// lapsed, and once its membership stopped; 200 with its lease held and
// between views.
func TestAdminClusterReadyz(t *testing.T) {
	s, _, fc := startClusterAdmin(t)
	base := "http://" + s.Addr().String()
	c := &http.Client{}
	defer c.CloseIdleConnections()
	cases := []struct {
		name string
		view *disbackend.View
		st   disbackend.ClusterStatus
		want int
		says string
	}{
		{"before the first view", &disbackend.View{Self: 1, Controller: -1}, disbackend.ClusterStatus{Generation: -1}, 503, "no cluster view yet"},
		{"lease held", threeNodes(1), disbackend.ClusterStatus{Generation: 4, Lease: disbackend.LeaseHeld, LeaseLeft: time.Second}, 200, "ready"},
		{"between views, refused by the rebalance", threeNodes(1), disbackend.ClusterStatus{Generation: 4, Lease: disbackend.LeaseBetweenViews,
			RefusedCode: "DIS.4701", LeaseEnded: time.Second}, 200, "ready"},
		{"between views, held for the next generation", threeNodes(1), disbackend.ClusterStatus{Generation: 5, Lease: disbackend.LeaseBetweenViews,
			LeaseLeft: time.Second}, 200, "ready"},
		{"between views, the view's generation ended", ended(threeNodes(1)), disbackend.ClusterStatus{Generation: 4,
			Lease: disbackend.LeaseBetweenViews, LeaseLeft: time.Second}, 200, "ready"},
		{"lease refused: dropped from the group", threeNodes(1), disbackend.ClusterStatus{Generation: 4, Lease: disbackend.LeaseRefused,
			RefusedCode: "DIS.4702", LeaseEnded: 2 * time.Second}, 503, "cluster: cluster lease refused 2s ago (DIS.4702)"},
		{"lease lapsed: paused", threeNodes(1), disbackend.ClusterStatus{Generation: 4, Lease: disbackend.LeaseLapsed,
			LeaseEnded: 5 * time.Second}, 503, "lapsed 5s ago"},
		{"membership stopped", &disbackend.View{Self: 1, Controller: -1}, disbackend.ClusterStatus{Generation: 4,
			Failure: errors.New("node id 1 is held by another live node")}, 503, "held by another live node"},
	}
	for _, tc := range cases {
		fc.set(tc.view, tc.st)
		code, body := get(t, c, base+"/readyz")
		if code != tc.want || !strings.Contains(body, tc.says) {
			t.Errorf("%s: /readyz %d %q, want %d with %q", tc.name, code, body, tc.want, tc.says)
		}
	}
}

// TestAdminClusterMetricsAndConsole: /metrics counts the partitions of
// the topics each node leads and the groups it coordinates in its view:
// over the three nodes they add up to every partition and every group;
// without a Ready view a node counts none. The overview shows the view's
// nodes with their listeners, the controller, the epoch and generation,
// the lease and this node's share.
func TestAdminClusterMetricsAndConsole(t *testing.T) {
	s, store, fc := startClusterAdmin(t)
	base := "http://" + s.Addr().String()
	c := &http.Client{}
	defer c.CloseIdleConnections()
	ctx := context.Background()
	parts := map[string]int32{"orders": 12, "payments": 5, "audit": 1}
	for name, n := range parts {
		if _, err := store.CreateStream(ctx, disbackend.StreamSpec{Name: name, TopicName: name, PartitionCount: n,
			Config: disbackend.StreamConfig{Retention: 24 * time.Hour, MaxMessageBytes: 1 << 20}}); err != nil {
			t.Fatal(err)
		}
	}
	groups := []string{"billing", "shipping", "fraud", "reports"}
	for _, g := range groups {
		if _, err := store.CreateApp(ctx, disbackend.App{Name: g, GroupID: g}); err != nil {
			t.Fatal(err)
		}
	}
	owner := hashOwner(3)
	want := map[int32][2]int{}
	for name, n := range parts {
		for p := int32(0); p < n; p++ {
			o := owner(disbackend.PartitionKey(name, p))
			w := want[o]
			w[0]++
			want[o] = w
		}
	}
	for _, g := range groups {
		o := owner(disbackend.GroupKey(g))
		w := want[o]
		w[1]++
		want[o] = w
	}

	// Without a view: none, once the snapshot has the topics and apps.
	fc.set(&disbackend.View{Self: 0, Controller: -1}, disbackend.ClusterStatus{Generation: -1})
	waitFor(t, "a snapshot with 18 partitions and 4 apps", func() bool {
		snap := s.Snapshot()
		n := 0
		if snap != nil {
			for _, tp := range snap.Topics {
				n += len(tp.Partitions)
			}
		}
		return n == 18 && len(snap.Apps) == 4
	})
	_, body := get(t, c, base+"/metrics")
	if v, ok := metricValue(body, "disgw_cluster_partitions_led"); !ok || v != 0 {
		t.Errorf("without a view: disgw_cluster_partitions_led %v (%v), want 0", v, ok)
	}

	var led, owned int
	for self := int32(0); self < 3; self++ {
		fc.set(threeNodes(self), disbackend.ClusterStatus{Generation: 4, Lease: disbackend.LeaseHeld, LeaseLeft: 1500 * time.Millisecond})
		_, body := get(t, c, base+"/metrics")
		l, ok1 := metricValue(body, "disgw_cluster_partitions_led")
		g, ok2 := metricValue(body, "disgw_cluster_groups_owned")
		if !ok1 || !ok2 || int(l) != want[self][0] || int(g) != want[self][1] {
			t.Errorf("node %d: partitions led %v (%v), groups owned %v (%v); want %v", self, l, ok1, g, ok2, want[self])
		}
		led += int(l)
		owned += int(g)

		_, page := get(t, c, base+"/")
		for _, s := range []string{`id="cluster"`, "epoch 7", "generation 4", "controller 1", "gw-0.example:9092", "gw-2.example:9092",
			"INTERNAL 10.0.0.1:9093", "held (1.5s left)",
			fmt.Sprintf(`data-partitions-led="%d"`, want[self][0]), fmt.Sprintf(`data-groups-owned="%d"`, want[self][1]),
			fmt.Sprintf("of %d", 18), fmt.Sprintf("of %d", 4)} {
			if !strings.Contains(page, s) {
				t.Errorf("node %d: the overview does not show %q", self, s)
			}
		}
		row := regexp.MustCompile(fmt.Sprintf(`data-cluster-node="%d">.*?</tr>`, self)).FindString(page)
		if !strings.Contains(row, "this node") {
			t.Errorf("node %d: its row %q does not say this node", self, row)
		}
		if strings.Contains(page, "not ready") {
			t.Errorf("node %d: the overview says not ready with its lease held", self)
		}
	}
	if led != 18 || owned != 4 {
		t.Errorf("over the three nodes: %d partitions led, %d groups owned; want 18 and 4", led, owned)
	}

	fc.set(threeNodes(2), disbackend.ClusterStatus{Generation: 4, Lease: disbackend.LeaseLapsed, LeaseEnded: 3 * time.Second})
	if _, page := get(t, c, base+"/fragment/overview"); !strings.Contains(page, "lapsed (3s ago)") || !strings.Contains(page, "not ready: cluster lease lapsed") {
		t.Errorf("the overview of a node whose lease lapsed does not say so:\n%s", page)
	}
}

// TestAdminSingleNodeShowsNoCluster: on one node neither /metrics nor the
// console shows anything of cluster mode.
func TestAdminSingleNodeShowsNoCluster(t *testing.T) {
	s, _ := startAdmin(t, nil)
	base := "http://" + s.Addr().String()
	c := &http.Client{}
	defer c.CloseIdleConnections()
	waitFor(t, "the first snapshot", func() bool { return s.Snapshot() != nil })
	if _, body := get(t, c, base+"/metrics"); strings.Contains(body, "disgw_cluster_partitions_led") || strings.Contains(body, "disgw_cluster_groups_owned") ||
		strings.Contains(body, "disgw_cluster_members") {
		t.Errorf("one node's /metrics shows cluster metrics")
	}
	if _, page := get(t, c, base+"/"); strings.Contains(page, `id="cluster"`) || strings.Contains(page, "Cluster") {
		t.Errorf("one node's overview shows a cluster section")
	}
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
