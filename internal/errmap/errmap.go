// Package errmap maps the errors of the layers under the gateway (the
// disbackend sentinels, the record-batch codec's, context's) to Kafka error
// codes: one ordered table, Rows, that the gateway answers every API with
// and that groupcoord answers group paths with, after rows of its own where
// Kafka's group coordinator answers otherwise. A new sentinel takes one row
// here. It does not log: callers do (mapped errors at Debug, unmapped ones
// at Error with the full chain).
package errmap

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
)

// Row maps an error, matched with errors.Is, to a Kafka error code.
type Row struct {
	Err error
	// Code is the Kafka error; nil leaves Err unmapped for the caller whose
	// rows hold it (it stops the search: UNKNOWN_SERVER_ERROR, logged).
	Code *kerr.Error
}

// Rows is ordered: the first match wins. A test asserts that every
// disbackend sentinel has a row.
var Rows = []Row{
	{disbackend.ErrStreamNotFound, kerr.UnknownTopicOrPartition},
	{disbackend.ErrPartitionNotFound, kerr.UnknownTopicOrPartition},
	{disbackend.ErrStreamExists, kerr.TopicAlreadyExists},
	{disbackend.ErrNameCollision, kerr.InvalidTopicException},
	{disbackend.ErrInvalidName, kerr.InvalidTopicException},
	{disbackend.ErrInvalidPartitionCount, kerr.InvalidPartitions},
	{disbackend.ErrInvalidConfig, kerr.InvalidConfig},
	{disbackend.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{disbackend.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{disbackend.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	{disbackend.ErrInvalidRecord, kerr.InvalidRecord},
	{disbackend.ErrRecordTooLarge, kerr.MessageTooLarge},
	{disbackend.ErrAppNotFound, kerr.GroupIDNotFound},
	// Creating an app that exists is success for the caller; reaching
	// here is a bug.
	{disbackend.ErrAppExists, kerr.UnknownServerError},
	{disbackend.ErrCredentialNotFound, kerr.ResourceNotFound},
	{disbackend.ErrNotAuthorized, kerr.TopicAuthorizationFailed},
	{disbackend.ErrAuthenticationFailed, kerr.SaslAuthenticationFailed},
	{disbackend.ErrNotLeader, kerr.NotLeaderForPartition},
	{disbackend.ErrNotCoordinator, kerr.NotCoordinator},
	{disbackend.ErrNotController, kerr.NotController},
	// Not written for lack of space: KAFKA_STORAGE_ERROR, retriable, so
	// producers retry and fail at their delivery timeout; not
	// REQUEST_TIMED_OUT ("maybe written"), on which an idempotent producer
	// may never fail a batch.
	{disbackend.ErrStorageFull, kerr.KafkaStorageError},
	{disbackend.ErrUnavailable, kerr.RequestTimedOut},
	{disbackend.ErrClosed, kerr.UnknownServerError},
	{batch.ErrCorruptMessage, kerr.CorruptMessage},
	{batch.ErrInvalidRecord, kerr.InvalidRecord},
	{batch.ErrUnsupportedCompression, kerr.UnsupportedCompressionType},
	{context.DeadlineExceeded, kerr.RequestTimedOut},
	{context.Canceled, kerr.RequestTimedOut},
}

// Lookup returns the Kafka error of the first row that err matches
// (errors.Is), looking at first (a caller's own rows, nil for none) before
// Rows. ok is false when no row matches or the row that does has no Code.
func Lookup(err error, first []Row) (code *kerr.Error, ok bool) {
	if err == nil {
		return nil, false
	}
	for _, rows := range [2][]Row{first, Rows} {
		for _, row := range rows {
			if errors.Is(err, row.Err) {
				return row.Code, row.Code != nil
			}
		}
	}
	return nil, false
}
