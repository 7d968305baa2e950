package bigquery

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the emulator exit when the test binary does, also
// when a test timeout panics and TestMain never gets to stop it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
