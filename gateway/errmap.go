package gateway

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/errmap"
)

// kafkaError maps err to a Kafka error code (0 for nil): a *kerr.Error in
// its chain as it is, else by the shared table errmap.Rows. Mapped errors are
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
	if k, ok := errmap.Lookup(err, nil); ok {
		log.Debug("request error", zap.String("kafka_error", k.Message), zap.Error(err))
		return k.Code
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
