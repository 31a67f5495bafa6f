package decisionlog_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/decisionlog"
)

// record is a before_tool_call audit record as the engine writes it.
func record() policies.AuditRecord {
	return policies.AuditRecord{DecisionID: policies.NextDecisionID(), Time: time.Now().UTC(), Hook: policies.HookBeforeToolCall,
		Surface: policies.SurfaceProxy, Caller: "claude-code/2.1", Subject: "alice", Issuer: "https://idp.example.com",
		Tool: "docs__search", Server: "docs", Module: "rules", ModuleSHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Mode: policies.Enforce, Decision: "allow", DurationUs: 12}
}

// BenchmarkDecisionLog is the per-decision cost on the calling goroutine
// of the decision log shipper (Record: the enqueue; the batching, gzip and
// POST run on the shipper's goroutine, to an HTTP sink on loopback) beside
// the local audit log's write of the same record to a file, interleaved in
// one run: each operation times 100 records of each. It reports the median
// and mean per decision of each (enqueue-median-ns, auditlog-median-ns,
// …-mean-ns: the mean takes the batches during which the shipper's
// goroutine held the other core) and the
// records the shipper dropped (dropped; a drop would be a cheaper path
// than the enqueue measured).
func BenchmarkDecisionLog(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer sink.Close()
	s, err := decisionlog.New(decisionlog.Options{URL: sink.URL, BufferEvents: 200000})
	if err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(filepath.Join(b.TempDir(), "audit.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	audit := policies.NewAuditLog(f)
	r := record()
	const per = 100
	var enq, local []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		for range per {
			s.Record(r)
		}
		t1 := time.Now()
		for range per {
			audit.Record(r)
		}
		t2 := time.Now()
		enq, local = append(enq, t1.Sub(t0)/per), append(local, t2.Sub(t1)/per)
	}
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.Close(ctx)
	mean := func(d []time.Duration) float64 {
		var sum time.Duration
		for _, x := range d {
			sum += x
		}
		return float64(sum.Nanoseconds()) / float64(len(d))
	}
	b.ReportMetric(mean(enq), "enqueue-mean-ns")
	b.ReportMetric(mean(local), "auditlog-mean-ns")
	slices.Sort(enq)
	slices.Sort(local)
	b.ReportMetric(float64(enq[len(enq)/2].Nanoseconds()), "enqueue-median-ns")
	b.ReportMetric(float64(local[len(local)/2].Nanoseconds()), "auditlog-median-ns")
	b.ReportMetric(float64(s.Stats().Dropped), "dropped")
}

// TestRefusedBatchIsDropped: a batch the endpoint refuses for good (a 4xx
// other than 408 and 429) is not sent again: its records are dropped and
// counted, and Close says how many.
func TestRefusedBatchIsDropped(t *testing.T) {
	t.Parallel()
	posts := make(chan struct{}, 16)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts <- struct{}{}
		http.Error(w, "bad token", http.StatusUnauthorized)
	}))
	defer sink.Close()
	s, err := decisionlog.New(decisionlog.Options{URL: sink.URL, FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		s.Record(record())
	}
	<-posts
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.Close(ctx)
	st := s.Stats()
	if st.Dropped != 3 || st.Shipped != 0 || len(posts) > 0 && st.Failures != uint64(1+len(posts)) {
		t.Fatalf("stats %+v after a 401: want 3 dropped, none shipped", st)
	}
	s.Record(record())
	if st := s.Stats(); st.Dropped != 4 {
		t.Fatalf("a record after Close: stats %+v, want it dropped and counted", st)
	}
}

// BenchmarkShipperCPU is the CPU time of the whole process (the caller's
// enqueue, the shipper's encoding, gzip and POST, and the loopback sink
// reading the body) per shipped decision: b.N records, then Close, which
// ships them all (cpu-ns/decision).
func BenchmarkShipperCPU(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer sink.Close()
	s, err := decisionlog.New(decisionlog.Options{URL: sink.URL, BufferEvents: b.N + 1})
	if err != nil {
		b.Fatal(err)
	}
	r := record()
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for range b.N {
		s.Record(r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/decision")
	if st := s.Stats(); st.Shipped != uint64(b.N) {
		b.Fatalf("stats %+v, want %d shipped", st, b.N)
	}
}

// cpuTime is the CPU time (user and system) of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestRedirectIsNotFollowed: an endpoint answering 3xx (a trailing-slash
// 301, a 302 to a login page) does not ship a batch: following it would
// turn the POST into a GET that answers 200, the decisions counted as
// shipped and lost (or, to another scheme, sent where the URL check never
// looked). The batch is dropped and stderr names the Location.
func TestRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		if r.URL.Path == "/v1" {
			http.Redirect(w, r, "/v1/", http.StatusMovedPermanently)
		}
	}))
	defer sink.Close()
	var logged bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logged.Write(p)
	}), nil))
	s, err := decisionlog.New(decisionlog.Options{URL: sink.URL + "/v1", FlushInterval: time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		s.Record(record())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.Close(ctx)
	mu.Lock()
	defer mu.Unlock()
	logMu.Lock()
	defer logMu.Unlock()
	if st := s.Stats(); st.Shipped != 0 || st.Dropped != 3 || slices.Contains(seen, "GET /v1/") {
		t.Fatalf("stats %+v, requests %v after a 301: want none shipped, 3 dropped, the redirect not followed", st, seen)
	}
	if !strings.Contains(logged.String(), "/v1/") {
		t.Fatalf("the log does not name the Location:\n%s", logged.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
