package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/openclaw-go/openclaw/policies"
)

// BenchResult is the latency of one hook over many calls, as `openclaw
// policy bench` prints it. Durations are wall time per call, measured
// around the whole host call (input encoding, the guest call under its
// deadline with interruption on, output decoding).
type BenchResult struct {
	Hook   policies.Hook `json:"hook"`
	Calls  int           `json:"calls"`
	Errors int           `json:"errors"`
	// FirstError is the first failure's message, if any call failed.
	FirstError string        `json:"first_error,omitempty"`
	P50        time.Duration `json:"p50_ns"`
	P90        time.Duration `json:"p90_ns"`
	P99        time.Duration `json:"p99_ns"`
	Max        time.Duration `json:"max_ns"`
	Mean       time.Duration `json:"mean_ns"`
}

// SampleInput returns a representative input for hook h (the examples of
// docs/policy-abi.md), used by bench when no cases are given.
func SampleInput(h policies.Hook) json.RawMessage {
	switch h {
	case policies.HookSanitizeToolNames:
		return json.RawMessage(`{"servers":[{"name":"files","tools":["read_file","write_file","list_directory"]},{"name":"web","tools":["fetch url","search"]}]}`)
	case policies.HookDecideApproval:
		return json.RawMessage(`{"kind":"exec","id":"appr-1","session_key":"agent:main:main","requester":{"name":"agent:main"},"command":"ls -la /tmp","request":{"command":"ls -la /tmp","cwd":"/tmp"}}`)
	}
	return json.RawMessage(`{"surface":"serve","session_key":"agent:main:main","caller":{"name":"claude-code","version":"2.1"},"tool":{"name":"messages_send"},"arguments":{"session_key":"agent:main:main","text":"hello"}}`)
}

// Bench calls hook h of m n times through its typed adapter (input
// encoding, the guest call, strict decoding and checking of the answer),
// cycling through inputs (inputs as in [TestCase.Input]; none means
// [SampleInput]), after a warm-up of
// min(n/10, 1000) calls that are not counted, one call at a time. Failed
// calls are counted in Errors and their latencies kept. It returns an
// error when an input cannot be used.
func Bench(ctx context.Context, m Module, h policies.Hook, inputs []json.RawMessage, n int) (BenchResult, error) {
	if len(inputs) == 0 {
		inputs = []json.RawMessage{SampleInput(h)}
	}
	if n <= 0 {
		return BenchResult{}, fmt.Errorf("bench: %d calls: want at least 1", n)
	}
	calls := make([]func() (answer, error), len(inputs))
	for i, in := range inputs {
		call, err := hookCall(ctx, m, h, in)
		if err != nil {
			return BenchResult{}, fmt.Errorf("bench input %d: %w", i+1, err)
		}
		calls[i] = call
	}
	for i := range min(n/10, 1000) {
		_, _ = calls[i%len(calls)]()
	}
	r := BenchResult{Hook: h, Calls: n}
	lat := make([]time.Duration, n)
	var total time.Duration
	for i := range n {
		start := time.Now()
		_, err := calls[i%len(calls)]()
		lat[i] = time.Since(start)
		total += lat[i]
		if err != nil {
			if r.Errors == 0 {
				r.FirstError = err.Error()
			}
			r.Errors++
		}
		if ctx.Err() != nil {
			return BenchResult{}, ctx.Err()
		}
	}
	slices.Sort(lat)
	pct := func(p int) time.Duration { return lat[min(n-1, (n*p+99)/100-1)] }
	r.P50, r.P90, r.P99, r.Max, r.Mean = pct(50), pct(90), pct(99), lat[n-1], total/time.Duration(n)
	return r, nil
}
