package runtime

import (
	"context"
	"errors"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/internal/procfs"
	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/transport"
)

// everythingScript returns server-everything's entry point, or skips when
// it or node is not installed (fails in CI).
func everythingScript(t testing.TB) string {
	t.Helper()
	testkit.Node(t)
	return testkit.Peer(t, testkit.ServerEverything)
}

func TestServerEverythingStdio(t *testing.T) {
	t.Parallel()
	script := everythingScript(t)
	if runtime.GOOS != "linux" {
		t.Skip("the leak check reads /proc")
	}
	marker := "OPENCLAW_RUNTIME_TEST=" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	k, v, _ := strings.Cut(marker, "=")
	pol := &policiestest.Enforcer{}
	s, err := New([]Server{{
		Name: "everything",
		Entry: config.ServerEntry{
			Command: "node", Args: []string{script, "stdio"}, Env: map[string]any{k: v},
			RequestTimeoutMs: 30000, ConnectionTimeoutMs: 30000,
		},
	}}, &Options{Enforcer: pol, Sanitizer: &policiestest.Sanitizer{}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if d := s.Diagnostics(); len(d) > 0 {
		t.Fatalf("diagnostics: %v", d)
	}
	names := toolNames(t, s)
	for _, want := range []string{"everything__echo", "everything__get-sum", "everything__trigger-long-running-operation"} {
		if !slices.Contains(names, want) {
			t.Errorf("catalog %v lacks %s", names, want)
		}
	}
	if st := s.Status()[0]; st.Kind != transport.KindStdio || !strings.HasPrefix(st.Launch, "node ") {
		t.Errorf("status = %+v", st)
	}

	res, err := s.CallTool(ctx, "everything__echo", []byte(`{"message":"hi"}`))
	if err != nil || resultText(t, res) != "Echo: hi" {
		t.Fatalf("echo: %v %v", res, err)
	}

	// Progress passes through; cancelling sends notifications/cancelled and
	// leaves the session usable.
	var mu sync.Mutex
	var got []Progress
	first := make(chan struct{})
	cctx, cancel := context.WithCancel(WithProgress(ctx, func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, p)
		if len(got) == 1 {
			close(first)
		}
	}))
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := s.CallTool(cctx, "everything__trigger-long-running-operation", []byte(`{"duration":30,"steps":300}`))
		errc <- err
	}()
	select {
	case <-first:
	case err := <-errc:
		t.Fatalf("long operation ended before any progress: %v", err)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v, want context.Canceled", err)
	}
	mu.Lock()
	p := got[0]
	mu.Unlock()
	if p.Tool != "everything__trigger-long-running-operation" || p.Progress != 1 || p.Total != 300 {
		t.Errorf("first progress = %+v", p)
	}
	res, err = s.CallTool(ctx, "everything__get-sum", []byte(`{"a":2,"b":3}`))
	if err != nil || !strings.Contains(resultText(t, res), "5") {
		t.Fatalf("get-sum after a cancellation: %v %v", res, err)
	}
	if n := len(pol.Calls()); n != 3 {
		t.Errorf("policy saw %d calls, want 3", n)
	}

	if pids := procfs.WithEnv(marker); len(pids) == 0 {
		t.Fatal("found no server process to watch (the marker env did not reach the child)")
	}
	closeStart := time.Now()
	if err := s.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
	t.Logf("Close took %v", time.Since(closeStart)) // information, not a pass/fail figure
	deadline := time.Now().Add(30 * time.Second)    // a hang guard, not a timing assertion
	for pids := procfs.WithEnv(marker); len(pids) > 0; pids = procfs.WithEnv(marker) {
		if time.Now().After(deadline) {
			t.Fatalf("processes survived Close: %v", pids)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := s.CallTool(ctx, "everything__echo", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}
