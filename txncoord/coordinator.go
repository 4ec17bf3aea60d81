// Package txncoord is the transaction coordinator: Kafka's
// TransactionCoordinator and the partition side of transactions (the last
// stable offset, the aborted transactions a read_committed Fetch returns)
// for one gateway node over a backend that keeps its state
// (disbackend.TxnStateStore: the embedded store).
//
// It serves InitProducerId with a transactional id (API 22), AddPartitionsToTxn
// (24), AddOffsetsToTxn (25), EndTxn (26), TxnOffsetCommit (28),
// DescribeTransactions (65) and ListTransactions (66), answers the
// gateway's questions for Produce (VerifyProduce: KIP-890 part 1), Fetch and
// ListOffsets (LastStableOffset, Aborted) and OffsetFetch (PendingOffsets),
// and aborts transactions left open past their timeout.
//
// The design (docs/transactions.md): a transaction's state is one record
// of the backend, saved (synced) before each step is answered. Markers are
// control batches appended to the transaction's partitions. The last
// stable offset of a partition is the lowest first offset of the open
// transactions that added it, where a transaction's first offset on a
// partition is taken as the partition's high watermark when it was added
// (no batch of the transaction can come before it; a batch of another
// producer after it waits for the transaction to end, which Kafka would
// not hold back). An aborted transaction's range on a partition (producer
// id, that first offset, its marker's offset) is saved before the last
// stable offset moves past it. After a restart, a transaction that was
// preparing to commit or abort is finished (its markers written again: a
// second marker changes nothing for a reader) and an open one is aborted
// at its timeout.
package txncoord

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
)

// State is a transaction's state, with Kafka's names (TransactionState),
// which DescribeTransactions and ListTransactions show.
type State int8

// The states of a transaction (Kafka TransactionState; Dead is a deleted
// record).
const (
	Empty State = iota
	Ongoing
	PrepareCommit
	PrepareAbort
	CompleteCommit
	CompleteAbort
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "Unknown"
}

// Backend is what the coordinator needs of the backend: its state store,
// producer ids, and appends and ranges for markers and the log start
// offset.
type Backend interface {
	disbackend.TxnStateStore
	InitProducerID(ctx context.Context) (int64, int16, error)
	Append(stream string, partition int32, b disbackend.Batch) *disbackend.Pending
	Range(stream string, partition int32) (disbackend.PartitionRange, error)
}

// Topic is a Kafka topic as the coordinator needs it.
type Topic struct {
	Stream     string   // the backend's stream name
	ID         [16]byte // Kafka topic id
	Partitions int32
	// Refused, when not 0, is the code AddPartitionsToTxn answers for
	// each of the topic's partitions instead of adding it: a DIS topic of
	// dis.record.format native, which cannot hold a transaction's
	// records, gets UNSUPPORTED_FOR_MESSAGE_FORMAT (as Kafka answered for
	// a topic whose message format predates transactions).
	Refused int16
}

// Topics resolves a Kafka topic name; ok is false for an unknown topic.
type Topics interface {
	Topic(ctx context.Context, name string) (Topic, bool)
}

// Groups is the group coordinator's part in transactions (groupcoord).
type Groups interface {
	ValidateTxnCommit(group string, generation int32, memberID string, instanceID *string) int16
	CommitTxnOffsets(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse
}

// Config sets the coordinator's limits and times.
type Config struct {
	// MaxTimeout is the largest transaction.timeout.ms a producer may ask
	// for (Kafka transaction.max.timeout.ms, 900000 ms); a larger one gets
	// INVALID_TRANSACTION_TIMEOUT.
	MaxTimeout time.Duration
	// IDExpiration is how long a transactional id with no transaction
	// open is kept idle (Kafka transactional.id.expiration.ms, 7 days).
	IDExpiration time.Duration
	// CheckInterval is how often transactions past their timeout are
	// aborted and idle ids forgotten (Kafka
	// transaction.abort.timed.out.transaction.cleanup.interval.ms is 10 s;
	// 1 s here by default).
	CheckInterval time.Duration
	// NodeID is this node's id (DescribeTransactions' coordinator).
	NodeID int32
	// LeaderEpoch gives the partition leader epoch stamped on markers, as
	// the produce path stamps batches; nil: -1.
	LeaderEpoch func() int32
	Logger      *zap.Logger
	// Shared, set with several nodes, is the store the nodes share the
	// records in (shared.go); nil: one node.
	Shared disbackend.TxnShared
	// Owns, with Shared, reports whether this node coordinates a
	// transactional id (the owner of disbackend.TxnKey(id)).
	Owns func(id string) bool
	// Leads, with Shared, reports whether this node leads a partition:
	// it alone drops the aborted ranges below the partition's log start
	// offset.
	Leads func(stream string, partition int32) bool
	// SendMarker, with Shared, writes a transaction's COMMIT or ABORT
	// marker for producer pid at epoch on a partition through its leader
	// (WriteTxnMarkers; LeaderMarker on the leader, which also saves an
	// ABORT's aborted range). Errors: the partition's code as a kerr
	// error, or the transport's.
	SendMarker func(ctx context.Context, topic string, partition int32, pid int64, epoch int16, commit bool) error
	// FirstBatch, with Shared, returns the base offset of the first
	// transactional batch (not a control batch) of producer pid in the
	// partition's offsets [from, to), or to when it has none there, or
	// where it stopped reading when it read as much as it may first (no
	// batch of pid lies before that offset either): where a transaction
	// open on a partition this node gained starts (Follow). nil:
	// transactions keep the first offsets of their records. Errors: the
	// backend's (ErrStreamNotFound and ErrPartitionNotFound: passed over).
	FirstBatch func(ctx context.Context, stream string, partition int32, pid int64, from, to int64) (int64, error)
	// Now is the clock (tests replace it); nil: time.Now.
	Now func() time.Time
}

// Aborted is one aborted transaction of a partition (Kafka
// AbortedTxn): the producer's records from FirstOffset up to its ABORT
// marker at LastOffset are not to be read by a read_committed consumer.
type Aborted struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

type partKey struct {
	id   [16]byte
	part int32
}

// txnPart is one partition added to a transaction, with the lower bound of
// the transaction's first offset there.
type txnPart struct {
	Topic       string   `json:"topic"`
	Stream      string   `json:"stream"`
	TopicID     [16]byte `json:"topic_id"`
	Partition   int32    `json:"partition"`
	FirstOffset int64    `json:"first_offset"`
}

func (p *txnPart) key() partKey { return partKey{p.TopicID, p.Partition} }

// txnOffset is one offset of a TxnOffsetCommit, applied at commit.
type txnOffset struct {
	Topic       string  `json:"topic"`
	Partition   int32   `json:"partition"`
	Offset      int64   `json:"offset"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Metadata    *string `json:"metadata,omitempty"`
}

// record is a transactional id's state as saved (key "t/" + id).
type record struct {
	V         int    `json:"v"`
	ID        string `json:"id"`
	PID       int64  `json:"pid"`
	Epoch     int16  `json:"epoch"`
	LastPID   int64  `json:"last_pid"`
	LastEpoch int16  `json:"last_epoch"`
	TimeoutMS int32  `json:"timeout_ms"`
	State     State  `json:"state"`
	StartMS   int64  `json:"start_ms"`
	UpdateMS  int64  `json:"update_ms"`
	// Seq counts the id's transactions: one more at each begin, so a
	// node following the records tells a new transaction from the same
	// one (shared.go).
	Seq     int64                  `json:"seq,omitempty"`
	Parts   []txnPart              `json:"partitions,omitempty"`
	Groups  []string               `json:"groups,omitempty"`
	Offsets map[string][]txnOffset `json:"offsets,omitempty"`
}

// abortedRecord is an aborted range as saved (key "a/" topic id hex "/"
// partition "/" producer id "/" first offset).
type abortedRecord struct {
	Stream string `json:"stream"`
	Last   int64  `json:"last"`
}

// txn is one transactional id. mu is held for a whole operation, its
// backend writes included. rec changes only with both mu and the
// coordinator's mu held, so either lock is enough to read it.
type txn struct {
	mu  sync.Mutex
	rec record
	// inflight counts the verified produces not yet answered (c.mu): the
	// markers wait for them, so no batch of the transaction lands after
	// its marker.
	inflight int
	// marked holds the marker offsets written for the current Prepare
	// state (mu): a retry does not write them again.
	marked map[partKey]int64
	gone   bool // deleted (expired) while a request waited for mu
	// auth (c.mu): this node loaded the id as its coordinator (shared
	// mode; always true on one node, where it is not read).
	auth bool
	// ended (c.mu): the partitions this node, as their leader, ended the
	// transaction on with a marker, by partition: the transaction's Seq+1.
	ended map[partKey]int64
}

// Coordinator is the transaction coordinator. Its methods are safe for
// concurrent use.
type Coordinator struct {
	cfg    Config
	be     Backend
	topics Topics
	groups Groups
	log    *zap.Logger

	mu   sync.Mutex
	txns map[string]*txn
	open map[partKey]map[*txn]int64 // the open transactions of each partition, by first offset
	// nOpen is len(open), read without mu: the fetch path skips the lock
	// when no transaction is open anywhere.
	nOpen   atomic.Int64
	aborted map[partKey][]Aborted // by first offset
	streams map[partKey]string    // the stream of each partition with aborted ranges
	ids     map[string][16]byte   // the topic id of each stream seen (CleanerView)
	changed chan struct{}         // closed when a last stable offset moves up
	closed  bool

	stop chan struct{}
	done chan struct{}

	sharedState
}

// New loads the coordinator's state from be and starts its background
// loop (timeouts, expiry, finishing what a restart left half done).
// Errors: the backend's, reading the records.
func New(ctx context.Context, cfg Config, be Backend, topics Topics, groups Groups) (*Coordinator, error) {
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = 15 * time.Minute
	}
	if cfg.IDExpiration <= 0 {
		cfg.IDExpiration = 7 * 24 * time.Hour
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Coordinator{
		cfg: cfg, be: be, topics: topics, groups: groups, log: cfg.Logger,
		txns: map[string]*txn{}, open: map[partKey]map[*txn]int64{},
		aborted: map[partKey][]Aborted{}, streams: map[partKey]string{}, changed: make(chan struct{}),
		ids:  map[string][16]byte{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if cfg.Shared != nil {
		// Every record, read now and later, reaches applyShared.
		c.followed.Store(-1)
		cfg.Shared.WatchTxnRecords(c.applyShared)
	}
	recs, err := be.TxnRecords(ctx)
	if err != nil {
		return nil, fmt.Errorf("txncoord: load: %w", err)
	}
	if cfg.Shared != nil {
		recs = nil
	}
	for k, v := range recs {
		if err := c.load(k, v); err != nil {
			c.log.Warn("transaction record unreadable, skipped", zap.String("key", k), zap.Error(err))
		}
	}
	for pk := range c.aborted {
		sortAborted(c.aborted[pk])
	}
	go c.loop()
	return c, nil
}

func (c *Coordinator) load(k string, v []byte) error {
	switch {
	case strings.HasPrefix(k, "t/"):
		t := &txn{}
		if err := json.Unmarshal(v, &t.rec); err != nil {
			return err
		}
		c.txns[t.rec.ID] = t
		if t.rec.State == Ongoing || t.rec.State == PrepareCommit || t.rec.State == PrepareAbort {
			for i := range t.rec.Parts {
				c.openPart(t, &t.rec.Parts[i])
			}
		}
	case strings.HasPrefix(k, "a/"):
		pk, a, err := parseAbortedKey(k)
		if err != nil {
			return err
		}
		var ar abortedRecord
		if err := json.Unmarshal(v, &ar); err != nil {
			return err
		}
		a.LastOffset = ar.Last
		c.aborted[pk] = append(c.aborted[pk], a)
		c.streams[pk] = ar.Stream
		c.ids[ar.Stream] = pk.id
	default:
		return errors.New("unknown key")
	}
	return nil
}

func abortedKey(pk partKey, pid, first int64) string {
	return "a/" + hex.EncodeToString(pk.id[:]) + "/" + strconv.Itoa(int(pk.part)) + "/" +
		strconv.FormatInt(pid, 10) + "/" + strconv.FormatInt(first, 10)
}

func parseAbortedKey(k string) (partKey, Aborted, error) {
	f := strings.Split(k, "/")
	if len(f) != 5 {
		return partKey{}, Aborted{}, errors.New("malformed aborted key")
	}
	var pk partKey
	id, err := hex.DecodeString(f[1])
	if err != nil || len(id) != 16 {
		return partKey{}, Aborted{}, errors.New("malformed topic id")
	}
	copy(pk.id[:], id)
	part, err1 := strconv.ParseInt(f[2], 10, 32)
	pid, err2 := strconv.ParseInt(f[3], 10, 64)
	first, err3 := strconv.ParseInt(f[4], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return partKey{}, Aborted{}, err
	}
	pk.part = int32(part)
	return pk, Aborted{ProducerID: pid, FirstOffset: first}, nil
}

func sortAborted(l []Aborted) {
	sort.Slice(l, func(i, j int) bool { return l[i].FirstOffset < l[j].FirstOffset })
}

// Close stops the background loop. Requests still running finish.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	close(c.stop)
	<-c.done
}

func (c *Coordinator) nowMS() int64 { return c.cfg.Now().UnixMilli() }

// openPart adds p of t to the open transactions' index. Requires c.mu (or
// New).
func (c *Coordinator) openPart(t *txn, p *txnPart) {
	pk := p.key()
	c.ids[p.Stream] = p.TopicID
	m := c.open[pk]
	if m == nil {
		m = map[*txn]int64{}
		c.open[pk] = m
		c.nOpen.Store(int64(len(c.open)))
	}
	m[t] = p.FirstOffset
}

// unopen takes t out of partition pk's open transactions. Requires c.mu.
func (c *Coordinator) unopen(pk partKey, t *txn) {
	if m := c.open[pk]; m != nil {
		delete(m, t)
		if len(m) == 0 {
			delete(c.open, pk)
			c.nOpen.Store(int64(len(c.open)))
		}
	}
}

// Changed returns a channel closed the next time a partition's last stable
// offset moves up (a transaction ended): a read_committed long poll waits
// on it beside the backend's Changed, as the marker that woke it may come
// just before the offset moves.
func (c *Coordinator) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// closeParts takes t's partitions out of the open index. Requires c.mu.
func (c *Coordinator) closeParts(t *txn) {
	if len(t.rec.Parts) > 0 {
		close(c.changed)
		c.changed = make(chan struct{})
	}
	for i := range t.rec.Parts {
		c.unopen(t.rec.Parts[i].key(), t)
	}
}

// save writes t's record, synced. Requires t.mu.
func (c *Coordinator) save(ctx context.Context, t *txn) error { return c.saveRec(ctx, &t.rec) }

// saveRec writes r, synced.
func (c *Coordinator) saveRec(ctx context.Context, r *record) error {
	v := *r
	v.V = 1
	b, err := json.Marshal(&v)
	if err != nil {
		return err
	}
	if err := c.be.SaveTxnRecord(ctx, "t/"+r.ID, b); err != nil {
		return fmt.Errorf("txncoord: save transaction %q: %w", r.ID, err)
	}
	return nil
}

// update changes t's record under c.mu (t.mu held by the caller).
func (c *Coordinator) update(t *txn, f func(r *record)) {
	c.mu.Lock()
	f(&t.rec)
	c.mu.Unlock()
}

// LastStableOffset returns the last stable offset of a partition whose high
// watermark is hw: the first offset of its earliest open transaction, else
// hw (Kafka UnifiedLog.lastStableOffset).
func (c *Coordinator) LastStableOffset(topicID [16]byte, part int32, hw int64) int64 {
	if c.nOpen.Load() == 0 {
		return hw
	}
	c.mu.Lock()
	lso := hw
	for _, first := range c.open[partKey{topicID, part}] {
		lso = min(lso, first)
	}
	c.mu.Unlock()
	return lso
}

// CleanerView is the embedded store's disbackend.TxnView: a partition's
// aborted ranges and last stable offset (math.MaxInt64 with no transaction
// open), by its stream name.
func (c *Coordinator) CleanerView(stream string, part int32) ([]disbackend.AbortedRange, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.ids[stream]
	if !ok {
		return nil, math.MaxInt64
	}
	pk := partKey{id, part}
	lso := int64(math.MaxInt64)
	for _, first := range c.open[pk] {
		lso = min(lso, first)
	}
	l := c.aborted[pk]
	out := make([]disbackend.AbortedRange, len(l))
	for i, a := range l {
		out[i] = disbackend.AbortedRange{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset, LastOffset: a.LastOffset}
	}
	return out, lso
}

// AbortedIn returns the aborted transactions of a partition whose range
// meets [from, to] (offsets), by first offset: what a read_committed Fetch
// answers in aborted_transactions (Kafka collectAbortedTransactions).
func (c *Coordinator) AbortedIn(topicID [16]byte, part int32, from, to int64) []Aborted {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Aborted
	for _, a := range c.aborted[partKey{topicID, part}] {
		if a.FirstOffset > to {
			break
		}
		if a.LastOffset >= from {
			out = append(out, a)
		}
	}
	return out
}

// OpenProducer is a transactional producer with a transaction open on a
// partition (DescribeProducers).
type OpenProducer struct {
	ProducerID  int64
	Epoch       int16
	FirstOffset int64 // the lower bound of its first offset there
	StartMS     int64 // when its transaction started, ms
	TimeoutMS   int32
}

// OpenOn returns the producers with a transaction open on a partition.
func (c *Coordinator) OpenOn(topicID [16]byte, part int32) []OpenProducer {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []OpenProducer
	for t, first := range c.open[partKey{topicID, part}] {
		out = append(out, OpenProducer{ProducerID: t.rec.PID, Epoch: t.rec.Epoch, FirstOffset: first,
			StartMS: t.rec.StartMS, TimeoutMS: t.rec.TimeoutMS})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}

// PendingOffsets reports whether a transaction not yet ended holds an
// offset of group for the partition (OffsetFetch require_stable answers
// UNSTABLE_OFFSET_COMMIT then, KIP-447).
func (c *Coordinator) PendingOffsets(group, topic string, part int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.txns {
		if t.rec.State != Ongoing && t.rec.State != PrepareCommit {
			continue
		}
		for _, o := range t.rec.Offsets[group] {
			if o.Topic == topic && o.Partition == part {
				return true
			}
		}
	}
	return false
}

// HasPending reports whether group has any offsets of a transaction not
// yet ended.
func (c *Coordinator) HasPending(group string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.txns {
		if (t.rec.State == Ongoing || t.rec.State == PrepareCommit) && len(t.rec.Offsets[group]) > 0 {
			return true
		}
	}
	return false
}

// VerifyProduce checks a transactional Produce's partition (KIP-890 part
// 1, Kafka's transaction verification): the transactional id's current
// producer id and epoch, a transaction open, the partition added to it.
// It returns 0 and a release to call once the batch's append has ended
// (the transaction's markers wait for it), or the Kafka error code:
// INVALID_PRODUCER_ID_MAPPING (unknown id or another producer id),
// INVALID_PRODUCER_EPOCH (an older epoch: a fenced producer),
// INVALID_TXN_STATE (no transaction open, or the partition not added);
// with several nodes, a refusal of an id another node coordinates is
// checked again after reading the records to their end
// (NOT_ENOUGH_REPLICAS, retriable, when that read fails).
func (c *Coordinator) VerifyProduce(ctx context.Context, txnID string, pid int64, epoch int16, topicID [16]byte, part int32) (func(), int16) {
	if c.cfg.Shared != nil {
		return c.verifyShared(ctx, txnID, pid, epoch, topicID, part)
	}
	return c.verify(txnID, pid, epoch, topicID, part)
}

func (c *Coordinator) verify(txnID string, pid int64, epoch int16, topicID [16]byte, part int32) (func(), int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.txns[txnID]
	switch {
	case t == nil || t.rec.PID != pid:
		return nil, codeInvalidProducerIDMapping
	case epoch != t.rec.Epoch:
		return nil, codeInvalidProducerEpoch
	case t.rec.State != Ongoing:
		return nil, codeInvalidTxnState
	}
	if _, ok := c.open[partKey{topicID, part}][t]; !ok {
		return nil, codeInvalidTxnState
	}
	t.inflight++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			t.inflight--
			c.mu.Unlock()
		})
	}, 0
}

// loop aborts transactions past their timeout, finishes those left
// preparing, forgets idle ids and drops aborted ranges below the log start
// offset.
func (c *Coordinator) loop() {
	defer close(c.done)
	tick := time.NewTicker(c.cfg.CheckInterval)
	defer tick.Stop()
	lastPrune := time.Time{}
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		c.checkTxns()
		if now := c.cfg.Now(); now.Sub(lastPrune) >= time.Minute {
			lastPrune = now
			c.pruneAborted()
		}
	}
}

func (c *Coordinator) checkTxns() {
	now := c.nowMS()
	c.mu.Lock()
	var work []*txn
	for id, t := range c.txns {
		if c.cfg.Shared != nil && !c.Owns(id) {
			continue // its coordinator sees to it
		}
		switch t.rec.State {
		case Ongoing:
			if now > t.rec.StartMS+int64(t.rec.TimeoutMS) {
				work = append(work, t)
			}
		case PrepareCommit, PrepareAbort:
			work = append(work, t)
		case Empty, CompleteCommit, CompleteAbort:
			if now > t.rec.UpdateMS+c.cfg.IDExpiration.Milliseconds() {
				work = append(work, t)
			}
		}
	}
	c.mu.Unlock()
	for _, t := range work {
		if !t.mu.TryLock() {
			continue // a request is at it
		}
		c.checkTxn(t, now)
		t.mu.Unlock()
	}
}

// checkTxn does what the loop found t needs. Requires t.mu.
func (c *Coordinator) checkTxn(t *txn, now int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if t.gone {
		return
	}
	if c.cfg.Shared != nil && !t.auth {
		if c.loadOwned(ctx, t) != 0 || t.gone {
			return
		}
	}
	if t.rec.PID < 0 {
		// A transactional id asked for and never initialised (shared
		// mode): nothing was saved.
		c.mu.Lock()
		if c.txns[t.rec.ID] == t {
			delete(c.txns, t.rec.ID)
		}
		t.gone = true
		c.mu.Unlock()
		return
	}
	switch t.rec.State {
	case Ongoing:
		if now <= t.rec.StartMS+int64(t.rec.TimeoutMS) {
			return
		}
		// As Kafka: the epoch is bumped, so the producer is fenced, and
		// the markers carry the new epoch.
		c.log.Info("transaction timed out, aborting", zap.String("transactional_id", t.rec.ID),
			zap.Int64("producer_id", t.rec.PID), zap.Int32("timeout_ms", t.rec.TimeoutMS))
		if err := c.prepare(ctx, t, false, true); err != nil {
			c.log.Warn("aborting a timed-out transaction failed", zap.String("transactional_id", t.rec.ID), zap.Error(err))
			return
		}
		fallthrough
	case PrepareCommit, PrepareAbort:
		if err := c.complete(ctx, t); err != nil {
			c.log.Warn("completing a transaction failed, will retry", zap.String("transactional_id", t.rec.ID), zap.Error(err))
		}
	case Empty, CompleteCommit, CompleteAbort:
		if now <= t.rec.UpdateMS+c.cfg.IDExpiration.Milliseconds() {
			return
		}
		if err := c.be.SaveTxnRecord(ctx, "t/"+t.rec.ID, nil); err != nil {
			c.log.Warn("expiring a transactional id failed", zap.String("transactional_id", t.rec.ID), zap.Error(err))
			return
		}
		c.mu.Lock()
		if c.txns[t.rec.ID] == t {
			delete(c.txns, t.rec.ID)
		}
		t.gone = true
		c.mu.Unlock()
		c.log.Info("transactional id expired", zap.String("transactional_id", t.rec.ID))
	}
}

// pruneAborted drops the aborted ranges that end below their partition's
// log start offset: no reader can reach them.
func (c *Coordinator) pruneAborted() {
	c.mu.Lock()
	type job struct {
		pk     partKey
		stream string
	}
	var jobs []job
	for pk := range c.aborted {
		if c.cfg.Shared != nil && !c.cfg.Leads(c.streams[pk], pk.part) {
			continue // its leader drops them
		}
		jobs = append(jobs, job{pk, c.streams[pk]})
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, j := range jobs {
		r, err := c.be.Range(j.stream, j.pk.part)
		gone := errors.Is(err, disbackend.ErrStreamNotFound) || errors.Is(err, disbackend.ErrPartitionNotFound)
		if err != nil && !gone {
			continue
		}
		c.mu.Lock()
		var drop []Aborted
		kept := c.aborted[j.pk][:0]
		for _, a := range c.aborted[j.pk] {
			if gone || a.LastOffset < r.First {
				drop = append(drop, a)
			} else {
				kept = append(kept, a)
			}
		}
		c.aborted[j.pk] = kept
		if len(kept) == 0 {
			delete(c.aborted, j.pk)
			delete(c.streams, j.pk)
		}
		c.mu.Unlock()
		for _, a := range drop {
			if err := c.be.SaveTxnRecord(ctx, abortedKey(j.pk, a.ProducerID, a.FirstOffset), nil); err != nil {
				c.log.Debug("dropping an aborted range failed", zap.Error(err))
			}
		}
	}
}

// bumpEpoch gives t its next epoch, or a new producer id at epoch 0 when
// the epoch is exhausted (Kafka prepareIncrementProducerEpoch), keeping
// the old pair for a retry of InitProducerId (KIP-360). Requires t.mu.
func (c *Coordinator) bumpEpoch(ctx context.Context, t *txn) error {
	pid, epoch := t.rec.PID, t.rec.Epoch+1
	if t.rec.Epoch >= math.MaxInt16-1 {
		id, _, err := c.be.InitProducerID(ctx)
		if err != nil {
			return err
		}
		pid, epoch = id, 0
	}
	c.update(t, func(r *record) {
		r.LastPID, r.LastEpoch = r.PID, r.Epoch
		r.PID, r.Epoch = pid, epoch
	})
	return nil
}
