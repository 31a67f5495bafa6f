package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/runtime"
	"github.com/openclaw-go/openclaw/transport"
)

// TestNoCacheHintsBeforeTheirRevision: a client that negotiated a revision
// before 2026-07-28 gets a tools/list result without ttlMs and cacheScope,
// members its revision does not define.
func TestNoCacheHintsBeforeTheirRevision(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"2025-06-18", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sess, err := runtime.New([]runtime.Server{chattyUpstream(t)}, &runtime.Options{
				Enforcer:  policies.NewChain([]policies.ChainEntry{{Hook: &policiestest.BeforeToolCallHook{Module: "allow"}}}, nil),
				Sanitizer: &policiestest.Sanitizer{}, Surface: policies.SurfaceProxy, Logger: discard(),
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sess.Close(context.Background()) })
			if err := sess.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			p, err := New(ctx, sess, &Options{Logger: discard()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			tr := transport.NewServeStdioTransport(inR, outW, &transport.ServeStdioOptions{Logger: discard()})
			rctx, stop := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = p.Server().Run(rctx, tr)
			}()
			t.Cleanup(func() {
				_ = inW.Close()
				stop()
				_ = outR.Close()
				<-done
			})
			go func() {
				_, _ = io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n"+
					`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+
					`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n")
			}()
			lines := bufio.NewScanner(outR)
			lines.Buffer(nil, 1<<20)
			for lines.Scan() {
				var msg struct {
					ID     int                        `json:"id"`
					Result map[string]json.RawMessage `json:"result"`
				}
				if err := json.Unmarshal(lines.Bytes(), &msg); err != nil {
					t.Fatal(err)
				}
				if msg.ID != 2 {
					continue
				}
				if msg.Result["tools"] == nil {
					t.Fatalf("tools/list result without tools: %s", lines.Text())
				}
				for _, k := range []string{"ttlMs", "cacheScope"} {
					if _, ok := msg.Result[k]; ok {
						t.Errorf("protocol %s: tools/list result carries %s: %s", version, k, lines.Text())
					}
				}
				return
			}
			t.Fatal("no tools/list answer")
		})
	}
}
