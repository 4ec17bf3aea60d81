package groupcoord

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/disgw/disgw/disbackend"
)

// TestBackendCode: the Kafka code group paths answer for each backend
// error they meet, and which are logged: offsets outside the partition's
// range at Info, an unmapped error (an app missing where none was
// expected) at Error.
func TestBackendCode(t *testing.T) {
	const none = zapcore.DebugLevel - 1
	cases := []struct {
		err  error
		code int16
		log  zapcore.Level // the level logged at, or none
	}{
		{nil, 0, none},
		{errClosed, kerr.NotCoordinator.Code, none},
		{disbackend.ErrClosed, kerr.NotCoordinator.Code, none},
		{disbackend.ErrStreamNotFound, kerr.UnknownTopicOrPartition.Code, none},
		{disbackend.ErrPartitionNotFound, kerr.UnknownTopicOrPartition.Code, none},
		{disbackend.ErrNotAuthorized, kerr.TopicAuthorizationFailed.Code, none},
		{disbackend.ErrAuthenticationFailed, kerr.SaslAuthenticationFailed.Code, none},
		{disbackend.ErrInvalidConfig, kerr.OffsetMetadataTooLarge.Code, none},
		{disbackend.ErrOffsetOutOfRange, kerr.OffsetOutOfRange.Code, zapcore.InfoLevel},
		{disbackend.ErrNameCollision, kerr.InvalidGroupID.Code, none},
		{disbackend.ErrInvalidName, kerr.InvalidGroupID.Code, none},
		{errGroupCollision, kerr.InvalidGroupID.Code, none},
		{disbackend.ErrUnavailable, kerr.CoordinatorNotAvailable.Code, none},
		{context.DeadlineExceeded, kerr.CoordinatorNotAvailable.Code, none},
		{context.Canceled, kerr.CoordinatorNotAvailable.Code, none},
		{errNoApps, kerr.CoordinatorNotAvailable.Code, none},
		{disbackend.ErrAppNotFound, kerr.UnknownServerError.Code, zapcore.ErrorLevel},
	}
	for _, tc := range cases {
		name := "nil"
		if tc.err != nil {
			name = tc.err.Error()
		}
		t.Run(name, func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)
			c := &Coordinator{log: zap.New(core)}
			err := tc.err
			if err != nil {
				err = fmt.Errorf("commit checkpoints of app g: %w", err)
			}
			if got := c.backendCode(err); got != tc.code {
				t.Errorf("code %d, want %d", got, tc.code)
			}
			var levels []zapcore.Level
			for _, e := range logs.All() {
				levels = append(levels, e.Level)
			}
			switch {
			case tc.log == none && len(levels) != 0:
				t.Errorf("logged at %v, want no log", levels)
			case tc.log != none && (len(levels) != 1 || levels[0] != tc.log):
				t.Errorf("logged at %v, want once at %v", levels, tc.log)
			}
		})
	}
}
