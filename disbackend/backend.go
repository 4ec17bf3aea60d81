// Package disbackend defines what the gateway needs from a store with DIS
// semantics: streams (Kafka topics) of partitions, each an append-only log of
// sequence numbers (Kafka offsets) with a [first : next] range, and the domain
// types, error sentinels, idempotent-producer rules and Kafka-to-DIS name
// rules shared by every backend.
//
// It owns no storage and imports no Kafka wire types (kmsg): the gateway
// decodes the wire; the backends keep the data: localstore (the embedded
// store) and disrest (Huawei Cloud DIS through its REST API). Record
// batches are read and written with the leaf codec kafkawire/batch, whose
// Record is this package's Record.
package disbackend

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/disgw/disgw/kafkawire/batch"
)

// Backend is everything the gateway uses. Implementations: localstore (the
// embedded store) and disrest (DIS).
type Backend interface {
	Streams
	Log
	Producers
	Apps
	// ClusterID returns the cluster id Kafka clients see (Metadata,
	// DescribeCluster): the same for every node and every start over the
	// same data (the embedded store keeps it in its metadata; on DIS it is
	// derived from the gateway-owned stream). Errors: ErrClosed, or a
	// storage error.
	ClusterID(ctx context.Context) (string, error)
	// Close flushes and syncs what is pending and releases the store. Appends
	// after Close fail with ErrClosed.
	Close() error
}

// TimestampType is a topic's message.timestamp.type.
type TimestampType int8

const (
	// CreateTime keeps the producer's timestamps (Kafka's default).
	CreateTime TimestampType = 0
	// LogAppendTime replaces them with the time the store appended the batch.
	LogAppendTime TimestampType = 1
)

func (t TimestampType) String() string {
	if t == LogAppendTime {
		return "LogAppendTime"
	}
	return "CreateTime"
}

// UnlimitedRetention as StreamConfig.Retention keeps data forever
// (Kafka retention.ms=-1).
const UnlimitedRetention time.Duration = -1

// StreamConfig holds the per-stream settings a Kafka topic config maps to.
type StreamConfig struct {
	// Retention is how long a batch is kept after it was appended (DIS
	// data_duration, Kafka retention.ms); expiry removes whole batches and moves
	// the partition's first sequence number. UnlimitedRetention keeps forever.
	// Must be > 0 or UnlimitedRetention.
	Retention time.Duration
	// TimestampType is message.timestamp.type.
	TimestampType TimestampType
	// MaxMessageBytes is max.message.bytes: the largest record batch accepted,
	// in bytes.
	MaxMessageBytes int32
	// MaxDecompressedMessageBytes is max.decompressed.message.bytes: the
	// most bytes the records of one compressed batch may decompress to;
	// Produce refuses a larger batch with INVALID_RECORD. 0 means the
	// gateway's default (config max_decompressed_message_bytes).
	MaxDecompressedMessageBytes int64
	// RecordFormat is the topic config dis.record.format: how the DIS
	// backend stores the topic's records (docs/dis-backend.md, "Records
	// and the envelope"),
	// RecordFormatAuto, RecordFormatNative or RecordFormatEnvelope; ""
	// means the backend's default (config dis_record_format). The embedded
	// store keeps Kafka batches whole and only keeps the value.
	RecordFormat string

	// CleanupPolicy is cleanup.policy: CleanupDelete ("" means it too),
	// CleanupCompact, CleanupCompactDelete or CleanupDeleteCompact (the
	// same policy, listed in the order the topic was given it, as Kafka
	// keeps the list). A compacted stream keeps
	// each key's latest record (the log cleaner removes older ones); with
	// delete as well, Retention still applies; compact alone keeps the
	// latest records forever.
	CleanupPolicy string
	// DeleteRetention is delete.retention.ms: how long a tombstone (a
	// record with a null value) of a compacted stream stays after the log
	// cleaner first kept it (its batch's delete horizon, KIP-534).
	DeleteRetention time.Duration
	// MinCompactionLag is min.compaction.lag.ms: a record is not compacted
	// until this long after it was appended.
	MinCompactionLag time.Duration
	// MaxCompactionLag is max.compaction.lag.ms: a record becomes
	// compactable at the latest this long after it was appended, whatever
	// the dirty ratio; 0 means no limit (Kafka's default, Long.MAX_VALUE).
	MaxCompactionLag time.Duration
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio, 0-1: the share
	// of a partition's cleanable bytes not yet compacted at which the log
	// cleaner compacts it.
	MinCleanableDirtyRatio float64
	// SegmentBytes is segment.bytes: the size at which the stream's active
	// segment is rolled, in bytes; 0 means the backend's default.
	SegmentBytes int64
	// SegmentTime is segment.ms: the age at which the stream's active
	// segment is rolled even if not full; 0 means 7 days (Kafka's
	// default).
	SegmentTime time.Duration

	// CompressionType is compression.type: "" or "producer" keeps batches
	// compressed as the producer sent them; "uncompressed", "gzip",
	// "snappy", "lz4" or "zstd" has the gateway recompress each produced
	// batch to that codec (the embedded store; the DIS backend keeps
	// records, not batches, and only keeps the value).
	CompressionType string
	// GzipLevel, LZ4Level and ZstdLevel are compression.gzip.level (-1 or
	// 1-9), compression.lz4.level (1-17) and compression.zstd.level
	// (-131072 to 22) of batches the gateway recompresses; 0 means
	// Kafka's default (-1, 9, 3; zstd's level 0 is its default, 3).
	GzipLevel, LZ4Level, ZstdLevel int32

	// SetToDefault lists, comma-separated and sorted, the Kafka topic
	// config keys that were set explicitly (CreateTopics configs,
	// AlterConfigs, IncrementalAlterConfigs SET, APPEND, SUBTRACT) to
	// their default value: Kafka's DescribeConfigs reports every key it
	// was given as DYNAMIC_TOPIC_CONFIG, and a key whose value is not the
	// default is reported so anyway. "" when there are none (also a
	// stream made before this was kept, or by a DIS application). A
	// string, not a slice, so that StreamConfig stays comparable.
	SetToDefault string
}

// Values of StreamConfig.CleanupPolicy (Kafka cleanup.policy).
const (
	CleanupDelete        = "delete"
	CleanupCompact       = "compact"
	CleanupCompactDelete = "compact,delete"
	CleanupDeleteCompact = "delete,compact"
)

// Kafka's defaults of the compaction and segment settings of StreamConfig.
const (
	DefaultDeleteRetention        = 24 * time.Hour     // delete.retention.ms
	DefaultMinCleanableDirtyRatio = 0.5                // min.cleanable.dirty.ratio
	DefaultSegmentBytes           = 1 << 30            // segment.bytes (log.segment.bytes)
	DefaultSegmentTime            = 7 * 24 * time.Hour // segment.ms (log.roll.ms)
)

// WithDefaults returns c, or, when c has no CleanupPolicy (it was made
// without the compaction settings: before they existed, or by a DIS
// application through dislocal), c with cleanup.policy delete and Kafka's
// defaults of DeleteRetention and MinCleanableDirtyRatio. The zero
// SegmentBytes and SegmentTime already mean the defaults.
func (c StreamConfig) WithDefaults() StreamConfig {
	if c.CleanupPolicy == "" {
		c.CleanupPolicy = CleanupDelete
		c.DeleteRetention = DefaultDeleteRetention
		c.MinCleanableDirtyRatio = DefaultMinCleanableDirtyRatio
	}
	return c
}

// Compacted reports whether the stream is compacted (cleanup.policy
// compact, compact,delete or delete,compact).
func (c *StreamConfig) Compacted() bool {
	return c.CleanupPolicy == CleanupCompact || c.CleanupPolicy == CleanupCompactDelete ||
		c.CleanupPolicy == CleanupDeleteCompact
}

// ValidCleanupPolicy reports whether p is a StreamConfig.CleanupPolicy
// ("" included).
func ValidCleanupPolicy(p string) bool {
	switch p {
	case "", CleanupDelete, CleanupCompact, CleanupCompactDelete, CleanupDeleteCompact:
		return true
	}
	return false
}

// Deletes reports whether Retention applies (cleanup.policy delete, or
// compact,delete).
func (c *StreamConfig) Deletes() bool { return c.CleanupPolicy != CleanupCompact }

// ConfigValidator is implemented by backends that can check a StreamConfig
// without creating or changing a stream (CreateTopics and AlterConfigs
// with validate_only). Errors wrap ErrInvalidConfig, as CreateStream's and
// UpdateStreamConfig's would.
type ConfigValidator interface {
	ValidateStreamConfig(cfg StreamConfig) error
}

// Record formats of StreamConfig.RecordFormat.
const (
	// RecordFormatAuto stores a record as a plain DIS record when DIS can
	// hold it (UTF-8 key or none, non-empty value, no headers, value not
	// starting with the envelope magic), else as an envelope.
	RecordFormatAuto = "auto"
	// RecordFormatNative never wraps; a record that needs an envelope is
	// refused with ErrInvalidRecord (Kafka INVALID_RECORD).
	RecordFormatNative = "native"
	// RecordFormatEnvelope always wraps.
	RecordFormatEnvelope = "envelope"
)

// ValidRecordFormat reports whether f is a StreamConfig.RecordFormat ("" included).
func ValidRecordFormat(f string) bool {
	switch f {
	case "", RecordFormatAuto, RecordFormatNative, RecordFormatEnvelope:
		return true
	}
	return false
}

// StreamSpec is what CreateStream needs.
type StreamSpec struct {
	// Name is the DIS stream name, already mapped from TopicName by
	// StreamNameForTopic.
	Name string
	// TopicName is the original Kafka topic name, kept by the backend so that
	// it can be listed back.
	TopicName string
	// PartitionCount is the number of partitions, > 0.
	PartitionCount int32
	Config         StreamConfig
}

// Stream describes one stream (Kafka topic) as the backend keeps it.
type Stream struct {
	Name           string   // DIS stream name
	TopicName      string   // original Kafka topic name
	TopicID        [16]byte // random at creation, stable across restarts, never zero
	PartitionCount int32
	Config         StreamConfig
	CreatedAt      time.Time
}

// PartitionRange is DIS's sequence_number_range of one partition: First is the
// oldest retained sequence number (Kafka log start offset); Next is the one the
// next record gets (Kafka log end offset = high watermark). Only synced data is
// counted: Next never covers a record that a crash could lose.
type PartitionRange struct {
	First int64
	Next  int64
}

// Streams manages streams (Kafka topics). DIS: CreateStream, DeleteStream,
// ListStreams, DescribeStream, UpdatePartitionCount, UpdateStream.
type Streams interface {
	// CreateStream creates a stream with a new random TopicID. Errors:
	// ErrStreamExists (the same topic exists), ErrNameCollision (another topic
	// maps to the same stream name), ErrInvalidPartitionCount, ErrInvalidConfig.
	CreateStream(ctx context.Context, spec StreamSpec) (Stream, error)
	// DeleteStream removes a stream and all its data. Errors: ErrStreamNotFound.
	DeleteStream(ctx context.Context, name string) error
	// ListStreams returns every stream, sorted by Name.
	ListStreams(ctx context.Context) ([]Stream, error)
	// DescribeStream returns one stream. Errors: ErrStreamNotFound.
	DescribeStream(ctx context.Context, name string) (Stream, error)
	// UpdatePartitionCount raises the partition count to n (new partitions
	// start at sequence number 0). Errors: ErrStreamNotFound,
	// ErrInvalidPartitionCount (n not larger than the current count).
	UpdatePartitionCount(ctx context.Context, name string, n int32) error
	// UpdateStreamConfig replaces the stream's config. Errors:
	// ErrStreamNotFound, ErrInvalidConfig.
	UpdateStreamConfig(ctx context.Context, name string, cfg StreamConfig) error
}

// Batch is one Kafka record batch (magic 2) as a producer sent it, already
// validated by the gateway (header, CRC-32C, size, and every record, as
// Kafka's LogValidator does) and stamped as Kafka's broker stamps it (the
// partition leader epoch, and the max timestamp recomputed from the
// records). Header is the decoded header of Raw (its BaseOffset is still
// the producer's, usually 0). A store
// that keeps batches whole stores Raw, rewriting its base offset
// (batch.SetBaseOffset: the CRC does not cover it) to the assigned
// sequence number and, on a LogAppendTime stream, stamping the append time
// as Kafka's broker does (batch.SetLogAppendTime: the attribute bit, the
// max timestamp, the CRC recomputed). The store takes ownership of Raw.
type Batch struct {
	Raw []byte
	batch.Header
	// Records are the batch's records, decoded once by the gateway while
	// validating, for stores that keep records rather than batches
	// (RecordLog); nil otherwise. They alias Raw, or its decompressed copy
	// when the batch is compressed.
	Records []Record
	// Credentials, when set, are the principal's own: a backend that acts
	// with them (CredentialVerifier) signs the batch's write with them and
	// never writes it in one request with another principal's records.
	// nil: the backend's own credentials.
	Credentials *Credentials
	// Frame, when set, is the request frame Raw is a part of (the gateway
	// did not copy the batch out of it, as the backend is a FrameKeeper):
	// keeping Raw keeps the whole frame in memory. nil: Raw is the
	// batch's own.
	Frame *Frame
	// Deadline is when the producer stops waiting for the batch's
	// acknowledgement; zero when nobody waits or nobody says. The gateway
	// does not set it yet: with it set from the Produce request's
	// timeout_ms, make compat-cluster's Java console consumer read nothing
	// and Kafka Connect's sink duplicate lines (not understood yet). A backend that would only start
	// writing the batch after it (a cluster-mode node taking a partition
	// over, docs/cluster.md §4) refuses it with ErrNotLeader instead, so a
	// batch the producer gave up on is not written later behind its retry.
	Deadline time.Time
}

// Frame is one Produce request's frame, shared by the batches of the
// request that alias it (Batch.Frame). A store that keeps batches in
// memory after their append (a cache) counts the frame's Size once for
// all of them: Hold when it keeps one, Release when it lets it go.
type Frame struct {
	// Size is the frame's length in bytes.
	Size int
	held atomic.Int32
}

// Hold records that one more batch of the frame is kept, and reports
// whether it is the first (the frame's Size is then to be counted).
func (f *Frame) Hold() bool { return f.held.Add(1) == 1 }

// Release records that a batch Hold counted is no longer kept, and
// reports whether it was the last (the frame's Size is then freed).
func (f *Frame) Release() bool { return f.held.Add(-1) == 0 }

// FrameKeeper is a Log whose memory bounds count request frames (Frame):
// the gateway hands it batches without copying them out of their
// request's frame. A Log that is not one gets each batch that is a small
// part of its frame as a copy of its own.
type FrameKeeper interface {
	// KeepsFrames reports whether Batch.Frame is honoured.
	KeepsFrames() bool
}

// Record is one Kafka record (key, value, headers, absolute timestamp,
// offset delta in its batch): the record model of every backend. It is the
// record of the batch codec, so that a batch is decoded once, without a
// copy.
type Record = batch.Record

// RecordHeader is one record header; a nil Value is a null one.
type RecordHeader = batch.RecordHeader

// RecordLog is implemented by a Backend that stores each record on its own
// rather than whole batches (disrest: one DIS record per Kafka record). The
// gateway sets Batch.Records for its Appends from the decoding it does
// anyway to validate a batch, so a batch is decompressed and walked once.
type RecordLog interface {
	// StoresRecords reports true.
	StoresRecords() bool
}

// GroupStateStore is implemented by backends that keep consumer groups'
// membership (generation, members, assignments) across gateway restarts,
// as Kafka's coordinator keeps it in __consumer_offsets: the embedded
// store does. The state is the group coordinator's, opaque to the backend.
// Without it, members rejoin after a restart (committed offsets are kept
// either way, as checkpoints).
type GroupStateStore interface {
	// SaveGroupState stores state under group id, synced before it
	// returns; nil deletes it. Errors: ErrClosed, or a storage error.
	SaveGroupState(ctx context.Context, group string, state []byte) error
	// GroupStates returns every stored state by group id.
	GroupStates(ctx context.Context) (map[string][]byte, error)
}

// GroupConfigStateKey is the GroupStateStore key under which the group
// coordinator keeps group's GROUP configs (groupcoord/groupconfig.go),
// beside the groups' states: a NUL byte starts it. A backend with several
// nodes fences a write of it as one of group's state (GroupKey(group)).
func GroupConfigStateKey(group string) string { return groupConfigPrefix + group }

// GroupOfConfigStateKey returns the group whose GroupConfigStateKey key
// is, and whether key is one.
func GroupOfConfigStateKey(key string) (string, bool) {
	return strings.CutPrefix(key, groupConfigPrefix)
}

const groupConfigPrefix = "\x00group-config\x00"

// TxnStateStore is implemented by backends that keep the transaction
// coordinator's state (Kafka's __transaction_state): transactional ids,
// their producer ids, epochs, states and partitions, and the aborted
// transactions of each partition. The records are the coordinator's,
// opaque to the backend. Without it, transactional producers are refused.
// The embedded store implements it.
type TxnStateStore interface {
	// SaveTxnRecord stores value under key, synced before it returns; nil
	// deletes it. Errors: ErrClosed, ErrStorageFull, or a storage error.
	SaveTxnRecord(ctx context.Context, key string, value []byte) error
	// TxnRecords returns every stored record by key. Errors: ErrClosed,
	// or a storage error.
	TxnRecords(ctx context.Context) (map[string][]byte, error)
}

// TxnShared is implemented by a backend whose transaction records are
// shared by several gateway nodes (disrest in cluster mode,
// docs/transactions.md "Several nodes"): each node follows every record
// (the partition side: last stable offsets, aborted ranges, produce
// verification), and a transactional id's coordinator (the owner of its
// TxnKey) alone writes its record. A record "t/<id>" is fenced by
// TxnKey(id); the others ("a/...", aborted ranges, written by a
// partition's leader) are not fenced: what they say stays true whoever
// writes it.
type TxnShared interface {
	TxnStateStore
	// WatchTxnRecords has f called with every record this node reads or
	// writes from then on (value nil for a deletion), each key's in the
	// order of its versions, never an older one after a newer; f must not
	// block or call the backend.
	WatchTxnRecords(f func(key string, value []byte))
	// CatchUpTxns reads the records up to their end as the backend has
	// them now: every save acknowledged before the call has reached the
	// watcher when it returns. Errors: ErrClosed, or the backend's.
	CatchUpTxns(ctx context.Context) error
	// TxnRecord returns key's latest record (nil when there is none)
	// once this node may write it: after the takeover of its fence key
	// (the previous owner's writes can no longer land) and a catch-up.
	// Errors: ErrNotCoordinator, ErrClosed, the backend's.
	TxnRecord(ctx context.Context, key string) ([]byte, error)
	// FreshRange is a partition's range read from the backend now, not
	// from a cache. Errors: ErrStreamNotFound, ErrPartitionNotFound, the
	// backend's.
	FreshRange(ctx context.Context, stream string, partition int32) (PartitionRange, error)
}

// AbortedRange is an aborted transaction's records in a partition: the
// producer's transactional batches from FirstOffset up to its ABORT marker
// at LastOffset (Kafka's AbortedTxn).
type AbortedRange struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// TxnView tells a store's log cleaner the transactions of a partition: its
// aborted ranges (by first offset) and its last stable offset
// (math.MaxInt64 when no transaction is open there).
type TxnView func(stream string, partition int32) (aborted []AbortedRange, lastStable int64)

// TxnCleaner is implemented by a backend whose log cleaner must know the
// transactions, as Kafka's does (the embedded store): it cleans only below
// the last stable offset, so that an undecided record supersedes nothing,
// and drops aborted transactions' records first, so that they supersede
// nothing either. The gateway sets the view once its transaction
// coordinator runs; without one the cleaner sees no transactions.
type TxnCleaner interface {
	SetTxnView(TxnView)
}

// GroupStateReader is implemented by a GroupStateStore that reads one
// group's latest state: both backends do. With several gateway nodes
// (docs/cluster.md §6) the node a group moves to loads it with GroupState
// before serving it.
type GroupStateReader interface {
	// GroupState returns the latest state saved for group, by this node
	// or another, including every save acknowledged before the call; nil
	// when there is none or it was deleted. Errors: ErrClosed, or a
	// storage error.
	GroupState(ctx context.Context, group string) ([]byte, error)
}

// StoresRecords reports whether b wants Batch.Records (implements RecordLog).
func StoresRecords(b any) bool {
	rl, ok := b.(RecordLog)
	return ok && rl.StoresRecords()
}

// AppendResult is what a synced append returns.
type AppendResult struct {
	// BaseOffset is the sequence number of the batch's first record. For a
	// duplicate (an idempotent retry) it is the original's.
	BaseOffset int64
	// LogStartOffset is the partition's first sequence number after the append.
	LogStartOffset int64
	// LogAppendTime is the append time (ms) stamped on a LogAppendTime
	// stream's batch, -1 otherwise (Kafka's Produce response field). For a
	// duplicate it is the original batch's stored max timestamp, whatever
	// the stream's timestamp type, as Kafka answers a retry.
	LogAppendTime int64
	// Duplicate is true when the batch was an idempotent retry of a batch
	// already in the log; nothing new was written.
	Duplicate bool
	// Throttle is how long the append waited for the store's rate limits
	// (disrest: pacing at DIS's partition limits and retries after
	// DIS.4303); 0 when it did not. The gateway reports it as the Produce
	// response's throttle_time_ms (KIP-219).
	Throttle time.Duration
}

// Pending is the outcome of an Append: it completes once the batch is synced
// (or has failed). Safe for concurrent use.
type Pending struct {
	done chan struct{}
	res  AppendResult
	err  error

	mu    sync.Mutex // guards after
	after []func()   // run by Complete (AfterDone)
}

// NewPending returns an incomplete Pending.
func NewPending() *Pending { return &Pending{done: make(chan struct{})} }

// Complete sets the outcome, releases waiters, then runs the AfterDone
// functions. Call it exactly once, when the backend no longer holds the
// batch (its Records).
func (p *Pending) Complete(res AppendResult, err error) {
	p.mu.Lock()
	p.res, p.err = res, err
	close(p.done)
	after := p.after
	p.after = nil
	p.mu.Unlock()
	for _, f := range after {
		f()
	}
}

// AfterDone runs f once the Pending is complete (at once when it already
// is), on the goroutine that completes it: the gateway gives back the
// decompression budget that the batch's records hold.
func (p *Pending) AfterDone(f func()) {
	p.mu.Lock()
	select {
	case <-p.done:
		p.mu.Unlock()
		f()
		return
	default:
	}
	p.after = append(p.after, f)
	p.mu.Unlock()
}

// Done is closed when the outcome is known.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Result returns the outcome; call it only after Done is closed.
func (p *Pending) Result() (AppendResult, error) { return p.res, p.err }

// Wait blocks until the outcome is known or ctx ends (then ctx.Err()).
func (p *Pending) Wait(ctx context.Context) (AppendResult, error) {
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
		return AppendResult{}, ctx.Err()
	}
}

// ReadResult is what Read returns for one partition.
type ReadResult struct {
	// Batches are whole Kafka record batches, in offset order, whose base
	// offsets are their sequence numbers. The first may start before the
	// requested offset (a read inside a stored batch returns the whole batch).
	// Callers must not modify them.
	Batches [][]byte
	// Bytes is the total length of Batches.
	Bytes int
	// Range is the partition's synced range when the read was served.
	Range PartitionRange
}

// Log is the partitioned record log. DIS: PutRecords, GetCursor + GetRecords,
// DescribeStream's sequence_number_range.
type Log interface {
	// Append enqueues one batch for (stream, partition) and returns at once,
	// or, when the store's buffer of waiting batches is full, once there is
	// room (backpressure; disrest waits at most Options.BufferWait, then
	// completes the Pending with ErrUnavailable).
	// Batches enqueued by one goroutine are applied in call order. The
	// returned Pending completes once the batch is durable (synced), with
	// ErrStreamNotFound, ErrPartitionNotFound, ErrOutOfOrderSequence,
	// ErrInvalidProducerEpoch, ErrClosed, or ErrUnavailable (a storage
	// failure: the store refuses appends until it is reopened).
	Append(stream string, partition int32, b Batch) *Pending
	// Read returns synced batches starting with the one holding offset, up to
	// maxBytes in total, but always at least one whole batch when offset <
	// Next (KIP-74: a batch is never cut). offset == Next returns no batches.
	// Errors: ErrStreamNotFound, ErrPartitionNotFound, ErrOffsetOutOfRange
	// (offset < First or offset > Next; the error's range is in the result).
	Read(ctx context.Context, stream string, partition int32, offset int64, maxBytes int) (ReadResult, error)
	// Range returns the synced [first : next] range. Errors: ErrStreamNotFound,
	// ErrPartitionNotFound.
	Range(stream string, partition int32) (PartitionRange, error)
	// BatchAtTimestamp returns the first synced batch whose max timestamp is
	// >= ts (ms): it holds the first record whose own timestamp is >= ts (every
	// earlier batch has only earlier records), which the caller finds by
	// decoding it. nil when no record is that late. Serves ListOffsets by
	// timestamp. Errors as Range.
	BatchAtTimestamp(ctx context.Context, stream string, partition int32, ts int64) ([]byte, error)
	// BatchWithMaxTimestamp returns the first synced batch holding the
	// partition's largest timestamp, nil when the partition is empty. Serves
	// ListOffsets timestamp -3 (KIP-734). Errors as Range.
	BatchWithMaxTimestamp(ctx context.Context, stream string, partition int32) ([]byte, error)
	// Changed returns a channel that is closed the next time any partition's
	// synced range changes (long-poll wake-up). Take it before reading.
	Changed() <-chan struct{}
}

// Producers allocates idempotent producer ids (Kafka InitProducerId).
type Producers interface {
	// InitProducerID returns a producer id never handed out before, from a
	// persisted allocator, with epoch 0.
	InitProducerID(ctx context.Context) (id int64, epoch int16, err error)
}

// RecordDeleter is implemented by backends that serve Kafka DeleteRecords
// (API 21): moving a partition's log start offset (PartitionRange.First)
// forward. Both backends implement it.
type RecordDeleter interface {
	// DeleteRecords moves the partition's First up to offset, durably
	// (synced, and on DIS kept in DIS so that every gateway node agrees),
	// and returns the new First (Kafka's low watermark). An offset at or
	// below First leaves it where it is (First never moves back); offset
	// may equal Next. Afterwards Read below the new First fails with
	// ErrOffsetOutOfRange and Range reports it. The embedded store may
	// drop the storage below it, as retention does; DIS keeps the records
	// until their data_duration and only hides them. The caller resolves
	// Kafka's -1 (the high watermark) and checks the cleanup policy.
	// Errors: ErrStreamNotFound, ErrPartitionNotFound, ErrOffsetOutOfRange
	// (offset < 0 or offset > Next), ErrClosed, or a storage error.
	DeleteRecords(ctx context.Context, stream string, partition int32, offset int64) (int64, error)
}

// LogDir describes the one log dir of a backend (Kafka DescribeLogDirs,
// API 35).
type LogDir struct {
	// Dir is its name: the embedded store's data directory; on DIS a name
	// that says the data is in DIS ("dis:<endpoint>/<project id>").
	Dir string
	// TotalBytes and UsableBytes are the volume's size and free space in
	// bytes, -1 when unknown (DIS).
	TotalBytes, UsableBytes int64
}

// LogDirDescriber is implemented by backends that can describe their log
// dir and partition sizes (Kafka DescribeLogDirs, API 35).
type LogDirDescriber interface {
	// LogDir returns the backend's log dir. Errors: ErrClosed.
	LogDir() (LogDir, error)
	// PartitionBytes returns the bytes the partition's records take from
	// its First on, -1 when the backend does not know (DIS). Errors:
	// ErrStreamNotFound, ErrPartitionNotFound, ErrClosed.
	PartitionBytes(stream string, partition int32) (int64, error)
}
