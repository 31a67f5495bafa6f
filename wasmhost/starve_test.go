package wasmhost_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/wasmhost"
)

// sleepyHandler is a slog handler that sleeps in Handle: the guest's
// thread is then idle inside openclaw_policy.log, as a starved thread is.
type sleepyHandler struct {
	sleep time.Duration
	msgs  chan string
}

func (h *sleepyHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *sleepyHandler) Handle(_ context.Context, r slog.Record) error {
	time.Sleep(h.sleep)
	h.msgs <- r.Message
	return nil
}
func (h *sleepyHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *sleepyHandler) WithGroup(string) slog.Handler      { return h }

// TestDeadlineIsCPUTime: a call whose thread is idle for 5 × its deadline
// in wall time (here inside a host function; a thread waiting for a CPU
// is idle the same way) but uses little CPU is not interrupted. With a
// wall-clock deadline it failed with "deadline of 20ms exceeded".
func TestDeadlineIsCPUTime(t *testing.T) {
	t.Parallel()
	const timeout = 20 * time.Millisecond
	h := &sleepyHandler{sleep: 5 * timeout, msgs: make(chan string, 1)}
	m := load(t, "hostile", &wasmhost.Options{PoolSize: 1, CallTimeout: timeout, Logger: slog.New(h)})
	out, err := m.CallBytes(context.Background(), "before_tool_call", []byte("hostile_log"))
	if err != nil {
		t.Fatalf("a call idle for %v of wall time with a CPU deadline of %v: %v", h.sleep, timeout, err)
	}
	if msg := <-h.msgs; msg != "hello from the guest" {
		t.Errorf("log message = %q", msg)
	}
	if len(out) == 0 {
		t.Errorf("no verdict")
	}
	// A spinning guest is still interrupted, by its CPU time.
	_, err = m.CallBytes(context.Background(), "before_tool_call", []byte("hostile_loop"))
	if !errors.Is(err, wasmhost.ErrTimeout) {
		t.Fatalf("spinning guest: err = %v, want %v", err, wasmhost.ErrTimeout)
	}
}
