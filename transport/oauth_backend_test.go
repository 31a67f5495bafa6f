//go:build linux

package transport

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// countingBackend is a TokenBackend that counts its uses of a TokenStore
// and can fail them all, like a Redis that went down.
type countingBackend struct {
	store *TokenStore
	mu    sync.Mutex
	saves []*Credentials
	locks int
	down  error
}

func (b *countingBackend) LoadToken(ctx context.Context, server, serverURL, principal string) (*Credentials, error) {
	b.mu.Lock()
	down := b.down
	b.mu.Unlock()
	if down != nil {
		return nil, down
	}
	return b.store.LoadToken(ctx, server, serverURL, principal)
}

func (b *countingBackend) SaveToken(ctx context.Context, c *Credentials) error {
	b.mu.Lock()
	b.saves = append(b.saves, c)
	b.mu.Unlock()
	return b.store.SaveToken(ctx, c)
}

func (b *countingBackend) DeleteToken(ctx context.Context, server, serverURL, principal string) (bool, error) {
	return b.store.DeleteToken(ctx, server, serverURL, principal)
}

func (b *countingBackend) LockToken(ctx context.Context, server, serverURL, principal string) (func(), error) {
	b.mu.Lock()
	b.locks++
	b.mu.Unlock()
	return b.store.LockToken(ctx, server, serverURL, principal)
}

// TestOAuthBackend: with OAuthOptions.Backend, a connection reads its
// token there, refreshes under the backend's lock and saves the refreshed
// token there, never in Store; a backend that fails fails the request with
// its error.
func TestOAuthBackend(t *testing.T) {
	t.Parallel()
	f := newOAuthFixture(t)
	files := NewTokenStore(t.TempDir())
	e := oauthEntry(f, KindStreamableHTTP)
	old := seed(t, f, files, e, time.Now().Add(-time.Minute))
	b := &countingBackend{store: files}
	unused := NewTokenStore(t.TempDir())
	o := quiet()
	o.OAuth = &OAuthOptions{Store: unused, Backend: b}
	cs := connect(t, resolve(t, "docs", e, o).Transport, "")
	if got := callText(t, cs, "echo", nil); got != "ok" {
		t.Errorf("echo = %q", got)
	}
	b.mu.Lock()
	saves, locks := b.saves, b.locks
	b.mu.Unlock()
	if locks != 1 || len(saves) != 1 || saves[0].AccessToken == old.AccessToken {
		t.Errorf("the backend saw %d locks and saves %v: want one refresh under its lock, saved there", locks, saves)
	}
	if c, _ := unused.Load("docs", e.URL); c != nil {
		t.Errorf("Store was written beside Backend: %v", c)
	}

	b.mu.Lock()
	b.down = errors.New("shared state (Redis at 127.0.0.1:1): OAuth token: connection refused")
	b.mu.Unlock()
	o2 := quiet()
	o2.OAuth = &OAuthOptions{Backend: b}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs2, err := mcp.NewClient(&mcp.Implementation{Name: "transport-test", Version: "1"}, nil).Connect(ctx, resolve(t, "docs", e, o2).Transport, nil)
	if err == nil {
		cs2.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "Redis at 127.0.0.1:1") {
		t.Errorf("connecting with the backend down: %v, want its error", err)
	}
}
