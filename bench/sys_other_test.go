//go:build !unix

package bench

import "time"

// cpuTime is unknown here: the cores columns read 0.
func cpuTime() time.Duration { return 0 }

// settle does nothing here.
func settle() {}
