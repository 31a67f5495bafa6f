package gateway

import (
	"encoding/json"

	"github.com/openclaw-go/openclaw/internal/jsonw"
)

// object is a JSON object that keeps its keys in insertion order, so that
// payloads come out in the same key order as OpenClaw writes them (which
// matters to clients that pretty-print them, like `openclaw mcp serve`).
type object []member

type member struct {
	key   string
	value any
}

// set appends key (or replaces its value when present) and returns o.
func (o object) set(key string, value any) object {
	for i := range o {
		if o[i].key == key {
			o[i].value = value
			return o
		}
	}
	return append(o, member{key, value})
}

// setIf appends key only when ok.
func (o object) setIf(ok bool, key string, value any) object {
	if !ok {
		return o
	}
	return o.set(key, value)
}

// get returns the value of key.
func (o object) get(key string) (any, bool) {
	for _, m := range o {
		if m.key == key {
			return m.value, true
		}
	}
	return nil, false
}

// MarshalJSON writes the members in order, each value as json.Marshal
// writes it.
func (o object) MarshalJSON() ([]byte, error) {
	w := jsonw.NewObject(nil)
	for _, m := range o {
		v, err := json.Marshal(m.value)
		if err != nil {
			return nil, err
		}
		w.Raw(m.key, v)
	}
	return w.Close(), nil
}
