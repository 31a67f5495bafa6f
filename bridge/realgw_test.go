package bridge

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/gateway/gatewaytest"
	"github.com/openclaw-go/openclaw/gateway/protocol"
)

// TestRealGatewayApprovalRoute runs the Gateway route against the real
// OpenClaw 2026.9.6 Gateway, by hand (see bench/lib-openclaw.sh for
// starting it in its network namespace):
//
//	OPENCLAW_REAL_GW_URL=ws://127.0.0.1:18790 OPENCLAW_REAL_GW_TOKEN=octest-token-123 \
//	OPENCLAW_DEVICE_IDENTITY=$HOME/.cache/openclaw-real/ours-device.json go test -run RealGateway ./bridge/
//
// It skips without OPENCLAW_REAL_GW_URL. Frames captured through the
// kit's logging proxy are in testdata/approvals-real/.
func TestRealGatewayApprovalRoute(t *testing.T) {
	url := os.Getenv("OPENCLAW_REAL_GW_URL")
	if url == "" {
		t.Skip("OPENCLAW_REAL_GW_URL is not set: no real Gateway to run against")
	}
	data, err := os.ReadFile(os.Getenv("OPENCLAW_DEVICE_IDENTITY"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := protocol.ParseDeviceIdentity(data)
	if err != nil {
		t.Fatal(err)
	}
	gw := &gatewaytest.Gateway{URL: url, Token: os.Getenv("OPENCLAW_REAL_GW_TOKEN")}

	// An operator.admin approval client that is not of our device: the
	// control UI's shape (client.id openclaw-control-ui).
	ui, err := gatewaytest.Dial(tctx(t), url, &gatewaytest.DialOptions{Token: gw.Token, Device: newIdentity(t),
		ClientID: "openclaw-control-ui", Mode: "webchat", DisplayName: "control-ui", Caps: []string{},
		Scopes: []string{protocol.ScopeOperatorAdmin, protocol.ScopeOperatorRead, protocol.ScopeOperatorApproval}})
	if err != nil {
		// The real Gateway checks the Origin of control UI connections;
		// an operator.admin approval client of another device is the same
		// case for the visibility rules (docs/protocol-facts.md, Approval delivery).
		t.Logf("control-UI-shaped connection refused: %v", err)
		ui, err = gatewaytest.Dial(tctx(t), url, &gatewaytest.DialOptions{Token: gw.Token, Device: newIdentity(t),
			DisplayName: "admin-viewer", Caps: []string{"approvals"},
			Scopes: []string{protocol.ScopeOperatorAdmin, protocol.ScopeOperatorRead, protocol.ScopeOperatorApproval}})
		if err != nil {
			t.Logf("operator.admin connection of another device refused: %v", err)
		}
	}
	if ui != nil {
		defer ui.Close()
		t.Logf("control-UI-shaped connection hello: %.300s", ui.Hello())
	}

	agent := startGatewayBridge(t, gw, id, nil, Options{Enforcer: approvalPolicy(ToolEventsPoll, 0)}, nil)
	waiting := callAsync(tctx(t), agent.cs, ToolEventsPoll)
	aid := openApprovalID(t, agent.cs, ToolEventsPoll)
	t.Logf("our main connection lists approval %s", aid)

	if ui != nil {
		ctx, cancel := context.WithTimeout(tctx(t), 3*time.Second)
		f, err := ui.NextEvent(ctx, protocol.EventPluginApprovalRequested)
		cancel()
		if err != nil {
			t.Logf("FINDING: the control-UI-shaped connection did not receive plugin.approval.requested: %v", err)
		} else {
			t.Logf("FINDING: the control-UI-shaped connection received plugin.approval.requested: %.300s", f.Payload)
		}
	}

	self := call(t, agent.cs, tctx(t), ToolPermissionsRespond, map[string]any{"kind": "plugin", "id": aid, "decision": "allow-once"})
	if !self.IsError || !strings.Contains(resultText(self), "cannot approve its own call") {
		t.Errorf("self-approval = %q, want a refusal", resultText(self))
	}
	approver, err := gatewaytest.Dial(tctx(t), url, &gatewaytest.DialOptions{Token: gw.Token, Device: id, DisplayName: "approver", Caps: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	defer approver.Close()
	if _, err := approver.Request(tctx(t), "plugin.approval.resolve", map[string]any{"id": aid, "decision": "allow-once"}); err != nil {
		t.Fatal(err)
	}
	if r := <-waiting; r.err != nil || r.res.IsError {
		t.Fatalf("approved call: %v %q", r.err, resultText(r.res))
	}

	short := startGatewayBridge(t, gw, id, nil, Options{Enforcer: approvalPolicy(ToolEventsPoll, 1500)}, nil)
	res := call(t, short.cs, tctx(t), ToolEventsPoll, nil)
	t.Logf("expiry: %s", resultText(res))
	if !res.IsError || !strings.Contains(resultText(res), "expired after") {
		t.Errorf("expired call = %q", resultText(res))
	}

	if ui != nil {
		ui.Close()
	}
	time.Sleep(200 * time.Millisecond) // let the Gateway drop the viewer before the next request
	unseen := startGatewayBridge(t, gw, id, newIdentity(t), Options{Enforcer: approvalPolicy(ToolEventsPoll, 0)}, nil)
	res = call(t, unseen.cs, tctx(t), ToolEventsPoll, nil)
	t.Logf("raised by another device: %s", resultText(res))
	raw, _ := json.Marshal(unseen.audit.Find(AuditRouteGateway))
	t.Logf("audit: %s", raw)
}
