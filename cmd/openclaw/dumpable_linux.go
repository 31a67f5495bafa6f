package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// hideFromSameUser makes this process non-dumpable (PR_SET_DUMPABLE 0):
// other processes of the same user, the stdio MCP servers we start among
// them, can then no longer read our /proc/<pid>/environ (where the gateway
// and API tokens are), our memory, or attach a debugger; only root can.
// The servers themselves are exec'd and so dumpable again, which is right:
// what they hold is theirs. A failure is reported on stderr and the process
// goes on.
func hideFromSameUser() {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "openclaw: warning: prctl(PR_SET_DUMPABLE, 0): %v; processes of this user can read this process's environment\n", err)
	}
}
