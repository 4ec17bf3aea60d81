package disrest

// Cluster mode (docs/cluster.md): several gateway nodes in front of one
// DIS project. DIS is the only shared state and the only arbiter:
//
//   - Membership (§2): the nodes are the members of DIS's consumer group
//     of app nodesApp, subscribed to ClusterStream (clusterloop.go: join,
//     sync, heartbeat, leave). After each SyncGroup a node appends its
//     registry record to ClusterStream; the member DIS assigned partition 0
//     of ClusterStream is the controller of the generation, which writes
//     the view document and commits the pointer to it, fenced with its
//     generation (clusterview.go). Every node reads the pointer each
//     heartbeat and adopts the view of its own generation.
//   - The lease (§4, clusterlease.go): a fenced CommitCheckpoint renewed
//     every third of ClusterLease; the node writes only while it holds.
//   - The membership is the Store's fence (fence.go): a write for a key
//     goes only while the node owns the key in its current view and its
//     lease holds, and a key new to the node waits the takeover delay.
//   - It is the gateway's disbackend.Cluster (Store.Cluster): the view
//     Kafka's Metadata, FindCoordinator and leader epochs come from.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
	"github.com/disgw/disgw/internal/metrics"
	"github.com/disgw/disgw/internal/placement"
)

// ClusterStream is the gateway-owned stream (one partition, never listed
// as a topic) the nodes subscribe to in DIS's consumer group of
// nodesApp: it carries the nodes' registry records and the controller's
// view documents, and nodesApp's checkpoint on its partition 0 points at
// the current view (docs/cluster.md §2).
const ClusterStream = "__disgw_cluster"

// Cluster-mode defaults (the settings' defaults, docs/configuration.md).
const (
	defaultClusterHeartbeat         = time.Second
	defaultClusterJoinWindow        = 3 * time.Second
	defaultClusterSettle            = 2 * time.Second
	defaultClusterLease             = 3 * time.Second
	defaultClusterRebalanceInterval = 10 * time.Minute
)

// membership is a node's part in cluster mode: its member state in DIS's
// group, its view, its lease. Its loops (clusterloop.go, clusterlease.go,
// the controller's task in clusterview.go) run from start until close.
type membership struct {
	s   *Store
	log *zap.Logger
	// The settings, defaults applied.
	nodeID                                          int32
	heartbeat, joinWindow, settle, lease, rebalance time.Duration
	// clientID is the node's DIS client id, node-<id>-<random>: new at
	// every start, so a restarted node never inherits a zombie's identity.
	clientID string
	// started is when the Store was made (Unix ms), in the registry
	// record: of two live nodes with one node id, the earlier keeps it.
	started int64
	// base is the origin of mono, the monotonic clock of the lease.
	base time.Time

	// listeners are the advertised listeners (name → HOST:PORT), set by
	// start before the loops run.
	listeners map[string]string
	// leaseSN is the sequence number the lease commits on MetaStream's
	// partition 0 (its first: a checkpoint must lie in the range). Owned
	// by the lease loop once it runs.
	leaseSN int64

	// cur is the current view and what the fence needs of it; never nil.
	cur atomic.Pointer[viewState]
	// ended is the view state whose generation ended (endGeneration):
	// while it is cur, View answers cur's stale view, so that between
	// views this node owns nothing (docs/cluster.md §5).
	ended atomic.Pointer[viewState]
	// held is the lease: the generation it was renewed for and until when
	// (mono), nil when there is none.
	held atomic.Pointer[leaseState]
	// refused is the last renewal DIS refused (its code and when, mono),
	// nil before any: Status tells a rebalance from a node DIS dropped.
	refused atomic.Pointer[leaseRefusal]

	// mu guards the member state below and changed.
	mu sync.Mutex
	// gen is the generation of the last SyncGroup answered OK (-1 before);
	// joinedAt is when the last JoinGroup was answered OK (mono), and
	// genJoinedAt its value at that SyncGroup; floor is ClusterStream's
	// next sequence number read before that JoinGroup: every registry
	// record and view document of gen lies at or after it.
	gen                   int64
	joinedAt, genJoinedAt time.Duration
	floor                 int64
	// syncs counts the SyncGroups answered OK: a generation number can
	// come again (a group that empties starts from 1), a sync cannot.
	syncs int64
	// changed is closed when the view changes.
	changed chan struct{}
	// stopControl ends the controller's task of generation controlGen,
	// the current one (nil when this node is not its controller).
	stopControl context.CancelFunc
	controlGen  int64

	// poke asks the member loop to heartbeat and read the pointer now;
	// rejoin to join again (the controller's rebalance); kick the lease
	// loop to renew now.
	poke, rejoin, kick chan struct{}
	// failed receives the error that stopped the membership (a node id
	// held by another node); failure is that error.
	failed  chan error
	failure atomic.Pointer[error]

	// pause is the test hook that stops the loops (as SIGSTOP would).
	pause pauser

	ctx    context.Context // ends at close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// running is set by start; closed by close.
	running, closed atomic.Bool
}

// viewState is the view and what the fence reads with it. Immutable.
type viewState struct {
	view *disbackend.View
	// prev is the view this node held before (nil: none since start).
	prev *disbackend.View
	// handover is when (mono) a key this node did not own in prev may be
	// first written: the previous generation's leases have ended
	// (docs/cluster.md §4, "Takeover").
	handover time.Duration
	// doc is the view document (nil before the first view).
	doc *viewDoc
	// stale is view as View answers it once its generation ended: not
	// Ready (nil when view is not Ready itself).
	stale *disbackend.View
}

// leaseState is a lease held: renewed for generation gen, valid until
// (mono).
type leaseState struct {
	gen   int64
	until time.Duration
}

// leaseRefusal is a lease renewal DIS refused: its DIS error code, and
// when (mono).
type leaseRefusal struct {
	code string
	at   time.Duration
}

var (
	_ fence                            = (*membership)(nil)
	_ disbackend.Cluster               = (*membership)(nil)
	_ disbackend.ClusterStatusReporter = (*membership)(nil)
)

func newMembership(s *Store) *membership {
	o := s.opts
	m := &membership{
		s: s, log: s.log.Named("cluster"), nodeID: o.NodeID,
		heartbeat: orDefault(o.ClusterHeartbeat, defaultClusterHeartbeat), joinWindow: orDefault(o.ClusterJoinWindow, defaultClusterJoinWindow),
		settle: orDefault(o.ClusterSettle, defaultClusterSettle), lease: orDefault(o.ClusterLease, defaultClusterLease),
		rebalance: orDefault(o.ClusterRebalanceInterval, defaultClusterRebalanceInterval),
		clientID:  fmt.Sprintf("node-%d-%s", o.NodeID, randomHex(8)),
		started:   time.Now().UnixMilli(), base: time.Now(),
		gen: groupNoGeneration, changed: make(chan struct{}),
		poke: make(chan struct{}, 1), rejoin: make(chan struct{}, 1), kick: make(chan struct{}, 1), failed: make(chan error, 1),
	}
	m.log = m.log.With(zap.Int32("node_id", m.nodeID), zap.String("client_id", m.clientID))
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.cur.Store(&viewState{view: m.noView(nil)})
	return m
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// mono is the membership's monotonic clock.
func (m *membership) mono() time.Duration { return time.Since(m.base) }

// noView is the view of a node without one: itself (with its listeners
// once known), not Ready, no controller (-1) and no owners (Owner answers
// placement.NoOwner, -1, for every key).
func (m *membership) noView(listeners map[string]string) *disbackend.View {
	v := &disbackend.View{Self: m.nodeID, Controller: -1, Owner: func(string) int32 { return placement.NoOwner }}
	if listeners != nil {
		v.Nodes = []disbackend.Node{{ID: m.nodeID, Listeners: listeners}}
	}
	return v
}

// Cluster returns the Store's membership in cluster mode, the view Kafka's
// answers come from (docs/cluster.md §5); nil when cluster mode is off
// (the Store is the only node and owns everything). The Store itself does
// not implement disbackend.Cluster, which the gateway asks its backend
// for: give the gateway the Store and this together (cmd/disgw's
// clusterBackend).
func (s *Store) Cluster() disbackend.Cluster {
	if s.cluster == nil {
		return nil
	}
	return s.cluster
}

// ClusterFailed returns a channel that receives the error that stopped
// the membership, after which the node owns nothing: another live node
// holds its node id. The caller should stop the node. Nil (never ready)
// when cluster mode is off.
func (s *Store) ClusterFailed() <-chan error {
	if s.cluster == nil {
		return nil
	}
	return s.cluster.failed
}

// StartCluster starts cluster mode once the gateway listens: listeners are
// this node's advertised listeners (name → HOST:PORT), published in its
// registry record. It creates app __disgw-nodes and streams __disgw_meta
// and __disgw_cluster when missing, checks that DIS fences stale group
// members (a CommitCheckpoint of __disgw-nodes with a made-up client_id
// and generation_id must be refused with DIS.4701, 4702 or 4703) and
// refuses to start otherwise, then starts the membership's loops: joining,
// the lease, the view. It returns before the first view (View is not
// Ready until then). Errors: ErrClosed after Close, cluster mode off,
// DIS's, or DIS not fencing. DIS CreateStream, CreateApp, DescribeStream,
// CommitCheckpoint.
func (s *Store) StartCluster(ctx context.Context, listeners map[string]string) error {
	m := s.cluster
	if m == nil {
		return errors.New("disrest: start cluster: cluster mode is off")
	}
	if s.isClosed() {
		return fmt.Errorf("disrest: start cluster: %w", disbackend.ErrClosed)
	}
	if !m.running.CompareAndSwap(false, true) {
		return errors.New("disrest: start cluster: started already")
	}
	if err := m.start(ctx, listeners); err != nil {
		m.running.Store(false)
		return fmt.Errorf("disrest: start cluster: %w", err)
	}
	return nil
}

func (m *membership) start(ctx context.Context, listeners map[string]string) error {
	m.listeners = make(map[string]string, len(listeners))
	for k, v := range listeners {
		m.listeners[k] = v
	}
	m.cur.Store(&viewState{view: m.noView(m.listeners)})
	m.notify()
	s := m.s
	if err := s.ensureMeta(ctx); err != nil {
		return err
	}
	if err := s.ensureApp(ctx, nodesApp); err != nil {
		return err
	}
	if err := m.ensureClusterStream(ctx, false); err != nil {
		return err
	}
	r, err := s.describeRange(ctx, MetaStream, 0)
	if err != nil {
		return err
	}
	m.leaseSN = r.First
	if err := m.checkFencing(ctx); err != nil {
		return err
	}
	s.opts.Metrics.ClusterMode()
	s.opts.Metrics.ClusterView(0, 0)
	if m.closed.Load() {
		return disbackend.ErrClosed
	}
	m.log.Info("cluster mode starting", zap.Any("listeners", m.listeners), zap.Duration("heartbeat", m.heartbeat),
		zap.Duration("join_window", m.joinWindow), zap.Duration("settle", m.settle), zap.Duration("lease", m.lease))
	m.wg.Add(2)
	go m.run()
	go m.renewLease()
	return nil
}

// checkFencing makes sure DIS refuses a commit of a stale group member
// (docs/cluster.md §1): a CommitCheckpoint of nodesApp on MetaStream
// with a made-up client id and generation must be refused with DIS.4701,
// DIS.4702 or DIS.4703. Without that, nothing stops a node that lost its
// membership from writing.
func (m *membership) checkFencing(ctx context.Context) error {
	stranger := fmt.Sprintf("node-%d-check-%s", m.nodeID, randomHex(8))
	err := m.s.commitFenced(ctx, nodesApp, MetaStream, 0, m.leaseSN, "fencing check", stranger, 1<<40)
	switch {
	case err == nil:
		return fmt.Errorf("DIS does not fence stale group members: it accepted a CommitCheckpoint of app %s with a client_id (%s) and generation_id that are no member's; cluster mode cannot be safe against it (run one node without cluster mode)",
			nodesApp, stranger)
	case fenceRefused(err):
		m.log.Debug("DIS fences stale group members", zap.Error(err))
		return nil
	}
	return fmt.Errorf("checking that DIS fences stale group members: %w", err)
}

// ensureClusterStream creates ClusterStream when missing (again when
// force: DIS answered that it does not exist).
func (m *membership) ensureClusterStream(ctx context.Context, force bool) error {
	if force {
		m.s.streams.drop(ClusterStream)
	} else if _, ok := m.s.streams.peek(ClusterStream); ok {
		return nil
	}
	err := m.s.createStream(ctx, ClusterStream, 1, disapi.MaxRetentionHours, nil)
	if err != nil && !errors.Is(err, disbackend.ErrStreamExists) {
		return err
	}
	_, err = m.s.streamInfo(ctx, ClusterStream, true)
	return err
}

// close stops the loops and, when the node is a member, leaves the group
// (a clean shutdown: the others rebalance at once, not after the
// session). Safe on nil.
func (m *membership) close() {
	if m == nil || !m.closed.CompareAndSwap(false, true) {
		return
	}
	m.cancel()
	m.pause.resume()
	m.wg.Wait()
	m.held.Store(nil)
	if !m.running.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(m.s.opts.RequestTimeout, 10*time.Second))
	defer cancel()
	if err := m.s.leaveGroup(ctx, nodesApp, m.clientID); err != nil {
		m.log.Warn("cluster: leave group failed", zap.Error(err))
	} else {
		m.log.Info("left the nodes' group")
	}
}

// Resign begins a clean shutdown of a cluster-mode node, as Kafka's
// controlled shutdown moves a broker's leaderships away before it stops:
// it leaves the nodes' group at once (the membership stops, as Close does),
// then keeps the node serving while the others rebalance without it,
// until the view pointer names a newer generation than this node's and one
// cluster_heartbeat more has passed (the others read the pointer every
// heartbeat), at most max. Meanwhile the node owns nothing: produces get
// NOT_LEADER_OR_FOLLOWER and group requests NOT_COORDINATOR, which
// clients retry, asking again where partitions and groups went, instead
// of failing to connect to a node that stopped (a franz-go group member
// whose heartbeats cannot reach its coordinator gives its partitions up).
// It returns how long it waited; 0 when cluster mode is off or the
// membership never started. Errors reading the pointer are retried until
// max.
func (s *Store) Resign(max time.Duration) time.Duration {
	m := s.cluster
	if m == nil || !m.running.Load() || m.closed.Load() {
		return 0
	}
	start := time.Now()
	gen := m.generation()
	m.close()
	deadline := start.Add(max)
	wait := func() bool {
		d := min(m.heartbeat, time.Until(deadline))
		if d <= 0 {
			return false
		}
		time.Sleep(d)
		return true
	}
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		_, meta, err := m.pointer(ctx)
		cancel()
		if p, ok := parsePointer(meta); err == nil && ok && p.gen > gen {
			wait()
			break
		}
		if !wait() {
			break
		}
	}
	return time.Since(start)
}

// View returns the current view, never nil: before the first one, a view
// that is not Ready, with Self (and this node's listeners once started),
// no controller (-1) and no owners (disbackend.Cluster).
// Between views (the nodes rebalance: this node's generation ended and
// the next one's view is not read yet) it is the last view not Ready: this
// node then owns nothing, so that it does not serve a group whose state it
// could not save (DIS refuses every fenced write while the nodes
// rebalance); the gateway answers Kafka's view from the last Ready one.
func (m *membership) View() *disbackend.View {
	st := m.cur.Load()
	if st.stale != nil && m.ended.Load() == st {
		return st.stale
	}
	return st.view
}

// viewEnded makes View answer the current view not Ready, its generation
// having ended, until the next view is adopted. Called by the member loop
// only.
func (m *membership) viewEnded() {
	st := m.cur.Load()
	if st.stale == nil || m.ended.Load() == st {
		return
	}
	m.ended.Store(st)
	m.notify()
}

// ViewChanged returns a channel closed when View changes
// (disbackend.Cluster).
func (m *membership) ViewChanged() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// Status returns the node's view, generation and lease now
// (disbackend.ClusterStatusReporter): the lease is held while renewed for
// the view's generation and not ended; between views while it holds for
// a newer generation, while it holds and the view's generation ended
// (View is not Ready), or DIS refused it with DIS.4701 (the nodes
// rebalance); refused after DIS.4702 or DIS.4703; lapsed once ended
// without a refusal.
func (m *membership) Status() disbackend.ClusterStatus {
	st := disbackend.ClusterStatus{View: m.View(), Generation: m.generation()}
	if f := m.failure.Load(); f != nil {
		st.Failure = *f
	}
	now := m.mono()
	r := m.refused.Load()
	if r != nil {
		st.RefusedCode = r.code
	}
	switch l := m.held.Load(); {
	case l != nil && now < l.until:
		st.Lease, st.LeaseLeft = disbackend.LeaseHeld, l.until-now
		if l.gen != st.View.Generation || !st.View.Ready {
			st.Lease = disbackend.LeaseBetweenViews
		}
	case l != nil:
		st.Lease, st.LeaseEnded = disbackend.LeaseLapsed, now-l.until
	case r != nil:
		st.Lease, st.LeaseEnded = disbackend.LeaseRefused, now-r.at
		if r.code == disapi.CodeGroupRebalancing {
			st.Lease = disbackend.LeaseBetweenViews
		}
	}
	return st
}

func (m *membership) notify() {
	m.mu.Lock()
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
}

// ownerIn returns key's owner in v: the controller for controllerKey.
func ownerIn(v *disbackend.View, key string) int32 {
	if key == controllerKey {
		return v.Controller
	}
	if v.Owner == nil {
		return v.Self
	}
	return v.Owner(key)
}

// notOwned is the error of a write for key this node may not make now:
// ErrNotLeader for a partition, ErrNotCoordinator for a group,
// ErrNotController for the controller's writes.
func notOwned(key, why string) error {
	sentinel := disbackend.ErrNotLeader
	switch {
	case key == controllerKey:
		sentinel = disbackend.ErrNotController
	case strings.HasPrefix(key, disbackend.GroupKey("")), strings.HasPrefix(key, disbackend.TxnKey("")):
		sentinel = disbackend.ErrNotCoordinator
	}
	return fmt.Errorf("disrest: %s: %w: %s", key, sentinel, why)
}

// mayWrite returns nil while this node owns key in its current Ready view
// and its lease, renewed for the view's generation, holds (fence).
func (m *membership) mayWrite(key string) error {
	st := m.cur.Load()
	v := st.view
	if !v.Ready {
		return notOwned(key, "this node holds no cluster view yet")
	}
	if o := ownerIn(v, key); o != v.Self {
		return notOwned(key, fmt.Sprintf("node %d owns it in cluster epoch %d", o, v.Epoch))
	}
	l := m.held.Load()
	if l == nil || l.gen != v.Generation || m.mono() >= l.until {
		return notOwned(key, fmt.Sprintf("this node's lease of generation %d does not hold", v.Generation))
	}
	return nil
}

// takeover blocks until this node may make its first write for key in
// its current view (fence): at once when it owned key in the view just
// before (epoch one less), else once the previous generation's leases
// have ended (handover). ctx's error, or mayWrite's.
func (m *membership) takeover(ctx context.Context, key string) error {
	for {
		if err := m.mayWrite(key); err != nil {
			return err
		}
		changed := m.ViewChanged()
		st := m.cur.Load()
		if p := st.prev; p != nil && p.Ready && p.Epoch == st.view.Epoch-1 && ownerIn(p, key) == p.Self {
			return nil
		}
		wait := st.handover - m.mono()
		if wait <= 0 {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("disrest: %s: waiting for the previous owner's lease to end: %w", key, ctx.Err())
		case <-changed:
			t.Stop()
		case <-t.C:
		}
	}
}

// takeoverWait returns how long takeover would wait for key now (fence):
// 0 when it would return at once.
func (m *membership) takeoverWait(key string) time.Duration {
	if m.mayWrite(key) != nil {
		return 0
	}
	st := m.cur.Load()
	if p := st.prev; p != nil && p.Ready && p.Epoch == st.view.Epoch-1 && ownerIn(p, key) == p.Self {
		return 0
	}
	return max(0, st.handover-m.mono())
}

// member returns the node's DIS client id and generation for a fenced
// commit of nodesApp (fence). ok is always true in cluster mode: before
// the first SyncGroup the generation is -1, which DIS refuses, as it
// should.
func (m *membership) member() (clientID string, generation int64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.clientID, m.gen, true
}

// generation returns the generation of the last SyncGroup (-1 before).
func (m *membership) generation() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gen
}

// synced returns the generation of the last SyncGroup and the count of
// SyncGroups so far.
func (m *membership) synced() (gen, syncs int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gen, m.syncs
}

// fail stops the membership for good with err (a node id held by
// another node): the node owns nothing from now on.
func (m *membership) fail(err error) {
	if !m.failure.CompareAndSwap(nil, &err) {
		return
	}
	m.log.Error("cluster membership stopped", zap.Error(err))
	m.held.Store(nil)
	old := m.cur.Load()
	st := &viewState{view: m.noView(m.listeners)}
	m.cur.Store(st)
	lost, _ := m.moved(old, st)
	m.s.viewChanged(lost, nil)
	countMoves(m.s.opts.Metrics, lost, nil)
	m.notify()
	m.s.opts.Metrics.ClusterView(0, 0)
	m.s.opts.Metrics.ClusterController(false)
	// Leave at once, so that the others rebalance without this node.
	ctx, cancel := context.WithTimeout(m.ctx, min(m.s.opts.RequestTimeout, 10*time.Second))
	if lerr := m.s.leaveGroup(ctx, nodesApp, m.clientID); lerr != nil {
		m.log.Warn("cluster: leave group failed", zap.Error(lerr))
	}
	cancel()
	m.failed <- err
	m.cancel()
}

// setView adopts v (of doc) as the current view.
func (m *membership) setView(v *disbackend.View, doc *viewDoc, handover time.Duration) {
	old := m.cur.Load()
	var prev *disbackend.View
	if old.view.Ready {
		prev = old.view
	}
	st := &viewState{view: v, prev: prev, handover: handover, doc: doc}
	if v.Ready {
		stale := *v
		stale.Ready = false
		st.stale = &stale
	}
	m.cur.Store(st)
	lost, gained := m.moved(old, st)
	m.s.viewChanged(lost, gained)
	countMoves(m.s.opts.Metrics, lost, gained)
	m.notify()
	owned := len(doc.Owners[strconv.Itoa(int(v.Self))])
	ids := make([]int32, len(v.Nodes))
	for i, n := range v.Nodes {
		ids[i] = n.ID
	}
	m.s.opts.Metrics.ClusterView(len(v.Nodes), v.Epoch)
	m.s.opts.Metrics.ClusterController(v.Controller == v.Self)
	m.log.Info("cluster view", zap.Int64("generation", v.Generation), zap.Int32("epoch", v.Epoch),
		zap.Int32("controller", v.Controller), zap.Int32s("members", ids), zap.Int("keys_owned", owned),
		zap.Int("keys_placed", doc.keys()), zap.Int("keys_lost", len(lost)), zap.Int("keys_gained", len(gained)))
}

// moved returns the keys this node owned in view state old and does not
// in cur (lost), and those it owns in cur and did not (gained): among
// the keys either document places and the partitions this node has a
// writer for (the others, placed by the rendezvous hash alone, are
// taken over at their first write). A view that is not Ready owns
// nothing.
func (m *membership) moved(old, cur *viewState) (lost, gained []string) {
	keys := map[string]bool{}
	for _, d := range []*viewDoc{old.doc, cur.doc} {
		if d == nil {
			continue
		}
		for _, ks := range d.Owners {
			for _, k := range ks {
				keys[k] = true
			}
		}
	}
	m.s.closeMu.Lock()
	for k := range m.s.writers {
		keys[disbackend.PartitionKey(k.stream, k.part)] = true
	}
	m.s.closeMu.Unlock()
	owns := func(v *disbackend.View, k string) bool { return v.Ready && ownerIn(v, k) == v.Self }
	for k := range keys {
		was, is := owns(old.view, k), owns(cur.view, k)
		switch {
		case was && !is:
			lost = append(lost, k)
		case is && !was:
			gained = append(gained, k)
		}
	}
	sort.Strings(lost)
	sort.Strings(gained)
	return lost, gained
}

// countMoves adds the keys lost and gained at a view change to
// disgw_cluster_moves_total, by kind (partition, group).
func countMoves(mt *metrics.Metrics, lost, gained []string) {
	for _, c := range []struct {
		dir  string
		keys []string
	}{{"lost", lost}, {"gained", gained}} {
		var parts, groups int
		for _, k := range c.keys {
			switch {
			case strings.HasPrefix(k, disbackend.GroupKey("")):
				groups++
			case strings.HasPrefix(k, "p/"):
				parts++
			}
		}
		mt.ClusterMoves("partition", c.dir, parts)
		mt.ClusterMoves("group", c.dir, groups)
	}
}

// viewOf builds the disbackend.View of doc for this node.
func (m *membership) viewOf(doc *viewDoc) *disbackend.View {
	holders := doc.holders()
	ids := make([]int32, 0, len(holders))
	for id := range holders {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	nodes := make([]disbackend.Node, len(ids))
	for i, id := range ids {
		nodes[i] = disbackend.Node{ID: id, Listeners: holders[id].Listeners}
	}
	owners := doc.ownerMap()
	return &disbackend.View{
		Generation: doc.Generation, Epoch: doc.Epoch, Self: m.nodeID, Controller: doc.Controller,
		Nodes: nodes, Ready: true,
		Owner: func(key string) int32 {
			if o, ok := owners[key]; ok {
				return o
			}
			return placement.Rendezvous(ids, key)
		},
	}
}

// pauser is the test hook that pauses the membership's loops, as SIGSTOP
// would pause the process: each loop waits at its next step until resumed.
type pauser struct {
	mu sync.Mutex
	ch chan struct{} // non-nil while paused; closed to resume
}

func (p *pauser) pause() {
	p.mu.Lock()
	if p.ch == nil {
		p.ch = make(chan struct{})
	}
	p.mu.Unlock()
}

func (p *pauser) resume() {
	p.mu.Lock()
	if p.ch != nil {
		close(p.ch)
		p.ch = nil
	}
	p.mu.Unlock()
}

// wait returns once not paused (true), or when ctx ends (false).
func (p *pauser) wait(ctx context.Context) bool {
	p.mu.Lock()
	ch := p.ch
	p.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
	return ctx.Err() == nil
}

// sleep waits d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
