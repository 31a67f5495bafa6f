//go:build unix && !linux

package transport

import (
	"os"
	"os/exec"
	"syscall"
	"time"
)

var sigTerm = syscall.SIGTERM

// supervisedCommand, outside Linux, runs the server directly in a process
// group of its own: there is no parent-death signal or child subreaper, so
// a grandchild that calls setsid, or our own death by SIGKILL, can leave
// processes behind. Confinement (Landlock) is Linux only: a non-nil
// confine is an error.
func supervisedCommand(path string, args, env []string, _ time.Duration, confine *Confinement) (*exec.Cmd, *os.File, error) {
	if confine != nil {
		return nil, nil, ConfinementAvailable()
	}
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, nil, nil
}

func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }
