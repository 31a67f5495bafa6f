package bundle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies/engine"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// File is one file of a bundle: its path in the bundle layout (slash
// separated), its layer media type and its bytes.
type File struct {
	Path      string
	MediaType string
	Data      []byte
}

// Bundle is a policy set as shipped: policy.json, the .wasm modules its
// modules name by relative path, and tests/NAME.jsonl cases for modules
// of the policy file, in that order.
type Bundle struct {
	Files []File
}

// ReadDir reads the bundle in dir: dir/policy.json (a policy file, as
// config.ParsePolicyFile reads it), every module source it names that is
// not builtin (a relative path inside dir), and dir/tests/NAME.jsonl for
// modules named NAME. Other files are not part of the bundle. Errors name
// the file.
func ReadDir(dir string) (*Bundle, error) {
	pfData, err := os.ReadFile(filepath.Join(dir, PolicyFileName))
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", dir, err)
	}
	b := &Bundle{Files: []File{{Path: PolicyFileName, MediaType: MediaTypePolicyFile, Data: pfData}}}
	pf, err := parsePolicy(pfData)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", dir, err)
	}
	for _, m := range pf.Modules {
		if strings.HasPrefix(m.Source, config.BuiltinPrefix) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(m.Source)))
		if err != nil {
			return nil, fmt.Errorf("bundle %s: module %q: %w", dir, m.Name, err)
		}
		b.Files = append(b.Files, File{Path: m.Source, MediaType: MediaTypeModule, Data: data})
	}
	cases, err := filepath.Glob(filepath.Join(dir, CasesDir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	sort.Strings(cases)
	for _, c := range cases {
		data, err := os.ReadFile(c)
		if err != nil {
			return nil, fmt.Errorf("bundle %s: %w", dir, err)
		}
		b.Files = append(b.Files, File{Path: CasesDir + "/" + filepath.Base(c), MediaType: MediaTypeCases, Data: data})
	}
	if err := b.Validate(); err != nil {
		return nil, fmt.Errorf("bundle %s: %w", dir, err)
	}
	return b, nil
}

// parsePolicy parses a bundle's policy file and checks what a bundle adds
// to a policy file's rules: module sources are builtin or clean relative
// paths inside the bundle, and audit_log, decision_log and tool_pins.file
// are absent (the process that runs the bundle keeps its own: a
// decision_log would read a token file of the machine and send it, with
// every decision, to the URL the bundle names).
func parsePolicy(data []byte) (*config.PolicyFile, error) {
	pf, err := config.ParsePolicyFile(PolicyFileName, data)
	if err != nil {
		return nil, err
	}
	if pf.AuditLog != "" {
		return nil, fmt.Errorf("%s: audit_log is not allowed in a bundle (the process running it names its audit log)", PolicyFileName)
	}
	if pf.DecisionLog != nil {
		return nil, fmt.Errorf("%s: decision_log is not allowed in a bundle (the process running it names where its decisions go, and its token file)", PolicyFileName)
	}
	if pf.Bundle != nil {
		return nil, fmt.Errorf("%s: a bundle's policy file names no other bundle", PolicyFileName)
	}
	if pf.ToolPins != nil && pf.ToolPins.File != "" {
		return nil, fmt.Errorf("%s: tool_pins.file is not allowed in a bundle (the pins file is the machine's)", PolicyFileName)
	}
	for i, m := range pf.Modules {
		if strings.HasPrefix(m.Source, config.BuiltinPrefix) {
			continue
		}
		if err := checkPath(m.Source, MediaTypeModule); err != nil {
			return nil, fmt.Errorf("%s: modules[%d] (%s): source: %w", PolicyFileName, i, m.Name, err)
		}
	}
	return pf, nil
}

// Validate checks a bundle's consistency: a valid policy file first, each
// file's path fits its media type, every module file the policy file
// names is present and no other, and every cases file names a module of
// the policy file and parses.
func (b *Bundle) Validate() error {
	if len(b.Files) == 0 || b.Files[0].Path != PolicyFileName || b.Files[0].MediaType != MediaTypePolicyFile {
		return fmt.Errorf("the first file must be %s", PolicyFileName)
	}
	pf, err := parsePolicy(b.Files[0].Data)
	if err != nil {
		return err
	}
	want := map[string]string{} // module path → module name
	names := map[string]bool{}
	for _, m := range pf.Modules {
		names[m.Name] = true
		if !strings.HasPrefix(m.Source, config.BuiltinPrefix) {
			want[m.Source] = m.Name
		}
	}
	seen := map[string]bool{}
	for _, f := range b.Files[1:] {
		if err := checkPath(f.Path, f.MediaType); err != nil {
			return err
		}
		if seen[f.Path] {
			return fmt.Errorf("%s is given twice", f.Path)
		}
		seen[f.Path] = true
		switch f.MediaType {
		case MediaTypeModule:
			if _, ok := want[f.Path]; !ok {
				return fmt.Errorf("%s: no module of %s has it as source", f.Path, PolicyFileName)
			}
		case MediaTypeCases:
			mod := strings.TrimSuffix(path.Base(f.Path), ".jsonl")
			if !names[mod] {
				return fmt.Errorf("%s: %s has no module named %q", f.Path, PolicyFileName, mod)
			}
			if _, err := engine.ParseCases(bytes.NewReader(f.Data)); err != nil {
				return fmt.Errorf("%s: %w", f.Path, err)
			}
		default:
			return fmt.Errorf("%s: media type %s", f.Path, f.MediaType)
		}
	}
	for p, name := range want {
		if !seen[p] {
			return fmt.Errorf("module %q: %s is not in the bundle", name, p)
		}
	}
	return nil
}

// WriteDir writes the bundle's files into dir (created 0700 if missing),
// each 0600 at its path. It writes only inside dir (an os.Root): a
// symlink there that leads out of it is an error, not followed.
func (b *Bundle) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, f := range b.Files {
		p := filepath.FromSlash(f.Path)
		if d := filepath.Dir(p); d != "." {
			if err := root.MkdirAll(d, 0o700); err != nil {
				return fmt.Errorf("%s: %w", filepath.Join(dir, p), err)
			}
		}
		if err := root.WriteFile(p, f.Data, 0o600); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(dir, p), err)
		}
	}
	return nil
}

// CaseFailure is a test case of a bundle that did not pass.
type CaseFailure struct {
	// File is the cases file (tests/NAME.jsonl) and Line the case's line.
	File string
	Line int
	// Name is the case's name; Mismatches say what differed.
	Name       string
	Mismatches []string
}

// Pins are the sha256 digests (hex) of b's files by their path once
// written to dir: what engine.Options.Pins takes.
func (b *Bundle) Pins(dir string) map[string]string {
	pins := make(map[string]string, len(b.Files))
	for _, f := range b.Files {
		sum := sha256.Sum256(f.Data)
		pins[filepath.Join(dir, filepath.FromSlash(f.Path))] = hex.EncodeToString(sum[:])
	}
	return pins
}

// RunCases runs the bundle's test cases, each file against the module it
// names, loaded from dir (where the bundle is written; a file whose bytes
// are not b's is refused, naming the sha256 pin mismatch) with the policy
// file's config and the host options. It returns the cases that failed,
// and an error when a module or a cases file cannot be loaded.
func RunCases(ctx context.Context, dir string, b *Bundle, host wasmhost.Options) (passed int, failed []CaseFailure, err error) {
	pins := b.Pins(dir)
	pf, err := config.LoadPolicyFileSHA256(filepath.Join(dir, PolicyFileName), pins[filepath.Join(dir, PolicyFileName)])
	if err != nil {
		return 0, nil, err
	}
	for _, f := range b.Files {
		if f.MediaType != MediaTypeCases {
			continue
		}
		name := strings.TrimSuffix(path.Base(f.Path), ".jsonl")
		var spec *config.PolicyModule
		for i := range pf.Modules {
			if pf.Modules[i].Name == name {
				spec = &pf.Modules[i]
			}
		}
		if spec == nil {
			return passed, failed, fmt.Errorf("%s: no module named %q", f.Path, name)
		}
		cases, err := engine.ParseCases(bytes.NewReader(f.Data))
		if err != nil {
			return passed, failed, fmt.Errorf("%s: %w", f.Path, err)
		}
		m, err := engine.OpenModuleSHA256(ctx, spec.Source, pins[spec.Source], spec.Config, host)
		if err != nil {
			return passed, failed, fmt.Errorf("%s: module %q does not load: %w", f.Path, name, err)
		}
		for _, c := range cases {
			r := engine.RunCase(ctx, m, c)
			if r.Pass {
				passed++
				continue
			}
			failed = append(failed, CaseFailure{File: f.Path, Line: c.Line, Name: r.Name, Mismatches: r.Mismatches})
		}
		_ = m.Close(context.WithoutCancel(ctx))
	}
	return passed, failed, nil
}
