package policies

import (
	"context"
	"fmt"
	"time"
)

// HookRateLimit is the hook of the audit records of the rate limits (the
// policy file's rate_limits, docs/policy-file.md): a call a limit refused
// is recorded with this hook, the limit's name as the module and the
// decision "block". It is not a hook point of the policy ABI: no module
// serves it.
const HookRateLimit Hook = "rate_limit"

// Limiter is what a surface needs from the policy layer for rate limits:
// Acquire is called once per tool call that the policy chain allowed,
// before the call reaches the tool, and either admits it, returning the
// release to call once the call has ended (completed, failed or
// cancelled), or refuses it with a [*LimitError] (audited under
// [HookRateLimit]). A nil release is never returned with a nil error.
// Implementations are safe for concurrent use and hold no lock across
// the call.
type Limiter interface {
	Acquire(ctx context.Context, call *ToolCall) (release func(), err error)
}

// The kinds of a [LimitError].
const (
	LimitRequests   = "requests"   // requests per interval
	LimitConcurrent = "concurrent" // calls in progress at once
	LimitStore      = "store"      // the counter store failed: refused, fail closed
)

// LimitError is the refusal of a call by a rate limit.
type LimitError struct {
	// Limit is the limit's name in the policy file.
	Limit string
	// Kind is LimitRequests, LimitConcurrent or LimitStore.
	Kind string
	// Max is the number of requests per Interval, or of concurrent calls.
	Max int64
	// Interval is the window of a LimitRequests limit, 0 otherwise.
	Interval time.Duration
	// RetryAfter is when the call may be retried, rounded up to whole
	// seconds (at least 1 s): the end of the window for LimitRequests, a
	// hint of 1 s for LimitConcurrent and LimitStore.
	RetryAfter time.Duration
	// Err is the store's error for LimitStore.
	Err error
}

// Error reads `rate limit "per-agent" reached: at most 60 calls per 60 s;
// retry after 12 s`.
func (e *LimitError) Error() string {
	retry := int64(e.RetryAfter / time.Second)
	switch e.Kind {
	case LimitRequests:
		return fmt.Sprintf("rate limit %q reached: at most %d %s per %d s; retry after %d s", e.Limit, e.Max, calls(e.Max), int64(e.Interval/time.Second), retry)
	case LimitConcurrent:
		return fmt.Sprintf("rate limit %q reached: at most %d concurrent %s; retry after %d s (when a call in progress ends)", e.Limit, e.Max, calls(e.Max), retry)
	}
	return fmt.Sprintf("rate limit %q: the counter store failed, so the call is refused: %v; retry after %d s", e.Limit, e.Err, retry)
}

func calls(n int64) string {
	if n == 1 {
		return "call"
	}
	return "calls"
}

// Unwrap returns the store's error, nil for a limit that was reached.
func (e *LimitError) Unwrap() error { return e.Err }
