package proxy

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/openclaw-go/openclaw/policies"
)

// MinStateKeyBytes is the shortest key Options.StateKey accepts.
const MinStateKeyBytes = 32

// requestState is what the proxy keeps in the requestState it hands a
// 2026-07-28 client with input requests (SEP-2322), sealed with an HMAC
// so that the client cannot forge or alter it, and bound to the request it
// was issued for so that it cannot be replayed on another.
type requestState struct {
	// Method, Name and Args name the request: "tools/call" and the exposed
	// tool, "prompts/get" and the exposed prompt, "resources/read" and the
	// URI; Args is the SHA-256 of the arguments' canonical JSON.
	Method string `json:"m"`
	Name   string `json:"n"`
	Args   string `json:"a,omitempty"`
	// Upstream is the server's own requestState, relayed: any replica
	// sharing the key resumes the request by sending it back upstream.
	Upstream string `json:"u,omitempty"`
	// Round keys a call in rounds (Proxy.rounds), held by this process:
	// a server's request made during a call (MCP 2025-11-25 upstream).
	Round string `json:"r,omitempty"`
	// Approval is the key, in the input requests handed to the client, of
	// the approval question of a require_approval asked in Round: a
	// replica that does not hold Round runs the call again with the
	// client's answer to it (the question comes before the upstream call).
	Approval string `json:"p,omitempty"`
	// Owner is the authenticated identity the state was handed to
	// (issuer and subject, stateOwner), "" for a client without one: only
	// the same identity resumes it.
	Owner string `json:"o,omitempty"`
	// Expires is when the state stops being accepted, in Unix seconds.
	Expires int64 `json:"e"`
	// Nonce is random, set by seal: the state is used once (StateNonces),
	// so that a retry, replayed, does not run its request again.
	Nonce string `json:"x"`
}

// stateOwner names id as a requestState's Owner: "" for none.
func stateOwner(id *policies.Identity) string {
	if id == nil {
		return ""
	}
	return sessionUser(id)
}

// stateSealer seals and opens request states with an HMAC-SHA256 key.
type stateSealer struct{ key []byte }

// newStateSealer returns a sealer for key, or for a random key when key is
// empty (states then open only in this process).
func newStateSealer(key []byte) (*stateSealer, error) {
	if len(key) == 0 {
		key = make([]byte, MinStateKeyBytes)
		_, _ = rand.Read(key) // crypto/rand.Read never fails
	} else if len(key) < MinStateKeyBytes {
		return nil, fmt.Errorf("proxy: the request-state key has %d bytes; it needs at least %d", len(key), MinStateKeyBytes)
	}
	return &stateSealer{key: key}, nil
}

// argsDigest is the SHA-256 of args' canonical JSON (keys sorted, no
// spaces), base64url: a retry that re-encodes the same arguments matches.
func argsDigest(args any) string {
	raw, err := json.Marshal(args)
	if err != nil {
		return ""
	}
	var v any
	if json.Unmarshal(raw, &v) == nil {
		raw, _ = json.Marshal(v)
	}
	if string(raw) == "null" || string(raw) == "{}" {
		return ""
	}
	sum := sha256.Sum256(raw)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func (s *stateSealer) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// seal returns st as a requestState string: base64url(JSON) "."
// base64url(HMAC-SHA256), expiring RoundTimeout from now.
func (s *stateSealer) seal(st requestState) string {
	st.Expires = time.Now().Add(RoundTimeout).Unix()
	st.Nonce = rand.Text()
	raw, _ := json.Marshal(st) // strings and an integer always encode
	payload := base64.RawURLEncoding.EncodeToString(raw)
	return payload + "." + base64.RawURLEncoding.EncodeToString(s.mac(payload))
}

// errBadState is the error of a requestState the proxy did not issue for
// this request, or that expired.
func errBadState(why string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "proxy: requestState rejected: " + why}
}

// open checks a requestState a client sent back with a request (method,
// name, args), by the identity owner (stateOwner), and returns what it
// holds. The error, a JSON-RPC invalid params error, says whether the state
// was forged or altered, issued for another request or another identity,
// or expired.
func (s *stateSealer) open(state, owner, method, name string, args any) (requestState, error) {
	payload, sig, ok := strings.Cut(state, ".")
	mac, err := base64.RawURLEncoding.DecodeString(sig)
	if !ok || err != nil || !hmac.Equal(mac, s.mac(payload)) {
		return requestState{}, errBadState("not issued by this proxy (or altered)")
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	var st requestState
	if err == nil {
		err = json.Unmarshal(raw, &st)
	}
	switch {
	case err != nil || st.Nonce == "":
		return requestState{}, errBadState("unreadable")
	case st.Method != method || st.Name != name || st.Args != argsDigest(args):
		return requestState{}, errBadState(fmt.Sprintf("issued for another request (%s %q with other arguments?)", st.Method, st.Name))
	case st.Owner != owner:
		return requestState{}, errBadState("issued to another identity")
	case time.Now().Unix() > st.Expires:
		return requestState{}, errBadState("expired")
	}
	return st, nil
}

// StateNonces records the nonces of the requestStates used, so that each
// state runs its request once: across replicas when they share the store
// (*sharedstate.State, in Redis), else within one process
// (NewMemoryStateNonces). Errors name the store.
type StateNonces interface {
	// UseStateNonce marks nonce used for ttl (the state's remaining
	// life); fresh is false when it was already used. Atomic: of two
	// concurrent uses of one nonce, one is fresh.
	UseStateNonce(ctx context.Context, nonce string, ttl time.Duration) (fresh bool, err error)
}

// memoryNonces is the StateNonces of one process.
type memoryNonces struct {
	mu    sync.Mutex
	used  map[string]time.Time // nonce → when it may be forgotten
	sweep time.Time            // the next pass over used for expired nonces
}

// NewMemoryStateNonces returns a StateNonces held in this process: the
// default without --state. A nonce is forgotten once its ttl has passed
// (its state has expired by then).
func NewMemoryStateNonces() StateNonces {
	return &memoryNonces{used: map[string]time.Time{}}
}

func (m *memoryNonces) UseStateNonce(_ context.Context, nonce string, ttl time.Duration) (bool, error) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if now.After(m.sweep) {
		for n, until := range m.used {
			if now.After(until) {
				delete(m.used, n)
			}
		}
		m.sweep = now.Add(time.Minute)
	}
	if until, ok := m.used[nonce]; ok && !now.After(until) {
		return false, nil
	}
	m.used[nonce] = now.Add(ttl)
	return true, nil
}

// stateNonceTimeout bounds the use of a nonce on the path of a retry.
const stateNonceTimeout = 2 * time.Second

// useState marks st used (its nonce, for the rest of its life) before the
// request it continues runs: a state already used is refused (invalid
// params), and so is every state while the store cannot say, with
// CodeSharedState and the store's error (fail closed).
func (p *Proxy) useState(ctx context.Context, st requestState) error {
	ttl := time.Until(time.Unix(st.Expires, 0)) + time.Second
	ctx, cancel := context.WithTimeout(ctx, stateNonceTimeout)
	defer cancel()
	fresh, err := p.nonces.UseStateNonce(ctx, st.Nonce, ttl)
	if err != nil {
		return &jsonrpc.Error{Code: CodeSharedState, Message: "proxy: requestState not accepted: whether it was used cannot be checked: " + err.Error()}
	}
	if !fresh {
		return errBadState("already used (a retry runs once; send the request again without requestState to start over)")
	}
	return nil
}

// errNoState is the cause of a call in rounds this process does not hold.
var errNoState = errors.New("proxy: unknown or expired requestState")
