package disrest

import (
	"sync"
	"testing"
	"time"

	"github.com/disgw/disgw/disbackend"
)

// Between views a node owns nothing (docs/cluster.md §5): once its
// generation ended, View answers the last view not Ready until the next
// view is adopted, so that the gateway serves no group whose state it
// could not save (DIS refuses every fenced write while the nodes
// rebalance). Here node 3 leaves: nodes 1 and 2 each pass through their
// old view, not Ready, before the view without node 3.
func TestClusterNotReadyBetweenViews(t *testing.T) {
	c := newClusterTest(t, nil)
	stores := []*Store{c.node(1, nil), c.node(2, nil), c.node(3, nil)}
	v := agree(t, 15*time.Second, []int32{1, 2, 3}, stores...)

	type seen struct {
		gen   int64
		ready bool
	}
	var mu sync.Mutex
	views := map[int32][]seen{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range stores[:2] {
		cl := s.Cluster()
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last *disbackend.View
			for {
				ch := cl.ViewChanged()
				if w := cl.View(); w != last {
					last = w
					mu.Lock()
					views[w.Self] = append(views[w.Self], seen{w.Generation, w.Ready})
					mu.Unlock()
				}
				select {
				case <-stop:
					return
				case <-ch:
				}
			}
		}()
	}
	if err := stores[2].Close(); err != nil {
		t.Fatal(err)
	}
	w := agree(t, 10*time.Second, []int32{1, 2}, stores[:2]...)
	close(stop)
	wg.Wait()
	for _, id := range []int32{1, 2} {
		got := views[id]
		between := false
		for i, s := range got {
			if s.gen == v.Generation && !s.ready && i > 0 && got[i-1].ready && got[i-1].gen == v.Generation {
				between = true
			}
			if s.ready && s.gen != v.Generation && s.gen != w.Generation {
				t.Errorf("node %d: a Ready view of generation %d, neither %d nor %d", id, s.gen, v.Generation, w.Generation)
			}
		}
		if !between || !got[len(got)-1].ready || got[len(got)-1].gen != w.Generation {
			t.Errorf("node %d: views %+v; want generation %d Ready, then not Ready, ..., then generation %d Ready", id, got, v.Generation, w.Generation)
		}
	}
	c.checkOneControllerEach()
}
