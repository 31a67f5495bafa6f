package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDocumentToolPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		json string
		want *ToolPolicy
		err  string // substring of the error; "" for none
	}{
		{name: "absent", json: `{}`, want: &ToolPolicy{}},
		{
			name: "profile, alsoAllow and deny, trimmed",
			json: `{tools: {profile: "minimal", alsoAllow: [" bundle-mcp ", ""], deny: ["docs__*"]}}`,
			want: &ToolPolicy{Profile: "minimal", AlsoAllow: []string{"bundle-mcp"}, Deny: []string{"docs__*"}},
		},
		{
			name: "allow",
			json: `{"tools": {"allow": ["outlook__send_mail"]}}`,
			want: &ToolPolicy{Allow: []string{"outlook__send_mail"}},
		},
		{
			name: "sandbox all with alsoAllow",
			json: `{agents: {defaults: {sandbox: {mode: "all"}}}, tools: {sandbox: {tools: {alsoAllow: ["web_search", "bundle-mcp"], deny: ["x__y"]}}}}`,
			want: &ToolPolicy{SandboxMode: "all", Sandboxed: true, Sandbox: SandboxToolPolicy{AlsoAllow: []string{"web_search", "bundle-mcp"}, Deny: []string{"x__y"}}},
		},
		{
			name: "sandbox non-main with explicit allow",
			json: `{agents: {defaults: {sandbox: {mode: "non-main"}}}, tools: {sandbox: {tools: {allow: []}}}}`,
			want: &ToolPolicy{SandboxMode: "non-main", Sandboxed: true, Sandbox: SandboxToolPolicy{Allow: []string{}, HasAllow: true}},
		},
		{
			name: "sandbox off",
			json: `{agents: {defaults: {sandbox: {mode: "off"}}}}`,
			want: &ToolPolicy{SandboxMode: "off"},
		},
		{name: "unknown profile", json: `{tools: {profile: "everything"}}`, err: `tools.profile: unknown profile "everything"`},
		{name: "allow and alsoAllow", json: `{tools: {allow: ["a"], alsoAllow: ["b"]}}`, err: "tools: allow and alsoAllow cannot both be set"},
		{name: "sandbox allow and alsoAllow", json: `{tools: {sandbox: {tools: {allow: ["a"], alsoAllow: ["b"]}}}}`, err: "tools.sandbox.tools: allow and alsoAllow"},
		{name: "deny not a list", json: `{tools: {deny: "bundle-mcp"}}`, err: "tools.deny: expected an array of strings, got a string"},
		{name: "entry not a string", json: `{tools: {alsoAllow: ["a", 3]}}`, err: "tools.alsoAllow[1]: expected a string, got a number"},
		{name: "tools not an object", json: `{tools: []}`, err: "tools: expected an object, got an array"},
		{name: "sandbox not an object", json: `{tools: {sandbox: true}}`, err: "tools.sandbox: expected an object, got a boolean"},
		{name: "unknown sandbox mode", json: `{agents: {defaults: {sandbox: {mode: "some"}}}}`, err: `agents.defaults.sandbox.mode: unknown sandbox mode "some"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc, err := ParseDocument("openclaw.json", []byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			got, err := doc.ToolPolicy()
			if tt.err != "" {
				var ce *ConfigError
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want a *ConfigError containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ToolPolicy() = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}
