package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// policyFlags are the policy inputs shared by the commands that enforce
// policies.
type policyFlags struct {
	files    []string // --policy FILE.wasm, repeatable
	config   string   // --policy-config FILE
	auditLog string   // --audit-log FILE, "-" for stderr
}

// policySet is a loaded before_tool_call chain and what it owns.
type policySet struct {
	chain    *policies.Chain
	modules  []*wasmpolicy.Module
	audit    io.Closer
	summary  []string // one line per module, for the startup announcement
	auditDst string
}

// Close releases the modules and the audit log.
func (p *policySet) Close(ctx context.Context) error {
	var errs []error
	for _, m := range p.modules {
		errs = append(errs, m.Close(ctx))
	}
	if p.audit != nil {
		errs = append(errs, p.audit.Close())
	}
	return errors.Join(errs...)
}

// loadPolicies builds the chain: the modules of --policy-config, then each
// --policy file; with none at all, the built-in rules module with its
// default ruleset (allow everything, audit every decision). Any module that
// fails to load, or a wrong sha256 pin, is an error naming the module.
func loadPolicies(ctx context.Context, fl policyFlags) (_ *policySet, err error) {
	pf := &config.PolicyFile{}
	if fl.config != "" {
		if pf, err = config.LoadPolicyFile(fl.config); err != nil {
			return nil, err
		}
	}
	for _, f := range fl.files {
		m := config.PolicyModule{Source: f, Name: config.DefaultModuleName(f)}
		for _, prev := range pf.Modules {
			if prev.Name == m.Name {
				return nil, fmt.Errorf("--policy %s: a module named %q is already configured", f, m.Name)
			}
		}
		pf.Modules = append(pf.Modules, m)
	}
	defaulted := len(pf.Modules) == 0
	if defaulted {
		pf.Modules = []config.PolicyModule{{Name: builtin.RulesName, Source: builtin.Scheme + builtin.RulesName}}
	}
	set := &policySet{}
	defer func() {
		if err != nil {
			_ = set.Close(ctx)
		}
	}()
	var entries []policies.ChainEntry
	for _, pm := range pf.Modules {
		m, line, err := loadModule(ctx, pm, defaulted)
		if err != nil {
			return nil, err
		}
		set.modules = append(set.modules, m)
		mode := policies.Enforce
		if pm.Mode == string(policies.AuditOnly) {
			mode = policies.AuditOnly
		}
		entries = append(entries, policies.ChainEntry{Hook: m, Mode: mode})
		set.summary = append(set.summary, line)
	}
	dst := fl.auditLog
	if dst == "" {
		dst = pf.AuditLog
	}
	w, closer, where, err := openAuditLog(dst)
	if err != nil {
		return nil, err
	}
	set.audit, set.auditDst = closer, where
	set.chain = policies.NewChain(entries, &policies.ChainOptions{Audit: policies.NewAuditLog(w)})
	return set, nil
}

func loadModule(ctx context.Context, pm config.PolicyModule, defaulted bool) (*wasmpolicy.Module, string, error) {
	var wasm []byte
	cfg := pm.Config
	if builtin.IsRef(pm.Source) {
		b, ok := builtin.Lookup(pm.Source)
		if !ok {
			var names []string
			for _, m := range builtin.List() {
				names = append(names, builtin.Scheme+m.Name)
			}
			return nil, "", fmt.Errorf("policy module %q: unknown built-in %q (built-ins: %s)", pm.Name, pm.Source, strings.Join(names, ", "))
		}
		wasm = b.Wasm
		if len(cfg) == 0 {
			cfg = b.DefaultConfig
		}
	} else {
		data, err := os.ReadFile(pm.Source)
		if err != nil {
			return nil, "", fmt.Errorf("policy module %q: %w", pm.Name, err)
		}
		wasm = data
		if len(cfg) == 0 {
			cfg = json.RawMessage(`{}`)
		}
	}
	sum := sha256.Sum256(wasm)
	digest := hex.EncodeToString(sum[:])
	if pm.SHA256 != "" && !strings.EqualFold(pm.SHA256, digest) {
		return nil, "", fmt.Errorf("policy module %q: sha256 pin mismatch: %s has %s, pinned %s", pm.Name, pm.Source, digest, pm.SHA256)
	}
	opts := &wasmpolicy.Options{Host: wasmhost.Options{
		MemoryLimitPages: uint32(pm.MemoryLimitPages),
		CallTimeout:      time.Duration(pm.TimeoutMs) * time.Millisecond,
	}}
	m, err := wasmpolicy.Load(ctx, pm.Name, wasm, cfg, opts)
	if err != nil {
		return nil, "", fmt.Errorf("policy module %q (%s): %w", pm.Name, pm.Source, err)
	}
	if !m.Has(policies.HookBeforeToolCall) {
		_ = m.Close(ctx)
		return nil, "", fmt.Errorf("policy module %q (%s): it does not export %s", pm.Name, pm.Source, policies.HookBeforeToolCall)
	}
	mode := pm.Mode
	if mode == "" {
		mode = string(policies.Enforce)
	}
	line := fmt.Sprintf("%s (%s, sha256 %s…, %s)", pm.Name, pm.Source, digest[:12], mode)
	if defaulted {
		line += ": default ruleset, allows every call and audits it"
	}
	return m, line, nil
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
