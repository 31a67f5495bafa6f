// Package engine loads the configured policy modules and keeps them
// current: it is the one loader that `openclaw mcp serve` (and later
// `mcp proxy` and the embedded runtime) share.
//
// [Load] reads the policy file (config.PolicyFile, `--policy-config`) and
// the extra module sources (`--policy`), loads each module through
// policies/wasmpolicy (sandbox, sha256 pin, ABI version, exports, imports,
// configure), and builds the before_tool_call [policies.Chain] with the
// decision audit log. With no module configured it loads builtin:rules with
// its default ruleset (allow every call, audit it), as docs/policy-file.md says.
// Any module that cannot be loaded refuses the whole start, with an error
// naming the module and the reason.
//
// The engine swaps modules without a restart. [Engine.Reload] (called on
// `openclaw policy reload`, SIGHUP, or by [Engine.Watch] when a module file
// or the policy file changes) loads what changed into a new policy set and
// replaces the current set atomically: a call sees either the old set or the
// new one, never a mix. Calls in flight finish on the modules they started
// with; an old module is closed once its last call returns. A reload that
// fails (a module that does not compile, a wrong pin, a refused config, a
// policy file that does not parse) changes nothing, and says why.
//
// One engine serves all three hook points: [Engine.BeforeToolCall] (it is
// a [policies.Enforcer]), [Engine.SanitizeToolNames] and
// [Engine.DecideApproval] run the chains of the policies package over the
// modules that serve each hook (a module's `hooks`, by default every hook
// it exports). Surfaces (bridge, runtime) never import this package: they
// take the policies interfaces, and cmd/openclaw hands them an *Engine, so
// they stay free of wasmhost.
//
// The package also holds what the `openclaw policy` tools run: [Inspect]
// (a module's shape, read without compiling it, plus its ABI version and a
// load check), [ParseCases] and [RunCase] (expected decisions, JSON Lines)
// and [Bench] (per-hook latency percentiles).
//
// Usage sketch:
//
//	eng, err := engine.Load(ctx, &engine.Options{ConfigFile: "policy.json"})
//	if err != nil { … refuse to start … }
//	defer eng.Close(ctx)
//	go eng.Watch(ctx) // swap on file changes until ctx ends
//	d := eng.BeforeToolCall(ctx, call) // eng is a policies.Enforcer
package engine

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/policies/decisionlog"
	"github.com/openclaw-go/openclaw/policies/opa"
	"github.com/openclaw-go/openclaw/policies/ratelimit"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// Module is a loaded policy module as the engine holds it: a module of the
// "openclaw-policy v1" ABI (*wasmpolicy.Module) or an OPA-compiled Rego
// module (*opa.Module), which offer the same methods.
type Module interface {
	policies.BeforeToolCallHook
	policies.SanitizeToolNamesHook
	policies.DecideApprovalHook
	// Has reports whether the module serves hook h; Hooks lists them in
	// ABI order.
	Has(h policies.Hook) bool
	Hooks() []policies.Hook
	// CallHook calls hook h with a JSON input and returns its raw output.
	CallHook(ctx context.Context, h policies.Hook, input []byte) ([]byte, error)
	// Close releases the module; calls in flight may finish until ctx is
	// done.
	Close(ctx context.Context) error
}

var (
	_ Module = (*wasmpolicy.Module)(nil)
	_ Module = (*opa.Module)(nil)
)

// ErrClosed is returned (and reported in the block reason of
// [Engine.BeforeToolCall]) after [Engine.Close].
var ErrClosed = errors.New("engine: policy engine is closed")

// Options configure [Load]. Options are copied; a nil *Options means all
// defaults: no policy file, no extra modules, so the built-in rules module
// with its allow-all default ruleset.
type Options struct {
	// ConfigFile is the policy file (config.PolicyFile, JSON) listing the
	// modules in order; "" means none. Reload reads it again.
	ConfigFile string
	// BundleDigest is the digest (sha256:…) of the signed policy bundle
	// ConfigFile comes from, "" when it is a plain file; the audit records
	// of the set carry it as bundle_digest. ReloadFrom replaces it.
	BundleDigest string
	// Pins, when non-nil, are the sha256 digests (64 hex digits) of the
	// files the set is read from, by path: ConfigFile and every module
	// source that is not a built-in (a verified bundle's files,
	// bundle.Accepted.Pins). The bytes read are the bytes checked: a file
	// missing from Pins, or rewritten since its digest was taken, is
	// refused (a module's pin is its policy-file sha256, which must agree).
	// ReloadFrom replaces it.
	Pins map[string]string
	// LimitStore keeps the counters of the policy file's rate_limits,
	// across reloads; nil means an in-process ratelimit.MemoryStore.
	LimitStore ratelimit.Store
	// Files are extra module sources appended after the policy file's
	// modules (the repeatable `--policy` flag): a .wasm path or
	// "builtin:NAME", in enforce mode, serving every hook they export.
	Files []string
	// AuditLog overrides the policy file's audit_log: "-" is stderr; ""
	// means the policy file's value, or else
	// <state dir>/openclaw-go/policy-audit.jsonl. It is opened once by Load;
	// a reload does not move it.
	AuditLog string
	// DecisionLog overrides the policy file's decision_log (the file that
	// names a signed bundle keeps it; the bundle's own policy file has
	// none); nil means the policy file's. Like AuditLog it is read once by
	// Load.
	DecisionLog *config.PolicyDecisionLog
	// Audit, when set, receives the audit records instead of the log
	// named by AuditLog (which is then not opened); for embedders and tests.
	Audit policies.AuditSink
	// AuditTap, when set, also receives every audit record, after the
	// audit log (or Audit) has it: for metrics, e.g. decisions counted by
	// module. It must not block.
	AuditTap policies.AuditSink
	// Logger receives the outcome of every reload (modules swapped, or the
	// reason a reload was refused) and, unless Host.Logger is set, the
	// modules' own log lines (openclaw_policy.log, Rego print) with the
	// module's name, rate-limited per module (wasmhost.GuestLog). nil
	// means a text logger on os.Stderr.
	Logger *slog.Logger
	// Host holds sandbox settings applied to every module (pool size,
	// deadlines, guest logger: nil means Logger). A module's timeout_ms and
	// memory_limit_pages override CallTimeout and MemoryLimitPages; zero
	// fields are wasmhost's defaults. Init and ErrorExport must be zero.
	Host wasmhost.Options
	// DefaultModules are the module sources loaded when neither
	// ConfigFile nor Files name any module, each with its default config.
	// nil means builtin:rules alone, whose default ruleset allows every
	// call and audits it (docs/policy-file.md). A surface that builds catalogs
	// adds "builtin:sanitizer" here.
	DefaultModules []string
	// ProgressAfter is how long loading one module (compiling it, mostly)
	// may take before the engine logs, at info level, that it is compiling
	// that module, and then that it is done: a large Go guest takes
	// seconds on a loaded machine, at start and on a hot swap. 0 means
	// 500 ms.
	ProgressAfter time.Duration
	// NamingModule is the source of a sanitize_tool_names module (such as
	// "builtin:sanitizer") added, with its default config, to every loaded
	// set in which no module names tools in enforce mode, so that a policy
	// file or --policy that lists only other hooks keeps catalogs named.
	// "" adds none: such a set refuses to name a catalog
	// (policies.ErrNoSanitizer). A surface that builds catalogs sets it.
	NamingModule string
	// OnReload, when set, is called after every reload attempt (from
	// Reload or Watch) with its result or error, while reloads are held
	// off: a process uses it to publish which policies are active. It
	// must not call Reload or Close.
	OnReload func(res ReloadResult, err error)
	// WatchDebounce is how long Watch waits after the last file event
	// before it reloads (writers often change a file in several steps).
	// 0 means 200 ms.
	WatchDebounce time.Duration
}

// ModuleInfo describes one loaded module.
type ModuleInfo struct {
	// Name is the module's configured name, used in reasons and audit
	// records.
	Name string `json:"name"`
	// Source is "builtin:NAME" or the path of the module file.
	Source string `json:"source"`
	// SHA256 is the hex digest of the module's bytes.
	SHA256 string `json:"sha256"`
	// Size is the module's size in bytes.
	Size int `json:"size"`
	// Mode is enforce or audit.
	Mode policies.Mode `json:"mode"`
	// Hooks are the hook points the module serves, in ABI order.
	Hooks []policies.Hook `json:"hooks"`
	// Default is true for the built-in rules module loaded because no
	// module was configured.
	Default bool `json:"default,omitempty"`
	// LoadedAt is when this version of the module was loaded.
	LoadedAt time.Time `json:"loaded_at"`
}

// String is the one-line summary printed at start:
// `rules (builtin:rules, sha256 3f2a…, enforce, hooks before_tool_call)`.
func (m ModuleInfo) String() string {
	hooks := make([]string, len(m.Hooks))
	for i, h := range m.Hooks {
		hooks[i] = string(h)
	}
	s := fmt.Sprintf("%s (%s, sha256 %.12s…, %s, hooks %s)", m.Name, m.Source, m.SHA256, m.Mode, strings.Join(hooks, " "))
	if m.Default {
		switch m.Source {
		case "builtin:rules":
			s += ": default ruleset, allows every call and audits it"
		case "builtin:sanitizer":
			s += ": OpenClaw's tool names"
		case "builtin:approvals":
			s += ": default policy, asks a human"
		default:
			s += ": loaded by default"
		}
	}
	return s
}

// ReloadResult says what a successful [Engine.Reload] changed. Each list
// holds module names.
type ReloadResult struct {
	// Swapped are modules whose bytes, config or limits changed: a new
	// version serves new calls.
	Swapped []string `json:"swapped,omitempty"`
	// Added and Removed are modules that entered or left the policy file.
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
	// Reconfigured are unchanged modules whose mode or position changed:
	// they keep their instances in a new chain.
	Reconfigured []string `json:"reconfigured,omitempty"`
	// Unchanged modules keep serving with the instances they had.
	Unchanged []string `json:"unchanged,omitempty"`
}

// Changed reports whether the reload changed the active policy set.
func (r ReloadResult) Changed() bool {
	return len(r.Swapped)+len(r.Added)+len(r.Removed)+len(r.Reconfigured) > 0
}

// String summarizes r: "swapped p; unchanged rules".
func (r ReloadResult) String() string {
	var parts []string
	for _, p := range []struct {
		what  string
		names []string
	}{{"swapped", r.Swapped}, {"added", r.Added}, {"removed", r.Removed}, {"reconfigured", r.Reconfigured}, {"unchanged", r.Unchanged}} {
		if len(p.names) > 0 {
			parts = append(parts, p.what+" "+strings.Join(p.names, ", "))
		}
	}
	if len(parts) == 0 {
		return "no modules"
	}
	return strings.Join(parts, "; ")
}

// Engine is a loaded, swappable policy set. It implements
// [policies.Enforcer] and is safe for concurrent use.
type Engine struct {
	opts   Options
	logger *slog.Logger
	audit  policies.AuditSink

	auditCloser io.Closer
	auditDst    string
	// auditErr is the audit log's first write error; with
	// auditFailClosed (the policy file's audit_fail_closed) every
	// before_tool_call decision is a block once it is set.
	auditErr        atomic.Pointer[auditFailure]
	auditFailClosed bool
	shipper         *decisionlog.Shipper // the policy file's decision_log; nil without

	cur atomic.Pointer[set] // nil once closed

	limiter atomic.Pointer[ratelimit.Limiter] // the policy file's rate_limits

	memory *policies.ApprovalMemory // allow-always grants; replaced under mu

	mu sync.Mutex // serializes Load's build, Reload and Close

	// live counts the sets not yet released (Add under mu); a set's
	// release drops its modules before Done, so once live is zero every
	// module closing goroutine has been counted in retired.
	live    sync.WaitGroup
	retired sync.WaitGroup // goroutines closing retired modules
}

// set is one immutable policy set: its members and the chain of each hook
// over them. refs counts the calls using it, plus one while it is current.
type set struct {
	members   []member
	chain     *policies.Chain
	sanitize  *policies.SanitizeChain
	approvals *policies.ApprovalChain
	refs      atomic.Int64
}

// member is a generation as configured in one set: the mode belongs to the
// set, so a mode change needs a new chain but no new load.
type member struct {
	g    *generation
	info ModuleInfo
}

// generation is one loaded version of one module. A generation may belong
// to several sets (a reload keeps an unchanged module); refs counts them.
type generation struct {
	info ModuleInfo
	key  string // what must be equal for a reload to keep this generation
	mod  Module
	refs atomic.Int64
}

// Load loads every configured module and builds the policy set. It fails,
// naming the module and the reason, when a policy file does not parse, a
// source cannot be read, a sha256 pin does not match, a module does not
// speak ABI v1, lacks an export, mistypes one, imports something the host
// does not provide, refuses its config in configure, or does not export a
// hook its `hooks` list names.
func Load(ctx context.Context, opts *Options) (_ *Engine, err error) {
	e := &Engine{}
	if opts != nil {
		e.opts = *opts
	}
	e.opts.Files = slices.Clone(e.opts.Files)
	if e.opts.WatchDebounce <= 0 {
		e.opts.WatchDebounce = 200 * time.Millisecond
	}
	e.logger = e.opts.Logger
	if e.logger == nil {
		e.logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if e.opts.Host.Logger == nil {
		e.opts.Host.Logger = e.logger
	}
	if e.opts.LimitStore == nil {
		e.opts.LimitStore = ratelimit.NewMemoryStore()
	}
	pf, defaulted, err := e.specs()
	if err != nil {
		return nil, err
	}
	s, _, err := e.build(ctx, pf.Modules, defaulted, nil)
	if err != nil {
		e.live.Wait()
		e.retired.Wait()
		return nil, err
	}
	defer func() {
		if err != nil {
			s.unref(ctx, e)
			e.live.Wait()
			e.retired.Wait()
		}
	}()
	if e.opts.Audit != nil {
		e.audit, e.auditDst = e.opts.Audit, "(embedder's sink)"
	} else {
		dst := e.opts.AuditLog
		if dst == "" {
			dst = pf.AuditLog
		}
		w, closer, where, err := openAuditLog(dst)
		if err != nil {
			return nil, err
		}
		logger := e.logger
		failClosed := pf.AuditFailClosed
		e.audit = policies.NewAuditLogWith(w, &policies.AuditLogOptions{OnError: func(err error) {
			e.auditErr.Store(&auditFailure{where: where, err: err})
			if failClosed {
				logger.Error("openclaw: the decision audit log cannot be written: every tool call is refused (audit_fail_closed)", "audit_log", where, "err", err)
				return
			}
			logger.Error("openclaw: the decision audit log cannot be written: decisions are NOT being recorded", "audit_log", where, "err", err)
		}})
		e.auditCloser, e.auditDst = closer, where
		e.auditFailClosed = failClosed
	}
	sinks := auditTee{e.audit}
	dl := pf.DecisionLog
	if e.opts.DecisionLog != nil {
		dl = e.opts.DecisionLog
	}
	if dl != nil {
		if e.shipper, err = newShipper(dl, e.logger); err != nil {
			if e.auditCloser != nil {
				_ = e.auditCloser.Close()
			}
			return nil, err
		}
		sinks = append(sinks, e.shipper)
	}
	if e.opts.AuditTap != nil {
		sinks = append(sinks, e.opts.AuditTap)
	}
	e.audit = stamped{sinks}
	e.memory = policies.NewApprovalMemory(nil)
	lim, err := ratelimit.New(pf.RateLimits, e.opts.LimitStore, e.audit)
	if err != nil {
		return nil, err
	}
	e.limiter.Store(lim)
	e.chains(s, nil)
	e.cur.Store(s)
	return e, nil
}

// auditTee records to each sink in order: the audit log (or the
// embedder's sink) first, then the decision log shipper, then the tap.
type auditTee []policies.AuditSink

func (t auditTee) Record(r policies.AuditRecord) {
	for _, sink := range t {
		sink.Record(r)
	}
}

// stamped gives every record a decision ID (policies.NextDecisionID)
// before next has it, so that the local log and the shipped decision log
// name it alike.
type stamped struct{ next policies.AuditSink }

func (st stamped) Record(r policies.AuditRecord) {
	if r.DecisionID == "" {
		r.DecisionID = policies.NextDecisionID()
	}
	st.next.Record(r)
}

// setAudit names, in the records of a set's chains, the sha256 of the
// module that decided and the digest of the bundle the set came from.
type setAudit struct {
	next   policies.AuditSink
	bundle string            // the set's Options.BundleDigest
	sha256 map[string]string // by module name
}

func (sa setAudit) Record(r policies.AuditRecord) {
	if r.ModuleSHA256 == "" {
		r.ModuleSHA256 = sa.sha256[r.Module]
	}
	if r.BundleDigest == "" {
		r.BundleDigest = sa.bundle
	}
	sa.next.Record(r)
}

// auditFailure is the first write error of the audit log.
type auditFailure struct {
	where string
	err   error
}

// specs reads the policy file and resolves the configured modules in
// pf.Modules: the policy file's, then Files; with none, builtin:rules with
// its default ruleset (defaulted).
func (e *Engine) specs() (pf *config.PolicyFile, defaulted bool, err error) {
	pf = &config.PolicyFile{}
	if e.opts.ConfigFile != "" {
		sum, ok := e.opts.Pins[e.opts.ConfigFile]
		if e.opts.Pins != nil && !ok {
			return nil, false, fmt.Errorf("policy config %s: no sha256 pin for it", e.opts.ConfigFile)
		}
		if pf, err = config.LoadPolicyFileSHA256(e.opts.ConfigFile, sum); err != nil {
			return nil, false, err
		}
	}
	for _, f := range e.opts.Files {
		m := config.PolicyModule{Source: f, Name: config.DefaultModuleName(f)}
		for _, prev := range pf.Modules {
			if prev.Name == m.Name {
				return nil, false, fmt.Errorf("--policy %s: a module named %q is already configured", f, m.Name)
			}
		}
		pf.Modules = append(pf.Modules, m)
	}
	if e.opts.Pins != nil {
		for i := range pf.Modules {
			m := &pf.Modules[i]
			if builtin.IsRef(m.Source) {
				continue
			}
			sum, ok := e.opts.Pins[m.Source]
			switch {
			case !ok:
				return nil, false, fmt.Errorf("policy module %q: %s has no sha256 pin", m.Name, m.Source)
			case m.SHA256 != "" && !strings.EqualFold(m.SHA256, sum):
				return nil, false, fmt.Errorf("policy module %q: sha256 pin mismatch: %s is pinned %s and %s", m.Name, m.Source, m.SHA256, sum)
			}
			m.SHA256 = sum
		}
	}
	if len(pf.Modules) == 0 {
		defaults := e.opts.DefaultModules
		if defaults == nil {
			defaults = []string{builtin.Scheme + builtin.RulesName}
		}
		for _, src := range defaults {
			pf.Modules = append(pf.Modules, config.PolicyModule{Name: config.DefaultModuleName(src), Source: src})
		}
		defaulted = true
	}
	return pf, defaulted, nil
}

// build loads a set for specs, reusing the generations of prev whose key
// is unchanged. The set it returns holds one reference (it is not yet
// current) and has no chain. On error nothing is kept.
func (e *Engine) build(ctx context.Context, specs []config.PolicyModule, defaulted bool, prev *set) (_ *set, res ReloadResult, err error) {
	s := &set{}
	s.refs.Store(1)
	e.live.Add(1)
	defer func() {
		if err != nil {
			s.unref(ctx, e)
		}
	}()
	old := map[string]*generation{}
	if prev != nil {
		for _, m := range prev.members {
			old[m.g.info.Name] = m.g
		}
	}
	var errs []error
	add := func(spec config.PolicyModule, defaulted bool) {
		wasm, err := readSource(spec)
		if err != nil {
			errs = append(errs, err)
			return
		}
		key := generationKey(spec, wasm)
		if g := old[spec.Name]; g != nil && g.key == key {
			g.refs.Add(1)
			s.members = append(s.members, newMember(g, spec))
			res.Unchanged = append(res.Unchanged, spec.Name)
			return
		}
		g, err := e.load(ctx, spec, wasm, defaulted)
		if err != nil {
			errs = append(errs, err)
			return
		}
		g.key = key
		s.members = append(s.members, newMember(g, spec))
		if old[spec.Name] != nil {
			res.Swapped = append(res.Swapped, spec.Name)
		} else {
			res.Added = append(res.Added, spec.Name)
		}
	}
	for _, spec := range specs {
		add(spec, defaulted)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, ReloadResult{}, err
	}
	if spec, ok := e.namingSpec(s, specs); ok {
		add(spec, true)
		if err := errors.Join(errs...); err != nil {
			return nil, ReloadResult{}, err
		}
		specs = append(slices.Clone(specs), spec)
	}
	if prev != nil {
		for _, m := range prev.members {
			if !slices.ContainsFunc(specs, func(spec config.PolicyModule) bool { return spec.Name == m.info.Name }) {
				res.Removed = append(res.Removed, m.info.Name)
			}
		}
	}
	return s, res, nil
}

// namingSpec returns the Options.NamingModule spec to add to s, loaded
// from specs, when no member of s names tools in enforce mode.
func (e *Engine) namingSpec(s *set, specs []config.PolicyModule) (config.PolicyModule, bool) {
	src := e.opts.NamingModule
	if src == "" {
		return config.PolicyModule{}, false
	}
	for _, m := range s.members {
		if m.info.Mode == policies.Enforce && slices.Contains(m.info.Hooks, policies.HookSanitizeToolNames) {
			return config.PolicyModule{}, false
		}
	}
	name := config.DefaultModuleName(src)
	if slices.ContainsFunc(specs, func(spec config.PolicyModule) bool { return spec.Name == name }) {
		name = "default-" + name
	}
	return config.PolicyModule{Name: name, Source: src}, true
}

func newMember(g *generation, spec config.PolicyModule) member {
	info := g.info
	info.Mode = modeOf(spec)
	info.Hooks = slices.Clone(g.info.Hooks)
	return member{g: g, info: info}
}

func modeOf(spec config.PolicyModule) policies.Mode {
	if spec.Mode == string(policies.AuditOnly) {
		return policies.AuditOnly
	}
	return policies.Enforce
}

// generationKey is everything a loaded module depends on except its mode.
func generationKey(spec config.PolicyModule, wasm []byte) string {
	sum := sha256.Sum256(wasm)
	k, _ := json.Marshal([]any{spec.Name, spec.Source, hex.EncodeToString(sum[:]), spec.SHA256,
		string(spec.Config), spec.TimeoutMs, spec.MemoryLimitPages, spec.Hooks})
	return string(k)
}

// readSource returns a module's bytes: a built-in's, or the file's.
func readSource(spec config.PolicyModule) ([]byte, error) {
	if builtin.IsRef(spec.Source) {
		b, ok := builtin.Lookup(spec.Source)
		if !ok {
			return nil, fmt.Errorf("policy module %q: unknown built-in %q (built-ins: %s)", spec.Name, spec.Source, strings.Join(BuiltinRefs(), ", "))
		}
		return b.Wasm, nil
	}
	data, err := os.ReadFile(spec.Source)
	if err != nil {
		return nil, fmt.Errorf("policy module %q: %w", spec.Name, err)
	}
	return data, nil
}

// BuiltinRefs returns the "builtin:NAME" references of every built-in
// module, sorted.
func BuiltinRefs() []string {
	var refs []string
	for _, m := range builtin.List() {
		refs = append(refs, builtin.Scheme+m.Name)
	}
	return refs
}

// ReadModule returns the bytes of a module source ("builtin:NAME" or a
// file path) and, for a built-in, its default config. It is what the
// `openclaw policy` tools use wherever a FILE is accepted.
func ReadModule(source string) (wasm []byte, defaultConfig json.RawMessage, err error) {
	spec := config.PolicyModule{Name: config.DefaultModuleName(source), Source: source}
	if wasm, err = readSource(spec); err != nil {
		return nil, nil, err
	}
	if b, ok := builtin.Lookup(source); ok && builtin.IsRef(source) {
		defaultConfig = b.DefaultConfig
	}
	return wasm, defaultConfig, nil
}

// checkPin returns the hex sha256 of wasm, the bytes of spec's module,
// and an error naming both digests when spec.SHA256 pins another.
func checkPin(spec config.PolicyModule, wasm []byte) (string, error) {
	sum := sha256.Sum256(wasm)
	digest := hex.EncodeToString(sum[:])
	if spec.SHA256 != "" && !strings.EqualFold(spec.SHA256, digest) {
		return "", fmt.Errorf("policy module %q: sha256 pin mismatch: %s has %s, pinned %s", spec.Name, spec.Source, digest, spec.SHA256)
	}
	return digest, nil
}

// load loads one module version: pin check, wasmpolicy.Load with the
// module's limits and config, and the hooks check.
func (e *Engine) load(ctx context.Context, spec config.PolicyModule, wasm []byte, defaulted bool) (*generation, error) {
	digest, err := checkPin(spec, wasm)
	if err != nil {
		return nil, err
	}
	cfg := spec.Config
	if len(cfg) == 0 {
		if b, ok := builtin.Lookup(spec.Source); ok && builtin.IsRef(spec.Source) {
			cfg = b.DefaultConfig
		}
	}
	host := e.opts.Host
	if spec.MemoryLimitPages > 0 {
		host.MemoryLimitPages = uint32(spec.MemoryLimitPages)
	}
	if spec.TimeoutMs > 0 {
		host.CallTimeout = time.Duration(spec.TimeoutMs) * time.Millisecond
	}
	// A large module (a Go guest) takes seconds to compile on a loaded
	// machine: past slowLoad the wait is said, and so is its end.
	start := time.Now()
	said := make(chan struct{})
	slow := time.AfterFunc(cmp.Or(e.opts.ProgressAfter, defaultProgressAfter), func() {
		e.logger.Info("compiling policy module", "module", spec.Name, "source", spec.Source, "bytes", len(wasm))
		close(said)
	})
	m, err := loadModule(ctx, spec.Name, wasm, cfg, host)
	if !slow.Stop() {
		<-said
		e.logger.Info("policy module compiled", "module", spec.Name, "took", time.Since(start).Round(time.Millisecond), "ok", err == nil)
	}
	if err != nil {
		return nil, fmt.Errorf("policy module %q (%s): %w", spec.Name, spec.Source, err)
	}
	hooks := m.Hooks()
	if len(spec.Hooks) > 0 {
		hooks = nil
		for _, name := range config.HookNames { // ABI order
			if !slices.Contains(spec.Hooks, name) {
				continue
			}
			h := policies.Hook(name)
			if !m.Has(h) {
				_ = m.Close(ctx)
				return nil, fmt.Errorf("policy module %q (%s): hooks lists %s, which the module does not export (it exports %s)", spec.Name, spec.Source, h, hookList(m.Hooks()))
			}
			hooks = append(hooks, h)
		}
	}
	g := &generation{mod: m, info: ModuleInfo{Name: spec.Name, Source: spec.Source, SHA256: digest, Size: len(wasm),
		Mode: modeOf(spec), Hooks: hooks, Default: defaulted, LoadedAt: time.Now().UTC()}}
	g.refs.Store(1)
	return g, nil
}

// defaultProgressAfter is Options.ProgressAfter's default.
const defaultProgressAfter = 500 * time.Millisecond

// loadModule loads wasm with the adapter its format needs: OPA's
// (`opa build -t wasm`, recognized by opa.IsModule) or the policy ABI's.
func loadModule(ctx context.Context, name string, wasm []byte, cfg json.RawMessage, host wasmhost.Options) (Module, error) {
	if opa.IsModule(wasm) {
		return opa.Load(ctx, name, wasm, cfg, &opa.Options{Host: host})
	}
	return wasmpolicy.Load(ctx, name, wasm, cfg, &wasmpolicy.Options{Host: host})
}

func hookList(hs []policies.Hook) string {
	s := make([]string, len(hs))
	for i, h := range hs {
		s[i] = string(h)
	}
	return strings.Join(s, ", ")
}

// chains builds the chain of each hook over the members of s that serve
// it. The allow-always memory of decide_approval survives a reload unless
// the decide_approval modules changed: grants made under one policy do not
// outlive it.
func (e *Engine) chains(s *set, prev *set) {
	var calls []policies.ChainEntry
	var names []policies.SanitizeEntry
	var approvals []policies.ApprovalEntry
	for _, m := range s.members {
		for _, h := range m.info.Hooks {
			switch h {
			case policies.HookBeforeToolCall:
				calls = append(calls, policies.ChainEntry{Hook: m.g.mod, Mode: m.info.Mode})
			case policies.HookSanitizeToolNames:
				names = append(names, policies.SanitizeEntry{Hook: m.g.mod, Mode: m.info.Mode})
			case policies.HookDecideApproval:
				approvals = append(approvals, policies.ApprovalEntry{Hook: m.g.mod, Mode: m.info.Mode})
			}
		}
	}
	if prev != nil && !sameServing(prev, s, policies.HookDecideApproval) {
		e.memory = policies.NewApprovalMemory(nil)
	}
	sa := setAudit{next: e.audit, bundle: e.opts.BundleDigest, sha256: make(map[string]string, len(s.members))}
	for _, m := range s.members {
		sa.sha256[m.info.Name] = m.info.SHA256
	}
	opts := &policies.ChainOptions{Audit: sa}
	s.chain = policies.NewChain(calls, opts)
	s.sanitize = policies.NewSanitizeChain(names, opts)
	s.approvals = policies.NewApprovalChain(approvals, &policies.ApprovalChainOptions{Audit: sa, Memory: e.memory})
}

// sameServing reports whether a and b serve hook h with the same module
// versions in the same modes and order.
func sameServing(a, b *set, h policies.Hook) bool {
	pick := func(s *set) []member {
		var ms []member
		for _, m := range s.members {
			if slices.Contains(m.info.Hooks, h) {
				ms = append(ms, m)
			}
		}
		return ms
	}
	return slices.EqualFunc(pick(a), pick(b), func(x, y member) bool { return x.g == y.g && x.info.Mode == y.info.Mode })
}

// acquire returns the current set with a reference the caller must drop
// with unref, or nil once the engine is closed.
func (e *Engine) acquire() *set {
	for {
		s := e.cur.Load()
		if s == nil {
			return nil
		}
		if s.tryRef() {
			return s
		}
		// s was retired between the load and the ref: the current pointer
		// already names its successor (it is stored before the old set is
		// released), so the next iteration finds it.
	}
}

func (s *set) tryRef() bool {
	for {
		n := s.refs.Load()
		if n <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// unref drops one reference; the last one releases the set's modules.
func (s *set) unref(ctx context.Context, e *Engine) {
	if s.refs.Add(-1) != 0 {
		return
	}
	for _, m := range s.members {
		m.g.unref(ctx, e)
	}
	e.live.Done()
}

// unref drops one set's reference to g; when no set holds it, g is closed
// by a goroutine the engine waits for in Close, so the call that returned
// last does not pay for it.
func (g *generation) unref(ctx context.Context, e *Engine) {
	if g.refs.Add(-1) != 0 {
		return
	}
	e.retired.Add(1)
	go func() {
		defer e.retired.Done()
		if err := g.mod.Close(context.WithoutCancel(ctx)); err != nil {
			e.logger.Warn("closing a retired policy module", "module", g.info.Name, "err", err)
		}
	}()
}

// BeforeToolCall implements [policies.Enforcer]: it runs the current
// before_tool_call chain. The whole call uses one policy set, even if a
// reload swaps the set meanwhile. After Close it blocks, naming the engine.
func (e *Engine) BeforeToolCall(ctx context.Context, call *policies.ToolCall) policies.Outcome {
	s := e.acquire()
	if s == nil {
		return policies.Outcome{Decision: policies.Block, Module: "engine", Reason: ErrClosed.Error(), Arguments: call.Arguments}
	}
	defer s.unref(ctx, e)
	out := s.chain.BeforeToolCall(ctx, call)
	if e.auditFailClosed {
		if f := e.auditErr.Load(); f != nil && out.Decision != policies.Block {
			// The record of this decision may be the one that failed.
			return policies.Outcome{Decision: policies.Block, Module: "engine", Arguments: call.Arguments,
				Reason: fmt.Sprintf("the decision audit log %s cannot be written (%v): tool calls are refused (audit_fail_closed)", f.where, f.err)}
		}
	}
	return out
}

// Acquire implements [policies.Limiter] with the policy file's
// rate_limits, as last loaded (a reload swaps them; the counters, kept in
// Options.LimitStore, carry over).
func (e *Engine) Acquire(ctx context.Context, call *policies.ToolCall) (func(), error) {
	return e.limiter.Load().Acquire(ctx, call)
}

// PerIdentityLimits returns the names of the rate limits, as last loaded,
// that keep a counter per identity (ratelimit.Limiter.PerIdentity).
func (e *Engine) PerIdentityLimits() []string { return e.limiter.Load().PerIdentity() }

// SanitizeToolNames names a catalog with the current set's
// sanitize_tool_names modules (policies.SanitizeChain: validated, fail
// closed, audited). It returns policies.ErrNoSanitizer when no module
// serves the hook in enforce mode, and ErrClosed after Close.
func (e *Engine) SanitizeToolNames(ctx context.Context, req *policies.SanitizeRequest) (*policies.SanitizeResult, error) {
	s := e.acquire()
	if s == nil {
		return nil, ErrClosed
	}
	defer s.unref(ctx, e)
	return s.sanitize.SanitizeToolNames(ctx, req)
}

// DecideApproval decides an approval request with the current set's
// decide_approval modules (policies.ApprovalChain: the most cautious
// answer wins, a failing module denies, no module asks a human,
// allow-always grants are remembered). After Close it denies, naming the
// engine.
func (e *Engine) DecideApproval(ctx context.Context, req *policies.ApprovalRequest) policies.ApprovalOutcome {
	s := e.acquire()
	if s == nil {
		return policies.ApprovalOutcome{Decision: policies.Deny, Module: "engine", Reason: ErrClosed.Error()}
	}
	defer s.unref(ctx, e)
	return s.approvals.DecideApproval(ctx, req)
}

// CallHook calls hook h of every module serving it, in the configured
// order, all from one policy set, with the same input (a JSON object of the
// hook's input, docs/policy-abi.md). each receives every module's output or
// failure (a *wasmhost.Error naming the module) and returns false to stop.
// It is the seam for the sanitize_tool_names and decide_approval adapters,
// which decode outputs and combine them. It returns ErrClosed after Close.
func (e *Engine) CallHook(ctx context.Context, h policies.Hook, input []byte, each func(m ModuleInfo, out []byte, err error) bool) error {
	s := e.acquire()
	if s == nil {
		return ErrClosed
	}
	defer s.unref(ctx, e)
	for _, m := range s.members {
		if !slices.Contains(m.info.Hooks, h) {
			continue
		}
		out, err := m.g.mod.CallHook(ctx, h, input)
		if !each(m.info, out, err) {
			break
		}
	}
	return nil
}

// Modules returns the modules of the current set, in order; nil after
// Close.
func (e *Engine) Modules() []ModuleInfo {
	s := e.acquire()
	if s == nil {
		return nil
	}
	defer s.unref(context.Background(), e)
	infos := make([]ModuleInfo, len(s.members))
	for i, m := range s.members {
		infos[i] = m.info
		infos[i].Hooks = slices.Clone(m.info.Hooks)
	}
	return infos
}

// AuditDestination says where decisions are audited: a file path,
// "stderr", or "(embedder's sink)".
func (e *Engine) AuditDestination() string { return e.auditDst }

// AuditSink is the sink every chain of the engine audits to, for surfaces
// that record decisions of their own (the bridge's approval routing) in
// the same log. It stays valid across reloads and until Close.
func (e *Engine) AuditSink() policies.AuditSink { return e.audit }

// Reload reads the policy file and every module source again and, if
// everything loads, swaps the policy set atomically; modules whose bytes,
// config, pin, limits and hooks are unchanged keep their instances. Calls
// in flight finish on the set they started with. On any error the current
// set stays active and the error names each module that failed and why.
// Every outcome is also logged on the engine's Logger.
func (e *Engine) Reload(ctx context.Context) (ReloadResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reloadLocked(ctx)
}

// ReloadFrom is [Engine.Reload] with configFile as the policy file: on
// success the engine keeps configFile for later reloads; on error the
// current set and policy file stay. It is how a verified policy bundle,
// written to a folder of its own, replaces the running set. An engine that
// follows a bundle is not watched ([Engine.Watch] reads the policy file's
// path once). bundleDigest is the bundle's digest, for the audit records
// of the new set (Options.BundleDigest); "" for a plain file. pins are
// the sha256 digests the files must have (Options.Pins); nil checks none.
func (e *Engine) ReloadFrom(ctx context.Context, configFile, bundleDigest string, pins map[string]string) (ReloadResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	prevFile, prevDigest, prevPins := e.opts.ConfigFile, e.opts.BundleDigest, e.opts.Pins
	e.opts.ConfigFile, e.opts.BundleDigest, e.opts.Pins = configFile, bundleDigest, pins
	res, err := e.reloadLocked(ctx)
	if err != nil {
		e.opts.ConfigFile, e.opts.BundleDigest, e.opts.Pins = prevFile, prevDigest, prevPins
	}
	return res, err
}

// reloadLocked is Reload with e.mu held.
func (e *Engine) reloadLocked(ctx context.Context) (ReloadResult, error) {
	prev := e.cur.Load()
	if prev == nil {
		return ReloadResult{}, ErrClosed
	}
	res, err := e.reload(ctx, prev)
	// Log first: whoever learns of the outcome through OnReload (a run
	// file) may then find it in the log too.
	if err != nil {
		e.logger.Error("policy reload refused; the active policies stay in place", "err", err)
	} else if res.Changed() {
		e.logger.Info("policy reload: "+res.String(), "modules", len(res.Swapped)+len(res.Added)+len(res.Reconfigured)+len(res.Unchanged))
	}
	if e.opts.OnReload != nil {
		e.opts.OnReload(res, err)
	}
	return res, err
}

func (e *Engine) reload(ctx context.Context, prev *set) (ReloadResult, error) {
	pf, defaulted, err := e.specs()
	if err != nil {
		return ReloadResult{}, err
	}
	lim, err := ratelimit.New(pf.RateLimits, e.opts.LimitStore, e.audit)
	if err != nil {
		return ReloadResult{}, err
	}
	s, res, err := e.build(ctx, pf.Modules, defaulted, prev)
	if err != nil {
		return ReloadResult{}, err
	}
	e.limiter.Store(lim) // the counters stay in the store: a reload resets none
	reconfigured(prev, s, &res)
	if !res.Changed() {
		s.unref(ctx, e)
		return res, nil
	}
	e.chains(s, prev)
	e.cur.Store(s)
	prev.unref(ctx, e)
	return res, nil
}

// reconfigured moves from res.Unchanged to res.Reconfigured the modules
// of s whose mode differs from prev's, or whose position among the kept
// modules moved.
func reconfigured(prev, s *set, res *ReloadResult) {
	var before, after []member
	for _, m := range prev.members {
		if slices.Contains(res.Unchanged, m.info.Name) {
			before = append(before, m)
		}
	}
	for _, m := range s.members {
		if slices.Contains(res.Unchanged, m.info.Name) {
			after = append(after, m)
		}
	}
	var kept []string
	for i, m := range after {
		if before[i].info.Name != m.info.Name || before[i].info.Mode != m.info.Mode {
			res.Reconfigured = append(res.Reconfigured, m.info.Name)
		} else {
			kept = append(kept, m.info.Name)
		}
	}
	res.Unchanged = kept
}

// Close makes later calls block with ErrClosed, waits until the calls in
// flight have returned or ctx is done, closes every module and the audit
// log. It is idempotent.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.cur.Swap(nil)
	if s == nil {
		return nil
	}
	s.unref(ctx, e)
	done := make(chan struct{})
	go func() { e.live.Wait(); e.retired.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("engine: closing: calls still in flight: %w", ctx.Err())
	}
	if e.shipper != nil {
		// The buffered decisions are sent within what is left of ctx, at
		// most DecisionLogDrain: an endpoint that is down does not hold
		// the process.
		dctx, cancel := context.WithTimeout(ctx, DecisionLogDrain)
		err = errors.Join(err, e.shipper.Close(dctx))
		cancel()
	}
	if e.auditCloser != nil {
		err = errors.Join(err, e.auditCloser.Close())
	}
	return err
}

// DecisionLogDrain bounds the time Close spends sending the decisions the
// decision log shipper still buffers; those it could not send are counted
// as dropped and said.
const DecisionLogDrain = 10 * time.Second

// DecisionLogStats returns the counters of the decision log shipper (the
// policy file's decision_log); ok is false when there is none.
func (e *Engine) DecisionLogStats() (st decisionlog.Stats, ok bool) {
	if e.shipper == nil {
		return decisionlog.Stats{}, false
	}
	return e.shipper.Stats(), true
}

// newShipper starts the shipper of the policy file's decision_log: its
// token read from token_file (an empty file is refused), its endpoint's
// certificate checked against ca_file when set.
func newShipper(dl *config.PolicyDecisionLog, logger *slog.Logger) (*decisionlog.Shipper, error) {
	token, err := dl.Token()
	if err != nil {
		return nil, fmt.Errorf("policy config: %w", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if dl.CAFile != "" {
		pem, err := os.ReadFile(dl.CAFile)
		if err != nil {
			return nil, fmt.Errorf("policy config: decision_log.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("policy config: decision_log.ca_file %s: no PEM certificate in it", dl.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return decisionlog.New(decisionlog.Options{URL: dl.URL, Token: token, Client: &http.Client{Transport: tr}, Labels: dl.Labels,
		BufferEvents: dl.BufferEvents, BatchEvents: dl.BatchEvents, FlushInterval: time.Duration(dl.FlushIntervalMs) * time.Millisecond, Logger: logger})
}

// openAuditLog opens the decision audit log: "-" is stderr; "" is the
// default file under the state folder.
func openAuditLog(dst string) (io.Writer, io.Closer, string, error) {
	if dst == "-" {
		return os.Stderr, nil, "stderr", nil
	}
	if dst == "" {
		dir, err := config.StateDir()
		if err != nil {
			return nil, nil, "", err
		}
		dst = filepath.Join(dir, "openclaw-go", "policy-audit.jsonl")
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return nil, nil, "", fmt.Errorf("audit log: %w", err)
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, "", fmt.Errorf("audit log: %w", err)
	}
	return f, f, dst, nil
}
