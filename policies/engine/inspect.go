package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/opa"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
	"github.com/openclaw-go/openclaw/wasmhost"
	"github.com/openclaw-go/openclaw/wasmhost/wasmbin"
)

// Inspection describes a policy module file: what `openclaw policy
// inspect` prints.
type Inspection struct {
	// Source is the file path or "builtin:NAME".
	Source string `json:"source"`
	// Format is "openclaw-policy" (docs/policy-abi.md) or "opa" (a module
	// built by `opa build -t wasm`, run by the OPA adapter).
	Format string `json:"format"`
	// Size is the module's size in bytes.
	Size int `json:"size"`
	// SHA256 is the hex digest to pin the module with.
	SHA256 string `json:"sha256"`
	// ABIVersion is what policy_abi_version returned; nil when the module
	// does not export it or could not be instantiated (and for OPA
	// modules, whose version is OPAABIVersion).
	ABIVersion *int32 `json:"abi_version"`
	// OPAABIVersion is an OPA module's Wasm ABI version, "1.3"; empty for
	// others or when the module does not load.
	OPAABIVersion string `json:"opa_abi_version,omitempty"`
	// Hooks are the hook exports the module has, in ABI order.
	Hooks []policies.Hook `json:"hooks"`
	// Exports and Imports list the module's exports and imports with
	// their signatures (of a module over a load limit, those read before
	// the limit was hit).
	Exports []Export `json:"exports"`
	Imports []Import `json:"imports"`
	// Memory is the module's first memory; nil when it has none.
	Memory *Memory `json:"memory"`
	// Loadable reports whether the host accepts the module as a policy
	// with the given config (the checks of [Load]); LoadError says why
	// not.
	Loadable  bool   `json:"loadable"`
	LoadError string `json:"load_error,omitempty"`
}

// Inspect reads a module ("builtin:NAME" or a file), describes its shape,
// asks its policy_abi_version, and checks whether it loads as a policy
// with cfg (nil means the built-in's default config, or none). It fails
// only when the source cannot be read or is not a WebAssembly module; a
// module the host refuses is described, with the reason in LoadError.
func Inspect(ctx context.Context, source string, cfg json.RawMessage, host wasmhost.Options) (*Inspection, error) {
	wasm, defCfg, err := ReadModule(source)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(wasm)
	shape, err := parseWasm(wasm)
	var ce *wasmbin.CapError
	if err != nil && !errors.As(err, &ce) {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	in := &Inspection{Source: source, Size: len(wasm), SHA256: hex.EncodeToString(sum[:]),
		Exports: shape.exports, Imports: shape.imports, Hooks: []policies.Hook{}}
	if in.Exports == nil {
		in.Exports = []Export{}
	}
	if in.Imports == nil {
		in.Imports = []Import{}
	}
	if len(shape.memories) > 0 {
		in.Memory = &shape.memories[0]
	}
	name := config.DefaultModuleName(source)
	host.PoolSize = 1
	if cfg == nil {
		cfg = defCfg
	}
	if opa.IsModule(wasm) {
		in.Format = "opa"
		m, err := opa.Load(ctx, name, wasm, cfg, &opa.Options{Host: host})
		if err != nil {
			in.LoadError = err.Error()
			return in, nil
		}
		in.Loadable, in.Hooks, in.OPAABIVersion = true, m.Hooks(), m.ABIVersion()
		return in, m.Close(ctx)
	}
	in.Format = "openclaw-policy"
	for _, h := range config.HookNames {
		if slices.ContainsFunc(shape.exports, func(e Export) bool { return e.Name == h && e.Kind == "func" }) {
			in.Hooks = append(in.Hooks, policies.Hook(h))
		}
	}
	if m, err := wasmhost.Load(ctx, name, wasm, &host); err == nil {
		if ft, ok := m.Func(wasmpolicy.ExportABIVersion); ok && ft.String() == "() -> (i32)" {
			if res, err := m.Call(ctx, wasmpolicy.ExportABIVersion); err == nil {
				v := int32(res[0])
				in.ABIVersion = &v
			}
		}
		// Open until the policy load below, which then finds the module
		// compiled in the process's compilation cache.
		defer m.Close(ctx)
	}
	pm, err := wasmpolicy.Load(ctx, name, wasm, cfg, &wasmpolicy.Options{Host: host})
	if err != nil {
		in.LoadError = err.Error()
		return in, nil
	}
	in.Loadable = true
	return in, pm.Close(ctx)
}

// OpenModule loads one module for the `openclaw policy` tools: source is
// "builtin:NAME" or a file (an ABI module or an OPA-compiled Rego module),
// cfg its config (nil means the built-in's default config, or none).
// Errors name the module and the reason, as [Load]'s do.
func OpenModule(ctx context.Context, source string, cfg json.RawMessage, host wasmhost.Options) (Module, error) {
	return OpenModuleSHA256(ctx, source, "", cfg, host)
}

// OpenModuleSHA256 is [OpenModule] for a module whose bytes must have the
// sha256 digest sum (64 hex digits; "" checks nothing), checked on the
// bytes it loads as a module's sha256 pin is ([Options.Pins]).
func OpenModuleSHA256(ctx context.Context, source, sum string, cfg json.RawMessage, host wasmhost.Options) (Module, error) {
	wasm, defCfg, err := ReadModule(source)
	if err != nil {
		return nil, err
	}
	name := config.DefaultModuleName(source)
	if _, err := checkPin(config.PolicyModule{Name: name, Source: source, SHA256: sum}, wasm); err != nil {
		return nil, err
	}
	if cfg == nil {
		cfg = defCfg
	}
	m, err := loadModule(ctx, name, wasm, cfg, host)
	if err != nil {
		return nil, fmt.Errorf("policy module %q (%s): %w", name, source, err)
	}
	return m, nil
}
