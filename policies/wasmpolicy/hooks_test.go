package wasmpolicy_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// loadFile loads the module at path as name with config, closed when the
// test ends.
func loadFile(t *testing.T, name, path, config string, host wasmhost.Options) *wasmpolicy.Module {
	t.Helper()
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := wasmpolicy.Load(context.Background(), name, wasm, json.RawMessage(config), &wasmpolicy.Options{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// loadHooks loads testdata/hooks.wasm in the given mode (see hooks.wat).
func loadHooks(t *testing.T, mode string) *wasmpolicy.Module {
	return loadFile(t, "hooks", "testdata/hooks.wasm", mode, wasmhost.Options{CallTimeout: 50 * time.Millisecond, PoolSize: 1})
}

var hookCases = []struct {
	mode, name string
	kind       error
	san, dec   string // expected message parts
}{
	{"1", "invalid JSON", wasmhost.ErrABI, `invalid names "nope"`, `invalid approval verdict "nope"`},
	{"2", "unknown field or decision", wasmhost.ErrABI, `unknown field "extra"`, `unknown decision "maybe" (want allow-once, allow-always, deny or ask)`},
	{"3", "trap", wasmhost.ErrTrap, "unreachable", "unreachable"},
	{"4", "endless loop", wasmhost.ErrTimeout, "deadline of 50ms exceeded", "deadline of 50ms exceeded"},
	{"5", "result outside memory", wasmhost.ErrABI, "outside memory", "outside memory"},
	{"6", "contract broken", wasmhost.ErrABI, `invalid name "web fetch"`, "negative ttl_ms -5"},
	{"7", "no result", wasmhost.ErrABI, "returned 0", "returned 0"},
}

var webReq = &policies.SanitizeRequest{Servers: []policies.SanitizeServer{{Name: "web", Tools: []string{"fetch"}}}}

// TestHooksFailClosed: every misbehaviour of a sanitize_tool_names module
// fails the catalog build, and of a decide_approval module denies, with a
// typed error naming the module; the module keeps answering (a fresh
// instance each time) and a chain turns the failure into its rule.
func TestHooksFailClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range hookCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := loadHooks(t, tc.mode)
			for i := 0; i < 3; i++ {
				res, err := m.SanitizeToolNames(ctx, webReq)
				if res != nil || !errors.Is(err, tc.kind) || !containsFailure(err.Error(), tc.san) ||
					!strings.HasPrefix(err.Error(), `wasm module "hooks": sanitize_tool_names: `) {
					t.Fatalf("sanitize: got %v, %v; want %v containing %q", res, err, tc.kind, tc.san)
				}
				v, err := m.DecideApproval(ctx, &policies.ApprovalRequest{Kind: policies.ApprovalExec, Command: "ls"})
				if v.Decision != policies.Deny || !errors.Is(err, tc.kind) || !containsFailure(err.Error(), tc.dec) ||
					!strings.HasPrefix(err.Error(), `wasm module "hooks": decide_approval: `) || v.Reason != err.Error() {
					t.Fatalf("decide: got %+v, %v; want deny, %v containing %q", v, err, tc.kind, tc.dec)
				}
			}
			_, err := policies.NewSanitizeChain([]policies.SanitizeEntry{{Hook: m}}, nil).SanitizeToolNames(ctx, webReq)
			if !strings.HasPrefix(err.Error(), `sanitize_tool_names: module "hooks": wasm module "hooks"`) {
				t.Errorf("sanitize chain: %v", err)
			}
			out := policies.NewApprovalChain([]policies.ApprovalEntry{{Hook: m}}, nil).DecideApproval(ctx, &policies.ApprovalRequest{Kind: policies.ApprovalTool})
			if out.Decision != policies.Deny || out.Module != "hooks" {
				t.Errorf("approval chain: %+v", out)
			}
		})
	}
}

func TestHooksValid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := loadHooks(t, "0")
	res, err := m.SanitizeToolNames(ctx, webReq)
	if err != nil || res.Servers[0].Safe != "web" || res.Servers[0].Tools[0].Name != "web__fetch" {
		t.Fatalf("sanitize: %+v, %v", res, err)
	}
	// The same answer for another catalog breaks the contract.
	_, err = m.SanitizeToolNames(ctx, &policies.SanitizeRequest{Servers: []policies.SanitizeServer{{Name: "web", Tools: []string{"fetch", "get"}}}})
	if !errors.Is(err, wasmhost.ErrABI) || !strings.Contains(err.Error(), `server "web": 1 tools answered for 2 asked`) {
		t.Fatalf("mismatched answer: %v", err)
	}
	v, err := m.DecideApproval(ctx, &policies.ApprovalRequest{Kind: policies.ApprovalPlugin, Request: json.RawMessage(`{"title":"x"}`)})
	if err != nil || v != (policies.ApprovalVerdict{Decision: policies.AllowOnce, Reason: "fine"}) {
		t.Fatalf("decide: %+v, %v", v, err)
	}
	if _, err := m.DecideApproval(ctx, &policies.ApprovalRequest{Kind: policies.ApprovalPlugin, Request: json.RawMessage(`{`)}); !errors.Is(err, wasmhost.ErrABI) {
		t.Fatalf("invalid request JSON: %v", err)
	}
}

func TestHookNotExported(t *testing.T) {
	t.Parallel()
	wasm, err := os.ReadFile("../../guests/testdata/allow.wasm")
	if err != nil {
		t.Fatal(err)
	}
	m, err := wasmpolicy.Load(context.Background(), "allow", wasm, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	if _, err := m.SanitizeToolNames(context.Background(), webReq); !errors.Is(err, wasmhost.ErrABI) || !strings.Contains(err.Error(), "does not export sanitize_tool_names") {
		t.Errorf("sanitize: %v", err)
	}
	if v, err := m.DecideApproval(context.Background(), &policies.ApprovalRequest{Kind: policies.ApprovalExec}); v.Decision != policies.Deny || err == nil {
		t.Errorf("decide: %+v, %v", v, err)
	}
}

func TestDecodeStrict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ out, want string }{
		{`{"servers":[{"safe":"a","tools":[{"name":"a__b"},{"reject":"r"}]}]}`, ""},
		{` { "servers" : [ { "tools" : [ ] , "safe" : "a" } ] } `, ""},
		{`{"servers":[{"safe":"a\u0062","tools":[{"name":"é"}]}]}`, ""},
		{`{"servers":[]} x`, "data after the JSON object"},
		{`{"servers":[],"servers":[]}`, `repeated field "servers"`},
		{`{"Servers":[]}`, `unknown field "Servers"`},
		{`{"servers":[{"safe":"a","tools":[{"name":"a__b","name":"x"}]}]}`, `repeated field "name"`},
		{`{"servers":[{"safe":"a","Safe":"b","tools":[]}]}`, `unknown field "Safe"`},
		{`{"servers":[{"safe":"a","tools":[{"nam":"a"}]}]}`, `unknown field "nam"`},
		{`{}`, `no "servers"`},
		{`{"servers":[{"safe":1}]}`, "want a string"},
		{`{"servers":[{"safe":"a\x01"}]}`, "invalid character"},
		{`{"servers":[{"safe":"a`, "unterminated string"},
	} {
		_, err := wasmpolicy.DecodeSanitized([]byte(tc.out))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("DecodeSanitized(%s) = %v, want %q", tc.out, err, tc.want)
		}
	}
	for _, tc := range []struct{ out, want string }{
		{`{"decision":"ask","ttl_ms":1000,"reason":"r"}`, ""},
		{`{"decision":"ask","ttl":1}`, `unknown field "ttl"`},
		{`{}`, "no decision"},
		{`{"decision":"deny"}{}`, "invalid character '{' after top-level value"},
		{`{"decision":"deny","decision":"allow-always"}`, `repeated field "decision"`},
		{`{"Decision":"allow-always"}`, `unknown field "Decision" (field names are case-sensitive: want "decision")`},
		{`{"decision":"deny","reason":"r","Reason":"s"}`, `unknown field "Reason"`},
		{`{"decision":"ask","ttl_ms":1,"ttl_ms":0}`, `repeated field "ttl_ms"`},
	} {
		_, err := wasmpolicy.DecodeApprovalVerdict([]byte(tc.out))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("DecodeApprovalVerdict(%s) = %v, want %q", tc.out, err, tc.want)
		}
	}
}

// FuzzDecodeSanitized: the hand decoder accepts only what encoding/json
// reads into the same result, never panics.
func FuzzDecodeSanitized(f *testing.F) {
	f.Add([]byte(`{"servers":[{"safe":"a","tools":[{"name":"a__b"},{"reject":"r"}]}]}`))
	f.Add([]byte(`{"servers":[{"safe":"a\u00e9","tools":[]}]}`))
	f.Fuzz(func(t *testing.T, out []byte) {
		res, err := wasmpolicy.DecodeSanitized(out)
		if err != nil {
			return
		}
		var std policies.SanitizeResult
		if err := json.Unmarshal(out, &std); err != nil {
			t.Fatalf("hand decoder accepted %q, encoding/json: %v", out, err)
		}
		a, _ := json.Marshal(res)
		b, _ := json.Marshal(&std)
		if string(a) != string(b) {
			t.Fatalf("%q: hand %s, encoding/json %s", out, a, b)
		}
	})
}

// containsFailure reports whether the failure message got contains part;
// for a deadline ("deadline of 50ms exceeded") the wall-clock cap that
// stops a guest starved of CPU by a loaded machine counts too.
func containsFailure(got, part string) bool {
	return strings.Contains(got, part) ||
		strings.HasPrefix(part, "deadline of ") && wallCap.MatchString(got)
}
