package transport

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openclaw-go/openclaw/internal/procfs"
)

// The supervisor is this executable run again with supervisorEnv set: the
// package's init function sees the variable and becomes the supervisor
// before main runs. argv after argv[0] is the server's command line.
const (
	supervisorEnv      = "OPENCLAW_GO_STDIO_SUPERVISOR"
	supervisorGraceEnv = "OPENCLAW_GO_STDIO_SUPERVISOR_GRACE_MS"
	// supervisorOrigGORACEEnv carries the server's own GORACE value past
	// the supervisor of a -race build (see supervisorRaceEnv).
	supervisorOrigGORACEEnv = "OPENCLAW_GO_STDIO_SUPERVISOR_GORACE"
)

var sigTerm = syscall.SIGTERM

func init() {
	if os.Getenv(supervisorEnv) != "1" {
		return
	}
	os.Exit(runSupervisor(os.Args[1:]))
}

// supervisedCommand returns the command that runs path with args under the
// supervisor, in a process group of its own, and the lifeline: the write
// end of a pipe whose read end the supervisor holds as fd 3. Only our
// process holds the lifeline (it is close-on-exec), so the supervisor reads
// EOF when we close it or when our process dies in any way, even by
// SIGKILL. (A parent-death signal would be tied to the OS thread that
// forked, which may exit while our process lives.) A non-nil confine runs
// the server confined (confineGrants); an error then says why the kernel
// cannot.
func supervisedCommand(path string, args, env []string, grace time.Duration, confine *Confinement) (*exec.Cmd, *os.File, error) {
	confined := ""
	if confine != nil {
		v, err := confineValue(confine)
		if err != nil {
			return nil, nil, err
		}
		confined = v
	}
	// /proc/self/exe still runs our binary after it was replaced or
	// deleted on disk (an upgrade while we run).
	self := "/proc/self/exe"
	if _, err := os.Stat(self); err != nil {
		if self, err = os.Executable(); err != nil {
			return nil, nil, fmt.Errorf("finding our executable to run the supervisor: %w", err)
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("lifeline pipe: %w", err)
	}
	cmd := exec.Command(self, append([]string{path}, args...)...)
	cmd.Args[0] = "openclaw-mcp-supervisor" // what ps shows
	cmd.Env = append(append([]string(nil), env...),
		supervisorEnv+"=1",
		supervisorGraceEnv+"="+strconv.FormatInt(grace.Milliseconds(), 10))
	if confined != "" {
		cmd.Env = append(cmd.Env, confineEnv+"="+confined)
	}
	if raceBuild {
		// The server gets the environment as given: the supervisor puts
		// GORACE back (supervisorOrigGORACEEnv) before it starts it.
		orig, had := "", false
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "GORACE="); ok {
				orig, had = v, true
			}
		}
		cmd.Env = append(cmd.Env, supervisorRaceEnv(env))
		if had {
			cmd.Env = append(cmd.Env, supervisorOrigGORACEEnv+"="+orig)
		}
	}
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, w, nil
}

// supervisorRaceEnv returns the GORACE setting of a -race build's
// supervisor: the race runtime sleeps 1 s at exit by default
// (atexit_sleep_ms), which every stdio Close would wait for. Options the
// environment already sets are kept.
func supervisorRaceEnv(env []string) string {
	v := "atexit_sleep_ms=0"
	for _, kv := range env {
		if old, ok := strings.CutPrefix(kv, "GORACE="); ok && old != "" {
			v = old + " " + v
		}
	}
	return "GORACE=" + v
}

func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }

// runSupervisor is the supervisor's main. It becomes a child subreaper and
// non-dumpable, starts the server with our stdin, stdout and stderr (no
// copying), and reaps everything. On SIGTERM, SIGINT or SIGHUP, or EOF on the lifeline,
// it sends SIGTERM to every descendant, then SIGKILL after the grace period
// or a second request; once the server has exited, every descendant left
// gets SIGKILL. It exits with the server's status once it has no child left.
// The process exits when runSupervisor returns, which ends its goroutines.
func runSupervisor(argv []string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "openclaw supervisor: "+format+"\n", a...)
		return 127
	}
	if len(argv) == 0 {
		return fail("no command")
	}
	grace := 5 * time.Second
	if ms, err := strconv.Atoi(os.Getenv(supervisorGraceEnv)); err == nil && ms > 0 {
		grace = time.Duration(ms) * time.Millisecond
	}
	os.Unsetenv(supervisorEnv)
	os.Unsetenv(supervisorGraceEnv)
	if raceBuild {
		if orig, had := os.LookupEnv(supervisorOrigGORACEEnv); had {
			os.Setenv("GORACE", orig)
		} else {
			os.Unsetenv("GORACE")
		}
		os.Unsetenv(supervisorOrigGORACEEnv)
	}
	// A confined server is started by the confiner, which restricts itself
	// and execs the server in the same process: the supervisor itself stays
	// unconfined, since it reads /proc to find the tree.
	path, args, env := argv[0], argv, os.Environ()
	if spec, ok := os.LookupEnv(confineEnv); ok {
		os.Unsetenv(confineEnv)
		path, args = "/proc/self/exe", confinerArgv(argv)
		env = append(os.Environ(), confineEnv+"="+spec)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail("prctl(PR_SET_CHILD_SUBREAPER): %v", err)
	}
	// Non-dumpable, as the openclaw process is: the server (dumpable again
	// after its exec) and other processes of the user cannot read our
	// environ or memory.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fail("prctl(PR_SET_DUMPABLE): %v", err)
	}
	lifeline := os.NewFile(3, "lifeline")
	syscall.CloseOnExec(3)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	signal.Ignore(syscall.SIGPIPE)
	// stop receives one value per request to end: a signal, or EOF on the
	// lifeline (our parent closed it or died).
	stop := make(chan struct{}, 8)
	go func() {
		for range sigs {
			stop <- struct{}{}
		}
	}()
	go func() {
		_, _ = io.Copy(io.Discard, lifeline)
		stop <- struct{}{}
	}()

	proc, err := os.StartProcess(path, args, &os.ProcAttr{
		Env:   env,
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return fail("starting %s: %v", argv[0], err)
	}
	// Hold no end of the server's stdin or stdout: EOF must follow the
	// server, not us.
	if devnull, err := os.Open(os.DevNull); err == nil {
		_ = syscall.Dup3(int(devnull.Fd()), 0, 0)
		_ = syscall.Dup3(int(devnull.Fd()), 1, 0)
		devnull.Close()
	}

	var mu sync.Mutex
	killing := false // once set, every reap rescans and SIGKILLs
	killAll := func() {
		mu.Lock()
		killing = true
		mu.Unlock()
		signalDescendants(syscall.SIGKILL)
	}
	go func() {
		<-stop
		signalDescendants(syscall.SIGTERM)
		select {
		case <-stop:
		case <-time.After(grace):
		}
		killAll()
	}()

	code := 0
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil { // ECHILD: nothing left
			return code
		}
		if pid == proc.Pid {
			switch {
			case ws.Exited():
				code = ws.ExitStatus()
			case ws.Signaled():
				code = 128 + int(ws.Signal())
			}
			killAll()
			continue
		}
		mu.Lock()
		k := killing
		mu.Unlock()
		if k {
			signalDescendants(syscall.SIGKILL)
		}
	}
}

// signalDescendants sends sig to every process below us, found from the
// parent links in /proc. Reparented orphans are our children (we are a
// subreaper), so they are found as well.
func signalDescendants(sig syscall.Signal) {
	self := os.Getpid()
	for _, pid := range procfs.Descendants(self) {
		_ = syscall.Kill(pid, sig)
	}
}
