//go:build unix

package bench

import (
	"syscall"
	"time"
)

// cpuTime is the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// settle flushes the machine's dirty pages, so one target's run does not
// pay for the previous run's writeback in its fsyncs.
func settle() { syscall.Sync() }
