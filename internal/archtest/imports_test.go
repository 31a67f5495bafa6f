package archtest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/openclaw-go/openclaw"

type pkg struct {
	ImportPath string
	Deps       []string
	Standard   bool
}

// listDeps returns every package of the module with its transitive deps.
func listDeps(t *testing.T) map[string]pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps=false", "-json=ImportPath,Deps,Standard", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

func isStd(dep string) bool {
	first, _, _ := strings.Cut(dep, "/")
	return !strings.Contains(first, ".")
}

func TestImportRules(t *testing.T) {
	pkgs := listDeps(t)
	rules := []struct {
		pkg    string // the package ("." is the module root) and, unless exact, its sub-packages
		exact  bool
		forbid func(dep string) bool
		why    string
	}{
		{".", true, func(d string) bool { return !isStd(d) }, "the module root holds only the release version: a stdlib-only leaf"},
		{"policies", true, func(d string) bool { return !isStd(d) }, "the policy contract is a stdlib-only leaf"},
		{"policies/internal/strictjson", false, func(d string) bool { return !isStd(d) }, "the strict decoder of module output is a stdlib-only leaf"},
		{"wasmhost/wasmbin", true, func(d string) bool { return !isStd(d) }, "the Wasm binary reader is a stdlib-only leaf that wasmhost, the engine and the OPA adapter share"},
		{"gateway/protocol", true, func(d string) bool { return !isStd(d) }, "the protocol vocabulary is a stdlib-only leaf"},
		{"internal/redact", true, func(d string) bool { return !isStd(d) }, "redaction is a stdlib-only leaf"},
		{"config", false, func(d string) bool { return strings.HasPrefix(d, module+"/") && d != module+"/internal/redact" }, "config is a leaf: of the module it imports only internal/redact"},
		{"wasmhost", false, func(d string) bool {
			return strings.Contains(d, "modelcontextprotocol") || strings.HasPrefix(d, module+"/policies")
		}, "wasmhost is MCP- and policy-unaware"},
		{"bridge", false, func(d string) bool { return strings.HasPrefix(d, module+"/wasmhost") || strings.Contains(d, "wazero") }, "surfaces depend on the policy contract, not the Wasm host"},
		{"bridge/gwclient", false, func(d string) bool { return d == module+"/bridge" }, "the Gateway client must not import the bridge"},
		{"bridge/gwclient", false, func(d string) bool {
			return d == module+"/transport" || strings.Contains(d, "modelcontextprotocol") || strings.HasPrefix(d, "golang.org/x/oauth2")
		}, "the Gateway client speaks WebSocket, not MCP: it needs neither transport nor go-sdk"},
		{"runtime", false, func(d string) bool { return strings.HasPrefix(d, module+"/wasmhost") || strings.Contains(d, "wazero") }, "surfaces depend on the policy contract, not the Wasm host"},
		{"proxy", false, func(d string) bool {
			return strings.HasPrefix(d, module+"/wasmhost") || strings.HasPrefix(d, module+"/policies/engine") || strings.Contains(d, "wazero")
		}, "the proxy is a surface: it is handed the policy interfaces, never the engine or the Wasm host"},
		{"transport", false, func(d string) bool {
			return strings.HasPrefix(d, module+"/policies") || strings.HasPrefix(d, module+"/wasmhost")
		}, "transports are policy-unaware"},
	}
	checked := 0
	for _, r := range rules {
		for path, p := range pkgs {
			rel := strings.TrimPrefix(path, module+"/")
			if path == module {
				rel = "."
			}
			if rel != r.pkg && (r.exact || !strings.HasPrefix(rel, r.pkg+"/")) {
				continue
			}
			checked++
			for _, d := range p.Deps {
				if r.forbid(d) {
					t.Errorf("%s imports %s: %s", rel, d, r.why)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no package matched the rules: is the module path right?")
	}
}
