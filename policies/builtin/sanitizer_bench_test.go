package builtin_test

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// threadCPU returns the CPU time used by the calling OS thread, in ns.
func threadCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// benchCatalog is 50 servers × 100 tools with names like real MCP servers'
// (snake_case verbs and nouns, 10–30 characters, in no particular order).
// With twins, one tool in ten is renamed "verb.noun" and the next
// "verb noun" (the same noun and verb), so that both sanitize to
// "verb-noun": 1,000 tools take the slow path (sort and sequential
// assignment).
func benchCatalog(twins bool) *policies.SanitizeRequest {
	verbs := []string{"get", "list", "create", "update", "delete", "search", "fetch", "read", "write", "move"}
	nouns := []string{"issue", "pull_request", "file", "directory", "comment", "repository", "branch", "commit", "label", "workflow_run"}
	req := &policies.SanitizeRequest{Reserved: []string{"conversations_list", "conversation_get", "messages_read",
		"attachments_fetch", "events_poll", "events_wait", "messages_send", "permissions_list_open", "permissions_respond"}}
	for s := 0; s < 50; s++ {
		srv := policies.SanitizeServer{Name: fmt.Sprintf("server-%02d", (s*37)%50)}
		for t := 0; t < 100; t++ {
			k := (t*61 + s) % 100
			name := fmt.Sprintf("%s_%s_%d", verbs[k%10], nouns[k/10], t)
			if twins && t%10 == 0 {
				name = fmt.Sprintf("%s.%s", verbs[k%10], nouns[k/10])
			}
			if twins && t%10 == 1 {
				name = fmt.Sprintf("%s %s", verbs[(k-61+100)%100%10], nouns[(k-61+100)%100/10])
			}
			srv.Tools = append(srv.Tools, name)
		}
		req.Servers = append(req.Servers, srv)
	}
	return req
}

// BenchmarkSanitizer names a catalog of 50 servers × 100 tools through the
// built-in module, fresh and as a rebuild with every name already exposed
// (input "exposed") (one guest call, with the host's encoding, strict
// decoding and validation), interruption on. Target: ≤ 5 ms. Besides
// ns/op it reports cpu-ns/op, the CPU time of the benchmark's thread (the
// guest runs on the caller's thread), which a loaded machine inflates less.
// The deadline is raised to 1 s: a catalog build is rare and its cost
// grows with the catalog, so it must not fail on a busy machine.
//
//	go test -run '^$' -bench Sanitizer -benchtime 20x ./policies/builtin/
func BenchmarkSanitizer(b *testing.B) {
	for _, bc := range []struct {
		name           string
		twins, exposed bool
	}{{"50x100", false, false}, {"50x100-collisions", true, false}, {"50x100-exposed", false, true}, {"50x100-collisions-exposed", true, true}} {
		b.Run(bc.name, func(b *testing.B) {
			m := loadSanitizerWith(b, &wasmpolicy.Options{Host: wasmhost.Options{CallTimeout: time.Second}})
			req := benchCatalog(bc.twins)
			ctx := context.Background()
			res, err := m.SanitizeToolNames(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			if bc.exposed {
				// A rebuild in a running session: every name already
				// exposed, sent back as the host sends it.
				req.Exposed = exposedOf(req, res)
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu0 := threadCPU(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := m.SanitizeToolNames(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(threadCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
