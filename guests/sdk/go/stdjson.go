//go:build policy_stdjson

package policy

import "encoding/json"

// With -tags policy_stdjson, before_tool_call inputs are decoded with
// encoding/json (reflection) instead of the SDK's hand-written reader. It
// exists to measure what the hand-written reader saves; the result is the
// same for valid inputs.
func init() { decodeToolCall = decodeToolCallStd }

func decodeToolCallStd(in []byte, call *ToolCall) error {
	var v struct {
		Surface    string `json:"surface"`
		SessionKey string `json:"session_key"`
		Caller     struct{ Name, Version string }
		Tool       struct{ Name, Server, Original string }
		Pin        struct{ State, Digest, Pinned string }
		Arguments  json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(in, &v); err != nil {
		return err
	}
	*call = ToolCall{Surface: Surface(v.Surface), SessionKey: v.SessionKey,
		Caller: Caller(v.Caller), Tool: ToolRef(v.Tool), Pin: Pin(v.Pin), Arguments: Raw(v.Arguments)}
	return nil
}
