package gateway

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
)

// errRow maps an error (matched with errors.Is) to a Kafka error code.
type errRow struct {
	err  error
	kerr *kerr.Error
}

// errTable is ordered: the first match wins. A test asserts that every
// disbackend sentinel has a row.
var errTable = []errRow{
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
	{disbackend.ErrUnavailable, kerr.RequestTimedOut},
	{disbackend.ErrClosed, kerr.UnknownServerError},
	{batch.ErrCorruptMessage, kerr.CorruptMessage},
	{batch.ErrInvalidRecord, kerr.InvalidRecord},
	{batch.ErrUnsupportedCompression, kerr.UnsupportedCompressionType},
	{context.DeadlineExceeded, kerr.RequestTimedOut},
	{context.Canceled, kerr.RequestTimedOut},
}

// kafkaError maps err to a Kafka error code (0 for nil). Mapped errors are
// logged at Debug, unmapped ones at Error with the full chain; they become
// UNKNOWN_SERVER_ERROR.
func kafkaError(log *zap.Logger, err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	for _, row := range errTable {
		if errors.Is(err, row.err) {
			log.Debug("request error", zap.String("kafka_error", row.kerr.Message), zap.Error(err))
			return row.kerr.Code
		}
	}
	log.Error("unmapped error", zap.Error(err))
	return kerr.UnknownServerError.Code
}

// errMessage returns a pointer to err's text for responses' ErrorMessage
// fields (nil for nil).
func errMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

// errUnknownTopic is a topic the gateway does not know (Kafka
// UNKNOWN_TOPIC_OR_PARTITION).
var errUnknownTopic = disbackend.ErrStreamNotFound
