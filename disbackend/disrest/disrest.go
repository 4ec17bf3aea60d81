// Package disrest is disgw's backend on real Huawei Cloud DIS: every
// disbackend.Backend operation goes through the official Go SDK client
// (huaweicloud-sdk-go-v3/services/dis/v2), signed with AK/SK by the SDK's
// signer or carrying an IAM token.
//
// What it maps, and where it keeps what DIS has no field for:
//
//   - A Kafka record is one DIS record; sequence numbers are Kafka offsets.
//     The Store is a disbackend.RecordLog: the gateway hands it each
//     batch's records already decoded. Append queues the batch on its
//     partition's accumulator (append.go): the records of consecutive
//     batches that arrive within Linger (50 ms) of the first waiting one
//     share one PutRecords, up to BatchBytes (1 MiB) or BatchCount (1000
//     records), and a full one is sent at once; BufferBytes (32 MiB) bounds
//     what waits across the Store, beyond which Append blocks up to
//     BufferWait (30 s) and then fails with ErrUnavailable. At most one
//     PutRecords is in flight per partition, paced at 90% of the stream
//     type's write limits (pace.go) so that DIS does not refuse a record
//     and accept a later one; records refused with DIS.4303 or DIS.5xxx,
//     and whole requests after DIS.4303/4305/4309, DIS.5xxx or no answer,
//     are retried with backoff and jitter before any later record of that
//     partition, for up to RetryTimeout (60 s). A PutRecords left without
//     an answer is checked before it is sent again (verify.go), so that
//     what DIS wrote is not written twice. The record format (plain or
//     envelope) is in envelope.go.
//   - Read turns GetRecords answers into one Kafka record batch (magic 2,
//     uncompressed) per call, following next_partition_cursor through a
//     cursor cache keyed by (stream, partition, next sequence number).
//     Reads at the same position share one GetRecords, which reads ahead
//     2 MiB into a bounded per-partition buffer (4 MiB per partition, 64 MiB
//     per Store), and a partition's range is read from DIS at most once per
//     PollInterval (readahead.go). Batch boundaries of the producer are not
//     kept: a read starts at the requested offset, never before it. Reads,
//     like other requests that can be repeated safely, are sent at most 5
//     times in all on DIS.5xxx, DIS.4303/4305/4309 or no answer
//     (callIdempotent).
//   - The Kafka topic name (where it differs from the stream name), the
//     timestamp type, max.message.bytes, dis.record.format and
//     cleanup.policy are stream tags, so every gateway node lists the same
//     topics; topic configs no tag holds, and the topic name of a stream
//     whose name is hashed (topics of 65-249 characters,
//     disbackend.StreamNameForTopic), are checkpoint metadata of
//     gatewayApp on the stream (extconfig.go). Retention is data_duration,
//     24-168 hours; retention.ms=-1 and cleanup.policy=compact are 168.
//   - cleanup.policy=compact: the compactor re-appends each live key's
//     latest record before DIS expires it, with a key index per partition
//     snapshotted in SnapshotStream (compact.go).
//   - Consumer groups' membership (disbackend.GroupStateStore) is a
//     record per save in the compacted GroupStream (groups.go).
//   - Group ids that AppNameForGroup cannot reverse, and the producer-id
//     allocator, are checkpoint metadata on a gateway-owned stream
//     (MetaStream, one partition, never listed as a topic).
//
// The idempotent-producer state (the last five batches per
// producer-partition, disbackend.ProducerStates) is kept in DIS as a
// write-ahead checkpoint of each partition (idem.go), exact while the
// gateway is the partition's only writer. Weaker than the embedded store,
// and documented in docs/dis-backend.md: an OffsetCommit is one
// CommitCheckpoint per partition (up to 8 at once), validated first but
// not atomic on DIS; DIS keeps no commit time, so Checkpoint.CommittedAt is
// the time of the read.
package disrest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/auth"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/auth/basic"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/config"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/impl"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/request"
	dis "github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
	"github.com/disgw/disgw/internal/metrics"
)

var (
	_ disbackend.Backend         = (*Store)(nil)
	_ disbackend.ConfigValidator = (*Store)(nil)
	_ disbackend.RecordLog       = (*Store)(nil)
)

// StoresRecords reports true: DIS stores each Kafka record as one DIS
// record, so Append wants Batch.Records (disbackend.RecordLog).
func (s *Store) StoresRecords() bool { return true }

// Record formats (docs/dis-backend.md, "Records and the envelope").
const (
	// FormatAuto stores a record natively when DIS can hold it (UTF-8 key or
	// none, non-empty value, no headers, value not starting with the envelope
	// magic), else as an envelope.
	FormatAuto = disbackend.RecordFormatAuto
	// FormatNative never wraps; a record that needs an envelope is refused.
	FormatNative = disbackend.RecordFormatNative
	// FormatEnvelope always wraps.
	FormatEnvelope = disbackend.RecordFormatEnvelope
)

// Options configure New. Endpoint and ProjectID are required, and either
// AK and SK or Token.
type Options struct {
	// Endpoint is the DIS endpoint URL, e.g.
	// https://dis.cn-north-4.myhuaweicloud.com.
	Endpoint string
	// Region is the DIS region (e.g. cn-north-4); informational, the
	// endpoint decides where requests go.
	Region string
	// ProjectID is the IAM project id of the region.
	ProjectID string
	// AK and SK sign every request (SDK-HMAC-SHA256). Never logged.
	AK, SK string
	// SecurityToken goes with a temporary AK/SK and is sent as
	// X-Security-Token. Never logged.
	SecurityToken string
	// Token, used when AK is empty, is sent as X-Auth-Token. Never logged.
	Token string
	// RecordFormat is the format of topics without dis.record.format:
	// FormatAuto (default), FormatNative or FormatEnvelope.
	RecordFormat string
	// Linger is how long a partition's first waiting batch waits for more
	// before its PutRecords is sent (the DIS Kafka Adapter's linger.ms); 0
	// means 50 ms, < 0 sends at once (batches that arrive while a
	// PutRecords is in flight are still merged).
	Linger time.Duration
	// BatchCount caps the records of one PutRecords; 0 means 1000 (the DIS
	// Kafka Adapter's batch.count). Waiting records that reach it are sent
	// before Linger ends.
	BatchCount int
	// BatchBytes caps the data bytes of one PutRecords; 0 means 1 MiB, DIS's
	// limit for a COMMON stream (the adapter's batch.size). Waiting batches
	// whose bytes reach it are sent before Linger ends.
	BatchBytes int
	// BufferBytes bounds the bytes of the batches waiting for DIS across
	// the Store (the adapter's buffer.memory); 0 means 32 MiB. An Append
	// beyond it blocks until there is room.
	BufferBytes int
	// BufferWait bounds that block: an Append still without room after it
	// returns a Pending completed with ErrUnavailable (Kafka
	// REQUEST_TIMED_OUT); 0 means 30 s (Kafka's default request timeout).
	BufferWait time.Duration
	// RequestTimeout bounds one HTTP request; 0 means 30 s.
	RequestTimeout time.Duration
	// idemSettle is how long an intent that looks not written (idem.go),
	// or a PutRecords left without an answer that looks not applied
	// (verifyPut), is given to land; 0 means defaultIdemSettle, < 0 none
	// (tests).
	idemSettle time.Duration
	// idemHold is how long a batch cut short holds the partition's other
	// writes for its retry (idem.go); 0 means defaultIdemHold (tests).
	idemHold time.Duration
	// now, when set (tests), is the clock of producer states' append
	// times and their expiry instead of time.Now.
	now func() time.Time
	// fence, when set, is the Store's fence instead of soloFence (tests;
	// fence.go).
	fence fence
	// RetryTimeout bounds how long an append retries DIS.4303, DIS.4305,
	// DIS.4309, DIS.5xxx and transport errors before it fails with
	// ErrUnavailable; 0 means 60 s.
	RetryTimeout time.Duration
	// RetryBackoff is the first retry's delay, doubled up to 2 s, with
	// jitter; 0 means 100 ms.
	RetryBackoff time.Duration
	// PollInterval is how often Changed wakes long polls so that records
	// written by others are found, and how often Read asks DIS for a
	// partition's range (once per interval and partition, however many
	// consumers read it); 0 means 500 ms, < 0 wakes only on this backend's
	// own appends and reads the range at every Read.
	PollInterval time.Duration
	// RangeTTL is how long a partition's range read from DIS is reused by
	// Range and Read; 0 means 0 (every Range asks DIS).
	RangeTTL time.Duration
	// ProducerStateExpiry drops an idempotent producer's state on a
	// partition (its dedupe window, in memory and so in the next
	// checkpoints) once it has written nothing there for this long (Kafka
	// producer.id.expiration.ms, disbackend.ProducerStates.Expire),
	// looked for every minute (every ProducerStateExpiry when shorter); 0
	// means 24 hours, < 0 never expires. After expiry the producer is
	// accepted at any sequence, so keep it longer than clients'
	// delivery.timeout.ms. A window read back from DIS (at the first
	// write after a start, idem.go) counts as written when its checkpoint
	// was committed.
	ProducerStateExpiry time.Duration
	// Logger is named "disrest"; nil means zap.NewNop().
	Logger *zap.Logger
	// CompactionMaxKeys bounds the keys of compacted topics (cleanup.policy
	// compact) the Store indexes, about 100 bytes of memory each; a batch
	// with new keys beyond it is refused with ErrInvalidRecord (Kafka
	// INVALID_RECORD). 0 means DefaultCompactionMaxKeys (compact.go).
	CompactionMaxKeys int
	// LogStartRefresh is how often a node reads the DeleteRecords log
	// start offsets other nodes kept in DIS (logstart.go), at most: a
	// DeleteRecords served by another node is seen within about this; the
	// node that served it sees it at once. 0 means 5 s.
	LogStartRefresh time.Duration
	// NoCompactor turns the compactor off: compacted topics are then kept
	// only as long as DIS keeps their records. For tests of other things.
	NoCompactor bool
	// PrincipalClients bounds the SDK clients kept for principals' own
	// credentials (the gateway's dis authentication mode, principals.go),
	// least recently used dropped first; 0 means 1024.
	PrincipalClients int
	// PrincipalTTL is how long a principal's successful signed check of a
	// stream (AuthorizeStream) lets its reads be served from the shared
	// read-ahead and cursor caches before it is checked again; 0 means
	// 60 s.
	PrincipalTTL time.Duration
	// Cluster turns on cluster mode (docs/cluster.md, cluster.go): the
	// Store becomes one of several gateway nodes in front of the DIS
	// project, a member of DIS's consumer group of app __disgw-nodes from
	// StartCluster on, and writes only what it owns in its current view,
	// under its lease. Off (the default), it is the only node and owns
	// everything.
	Cluster bool
	// ClusterHeartbeat is how often the node heartbeats to DIS and reads
	// the current view (cluster mode); 0 means 1 s.
	ClusterHeartbeat time.Duration
	// ClusterJoinWindow is the rebalanceTimeoutMs of its JoinGroup; 0
	// means 3 s.
	ClusterJoinWindow time.Duration
	// ClusterSettle is how long the controller waits after its SyncGroup
	// before it reads the registry records and writes the view; 0 means
	// 2 s.
	ClusterSettle time.Duration
	// ClusterLease is how long a lease renewal DIS accepted lets the node
	// write, from the moment it was sent (renewed every third of it); 0
	// means 3 s.
	ClusterLease time.Duration
	// ClusterRebalanceInterval is how often at most the controller starts
	// a new generation because keys created since the view unbalance it;
	// 0 means 10 minutes.
	ClusterRebalanceInterval time.Duration
	// Version is the gateway's version, published in the node's registry
	// record (cluster mode).
	Version string
	// Metrics receives each DIS call (disgw_backend_calls_total,
	// disgw_backend_call_duration_seconds), the fill of each PutRecords and
	// the time throttled; nil counts nothing.
	Metrics *metrics.Metrics
	// NodeID is this node's Kafka node id (the node_id setting, 0-1023),
	// used in cluster mode only: unique among the nodes, in its DIS client
	// id and registry record (cluster.go); producer ids are NodeID<<40 | n,
	// n reserved in a checkpoint of this node's own (docs/cluster.md §5). A
	// single node ignores it.
	NodeID int32
}

const (
	defaultLinger         = 50 * time.Millisecond
	defaultBatchCount     = 1000
	defaultBatchBytes     = disapi.CommonPutRecordsBytes
	defaultBufferBytes    = 32 << 20
	defaultBufferWait     = 30 * time.Second
	defaultRequestTimeout = 30 * time.Second
	defaultRetryTimeout   = 60 * time.Second
	defaultRetryBackoff   = 100 * time.Millisecond
	maxRetryBackoff       = 2 * time.Second
	defaultPollInterval   = 500 * time.Millisecond
	// maxRecordBytes is DIS's limit on one record's data: 1 MB.
	maxRecordBytes = disapi.MaxRecordBytes
	// cursorTTL is how long a cached cursor is used: DIS cursors live 5
	// minutes; renew a minute early.
	cursorTTL = disapi.CursorLifetime - time.Minute
)

// Store is a disbackend.Backend on DIS. Safe for concurrent use.
type Store struct {
	c    *dis.DisClient
	opts Options
	log  *zap.Logger

	// closeMu guards closed and the writers map; writers are started under
	// it and stopped by Close.
	closeMu sync.Mutex
	closed  bool
	writers map[partKey]*writer
	wg      sync.WaitGroup

	// principals are the clients of principals' own credentials and
	// their recent stream checks (principals.go).
	principals principalCache

	// buf counts the bytes of batches waiting for DIS (BufferBytes).
	buf buffer

	// changeMu guards changed.
	changeMu sync.Mutex
	changed  chan struct{}

	streams streamCache
	// listed is what the last ListStreams knew of each stream (follow.go).
	listed  listedStreams
	cursors cursorCache
	// reads is the fetch path's per-partition state: shared GetRecords,
	// read-ahead buffers, range refreshes (readahead.go).
	reads readCache
	// ticks counts poll ticks: a range read from DIS since the last tick is
	// fresh. readEpoch numbers Reads when there is no polling.
	ticks     atomic.Int64
	readEpoch atomic.Int64
	// bg is the context of shared reads; Close ends it.
	bg     context.Context
	stopBG context.CancelFunc
	ranges rangeCache
	pids   pidAllocator
	idem   idemState
	// fence is asked before every write to DIS (fence.go): soloFence on a
	// single node, the membership in cluster mode.
	fence    fence
	metaOnce onceOK // MetaStream created
	// groups is the latest record of each group in GroupStream (groups.go).
	groups groupTable
	// txns is the latest record of each key of TxnStream (txns.go).
	txns groupTable
	// txnView is the transactions the compactor respects (SetTxnView).
	txnView   atomic.Pointer[disbackend.TxnView]
	compact   compactor
	logStarts logStartState

	// globalBackoff is when requests may go again after DIS.4305/DIS.4309
	// (unix nanoseconds).
	globalBackoff atomic.Int64
	// outOfOrder counts what OutOfOrder reports.
	outOfOrder atomic.Int64
	// lateWrites counts what LateWrites reports (fenced.go).
	lateWrites atomic.Int64
	// retired are the writers of partitions this node gave up (viewChanged)
	// that may still be ending: a new writer of the partition waits for
	// the old one's done first, so that a partition never has two
	// PutRecords of this node in flight.
	retired map[partKey]chan struct{}
	// beforePut, when set (tests), is called by a writer between its fence
	// check and each PutRecords (fenced.go: the failpoint of the late
	// write). It returns whether it held the writer: that PutRecords then
	// leaves whatever the writer's deadline.
	beforePut func(stream string, part int32) (held bool)

	stopPoll chan struct{}

	// cluster is the membership in cluster mode (cluster.go), else nil.
	cluster *membership
}

type partKey struct {
	stream string
	part   int32
}

// New returns a Store talking to DIS at opts.Endpoint. It checks the
// options but does not contact DIS.
func New(opts Options) (*Store, error) {
	var problems []string
	if opts.Endpoint == "" {
		problems = append(problems, "endpoint is required")
	}
	if opts.ProjectID == "" {
		problems = append(problems, "project id is required")
	}
	if (opts.AK == "") != (opts.SK == "") {
		problems = append(problems, "AK and SK go together")
	}
	if opts.AK == "" && opts.Token == "" {
		problems = append(problems, "credentials are required: AK and SK, or an IAM token")
	}
	if opts.SecurityToken != "" && opts.AK == "" {
		problems = append(problems, "a security token goes with an AK and SK")
	}
	switch opts.RecordFormat {
	case "":
		opts.RecordFormat = FormatAuto
	case FormatAuto, FormatNative, FormatEnvelope:
	default:
		problems = append(problems, fmt.Sprintf("record format %q is not auto, native or envelope", opts.RecordFormat))
	}
	if opts.Cluster && (opts.NodeID < 0 || opts.NodeID > maxNodeID) {
		problems = append(problems, fmt.Sprintf("node id %d is not 0-%d", opts.NodeID, maxNodeID))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("disrest: %s", strings.Join(problems, "; "))
	}
	if opts.Linger == 0 {
		opts.Linger = defaultLinger
	}
	if opts.BatchCount <= 0 {
		opts.BatchCount = defaultBatchCount
	}
	if opts.BufferBytes <= 0 {
		opts.BufferBytes = defaultBufferBytes
	}
	if opts.BufferWait <= 0 {
		opts.BufferWait = defaultBufferWait
	}
	if opts.BatchBytes <= 0 {
		opts.BatchBytes = defaultBatchBytes
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = defaultRequestTimeout
	}
	if opts.RetryTimeout <= 0 {
		opts.RetryTimeout = defaultRetryTimeout
	}
	if opts.LogStartRefresh <= 0 {
		opts.LogStartRefresh = defaultLogStartRefresh
	}
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = defaultRetryBackoff
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = defaultPollInterval
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.CompactionMaxKeys <= 0 {
		opts.CompactionMaxKeys = DefaultCompactionMaxKeys
	}
	if opts.ProducerStateExpiry == 0 {
		opts.ProducerStateExpiry = disbackend.DefaultProducerIDExpiration
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	c, err := newClient(opts, opts.AK, opts.SK, opts.SecurityToken)
	if err != nil {
		return nil, err
	}
	s := &Store{
		c:        c,
		opts:     opts,
		log:      opts.Logger.Named("disrest"),
		writers:  map[partKey]*writer{},
		changed:  make(chan struct{}),
		stopPoll: make(chan struct{}),
		fence:    soloFence{},
		// nil unless built with tag disgw_failpoints (failpoint.go)
		beforePut: failpointBeforePut,
	}
	if opts.fence != nil {
		s.fence = opts.fence
	}
	s.idem.expiry, s.idem.now = opts.ProducerStateExpiry, opts.now
	s.buf.init(opts.BufferBytes)
	s.principals.init(opts.PrincipalClients, opts.PrincipalTTL)
	s.streams.init()
	s.cursors.init()
	s.reads.init()
	s.bg, s.stopBG = context.WithCancel(context.Background())
	s.ranges.init()
	s.groups.init(GroupStream, GroupVersionHeader, "group state", groupStateFenceKey)
	s.txns.init(TxnStream, TxnVersionHeader, "transaction state", txnFenceKey)
	if opts.Cluster {
		s.cluster = newMembership(s)
		s.fence = s.cluster
	}
	s.compact.init(s, int64(opts.CompactionMaxKeys))
	if !opts.NoCompactor {
		s.wg.Add(1)
		go s.compact.run()
	}
	if opts.PollInterval > 0 {
		s.wg.Add(1)
		go s.poll()
	}
	if opts.ProducerStateExpiry > 0 {
		s.wg.Add(1)
		go s.expireProducersLoop(min(producerExpiryCheck, opts.ProducerStateExpiry))
	}
	return s, nil
}

// newClient builds an SDK client of opts' endpoint signing with ak and sk
// (and securityToken), or, when ak is empty, sending opts.Token.
func newClient(opts Options, ak, sk, securityToken string) (*dis.DisClient, error) {
	var cred auth.ICredential
	builder := dis.DisClientBuilder()
	if ak != "" {
		c, err := basic.NewCredentialsBuilder().WithAk(ak).WithSk(sk).WithSecurityToken(securityToken).
			WithProjectId(opts.ProjectID).SafeBuild()
		if err != nil {
			// The SDK's message names no secret; keep it out anyway.
			return nil, errors.New("disrest: credentials: the SDK refused the AK/SK")
		}
		cred = c
	} else {
		cred = &tokenCredentials{projectID: opts.ProjectID, token: opts.Token}
		builder = builder.WithCredentialsType("disrest.tokenCredentials")
	}
	hc, err := builder.
		WithEndpoints([]string{opts.Endpoint}).
		WithCredential(cred).
		WithHttpConfig(config.DefaultHttpConfig().WithTimeout(opts.RequestTimeout).WithRetries(0)).
		SafeBuild()
	if err != nil {
		return nil, fmt.Errorf("disrest: client: %w", err)
	}
	return dis.NewDisClient(hc), nil
}

// tokenCredentials authenticates with an IAM token (X-Auth-Token) instead
// of a signature; the SDK's basic credentials only sign.
type tokenCredentials struct {
	projectID string
	token     string
}

func (c *tokenCredentials) ProcessAuthParams(*impl.DefaultHttpClient, string) (auth.ICredential, error) {
	return c, nil
}

func (c *tokenCredentials) ProcessAuthRequest(_ *impl.DefaultHttpClient, req *request.DefaultHttpRequest) (*request.DefaultHttpRequest, error) {
	req.Builder().
		AddAutoFilledPathParam("project_id", c.projectID).
		AddHeaderParam("X-Project-Id", c.projectID).
		AddHeaderParam("X-Auth-Token", c.token)
	return req, nil
}

// Changed returns a channel closed at the next append through this Store
// or the next poll tick (records written by other nodes or DIS apps).
func (s *Store) Changed() <-chan struct{} {
	s.changeMu.Lock()
	defer s.changeMu.Unlock()
	return s.changed
}

func (s *Store) notify() {
	s.changeMu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.changeMu.Unlock()
}

func (s *Store) poll() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stopPoll:
			return
		case <-t.C:
			s.ticks.Add(1) // before waking: the woken see a new tick
			s.notify()
		}
	}
}

// Close completes every queued append (sending it), then stops. Appends
// after Close fail with ErrClosed; Reads that need DIS fail.
func (s *Store) Close() error {
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return nil
	}
	s.closed = true
	for _, w := range s.writers {
		w.stop()
	}
	close(s.stopPoll)
	s.closeMu.Unlock()
	s.wg.Wait()
	// After the writers have sent what was queued, under the lease: leave
	// the nodes' group, so that the others rebalance at once.
	s.cluster.close()
	s.stopBG()
	return nil
}

// OutOfOrder is how often, since the Store was opened, DIS accepted a
// record of a PutRecords after refusing an earlier one of the same
// partition in that call, or a Kafka batch's records got sequence numbers
// that are not contiguous (another writer of the partition in between).
// Either puts records where the producer was not told they are; each is
// also logged as a warning with the running total ("out_of_order_total").
func (s *Store) OutOfOrder() int64 { return s.outOfOrder.Load() }

// ctxTimeout is the context of internal calls that have none (Append,
// Range).
func (s *Store) ctxTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.opts.RequestTimeout)
}

// idempotentAttempts bounds how often callIdempotent sends a request.
const idempotentAttempts = 5

// callIdempotent is call for requests that may be sent again with the same
// effect (reads, and CommitCheckpoint of one value): DIS.5xxx,
// DIS.4303/4305/4309 and requests left without an answer are sent again
// after a backoff with jitter (RetryBackoff, doubled up to 2 s), up to
// idempotentAttempts times in all while ctx lasts. The last error is
// returned as call returns it.
func callIdempotent[T any](ctx context.Context, s *Store, op string, f func() (T, error)) (T, error) {
	backoff := s.opts.RetryBackoff
	for attempt := 1; ; attempt++ {
		v, err := call(ctx, s, op, f)
		var de *disError
		if err == nil || attempt >= idempotentAttempts || !errors.As(err, &de) || !de.retriable() {
			return v, err
		}
		d := backoff/2 + rand.N(backoff/2+1)
		s.log.Warn("DIS request failed: retrying", zap.String("op", op), zap.Int("attempt", attempt), zap.Duration("backoff", d), zap.Error(err))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		backoff = min(2*backoff, maxRetryBackoff)
	}
}

// call runs one SDK call, honouring ctx (the SDK has no context: an ended
// ctx abandons the call, which completes in the background, within the
// HTTP client's timeout of RequestTimeout) and the global back-off after
// DIS.4305/DIS.4309.
func call[T any](ctx context.Context, s *Store, op string, f func() (T, error)) (T, error) {
	return callWith(ctx, s, op, false, f)
}

// callToEnd is call for PutRecords: when ctx ends first it still waits for
// the request to end (at most the HTTP client's timeout), so that a
// partition never has two PutRecords in flight, even after a timeout.
func callToEnd[T any](ctx context.Context, s *Store, op string, f func() (T, error)) (T, error) {
	return callWith(ctx, s, op, true, f)
}

func callWith[T any](ctx context.Context, s *Store, op string, toEnd bool, f func() (T, error)) (T, error) {
	var zero T
	if until := s.globalBackoff.Load(); until > 0 {
		if d := time.Until(time.Unix(0, until)); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return zero, fmt.Errorf("disrest: %s: %w", op, ctx.Err())
			case <-t.C:
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return zero, fmt.Errorf("disrest: %s: %w", op, err)
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	start := time.Now()
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case <-ctx.Done():
		if toEnd {
			<-ch
		}
		s.opts.Metrics.BackendCall(opName(op), "CANCELLED", time.Since(start))
		return zero, fmt.Errorf("disrest: %s: %w", op, ctx.Err())
	case r := <-ch:
		s.opts.Metrics.BackendCall(opName(op), s.metricCode(r.err), time.Since(start))
		if r.err != nil {
			de := s.mapError(r.err)
			if c := disbackend.CredentialsFrom(ctx); c != nil && de.principal == "" {
				d := *de
				d.principal = c.AK
				if d.sentinel == nil && strings.HasPrefix(d.code, disapi.CodePrefixAuth) {
					// A principal's key refused since it authenticated
					// (deleted, disabled): the gateway closes its
					// connection, so that the client authenticates again.
					d.sentinel = disbackend.ErrAuthenticationFailed
				}
				de = &d
			}
			if de.code == disapi.CodeTooManyRequests || de.code == disapi.CodeIPBlacklisted {
				s.globalBackoff.Store(time.Now().Add(time.Second).UnixNano())
			}
			return zero, fmt.Errorf("disrest: %s: %w", op, de)
		}
		return r.v, nil
	}
}
