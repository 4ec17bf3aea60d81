package gateway

// Decompression limits (issue 11): one budget of decompressed bytes that
// every connection and request shares (Config.DecompressionBudgetBytes),
// and each topic's max.decompressed.message.bytes, the most a batch's
// records may decompress to (Config.MaxDecompressedMessageBytes for topics
// that do not set it). Produce decodes a compressed batch within both
// (refused with INVALID_RECORD past the topic's limit, as Kafka answers
// its max.decompressed.message.bytes; REQUEST_TIMED_OUT when the budget
// has no room before the request's timeout), and so does ListOffsets by
// timestamp for the one batch it decodes.

import (
	"errors"

	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
)

// decompressLimits returns the limits of decoding a batch of st: the
// topic's max.decompressed.message.bytes (or the gateway's default), at
// most batch.MaxDecompressedBytes and the whole budget, and the budget.
func (s *Server) decompressLimits(st *disbackend.Stream) batch.Limits {
	n := st.Config.MaxDecompressedMessageBytes
	if n <= 0 {
		n = s.cfg.MaxDecompressedMessageBytes
	}
	return batch.Limits{MaxBytes: min(n, batch.MaxDecompressedBytes, s.decomp.Total()), Budget: s.decomp}
}

// logDecompressRefusal logs, at most once per limitLogEvery per kind, a
// batch refused by a decompression limit: kind "max_decompressed" (the
// topic's max.decompressed.message.bytes) or "decompression_budget" (no
// room before the request's timeout). Other errors are not logged here.
func (s *Server) logDecompressRefusal(op string, st *disbackend.Stream, partition int32, compressed int, err error) {
	var kind, msg string
	var limit int64
	switch {
	case errors.Is(err, batch.ErrDecompressedTooLarge):
		kind, msg, limit = "max_decompressed", "batch refused: decompresses past max.decompressed.message.bytes", s.decompressLimits(st).MaxBytes
	case errors.Is(err, batch.ErrBudgetWait):
		kind, msg, limit = "decompression_budget", "batch refused: no room in the decompression budget before the timeout", s.decomp.Total()
	default:
		return
	}
	s.limitLog.hit(kind, msg, zap.String("op", op), zapTopic(st.TopicName), zapPartition(partition),
		zap.Int("compressed_bytes", compressed), zap.Int64("limit_bytes", limit), zapErr(err))
}

// DecompressionBudget is the budget every connection shares (for tests and
// metrics: its InUse is 0 when no request holds decompressed data).
func (s *Server) DecompressionBudget() *batch.Budget { return s.decomp }
