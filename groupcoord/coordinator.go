// Package groupcoord is disgw's classic Kafka group coordinator: consumer
// groups (and Kafka Connect workers, and any other protocol type) that join,
// sync, heartbeat and leave through the gateway, and their committed offsets,
// which it keeps as DIS app checkpoints through disbackend.Apps.
//
// Each group in memory is owned by one goroutine: requests and timer
// expiries are messages posted to it, so its state needs no locks.
// Committed offsets live only in the backend, so a restart loses none.
// Members live in memory; with a backend that keeps them
// (disbackend.GroupStateStore: the embedded store, and on DIS the
// gateway stream __disgw_groups) Stable groups are saved
// and restored across a restart, as Kafka keeps them (persist.go);
// otherwise a gateway restart makes clients rejoin.
//
// It owns the state machine (Empty, PreparingRebalance, CompletingRebalance,
// Stable, Dead), member sessions, rebalance and sync timeouts, the initial
// rebalance delay, member-id-required joins (KIP-394), static membership
// (KIP-345, KIP-814), protocol selection and offset retention. It does not
// read protocol metadata or assignments (opaque bytes, handed back as they
// came), encode the wire (the gateway does), resolve topic names (Topics) or
// store anything itself (disbackend.Apps does).
package groupcoord

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/groupcoord/consumer"
	"github.com/disgw/disgw/internal/errmap"
	"github.com/disgw/disgw/internal/metrics"
)

// Config tunes the coordinator. Zero values take the defaults listed, which
// are Apache Kafka's.
type Config struct {
	// InitialRebalanceDelay is how long a new (Empty) group waits for more
	// members before its first rebalance completes, extended by the same
	// again for each member that joins meanwhile, up to the rebalance
	// timeout (Kafka group.initial.rebalance.delay.ms). Default 3 s;
	// negative means none.
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound the session timeout a
	// JoinGroup may ask for; outside gets INVALID_SESSION_TIMEOUT (Kafka
	// group.min.session.timeout.ms, group.max.session.timeout.ms). Defaults
	// 6 s and 30 min.
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// NewMemberJoinTimeout expires a new member whose first JoinGroup is
	// still parked (its client may have gone away while muted). Default 5 min
	// (Kafka group.classic.new.member.join.timeout.ms).
	NewMemberJoinTimeout time.Duration
	// OffsetsRetention deletes the committed offsets (the DIS app) of a
	// group that has been empty this long (Kafka offsets.retention.minutes).
	// Default 7 days; negative keeps offsets forever. After a gateway
	// restart an empty group's emptiness is counted from the later of the
	// restart and its last commit, never earlier.
	OffsetsRetention time.Duration
	// RetentionCheckInterval is how often expired groups are looked for
	// (Kafka offsets.retention.check.interval.ms). Default 10 min.
	RetentionCheckInterval time.Duration
	// SubscribedTopics, when set, tells which topics a member's protocol
	// metadata subscribes to, so OffsetDelete on a live "consumer" group
	// can refuse only subscribed topics (GROUP_SUBSCRIBED_TO_TOPIC), as
	// Kafka does. The coordinator itself never decodes metadata; without
	// it, OffsetDelete on a live group answers NON_EMPTY_GROUP.
	SubscribedTopics func(protocolType string, metadata []byte) (topics []string, ok bool)
	// Clock defaults to RealClock().
	Clock Clock
	// Logger defaults to a no-op logger; the coordinator names it
	// "groupcoord".
	Logger *zap.Logger
	// Metrics counts rebalances (disgw_rebalances_total); nil counts none.
	Metrics *metrics.Metrics
	// Owns tells whether this node coordinates a group, by its Kafka
	// group id, with several gateway nodes (docs/cluster.md §6): the
	// gateway sets it from its view (View.Ready and View.Coordinator(group)
	// == View.Self) and calls ViewChanged when the view changes. nil: this
	// node coordinates every group (a single node). For a group it does not
	// own, every group request answers NOT_COORDINATOR and ListGroups
	// leaves it out; a group it owns but has not loaded since it gained it
	// is loaded from the backend (GroupStateStore) first, the requests
	// meanwhile answered COORDINATOR_LOAD_IN_PROGRESS. Called on every
	// group request, some under the coordinator's lock: it must be fast,
	// safe for concurrent use, and must not call the coordinator.
	Owns func(group string) bool
	// Consumer holds the settings of consumer groups (KIP-848;
	// consumergroup.go): group.consumer.*. Zero: Kafka's defaults
	// (consumer.DefaultConfig).
	Consumer consumer.Config
}

func (c *Config) fill() {
	if c.InitialRebalanceDelay == 0 {
		c.InitialRebalanceDelay = 3 * time.Second
	} else if c.InitialRebalanceDelay < 0 {
		c.InitialRebalanceDelay = 0
	}
	if c.MinSessionTimeout <= 0 {
		c.MinSessionTimeout = 6 * time.Second
	}
	if c.MaxSessionTimeout <= 0 {
		c.MaxSessionTimeout = 30 * time.Minute
	}
	if c.NewMemberJoinTimeout <= 0 {
		c.NewMemberJoinTimeout = 5 * time.Minute
	}
	if c.OffsetsRetention == 0 {
		c.OffsetsRetention = 7 * 24 * time.Hour
	}
	if c.RetentionCheckInterval <= 0 {
		c.RetentionCheckInterval = 10 * time.Minute
	}
	if c.Clock == nil {
		c.Clock = RealClock()
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	def := consumer.DefaultConfig()
	if c.Consumer.SessionTimeout <= 0 {
		c.Consumer.SessionTimeout = def.SessionTimeout
	}
	if c.Consumer.HeartbeatInterval <= 0 {
		c.Consumer.HeartbeatInterval = def.HeartbeatInterval
	}
	if c.Consumer.MaxSize <= 0 {
		c.Consumer.MaxSize = def.MaxSize
	}
	if len(c.Consumer.Assignors) == 0 {
		c.Consumer.Assignors = def.Assignors
	}
}

// TopicInfo is what the coordinator needs to know of a Kafka topic.
type TopicInfo struct {
	Topic      string   // Kafka topic name
	Stream     string   // DIS stream name
	ID         [16]byte // Kafka topic id
	Partitions int32
}

// Topics resolves Kafka topics to DIS streams and back; the gateway's topic
// cache implements it, asking the backend for a stream it does not know (one
// a DIS application created after the gateway started). Both methods must
// be safe for concurrent use.
type Topics interface {
	// Topic looks a topic up by name.
	Topic(ctx context.Context, name string) (TopicInfo, bool)
	// Stream looks a topic up by its DIS stream name.
	Stream(ctx context.Context, stream string) (TopicInfo, bool)
}

// Client identifies the connection a request came on, for DescribeGroups.
type Client struct {
	ID   string // Kafka client.id
	Host string // as Kafka shows it: "/" and the IP address
	// Topics is the topics view a classic JoinGroup to a consumer group
	// resolves the member's subscription against (migration.go); nil:
	// no topic is known.
	Topics consumer.Topics
}

// Coordinator is the group coordinator of one gateway node.
type Coordinator struct {
	cfg    Config
	apps   disbackend.Apps
	states disbackend.GroupStateStore // nil: membership is not kept across restarts
	topics Topics
	clock  Clock
	log    *zap.Logger
	start  time.Time

	base       context.Context // cancelled by Close
	cancelBase context.CancelFunc
	// saves bounds the groups' state saves: cancelled by Close once they
	// have ended or after closeGrace.
	saves       context.Context
	cancelSaves context.CancelFunc

	loaded chan struct{} // closed once the backend answered ListApps
	quit   chan struct{} // closed by Close
	sweep  chan struct{} // retention timer → sweeper goroutine (capacity 1)
	wg     sync.WaitGroup

	mu         sync.Mutex
	groups     map[string]*group      // guarded by mu
	closed     bool                   // guarded by mu
	emptySince map[string]time.Time   // group id → when it last became empty in memory; guarded by mu
	offsets    map[string]offsetState // what groups not in memory committed last; guarded by mu
	// emptyTypes: group id → protocol type of an Empty group that had
	// members, which ListGroups and DescribeGroups show as Kafka does (it
	// keeps the type in the group's metadata); guarded by mu. Saved with
	// the group's state (persist.go), so it survives a restart.
	emptyTypes map[string]string

	// With Config.Owns (several nodes, ownership.go), guarded by mu:
	// held are the owned groups whose latest state this node holds
	// (loaded since it gained them, or restored at start); every group in
	// memory is held. loading are the groups being loaded. viewSeq counts
	// ViewChanged calls: a load read under an older view is not used.
	held    map[string]struct{}
	loading map[string]struct{}
	viewSeq uint64
	reload  chan struct{} // ViewChanged → background: load the gained groups (capacity 1)

	// configs are the groups' GROUP config overrides (groupconfig.go),
	// read at start and on a view change, set by SetGroupConfig; guarded
	// by cfgMu, apart from mu as group goroutines read it per heartbeat.
	cfgMu   sync.RWMutex
	configs map[string]GroupConfig
}

// takeOffsets hands a group coming into memory what it committed before.
// Called with mu held.
func (c *Coordinator) takeOffsets(id string) offsetState {
	if st, ok := c.offsets[id]; ok {
		delete(c.offsets, id)
		return st
	}
	return offsetState{cache: make(map[tp]committed), latest: make(map[tp]uint64)}
}

// errClosed: the coordinator is closing (Kafka NOT_COORDINATOR, so clients
// look for the coordinator again and rejoin).
var errClosed = errors.New("group coordinator is closing")

// New starts a coordinator over apps (committed offsets) and topics. It
// starts loading at once: until the backend has answered once, group
// requests get COORDINATOR_LOAD_IN_PROGRESS. apps may be nil (a backend
// without apps): then offset requests fail with COORDINATOR_NOT_AVAILABLE.
// Close stops it.
func New(cfg Config, apps disbackend.Apps, topics Topics) *Coordinator {
	cfg.fill()
	c := &Coordinator{
		cfg:        cfg,
		apps:       apps,
		states:     groupStates(apps),
		topics:     topics,
		clock:      cfg.Clock,
		log:        cfg.Logger.Named("groupcoord"),
		loaded:     make(chan struct{}),
		quit:       make(chan struct{}),
		sweep:      make(chan struct{}, 1),
		groups:     make(map[string]*group),
		emptySince: make(map[string]time.Time),
		offsets:    make(map[string]offsetState),
		emptyTypes: make(map[string]string),
		held:       make(map[string]struct{}),
		loading:    make(map[string]struct{}),
		reload:     make(chan struct{}, 1),
		configs:    make(map[string]GroupConfig),
	}
	c.base, c.cancelBase = context.WithCancel(context.Background())
	c.saves, c.cancelSaves = context.WithCancel(context.Background())
	c.start = c.clock.Now()
	c.wg.Add(1)
	go c.background()
	return c
}

// Ready is closed once the coordinator has loaded (answered its first
// backend call); before, group requests get COORDINATOR_LOAD_IN_PROGRESS.
func (c *Coordinator) Ready() <-chan struct{} { return c.loaded }

// closeGrace is how long Close lets the groups' state saves under way go
// on before it cancels them.
const closeGrace = 5 * time.Second

// Close stops the coordinator: parked JoinGroup and SyncGroup requests and
// any request that arrives later are answered with NOT_COORDINATOR, group
// goroutines and timers end. Offset writes already under way finish, and so
// do the groups' state saves, for up to closeGrace (wall clock; other
// backend calls of the coordinator are cancelled at once): a group emptied
// just before (its last member left) is saved as empty, not restored with
// that member after a restart. Close waits for the coordinator's
// goroutines; it does not close the backend.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	close(c.quit)
	c.mu.Unlock()
	c.cancelBase()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	t := time.NewTimer(closeGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	c.cancelSaves()
	<-done
}

// background loads (waits for the backend's first ListApps, retrying with
// backoff), then runs the retention sweeper.
func (c *Coordinator) background() {
	defer c.wg.Done()
	backoff := 100 * time.Millisecond
	for {
		ctx, cancel := c.opContext()
		var err error
		if c.apps != nil {
			_, err = c.apps.ListApps(ctx)
		}
		if err == nil {
			err = c.restoreGroups(ctx)
		}
		cancel()
		if err == nil {
			break
		}
		c.log.Warn("loading groups failed, retrying", zap.Error(err), zap.Duration("backoff", backoff))
		if !c.wait(backoff) {
			return
		}
		backoff = min(2*backoff, 10*time.Second)
	}
	close(c.loaded)
	c.log.Debug("group coordinator loaded")
	if c.apps == nil {
		<-c.quit
		return
	}
	arm := func() Timer {
		return c.clock.AfterFunc(c.cfg.RetentionCheckInterval, func() {
			select {
			case c.sweep <- struct{}{}:
			default:
			}
		})
	}
	t := arm() // the sweep also runs with offsets kept forever: it forgets Empty groups without offsets
	for {
		select {
		case <-c.quit:
			t.Stop()
			return
		case <-c.reload:
			c.loadGained()
			continue
		case <-c.sweep:
		}
		ctx, cancel := c.opContext()
		if _, err := c.ExpireOffsets(ctx); err != nil {
			c.log.Warn("offset retention sweep failed", zap.Error(err))
		}
		cancel()
		t = arm()
	}
}

// wait sleeps d on the coordinator's clock; false if Close came first.
func (c *Coordinator) wait(d time.Duration) bool {
	ch := make(chan struct{})
	t := c.clock.AfterFunc(d, func() { close(ch) })
	select {
	case <-ch:
		return true
	case <-c.quit:
		t.Stop()
		return false
	}
}

// opContext bounds the coordinator's own backend calls (loading,
// retention, and the I/O groups do in their loop); Close cancels them.
func (c *Coordinator) opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.base, 30*time.Second)
}

// saveContext bounds a group's state save (SaveGroupState); Close lets it
// go on for up to closeGrace.
func (c *Coordinator) saveContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.saves, 30*time.Second)
}

// notReady returns the error code a group request gets before it can be
// served: COORDINATOR_LOAD_IN_PROGRESS while loading, NOT_COORDINATOR once
// closing, else 0.
func (c *Coordinator) notReady() int16 {
	select {
	case <-c.quit:
		return kerr.NotCoordinator.Code
	default:
	}
	select {
	case <-c.loaded:
		return 0
	default:
		return kerr.CoordinatorLoadInProgress.Code
	}
}

// send posts run to the goroutine of group id, creating the group when
// create is set. found is false when the group is not in memory and create
// is not set. If the coordinator closes (or the group moves to another
// node) before run is called, abort is called instead (on some goroutine)
// so a waiting caller is always answered. With Config.Owns, a group this
// node does not own fails with disbackend.ErrNotCoordinator, and one it
// has not loaded since it gained it with errLoading (its load starts).
func (c *Coordinator) send(id string, create bool, run func(*group), abort func()) (found bool, err error) {
	if _, ok := disbackend.GroupOfConfigStateKey(id); ok {
		return false, errReservedGroupID
	}
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return false, errClosed
		}
		if err := c.admitLocked(id); err != nil {
			c.mu.Unlock()
			return false, err
		}
		g := c.groups[id]
		if g == nil {
			if !create {
				c.mu.Unlock()
				return false, nil
			}
			g = newGroup(c, id)
			c.groups[id] = g
			c.wg.Add(1)
			go g.run()
		}
		c.mu.Unlock()
		if g.post(message{run: run, abort: abort}) {
			return true, nil
		}
		// The group left memory between the lookup and the post: look again.
	}
}

// groupRows are where Kafka's group coordinator answers otherwise than the
// gateway's table (errmap.Rows) does for the like failure; backendCode
// looks at them first. Kafka's coordinator answers failures of its offsets
// log (GroupMetadataManager) with codes that make clients look for the
// coordinator again and retry, not fail.
var groupRows = []errmap.Row{
	// The coordinator or the backend is closing: as a coordinator that lost
	// its __consumer_offsets partition, NOT_COORDINATOR (the client finds
	// the coordinator again), not UNKNOWN_SERVER_ERROR.
	{Err: errClosed, Code: kerr.NotCoordinator},
	{Err: disbackend.ErrClosed, Code: kerr.NotCoordinator},
	// The group moved to another node (several nodes, ownership.go), or
	// is being loaded after it moved here.
	{Err: disbackend.ErrNotCoordinator, Code: kerr.NotCoordinator},
	{Err: errLoading, Code: kerr.CoordinatorLoadInProgress},
	// The backend refused a checkpoint's metadata (longer than it keeps):
	// OffsetCommit's code for metadata over Kafka's
	// offset.metadata.max.bytes, not INVALID_CONFIG.
	{Err: disbackend.ErrInvalidConfig, Code: kerr.OffsetMetadataTooLarge},
	// The group id names no app the backend can hold (or another group's):
	// INVALID_GROUP_ID, as Kafka answers a group id it cannot take; the
	// gateway's INVALID_TOPIC_EXCEPTION is for topic names.
	{Err: disbackend.ErrNameCollision, Code: kerr.InvalidGroupID},
	{Err: disbackend.ErrInvalidName, Code: kerr.InvalidGroupID},
	{Err: errGroupCollision, Code: kerr.InvalidGroupID},
	// Storage unavailable or too slow: COORDINATOR_NOT_AVAILABLE, as Kafka
	// answers when its offsets log cannot be written (the client retries),
	// not the gateway's REQUEST_TIMED_OUT.
	{Err: disbackend.ErrUnavailable, Code: kerr.CoordinatorNotAvailable},
	// A commit the store could not write for lack of space (its metadata
	// opened read-only on a full disk): retriable as well.
	{Err: disbackend.ErrStorageFull, Code: kerr.CoordinatorNotAvailable},
	{Err: context.DeadlineExceeded, Code: kerr.CoordinatorNotAvailable},
	{Err: context.Canceled, Code: kerr.CoordinatorNotAvailable},
	{Err: errNoApps, Code: kerr.CoordinatorNotAvailable},
	// Group paths handle a missing app where one may be missing (no
	// offsets, a Dead group, GROUP_ID_NOT_FOUND on delete, the app created
	// again on commit); one missing anywhere else is unexpected: unmapped
	// (logged, UNKNOWN_SERVER_ERROR), not the gateway's GROUP_ID_NOT_FOUND.
	{Err: disbackend.ErrAppNotFound, Code: nil},
}

// backendCode maps a backend error of a group or offset operation to the
// Kafka code: groupRows, then the gateway's table errmap.Rows. Offsets
// outside the partition's range are logged at Info, unmapped errors at
// Error.
func (c *Coordinator) backendCode(err error) int16 {
	if err == nil {
		return 0
	}
	k, ok := errmap.Lookup(err, groupRows)
	if !ok {
		c.log.Error("backend failed", zap.Error(err))
		return kerr.UnknownServerError.Code
	}
	if k == kerr.OffsetOutOfRange {
		// DIS keeps checkpoints only inside the partition's range (Kafka
		// takes any offset): the nearest Kafka code, with the reason logged.
		c.log.Info("offset commit outside the partition's range", zap.Error(err))
	}
	return k.Code
}
