// Package wasmpolicy adapts a WebAssembly module of the "openclaw-policy v1"
// ABI (docs/policy-abi.md) to the policy contract of package policies: a
// loaded [*Module] is a [policies.BeforeToolCallHook].
//
// [Load] compiles the module through package wasmhost (sandbox, memory cap,
// per-call deadline, instance pool), checks policy_abi_version and the
// exports, and configures every instance with the module's JSON config.
// [Module.BeforeToolCall] makes one guest call per decision and decodes the
// verdict strictly; any failure (trap, timeout, out of memory, bad pointer,
// invalid JSON, unknown decision, a zero result) is returned as a
// *wasmhost.Error naming the module, with a block verdict, so a chain fails
// closed. The same module serves the other hooks it exports:
// [Module.SanitizeToolNames] (a [policies.SanitizeToolNamesHook]) and
// [Module.DecideApproval] (a [policies.DecideApprovalHook]), with the same
// containment, strict decoding and typed errors.
//
// Usage sketch:
//
//	rules, err := wasmpolicy.Load(ctx, "rules", builtin.Rules(), cfg, nil)
//	if err != nil { … }
//	defer rules.Close(ctx)
//	chain := policies.NewChain([]policies.ChainEntry{{Hook: rules}}, nil)
package wasmpolicy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// ABIVersion is the policy ABI version this host speaks; a module's
// policy_abi_version export must return it.
const ABIVersion = 1

// Export names of the ABI (docs/policy-abi.md). The hook exports are the
// names of [policies.Hook].
const (
	ExportABIVersion = "policy_abi_version"
	ExportAlloc      = "alloc"
	ExportFree       = "free"
	ExportConfigure  = "configure"
	ExportLastError  = "last_error"
)

var hookOrder = []policies.Hook{policies.HookBeforeToolCall, policies.HookSanitizeToolNames, policies.HookDecideApproval}

// Options configure [Load]. A nil *Options means all defaults.
type Options struct {
	// Host holds the sandbox limits (memory cap, call deadline, pool size,
	// result cap, logger); its zero values are
	// wasmhost's defaults. Host.Init and Host.ErrorExport are set by the
	// adapter and must be left zero.
	Host wasmhost.Options
}

// Module is a loaded policy module. It is safe for concurrent use.
type Module struct {
	name     string
	host     *wasmhost.Module
	hooks    map[policies.Hook]bool
	verdicts verdictCache
}

// Load compiles and checks a policy module and configures its first
// instance with config (nil or empty for none). name is the module's
// configured name, used in every error, reason and audit record. It fails
// with a *wasmhost.Error of kind KindLoad when the module does not speak
// ABI version 1, lacks a required export (memory, alloc, a hook), has an
// export with a wrong signature, or refuses the config (with the guest's
// message from last_error when it gives one).
func Load(ctx context.Context, name string, wasm []byte, config json.RawMessage, opts *Options) (*Module, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Host.Init != nil || o.Host.ErrorExport != "" {
		return nil, &wasmhost.Error{Module: name, Kind: wasmhost.KindLoad,
			Err: errors.New("options: the adapter owns Host.Init and Host.ErrorExport; leave them zero")}
	}
	cfg := append([]byte(nil), config...)
	o.Host.ErrorExport = ExportLastError
	o.Host.Init = func(ctx context.Context, inst *wasmhost.Instance) error {
		return initInstance(ctx, name, inst, cfg)
	}
	host, err := wasmhost.Load(ctx, name, wasm, &o.Host)
	if err != nil {
		return nil, err
	}
	m := &Module{name: name, host: host, hooks: make(map[policies.Hook]bool)}
	for _, h := range hookOrder {
		if _, ok := host.Func(string(h)); ok {
			m.hooks[h] = true
		}
	}
	return m, nil
}

func loadError(name, export, format string, args ...any) error {
	return &wasmhost.Error{Module: name, Export: export, Kind: wasmhost.KindLoad, Err: fmt.Errorf(format, args...)}
}

// sig formats the wanted signatures in errors.
const (
	sigVersion = "() -> (i32)"
	sigAlloc   = "(i32) -> (i32)"
	sigHook    = "(i32, i32) -> (i64)"
	sigConfig  = "(i32, i32) -> (i32)"
	sigLastErr = "() -> (i64)"
)

// checkExports verifies the static shape of the module.
func checkExports(name string, inst *wasmhost.Instance) error {
	want := func(export, sig string, required bool) error {
		ft, ok := inst.Func(export)
		if !ok {
			if required {
				return loadError(name, "", "missing export %q %s", export, sig)
			}
			return nil
		}
		if ft.String() != sig {
			return loadError(name, export, "export has signature %s, want %s", ft, sig)
		}
		return nil
	}
	for _, c := range []struct {
		export, sig string
		required    bool
	}{
		{ExportABIVersion, sigVersion, true},
		{ExportAlloc, sigAlloc, true},
		{ExportFree, "(i32, i32) -> ()", false},
		{ExportConfigure, sigConfig, false},
		{ExportLastError, sigLastErr, false},
	} {
		if err := want(c.export, c.sig, c.required); err != nil {
			return err
		}
	}
	n := 0
	for _, h := range hookOrder {
		if err := want(string(h), sigHook, false); err != nil {
			return err
		}
		if _, ok := inst.Func(string(h)); ok {
			n++
		}
	}
	if n == 0 {
		return loadError(name, "", "exports no hook: want at least one of before_tool_call, sanitize_tool_names, decide_approval %s", sigHook)
	}
	return nil
}

// initInstance checks the ABI version and configures one new instance.
func initInstance(ctx context.Context, name string, inst *wasmhost.Instance, config []byte) error {
	if err := checkExports(name, inst); err != nil {
		return err
	}
	res, err := inst.Call(ctx, ExportABIVersion)
	if err != nil {
		return err
	}
	if v := int32(res[0]); v != ABIVersion {
		return loadError(name, ExportABIVersion, "policy ABI version %d is not supported (this host speaks version %d)", v, ABIVersion)
	}
	if _, ok := inst.Func(ExportConfigure); !ok {
		if len(bytes.TrimSpace(config)) > 0 {
			return loadError(name, "", "a config was given but the module exports no %q", ExportConfigure)
		}
		return nil
	}
	ptr, err := inst.Input(ctx, config)
	if err != nil {
		return err
	}
	res, err = inst.Call(ctx, ExportConfigure, uint64(ptr), uint64(len(config)))
	if err != nil {
		return err
	}
	if status := int32(res[0]); status != 0 {
		return loadError(name, ExportConfigure, "configuration refused: %s", refusal(ctx, inst, status))
	}
	return nil
}

// refusal returns the guest's explanation of a refused configure.
func refusal(ctx context.Context, inst *wasmhost.Instance, status int32) string {
	generic := fmt.Sprintf("status %d", status)
	if _, ok := inst.Func(ExportLastError); !ok {
		return generic
	}
	res, err := inst.Call(ctx, ExportLastError)
	if err != nil {
		return generic
	}
	msg, err := inst.ReadPacked(ExportLastError, res[0])
	if err != nil || len(msg) == 0 {
		return generic
	}
	return wasmhost.GuestMessage(msg)
}

// Name returns the module's configured name.
func (m *Module) Name() string { return m.name }

// Has reports whether the module exports hook h.
func (m *Module) Has(h policies.Hook) bool { return m.hooks[h] }

// Hooks returns the hooks the module exports, in ABI order.
func (m *Module) Hooks() []policies.Hook {
	var hs []policies.Hook
	for _, h := range hookOrder {
		if m.hooks[h] {
			hs = append(hs, h)
		}
	}
	return hs
}

// BeforeToolCall implements [policies.BeforeToolCallHook] with one guest
// call. On any failure it returns a block verdict whose reason is the
// error's message, and the error (a *wasmhost.Error naming the module).
func (m *Module) BeforeToolCall(ctx context.Context, call *policies.ToolCall) (policies.Verdict, error) {
	v, err := m.beforeToolCall(ctx, call)
	if err != nil {
		return policies.Verdict{Decision: policies.Block, Reason: err.Error()}, err
	}
	return v, nil
}

func (m *Module) beforeToolCall(ctx context.Context, call *policies.ToolCall) (policies.Verdict, error) {
	const export = string(policies.HookBeforeToolCall)
	if !m.hooks[policies.HookBeforeToolCall] {
		return policies.Verdict{}, &wasmhost.Error{Module: m.name, Export: export, Kind: wasmhost.KindABI,
			Err: errors.New("module does not export before_tool_call")}
	}
	bp := inputPool.Get().(*[]byte)
	in, err := appendCallInput((*bp)[:0], call)
	if err != nil {
		inputPool.Put(bp)
		return policies.Verdict{}, &wasmhost.Error{Module: m.name, Export: export, Kind: wasmhost.KindABI,
			Err: fmt.Errorf("encoding the input: %w", err)}
	}
	// The verdict is decoded before the instance returns to the pool, so
	// that an instance that answered garbage is discarded, never reused.
	var v policies.Verdict
	ctx = wasmhost.WithCaller(ctx, policies.RequesterKey(call.SessionKey, call.Caller))
	_, err = m.host.CallBytesChecked(ctx, export, in, func(out []byte) error {
		var ok bool
		if v, ok = m.verdicts.get(out); ok {
			return nil
		}
		var err error
		if v, err = DecodeVerdict(out); err != nil {
			return err
		}
		m.verdicts.put(out, v)
		return nil
	})
	if cap(in) <= 64<<10 {
		*bp = in
		inputPool.Put(bp)
	}
	if err != nil {
		return policies.Verdict{}, err
	}
	return v, nil
}

// verdictCache maps verdict outputs already decoded to their Verdict:
// guests tend to answer with a few fixed outputs (the rules module renders
// each rule's verdict once), and decoding is a pure function of the bytes.
// Outputs with arguments are not cached (a Verdict would share them).
type verdictCache struct {
	mu sync.RWMutex
	m  map[string]policies.Verdict
}

const (
	verdictCacheEntries = 64
	verdictCacheMaxLen  = 512
)

func (c *verdictCache) get(out []byte) (policies.Verdict, bool) {
	c.mu.RLock()
	v, ok := c.m[string(out)]
	c.mu.RUnlock()
	return v, ok
}

func (c *verdictCache) put(out []byte, v policies.Verdict) {
	if len(v.Arguments) > 0 || len(out) > verdictCacheMaxLen {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]policies.Verdict)
	}
	if len(c.m) < verdictCacheEntries {
		c.m[string(out)] = v
	}
}

// DecodeVerdict decodes a before_tool_call output strictly: one JSON
// object with only the fields of [policies.Verdict], each at most once and
// spelt exactly (case included), a known decision, a non-negative
// timeout_ms, and arguments (if any) that are a JSON object.
func DecodeVerdict(out []byte) (policies.Verdict, error) {
	var v policies.Verdict
	if err := decodeStrict(out, &v, "verdict"); err != nil {
		return v, err
	}
	switch {
	case v.Decision == "":
		return v, fmt.Errorf("invalid verdict %s: no decision", quoteOutput(out))
	case !v.Decision.Valid():
		return v, fmt.Errorf("unknown decision %q (want allow, block or require_approval)", v.Decision)
	case v.TimeoutMs < 0:
		return v, fmt.Errorf("invalid verdict: negative timeout_ms %d", v.TimeoutMs)
	}
	if len(v.Arguments) > 0 {
		a := bytes.TrimSpace(v.Arguments)
		if string(a) == "null" {
			v.Arguments = nil
		} else if a[0] != '{' {
			return v, fmt.Errorf("invalid verdict: arguments must be a JSON object, got %s", quoteOutput(a))
		}
	}
	return v, nil
}

// quoteOutput quotes guest output for an error message, cut to 64 bytes.
func quoteOutput(b []byte) string {
	if len(b) > 64 {
		return fmt.Sprintf("%q…", b[:64])
	}
	return fmt.Sprintf("%q", b)
}

// CallHook calls one of the module's hook exports with a JSON input and
// returns its JSON output, with the containment of BeforeToolCall (a zero
// result, a bad pointer, a trap or a timeout is an error naming the
// module). The output is not decoded; [Module.SanitizeToolNames] and
// [Module.DecideApproval] are the typed, strictly decoded forms.
func (m *Module) CallHook(ctx context.Context, h policies.Hook, input []byte) ([]byte, error) {
	if !m.hooks[h] {
		return nil, &wasmhost.Error{Module: m.name, Export: string(h), Kind: wasmhost.KindABI,
			Err: fmt.Errorf("module does not export %s", h)}
	}
	return m.host.CallBytes(ctx, string(h), input)
}

// Close releases the module (see wasmhost.Module.Close): calls in flight
// may finish until ctx is done; later calls fail with wasmhost.ErrClosed.
func (m *Module) Close(ctx context.Context) error { return m.host.Close(ctx) }

var _ policies.BeforeToolCallHook = (*Module)(nil)
