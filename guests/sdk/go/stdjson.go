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
		Identity   *struct {
			Issuer   string                     `json:"issuer"`
			Subject  string                     `json:"subject"`
			ClientID string                     `json:"client_id"`
			Scopes   []string                   `json:"scopes"`
			Claims   map[string]json.RawMessage `json:"claims"`
		} `json:"identity"`
		Tool      struct{ Name, Server, Original string }
		Pin       struct{ State, Digest, Pinned string }
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(in, &v); err != nil {
		return err
	}
	*call = ToolCall{Surface: Surface(v.Surface), SessionKey: v.SessionKey,
		Caller: Caller(v.Caller), Tool: ToolRef(v.Tool), Pin: Pin(v.Pin), Arguments: Raw(v.Arguments)}
	if id := v.Identity; id != nil {
		call.Identity = &Identity{Issuer: id.Issuer, Subject: id.Subject, ClientID: id.ClientID, Scopes: id.Scopes}
		for k, c := range id.Claims {
			if call.Identity.Claims == nil {
				call.Identity.Claims = map[string]Raw{}
			}
			call.Identity.Claims[k] = Raw(c)
		}
	}
	return nil
}
