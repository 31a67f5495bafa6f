package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPolicyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.json")
	data := `{"audit_log":"-","modules":[{"source":"builtin:rules","config":{"default":"allow"}},{"source":"mine.wasm","mode":"audit"}]}`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	pf, err := LoadPolicyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if pf.Modules[0].Name != "rules" || pf.Modules[1].Name != "mine" || pf.Modules[1].Source != filepath.Join(dir, "mine.wasm") {
		t.Fatalf("unexpected modules: %+v", pf.Modules)
	}
	for in, want := range map[string]string{
		`{"modules":[{"source":"builtin:rules","mdoe":"audit"}]}`:                         `unknown field "mdoe"`,
		`{"modules":[{"name":"x"}]}`:                                                      "source is required",
		`{"modules":[{"source":"a.wasm"},{"source":"b/a.wasm"}]}`:                         `duplicate module name "a"`,
		`{"modules":[{"source":"a.wasm","mode":"warn"}]}`:                                 `mode "warn"`,
		`{"modules":[{"source":"a.wasm","hooks":["after_tool_call"]}]}`:                   `(a): unknown hook "after_tool_call"`,
		`{"modules":[{"source":"a.wasm","hooks":["decide_approval","decide_approval"]}]}`: `hook "decide_approval" listed twice`,
		`{"modules":[{"source":"a.wasm","sha256":"zz"}]}`:                                 "sha256 must be 64 hex digits",
		`{"modules":[{"source":"a.wasm","sha256":"` + strings.Repeat("g", 64) + `"}]}`:    "sha256 must be 64 hex digits",
	} {
		_, err := ParsePolicyFile("p.json", []byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want error containing %q", in, err, want)
		}
	}
}
