package sharedstate_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/openclaw-go/openclaw/internal/oauthcred"
	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/proxy/sharedstate"
)

var testOAuthKey = []byte("0123456789abcdef0123456789abcdef")

func oauthTokens(t *testing.T, url string, key []byte) *sharedstate.OAuthTokens {
	t.Helper()
	o, err := open(t, url).OAuthTokens(key)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestOAuthTokens: credentials saved through one replica load through
// another, sealed (no secret readable in Redis); a record moved to another
// principal's key, or read with another key, is refused with an error that
// says so; logout deletes one principal or all; an outage is an error
// naming Redis.
func TestOAuthTokens(t *testing.T) {
	t.Parallel()
	r := testkit.StartRedis(t)
	a, b := oauthTokens(t, r.URL(), testOAuthKey), oauthTokens(t, r.URL(), testOAuthKey)
	ctx := context.Background()
	const srv, u = "team", "https://mcp.example.com/mcp"
	alice := &oauthcred.Credentials{Server: srv, ServerURL: u, Principal: "alice", ClientID: "cid", ClientSecret: "client-secret-xyz",
		TokenURL: "https://idp.example.com/token", AccessToken: "access-token-alice", RefreshToken: "refresh-token-alice", Expiry: time.Now().Add(time.Hour).Round(time.Second)}
	if err := a.SaveToken(ctx, alice); err != nil {
		t.Fatal(err)
	}
	got, err := b.LoadToken(ctx, srv, u, "alice")
	if err != nil || got == nil || got.AccessToken != alice.AccessToken || got.RefreshToken != alice.RefreshToken || !got.Expiry.Equal(alice.Expiry) || got.Saved.IsZero() {
		t.Fatalf("alice's credentials through the other replica: %v, %v", got, err)
	}
	if c, err := b.LoadToken(ctx, srv, "https://other.example.com/mcp", "alice"); c != nil || err != nil {
		t.Errorf("alice's credentials of another origin: %v, %v, want none", c, err)
	}

	rc := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer rc.Close()
	keys, err := rc.Keys(ctx, "openclaw:oauth:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("token keys in Redis: %q, %v; want one", keys, err)
	}
	raw, _ := rc.Get(ctx, keys[0]).Result()
	for _, secret := range []string{"access-token-alice", "refresh-token-alice", "client-secret-xyz", "alice"} {
		if strings.Contains(raw+keys[0], secret) {
			t.Errorf("Redis shows %q: %s = %s", secret, keys[0], raw)
		}
	}

	// Bob's key holding alice's record: refused.
	bob := *alice
	bob.Principal, bob.AccessToken = "bob", "access-token-bob"
	if err := a.SaveToken(ctx, &bob); err != nil {
		t.Fatal(err)
	}
	aliceKey, bobKey := keys[0], ""
	keys, _ = rc.Keys(ctx, "openclaw:oauth:*").Result()
	for _, k := range keys {
		if k != aliceKey {
			bobKey = k
		}
	}
	if len(keys) != 2 || bobKey == "" {
		t.Fatalf("token keys after bob's save: %q", keys)
	}
	if server := aliceKey[:strings.LastIndex(aliceKey, ":")+1]; !strings.HasPrefix(bobKey, server) {
		t.Errorf("bob's key %s is not under the server's prefix %s", bobKey, server)
	}
	if err := rc.Set(ctx, bobKey, raw, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if c, err := b.LoadToken(ctx, srv, u, "bob"); c != nil || err == nil || !strings.Contains(err.Error(), "OAuth token record "+bobKey+" in Redis is refused: it does not decrypt: altered, or moved from another key") {
		t.Errorf("bob's key holding alice's record: %v, %v", c, err)
	}
	// An altered byte of the ciphertext: refused.
	altered := []byte(raw)
	i := strings.Index(raw, `"sealed":"`) + len(`"sealed":"`)
	altered[i] ^= 1
	rc.Set(ctx, aliceKey, altered, 0)
	if _, err := b.LoadToken(ctx, srv, u, "alice"); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("an altered record: %v, want it refused", err)
	}
	rc.Set(ctx, aliceKey, raw, 0)
	// Another key: refused, naming both key ids.
	other := oauthTokens(t, r.URL(), []byte("another key, also of 32 bytes!!!"))
	if _, err := other.LoadToken(ctx, srv, u, "alice"); err == nil || !strings.Contains(err.Error(), a.KeyID()) || !strings.Contains(err.Error(), other.KeyID()) || !strings.Contains(err.Error(), "--request-state-key-file") {
		t.Errorf("read with another key: %v", err)
	}
	if _, err := open(t, r.URL()).OAuthTokens([]byte("short")); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("a short key: %v", err)
	}

	if had, err := b.DeleteToken(ctx, srv, u, "alice"); !had || err != nil {
		t.Errorf("delete alice: %v, %v", had, err)
	}
	if c, err := a.LoadToken(ctx, srv, u, "alice"); c != nil || err != nil {
		t.Errorf("alice after her logout: %v, %v", c, err)
	}
	for _, p := range []string{"", "carol", "dave"} {
		c := *alice
		c.Principal = p
		if err := a.SaveToken(ctx, &c); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := a.DeleteAll(ctx, srv, u); n != 4 || err != nil { // bob, carol, dave and the shared set
		t.Errorf("delete all: %d, %v; want 4", n, err)
	}

	r.Stop()
	_, err = a.LoadToken(ctx, srv, u, "alice")
	var se *sharedstate.Error
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "shared state (Redis at "+r.Addr()+"): OAuth token:") {
		t.Errorf("load during an outage: %v, want an error naming Redis", err)
	}
	if _, err := a.LockToken(ctx, srv, u, "alice"); err == nil || !strings.Contains(err.Error(), "Redis at") {
		t.Errorf("lock during an outage: %v, want an error naming Redis", err)
	}
}

// TestOAuthLock: of replicas locking one set of tokens at once, one holds
// the lock at a time; another principal's lock is not held up.
func TestOAuthLock(t *testing.T) {
	t.Parallel()
	r := testkit.StartRedis(t)
	ctx := context.Background()
	var mu sync.Mutex
	holders, most := 0, 0
	var wg sync.WaitGroup
	for range 6 {
		o := oauthTokens(t, r.URL(), testOAuthKey)
		wg.Go(func() {
			for range 5 {
				unlock, err := o.LockToken(ctx, "team", "https://mcp.example.com/mcp", "alice")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				holders++
				most = max(most, holders)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				holders--
				mu.Unlock()
				unlock()
			}
		})
	}
	wg.Wait()
	if most != 1 {
		t.Errorf("%d replicas held one refresh lock at once", most)
	}
	o := oauthTokens(t, r.URL(), testOAuthKey)
	unlock, err := o.LockToken(ctx, "team", "https://mcp.example.com/mcp", "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	other, err := o.LockToken(ctx, "team", "https://mcp.example.com/mcp", "bob")
	if err != nil {
		t.Fatalf("bob's lock while alice's is held: %v", err)
	}
	other()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := o.LockToken(cctx, "team", "https://mcp.example.com/mcp", "alice"); !errors.Is(err, context.Canceled) {
		t.Errorf("a held lock with a canceled context: %v", err)
	}
}

// TestOAuthLockHeldPastTTL: a refresh that outlasts the lock's TTL keeps
// the lock (no second replica refreshes with the same, rotated, refresh
// token meanwhile); a holder whose context ended lets it expire.
func TestOAuthLockHeldPastTTL(t *testing.T) {
	t.Parallel()
	r := testkit.StartRedis(t)
	const ttl = 200 * time.Millisecond
	a, b := oauthTokens(t, r.URL(), testOAuthKey), oauthTokens(t, r.URL(), testOAuthKey)
	sharedstate.SetOAuthLockTTL(a, ttl)
	sharedstate.SetOAuthLockTTL(b, ttl)
	const srv, u = "team", "https://mcp.example.com/mcp"
	actx, aEnd := context.WithCancel(context.Background())
	defer aEnd()
	unlock, err := a.LockToken(actx, srv, u, "alice")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * ttl) // the refresh is slow: the TTL passes, several times
	bctx, cancel := context.WithTimeout(context.Background(), 2*ttl)
	defer cancel()
	if other, err := b.LockToken(bctx, srv, u, "alice"); err == nil {
		other()
		t.Fatal("a second replica took the refresh lock while the first still refreshed")
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for a held lock: %v", err)
	}
	unlock()
	unlock() // a second unlock is harmless
	if other, err := b.LockToken(context.Background(), srv, u, "alice"); err != nil {
		t.Fatalf("the lock after its release: %v", err)
	} else {
		other()
	}

	// A holder whose context ended (its request gone) stops renewing:
	// the lock expires after its TTL.
	dctx, dEnd := context.WithCancel(context.Background())
	if _, err := a.LockToken(dctx, srv, u, "bob"); err != nil {
		t.Fatal(err)
	}
	dEnd()
	wctx, wcancel := context.WithTimeout(context.Background(), 20*ttl)
	defer wcancel()
	if other, err := b.LockToken(wctx, srv, u, "bob"); err != nil {
		t.Fatalf("the lock of a holder that went away did not expire: %v", err)
	} else {
		other()
	}
}

// TestOAuthTokensMalformed: a record in Redis that is truncated, garbage,
// of a newer release, of another server, or a lock value, is refused with
// an error that names the key and quotes no token; the load that follows
// a good save still works.
func TestOAuthTokensMalformed(t *testing.T) {
	t.Parallel()
	r := testkit.StartRedis(t)
	a := oauthTokens(t, r.URL(), testOAuthKey)
	ctx := context.Background()
	const u = "https://mcp.example.com/mcp"
	alice := &oauthcred.Credentials{Server: "team", ServerURL: u, Principal: "alice", AccessToken: "access-token-alice", RefreshToken: "refresh-token-alice", Expiry: time.Now().Add(time.Hour)}
	other := *alice
	other.Server = "ops"
	for _, c := range []*oauthcred.Credentials{alice, &other} {
		if err := a.SaveToken(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	rc := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer rc.Close()
	key := func(server string) string {
		sid, pid := oauthcred.ID(server, u, "alice")
		return "openclaw:oauth:" + sid + ":" + pid
	}
	aliceKey := key("team")
	opsRaw, err := rc.Get(ctx, key("ops")).Result()
	if err != nil {
		t.Fatal(err)
	}
	good, _ := rc.Get(ctx, aliceKey).Result()
	for name, value := range map[string]string{
		"truncated":        good[:len(good)/2],
		"garbage":          "\x00\xffnot json",
		"empty":            "",
		"newer release":    strings.Replace(good, `"v":1`, `"v":2`, 1),
		"version zero":     strings.Replace(good, `"v":1`, `"v":0`, 1),
		"another server":   opsRaw,
		"a lock value":     "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
		"duplicate sealed": strings.Replace(good, `"sealed":`, `"sealed":"AAAA","sealed":`, 1),
		"huge version":     strings.Replace(good, `"v":1`, `"v":1e400`, 1),
	} {
		rc.Set(ctx, aliceKey, value, 0)
		c, err := a.LoadToken(ctx, "team", u, "alice")
		if c != nil || err == nil || strings.Contains(err.Error(), "token-alice") || (name != "duplicate sealed" && strings.Contains(err.Error(), "appears twice")) {
			t.Errorf("%s: %v, %v; want it refused, saying why", name, c, err)
		}
	}
	rc.Set(ctx, aliceKey, good, 0)
	if c, err := a.LoadToken(ctx, "team", u, "alice"); err != nil || c == nil || c.AccessToken != alice.AccessToken {
		t.Fatalf("the good record again: %v, %v", c, err)
	}
}
