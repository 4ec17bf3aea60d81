package disbackend

import (
	"errors"
	"fmt"
	"strings"
)

// Error sentinels. Backends wrap them with %w, adding operation, stream and
// partition; the gateway and groupcoord map them to Kafka error codes with
// one table (internal/errmap), where a new sentinel takes a row.
var (
	// ErrStreamNotFound: no such stream. Kafka UNKNOWN_TOPIC_OR_PARTITION (3).
	ErrStreamNotFound = errors.New("stream not found")
	// ErrPartitionNotFound: the stream has no such partition. Kafka
	// UNKNOWN_TOPIC_OR_PARTITION (3).
	ErrPartitionNotFound = errors.New("partition not found")
	// ErrStreamExists: the stream already exists. Kafka TOPIC_ALREADY_EXISTS (36).
	ErrStreamExists = errors.New("stream already exists")
	// ErrNameCollision: another topic maps to the same stream name (a.b beside
	// a_b). Kafka INVALID_TOPIC_EXCEPTION (17).
	ErrNameCollision = errors.New("topic name collides with an existing topic")
	// ErrInvalidName: the name cannot be a stream. Kafka INVALID_TOPIC_EXCEPTION (17).
	ErrInvalidName = errors.New("invalid name")
	// ErrInvalidPartitionCount: partition count not allowed. Kafka
	// INVALID_PARTITIONS (37).
	ErrInvalidPartitionCount = errors.New("invalid partition count")
	// ErrInvalidConfig: a config value is out of range. Kafka INVALID_CONFIG (40).
	ErrInvalidConfig = errors.New("invalid config")
	// ErrOffsetOutOfRange: a sequence number below first or above next.
	// Kafka OFFSET_OUT_OF_RANGE (1).
	ErrOffsetOutOfRange = errors.New("sequence number out of range")
	// ErrOutOfOrderSequence: an idempotent producer skipped sequence numbers.
	// Kafka OUT_OF_ORDER_SEQUENCE_NUMBER (45).
	ErrOutOfOrderSequence = errors.New("out of order producer sequence number")
	// ErrInvalidProducerEpoch: a batch from an older producer epoch. Kafka
	// INVALID_PRODUCER_EPOCH (47).
	ErrInvalidProducerEpoch = errors.New("producer epoch is older than the current one")
	// ErrInvalidRecord: the backend cannot store a record as it is (for
	// example record format native and a record that needs an envelope).
	// Kafka INVALID_RECORD (87).
	ErrInvalidRecord = errors.New("invalid record")
	// ErrRecordTooLarge: a record is larger than the backend can store as
	// one record (DIS: 1 MB of data, envelope included). Kafka
	// MESSAGE_TOO_LARGE (10).
	ErrRecordTooLarge = errors.New("record too large")
	// ErrAppNotFound: no such app (Kafka: the group has no committed
	// offsets; OffsetFetch answers -1, DeleteGroups GROUP_ID_NOT_FOUND).
	ErrAppNotFound = errors.New("app not found")
	// ErrAppExists: the app already exists. Kafka: none (creation is
	// implicit); handled by the caller.
	ErrAppExists = errors.New("app already exists")
	// ErrClosed: the backend is closed. Kafka UNKNOWN_SERVER_ERROR (-1) via
	// the default row; the gateway is shutting down.
	ErrClosed = errors.New("backend closed")
	// ErrUnavailable: the store cannot serve now; retriable. Kafka
	// NOT_LEADER_OR_FOLLOWER is wrong here, so it maps to REQUEST_TIMED_OUT (7).
	ErrUnavailable = errors.New("backend unavailable")
	// ErrStorageFull: the backend's disk is full (the embedded store below
	// storage_min_free_bytes, or a write failed with ENOSPC): the write was
	// not made, nothing of it is stored; retriable once space is freed.
	// Kafka KAFKA_STORAGE_ERROR (56), which clients retry until their
	// delivery timeout (docs/operations.md, a full disk).
	ErrStorageFull = errors.New("storage full")
)

// StorageReporter is implemented by backends whose storage can refuse
// writes while they still serve reads (the embedded store's full disk).
type StorageReporter interface {
	// StorageNotReady returns why the backend refuses writes now, for
	// /readyz (e.g. "disk full: 12 MiB free, below storage_min_free_bytes
	// 256 MiB"), "" while it accepts them.
	StorageNotReady() string
}

// RecordError is one record of a batch refused for itself (Kafka's
// ProduceResponse record_errors entry, KIP-467).
type RecordError struct {
	// Index is the record's position in its batch, from 0 (Kafka's
	// batch_index).
	Index int32
	// Message says why the record is refused (Kafka's
	// batch_index_error_message).
	Message string
}

// RecordsError is a batch refused, whole, because of some of its records
// (Kafka's RecordValidationException): none of its records is stored. Err
// is the batch's error, a sentinel of this package (or one wrapping it)
// that the error table maps to the partition's error code:
// ErrInvalidRecord (INVALID_RECORD) or ErrRecordTooLarge
// (MESSAGE_TOO_LARGE). Records are the records at fault, in batch order;
// the others of the batch are refused only for being in it. Backends and
// the gateway return it, wrapped or not; the gateway finds it with
// errors.As and answers record_errors (Produce v8+).
type RecordsError struct {
	Err     error
	Records []RecordError
}

// Error names the batch's error and the first three records at fault.
func (e *RecordsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: %d records refused", e.Err, len(e.Records))
	for i, r := range e.Records {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Records)-i)
			break
		}
		fmt.Fprintf(&b, "; record %d: %s", r.Index, r.Message)
	}
	return b.String()
}

// Unwrap returns Err.
func (e *RecordsError) Unwrap() error { return e.Err }
