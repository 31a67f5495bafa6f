// Command demo is `make demo`: the main job of openclaw-go on its embedded
// defaults, end to end. It starts a local Gateway seeded with conversations,
// spawns `openclaw mcp serve` with the built-in rules module configured to
// block messages_send, and drives it with a real MCP client (go-sdk):
// list conversations, read messages, wait for a live message injected during
// the wait, list and answer an approval, and see a blocked call with its
// reason. It prints a readable transcript and exits 0 when every step
// behaved as expected, 1 otherwise.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/openclaw-go/openclaw/internal/e2e"
)

func main() {
	bin := flag.String("bin", "bin/openclaw", "the openclaw binary to demonstrate")
	keep := flag.Bool("keep", false, "keep the temporary folder (Gateway state, audit log)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, *bin, *keep); err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo FAILED: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("\ndemo OK: every step behaved as expected")
}

const demoPolicy = `{
  "modules": [
    {"name": "rules", "source": "builtin:rules",
     "config": {"default": "allow", "rules": [
       {"tool": "messages_send", "decision": "block", "reason": "the demo is read-only: outbound messages are disabled"}
     ]}}
  ]
}`

func run(ctx context.Context, bin string, keep bool) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "openclaw-demo-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Printf("(keeping %s)\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}

	step("Start a local Gateway seeded with the demo conversations")
	gw, err := e2e.StartGateway(ctx, bin, dir)
	if err != nil {
		return err
	}
	defer gw.Stop()
	say("Gateway ready on %s", gw.URL)

	tokenFile := filepath.Join(dir, "gateway.token")
	policyFile := filepath.Join(dir, "policy.json")
	auditFile := filepath.Join(dir, "audit.jsonl")
	if err := os.WriteFile(tokenFile, []byte(gw.Token), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(policyFile, []byte(demoPolicy), 0o600); err != nil {
		return err
	}

	step("Spawn `openclaw mcp serve` under a real MCP client (go-sdk), rules module blocking messages_send")
	srv, err := gw.StartServe(ctx, tokenFile, "openclaw-demo",
		"--policy-config", policyFile, "--audit-log", auditFile)
	if err != nil {
		return err
	}
	defer srv.Close()
	init := srv.Session.InitializeResult()
	say("initialize: server %s %s, protocol %s", init.ServerInfo.Name, init.ServerInfo.Version, init.ProtocolVersion)
	for _, line := range strings.Split(strings.TrimSpace(srv.Stderr()), "\n") {
		if line != "" {
			say("serve stderr: %s", line)
		}
	}
	tools, err := srv.Session.ListTools(ctx, nil)
	if err != nil {
		return err
	}
	var names []string
	for _, t := range tools.Tools {
		names = append(names, t.Name)
	}
	say("tools/list: %d tools: %s", len(names), strings.Join(names, ", "))

	step("List conversations")
	r, err := call(ctx, srv, "conversations_list", nil)
	if err != nil {
		return err
	}
	var convs struct {
		Conversations []struct {
			SessionKey, Channel, To, DisplayName string
		}
	}
	_ = json.Unmarshal(r.Structured, &convs)
	for _, c := range convs.Conversations {
		say("  %-18s %-9s → %-13s %s", c.SessionKey, c.Channel, c.To, c.DisplayName)
	}
	if len(convs.Conversations) == 0 {
		return fmt.Errorf("no conversations listed")
	}
	key := convs.Conversations[0].SessionKey

	step("Read the latest messages of " + key)
	r, err = call(ctx, srv, "messages_read", map[string]any{"session_key": key, "limit": 5})
	if err != nil {
		return err
	}
	var msgs struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
	}
	_ = json.Unmarshal(r.Structured, &msgs)
	for _, m := range msgs.Messages {
		say("  %-9s %s", m.Role, preview(m.Content))
	}

	step("Wait for a live event while a user writes in")
	poll, err := call(ctx, srv, "events_poll", nil)
	if err != nil {
		return err
	}
	var pc struct {
		NextCursor int64 `json:"next_cursor"`
	}
	_ = json.Unmarshal(poll.Structured, &pc)
	go func() {
		time.Sleep(500 * time.Millisecond)
		if err := gw.Inject(ctx, key, "user", "Are we still on for 3pm?", false); err != nil {
			fmt.Fprintf(os.Stderr, "inject: %v\n", err)
		}
	}()
	start := time.Now()
	r, err = call(ctx, srv, "events_wait", map[string]any{"after_cursor": pc.NextCursor, "session_key": key, "timeout_ms": 15000})
	if err != nil {
		return err
	}
	var ev struct {
		Event *struct {
			Cursor int64  `json:"cursor"`
			Role   string `json:"role"`
			Text   string `json:"text"`
		} `json:"event"`
	}
	_ = json.Unmarshal(r.Structured, &ev)
	if ev.Event == nil || ev.Event.Text != "Are we still on for 3pm?" {
		return fmt.Errorf("events_wait did not return the injected message: %s", r.Text)
	}
	say("  woke after %v with event %d: %s %q", time.Since(start).Round(time.Millisecond), ev.Event.Cursor, ev.Event.Role, ev.Event.Text)

	step("An exec approval arrives; list it and answer it")
	if _, err := gw.RaiseExecApproval(ctx, "rm -rf /tmp/build-cache"); err != nil {
		return err
	}
	var approvals struct {
		Approvals []struct {
			Kind    string `json:"kind"`
			ID      string `json:"id"`
			Request struct {
				Command string `json:"command"`
			} `json:"request"`
		} `json:"approvals"`
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		r, err = call(ctx, srv, "permissions_list_open", nil)
		if err != nil {
			return err
		}
		_ = json.Unmarshal(r.Structured, &approvals)
		if len(approvals.Approvals) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(approvals.Approvals) == 0 {
		return fmt.Errorf("the approval never reached permissions_list_open")
	}
	a := approvals.Approvals[0]
	say("  %s approval %s: %q", a.Kind, a.ID, a.Request.Command)
	r, err = call(ctx, srv, "permissions_respond", map[string]any{"kind": a.Kind, "id": a.ID, "decision": "deny"})
	if err != nil {
		return err
	}
	if r.IsError {
		return fmt.Errorf("permissions_respond failed: %s", r.Text)
	}

	step("Try to send a message: the rules module blocks it")
	r, err = call(ctx, srv, "messages_send", map[string]any{"session_key": key, "text": "On my way!"})
	if err != nil {
		return err
	}
	if !r.IsError || !strings.Contains(r.Text, "rules") {
		return fmt.Errorf("messages_send was not blocked by the rules module: %q", r.Text)
	}

	step("Decision audit log")
	audit, err := os.ReadFile(auditFile)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(audit)), "\n")
	say("  %d decisions recorded; the last one:", len(lines))
	say("  %s", lines[len(lines)-1])

	step("Close the session (stdin EOF)")
	if err := srv.Close(); err != nil {
		return fmt.Errorf("closing: %w", err)
	}
	say("  openclaw mcp serve exited with code %d", srv.ExitCode())
	if srv.ExitCode() != 0 {
		return fmt.Errorf("serve exited with %d:\n%s", srv.ExitCode(), srv.Stderr())
	}
	return nil
}

func call(ctx context.Context, srv *e2e.Serve, tool string, args map[string]any) (*e2e.Result, error) {
	if args == nil {
		args = map[string]any{}
	}
	a, _ := json.Marshal(args)
	fmt.Printf("  → %s %s\n", tool, a)
	r, err := srv.Call(ctx, tool, args)
	if err != nil {
		return nil, err
	}
	mark := "←"
	if r.IsError {
		mark = "← ERROR"
	}
	first, _, _ := strings.Cut(r.Text, "\n")
	fmt.Printf("  %s %s\n", mark, first)
	return r, nil
}

func preview(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return trim(s)
	}
	var blocks []struct{ Type, Text string }
	if json.Unmarshal(content, &blocks) == nil {
		var parts []string
		for _, b := range blocks {
			if b.Type == "text" {
				parts = append(parts, trim(b.Text))
			} else {
				parts = append(parts, "["+b.Type+"]")
			}
		}
		return strings.Join(parts, " ")
	}
	return trim(string(content))
}

func trim(s string) string {
	if len(s) > 70 {
		return s[:67] + "..."
	}
	return s
}

func step(s string) { fmt.Printf("\n== %s\n", s) }
func say(format string, a ...any) {
	fmt.Printf("  "+format+"\n", a...)
}
