package bridge

import (
	"encoding/json"
	"strings"
)

// Conversation is a Gateway session that has a reply route: the object the
// conversation tools return (openclaw-protocol.md §7). Optional fields are
// empty when absent; ThreadID is the raw JSON value (a string or a number,
// never converted) and UpdatedAt the raw number, nil meaning null.
type Conversation struct {
	SessionKey         string
	Channel            string // lowercased
	To                 string
	AccountID          string
	ThreadID           json.RawMessage
	Label              string
	DisplayName        string
	DerivedTitle       string
	LastMessagePreview string
	UpdatedAt          json.RawMessage
}

// MarshalJSON writes the conversation with OpenClaw's key order, leaving out
// absent optional keys; updatedAt is always present (null when unknown).
func (c *Conversation) MarshalJSON() ([]byte, error) { return c.appendJSON(nil), nil }

func (c *Conversation) appendJSON(buf []byte) []byte {
	o := newObject(buf)
	o.str("sessionKey", c.SessionKey)
	o.str("channel", c.Channel)
	o.str("to", c.To)
	if c.AccountID != "" {
		o.str("accountId", c.AccountID)
	}
	if len(c.ThreadID) > 0 {
		o.raw("threadId", c.ThreadID)
	}
	for _, f := range [...]struct{ k, v string }{
		{"label", c.Label}, {"displayName", c.DisplayName},
		{"derivedTitle", c.DerivedTitle}, {"lastMessagePreview", c.LastMessagePreview},
	} {
		if f.v != "" {
			o.str(f.k, f.v)
		}
	}
	if len(c.UpdatedAt) > 0 {
		o.raw("updatedAt", c.UpdatedAt)
	} else {
		o.raw("updatedAt", []byte("null"))
	}
	return o.close()
}

// sessionRow holds the fields of a Gateway session row the bridge reads
// (§3 "Session row fields"); every other field of the row is ignored.
type sessionRow struct {
	Key             json.RawMessage `json:"key"`
	DeliveryContext struct {
		Channel   json.RawMessage `json:"channel"`
		To        json.RawMessage `json:"to"`
		AccountID json.RawMessage `json:"accountId"`
		ThreadID  json.RawMessage `json:"threadId"`
	} `json:"deliveryContext"`
	LastChannel   json.RawMessage `json:"lastChannel"`
	LastTo        json.RawMessage `json:"lastTo"`
	LastAccountID json.RawMessage `json:"lastAccountId"`
	LastThreadID  json.RawMessage `json:"lastThreadId"`
	Channel       json.RawMessage `json:"channel"`
	Origin        struct {
		Provider  json.RawMessage `json:"provider"`
		AccountID json.RawMessage `json:"accountId"`
		ThreadID  json.RawMessage `json:"threadId"`
	} `json:"origin"`
	Label              json.RawMessage `json:"label"`
	DisplayName        json.RawMessage `json:"displayName"`
	DerivedTitle       json.RawMessage `json:"derivedTitle"`
	LastMessagePreview json.RawMessage `json:"lastMessagePreview"`
	UpdatedAt          json.RawMessage `json:"updatedAt"`
}

// firstString returns the first candidate that is a non-empty string.
func firstString(cands ...json.RawMessage) string {
	for _, c := range cands {
		if s, ok := nonEmptyString(c); ok {
			return s
		}
	}
	return ""
}

// firstPresent returns the first candidate that is neither absent, null
// nor the empty string, unchanged.
func firstPresent(cands ...json.RawMessage) json.RawMessage {
	for _, c := range cands {
		if present(c) {
			return compactJSON(c)
		}
	}
	return nil
}

// conversationFromRow resolves a row's route as OpenClaw does (§7 intro).
// It reports false for a row without both a channel and a recipient, which
// is not a conversation.
func conversationFromRow(raw json.RawMessage) (*Conversation, bool) {
	var r sessionRow
	if kindOf(raw) != kindObject || json.Unmarshal(raw, &r) != nil {
		return nil, false
	}
	key, ok := rawString(r.Key)
	if !ok {
		return nil, false
	}
	channel := firstString(r.DeliveryContext.Channel, r.LastChannel, r.Channel, r.Origin.Provider)
	to := firstString(r.DeliveryContext.To, r.LastTo)
	if channel == "" || to == "" {
		return nil, false
	}
	c := &Conversation{
		SessionKey: key,
		Channel:    strings.ToLower(channel),
		To:         to,
		AccountID:  firstString(r.DeliveryContext.AccountID, r.LastAccountID, r.Origin.AccountID),
		ThreadID:   firstPresent(r.DeliveryContext.ThreadID, r.LastThreadID, r.Origin.ThreadID),
	}
	c.Label, _ = nonEmptyString(r.Label)
	c.DisplayName, _ = nonEmptyString(r.DisplayName)
	c.DerivedTitle, _ = nonEmptyString(r.DerivedTitle)
	c.LastMessagePreview, _ = nonEmptyString(r.LastMessagePreview)
	if kindOf(r.UpdatedAt) == kindNumber {
		c.UpdatedAt = compactJSON(r.UpdatedAt)
	}
	return c, true
}

// threadIDString converts a raw thread id to the string OpenClaw sends
// (String(threadId)); "" when absent.
func threadIDString(raw json.RawMessage) string {
	switch kindOf(raw) {
	case kindNone, kindNull:
		return ""
	case kindString:
		s, _ := rawString(raw)
		return s
	}
	return string(compactJSON(raw))
}
