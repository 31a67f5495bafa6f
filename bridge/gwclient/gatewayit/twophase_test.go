package gatewayit_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/openclaw-go/openclaw/bridge/gwclient"
	"github.com/openclaw-go/openclaw/gateway/protocol"
)

// runClient starts a client for o and returns it once ready.
func runClient(t *testing.T, o *gwclient.Options) *gwclient.Client {
	t.Helper()
	c := gwclient.New(o)
	errc := make(chan error, 1)
	go func() { errc <- c.Run(context.Background()) }()
	t.Cleanup(func() {
		c.Close()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	if err := c.WaitReady(ctx(t)); err != nil {
		t.Fatal(err)
	}
	return c
}

// An ApprovalRaiser of the same device as the main client raises a
// two-phase plugin approval: the main client receives
// plugin.approval.requested (the raiser's own connection would not), its
// resolve reaches the raiser as the final payload after the accepted one.
func TestApprovalRaiserTwoPhase(t *testing.T) {
	t.Parallel()
	url, _ := serve(t, "127.0.0.1:0")
	tests := []struct {
		name     string
		decision string
	}{
		{"allow-once", "allow-once"},
		{"deny", "deny"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := options(t, url)
			requested := make(chan string, 4)
			main := *o
			main.OnEvent = func(name string, payload json.RawMessage) {
				if name == protocol.EventPluginApprovalRequested {
					var p struct{ ID string }
					_ = json.Unmarshal(payload, &p)
					requested <- p.ID
				}
			}
			c := runClient(t, &main)
			raiser := gwclient.NewApprovalRaiser(o)
			accepted := make(chan string, 2)
			type out struct {
				payload json.RawMessage
				err     error
			}
			done := make(chan out, 1)
			go func() {
				p, err := raiser.RaiseApproval(ctx(t), "plugin.approval.request", map[string]any{
					"pluginId": "openclaw-go", "title": "Allow it?", "description": "a test",
					"toolName": "messages_send", "twoPhase": true, "timeoutMs": 60000},
					func(payload json.RawMessage) {
						var a struct{ Status, ID string }
						_ = json.Unmarshal(payload, &a)
						accepted <- a.Status + " " + a.ID
					})
				done <- out{p, err}
			}()
			var id string
			select {
			case id = <-requested:
			case <-ctx(t).Done():
				t.Fatal("the main connection saw no plugin.approval.requested")
			}
			if got := <-accepted; got != "accepted "+id {
				t.Errorf("accepted callback got %q, want %q", got, "accepted "+id)
			}
			if _, err := c.Request(ctx(t), "plugin.approval.resolve", map[string]any{"id": id, "decision": tt.decision}); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			var final struct {
				ID       string
				Decision *string
			}
			if err := json.Unmarshal(r.payload, &final); err != nil || final.ID != id || final.Decision == nil || *final.Decision != tt.decision {
				t.Errorf("final payload %s, want id %s decision %s", r.payload, id, tt.decision)
			}
		})
	}
}

// With nobody able to see it, the Gateway answers at once with
// decision:null and no accepted phase; a cancelled wait returns ctx's
// error; an unreachable Gateway wraps ErrNoApprovalRoute.
func TestApprovalRaiserEdges(t *testing.T) {
	t.Parallel()
	url, _ := serve(t, "127.0.0.1:0")
	params := map[string]any{"pluginId": "openclaw-go", "title": "t", "description": "d", "twoPhase": true, "timeoutMs": 60000}

	called := false
	p, err := gwclient.NewApprovalRaiser(options(t, url)).RaiseApproval(ctx(t), "plugin.approval.request", params,
		func(json.RawMessage) { called = true })
	var final struct{ Decision *string }
	if err != nil || json.Unmarshal(p, &final) != nil || final.Decision != nil || called {
		t.Errorf("unseen approval: payload %s, err %v, accepted called %v; want decision null at once", p, err, called)
	}

	o := options(t, url)
	runClient(t, o) // a viewer of the same device keeps the request open
	cctx, cancel := context.WithCancel(ctx(t))
	_, err = gwclient.NewApprovalRaiser(o).RaiseApproval(cctx, "plugin.approval.request", params,
		func(json.RawMessage) { cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled raise: %v, want context.Canceled", err)
	}

	bad := options(t, url)
	bad.Token = "wrong"
	_, err = gwclient.NewApprovalRaiser(bad).RaiseApproval(ctx(t), "plugin.approval.request", params, nil)
	if !errors.Is(err, gwclient.ErrNoApprovalRoute) {
		t.Errorf("bad token: %v, want ErrNoApprovalRoute", err)
	}
}
