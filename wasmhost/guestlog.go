package wasmhost

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// Guest log limits: a module's lines reach the host logger at a sustained
// GuestLogRate lines a second after a burst of GuestLogBurst; the lines
// over it are dropped and counted.
const (
	GuestLogRate  = 10
	GuestLogBurst = 100
)

// GuestLog writes one module's own log lines (openclaw_policy.log, Rego's
// print) to a host logger with a "module" attribute, rate-limited per
// module (GuestLogRate, GuestLogBurst) so that a module cannot flood the
// host's log. The first line let through after some were dropped is
// preceded by a warning that says how many. A nil *GuestLog discards. It
// is safe for concurrent use.
type GuestLog struct {
	logger *slog.Logger
	module string
	now    func() time.Time

	mu      sync.Mutex
	tokens  float64   // lines that may pass now, at most GuestLogBurst
	last    time.Time // when tokens was computed
	dropped int
}

// NewGuestLog returns the guest log of module on logger, nil when logger
// is nil.
func NewGuestLog(logger *slog.Logger, module string) *GuestLog {
	if logger == nil {
		return nil
	}
	return &GuestLog{logger: logger, module: module, now: time.Now, tokens: GuestLogBurst}
}

// allow takes a token for one line (a token bucket refilled at
// GuestLogRate a second), or counts the line as dropped. It returns
// whether the line may pass and how many lines were dropped before it.
func (g *GuestLog) allow() (ok bool, dropped int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if !g.last.IsZero() {
		g.tokens = min(GuestLogBurst, g.tokens+now.Sub(g.last).Seconds()*GuestLogRate)
	}
	g.last = now
	if g.tokens < 1 {
		g.dropped++
		return false, 0
	}
	g.tokens--
	dropped, g.dropped = g.dropped, 0
	return true, dropped
}

// Log writes msg at level, or counts it as dropped when the module is over
// its rate.
func (g *GuestLog) Log(ctx context.Context, level slog.Level, msg string) {
	if g == nil || !g.logger.Enabled(ctx, level) {
		return
	}
	ok, dropped := g.allow()
	if !ok {
		return
	}
	if dropped > 0 {
		g.logger.Log(ctx, slog.LevelWarn, fmt.Sprintf("guest log lines dropped: over the rate of %d lines a second (burst %d)", GuestLogRate, GuestLogBurst),
			"module", g.module, "dropped", dropped)
	}
	g.logger.Log(ctx, level, msg, "module", g.module)
}

// GuestLogLevel maps an openclaw_policy.log level to a slog level: 0 (and
// below) debug, 1 info, 2 warn, 3 and above error.
func GuestLogLevel(level int32) slog.Level {
	switch {
	case level >= 3:
		return slog.LevelError
	case level == 2:
		return slog.LevelWarn
	case level == 1:
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// hostLog implements openclaw_policy.log(level, ptr, len).
func (m *Module) hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	v, ok := m.byMod.Load(mod)
	if !ok {
		return
	}
	inst := v.(*Instance)
	level, ptr, n := int32(stack[0]), uint32(stack[1]), uint32(stack[2])
	b, ok := inst.mem.Read(ptr, n)
	if !ok {
		inst.abiErr = fmt.Errorf("openclaw_policy.log: message [%d, %d) is outside memory of %d bytes", ptr, uint64(ptr)+uint64(n), inst.mem.Size())
		panic(inst.abiErr)
	}
	inst.logs++
	if m.log == nil || inst.logs > maxLogsPerCall {
		return
	}
	if len(b) > maxLogMessage {
		b = b[:maxLogMessage]
	}
	m.log.Log(ctx, GuestLogLevel(level), string(b))
}
