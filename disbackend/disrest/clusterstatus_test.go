package disrest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/metrics"
)

// gatheredWith is the value of the sample of metric name whose labels are
// labels (-1 when there is none).
func gatheredWith(t *testing.T, m *metrics.Metrics, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, mt := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range mt.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			if len(got) != len(labels) {
				continue
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			return mt.GetCounter().GetValue()
		}
	}
	return -1
}

// ownedKinds counts the partition and group keys the view document of s
// places on s.
func ownedKinds(s *Store) (parts, groups int) {
	st := s.cluster.cur.Load()
	if st.doc == nil {
		return 0, 0
	}
	for k, o := range st.doc.ownerMap() {
		if o != s.cluster.nodeID {
			continue
		}
		if strings.HasPrefix(k, "g/") {
			groups++
		} else {
			parts++
		}
	}
	return parts, groups
}

// checkMoves checks that each node's disgw_cluster_moves_total, gained
// less lost, is what its view document gives it, for partitions and
// groups (every key of the test is in the documents: nothing is created
// after the first view).
func checkMoves(t *testing.T, stores []*Store, ms []*metrics.Metrics) {
	t.Helper()
	for i, s := range stores {
		parts, groups := ownedKinds(s)
		for kind, want := range map[string]int{"partition": parts, "group": groups} {
			gained := gatheredWith(t, ms[i], "disgw_cluster_moves_total", map[string]string{"kind": kind, "direction": "gained"})
			lost := gatheredWith(t, ms[i], "disgw_cluster_moves_total", map[string]string{"kind": kind, "direction": "lost"})
			if gained < 0 || lost < 0 || int(gained-lost) != want {
				t.Errorf("node %d: %s keys gained %v, lost %v; its view places %d on it", s.cluster.nodeID, kind, gained, lost, want)
			}
		}
	}
}

// A node's Status: not ready before its first view; its lease held once
// the nodes agree; between views (and ready) while the nodes rebalance;
// lapsed, and not ready, while it is paused past its lease; ready again
// with the next view. disgw_cluster_moves_total follows what each view
// gives each node.
func TestClusterStatusAndMoves(t *testing.T) {
	c := newClusterTest(t, nil)
	admin := newStore(t, c.url, nil)
	mkStream(t, admin, "orders", 12)
	for _, g := range []string{"billing", "shipping", "audit"} {
		if _, err := admin.CreateApp(ctxT(t), disbackend.App{Name: g, GroupID: g}); err != nil {
			t.Fatal(err)
		}
	}
	ms := []*metrics.Metrics{metrics.New(metrics.Options{}), metrics.New(metrics.Options{}), metrics.New(metrics.Options{})}
	first := c.open(1, func(o *Options) { o.Metrics = ms[0] })
	if st := first.cluster.Status(); st.NotReady() == "" || st.Lease != disbackend.LeaseNone || st.Generation != -1 {
		t.Errorf("before start: %+v, not ready %q", st, st.NotReady())
	}
	if err := first.StartCluster(ctxT(t), listenersOf(1)); err != nil {
		t.Fatal(err)
	}
	stores := []*Store{first, c.node(2, func(o *Options) { o.Metrics = ms[1] }), c.node(3, func(o *Options) { o.Metrics = ms[2] })}
	watchEpochs(t, stores...)
	v := agree(t, 15*time.Second, []int32{1, 2, 3}, stores...)
	waitFor(t, 5*time.Second, "every node ready with its lease held", func() bool {
		for _, s := range stores {
			if st := s.cluster.Status(); st.Lease != disbackend.LeaseHeld || st.NotReady() != "" || st.Generation != v.Generation {
				return false
			}
		}
		return true
	})
	for _, s := range stores {
		if st := s.cluster.Status(); st.LeaseLeft <= 0 || st.LeaseLeft > testLease || st.View.Epoch != v.Epoch {
			t.Errorf("node %d: %+v", s.cluster.nodeID, st)
		}
	}
	checkMoves(t, stores, ms)

	// Node 1 watches its own status while node 3 is paused and comes back.
	var mu sync.Mutex
	seen := map[disbackend.LeaseState]int{}
	var unready []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			st := stores[0].cluster.Status()
			mu.Lock()
			seen[st.Lease]++
			if why := st.NotReady(); why != "" {
				unready = append(unready, why)
			}
			mu.Unlock()
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	m3 := stores[2].cluster
	m3.pause.pause()
	waitFor(t, testLease+time.Second, "node 3's lease lapsing", func() bool { return m3.Status().Lease == disbackend.LeaseLapsed })
	if why := m3.Status().NotReady(); !strings.Contains(why, "lapsed") {
		t.Errorf("paused node 3 past its lease: not ready %q, want its lease lapsed", why)
	}
	agree(t, testSession+5*time.Second, []int32{1, 2}, stores[:2]...)
	m3.pause.resume()
	x := agree(t, 15*time.Second, []int32{1, 2, 3}, stores...)
	waitFor(t, 5*time.Second, "node 3 ready again", func() bool {
		st := m3.Status()
		return st.Lease == disbackend.LeaseHeld && st.NotReady() == ""
	})
	if st := m3.Status(); st.RefusedCode == "" {
		t.Errorf("node 3 after its pause: no refused renewal recorded: %+v", st)
	}
	close(stop)
	wg.Wait()
	mu.Lock()
	t.Logf("node 1's lease over the two rebalances: %v; not ready %d times", seen, len(unready))
	if seen[disbackend.LeaseBetweenViews] == 0 {
		t.Errorf("node 1 was never seen between views over two rebalances: %v", seen)
	}
	for _, why := range unready {
		if !strings.Contains(why, "lapsed") {
			t.Errorf("node 1 not ready during a rebalance: %q", why)
		}
	}
	mu.Unlock()
	if x.Epoch <= v.Epoch {
		t.Errorf("epoch %d after %d", x.Epoch, v.Epoch)
	}
	checkMoves(t, stores, ms)
	var moved float64
	for _, m := range ms {
		moved += gatheredWith(t, m, "disgw_cluster_moves_total", map[string]string{"kind": "partition", "direction": "lost"})
	}
	if moved == 0 {
		t.Error("no partition moved over the views of 1, 2, 3 nodes, then 2, then 3")
	}
}
