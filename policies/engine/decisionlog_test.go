package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/engine"
	"github.com/openclaw-go/openclaw/policies/policiestest"
)

// writeSinkPolicy writes a policy file that ships to d (its certificate
// as ca_file, its token in token_file) and audits to audit.jsonl, with
// extra members of decision_log; it returns the policy file and the
// audit log.
func writeSinkPolicy(t *testing.T, d *policiestest.DecisionSink, extra string) (policyFile, auditLog string) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, "sink-ca.pem", d.CAPEM())
	writeFile(t, dir, "sink-token", []byte(d.Token+"\n"))
	auditLog = filepath.Join(dir, "audit.jsonl")
	policyFile = writeFile(t, dir, "policy.json", fmt.Appendf(nil, `{"modules":[],"audit_log":"audit.jsonl","decision_log":{
		"url":%q,"token_file":"sink-token","ca_file":"sink-ca.pem","labels":{"fleet":"dev"},"flush_interval_ms":5%s}}`, d.URL(), extra))
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
	d := policiestest.NewDecisionSink(t)
	pf, auditLog := writeSinkPolicy(t, d, "")
	e, err := engine.Load(context.Background(), &engine.Options{ConfigFile: pf, Host: testHost()})
	if err != nil {
		t.Fatal(err)
	}
	sha := e.Modules()[0].SHA256

	decideConcurrently(e, 400)
	d.SetDown(true)
	decideConcurrently(e, 800)
	<-d.Failed() // the shipper met the sink down with decisions to ship
	decideConcurrently(e, 400)
	d.SetDown(false)
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
	got := d.Events()
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
		t.Fatalf("the sink received %d events, the audit log has %d records: the IDs differ (sink refused: %v; stats %+v)", len(shipped), len(local), d.Refused(), st)
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
	d := policiestest.NewDecisionSink(t)
	d.SetDown(true)
	pf, auditLog := writeSinkPolicy(t, d, `,"buffer_events":20,"batch_events":5`)
	logs := &syncBuffer{}
	e, err := engine.Load(context.Background(), &engine.Options{ConfigFile: pf, Host: testHost(), Logger: slogTo(logs)})
	if err != nil {
		t.Fatal(err)
	}
	decideConcurrently(e, 400)
	<-d.Failed()
	d.SetDown(false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = e.Close(ctx)
	st, _ := e.DecisionLogStats()
	local := localIDs(t, auditLog)
	got := d.Events()
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
