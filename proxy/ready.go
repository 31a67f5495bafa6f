package proxy

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// ReadyCheck is one condition of /readyz: Check returns nil when it holds,
// else an error saying what is missing (shown in the /readyz body under
// Name).
type ReadyCheck struct {
	// Name names the condition in the /readyz body, e.g. "policies".
	Name string
	// Check reports whether the condition holds; it is called on every
	// /readyz request and every /metrics scrape, so it must be cheap.
	Check func() error
}

// CodeDraining is the JSON-RPC error code of a new session (initialize,
// GET /sse) or a sessionless request refused, with 503 and Retry-After,
// because the proxy is draining.
const CodeDraining = -32004

// drainingRetryAfter is the Retry-After, in seconds, of a request refused
// while draining: at once, through the balancer, to another replica.
const drainingRetryAfter = "1"

// errDraining is the "draining" entry of a /readyz body.
var errDraining = errors.New("shutting down (SIGTERM or SIGINT): new sessions go to another replica; the sessions open here are served until the requests in flight end")

// ready is the /readyz body.
type ready struct {
	Ready bool `json:"ready"`
	// NotReady names each condition that does not hold, with the reason.
	NotReady map[string]string `json:"not_ready,omitempty"`
}

// readiness reports whether h takes traffic, and whether it drains; the
// map names each condition that does not hold (nil when ready).
func (h *HTTPHandler) readiness() (notReady map[string]string, draining bool) {
	h.mu.Lock()
	draining = h.draining
	h.mu.Unlock()
	add := func(name string, err error) {
		if notReady == nil {
			notReady = map[string]string{}
		}
		notReady[name] = err.Error()
	}
	if draining {
		add("draining", errDraining)
	}
	for _, c := range h.opts.Ready {
		if err := c.Check(); err != nil {
			add(c.Name, err)
		}
	}
	return notReady, draining
}

func (h *HTTPHandler) serveReady(w http.ResponseWriter, _ *http.Request) {
	notReady, _ := h.readiness()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if notReady != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(ready{Ready: notReady == nil, NotReady: notReady}) // a client that left misses it
}

// refuseDraining answers 503 with Retry-After and a JSON-RPC error to id
// when h is draining, and reports whether it did. It is asked of the
// requests that need no state of this process: a new session or a
// sessionless request, which the balancer sends to another replica.
func (h *HTTPHandler) refuseDraining(w http.ResponseWriter, id jsonrpc.ID) bool {
	h.mu.Lock()
	draining := h.draining
	h.mu.Unlock()
	if !draining {
		return false
	}
	w.Header().Set("Retry-After", drainingRetryAfter)
	w.Header().Set("Connection", "close") // the next request connects anew, through the balancer
	writeRPCError(w, http.StatusServiceUnavailable, id, CodeDraining,
		"this proxy is shutting down and takes no new sessions: retry, and the load balancer sends you to another replica")
	return true
}
