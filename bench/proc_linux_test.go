package bench

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill cmd when this process dies, so a test
// binary killed by go test's -timeout leaves no Kafka JVM behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
