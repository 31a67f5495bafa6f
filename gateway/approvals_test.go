package gateway_test

import (
	"encoding/json"
	"testing"

	"github.com/openclaw-go/openclaw/gateway"
	"github.com/openclaw-go/openclaw/gateway/gatewaytest"
	"github.com/openclaw-go/openclaw/gateway/protocol"
)

// The captured approvals flow: a requester sharing the bridge's device
// identity raises two-phase exec and plugin requests; the bridge sees the
// requested events, resolves them, and the requester gets the decisions.
func TestTwoPhaseApprovalFlow(t *testing.T) {
	t.Parallel()
	realExecReq := fixture(t, "event-exec.approval.requested.json")
	realExecRes := fixture(t, "event-exec.approval.resolved.json")
	realPluginReq := fixture(t, "event-plugin.approval.requested.json")
	gw := gatewaytest.Start(t, &gateway.Options{Token: "tok"})
	dev := newDevice(t)
	bridge := dial(t, gw.URL, &gatewaytest.DialOptions{Token: "tok", Device: dev, DisplayName: "OpenClaw MCP"})
	requester := dial(t, gw.URL, &gatewaytest.DialOptions{Token: "tok", Device: dev, DisplayName: "approver", Caps: []string{}})
	ctx := testCtx(t)

	_, execCh, err := requester.Requests(ctx, "exec.approval.request", map[string]any{"id": "appr-exec-1",
		"command": "ls -la /tmp", "cwd": "/tmp", "host": "gateway", "twoPhase": true, "timeoutMs": 60000})
	if err != nil {
		t.Fatal(err)
	}
	accepted := decode(t, must(requester.Await(ctx, "exec.approval.request", execCh)))
	if accepted["status"] != "accepted" || accepted["id"] != "appr-exec-1" || accepted["deliveryRoute"] != "approval-client" ||
		accepted["expiresAtMs"].(float64)-accepted["createdAtMs"].(float64) != 60000 {
		t.Errorf("accepted = %v", accepted)
	}
	f, ev := nextEvent(t, bridge, protocol.EventExecApprovalRequested)
	sameShape(t, "exec.approval.requested", ev, obj(t, realExecReq["payload"], "payload"), "request", "commandAnalysis")
	if f.Seq == nil || ev["id"] != "appr-exec-1" || obj(t, ev["request"], "request")["command"] != "ls -la /tmp" {
		t.Errorf("requested event = %v", ev)
	}

	_, plugCh, err := requester.Requests(ctx, "plugin.approval.request", map[string]any{"pluginId": "test-plugin",
		"title": "Allow thing", "description": "Plugin wants to do a thing", "twoPhase": true})
	if err != nil {
		t.Fatal(err)
	}
	pAcc := decode(t, must(requester.Await(ctx, "plugin.approval.request", plugCh)))
	if exp := pAcc["expiresAtMs"].(float64) - pAcc["createdAtMs"].(float64); exp != 120000 {
		t.Errorf("plugin default expiry = %v ms, want 120000", exp)
	}
	_, pev := nextEvent(t, bridge, protocol.EventPluginApprovalRequested)
	sameShape(t, "plugin.approval.requested", pev, obj(t, realPluginReq["payload"], "payload"), "request")

	if res := request(t, bridge, "exec.approval.resolve", map[string]any{"id": "appr-exec-1", "decision": "deny"}); res["ok"] != true {
		t.Errorf("resolve = %v", res)
	}
	final := decode(t, must(requester.Await(ctx, "exec.approval.request", execCh)))
	if final["decision"] != "deny" || final["id"] != "appr-exec-1" || final["createdAtMs"] != accepted["createdAtMs"] {
		t.Errorf("final = %v", final)
	}
	_, rev := nextEvent(t, bridge, protocol.EventExecApprovalResolved)
	sameShape(t, "exec.approval.resolved", rev, obj(t, realExecRes["payload"], "payload"), "request", "commandAnalysis")
	if rev["resolvedBy"] != "OpenClaw MCP" || rev["decision"] != "deny" {
		t.Errorf("resolved event = %v", rev)
	}

	request(t, bridge, "plugin.approval.resolve", map[string]any{"id": pev["id"], "decision": "allow-once"})
	if pf := decode(t, must(requester.Await(ctx, "plugin.approval.request", plugCh))); pf["decision"] != "allow-once" {
		t.Errorf("plugin final = %v", pf)
	}

	// Resolved ids are gone: the real error, with details.reason.
	realErr := obj(t, fixture(t, "error-res-exec.approval.resolve-unknown.json")["error"], "error")
	e := requestErr(t, bridge, "exec.approval.resolve", map[string]any{"id": "appr-exec-1", "decision": "deny"})
	var d map[string]any
	json.Unmarshal(e.Details, &d)
	if e.Code != realErr["code"] || e.Message != realErr["message"] || d["reason"] != "APPROVAL_NOT_FOUND" {
		t.Errorf("unknown id: %s %q %s", e.Code, e.Message, e.Details)
	}
	if e := requestErr(t, bridge, "exec.approval.resolve", map[string]any{"id": "x", "decision": "maybe"}); e.Code != protocol.CodeInvalidRequest {
		t.Errorf("bad decision: %v", e)
	}
}

func must(raw json.RawMessage, err error) json.RawMessage {
	if err != nil {
		panic(err)
	}
	return raw
}

// A requester without a device identity reaches no one: its request expires
// at once with decision:null, in a single response even when twoPhase
// (approvals/ws-frames-foreign-requester-not-delivered.jsonl).
func TestApprovalWithoutRouteExpiresAtOnce(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, &gateway.Options{Token: "tok"})
	dial(t, gw.URL, &gatewaytest.DialOptions{Token: "tok", Device: newDevice(t)}) // a bridge with its own key
	foreign := dial(t, gw.URL, &gatewaytest.DialOptions{Token: "tok", Caps: []string{}, Scopes: []string{protocol.ScopeOperatorApproval}})
	res := request(t, foreign, "exec.approval.request", map[string]any{"id": "appr-a", "command": "ls -la", "twoPhase": true, "timeoutMs": 60000})
	if _, has := res["decision"]; !has || res["decision"] != nil || res["id"] != "appr-a" || res["status"] != nil {
		t.Errorf("foreign request = %v, want the final payload with decision null", res)
	}
}

func TestApprovalExpiry(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, &gateway.Options{Token: "tok"})
	dev := newDevice(t)
	bridge := dial(t, gw.URL, &gatewaytest.DialOptions{Token: "tok", Device: dev})
	res, err := gw.RequestApproval(testCtx(t), gateway.ApprovalRequest{Kind: "plugin", PluginID: "p", Title: "t",
		Description: "d", TimeoutMs: 20, Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision != nil || res.ExpiresAtMs-res.CreatedAtMs != 20 {
		t.Errorf("expired result = %+v", res)
	}
	_, ev := nextEvent(t, bridge, protocol.EventPluginApprovalRequested)
	e := requestErr(t, bridge, "plugin.approval.resolve", map[string]any{"id": ev["id"], "decision": "deny"})
	if e.Message != "unknown or expired approval id" {
		t.Errorf("resolving an expired approval: %v", e)
	}
}

// Approvals raised through the admin path with a device id reach only the
// connections of that device; later unrestricted ones reach everyone.
func TestAdminApprovalDeviceScoping(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, &gateway.Options{Token: "tok"})
	devX, devY := newDevice(t), newDevice(t)
	x := dial(t, gw.URL, &gatewaytest.DialOptions{Token: "tok", Device: devX})
	y := dial(t, gw.URL, &gatewaytest.DialOptions{Token: "tok", Device: devY})
	ctx := testCtx(t)
	acc, err := gw.RequestApproval(ctx, gateway.ApprovalRequest{Kind: "exec", ID: "only-x", Command: "true", RequestedByDeviceID: devX.ID})
	if err != nil || acc.Status != "accepted" {
		t.Fatalf("request = %+v, %v", acc, err)
	}
	if _, err := gw.RequestApproval(ctx, gateway.ApprovalRequest{Kind: "exec", ID: "everyone", Command: "true"}); err != nil {
		t.Fatal(err)
	}
	_, ex := nextEvent(t, x, protocol.EventExecApprovalRequested)
	_, ey := nextEvent(t, y, protocol.EventExecApprovalRequested)
	if ex["id"] != "only-x" || ey["id"] != "everyone" {
		t.Errorf("x saw %v first, y saw %v first; want only-x and everyone", ex["id"], ey["id"])
	}
	if _, err := gw.RequestApproval(ctx, gateway.ApprovalRequest{Kind: "exec", ID: "everyone", Command: "true"}); err == nil {
		t.Errorf("a duplicate pending id was accepted")
	}
}
