package builtin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
)

// Naming a catalog with the built-in sanitizer behind a chain, which
// checks every answer (valid, unique, not reserved) and fails the build
// rather than expose an unchecked name.
func ExampleSanitizer() {
	ctx := context.Background()
	m, err := wasmpolicy.Load(ctx, "sanitizer", builtin.Sanitizer(), nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close(ctx)
	chain := policies.NewSanitizeChain([]policies.SanitizeEntry{{Hook: m}}, nil)
	res, err := chain.SanitizeToolNames(ctx, &policies.SanitizeRequest{
		Reserved: []string{"events_poll"},
		Servers: []policies.SanitizeServer{
			{Name: "files", Tools: []string{"read_file", "write file", "write.file"}},
			{Name: "123", Tools: []string{"😀"}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range res.Servers {
		for _, t := range s.Tools {
			fmt.Println(t.Name)
		}
	}
	// Output:
	// files__read_file
	// files__write-file
	// files__write-file-2
	// mcp-123__tool---
}

// Deciding approvals with the built-in policy; the chain's memory keeps
// an allow-always for the session and tool.
func ExampleApprovals() {
	ctx := context.Background()
	cfg := json.RawMessage(`{"default":"ask","ask_ttl_ms":120000,"rules":[
		{"kind":"exec","command":"ls *","decision":"allow-once"},
		{"kind":"exec","command":"rm *","decision":"deny","reason":"no deletes"}]}`)
	m, err := wasmpolicy.Load(ctx, "approvals", builtin.Approvals(), cfg, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close(ctx)
	chain := policies.NewApprovalChain([]policies.ApprovalEntry{{Hook: m}},
		&policies.ApprovalChainOptions{Memory: policies.NewApprovalMemory(nil)})
	for _, cmd := range []string{"ls -la", "rm -rf /", "make"} {
		out := chain.DecideApproval(ctx, &policies.ApprovalRequest{Kind: policies.ApprovalExec, SessionKey: "agent:main:main", Command: cmd})
		fmt.Println(cmd, "->", out.Decision, out.Reason, out.TTL)
	}
	// Output:
	// ls -la -> allow-once rules[0] matched 0s
	// rm -rf / -> deny no deletes 0s
	// make -> ask no approval rule matched 2m0s
}
