package gateway

import (
	"testing"

	"github.com/openclaw-go/openclaw/gateway/protocol"
)

func testConn(id, clientID, device string, scopes, caps []string) *conn {
	c := &conn{id: id, deviceID: device, scopes: map[string]bool{}, caps: map[string]bool{},
		params: &protocol.ConnectParams{Client: protocol.ClientInfo{ID: clientID}}}
	for _, s := range scopes {
		c.scopes[s] = true
	}
	for _, cp := range caps {
		c.caps[cp] = true
	}
	c.ready.Store(true)
	return c
}

// OpenClaw's delivery rules for approval events (docs/protocol-facts.md, Approval delivery).
func TestApprovalVisibility(t *testing.T) {
	t.Parallel()
	appr := []string{protocol.ScopeOperatorRead, protocol.ScopeOperatorApproval}
	admin := []string{protocol.ScopeOperatorAdmin}
	requester := testConn("req", "cli", "dev-x", appr, nil)
	noDevRequester := testConn("req2", "cli", "", appr, nil)
	tests := []struct {
		name string
		c    *conn
		a    approval
		want bool
	}{
		{"same device, approvals cap", testConn("a", "cli", "dev-x", appr, []string{"approvals"}), approval{kind: kindExec, requester: requester, requesterDeviceID: "dev-x"}, true},
		{"other device", testConn("b", "cli", "dev-y", appr, []string{"approvals"}), approval{kind: kindExec, requester: requester, requesterDeviceID: "dev-x"}, false},
		{"no device at all", testConn("b", "cli", "", appr, []string{"approvals"}), approval{kind: kindExec, requester: requester, requesterDeviceID: "dev-x"}, false},
		{"admin sees every record", testConn("e", "cli", "dev-y", admin, []string{"approvals"}), approval{kind: kindExec, requester: requester, requesterDeviceID: "dev-x"}, true},
		{"requester excluded, even as admin", testConn("req", "cli", "dev-x", admin, []string{"approvals"}), approval{kind: kindExec, requester: nil, requesterDeviceID: "dev-x"}, true},
		{"no approvals scope", testConn("d", "cli", "dev-x", []string{protocol.ScopeOperatorRead, protocol.ScopeOperatorWrite}, []string{"approvals"}), approval{kind: kindExec, requesterDeviceID: "dev-x"}, false},
		{"not an approval client", testConn("c", "cli", "dev-x", appr, nil), approval{kind: kindExec, requesterDeviceID: "dev-x"}, false},
		{"exec-approvals cap, exec", testConn("c", "cli", "", appr, []string{"exec-approvals"}), approval{kind: kindExec}, true},
		{"exec-approvals cap, plugin", testConn("c", "cli", "", appr, []string{"exec-approvals"}), approval{kind: kindPlugin}, false},
		{"plugin-approvals cap, plugin", testConn("c", "cli", "", appr, []string{"plugin-approvals"}), approval{kind: kindPlugin}, true},
		{"macos app, exec", testConn("c", "openclaw-macos", "", appr, nil), approval{kind: kindExec}, true},
		{"macos app, plugin", testConn("c", "openclaw-macos", "", appr, nil), approval{kind: kindPlugin}, false},
		{"tui, plugin", testConn("c", "openclaw-tui", "", appr, nil), approval{kind: kindPlugin}, true},
		{"control ui", testConn("c", "openclaw-control-ui", "", appr, nil), approval{kind: kindPlugin}, true},
		{"requester without device: only its own conn, which is excluded", testConn("z", "cli", "", appr, []string{"approvals"}), approval{kind: kindExec, requester: noDevRequester, requesterConnID: "req2"}, false},
		{"admin-API record without requester", testConn("z", "cli", "", appr, []string{"approvals"}), approval{kind: kindPlugin}, true},
	}
	tests[4].a.requester = tests[4].c
	tests[4].want = false
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.c.canSee(&tt.a); got != tt.want {
				t.Errorf("canSee = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAnalyzeCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cmd           string
		count, nested int
	}{
		{"ls -la /tmp", 1, 0},
		{"ls && rm -rf x; echo done | tee log", 4, 0},
		{"echo 'a; b && c'", 1, 0},
		{`echo "$(whoami)" || true`, 2, 1},
		{"echo `date`", 1, 1},
		{"", 0, 0},
	}
	for _, tt := range tests {
		a := analyzeCommand(tt.cmd)
		c, _ := a.get("commandCount")
		n, _ := a.get("nestedCommandCount")
		if c != tt.count || n != tt.nested {
			t.Errorf("%q: commandCount %v nestedCommandCount %v, want %d %d", tt.cmd, c, n, tt.count, tt.nested)
		}
	}
}
