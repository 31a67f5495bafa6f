package main

import (
	"context"
	"fmt"
	"time"

	"github.com/openclaw-go/openclaw/bridge/gwclient"
	"github.com/openclaw-go/openclaw/gateway/protocol"
)

// gatewayFloor measures n sequential sessions.list round trips straight to
// the Gateway at url, with the params `openclaw mcp serve` sends for a
// conversations_list without arguments (docs/protocol-facts.md, Gateway RPCs): the part
// of a conversations_list that no bridge can make faster. It connects with
// our Gateway client (bridge/gwclient), signing with identity when not nil.
func gatewayFloor(ctx context.Context, url, token string, identity *protocol.DeviceIdentity, n int) (sample, error) {
	c := gwclient.New(&gwclient.Options{URL: url, Token: token, Identity: identity})
	runCtx, cancel := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(runCtx) }() // owner: GatewayFloor; ends at cancel
	defer func() {
		cancel()
		c.Close()
		<-runErr
	}()
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	err := c.WaitReady(wctx)
	wcancel()
	if err != nil {
		return nil, fmt.Errorf("interop: connecting to the Gateway at %s: %w", url, err)
	}
	params := map[string]any{"limit": 50, "includeDerivedTitles": true, "includeLastMessage": true}
	// One untimed call warms the connection.
	if _, err := c.Request(ctx, "sessions.list", params); err != nil {
		return nil, fmt.Errorf("interop: sessions.list: %w", err)
	}
	var s sample
	for range n {
		t0 := time.Now()
		if _, err := c.Request(ctx, "sessions.list", params); err != nil {
			return nil, fmt.Errorf("interop: sessions.list: %w", err)
		}
		s = append(s, time.Since(t0))
	}
	return s, nil
}
