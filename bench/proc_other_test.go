//go:build !linux

package bench

import "os/exec"

// dieWithParent does nothing here: a test binary killed by -timeout may
// leave the Kafka JVM running.
func dieWithParent(*exec.Cmd) {}
