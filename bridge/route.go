package bridge

import (
	"encoding/json"
	"github.com/openclaw-go/openclaw/internal/jsonw"
	"strings"
)

// Conversation is a Gateway session that has a reply route: the object the
// conversation tools return (docs/protocol-facts.md, Conversation routes). Optional fields are
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
	o := jsonw.NewObject(buf)
	o.Str("sessionKey", c.SessionKey)
	o.Str("channel", c.Channel)
	o.Str("to", c.To)
	if c.AccountID != "" {
		o.Str("accountId", c.AccountID)
	}
	if len(c.ThreadID) > 0 {
		o.Raw("threadId", c.ThreadID)
	}
	for _, f := range [...]struct{ k, v string }{
		{"label", c.Label}, {"displayName", c.DisplayName},
		{"derivedTitle", c.DerivedTitle}, {"lastMessagePreview", c.LastMessagePreview},
	} {
		if f.v != "" {
			o.Str(f.k, f.v)
		}
	}
	if len(c.UpdatedAt) > 0 {
		o.Raw("updatedAt", c.UpdatedAt)
	} else {
		o.Raw("updatedAt", []byte("null"))
	}
	return o.Close()
}

// sessionRow holds the fields of a Gateway session row the bridge reads
// (docs/protocol-facts.md, Gateway RPCs, session row fields); every other field of the row is ignored.
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
			return jsonw.Compact(c)
		}
	}
	return nil
}

// rowKeys are the members of a session row that [sessionRow] reads, and
// deliveryKeys and originKeys those of its deliveryContext and origin
// objects, in the order of their bits in [scanRow].
var (
	rowKeys = []string{"key", "deliveryContext", "lastChannel", "lastTo", "lastAccountId", "lastThreadId",
		"channel", "origin", "label", "displayName", "derivedTitle", "lastMessagePreview", "updatedAt"}
	deliveryKeys = []string{"channel", "to", "accountId", "threadId"}
	originKeys   = []string{"provider", "accountId", "threadId"}
)

// scanRow fills r from the session row raw with the skipping scanner, which
// reads a few-KB row several times faster than encoding/json: the hot path
// of conversations_list. raw must be valid JSON (a Gateway payload). It
// declines (false, r partly filled) whenever its result could differ from
// json.Unmarshal into a sessionRow: a key with an escape or a non-ASCII
// byte, a wanted key present twice or only in another letter case, or a
// deliveryContext or origin that is neither an object nor null. The caller
// then decodes with encoding/json, so both paths give the same row.
func scanRow(raw []byte, r *sessionRow) bool {
	top := [...]*json.RawMessage{&r.Key, nil, &r.LastChannel, &r.LastTo, &r.LastAccountID, &r.LastThreadID,
		&r.Channel, nil, &r.Label, &r.DisplayName, &r.DerivedTitle, &r.LastMessagePreview, &r.UpdatedAt}
	delivery := [...]*json.RawMessage{&r.DeliveryContext.Channel, &r.DeliveryContext.To,
		&r.DeliveryContext.AccountID, &r.DeliveryContext.ThreadID}
	origin := [...]*json.RawMessage{&r.Origin.Provider, &r.Origin.AccountID, &r.Origin.ThreadID}
	ok := scanFields(raw, rowKeys, func(i int, v []byte) bool {
		switch i {
		case 1:
			return scanNested(v, deliveryKeys, delivery[:])
		case 7:
			return scanNested(v, originKeys, origin[:])
		}
		*top[i] = v
		return true
	})
	return ok
}

// scanNested fills dst from the object or null v, as encoding/json would
// decode it into a struct of RawMessage fields named keys; false when it
// cannot be sure to agree (see [scanRow]).
func scanNested(v []byte, keys []string, dst []*json.RawMessage) bool {
	switch kindOf(v) {
	case kindNull:
		return true
	case kindObject:
		return scanFields(v, keys, func(i int, v []byte) bool {
			*dst[i] = v
			return true
		})
	}
	return false
}

// scanFields calls set with the index in keys and the raw value of each
// member of the object raw whose key is one of keys (at most 32). It
// reports false, early, when a key has an escape or a non-ASCII byte, when
// a wanted key repeats or matches only case-insensitively, when set says
// false, or when raw is malformed.
func scanFields(raw []byte, keys []string, set func(i int, v []byte) bool) bool {
	ok := true
	var seen uint32
	err := jsonw.Members(raw, func(k, v []byte) {
		if !ok {
			return
		}
		if !jsonw.PlainKey(k) {
			ok = false
			return
		}
		for i, name := range keys {
			if string(k) == name {
				if seen&(1<<i) != 0 || !set(i, v) {
					ok = false
				}
				seen |= 1 << i
				return
			}
		}
		if jsonw.FoldsTo(k, keys) {
			ok = false
		}
	})
	return ok && err == nil
}

// conversationFromRow resolves a row's route as OpenClaw does (docs/protocol-facts.md, Conversation routes).
// It reports false for a row without both a channel and a recipient, which
// is not a conversation.
func conversationFromRow(raw json.RawMessage) (*Conversation, bool) {
	var r sessionRow
	if kindOf(raw) != kindObject {
		return nil, false
	}
	if !scanRow(raw, &r) {
		r = sessionRow{}
		if json.Unmarshal(raw, &r) != nil {
			return nil, false
		}
	}
	c := conversationFromSessionRow(&r)
	return c, c != nil
}

// conversationFromSessionRow resolves the route of a decoded row; nil when
// the row is not a conversation.
func conversationFromSessionRow(r *sessionRow) *Conversation {
	key, ok := rawString(r.Key)
	if !ok {
		return nil
	}
	channel := firstString(r.DeliveryContext.Channel, r.LastChannel, r.Channel, r.Origin.Provider)
	to := firstString(r.DeliveryContext.To, r.LastTo)
	if channel == "" || to == "" {
		return nil
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
		c.UpdatedAt = jsonw.Compact(r.UpdatedAt)
	}
	return c
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
	return string(jsonw.Compact(raw))
}
