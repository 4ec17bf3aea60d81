package gateway_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine outlives the tests: every
// connection goroutine must end at Shutdown.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
