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

// stdlibLeaves are the packages under internal/ that import only the
// standard library. Such a leaf may be imported from anywhere, the
// stdlib-only leaves below included: it brings no dependency with it.
var stdlibLeaves = []string{"internal/glob", "internal/jsonw", "internal/oauthcred", "internal/procfs", "internal/redact"}

// leafOK reports whether a stdlib-only leaf may import dep: the standard
// library and the stdlib-only internal leaves.
func leafOK(dep string) bool {
	for _, l := range stdlibLeaves {
		if dep == module+"/"+l {
			return true
		}
	}
	return isStd(dep)
}

func TestImportRules(t *testing.T) {
	pkgs := listDeps(t)
	type rule struct {
		pkg    string // the package ("." is the module root) and, unless exact, its sub-packages
		exact  bool
		forbid func(dep string) bool
		why    string
	}
	var rules []rule
	for _, l := range stdlibLeaves {
		rules = append(rules, rule{l, false, func(d string) bool { return !isStd(d) }, "an internal leaf imports only the standard library"})
	}
	rules = append(rules, []rule{
		{".", true, func(d string) bool { return !leafOK(d) }, "the module root holds only the release version: a stdlib-only leaf"},
		{"policies", true, func(d string) bool { return !leafOK(d) }, "the policy contract is a stdlib-only leaf"},
		{"policies/internal/strictjson", false, func(d string) bool { return !leafOK(d) }, "the strict decoder of module output is a stdlib-only leaf"},
		{"policies/decisionlog", false, func(d string) bool { return d != module+"/policies" && !leafOK(d) }, "the decision log shipper imports only the standard library, the policy contract and the stdlib-only leaves"},
		{"wasmhost/wasmbin", true, func(d string) bool { return !leafOK(d) }, "the Wasm binary reader is a stdlib-only leaf that wasmhost, the engine and the OPA adapter share"},
		{"gateway/protocol", true, func(d string) bool { return !leafOK(d) }, "the protocol vocabulary is a stdlib-only leaf"},
		{"config", false, func(d string) bool { return strings.HasPrefix(d, module+"/") && !leafOK(d) }, "config is a leaf: of the module it imports only the stdlib-only internal leaves"},
		{"wasmhost", false, func(d string) bool {
			return !isStd(d) && !strings.HasPrefix(d, "github.com/tetratelabs/wazero") && !strings.HasPrefix(d, "golang.org/x/sys/") &&
				d != module+"/wasmhost/wasmbin"
		}, "wasmhost is MCP- and policy-unaware: it imports only the standard library, golang.org/x/sys, wazero and wasmhost/wasmbin"},
		{"bridge", false, func(d string) bool { return strings.HasPrefix(d, module+"/wasmhost") || strings.Contains(d, "wazero") }, "surfaces depend on the policy contract, not the Wasm host"},
		{"bridge/gwclient", false, func(d string) bool { return d == module+"/bridge" }, "the Gateway client must not import the bridge"},
		{"bridge/gwclient", false, func(d string) bool {
			return d == module+"/transport" || strings.Contains(d, "modelcontextprotocol") || strings.HasPrefix(d, "golang.org/x/oauth2")
		}, "the Gateway client speaks WebSocket, not MCP: it needs neither transport nor go-sdk"},
		{"runtime", false, func(d string) bool {
			if strings.Contains(d, "wazero") {
				return true
			}
			switch d {
			case module + "/transport", module + "/policies", module + "/config":
				return false
			}
			return strings.HasPrefix(d, module+"/") && !leafOK(d)
		}, "the embedded runtime imports, of this module, only transport, the policy contract (not its sub-packages), config and the stdlib-only leaves; never the Wasm host"},
		{"proxy", false, func(d string) bool {
			return strings.HasPrefix(d, module+"/wasmhost") || strings.HasPrefix(d, module+"/policies/engine") || strings.Contains(d, "wazero")
		}, "the proxy is a surface: it is handed the policy interfaces, never the engine or the Wasm host"},
		{"proxy/sharedstate", false, func(d string) bool {
			switch d {
			case module + "/policies/ratelimit", module + "/policies", module + "/config": // the rate-limit Store it implements
				return false
			}
			return (strings.HasPrefix(d, module+"/") && !leafOK(d)) || strings.Contains(d, "modelcontextprotocol") || strings.Contains(d, "wazero")
		}, "the shared state of replicas is a leaf over go-redis: of this module it imports only policies/ratelimit (with the policy contract and config) and the stdlib-only leaves, and neither go-sdk nor wazero"},
		{"transport", false, func(d string) bool {
			return strings.HasPrefix(d, module+"/") && d != module+"/config" && !leafOK(d)
		}, "transports are policy-unaware: of this module they import only config and the stdlib-only leaves"},
	}...)
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

// TestTestOnlyProvider: the OpenID provider of the tests (zitadel's, in
// internal/testkit/oidcop) reaches no binary: no package but oidcop
// imports zitadel, and none imports oidcop (tests do).
func TestTestOnlyProvider(t *testing.T) {
	t.Parallel()
	const op = module + "/internal/testkit/oidcop"
	for path, p := range listDeps(t) {
		if path == op {
			continue
		}
		for _, d := range p.Deps {
			if d == op || strings.HasPrefix(d, "github.com/zitadel/") {
				t.Errorf("%s imports %s: the test OpenID provider is for tests only", path, d)
			}
		}
	}
}
