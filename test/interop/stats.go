package interop

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Sample is a set of latencies of one repeated operation.
type Sample []time.Duration

// Quantile returns the nearest-rank q-quantile (0 < q ≤ 1): the smallest
// value such that at least q of the sample is ≤ it. Zero for an empty sample.
func (s Sample) Quantile(q float64) time.Duration {
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
func (s Sample) Median() time.Duration { return s.Quantile(0.5) }

// P99 is Quantile(0.99).
func (s Sample) P99() time.Duration { return s.Quantile(0.99) }

// Ms converts a duration to float milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ResultText joins the text of every text content block of r with "\n".
func ResultText(r *mcp.CallToolResult) string {
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

// Structured decodes r.StructuredContent into v (through JSON).
func Structured(r *mcp.CallToolResult, v any) error {
	b, err := json.Marshal(r.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
