package gwclient

import (
	"strconv"

	"github.com/openclaw-go/openclaw/gateway/protocol"
	"github.com/openclaw-go/openclaw/internal/jsonw"
)

// This file decodes the frames that carry the Gateway's data (responses and
// events) about twice as fast as protocol.Decode: one validating pass over
// the message, then a pass that only finds the top-level members and keeps
// the payload as a slice of the message instead of a copy. A conversations_list
// waits for a sessions.list response of several KB, so this is on the hot
// path of every call. Whenever the result could differ from
// protocol.Decode's, the fast path declines and protocol.Decode decides.

// frameKeys are the members of a protocol.Frame, in the order of their bits
// in fastFrame.
var frameKeys = [...]string{"type", "id", "method", "params", "ok", "payload", "error", "event", "seq", "stateVersion"}

// decodeFrame is protocol.Decode, faster for well-formed responses without
// error and for events.
func decodeFrame(data []byte) (*protocol.Frame, error) {
	if f, ok := fastFrame(data); ok {
		return f, nil
	}
	return protocol.Decode(data)
}

// fastFrame returns the frame protocol.Decode would return for data, or
// false when it cannot be sure to agree: data that is not valid JSON or not
// an object, a key with an escape or a non-ASCII byte, a frame key that
// repeats or matches only case-insensitively (encoding/json folds case), a
// type other than "res" or "event", an error, method or params member, a
// member whose type protocol.Decode would reject, or a frame that
// protocol.Decode reports as malformed. The payload aliases data.
func fastFrame(data []byte) (*protocol.Frame, bool) {
	if !jsonw.Valid(data) {
		return nil, false
	}
	var f protocol.Frame
	var seen uint16
	ok := true
	err := jsonw.Members(data, func(k, v []byte) {
		if !ok {
			return
		}
		if !jsonw.PlainKey(k) {
			ok = false
			return
		}
		idx := -1
		for i, name := range frameKeys {
			if string(k) == name {
				idx = i
				break
			}
		}
		if idx < 0 {
			ok = !jsonw.FoldsTo(k, frameKeys[:])
			return
		}
		if seen&(1<<idx) != 0 {
			ok = false
			return
		}
		seen |= 1 << idx
		switch frameKeys[idx] {
		case "type":
			f.Type, ok = jsonw.PlainString(v)
		case "id":
			f.ID, ok = jsonw.PlainString(v)
		case "event":
			f.Event, ok = jsonw.PlainString(v)
		case "ok":
			switch string(v) {
			case "true", "false":
				b := v[0] == 't'
				f.OK = &b
			default:
				ok = false
			}
		case "payload":
			f.Payload = v
		case "stateVersion":
			f.StateVersion = v
		case "seq":
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil || n < 0 {
				ok = false
				return
			}
			f.Seq = &n
		default: // method, params, error: left to protocol.Decode
			ok = false
		}
	})
	if !ok || err != nil {
		return nil, false
	}
	switch f.Type {
	case protocol.TypeResponse:
		if f.ID == "" || f.OK == nil || f.Seq != nil {
			return nil, false
		}
	case protocol.TypeEvent:
		if f.Event == "" {
			return nil, false
		}
	default:
		return nil, false
	}
	return &f, true
}
