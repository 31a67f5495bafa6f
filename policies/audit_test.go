package policies

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// auditSamples are records with every field set or left empty, and strings
// encoding/json escapes differently from JavaScript.
var auditSamples = []AuditRecord{
	{},
	{Time: time.Date(2026, 12, 2, 1, 2, 3, 456789000, time.UTC), Hook: HookBeforeToolCall, Surface: SurfaceServe,
		SessionKey: "agent:main:main", Caller: "claude-code", Tool: "events_poll", Module: "rules", Mode: Enforce,
		Decision: "allow", DurationUs: 4},
	{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 3600)), Hook: HookDecideApproval, Surface: SurfaceProxy,
		SessionKey: "<a&b>", Caller: "bad\xffutf8", Tool: "t\u2028x", Server: "s\"q\\", Module: "m\n", Mode: AuditOnly,
		Decision: "block", Reason: "tab\there \x01", Error: "boom", DurationUs: -1},
}

// everyFieldSet is a record with every string field non-empty, found by
// reflection, so that a field added to AuditRecord and not to its encoder
// fails TestAuditLogRecordDecodesAsEncodingJSON.
func everyFieldSet() AuditRecord {
	r := AuditRecord{Time: time.Date(2026, 12, 2, 0, 0, 0, 1, time.UTC), DurationUs: 7}
	v := reflect.ValueOf(&r).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.String {
			f.SetString("v-" + v.Type().Field(i).Name)
		}
	}
	return r
}

// Every record the log writes is one JSON line that decodes to what
// encoding/json makes of the record.
func TestAuditLogRecordDecodesAsEncodingJSON(t *testing.T) {
	for _, r := range append(auditSamples, everyFieldSet()) {
		var buf bytes.Buffer
		NewAuditLog(&buf).Record(r)
		line := buf.String()
		if strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") {
			t.Fatalf("not one line: %q", line)
		}
		want, _ := json.Marshal(r)
		var got, exp any
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		_ = json.Unmarshal(want, &exp)
		if !reflect.DeepEqual(got, exp) {
			t.Errorf("record %+v\n wrote: %s\n  want: %s", r, line, want)
		}
		var back AuditRecord
		if err := json.Unmarshal([]byte(line), &back); err != nil || !back.Time.Equal(r.Time) {
			t.Errorf("time %v read back as %v (%v)", r.Time, back.Time, err)
		}
	}
}

// BenchmarkAuditLogRecord measures one audit record written to a discarding
// writer: the encoding, not the file.
//
//	go test -run '^$' -bench BenchmarkAuditLogRecord -benchmem ./policies/
func BenchmarkAuditLogRecord(b *testing.B) {
	l := NewAuditLog(io.Discard)
	r := auditSamples[1]
	b.ReportAllocs()
	for b.Loop() {
		l.Record(r)
	}
}

// A record costs no allocation once the log is warm: it is encoded into the
// log's own buffer, not through reflection.
func TestAuditLogRecordAllocatesNothing(t *testing.T) {
	l := NewAuditLog(io.Discard)
	r := auditSamples[1]
	if n := testing.AllocsPerRun(1000, func() { l.Record(r) }); n != 0 {
		t.Errorf("Record allocates %v times per record, want 0", n)
	}
}

// Decision IDs are the process run's ID, "-" and a sequence number: each
// one new, also from many goroutines.
func TestNextDecisionID(t *testing.T) {
	t.Parallel()
	if len(ProcessID()) != 16 {
		t.Fatalf("ProcessID %q: want 16 hex digits", ProcessID())
	}
	ids := make(chan string, 800)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				ids <- NextDecisionID()
			}
		})
	}
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		if !strings.HasPrefix(id, ProcessID()+"-") || seen[id] {
			t.Fatalf("decision ID %q: repeated, or not %s-N", id, ProcessID())
		}
		seen[id] = true
	}
}
