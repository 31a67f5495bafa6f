//go:build linux

package transport

import (
	"context"
	"os/exec"
	"runtime"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/internal/procfs"
)

// BenchmarkStdioEcho compares a tools/call round trip through StdioTransport
// (supervisor, junk-tolerant reader) with go-sdk's CommandTransport, to the
// same Go server, in one run. Compare the two ns/op.
func BenchmarkStdioEcho(b *testing.B) {
	for _, tc := range []struct {
		name string
		tr   func() mcp.Transport
	}{
		{"transport.StdioTransport", func() mcp.Transport {
			r, err := Resolve("bench", config.ServerEntry{Command: misbehaveBin}, quiet())
			if err != nil {
				b.Fatal(err)
			}
			return r.Transport
		}},
		{"go-sdk.CommandTransport", func() mcp.Transport {
			return &mcp.CommandTransport{Command: exec.Command(misbehaveBin)}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
			cs, err := c.Connect(ctx, tc.tr(), &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}
			b.ResetTimer()
			for b.Loop() {
				if _, err := cs.CallTool(ctx, params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkIdleStdioConnection reports the host heap held per idle stdio
// connection (after connect and one tools/list) and the supervisor's RSS.
// Run with -benchtime=1x.
func BenchmarkIdleStdioConnection(b *testing.B) {
	const n = 8
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var sessions []*mcp.ClientSession
		var rts []*recordingTransport
		for range n {
			r, err := Resolve("idle", config.ServerEntry{Command: misbehaveBin}, quiet())
			if err != nil {
				b.Fatal(err)
			}
			rt := &recordingTransport{Transport: r.Transport}
			c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
			cs, err := c.Connect(context.Background(), rt, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := cs.ListTools(context.Background(), nil); err != nil {
				b.Fatal(err)
			}
			sessions = append(sessions, cs)
			rts = append(rts, rt)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/n, "heap-B/conn")
		b.ReportMetric(float64(rssKB(rts[0].supervisorPID())), "supervisor-RSS-kB")
		for _, cs := range sessions {
			cs.Close()
		}
	}
}

func rssKB(pid int) int {
	kib, _, ok := procfs.Status(pid)
	if !ok {
		return -1
	}
	return int(kib)
}
