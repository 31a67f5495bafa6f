package bridge

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
)

// rewriteHook is a before_tool_call module "redact" that allows every call
// with fixed arguments ("" keeps them).
func rewriteHook(args string) *policiestest.BeforeToolCallHook {
	h := &policiestest.BeforeToolCallHook{Module: "redact"}
	if args != "" {
		h.Verdict.Arguments = json.RawMessage(args)
	}
	return h
}

// auditLines decodes a JSONL audit log.
func auditLines(t *testing.T, log string) []policies.AuditRecord {
	t.Helper()
	var out []policies.AuditRecord
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if line == "" {
			continue
		}
		var r policies.AuditRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// TestRewriteAudited: when a module after another rewrites the arguments,
// the call goes out with them (routing arguments canonicalized) and the
// audit log says so, with the session key that was sent and the names of
// the rewritten arguments; an invalid rewrite blocks with a message that
// names who rewrote, never `policy ""`.
func TestRewriteAudited(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		rewrite     string
		tool        string
		args        map[string]any
		wantText    string // prefix of the result text
		wantError   bool
		wantRecord  *policies.AuditRecord // the bridge:rewrite record; nil means none
		wantGateway string                // params of the first Gateway call, "" means none
	}{
		{
			name:    "rewritten text and session key",
			rewrite: `{"session_key":" AGENT:MAIN:MAIN","text":"[redacted]"}`,
			tool:    ToolMessagesSend, args: map[string]any{"session_key": "agent:main:other", "text": "my secret"},
			wantText: "unsupported channel: imessage", wantError: true, // the captured send answer
			wantRecord: &policies.AuditRecord{SessionKey: "agent:main:main", Decision: AuditDecisionRewrite,
				Reason: `policy "redact" rewrote session_key, text; the call was sent with the rewritten values`},
			wantGateway: `{"key":"agent:main:main","includeDerivedTitles":true,"includeLastMessage":true}`,
		},
		{
			name:    "only the form changed",
			rewrite: `{ "session_key" : "agent:main:main" }`,
			tool:    ToolMessagesRead, args: map[string]any{"session_key": "agent:main:main"},
			wantText:    "messages: ",
			wantGateway: `{"key":"agent:main:main","limit":20}`,
		},
		{
			name:    "invalid rewrite",
			rewrite: `{"session_key":""}`,
			tool:    ToolMessagesRead, args: map[string]any{"session_key": "agent:main:main"},
			wantText: `blocked: policy "redact" rewrote the arguments of messages_read into invalid ones: ` +
				"Too small: expected string to have >=1 characters at session_key",
			wantError: true,
			wantRecord: &policies.AuditRecord{SessionKey: "agent:main:main", Decision: string(policies.Block),
				Reason: `policy "redact" rewrote the arguments of messages_read into invalid ones: ` +
					"Too small: expected string to have >=1 characters at session_key"},
		},
		{
			name: "no rewrite",
			tool: ToolMessagesRead, args: map[string]any{"session_key": "agent:main:main", "limit": 2},
			wantText:    "messages: ",
			wantGateway: `{"key":"agent:main:main","limit":2}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rules, _ := rulesChain(t, `{"default":"allow","rules":[]}`)
			log := &syncBuffer{}
			audit := policies.NewAuditLog(log)
			chain := policies.NewChain([]policies.ChainEntry{{Hook: rules.Modules()[0].Hook}, {Hook: rewriteHook(tt.rewrite)}},
				&policies.ChainOptions{Audit: audit})
			gw := &fixtureGateway{t: t}
			cs := connectClient(t, New(gw, &Options{Enforcer: chain, Audit: audit}), "2025-11-25")
			res := call(t, cs, context.Background(), tt.tool, tt.args)
			if got := resultText(res); !strings.HasPrefix(got, tt.wantText) || res.IsError != tt.wantError {
				t.Errorf("result = %q (isError %v), want %q… (isError %v)", got, res.IsError, tt.wantText, tt.wantError)
			}
			if strings.Contains(resultText(res), `policy ""`) {
				t.Errorf("the message names an empty module: %q", resultText(res))
			}
			calls := gw.recorded()
			switch {
			case tt.wantGateway == "" && len(calls) != 0:
				t.Errorf("Gateway calls = %v, want none", calls)
			case tt.wantGateway != "" && (len(calls) == 0 || string(calls[0].Params) != tt.wantGateway):
				t.Errorf("Gateway calls = %v, want first %s", calls, tt.wantGateway)
			}
			var got *policies.AuditRecord
			records := auditLines(t, log.String())
			for i := range records {
				if records[i].Module == AuditRewrite {
					got = &records[i]
				}
			}
			if tt.wantRecord == nil {
				if got != nil {
					t.Errorf("rewrite record %+v, want none", got)
				}
				return
			}
			if got == nil {
				t.Fatalf("no %s record in %s", AuditRewrite, log.String())
			}
			if got.SessionKey != tt.wantRecord.SessionKey || got.Decision != tt.wantRecord.Decision ||
				got.Reason != tt.wantRecord.Reason || got.Tool != tt.tool || got.Caller != "hook-test" ||
				got.Hook != policies.HookBeforeToolCall {
				t.Errorf("rewrite record = %+v, want %+v", got, tt.wantRecord)
			}
		})
	}
}
