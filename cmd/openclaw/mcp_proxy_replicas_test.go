package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/proxy"
	"github.com/openclaw-go/openclaw/proxy/sharedstate"
)

// loadCall is the outcome of one call of the load.
type loadCall struct {
	client, n int
	id        string
	err       error
	// inFlight is whether the call was sent before the victim's death
	// was seen and answered after its SIGKILL was sent.
	inFlight bool
}

// TestMCPProxyStateReplicaProof (50 clients × 200 calls; 12 × 40 with
// -short): three replicas behind HAProxy, one
// Redis, testdata/countpeer upstream noting each call id it starts and
// runs. Half the clients are stateful (MCP 2025-11-25 sessions, kept on
// their replica by HAProxy's session-id affinity), half stateless
// (2026-07-28, round robin); each makes its calls one after another, in
// four phases. After the first, Redis restarts: while it is down a
// replica is not ready, naming Redis, and an approval retry fails with
// -32005 naming Redis; once it is back the replicas write their session
// records again and the retry runs, no proxy restarted. Halfway through
// the second phase a replica is killed with SIGKILL; an approval question
// (a 2026-07-28 input request) raised through it before is answered
// through HAProxy afterwards and runs once. Halfway through the third
// phase another replica drains on SIGTERM; the fourth runs on the last
// one. The assertions: every call that failed is one the killed replica
// had (see below), every session goes on under its id, every call that
// succeeded ran once upstream, and no call ran twice.
func TestMCPProxyStateReplicaProof(t *testing.T) {
	t.Parallel()
	clients, calls := 50, 200 // the size: about a minute on two cores
	if testing.Short() {
		clients, calls = 12, 40
	}
	cr := newCountingReplicas(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
	defer cancel()
	replicas := []*httpProxy{cr.start("r0"), cr.start("r1"), cr.start("r2")}
	_, lb := behindHAProxy(t, replicas)
	waitReadyz(t, ctx, lb, http.StatusOK, "")

	// Even clients are stateful, odd ones stateless (no session: their
	// requests spread round robin).
	stateful, stateless := make([]*mcp.ClientSession, clients), make([]*mcp.ClientSession, clients)
	for i := range stateful {
		if i%2 == 0 {
			stateful[i], _ = connectReplica(t, ctx, lb, "token-of-agent-a")
		} else {
			stateless[i] = inputClient26(t, ctx, lb.base+proxy.PathMCP)
		}
	}
	ids := map[int]string{}
	for i, cs := range stateful {
		if cs != nil {
			ids[i] = cs.ID()
		}
	}

	const victim, drained, last = 0, 1, 2
	// The approval raised through the victim before it dies.
	approval := askApproval(t, ctx, inputClient26(t, ctx, replicas[victim].base+proxy.PathMCP), "approval-1", true)

	var (
		mu      sync.Mutex
		results []loadCall
		killed  atomic.Bool // set just before the victim's SIGKILL
		dead    atomic.Bool // set once the victim has exited
	)
	// phase runs calls [from, to) of every client; at each of events'
	// progress marks (calls done in the phase) it runs the event, the
	// calls going on meanwhile.
	phase := func(name string, from, to int, events map[int]func()) {
		t.Helper()
		total := clients * (to - from)
		var done atomic.Int64
		marks := map[int64]chan struct{}{}
		for at := range events {
			marks[int64(at)] = make(chan struct{})
		}
		var ev sync.WaitGroup
		for at, f := range events {
			ev.Go(func() {
				select {
				case <-marks[int64(at)]:
					f()
				case <-ctx.Done():
				}
			})
		}
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				for n := from; n < to; n++ {
					id := fmt.Sprintf("c%d-%d", c, n)
					params := &mcp.CallToolParams{Name: "count__count", Arguments: map[string]any{"id": id, "ms": 5}}
					var res *mcp.CallToolResult
					var err error
					sentBefore := !dead.Load()
					if cs := stateful[c]; cs != nil {
						res, err = cs.CallTool(ctx, params)
					} else {
						res, err = stateless[c].CallTool(ctx, params)
					}
					if err == nil && (res.IsError || len(res.Content) == 0 || res.Content[0].(*mcp.TextContent).Text != "counted "+id) {
						err = fmt.Errorf("answered %+v", res.Content)
					}
					if err != nil {
						err = fmt.Errorf("%s: %w", name, err)
					}
					mu.Lock()
					results = append(results, loadCall{client: c, n: n, id: id, err: err, inFlight: sentBefore && killed.Load()})
					mu.Unlock()
					if ch := marks[done.Add(1)]; ch != nil {
						close(ch)
					}
				}
			})
		}
		wg.Wait()
		ev.Wait()
		if int(done.Load()) != total {
			t.Fatalf("%s: %d calls done, want %d", name, done.Load(), total)
		}
	}

	p0, p1, p2 := calls/5, calls*3/5, calls*4/5
	phase("before", 0, p0, nil)
	// Redis restarts: clear errors while it is down, then the replicas
	// serve again, not restarted.
	again := askApproval(t, ctx, inputClient26(t, ctx, replicas[victim].base+proxy.PathMCP), "approval-2", true)
	cr.redis.Stop()
	waitReadyz(t, ctx, replicas[victim], http.StatusServiceUnavailable, "Redis at "+cr.redis.Addr())
	direct := inputClient26(t, ctx, replicas[victim].base+proxy.PathMCP)
	if _, err := direct.CallTool(ctx, again); err == nil || !strings.Contains(err.Error(), "Redis at "+cr.redis.Addr()) {
		t.Errorf("an approval retry with Redis down: %v, want an error naming Redis at %s", err, cr.redis.Addr())
	}
	cr.redis.Start()
	waitReadyz(t, ctx, lb, http.StatusOK, "")
	// The replicas write the records of the sessions they hold again
	// (Redis restarted empty), so that those can move on the drain.
	reader, err := sharedstate.Open(cr.redis.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	for i, sid := range ids {
		for {
			_, found, err := reader.GetSession(ctx, sid)
			if found {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("client %d's session record was not written again after the Redis restart: %v", i, err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	if res, err := direct.CallTool(ctx, again); err != nil || res.IsError {
		t.Errorf("the approval retry once Redis is back: %+v, %v", res, err)
	}
	victimPid := replicas[victim].cmd.Process.Pid
	// HAProxy sends to every replica again: stateless calls, round
	// robin, until each replica has run one.
	byReplica := func(id string) int {
		for _, chain := range cr.started()[id] {
			for i, r := range replicas {
				if slices.Contains(strings.Split(chain, ","), fmt.Sprint(r.cmd.Process.Pid)) {
					return i
				}
			}
		}
		return -1
	}
	for k, seen := 0, map[int]bool{}; len(seen) < len(replicas); k++ {
		id := fmt.Sprintf("warm-%d", k)
		if _, err := stateless[1].CallTool(ctx, &mcp.CallToolParams{Name: "count__count", Arguments: map[string]any{"id": id}}); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		seen[byReplica(id)] = true
		delete(seen, -1)
	}
	phase("with a replica killed", p0, p1, map[int]func(){clients * (p1 - p0) / 2: func() {
		killed.Store(true)
		_ = replicas[victim].cmd.Process.Kill()
		<-replicas[victim].exited
		dead.Store(true)
	}})
	// The approval raised through the killed replica, answered through
	// the others.
	res, err := stateless[1].CallTool(ctx, approval)
	if err != nil || res.IsError {
		t.Fatalf("the approval raised through the killed replica, answered through HAProxy: %+v, %v", res, err)
	}
	phase("with a replica drained", p1, p2, map[int]func(){clients * (p2 - p1) / 2: func() {
		_ = replicas[drained].cmd.Process.Signal(syscall.SIGTERM)
		if err := <-replicas[drained].exited; err != nil {
			t.Errorf("replica r%d after SIGTERM: %v", drained, err)
		}
	}})

	phase("last", p2, calls, nil)

	// Every failure was a request the killed replica had: in flight at
	// the kill (sent before its exit was seen, answered after the
	// SIGKILL), failed as a lost connection (an EOF, or HAProxy's 502:
	// the replica died with it), a stateful client's on the session the
	// victim held (its last call before ran there), and, when it reached
	// the upstream, started there by the victim.
	started, ran := cr.started(), cr.ran()
	victimID := fmt.Sprint(victimPid)
	onVictim := func(id string) (any, all bool) {
		all = true
		for _, chain := range started[id] {
			by := slices.Contains(strings.Split(chain, ","), victimID)
			any, all = any || by, all && by
		}
		return any, all
	}
	// lastRan is the id of client c's last call before call n that
	// succeeded, "" for none.
	lastRan := func(c, n int) string {
		last, id := -1, ""
		for _, r := range results {
			if r.client == c && r.n < n && r.n > last && r.err == nil {
				last, id = r.n, r.id
			}
		}
		return id
	}
	var failed []string
	servedByVictim := 0
	for _, r := range results {
		if by, _ := onVictim(r.id); by && r.n >= p0 && r.n < p1 {
			servedByVictim++
		}
	}
	if servedByVictim == 0 {
		t.Errorf("the killed replica ran none of the calls of the phase it was killed in: the kill hit an idle replica")
	}
	for _, r := range results {
		switch {
		case r.err != nil:
			failed = append(failed, r.id)
			if !r.inFlight || !lostConnection(r.err) {
				t.Errorf("client %d's call %s failed, not as a connection lost while in flight when the replica was killed: %v", r.client, r.id, r.err)
			}
			if _, all := onVictim(r.id); !all {
				t.Errorf("client %d's call %s failed, and another replica than the killed one started it upstream: %v", r.client, r.id, r.err)
			}
			if prev := lastRan(r.client, r.n); stateful[r.client] != nil && prev != "" {
				if by, _ := onVictim(prev); !by {
					t.Errorf("client %d's call %s failed, and its session's last call before it (%s) did not run on the killed replica: %v", r.client, r.id, prev, r.err)
				}
			}
		case ran[r.id] != 1:
			t.Errorf("client %d's call %s succeeded, and the upstream ran it %d times", r.client, r.id, ran[r.id])
		}
	}
	for id, n := range ran {
		if n > 1 {
			t.Errorf("the upstream ran %s %d times", id, n)
		}
	}
	for _, id := range []string{"approval-1", "approval-2"} {
		if ran[id] != 1 {
			t.Errorf("the upstream ran %s %d times, want 1", id, ran[id])
		}
	}
	for i, cs := range stateful {
		if cs != nil && cs.ID() != ids[i] {
			t.Errorf("client %d's session id changed: %s, was %s", i, cs.ID(), ids[i])
		}
	}
	t.Logf("%d clients × %d calls: the killed replica ran %d calls of its phase; %d failed, all in flight on it: %v", clients, calls, servedByVictim, len(failed), failed)
}

// lostConnection reports whether err is a request whose server connection
// was lost: the client's own (EOF, a reset) or HAProxy's (502 Bad
// Gateway).
func lostConnection(err error) bool {
	msg := err.Error()
	return strings.HasSuffix(msg, ": EOF") || strings.Contains(msg, "Bad Gateway") || strings.Contains(msg, "connection reset")
}
