package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Seed is the JSON seed format: sessions with their route and transcript.
// Applying a seed is idempotent: sessions are upserted, and messages whose
// id the session already has are skipped.
//
//	{"sessions":[{"key":"agent:main:main","sessionId":"sess-main","displayName":"…",
//	  "route":{"channel":"imessage","to":"+15551234567","accountId":"…","threadId":"…"},
//	  "messages":[{"id":"msg-1","offsetMs":0,"message":{"role":"user","content":"hi"}}]}]}
type Seed struct {
	Sessions []SeedSession `json:"sessions"`
}

// SeedSession is one seeded session.
type SeedSession struct {
	// Key is the session key, for example "agent:main:main". Required.
	Key string `json:"key"`
	// SessionID is the transcript id; empty: "sess-<uuid>".
	SessionID string `json:"sessionId,omitempty"`
	// DisplayName and Label are shown by sessions.list; optional.
	DisplayName string `json:"displayName,omitempty"`
	Label       string `json:"label,omitempty"`
	// Route is the conversation's reply route; nil: an unrouted session.
	Route *Route `json:"route,omitempty"`
	// Messages are appended in order.
	Messages []SeedMessage `json:"messages,omitempty"`
}

// SeedMessage is one seeded transcript message.
type SeedMessage struct {
	// ID is the message id (__openclaw.id). Required.
	ID string `json:"id"`
	// OffsetMs places the message at seeding time + OffsetMs when the
	// message has no timestamp of its own.
	OffsetMs int64 `json:"offsetMs,omitempty"`
	// Message is the message object: role ("user", "assistant" or
	// "system"), content (a string or content blocks), optional timestamp
	// (Unix ms) and optional __openclaw.media; other fields are kept as
	// given.
	Message json.RawMessage `json:"message"`
}

// SeedResult reports what [Server.ApplySeed] changed.
type SeedResult struct {
	Sessions int `json:"sessions"`
	Messages int `json:"messages"`
	Skipped  int `json:"skipped"`
}

// ParseSeed decodes and validates a seed document; unknown fields are errors.
func ParseSeed(data []byte) (*Seed, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Seed
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("gateway: seed: %w", err)
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

func (sd *Seed) validate() error {
	for i, ss := range sd.Sessions {
		if strings.TrimSpace(ss.Key) == "" {
			return fmt.Errorf("gateway: seed: sessions[%d]: key is required", i)
		}
		if ss.Route != nil && (ss.Route.Channel == "") != (ss.Route.To == "") {
			return fmt.Errorf("gateway: seed: session %s: route needs both channel and to", ss.Key)
		}
		for j, m := range ss.Messages {
			if strings.TrimSpace(m.ID) == "" {
				return fmt.Errorf("gateway: seed: session %s: messages[%d]: id is required", ss.Key, j)
			}
			if _, err := seedBody(m, 0); err != nil {
				return fmt.Errorf("gateway: seed: session %s: message %s: %w", ss.Key, m.ID, err)
			}
		}
	}
	return nil
}

type seededMessage struct {
	role  string
	ts    int64
	body  object
	extra object // __openclaw fields other than the ones the store assigns
}

// seedBody builds the stored form of a seed message; base is the seeding
// time.
func seedBody(m SeedMessage, base int64) (*seededMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(m.Message, &fields); err != nil || fields == nil {
		return nil, errors.New("message must be a JSON object")
	}
	var role string
	if err := json.Unmarshal(fields["role"], &role); err != nil || (role != "user" && role != "assistant" && role != "system") {
		return nil, errors.New(`role must be "user", "assistant" or "system"`)
	}
	content := bytes.TrimSpace(fields["content"])
	if len(content) == 0 || (content[0] != '"' && content[0] != '[') {
		return nil, errors.New("content must be a string or an array of blocks")
	}
	sm := &seededMessage{role: role, ts: base + m.OffsetMs}
	if raw, ok := fields["timestamp"]; ok {
		if err := json.Unmarshal(raw, &sm.ts); err != nil {
			return nil, errors.New("timestamp must be Unix milliseconds")
		}
	}
	sm.body = object{{"role", role}, {"content", json.RawMessage(content)}, {"timestamp", sm.ts}}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch k {
		case "role", "content", "timestamp":
		case "__openclaw":
			var oc map[string]json.RawMessage
			if err := json.Unmarshal(fields[k], &oc); err != nil {
				return nil, errors.New("__openclaw must be an object")
			}
			for _, ok := range []string{"media", "transport"} {
				if v, has := oc[ok]; has {
					sm.extra = sm.extra.set(ok, v)
				}
			}
		default:
			sm.body = sm.body.set(k, fields[k])
		}
	}
	return sm, nil
}

// ApplySeed adds the seed's sessions and messages. Seeded messages are
// history: they emit no session.message events. Their
// __openclaw.recordTimestampMs is their timestamp, as in OpenClaw's own
// seeding.
func (s *Server) ApplySeed(ctx context.Context, sd *Seed) (*SeedResult, error) {
	if err := sd.validate(); err != nil {
		return nil, err
	}
	base := s.nowMs()
	res := &SeedResult{}
	s.events.Lock()
	defer s.events.Unlock()
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	for _, ss := range sd.Sessions {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		sess, err := s.store.upsertLocked(sessionRecord{Key: ss.Key, SessionID: ss.SessionID, DisplayName: ss.DisplayName,
			Label: ss.Label, Route: ss.Route, UpdatedAt: base}, base)
		if err != nil {
			return res, err
		}
		res.Sessions++
		for _, m := range ss.Messages {
			if _, dup := sess.byID[m.ID]; dup {
				res.Skipped++
				continue
			}
			sm, err := seedBody(m, base)
			if err != nil {
				return res, fmt.Errorf("gateway: seed: session %s: message %s: %w", ss.Key, m.ID, err)
			}
			if _, err := s.store.appendLocked(sess, newMessage{id: m.ID, role: sm.role, ts: sm.ts, body: sm.body,
				ocBefore: sm.extra}, sm.ts, false); err != nil {
				return res, err
			}
			res.Messages++
		}
	}
	return res, nil
}

// DemoSeed returns the built-in "demo" seed, equal in content to OpenClaw's
// captured seed (peers/openclaw-real/seed.mjs): the routed iMessage
// conversation agent:main:main with a text message, a persisted-media message
// and an inline-image message; the Telegram DM agent:main:tg-dm; and the
// unrouted agent:main:noroute.
func DemoSeed() *Seed {
	msg := func(id string, off int64, m string) SeedMessage {
		return SeedMessage{ID: id, OffsetMs: off, Message: json.RawMessage(m)}
	}
	return &Seed{Sessions: []SeedSession{
		{Key: "agent:main:main", SessionID: "sess-main", DisplayName: "Seeded iMessage chat",
			Route: &Route{Channel: "imessage", To: "+15551234567", AccountID: "imessage-default", ThreadID: "thread-42"},
			Messages: []SeedMessage{
				msg("msg-1", 0, `{"role":"assistant","content":[{"type":"text","text":"hello from seeded transcript"}]}`),
				msg("msg-attachment", 1, `{"role":"user","content":"seeded image attachment","__openclaw":{"media":[{"url":"media://inbound/seeded-image.png","contentType":"image/png","kind":"image","fileName":"seeded-image.png","sizeBytes":3}]}}`),
				msg("msg-inline-img", 2, `{"role":"assistant","content":[{"type":"text","text":"inline image block"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"abc"}}]}`),
			}},
		{Key: "agent:main:tg-dm", SessionID: "sess-tg", DisplayName: "Seeded Telegram DM",
			Route: &Route{Channel: "telegram", To: "12345", AccountID: "default"},
			Messages: []SeedMessage{
				msg("tg-1", 3, `{"role":"user","content":"hi from telegram"}`),
			}},
		{Key: "agent:main:noroute", SessionID: "sess-noroute", DisplayName: "No route session",
			Messages: []SeedMessage{
				msg("nr-1", 4, `{"role":"user","content":"no route"}`),
			}},
	}}
}
