package policies

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

type fixed struct {
	name string
	v    Verdict
	err  error
	seen *json.RawMessage
}

func (f fixed) Name() string { return f.name }
func (f fixed) BeforeToolCall(_ context.Context, c *ToolCall) (Verdict, error) {
	if f.seen != nil {
		*f.seen = c.Arguments
	}
	return f.v, f.err
}

func TestChainCombination(t *testing.T) {
	t.Parallel()
	allow := fixed{name: "a", v: Verdict{Decision: Allow}}
	approve := fixed{name: "b", v: Verdict{Decision: RequireApproval, Reason: "writes"}}
	block := fixed{name: "c", v: Verdict{Decision: Block, Reason: "no"}}
	broken := fixed{name: "d", err: errors.New("trap")}
	bogus := fixed{name: "e", v: Verdict{Decision: "maybe"}}
	tests := []struct {
		name    string
		entries []ChainEntry
		want    Decision
		module  string
	}{
		{"empty allows", nil, Allow, ""},
		{"allow", []ChainEntry{{Hook: allow}}, Allow, ""},
		{"approval over allow", []ChainEntry{{Hook: allow}, {Hook: approve}}, RequireApproval, "b"},
		{"block over approval", []ChainEntry{{Hook: approve}, {Hook: block}}, Block, "c"},
		{"error fails closed", []ChainEntry{{Hook: allow}, {Hook: broken}}, Block, "d"},
		{"unknown decision fails closed", []ChainEntry{{Hook: bogus}}, Block, "e"},
		{"audit mode never blocks", []ChainEntry{{Hook: block, Mode: AuditOnly}, {Hook: allow}}, Allow, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			log := NewAuditLog(&buf)
			d := NewChain(tt.entries, &ChainOptions{Audit: log}).BeforeToolCall(context.Background(),
				&ToolCall{Surface: SurfaceServe, Tool: ToolRef{Name: "t"}, Arguments: json.RawMessage(`{"x":1}`)})
			if d.Decision != tt.want || d.Module != tt.module {
				t.Fatalf("got %s by %q (%s), want %s by %q", d.Decision, d.Module, d.Reason, tt.want, tt.module)
			}
			if n := strings.Count(buf.String(), "\n"); n != len(tt.entries) && tt.want != Block {
				t.Fatalf("audit lines = %d, want %d", n, len(tt.entries))
			}
		})
	}
}

func TestChainStopsAtFirstBlockAndPassesRewrites(t *testing.T) {
	t.Parallel()
	var seen json.RawMessage
	rewrite := fixed{name: "r", v: Verdict{Decision: Allow, Arguments: json.RawMessage(`{"x":2}`)}}
	check := fixed{name: "s", v: Verdict{Decision: Allow}, seen: &seen}
	d := NewChain([]ChainEntry{{Hook: rewrite}, {Hook: check}}, nil).BeforeToolCall(context.Background(),
		&ToolCall{Arguments: json.RawMessage(`{"x":1}`)})
	if string(seen) != `{"x":2}` || string(d.Arguments) != `{"x":2}` {
		t.Fatalf("rewrite not passed on: seen %s, final %s", seen, d.Arguments)
	}
	if d.RewrittenBy != "r" {
		t.Errorf("RewrittenBy = %q, want the rewriting module r", d.RewrittenBy)
	}
	// A later require_approval keeps the name of the module that rewrote.
	ask := fixed{name: "a", v: Verdict{Decision: RequireApproval, Title: "ok?"}}
	if d := NewChain([]ChainEntry{{Hook: rewrite}, {Hook: ask}}, nil).BeforeToolCall(context.Background(),
		&ToolCall{Arguments: json.RawMessage(`{"x":1}`)}); d.Module != "a" || d.RewrittenBy != "r" || string(d.Arguments) != `{"x":2}` {
		t.Errorf("after a rewrite and an approval: %+v", d)
	}
	var buf bytes.Buffer
	never := fixed{name: "never", err: errors.New("must not run")}
	d = NewChain([]ChainEntry{{Hook: fixed{name: "c", v: Verdict{Decision: Block}}}, {Hook: never}},
		&ChainOptions{Audit: NewAuditLog(&buf)}).BeforeToolCall(context.Background(), &ToolCall{})
	if d.Decision != Block || strings.Contains(buf.String(), "never") {
		t.Fatalf("chain did not stop at first block: %+v, audit %s", d, buf.String())
	}
	if got := d.Message(); got != `blocked by policy "c"` {
		t.Fatalf("Message() = %q", got)
	}
}

type ctxHook struct{}

func (ctxHook) Name() string { return "slow" }
func (ctxHook) BeforeToolCall(ctx context.Context, _ *ToolCall) (Verdict, error) {
	<-ctx.Done()
	return Verdict{}, ctx.Err()
}

// A caller that gives up while a module decides is audited as a
// cancellation, not as a failure of the module.
func TestChainCancelledIsNotAModuleFailure(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d := NewChain([]ChainEntry{{Hook: ctxHook{}}}, &ChainOptions{Audit: NewAuditLog(&buf)}).BeforeToolCall(ctx, &ToolCall{Tool: ToolRef{Name: "t"}})
	if d.Decision != Block || strings.Contains(d.Reason, "failed") {
		t.Fatalf("decision %+v", d)
	}
	var rec AuditRecord
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Decision != DecisionCancelled || rec.Error == "" {
		t.Fatalf("audit record %+v", rec)
	}
}

// TestAuditNamesIdentity: a call and an approval by an authenticated
// caller are audited with its subject and issuer; one without leaves them
// out.
func TestAuditNamesIdentity(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := NewAuditLog(&buf)
	id := &Identity{Issuer: "https://idp.example", Subject: "alice"}
	NewChain([]ChainEntry{{Hook: fixed{name: "m", v: Verdict{Decision: Allow}}}}, &ChainOptions{Audit: log}).
		BeforeToolCall(context.Background(), &ToolCall{Identity: id, Tool: ToolRef{Name: "t"}})
	NewApprovalChain([]ApprovalEntry{{Hook: denyAll{}}}, &ApprovalChainOptions{Audit: log}).
		DecideApproval(context.Background(), &ApprovalRequest{Kind: ApprovalTool, Identity: id, Tool: ToolRef{Name: "t"}})
	NewChain([]ChainEntry{{Hook: fixed{name: "m", v: Verdict{Decision: Allow}}}}, &ChainOptions{Audit: log}).
		BeforeToolCall(context.Background(), &ToolCall{Tool: ToolRef{Name: "t"}})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("audit log:\n%s", buf.String())
	}
	for _, l := range lines[:2] {
		if !strings.Contains(l, `"subject":"alice","issuer":"https://idp.example"`) {
			t.Errorf("record without the identity: %s", l)
		}
	}
	if strings.Contains(lines[2], "subject") {
		t.Errorf("unauthenticated record names a subject: %s", lines[2])
	}
}

type denyAll struct{}

func (denyAll) Name() string { return "a" }
func (denyAll) DecideApproval(context.Context, *ApprovalRequest) (ApprovalVerdict, error) {
	return ApprovalVerdict{Decision: Deny}, nil
}
