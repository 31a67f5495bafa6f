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
	start := time.Now()
	_, err := c.Request(context.Background(), "sessions.list", nil)
	if !errors.Is(err, ErrRequestTimeout) || !strings.Contains(err.Error(), "no Gateway connection for sessions.list") {
		t.Fatalf("err = %v", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("waited %v", waited)
	}
}
