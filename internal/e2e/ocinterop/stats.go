package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/e2e"
)

// sample is a set of latencies of one repeated operation.
type sample []time.Duration

// Quantile returns the nearest-rank q-quantile (0 < q ≤ 1): the smallest
// value such that at least q of the sample is ≤ it. Zero for an empty sample.
func (s sample) Quantile(q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	x := slices.Clone(s)
	slices.Sort(x)
	i := int(math.Ceil(q*float64(len(x)))) - 1
	i = max(0, min(i, len(x)-1))
	return x[i]
}

// Median is Quantile(0.5).
func (s sample) Median() time.Duration { return s.Quantile(0.5) }

// P99 is Quantile(0.99).
func (s sample) P99() time.Duration { return s.Quantile(0.99) }

// ms converts a duration to float milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// resultText joins the text of every text content block of r with "\n".
func resultText(r *mcp.CallToolResult) string {
	if r == nil {
		return ""
	}
	var parts []string
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// structured decodes r.StructuredContent into v (through JSON).
func structured(r *mcp.CallToolResult, v any) error {
	b, err := json.Marshal(r.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// ready waits until the server answers conversations_list with a success,
// that is until its Gateway connection is up and subscribed (tools that need
// the Gateway wait for that; docs/protocol-facts.md, mcp serve lifecycle), for at most timeout.
func ready(ctx context.Context, s *e2e.Serve, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r, err := s.Session.CallTool(ctx, &mcp.CallToolParams{Name: "conversations_list", Arguments: map[string]any{"limit": 1}})
	if err != nil {
		return fmt.Errorf("waiting for the Gateway connection: %w", err)
	}
	if r.IsError {
		return fmt.Errorf("waiting for the Gateway connection: conversations_list: %s", resultText(r))
	}
	return nil
}
