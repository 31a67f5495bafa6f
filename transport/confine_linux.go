package transport

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// confineEnv carries the protected paths (JSON) from Connect to the
// supervisor, and from the supervisor to the confiner: this executable run
// once more, which restricts itself with Landlock and execs the server. The
// supervisor stays unconfined: it reads /proc to find and kill the tree.
const confineEnv = "OPENCLAW_GO_STDIO_CONFINE"

// minLandlockABI is the oldest Landlock ABI we confine with: ABI 3
// (Linux 6.2) is the first to handle truncate(2), without which a server
// could empty a protected file.
const minLandlockABI = 3

// landlockConfig is what the confiner asks of Landlock: every filesystem
// right of ABI 7 and the signal and abstract-socket scopes of ABI 6, each
// dropped where the kernel is older (above minLandlockABI). Network access
// is not restricted.
var landlockConfig = landlock.Config{HandledAccessFS: landlock.V7.HandledAccessFS, Scoped: landlock.V7.Scoped}.BestEffort()

// The rights of a grant.
const (
	readFileRights  = ll.AccessFSExecute | ll.AccessFSReadFile
	readDirRights   = readFileRights | ll.AccessFSReadDir
	writeFileRights = readFileRights | ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
)

// devNodes are the devices a confined server may open for reading and
// writing; the rest of /dev is out of reach (a block device would bypass
// every rule for root).
var devNodes = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
	"/dev/tty", "/dev/ptmx", "/dev/pts", "/dev/shm"}

func init() {
	if v := os.Getenv(confineEnv); v != "" && os.Getenv(supervisorEnv) == "" {
		os.Exit(runConfined(v, os.Args[1:]))
	}
}

// ConfinementAvailable reports whether this kernel can confine stdio
// servers: nil, or an error wrapping [ErrConfinementUnavailable] that names
// the reason (no Landlock in the kernel, Landlock disabled at boot, an ABI
// too old).
func ConfinementAvailable() error {
	abi, err := ll.LandlockGetABIVersion()
	switch {
	case errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("%w: this kernel has no Landlock (landlock_create_ruleset: ENOSYS; Linux 5.13 or later built with CONFIG_SECURITY_LANDLOCK is needed)", ErrConfinementUnavailable)
	case errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("%w: Landlock is disabled in this kernel (landlock_create_ruleset: EOPNOTSUPP; add landlock to the lsm= boot parameter)", ErrConfinementUnavailable)
	case err != nil:
		return fmt.Errorf("%w: landlock_create_ruleset: %v", ErrConfinementUnavailable, err)
	case abi < minLandlockABI:
		return fmt.Errorf("%w: this kernel's Landlock ABI is %d; confinement needs ABI %d (Linux 6.2), the first to restrict truncate", ErrConfinementUnavailable, abi, minLandlockABI)
	}
	return nil
}

// confineValue returns the value of confineEnv for c, after checking that
// the kernel can confine.
func confineValue(c *Confinement) (string, error) {
	if err := ConfinementAvailable(); err != nil {
		return "", err
	}
	protect, err := c.protectList()
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(protect)
	return string(b), err
}

// confinerArgv returns the command line that runs argv confined: this
// executable, which restricts itself and execs argv.
func confinerArgv(argv []string) []string {
	return append([]string{"openclaw-mcp-confine"}, argv...)
}

// runConfined is the confiner's main: it restricts itself to the grants of
// confineGrants and execs argv, replacing itself with the server (which
// keeps its PID, so the supervisor waits for the server itself). It
// returns only on failure, with 127; the server is never run unconfined.
func runConfined(spec string, argv []string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "openclaw confine: "+format+"\n", a...)
		return 127
	}
	os.Unsetenv(confineEnv)
	if len(argv) == 0 {
		return fail("no command")
	}
	var protect []string
	if err := json.Unmarshal([]byte(spec), &protect); err != nil {
		return fail("reading the protected paths: %v", err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fail("working folder: %v", err)
	}
	grants := confineGrants(protect, argv, cwd, os.Getenv("HOME"), os.Getenv("TMPDIR"))
	fd, flags, err := landlockConfig.NewRulesetFD(grantRules(grants)...)
	if err != nil {
		return fail("building the Landlock ruleset: %v", err)
	}
	if fd < 0 {
		return fail("this kernel has no Landlock; not starting %s unconfined", argv[0])
	}
	runtime.LockOSThread() // never unlocked: the restricted thread execs
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail("prctl(PR_SET_NO_NEW_PRIVS): %v", err)
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fail("landlock_restrict_self: %v", err)
	}
	unix.Close(fd)
	err = syscall.Exec(argv[0], argv, os.Environ())
	return fail("starting %s: %v", argv[0], err)
}

// grantRules returns the Landlock rules of grants. A granted path that no
// longer exists when the ruleset is built (a sibling folder in /tmp that
// another process removed after confineGrants listed it) is left out: it
// can only take access away, never reach a protected path.
func grantRules(grants []grant) []landlock.Rule {
	rules := make([]landlock.Rule, 0, len(grants))
	for _, g := range grants {
		rules = append(rules, landlock.PathAccess(g.rights(), g.path).IgnoreIfMissing())
	}
	return rules
}

// grant is one Landlock rule: path (resolved, no symbolic link) and what
// may be done beneath it.
type grant struct {
	path  string
	write bool
	dir   bool
}

func (g grant) rights() landlock.AccessFSSet {
	switch {
	case g.write && g.dir:
		return landlockConfig.HandledAccessFS
	case g.write:
		return writeFileRights
	case g.dir:
		return readDirRights
	}
	return readFileRights
}

// confineGrants returns the allow-list that leaves protect out: read and
// execute everywhere but /dev, read and write in the working folder, HOME,
// the temporary folders, the folders that args name and a few devices.
// A granted folder with a protected path beneath it is not granted itself:
// each of its entries is, but the one that leads to the protected path
// (which is carved the same way), so a protected path is reached by no
// rule at all. Paths are compared once symbolic links are resolved, as
// Landlock sees them.
func confineGrants(protect, argv []string, cwd, home, tmpdir string) []grant {
	b := &grantBuilder{seen: map[grant]bool{}}
	for _, p := range protect {
		b.protect = append(b.protect, filepath.Clean(p), resolveExisting(p))
	}
	readExclude := append(slices.Clone(b.protect), "/dev")
	b.carve("/", false, readExclude)
	writable := append([]string{cwd, home, os.TempDir(), "/tmp", "/var/tmp", tmpdir}, devNodes...)
	for _, a := range argv[1:] {
		if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "-") {
			a = v
		}
		if a == "" {
			continue
		}
		if !filepath.IsAbs(a) {
			a = filepath.Join(cwd, a)
		}
		if st, err := os.Stat(a); err == nil && st.IsDir() {
			writable = append(writable, a)
		}
	}
	for _, w := range writable {
		if w != "" {
			b.carve(w, true, b.protect)
		}
	}
	return b.out
}

type grantBuilder struct {
	protect []string
	seen    map[grant]bool
	out     []grant
}

// carve grants p (read, or read and write) but the excluded paths.
func (b *grantBuilder) carve(p string, write bool, exclude []string) {
	rp, err := filepath.EvalSymlinks(p)
	if err != nil {
		return // missing: nothing to grant
	}
	st, err := os.Stat(rp)
	if err != nil {
		return
	}
	g := grant{path: rp, write: write, dir: st.IsDir()}
	if b.seen[g] {
		return
	}
	b.seen[g] = true
	for _, e := range exclude {
		if within(rp, e) {
			return
		}
	}
	if g.dir && slices.ContainsFunc(exclude, func(e string) bool { return within(e, rp) }) {
		entries, err := os.ReadDir(rp)
		if err != nil {
			return
		}
		for _, e := range entries {
			b.carve(filepath.Join(rp, e.Name()), write, exclude)
		}
		return
	}
	b.out = append(b.out, g)
}

// within reports whether p is dir or beneath it.
func within(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// resolveExisting resolves the symbolic links of the longest existing
// prefix of the absolute path p and appends the rest.
func resolveExisting(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(p, rest)
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}
