package bridge

import (
	"context"
	"encoding/json"
)

// GatewayConn is what the channel bridge needs from a Gateway connection.
// gwclient.Client implements it.
type GatewayConn interface {
	// Request sends one Gateway RPC and returns its payload, which must be
	// valid JSON (gwclient validates every frame): the bridge reads large
	// payloads with a scanner that skips what it does not need and does not
	// validate it again. It waits until
	// the connection is ready (handshake done and sessions.subscribe
	// answered) before sending. A Gateway error response is returned as a
	// *protocol.RequestError whose Error() is the Gateway's message.
	Request(ctx context.Context, method string, params any) (json.RawMessage, error)
	// HasMethod reports whether hello-ok listed method in features.methods
	// (used for chat.message.get). It is false before the first hello-ok.
	HasMethod(method string) bool
}

// GatewayEvent is one Gateway event frame delivered to the bridge: Name is
// the "event" field, Payload the raw "payload".
type GatewayEvent struct {
	Name    string
	Payload json.RawMessage
}
