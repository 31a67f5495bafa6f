package policiestest

import (
	"compress/gzip"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// DecisionSink is a real HTTPS endpoint of decision logs
// (policies/decisionlog's format) for tests: it checks the bearer token,
// the method and the gzipped JSON body, keeps every event, and answers
// 204. While down it drops each connection without an answer.
type DecisionSink struct {
	// Token is the bearer token the sink accepts.
	Token string

	srv    *httptest.Server
	down   atomic.Bool
	failed chan struct{}

	mu      sync.Mutex
	events  []DecisionEvent
	refused []string
}

// DecisionEvent is one shipped event as the sink received it.
type DecisionEvent struct {
	Labels     map[string]string `json:"labels"`
	DecisionID string            `json:"decision_id"`
	Path       string            `json:"path"`
	Timestamp  string            `json:"timestamp"`
	Result     string            `json:"result"`
	// Record is the audit record, as the local audit log has it.
	Record json.RawMessage `json:"record"`
}

// NewDecisionSink starts a sink, closed when the test ends.
func NewDecisionSink(t testing.TB) *DecisionSink {
	d := &DecisionSink{Token: "sink-token-42", failed: make(chan struct{}, 1)}
	d.srv = httptest.NewTLSServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.srv.Close)
	return d
}

// URL is the sink's https:// URL.
func (d *DecisionSink) URL() string { return d.srv.URL }

// CAPEM is the PEM of the sink's certificate, the decision_log.ca_file
// that trusts it.
func (d *DecisionSink) CAPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: d.srv.Certificate().Raw})
}

// SetDown takes the sink down (every connection dropped) or back up.
func (d *DecisionSink) SetDown(down bool) { d.down.Store(down) }

// Failed receives once a connection was dropped while down (a pending
// value is kept until read).
func (d *DecisionSink) Failed() <-chan struct{} { return d.failed }

// Events returns the events received so far, in order of arrival.
func (d *DecisionSink) Events() []DecisionEvent {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.events)
}

// Refused returns why the sink refused the batches it refused.
func (d *DecisionSink) Refused() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.refused)
}

func (d *DecisionSink) serve(w http.ResponseWriter, r *http.Request) {
	if d.down.Load() {
		select {
		case d.failed <- struct{}{}:
		default:
		}
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			_ = conn.Close()
		}
		return
	}
	refuse := func(code int, why string) {
		d.mu.Lock()
		d.refused = append(d.refused, why)
		d.mu.Unlock()
		http.Error(w, why, code)
	}
	if r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer "+d.Token {
		refuse(http.StatusUnauthorized, "no token")
		return
	}
	if r.Header.Get("Content-Encoding") != "gzip" || r.Header.Get("Content-Type") != "application/json" {
		refuse(http.StatusUnsupportedMediaType, "not gzipped JSON")
		return
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		refuse(http.StatusBadRequest, err.Error())
		return
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		refuse(http.StatusBadRequest, err.Error())
		return
	}
	var batch []DecisionEvent
	if err := json.Unmarshal(raw, &batch); err != nil {
		refuse(http.StatusBadRequest, err.Error())
		return
	}
	d.mu.Lock()
	d.events = append(d.events, batch...)
	d.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}
