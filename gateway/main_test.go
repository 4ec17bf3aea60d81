package gateway_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine outlives the tests: every
// connection goroutine must end at Shutdown.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// sarama's metrics library starts one process-wide ticker the first
		// time a meter is used and never stops it; it is not ours.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}
