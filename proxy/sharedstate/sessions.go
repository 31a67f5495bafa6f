package sharedstate

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// sessionPrefix starts the keys of the session records.
const sessionPrefix = KeyPrefix + "session:"

// Session is the record of an MCP session (streamable HTTP, MCP
// 2025-11-25 and older) that lets another replica take it over: who
// opened it, what was negotiated, and what the client set since, which
// the replica that takes it over replays upstream.
type Session struct {
	V int `json:"v"`
	// Owner is the identity that opened the session (the proxy's session
	// user: issuer and subject); only the same identity may use it.
	Owner string `json:"owner"`
	// Protocol is the negotiated MCP revision.
	Protocol string `json:"protocol"`
	// Initialize is the client's initialize params, as JSON.
	Initialize json.RawMessage `json:"initialize"`
	// LogLevel is the client's logging/setLevel, "" for none.
	LogLevel string `json:"log_level,omitempty"`
	// Subscriptions are the URIs of the client's resources/subscribe.
	Subscriptions []string `json:"subscriptions,omitempty"`
}

// DecodeSession reads a session record as stored.
func DecodeSession(raw []byte) (Session, error) {
	var s Session
	if err := decodeRecord("session", raw, &s); err != nil {
		return Session{}, err
	}
	if s.Protocol == "" || len(s.Initialize) == 0 || s.Initialize[0] != '{' {
		return Session{}, errMalformed("session", "no protocol or initialize params")
	}
	return s, nil
}

// PutSession writes the record of session id, expiring ttl from now.
func (s *State) PutSession(ctx context.Context, id string, rec Session, ttl time.Duration) error {
	rec.V = RecordVersion
	return s.wrap("session record", s.client.Set(ctx, sessionPrefix+id, encodeRecord(rec), ttl).Err())
}

// GetSession reads the record of session id; found is false when there is
// none (never written, expired or deleted). A record that does not decode
// (a newer release's: a [*VersionError]) is an error.
func (s *State) GetSession(ctx context.Context, id string) (rec Session, found bool, err error) {
	raw, err := s.client.Get(ctx, sessionPrefix+id).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return Session{}, false, nil
	case err != nil:
		return Session{}, false, s.wrap("session record", err)
	}
	rec, err = DecodeSession(raw)
	if err != nil {
		return Session{}, false, err
	}
	return rec, true, nil
}

// TouchSession moves the expiry of session id's record to ttl from now
// (the sliding TTL); a missing record stays missing.
func (s *State) TouchSession(ctx context.Context, id string, ttl time.Duration) error {
	return s.wrap("session record", s.client.PExpire(ctx, sessionPrefix+id, ttl).Err())
}

// DeleteSession removes the record of session id (the client ended it).
func (s *State) DeleteSession(ctx context.Context, id string) error {
	return s.wrap("session record", s.client.Del(ctx, sessionPrefix+id).Err())
}
