package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/gateway"
	"github.com/openclaw-go/openclaw/gateway/gatewaytest"
	"github.com/openclaw-go/openclaw/gateway/protocol"
)

func rowsByKey(t *testing.T, payload map[string]any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	rows, _ := payload["sessions"].([]any)
	for i, r := range rows {
		row := obj(t, r, "sessions")
		out[row["key"].(string)] = row
		_ = i
	}
	return out
}

// The demo seed served through sessions.list, describe, get and
// chat.message.get has the real Gateway's shapes and the seeded values.
func TestSeededSessionsMatchRealShapes(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.StartSeeded(t)
	c := dial(t, gw.URL, &gatewaytest.DialOptions{Token: gw.Token})

	realList := fixture(t, "rpc-sessions.list.json")
	realReq := obj(t, realList["req"], "req")["params"]
	realPayload := obj(t, obj(t, realList["res"], "res")["payload"], "payload")
	ours := request(t, c, "sessions.list", realReq)
	sameShape(t, "sessions.list", ours, realPayload, "defaults", "agentRuntime")
	if ours["count"] != 3.0 || ours["totalCount"] != 3.0 || ours["hasMore"] != false || ours["nextOffset"] != nil {
		t.Errorf("sessions.list counts = %v/%v hasMore %v nextOffset %v", ours["count"], ours["totalCount"], ours["hasMore"], ours["nextOffset"])
	}
	var order []string
	for _, r := range ours["sessions"].([]any) {
		order = append(order, r.(map[string]any)["key"].(string))
	}
	if strings.Join(order, ",") != "agent:main:main,agent:main:noroute,agent:main:tg-dm" {
		t.Errorf("order = %v, want the real Gateway's", order)
	}
	realRows := rowsByKey(t, realPayload)
	for key, row := range rowsByKey(t, ours) {
		real := realRows[key]
		sameShape(t, key, row, real, "origin", "deliveryContext", "agentRuntime")
		for _, f := range []string{"displayName", "derivedTitle", "lastMessagePreview", "channel", "lastChannel", "lastTo",
			"lastAccountId", "lastThreadId", "sessionId", "classification", "isMain", "origin", "deliveryContext"} {
			if got, want := jsonOf(row[f]), jsonOf(real[f]); got != want {
				t.Errorf("%s.%s = %s, real %s", key, f, got, want)
			}
		}
	}

	realDesc := fixture(t, "rpc-sessions.describe.json")
	desc := request(t, c, "sessions.describe", obj(t, realDesc["req"], "req")["params"])
	realSess := obj(t, obj(t, obj(t, realDesc["res"], "res")["payload"], "payload")["session"], "session")
	sameShape(t, "describe", obj(t, desc["session"], "session"), realSess, "origin", "deliveryContext", "activitySummary")
	if d := request(t, c, "sessions.describe", map[string]any{"key": "agent:main:nope"}); d["session"] != nil {
		t.Errorf("unknown key described as %v", d["session"])
	}

	realGet := fixture(t, "rpc-sessions.get.json")
	got := request(t, c, "sessions.get", obj(t, realGet["req"], "req")["params"])
	realMsgs := obj(t, obj(t, realGet["res"], "res")["payload"], "payload")["messages"].([]any)
	msgs := got["messages"].([]any)
	if len(msgs) != len(realMsgs) {
		t.Fatalf("sessions.get returned %d messages, real %d", len(msgs), len(realMsgs))
	}
	for i := range msgs {
		m, rm := obj(t, msgs[i], "message"), obj(t, realMsgs[i], "message")
		sameShape(t, "message", m, rm, "__openclaw", "transcriptPosition")
		oc, roc := obj(t, m["__openclaw"], "__openclaw"), obj(t, rm["__openclaw"], "__openclaw")
		for _, f := range []string{"id", "seq", "media"} {
			if jsonOf(oc[f]) != jsonOf(roc[f]) {
				t.Errorf("message %d __openclaw.%s = %s, real %s", i, f, jsonOf(oc[f]), jsonOf(roc[f]))
			}
		}
		if jsonOf(m["content"]) != jsonOf(rm["content"]) || m["role"] != rm["role"] {
			t.Errorf("message %d = %v, real %v", i, m, rm)
		}
		if oc["recordTimestampMs"] != m["timestamp"] {
			t.Errorf("message %d: recordTimestampMs %v != timestamp %v", i, oc["recordTimestampMs"], m["timestamp"])
		}
		pos := obj(t, oc["transcriptPosition"], "transcriptPosition")
		if src, _ := pos["source"].(string); len(src) != 43 || pos["rawSeq"] != oc["seq"] {
			t.Errorf("message %d transcriptPosition = %v", i, pos)
		}
	}
	if got := request(t, c, "sessions.get", map[string]any{"key": "agent:main:main", "limit": 1}); len(got["messages"].([]any)) != 1 ||
		obj(t, obj(t, got["messages"].([]any)[0], "m")["__openclaw"], "oc")["id"] != "msg-inline-img" {
		t.Errorf("limit 1 must return the newest message: %v", got)
	}
	if got := request(t, c, "sessions.get", map[string]any{"key": "agent:main:nope"}); len(got["messages"].([]any)) != 0 {
		t.Errorf("unknown key: %v", got)
	}

	realMG := fixture(t, "rpc-chat.message.get.json")
	mg := request(t, c, "chat.message.get", obj(t, realMG["req"], "req")["params"])
	realMGP := obj(t, obj(t, realMG["res"], "res")["payload"], "payload")
	sameShape(t, "chat.message.get", mg, realMGP, "message", "__openclaw")
	inline := request(t, c, "chat.message.get", map[string]any{"sessionKey": "agent:main:main", "messageId": "msg-inline-img"})
	img := obj(t, obj(t, inline["message"], "message")["content"].([]any)[1], "image block")
	src := obj(t, img["source"], "source")
	if _, has := src["data"]; has || img["omitted"] != true || img["bytes"] != 2.0 ||
		!strings.HasPrefix(img["artifactId"].(string), "artifact_transcript_image_") || src["media_type"] != "image/png" {
		t.Errorf("inline image block = %v", img)
	}
	if nf := request(t, c, "chat.message.get", map[string]any{"sessionKey": "agent:main:main", "messageId": "nope"}); nf["ok"] != false || nf["unavailableReason"] != "not_found" {
		t.Errorf("missing message = %v", nf)
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestSessionsListPagingAndSearch(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.StartSeeded(t)
	c := dial(t, gw.URL, &gatewaytest.DialOptions{Token: gw.Token})
	tests := []struct {
		params                      map[string]any
		count, total                float64
		nextOffset                  any
		hasMore                     bool
		firstKey                    string
		wantDerived, wantLastInRows bool
	}{
		{map[string]any{"limit": 1, "includeDerivedTitles": true, "includeLastMessage": true}, 1, 3, 1.0, true, "agent:main:main", true, true},
		{map[string]any{"limit": 1, "offset": 2}, 1, 3, nil, false, "agent:main:tg-dm", false, false},
		{map[string]any{"limit": 1, "search": "iMessage", "includeDerivedTitles": true}, 1, 1, nil, false, "agent:main:main", true, false},
		{map[string]any{"search": "TELEGRAM"}, 1, 1, nil, false, "agent:main:tg-dm", false, false},
		{map[string]any{"search": "zzz"}, 0, 0, nil, false, "", false, false},
	}
	for _, tt := range tests {
		p := request(t, c, "sessions.list", tt.params)
		if p["count"] != tt.count || p["totalCount"] != tt.total || p["nextOffset"] != tt.nextOffset || p["hasMore"] != tt.hasMore {
			t.Errorf("%v: count %v total %v next %v hasMore %v", tt.params, p["count"], p["totalCount"], p["nextOffset"], p["hasMore"])
			continue
		}
		rows := p["sessions"].([]any)
		if tt.firstKey == "" {
			continue
		}
		row := obj(t, rows[0], "row")
		_, hasDerived := row["derivedTitle"]
		_, hasLast := row["lastMessagePreview"]
		if row["key"] != tt.firstKey || hasDerived != tt.wantDerived || hasLast != tt.wantLastInRows {
			t.Errorf("%v: first row %v (derivedTitle %v, lastMessagePreview %v)", tt.params, row["key"], hasDerived, hasLast)
		}
	}
	if e := requestErr(t, c, "sessions.list", map[string]any{"limit": 0}); !strings.Contains(e.Message, "limit") {
		t.Errorf("limit 0: %v", e)
	}
}

// session.message events have the real payload shape, reach only
// subscribed connections, and count seq per connection.
func TestSessionMessageEvents(t *testing.T) {
	t.Parallel()
	real := fixture(t, "event-session.message.json")
	gw := gatewaytest.StartSeeded(t)
	a := dial(t, gw.URL, &gatewaytest.DialOptions{Token: gw.Token})
	b := dial(t, gw.URL, &gatewaytest.DialOptions{Token: gw.Token})
	request(t, a, "sessions.subscribe", nil)

	inj := request(t, a, "chat.inject", map[string]any{"sessionKey": "agent:main:main", "message": "assistant note injected via chat.inject"})
	if inj["ok"] != true || inj["messageId"] == "" {
		t.Fatalf("chat.inject = %v", inj)
	}
	f, p := nextEvent(t, a, protocol.EventSessionMessage)
	if f.Seq == nil || *f.Seq != 1 {
		t.Errorf("first event seq = %v, want 1", f.Seq)
	}
	realP := obj(t, real["payload"], "payload")
	sameShape(t, "session.message", p, realP, "message", "__openclaw", "usage", "session", "origin", "deliveryContext", "activitySummary")
	if p["messageId"] != inj["messageId"] || p["messageSeq"] != 4.0 || p["lastTo"] != "+15551234567" || p["lastThreadId"] != "thread-42" {
		t.Errorf("payload = messageId %v seq %v lastTo %v lastThreadId %v", p["messageId"], p["messageSeq"], p["lastTo"], p["lastThreadId"])
	}
	if _, has := p["senderIsOwner"]; has {
		t.Errorf("chat.inject message carries senderIsOwner")
	}
	if msg := obj(t, p["message"], "message"); msg["role"] != "assistant" || msg["model"] != "gateway-injected" {
		t.Errorf("message = %v", msg)
	}

	// chat.send: a user message with the transport; b subscribes only now, so
	// its first session.message is this one.
	request(t, b, "sessions.subscribe", nil)
	sent := request(t, a, "chat.send", map[string]any{"sessionKey": "agent:main:main", "message": "yes abcde", "idempotencyKey": "k1"})
	if sent["runId"] != "k1" || sent["status"] != "started" {
		t.Errorf("chat.send = %v", sent)
	}
	_, pb := nextEvent(t, b, protocol.EventSessionMessage)
	msg := obj(t, pb["message"], "message")
	oc := obj(t, msg["__openclaw"], "__openclaw")
	if pb["messageSeq"] != 5.0 || msg["role"] != "user" || msg["content"] != "yes abcde" || msg["idempotencyKey"] != "k1:user" ||
		oc["transport"] == nil || pb["senderIsOwner"] != nil {
		t.Errorf("chat.send event = %v", pb)
	}
	// The same idempotency key does not store the message twice.
	request(t, a, "chat.send", map[string]any{"sessionKey": "agent:main:main", "message": "yes abcde", "idempotencyKey": "k1"})

	// An owner message injected through the admin path carries senderIsOwner.
	res, err := gw.Inject(testCtx(t), gateway.InjectRequest{SessionKey: "agent:main:main", Text: "yes fghij", SenderIsOwner: true})
	if err != nil {
		t.Fatal(err)
	}
	_, pb = nextEvent(t, b, protocol.EventSessionMessage)
	if pb["senderIsOwner"] != true || pb["messageId"] != res.MessageID || res.MessageSeq != 6 {
		t.Errorf("owner inject: event %v, result %+v", pb["senderIsOwner"], res)
	}
	if e := requestErr(t, a, "chat.inject", map[string]any{"sessionKey": "agent:main:unknown", "message": "x"}); e.Message != "unknown session: agent:main:unknown" {
		t.Errorf("chat.inject to an unknown session: %v", e)
	}
}

func TestSend(t *testing.T) {
	t.Parallel()
	real := fixture(t, "rpc-send.json")
	params := obj(t, real["req"], "req")["params"]
	realErr := obj(t, obj(t, real["res"], "res")["error"], "error")

	strict := gatewaytest.Start(t, &gateway.Options{UnsupportedChannels: []string{"imessage"}})
	strict.ApplySeed(testCtx(t), gateway.DemoSeed())
	c := dial(t, strict.URL, &gatewaytest.DialOptions{Token: strict.Token})
	if e := requestErr(t, c, "send", params); e.Code != realErr["code"] || e.Message != realErr["message"] {
		t.Errorf("send = %s %q, real %v", e.Code, e.Message, realErr)
	}

	gw := gatewaytest.StartSeeded(t)
	c = dial(t, gw.URL, &gatewaytest.DialOptions{Token: gw.Token})
	request(t, c, "sessions.subscribe", nil)
	res := request(t, c, "send", params)
	if res["channel"] != "imessage" || res["to"] != "+15551234567" || res["messageId"] == "" {
		t.Errorf("send result = %v", res)
	}
	_, ev := nextEvent(t, c, protocol.EventSessionMessage)
	if ev["messageId"] != res["messageId"] || obj(t, ev["message"], "m")["model"] != "delivery-mirror" {
		t.Errorf("send event = %v", ev)
	}
	again := request(t, c, "send", params)
	if again["messageId"] != res["messageId"] {
		t.Errorf("repeated idempotencyKey gave a new result: %v", again)
	}
	got := request(t, c, "sessions.get", map[string]any{"key": "agent:main:main"})
	if n := len(got["messages"].([]any)); n != 4 {
		t.Errorf("transcript has %d messages after one send (twice), want 4", n)
	}
	if e := requestErr(t, c, "send", map[string]any{"channel": "x", "message": "m", "idempotencyKey": "k"}); e.Message != "invalid send params: to is required" {
		t.Errorf("send without to: %q", e.Message)
	}
}
