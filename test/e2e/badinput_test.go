package e2e_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// badInputStderr collects the child's stderr; the test reads it while the
// copying goroutine of os/exec may still write.
type badInputStderr struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *badInputStderr) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *badInputStderr) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBadInputLinesKeepServing writes malformed lines to the real binary's
// stdin, among valid requests and with a tool call in flight: each bad
// line is answered with a JSON-RPC error (whose id is null, or the
// request's own for a request over the size cap) and logged on stderr, every valid request is still answered, and stdin EOF ends the
// process with status 0.
func TestBadInputLinesKeepServing(t *testing.T) {
	t.Parallel()
	ctx, gw, tokenFile := setup(t)
	cmd := exec.CommandContext(ctx, bin, "mcp", "serve", "--url", gw.URL, "--token-file", tokenFile)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &badInputStderr{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	answers := map[float64]map[string]any{} // answers read while waiting for others
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatalf("writing %.60q: %v\nstderr:\n%s", line, err, stderr.String())
		}
	}
	// next reads stdout until a message with an "id" key whose value
	// satisfies want.
	next := func(what string, want func(id any) bool) map[string]any {
		t.Helper()
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("stdout carries a non-JSON line %q (stdout is for MCP only)", sc.Text())
			}
			id, ok := m["id"]
			if !ok {
				continue // a notification
			}
			if want(id) {
				return m
			}
			if n, ok := id.(float64); ok {
				answers[n] = m
			}
		}
		t.Fatalf("stdout ended before %s (%v); stderr:\n%s", what, sc.Err(), stderr.String())
		return nil
	}
	answer := func(id float64) map[string]any {
		t.Helper()
		if m, ok := answers[id]; ok {
			return m
		}
		return next(fmt.Sprintf("the answer to id %v", id), func(got any) bool { return got == id })
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"badinput","version":"1"}}}`)
	if m := answer(1); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	// In flight while the bad lines arrive; answered "timeout" after 1.5 s
	// unless an event comes first. Either way it must be answered.
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"events_wait","arguments":{"after_cursor":999999,"timeout_ms":1500}}}`)

	for i, tc := range []struct {
		name, line string
		code       float64
		id         any // the id of the answer: nil, or the request's own when it can be read
	}{
		{"invalid JSON", `{bad json`, -32700, nil},
		{"empty array", `[]`, -32600, nil},
		{"batch", `[{"jsonrpc":"2.0","id":90,"method":"ping"}]`, -32600, nil},
		{"string", `"str"`, -32600, nil},
		{"number", `123`, -32600, nil},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":91,"method":"ping"}`, -32600, nil},
		{"missing jsonrpc", `{"id":92,"method":"ping"}`, -32600, nil},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600, nil},
		{"non-string method", `{"jsonrpc":"2.0","id":93,"method":42}`, -32600, nil},
		{"100k nested arrays", strings.Repeat("[", 100000), -32700, nil},
		{"line over 16 MiB", `{"jsonrpc":"2.0","id":94,"method":"ping","params":{"x":"` + strings.Repeat("a", 16<<20) + `"}}`, -32010, float64(94)},
	} {
		send(tc.line)
		m := next("the error for "+tc.name, func(id any) bool { return id == tc.id })
		if e, _ := m["error"].(map[string]any); e == nil || e["code"] != tc.code || e["message"] == "" {
			t.Errorf("%s: answered %v, want error code %v with a message", tc.name, m, tc.code)
		}
		id := float64(100 + i)
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%v,"method":"ping"}`, id))
		if m := answer(id); m["result"] == nil {
			t.Errorf("ping after %s: %v", tc.name, m)
		}
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"conversations_list","arguments":{}}}`)
	if m := answer(3); !strings.Contains(fmt.Sprint(m["result"]), "conversations: 2") {
		t.Errorf("conversations_list after the bad lines: %v", m)
	}
	if m := answer(2); m["result"] == nil {
		t.Errorf("events_wait in flight across the bad lines: %v", m)
	}
	for id := range answers {
		if id >= 90 && id < 100 {
			t.Errorf("a rejected line was served: %v", answers[id])
		}
	}

	stdin.Close()
	for sc.Scan() {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve exit after stdin EOF: %v\nstderr:\n%s", err, stderr.String())
	}
	log := stderr.String()
	for _, want := range []string{"invalid character 'b' looking for beginning of object key string", "batches are not supported", "line longer than 16777216 bytes"} {
		if !strings.Contains(log, want) {
			t.Errorf("stderr does not give the reason %q:\n%s", want, log)
		}
	}
}
