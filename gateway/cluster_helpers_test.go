package gateway_test

import (
	"context"
	"hash/fnv"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/localstore"
	"github.com/disgw/disgw/gateway"
)

// testCluster is several gateways in one process over one localstore,
// each over its own clusterNode backend (disbackend.Cluster) whose view the
// test sets: node ids 0..n-1, PLAINTEXT addresses 127.0.0.1:port.
type testCluster struct {
	t     *testing.T
	store *localstore.Store
	nodes []*clusterNode

	mu         sync.Mutex
	gen        int64
	epoch      int32
	controller int32
	owners     map[string]int32            // placement keys moved by the test
	ready      map[int32]bool              // nodes whose view is not Ready (false)
	listeners  map[int32]map[string]string // replaces a node's listeners in every view
	members    []int32                     // the view's nodes; nil: all
}

// clusterNode is one node's backend: the shared store, its own view, and
// counts of the writes made through it.
type clusterNode struct {
	*localstore.Store
	tc   *testCluster
	id   int32
	srv  *gateway.Server
	addr string

	mu      sync.Mutex
	view    *disbackend.View
	changed chan struct{}
	appends map[string]int // "stream/partition" → batches appended through this node
	admin   int            // CreateStream, DeleteStream, UpdateStreamConfig, UpdatePartitionCount calls
}

var _ disbackend.Cluster = (*clusterNode)(nil)

func (n *clusterNode) View() *disbackend.View {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.view
}

func (n *clusterNode) ViewChanged() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.changed
}

func (n *clusterNode) Append(stream string, partition int32, b disbackend.Batch) *disbackend.Pending {
	n.mu.Lock()
	n.appends[stream+"/"+strconv.Itoa(int(partition))]++
	n.mu.Unlock()
	return n.Store.Append(stream, partition, b)
}

func (n *clusterNode) countAdmin() {
	n.mu.Lock()
	n.admin++
	n.mu.Unlock()
}

func (n *clusterNode) CreateStream(ctx context.Context, spec disbackend.StreamSpec) (disbackend.Stream, error) {
	n.countAdmin()
	return n.Store.CreateStream(ctx, spec)
}

func (n *clusterNode) DeleteStream(ctx context.Context, name string) error {
	n.countAdmin()
	return n.Store.DeleteStream(ctx, name)
}

func (n *clusterNode) UpdateStreamConfig(ctx context.Context, name string, cfg disbackend.StreamConfig) error {
	n.countAdmin()
	return n.Store.UpdateStreamConfig(ctx, name, cfg)
}

func (n *clusterNode) UpdatePartitionCount(ctx context.Context, name string, count int32) error {
	n.countAdmin()
	return n.Store.UpdatePartitionCount(ctx, name, count)
}

// takeAppends returns the appends made through n since the last call.
func (n *clusterNode) takeAppends() map[string]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.appends
	n.appends = map[string]int{}
	return out
}

func (n *clusterNode) adminCalls() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.admin
}

// clusterTopic is a topic created in the store before the gateways start.
type clusterTopic struct {
	name       string
	partitions int32
}

// startCluster starts n gateways over one store holding topics, with
// every view Ready at generation 1, epoch 1, node 0 the controller and
// cluster key "test cluster key".
func startCluster(t *testing.T, n int, topics []clusterTopic, mutate ...func(*gateway.Config)) *testCluster {
	t.Helper()
	log := zaptest.NewLogger(t)
	store, err := localstore.Open(t.TempDir(), localstore.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tp := range topics {
		name, err := disbackend.StreamNameFor(store, tp.name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.CreateStream(ctx, disbackend.StreamSpec{Name: name, TopicName: tp.name, PartitionCount: tp.partitions,
			Config: disbackend.StreamConfig{Retention: 24 * time.Hour, MaxMessageBytes: 1 << 20}}); err != nil {
			t.Fatal(err)
		}
	}
	tc := &testCluster{t: t, store: store, gen: 1, epoch: 1, owners: map[string]int32{}, ready: map[int32]bool{},
		listeners: map[int32]map[string]string{}}
	var done []chan error
	for i := range n {
		node := &clusterNode{Store: store, tc: tc, id: int32(i), changed: make(chan struct{}), appends: map[string]int{}}
		node.view = &disbackend.View{Self: node.id} // not Ready until publish
		cfg := gateway.DefaultConfig()
		cfg.Listen = "127.0.0.1:0"
		cfg.NodeID = node.id
		cfg.ClusterKey = []byte("test cluster key")
		for _, m := range mutate {
			m(&cfg)
		}
		srv, err := gateway.New(cfg, node, log.Named("node"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Listen(); err != nil {
			t.Fatal(err)
		}
		node.srv, node.addr = srv, srv.AdvertisedAddr()
		tc.nodes = append(tc.nodes, node)
	}
	tc.publish()
	for _, node := range tc.nodes {
		ch := make(chan error, 1)
		go func() { ch <- node.srv.Serve() }()
		done = append(done, ch)
	}
	t.Cleanup(func() {
		for i, node := range tc.nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := node.srv.Shutdown(ctx); err != nil {
				t.Errorf("node %d shutdown: %v", i, err)
			}
			cancel()
			if err := <-done[i]; err != nil {
				t.Errorf("node %d serve: %v", i, err)
			}
		}
		if err := store.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return tc
}

// owner is the test's placement: a key the test moved goes to its node;
// partition N of any stream to member N mod members; a group to the FNV
// hash of its id mod members.
func (tc *testCluster) owner(key string) int32 {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return ownerIn(key, tc.owners, tc.memberIDs())
}

func ownerIn(key string, owners map[string]int32, members []int32) int32 {
	if o, ok := owners[key]; ok {
		return o
	}
	if rest, ok := strings.CutPrefix(key, "p/"); ok {
		p, _ := strconv.Atoi(rest[strings.LastIndexByte(rest, '/')+1:])
		return members[p%len(members)]
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	return members[h.Sum32()%uint32(len(members))]
}

func (tc *testCluster) memberIDs() []int32 {
	if tc.members != nil {
		return tc.members
	}
	ids := make([]int32, len(tc.nodes))
	for i := range ids {
		ids[i] = int32(i)
	}
	return ids
}

// change applies f to the cluster's state under its lock, then publishes
// a new generation's views to every node.
func (tc *testCluster) change(f func(tc *testCluster)) {
	tc.mu.Lock()
	f(tc)
	tc.gen++
	tc.mu.Unlock()
	tc.publish()
}

// publish gives every node the view of the current state.
func (tc *testCluster) publish() {
	tc.mu.Lock()
	owners := make(map[string]int32, len(tc.owners))
	for k, v := range tc.owners {
		owners[k] = v
	}
	members := tc.memberIDs()
	var nodes []disbackend.Node
	for _, id := range members {
		l := map[string]string{"PLAINTEXT": tc.nodes[id].addr}
		if o, ok := tc.listeners[id]; ok {
			l = o
		}
		nodes = append(nodes, disbackend.Node{ID: id, Listeners: l})
	}
	gen, epoch, controller := tc.gen, tc.epoch, tc.controller
	ready := make(map[int32]bool, len(tc.ready))
	for k, v := range tc.ready {
		ready[k] = v
	}
	tc.mu.Unlock()
	ownerFn := func(key string) int32 { return ownerIn(key, owners, members) }
	for _, n := range tc.nodes {
		r, set := ready[n.id]
		v := &disbackend.View{Generation: gen, Epoch: epoch, Self: n.id, Controller: controller, Nodes: nodes,
			Ready: !set || r, Owner: ownerFn}
		n.mu.Lock()
		n.view = v
		close(n.changed)
		n.changed = make(chan struct{})
		n.mu.Unlock()
	}
}

// raw opens a raw connection to node id.
func (tc *testCluster) raw(t *testing.T, id int32) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", tc.nodes[id].addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

// client is a franz-go client seeded with node id alone.
func (tc *testCluster) client(t *testing.T, id int32, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(tc.nodes[id].addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// hostPort splits node id's address.
func (tc *testCluster) hostPort(t *testing.T, id int32) (string, int32) {
	t.Helper()
	h, p, err := net.SplitHostPort(tc.nodes[id].addr)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(p)
	return h, int32(port)
}
