//go:build !unix

package mcprl

import (
	"os"
	"os/exec"
)

// Without process groups, the server itself is signalled; children it
// starts are its own to stop.
var (
	terminate = os.Kill
	kill      = os.Kill
)

func newProcessGroup(*exec.Cmd) {}

func signalGroup(cmd *exec.Cmd, sig os.Signal) {
	if cmd.Process != nil {
		cmd.Process.Signal(sig)
	}
}
