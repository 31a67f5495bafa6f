package config

import (
	"os"
	"path/filepath"
	"strconv"
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

// TestPolicyFileAuditLogPath checks that a relative audit_log lands next to
// the policy file, like a relative module source, whatever the current
// directory; "-", absolute paths and the empty default are kept.
func TestPolicyFileAuditLogPath(t *testing.T) {
	t.Parallel()
	abs := filepath.Join(t.TempDir(), "abs.jsonl")
	for _, tc := range []struct {
		name, auditLog, want string
	}{
		{"relative file", "audit.jsonl", "DIR/audit.jsonl"},
		{"relative subfolder", "logs/../logs/audit.jsonl", "DIR/logs/audit.jsonl"},
		{"dot prefix", "./audit.jsonl", "DIR/audit.jsonl"},
		{"stderr", "-", "-"},
		{"absolute", abs, abs},
		{"default", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "policy.json")
			data := `{"audit_log":` + strconv.Quote(tc.auditLog) + `,"modules":[{"source":"mine.wasm"}]}`
			if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
			pf, err := LoadPolicyFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.Replace(tc.want, "DIR", dir, 1)
			if want != "" && want != "-" {
				want = filepath.FromSlash(want)
			}
			if pf.AuditLog != want {
				t.Errorf("audit_log %q: got %q, want %q", tc.auditLog, pf.AuditLog, want)
			}
			if src := filepath.Join(dir, "mine.wasm"); pf.Modules[0].Source != src {
				t.Errorf("source: got %q, want %q", pf.Modules[0].Source, src)
			}
		})
	}
}

func TestPolicyFileToolPins(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(path, []byte(`{"modules":[],"tool_pins":{"file":"pins.json","mode":"warn"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	pf, err := LoadPolicyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if pf.ToolPins == nil || pf.ToolPins.File != filepath.Join(dir, "pins.json") || pf.ToolPins.Mode != "warn" {
		t.Fatalf("tool_pins = %+v", pf.ToolPins)
	}
	if _, err := ParsePolicyFile("p.json", []byte(`{"modules":[],"tool_pins":{"mode":"strict"}}`)); err == nil || !strings.Contains(err.Error(), `tool_pins: tool pins mode "strict" is not block, warn or audit`) {
		t.Fatalf("bad mode: %v", err)
	}
}

// TestPolicyFileDecisionLog: decision_log's files resolve against the
// policy file's folder; a URL that is not https (but http to a loopback
// host) is refused naming it; an empty token file is refused naming it.
func TestPolicyFileDecisionLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.json")
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("policy.json", `{"modules":[],"audit_fail_closed":true,"decision_log":{"url":"https://logs.example.com/v1/decisions","token_file":"tok","ca_file":"ca.pem","labels":{"fleet":"prod"},"buffer_events":50}}`)
	write("tok", "  s3cret\n")
	pf, err := LoadPolicyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dl := pf.DecisionLog
	if !pf.AuditFailClosed || dl.TokenFile != filepath.Join(dir, "tok") || dl.CAFile != filepath.Join(dir, "ca.pem") || dl.Labels["fleet"] != "prod" || dl.BufferEvents != 50 {
		t.Fatalf("decision_log %+v (audit_fail_closed %v)", dl, pf.AuditFailClosed)
	}
	if tok, err := dl.Token(); tok != "s3cret" || err != nil {
		t.Fatalf("token %q, %v", tok, err)
	}
	write("tok", "\n")
	if _, err := dl.Token(); err == nil || !strings.Contains(err.Error(), "decision_log.token_file: "+filepath.Join(dir, "tok")+" is empty") {
		t.Errorf("empty token file: %v", err)
	}
	// Two lines (a token and a comment, say): no HTTP header can carry it,
	// so every batch would fail; refused at start instead, naming the file.
	write("tok", "s3cret\n# rotated monthly\n")
	if _, err := dl.Token(); err == nil || !strings.Contains(err.Error(), "decision_log.token_file: "+filepath.Join(dir, "tok")) {
		t.Errorf("a token of two lines: %v, want refused naming the file", err)
	}
	for _, tc := range []struct{ dl, want string }{
		{`{"url":"http://logs.example.com/"}`, `decision_log: url "http://logs.example.com/": http is allowed only to a loopback host`},
		{`{"url":"ftp://logs.example.com/"}`, `want an https:// URL`},
		{`{}`, `decision_log: url is required`},
		{`{"url":"https://x/","buffer_events":-1}`, `must be ≥ 0`},
		{`{"url":"https://x/","buffer_events":"10"}`, `decision_log.buffer_events: want a whole number, got a string`},
	} {
		if _, err := ParsePolicyFile("p.json", []byte(`{"modules":[],"decision_log":`+tc.dl+`}`)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.dl, err, tc.want)
		}
	}
	if _, err := ParsePolicyFile("p.json", []byte(`{"modules":[],"decision_log":{"url":"http://127.0.0.1:9000/logs"}}`)); err != nil {
		t.Errorf("http to loopback: %v", err)
	}
}

func TestPolicyFileBundle(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(path, []byte(`{"modules":[],"bundle":{"ref":"oci://r.example/team/p:live","keys":["k.pub","/etc/k2.pub"],"poll_interval_s":30}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	pf, err := LoadPolicyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b := pf.Bundle; b == nil || b.Keys[0] != filepath.Join(dir, "k.pub") || b.Keys[1] != "/etc/k2.pub" || b.PollIntervalS != 30 {
		t.Fatalf("bundle = %+v", pf.Bundle)
	}
	for _, c := range []struct{ data, want string }{
		{`{"modules":[],"bundle":{"ref":"r.example/p:1","keys":["k"]}}`, "must be oci://"},
		{`{"modules":[],"bundle":{"ref":"oci://r.example/p:1"}}`, "at least one public key"},
		{`{"modules":[],"bundle":{"ref":"oci://r.example/p:1","keys":["k"],"poll_interval_s":-2}}`, "poll_interval_s -2"},
		{`{"modules":[{"source":"builtin:rules"}],"bundle":{"ref":"oci://r.example/p:1","keys":["k"]}}`, "lists no modules"},
		{`{"modules":[],"bundle":{"ref":"oci://r.example/p:1","keys":["k"],"pol_interval_s":5}}`, `unknown field "pol_interval_s"`},
	} {
		if _, err := ParsePolicyFile("p.json", []byte(c.data)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.data, err, c.want)
		}
	}
}
