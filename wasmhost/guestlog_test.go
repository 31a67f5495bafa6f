package wasmhost

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordHandler keeps every record it is given.
type recordHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r)
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordHandler) take() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.records
	h.records = nil
	return r
}

func attrs(r slog.Record) map[string]string {
	m := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	return m
}

// TestGuestLogRateLimit: a module that logs on every call reaches the
// host logger with a burst of GuestLogBurst lines, then GuestLogRate a
// second (on a controlled clock); the first line after a drop is preceded
// by a warning naming the module and the count.
func TestGuestLogRateLimit(t *testing.T) {
	t.Parallel()
	h := &recordHandler{}
	m := loadInternal(t, "hostile", Options{Logger: slog.New(h)})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.log.now = func() time.Time { return now }
	call := func() {
		t.Helper()
		if out, err := m.CallBytes(context.Background(), "before_tool_call", []byte("hostile_log")); err != nil || string(out) != `{"decision":"allow"}` {
			t.Fatalf("call: %q, %v", out, err)
		}
	}
	for range GuestLogBurst + 50 {
		call()
	}
	got := h.take()
	if len(got) != GuestLogBurst {
		t.Fatalf("%d records for %d calls at one instant, want the burst of %d", len(got), GuestLogBurst+50, GuestLogBurst)
	}
	for _, r := range got {
		if r.Message != "hello from the guest" || r.Level != slog.LevelInfo || attrs(r)["module"] != "hostile" {
			t.Fatalf("record %v %q %v, want the guest's line at info with module=hostile", r.Level, r.Message, attrs(r))
		}
	}
	now = now.Add(time.Second)
	for range GuestLogRate + 5 {
		call()
	}
	got = h.take()
	if len(got) != GuestLogRate+1 {
		t.Fatalf("%d records one second later, want a warning and %d lines", len(got), GuestLogRate)
	}
	if w := got[0]; w.Level != slog.LevelWarn || !strings.Contains(w.Message, "guest log lines dropped") ||
		attrs(w)["module"] != "hostile" || attrs(w)["dropped"] != "50" {
		t.Errorf("first record %v %q %v, want a warning that 50 lines of hostile were dropped", w.Level, w.Message, attrs(w))
	}
}

// A nil GuestLog (no logger) discards, and a level the logger does not
// enable costs no token.
func TestGuestLogDisabled(t *testing.T) {
	t.Parallel()
	var g *GuestLog
	g.Log(context.Background(), slog.LevelError, "x")
	if NewGuestLog(nil, "m") != nil {
		t.Fatal("NewGuestLog(nil) is not nil")
	}
	var buf strings.Builder
	g = NewGuestLog(slog.New(slog.NewTextHandler(&buf, nil)), "m") // info and above
	for range 2 * GuestLogBurst {
		g.Log(context.Background(), slog.LevelDebug, "debug")
	}
	g.Log(context.Background(), slog.LevelInfo, "info")
	if s := buf.String(); strings.Count(s, "\n") != 1 || !strings.Contains(s, "msg=info module=m") {
		t.Fatalf("output %q, want the info line alone", s)
	}
}
