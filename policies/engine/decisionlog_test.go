package engine_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/engine"
)

// decisionSink is a real HTTPS endpoint of decision logs: it checks the
// bearer token and the gzip encoding, and keeps every event. While down it
// drops each connection without an answer.
type decisionSink struct {
	srv    *httptest.Server
	token  string
	down   atomic.Bool
	failed chan struct{} // one send per connection dropped while down

	mu     sync.Mutex
	events []sinkEvent
	bad    []string // what was refused, for the failure message
}

// sinkEvent is the part of a shipped event the tests read.
type sinkEvent struct {
	Labels     map[string]string `json:"labels"`
	DecisionID string            `json:"decision_id"`
	Path       string            `json:"path"`
	Timestamp  string            `json:"timestamp"`
	Result     string            `json:"result"`
	Record     json.RawMessage   `json:"record"`
}

func newDecisionSink(t *testing.T) *decisionSink {
	d := &decisionSink{token: "sink-token-42", failed: make(chan struct{}, 1024)}
	d.srv = httptest.NewTLSServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *decisionSink) serve(w http.ResponseWriter, r *http.Request) {
	if d.down.Load() {
		select {
		case d.failed <- struct{}{}:
		default:
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	}
	refuse := func(code int, why string) {
		d.mu.Lock()
		d.bad = append(d.bad, why)
		d.mu.Unlock()
		http.Error(w, why, code)
	}
	if r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer "+d.token {
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
	var batch []sinkEvent
	if err := json.Unmarshal(raw, &batch); err != nil {
		refuse(http.StatusBadRequest, err.Error())
		return
	}
	d.mu.Lock()
	d.events = append(d.events, batch...)
	d.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (d *decisionSink) received() []sinkEvent {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.events)
}

// writeSinkPolicy writes a policy file that ships to d (its certificate
// as ca_file, its token in token_file) and audits to audit.jsonl, with
// extra members of decision_log; it returns the policy file and the
// audit log.
func writeSinkPolicy(t *testing.T, d *decisionSink, extra string) (policyFile, auditLog string) {
	t.Helper()
	dir := t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: d.srv.Certificate().Raw})
	writeFile(t, dir, "sink-ca.pem", ca)
	writeFile(t, dir, "sink-token", []byte(d.token+"\n"))
	auditLog = filepath.Join(dir, "audit.jsonl")
	policyFile = writeFile(t, dir, "policy.json", fmt.Appendf(nil, `{"modules":[],"audit_log":"audit.jsonl","decision_log":{
		"url":%q,"token_file":"sink-token","ca_file":"sink-ca.pem","labels":{"fleet":"dev"},"flush_interval_ms":5%s}}`, d.srv.URL, extra))
	return policyFile, auditLog
}

// localIDs returns the decision_id of every line of the audit log.
func localIDs(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ids []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct {
			DecisionID string `json:"decision_id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.DecisionID == "" {
			t.Fatalf("audit line %q: no decision_id (%v)", sc.Text(), err)
		}
		ids = append(ids, r.DecisionID)
	}
	return ids
}

// decideConcurrently makes n before_tool_call decisions from 8 goroutines.
func decideConcurrently(e *engine.Engine, n int) {
	var wg sync.WaitGroup
	per := n / 8
	for g := range 8 {
		wg.Go(func() {
			for i := range per {
				e.BeforeToolCall(context.Background(), call(fmt.Sprintf("g%d-%d", g, i)))
			}
		})
	}
	wg.Wait()
}

// TestDecisionLogShipsWhatTheAuditLogHas: decisions made under load, while
// the HTTPS sink answers, while it is down (connections dropped) and after
// it is back, all reach it by the time the engine is closed: the sink's
// decision IDs are exactly the local audit log's, each event carries the
// hook's path, the decision, the labels and the sha256 of the module that
// decided, and none carries arguments.
func TestDecisionLogShipsWhatTheAuditLogHas(t *testing.T) {
	t.Parallel()
	d := newDecisionSink(t)
	pf, auditLog := writeSinkPolicy(t, d, "")
	e, err := engine.Load(context.Background(), &engine.Options{ConfigFile: pf, Host: testHost()})
	if err != nil {
		t.Fatal(err)
	}
	sha := e.Modules()[0].SHA256

	decideConcurrently(e, 400)
	d.down.Store(true)
	decideConcurrently(e, 800)
	<-d.failed // the shipper met the sink down with decisions to ship
	decideConcurrently(e, 400)
	d.down.Store(false)
	decideConcurrently(e, 400)
	call := call("with-args")
	call.Arguments = []byte(`{"secret":"never-shipped"}`)
	e.BeforeToolCall(context.Background(), call)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := e.Close(ctx); err != nil {
		t.Fatalf("close (drains the shipper): %v", err)
	}
	st, _ := e.DecisionLogStats()
	local := localIDs(t, auditLog)
	got := d.received()
	if len(local) != 2001 {
		t.Fatalf("audit log has %d records, want 2001", len(local))
	}
	var shipped []string
	for _, ev := range got {
		shipped = append(shipped, ev.DecisionID)
		var rec struct {
			DecisionID   string `json:"decision_id"`
			Hook         string `json:"hook"`
			Decision     string `json:"decision"`
			Module       string `json:"module"`
			ModuleSHA256 string `json:"module_sha256"`
		}
		if err := json.Unmarshal(ev.Record, &rec); err != nil {
			t.Fatal(err)
		}
		if ev.Path != "openclaw/before_tool_call" || ev.Result != "allow" || ev.Labels["fleet"] != "dev" || ev.Labels["id"] != policies.ProcessID() ||
			rec.DecisionID != ev.DecisionID || rec.Module != "rules" || rec.ModuleSHA256 != sha || ev.Timestamp == "" {
			t.Fatalf("event %+v (record %s): want path openclaw/before_tool_call, result allow, labels fleet and id, the rules module's sha256 %s", ev, ev.Record, sha)
		}
		if bytes.Contains(ev.Record, []byte("never-shipped")) {
			t.Fatalf("an event carries the call's arguments: %s", ev.Record)
		}
	}
	slices.Sort(local)
	slices.Sort(shipped)
	if !slices.Equal(local, shipped) {
		t.Fatalf("the sink received %d events, the audit log has %d records: the IDs differ (sink refused: %v; stats %+v)", len(shipped), len(local), d.bad, st)
	}
	if st.Shipped != 2001 || st.Dropped != 0 || st.Failures == 0 || st.Pending != 0 {
		t.Errorf("stats %+v: want 2001 shipped, none dropped or pending, failures while the sink was down", st)
	}
}

// TestDecisionLogCountsDrops: with the sink down and a buffer of 20
// events, the decisions over it are dropped and counted, never blocking a
// call; what was shipped and what was dropped add up to the audit log,
// and the drops are said on the logger, once per interval.
func TestDecisionLogCountsDrops(t *testing.T) {
	t.Parallel()
	d := newDecisionSink(t)
	d.down.Store(true)
	pf, auditLog := writeSinkPolicy(t, d, `,"buffer_events":20,"batch_events":5`)
	logs := &syncBuffer{}
	e, err := engine.Load(context.Background(), &engine.Options{ConfigFile: pf, Host: testHost(), Logger: slogTo(logs)})
	if err != nil {
		t.Fatal(err)
	}
	decideConcurrently(e, 400)
	<-d.failed
	d.down.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = e.Close(ctx)
	st, _ := e.DecisionLogStats()
	local := localIDs(t, auditLog)
	got := d.received()
	if st.Dropped == 0 || st.Shipped+st.Dropped != uint64(len(local)) || st.Shipped != uint64(len(got)) {
		t.Fatalf("stats %+v, sink %d events, audit log %d: want drops, and shipped + dropped = the audit log", st, len(got), len(local))
	}
	if st.Shipped > 20+5 {
		t.Errorf("%d shipped, more than the buffer (20) and one batch (5) could hold while the sink was down", st.Shipped)
	}
	if err != nil {
		t.Errorf("close: %v (every buffered decision was shipped once the sink was back)", err)
	}
	if s := logs.String(); !strings.Contains(s, "decisions were dropped, not shipped") || !strings.Contains(s, "dropped_total=") {
		t.Errorf("the drops are not said:\n%s", s)
	}
}

// TestAuditFailClosed: with audit_fail_closed, once the audit log cannot
// be written (/dev/full) every tool call is blocked, naming the log;
// without it, calls are still decided.
func TestAuditFailClosed(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	for _, failClosed := range []bool{true, false} {
		dir := t.TempDir()
		pf := writeFile(t, dir, "policy.json", fmt.Appendf(nil, `{"modules":[],"audit_log":"/dev/full","audit_fail_closed":%v}`, failClosed))
		logs := &syncBuffer{}
		e, err := engine.Load(context.Background(), &engine.Options{ConfigFile: pf, Host: testHost(), Logger: slogTo(logs)})
		if err != nil {
			t.Fatal(err)
		}
		d := e.BeforeToolCall(context.Background(), call(""))
		if failClosed {
			if d.Decision != policies.Block || !strings.Contains(d.Reason, "the decision audit log /dev/full cannot be written") || !strings.Contains(d.Reason, "audit_fail_closed") {
				t.Errorf("fail closed: %+v, want a block naming the audit log", d)
			}
			if !strings.Contains(logs.String(), "every tool call is refused (audit_fail_closed)") {
				t.Errorf("fail closed: not said:\n%s", logs.String())
			}
		} else if d.Decision != policies.Allow || !strings.Contains(logs.String(), "decisions are NOT being recorded") {
			t.Errorf("fail open: %+v, want allow and the error said:\n%s", d, logs.String())
		}
		_ = e.Close(context.Background())
	}
}

// slogTo is a text logger writing to w.
func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
