package gwclient

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A request made while no Gateway connection is ready gives up after the
// request timeout with a clear error, instead of hanging forever.
func TestRequestWaitsForReadinessAtMostTheRequestTimeout(t *testing.T) {
	t.Parallel()
	c := New(&Options{URL: "ws://127.0.0.1:1", RequestTimeout: 100 * time.Millisecond})
	defer c.Close()
	// A hang guard, not a timing assertion: a Request that ignored its
	// timeout would end with this context's error, not ErrRequestTimeout.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Request(ctx, "sessions.list", nil)
	if !errors.Is(err, ErrRequestTimeout) || !strings.Contains(err.Error(), "no Gateway connection for sessions.list") {
		t.Fatalf("err = %v", err)
	}
}
