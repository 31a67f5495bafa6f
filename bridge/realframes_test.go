package bridge

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// capturedFrame is one line of testdata/approvals-real/ws-frames.jsonl.
type capturedFrame struct {
	Conn  int    `json:"conn"`
	Dir   string `json:"dir"`
	Frame struct {
		Type    string          `json:"type"`
		ID      string          `json:"id"`
		Method  string          `json:"method"`
		Event   string          `json:"event"`
		Params  json.RawMessage `json:"params"`
		Payload json.RawMessage `json:"payload"`
	} `json:"frame"`
}

// The real Gateway's behaviour that the Gateway route relies on, read from
// the captured frames: the raising connection never gets its own
// requested event, a connection of the same device does (with our
// toolCallId), possibly before the raiser's accepted response; a request
// nobody may see gets one final response with decision null.
func TestRealGatewayCapture(t *testing.T) {
	t.Parallel()
	var frames []capturedFrame
	for _, line := range readJSONL(t, filepath.Join("testdata", "approvals-real", "ws-frames.jsonl")) {
		var f capturedFrame
		if err := json.Unmarshal(line, &f); err != nil {
			t.Fatal(err)
		}
		frames = append(frames, f)
	}
	requested := map[int][]string{} // conn → approval ids it was shown
	raisers := map[int]string{}     // conn → toolCallId it sent
	for i, f := range frames {
		switch {
		case f.Dir == "gw->client" && f.Frame.Event == "plugin.approval.requested":
			var p struct {
				ID      string
				Request struct{ ToolCallID string }
			}
			_ = json.Unmarshal(f.Frame.Payload, &p)
			requested[f.Conn] = append(requested[f.Conn], p.ID+" "+p.Request.ToolCallID)
		case f.Dir == "client->gw" && f.Frame.Method == "plugin.approval.request":
			var p struct {
				ToolCallID string `json:"toolCallId"`
				TwoPhase   bool   `json:"twoPhase"`
			}
			_ = json.Unmarshal(f.Frame.Params, &p)
			if !p.TwoPhase {
				t.Errorf("frame %d: plugin.approval.request without twoPhase", i)
			}
			raisers[f.Conn] = p.ToolCallID
		}
	}
	if len(raisers) != 3 {
		t.Fatalf("captured %d raising connections, want 3", len(raisers))
	}
	for conn, tc := range raisers {
		if len(requested[conn]) != 0 {
			t.Errorf("conn %d raised a request and was shown %v", conn, requested[conn])
		}
		seenBy := 0
		for _, ids := range requested {
			for _, s := range ids {
				if strings.HasSuffix(s, " "+tc) {
					seenBy++
				}
			}
		}
		// conn 9 signed as another device: nobody may see its request;
		// the others reached our main connection and the admin viewer.
		if unseen := conn == 9; unseen != (seenBy == 0) || (!unseen && seenBy < 2) {
			t.Errorf("request of conn %d (toolCallId %s) seen by %d connections", conn, tc, seenBy)
		}
	}
	var finals []string
	for _, f := range frames {
		if f.Conn == 9 && f.Dir == "gw->client" && f.Frame.Type == "res" && f.Frame.ID != "" {
			finals = append(finals, string(f.Frame.Payload))
		}
	}
	for _, p := range finals {
		if isAcceptedPayload(p) {
			t.Errorf("unseen request got an accepted response: %s", p)
		}
	}
	var last struct {
		ID       string
		Decision *string
	}
	if len(finals) == 0 || json.Unmarshal([]byte(finals[len(finals)-1]), &last) != nil || last.Decision != nil || last.ID == "" {
		t.Errorf("unseen request's responses %v, want a final decision null", finals)
	}
}

func isAcceptedPayload(p string) bool {
	var v struct{ Status string }
	return json.Unmarshal([]byte(p), &v) == nil && v.Status == "accepted"
}
