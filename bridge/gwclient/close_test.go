package gwclient_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/bridge/gwclient"
	"github.com/openclaw-go/openclaw/gateway/protocol"
)

// Close releases a request in flight and a request waiting for readiness
// with ErrClosed, ends Run with nil, and leaves no goroutine behind. Not
// parallel: it counts the process's goroutines.
func TestCloseReleasesEverything(t *testing.T) {
	base := runtime.NumGoroutine()

	inFlight := make(chan struct{})
	gA := newFakeGateway(t, false, nil)
	gA.handle = func(fc *fakeConn, f *protocol.Frame) bool {
		if f.Method == "hang" {
			close(inFlight)
			return true // never answered
		}
		return false
	}
	gB := newFakeGateway(t, false, func(int) behavior { return behavior{holdSubscribe: make(chan struct{})} })

	a := gwclient.New(baseOptions(t, gA.URL))
	b := gwclient.New(baseOptions(t, gB.URL))
	runs := make(chan error, 2)
	go func() { runs <- a.Run(context.Background()) }()
	go func() { runs <- b.Run(context.Background()) }()
	waitReady(t, a)

	reqs := make(chan error, 2)
	go func() {
		_, err := a.Request(context.Background(), "hang", nil)
		reqs <- err
	}()
	go func() {
		_, err := b.Request(context.Background(), "sessions.list", nil)
		reqs <- err
	}()
	<-inFlight
	gB.waitFor("sessions.subscribe", func() bool { return len(gB.frames) == 1 })

	var wg sync.WaitGroup
	for _, c := range []*gwclient.Client{a, b, a, b} { // concurrent and repeated
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}()
	}
	wg.Wait()
	for range 2 {
		if err := <-reqs; !errors.Is(err, gwclient.ErrClosed) {
			t.Errorf("released request: %v, want ErrClosed", err)
		}
		if err := <-runs; err != nil {
			t.Errorf("Run after Close = %v, want nil", err)
		}
	}
	gA.close()
	gB.close()

	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after Close, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

// ApprovalRaiser.Close ends a raise waiting for a human's decision with
// ErrClosed and closes its connection; a raise after Close fails at once
// without dialling.
func TestApprovalRaiserClose(t *testing.T) {
	t.Parallel()
	raised := make(chan struct{})
	g := newFakeGateway(t, false, nil)
	g.handle = func(fc *fakeConn, f *protocol.Frame) bool {
		if f.Method == "plugin.approval.request" {
			close(raised)
			return true // no human ever decides
		}
		return false
	}
	r := gwclient.NewApprovalRaiser(&gwclient.Options{URL: g.URL, Token: g.token})
	done := make(chan error, 1)
	go func() {
		_, err := r.RaiseApproval(context.Background(), "plugin.approval.request", map[string]any{"twoPhase": true}, nil)
		done <- err
	}()
	select {
	case <-raised:
	case err := <-done:
		t.Fatalf("RaiseApproval returned %v before the request reached the Gateway", err)
	}
	r.Close()
	if err := <-done; !errors.Is(err, gwclient.ErrClosed) || !strings.Contains(err.Error(), "plugin.approval.request") {
		t.Fatalf("RaiseApproval after Close: %v, want ErrClosed naming the method", err)
	}
	g.waitFor("the raise's connection to close", func() bool { return len(g.closes) == 1 })
	if _, err := r.RaiseApproval(context.Background(), "plugin.approval.request", map[string]any{"twoPhase": true}, nil); !errors.Is(err, gwclient.ErrClosed) {
		t.Fatalf("RaiseApproval on a closed raiser: %v, want ErrClosed", err)
	}
	g.mu.Lock()
	conns := g.conns
	g.mu.Unlock()
	if conns != 1 {
		t.Fatalf("the closed raiser dialled: %d connections, want 1", conns)
	}
}
