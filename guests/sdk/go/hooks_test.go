package policy

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeSanitizeRequest(t *testing.T) {
	t.Parallel()
	in := `{"abi":1,"reserved":["conversations_list"],"servers":[{"name":"web","tools":["fetch url",""]},{"name":"empty","tools":[]}],` +
		`"proposed":[{"safe":"web","tools":[{"name":"web__fetch_url"},{"reject":"empty"}]},{"safe":"empty","tools":[]}],` +
		`"exposed":[{"server":"web","safe":"web","tools":["fetch url"],"names":["web__fetch-url"],"later":0}],"future":1}`
	var got SanitizeRequest
	if err := DecodeSanitizeRequest([]byte(in), &got); err != nil {
		t.Fatal(err)
	}
	want := SanitizeRequest{
		Reserved: []string{"conversations_list"},
		Servers:  []SanitizeServer{{Name: "web", Tools: []string{"fetch url", ""}}, {Name: "empty", Tools: []string{}}},
		Proposed: []SanitizedServer{{Safe: "web", Tools: []ToolName{{Name: "web__fetch_url"}, {Reject: "empty"}}}, {Safe: "empty"}},
		Exposed:  []ExposedServer{{Server: "web", Safe: "web", Tools: []string{"fetch url"}, Names: []string{"web__fetch-url"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{`{"servers":[{"name":1}]}`, `{"servers":{}}`, `{"reserved":[null]}`, `{"exposed":[{"server":"s","tools":["a"]}]}`} {
		var r SanitizeRequest
		if err := DecodeSanitizeRequest([]byte(bad), &r); err == nil {
			t.Errorf("DecodeSanitizeRequest(%s) succeeded", bad)
		}
	}
}

func TestAppendSanitizeResult(t *testing.T) {
	t.Parallel()
	res := SanitizeResult{Servers: []SanitizedServer{{Safe: "web", Tools: []ToolName{{Name: "web__a"}, {Reject: `has "quotes"`}}}, {Safe: "x"}}}
	got, err := AppendSanitizeResult(nil, &res)
	if want := `{"servers":[{"safe":"web","tools":[{"name":"web__a"},{"reject":"has \"quotes\""}]},{"safe":"x","tools":[]}]}`; err != nil || string(got) != want {
		t.Errorf("got %s, %v; want %s", got, err, want)
	}
	for _, bad := range []ToolName{{}, {Name: "a", Reject: "b"}} {
		res := SanitizeResult{Servers: []SanitizedServer{{Safe: "s", Tools: []ToolName{bad}}}}
		if _, err := AppendSanitizeResult(nil, &res); err == nil || !strings.Contains(err.Error(), "exactly one of Name and Reject") {
			t.Errorf("%+v: err = %v", bad, err)
		}
	}
}

func TestApproval(t *testing.T) {
	t.Parallel()
	in := `{"abi":1,"kind":"exec","id":"a1","surface":"serve","session_key":"agent:main:main","requester":{"name":"agent:main"},` +
		`"identity":{"subject":"alice","claims":{"groups":["oncall"]}},` +
		`"tool":{"name":"t","server":"s"},"command":"ls -la","request":{"command":"ls -la","cwd":"/srv"}}`
	var got ApprovalRequest
	if err := DecodeApprovalRequest([]byte(in), &got); err != nil {
		t.Fatal(err)
	}
	want := ApprovalRequest{Kind: KindExec, ID: "a1", Surface: SurfaceServe, SessionKey: "agent:main:main",
		Requester: Caller{Name: "agent:main"}, Identity: &Identity{Subject: "alice", Claims: map[string]Raw{"groups": Raw(`["oncall"]`)}},
		Tool: ToolRef{Name: "t", Server: "s"}, Command: "ls -la", Request: Raw(`{"command":"ls -la","cwd":"/srv"}`)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if cwd, _ := got.Request.Get("cwd").String(); cwd != "/srv" {
		t.Errorf("request cwd = %q", cwd)
	}
	tests := []struct {
		d       ApprovalDecision
		want    string
		wantErr string
	}{
		{ApprovalDecision{Decision: Ask, Reason: "human", TTLMs: 120000}, `{"decision":"ask","reason":"human","ttl_ms":120000}`, ""},
		{ApprovalDecision{Decision: AllowAlways}, `{"decision":"allow-always"}`, ""},
		{ApprovalDecision{Decision: "yes"}, "", `unknown decision "yes"`},
		{ApprovalDecision{Decision: Deny, TTLMs: -1}, "", "negative"},
	}
	for _, tt := range tests {
		b, err := AppendApprovalDecision(nil, &tt.d)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%+v: err = %v, want %q", tt.d, err, tt.wantErr)
			}
			continue
		}
		if err != nil || string(b) != tt.want || !json.Valid(b) {
			t.Errorf("%+v: got %s, %v; want %s", tt.d, b, err, tt.want)
		}
	}
}
