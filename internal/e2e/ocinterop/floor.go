package main

import (
	"context"
	"fmt"
	"time"

	"github.com/openclaw-go/openclaw/bridge/gwclient"
	"github.com/openclaw-go/openclaw/gateway/protocol"
)

// floorParams are the sessions.list params `openclaw mcp serve` sends for
// a conversations_list without arguments (docs/protocol-facts.md, Gateway
// RPCs).
var floorParams = map[string]any{"limit": 50, "includeDerivedTitles": true, "includeLastMessage": true}

// floorConn is a Gateway connection of our Gateway client
// (bridge/gwclient) that times sessions.list round trips: the part of a
// conversations_list that no bridge can make faster.
type floorConn struct {
	c      *gwclient.Client
	cancel context.CancelFunc
	runErr chan error
}

// dialFloor connects to the Gateway at url, signing with identity when not
// nil, and makes one untimed sessions.list, which warms the connection.
func dialFloor(ctx context.Context, url, token string, identity *protocol.DeviceIdentity) (*floorConn, error) {
	f := &floorConn{c: gwclient.New(&gwclient.Options{URL: url, Token: token, Identity: identity}), runErr: make(chan error, 1)}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f.cancel = cancel
	go func() { f.runErr <- f.c.Run(runCtx) }() // owner: floorConn; ends at close
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	err := f.c.WaitReady(wctx)
	wcancel()
	if err != nil {
		f.close()
		return nil, fmt.Errorf("interop: connecting to the Gateway at %s: %w", url, err)
	}
	if _, err := f.c.Request(ctx, "sessions.list", floorParams); err != nil {
		f.close()
		return nil, fmt.Errorf("interop: sessions.list: %w", err)
	}
	return f, nil
}

// time makes n sequential sessions.list round trips and returns their
// times.
func (f *floorConn) time(ctx context.Context, n int) (sample, error) {
	var s sample
	for range n {
		t0 := time.Now()
		if _, err := f.c.Request(ctx, "sessions.list", floorParams); err != nil {
			return nil, fmt.Errorf("interop: sessions.list: %w", err)
		}
		s = append(s, time.Since(t0))
	}
	return s, nil
}

func (f *floorConn) close() {
	f.cancel()
	f.c.Close()
	<-f.runErr
}

// gatewayFloor measures n sequential sessions.list round trips straight to
// the Gateway at url (see [floorConn]).
func gatewayFloor(ctx context.Context, url, token string, identity *protocol.DeviceIdentity, n int) (sample, error) {
	f, err := dialFloor(ctx, url, token, identity)
	if err != nil {
		return nil, err
	}
	defer f.close()
	return f.time(ctx, n)
}
