package sharedstate_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies/ratelimit"
	"github.com/openclaw-go/openclaw/proxy/sharedstate"
)

var _ ratelimit.BatchStore = (*sharedstate.Counters)(nil)

func TestParseURL(t *testing.T) {
	t.Parallel()
	o, err := sharedstate.ParseURL("rediss://ops:s3cret@redis.example.com:6380/3")
	if err != nil {
		t.Fatal(err)
	}
	if o.Addr != "redis.example.com:6380" || o.Username != "ops" || o.Password != "s3cret" || o.DB != 3 || o.TLSConfig == nil {
		t.Errorf("rediss URL parsed as addr %q user %q db %d tls %v", o.Addr, o.Username, o.DB, o.TLSConfig != nil)
	}
	if o.DialTimeout != sharedstate.DefaultDialTimeout || o.ReadTimeout != sharedstate.DefaultIOTimeout || o.MaxRetries != -1 {
		t.Errorf("timeouts %v/%v, retries %d: want the package's short defaults", o.DialTimeout, o.ReadTimeout, o.MaxRetries)
	}
	o, err = sharedstate.ParseURL("redis://127.0.0.1:6379/0?dial_timeout=3s")
	if err != nil || o.DialTimeout != 3*time.Second || o.TLSConfig != nil {
		t.Errorf("dial_timeout=3s: %v, %v", o.DialTimeout, err)
	}
	for raw, want := range map[string]string{
		"http://h:1/0":              "want redis://",
		"unix:///tmp/redis.sock":    "want redis://",
		"redis://:hunter2@h:1/x":    `invalid database number`,
		"redis:///0":                "no HOST:PORT",
		"127.0.0.1:6379":            "want redis://",
		"redis://u:hunter2@h:1/0/1": "invalid URL path",
	} {
		_, err := sharedstate.ParseURL(raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseURL(%q) = %v, want an error containing %q", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseURL(%q): the error shows the password: %v", raw, err)
		}
	}
}

func open(t *testing.T, url string) *sharedstate.State {
	t.Helper()
	s, err := sharedstate.Open(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestCountersShared: two States (two replicas) on one Redis count one
// limit together; a window expires; a release gives a slot back.
func TestCountersShared(t *testing.T) {
	t.Parallel()
	r := testkit.StartRedis(t)
	a, b := open(t, r.URL()).Counters(), open(t, r.URL()).Counters()
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := 0
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := a
			if i%2 == 1 {
				c = b
			}
			ok, exp, err := c.Take(ctx, "r|window", 7, time.Hour)
			if err != nil {
				t.Error(err)
			}
			if exp.IsZero() || time.Until(exp) > time.Hour {
				t.Errorf("expires %v: want within the hour", exp)
			}
			if ok {
				mu.Lock()
				taken++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if taken != 7 {
		t.Fatalf("%d takes of 20 went through a limit of 7 shared by two replicas", taken)
	}
	// A short window ends: the counter starts again.
	if ok, _, _ := a.Take(ctx, "r|short", 1, 50*time.Millisecond); !ok {
		t.Fatal("first take of a new counter refused")
	}
	if ok, _, _ := b.Take(ctx, "r|short", 1, 50*time.Millisecond); ok {
		t.Fatal("second take within the window went through")
	}
	for ok := false; !ok; {
		time.Sleep(20 * time.Millisecond)
		ok, _, _ = b.Take(ctx, "r|short", 1, 50*time.Millisecond)
	}
	// Concurrent slots: held on A, refused on B, given back through B.
	if ok, exp, err := a.Take(ctx, "c|slots", 1, 0); !ok || err != nil || !exp.IsZero() {
		t.Fatalf("take of a free slot: %v %v %v", ok, exp, err)
	}
	if ok, _, _ := b.Take(ctx, "c|slots", 1, 0); ok {
		t.Fatal("a second slot of a limit of 1 went through on the other replica")
	}
	if err := b.Release(ctx, "c|slots"); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := b.Take(ctx, "c|slots", 1, 0); !ok {
		t.Fatal("the slot given back is still held")
	}
	// Release of a counter at zero stays at zero.
	_ = a.Release(ctx, "c|slots")
	_ = a.Release(ctx, "c|slots")
	if ok, _, _ := a.Take(ctx, "c|slots", 1, 0); !ok {
		t.Fatal("slot refused after releases")
	}
	if ok, _, _ := a.Take(ctx, "c|slots", 1, 0); ok {
		t.Fatal("release below zero let two slots through")
	}
}

// TestOutage: with Redis down a take fails, naming Redis and its
// address; with Redis back the same State serves again.
func TestOutage(t *testing.T) {
	t.Parallel()
	r := testkit.StartRedis(t)
	s := open(t, r.URL())
	ctx := context.Background()
	if ok, _, err := s.Counters().Take(ctx, "k", 5, time.Minute); !ok || err != nil {
		t.Fatalf("take: %v %v", ok, err)
	}
	r.Stop()
	_, _, err := s.Counters().Take(ctx, "k", 5, time.Minute)
	var se *sharedstate.Error
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "Redis at "+r.Addr()) || !strings.Contains(err.Error(), "rate-limit counter") {
		t.Fatalf("take with Redis down: %v, want a sharedstate.Error naming Redis at %s", err, r.Addr())
	}
	if err := s.Ping(ctx); err == nil || !strings.Contains(err.Error(), "Redis at") {
		t.Fatalf("ping with Redis down: %v", err)
	}
	r.Start()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("ping after Redis is back: %v", err)
	}
	if ok, _, err := s.Counters().Take(ctx, "k", 5, time.Minute); !ok || err != nil {
		t.Fatalf("take after Redis is back: %v %v", ok, err)
	}
}

// TestAuth: a Redis with a password refuses a URL without it, and takes
// one with it.
func TestAuth(t *testing.T) {
	t.Parallel()
	r := testkit.StartRedis(t, "--requirepass", "s3cret")
	if err := open(t, r.URL()).Ping(context.Background()); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("ping without the password: %v, want NOAUTH", err)
	}
	if err := open(t, "redis://:s3cret@"+r.Addr()+"/0").Ping(context.Background()); err != nil {
		t.Fatalf("ping with the password: %v", err)
	}
	if err := open(t, "redis://default:wrong@"+r.Addr()+"/0").Ping(context.Background()); err == nil {
		t.Fatal("ping with a wrong password went through")
	}
}

// TestSessions: a session record written by one replica is read by
// another, its expiry slides, it is gone once deleted, and a record of
// a newer version is refused with a VersionError.
func TestSessions(t *testing.T) {
	t.Parallel()
	r := testkit.StartRedis(t)
	a, b := open(t, r.URL()), open(t, r.URL())
	raw := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer raw.Close()
	ctx := context.Background()
	rec := sharedstate.Session{Owner: "https://idp\x00alice", Protocol: "2025-11-25", Initialize: []byte(`{"protocolVersion":"2025-11-25"}`),
		LogLevel: "debug", Subscriptions: []string{"file:///a"}}
	if err := a.PutSession(ctx, "s1", rec, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := b.TouchSession(ctx, "s1", 3*time.Hour); err != nil {
		t.Fatal(err)
	}
	if ttl := raw.PTTL(ctx, "openclaw:session:s1").Val(); ttl <= 2*time.Hour {
		t.Fatalf("TTL after the touch: %v, want about 3 h", ttl)
	}
	got, found, err := b.GetSession(ctx, "s1")
	if err != nil || !found || got.Owner != rec.Owner || got.LogLevel != "debug" || got.Subscriptions[0] != "file:///a" || got.V != sharedstate.RecordVersion {
		t.Fatalf("B reads %+v %v %v", got, found, err)
	}
	if err := b.DeleteSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, found, err := a.GetSession(ctx, "s1"); found || err != nil {
		t.Fatalf("a deleted record: found %v, %v", found, err)
	}
	if _, found, err := a.GetSession(ctx, "never"); found || err != nil {
		t.Fatalf("a record never written: found %v, %v", found, err)
	}
	// A newer release's record is refused, not misread.
	raw.Set(ctx, "openclaw:session:s2", `{"v":9,"owner":"","protocol":"2030-01-01","initialize":{}}`, 0)
	_, _, err = a.GetSession(ctx, "s2")
	var ve *sharedstate.VersionError
	if !errors.As(err, &ve) || ve.Version != 9 {
		t.Fatalf("a v9 session record: %v, want a VersionError", err)
	}
}

// TestCountersTakeAll: a call's counters are taken together, or none of
// them when one is at its bound.
func TestCountersTakeAll(t *testing.T) {
	t.Parallel()
	r := testkit.StartRedis(t)
	c := open(t, r.URL()).Counters()
	ctx := context.Background()
	takes := []ratelimit.Take{{Key: "r|n3:per", Max: 2, TTL: time.Hour}, {Key: "c|n5:slots", Max: 1}}
	if i, _, err := c.TakeAll(ctx, takes); i != -1 || err != nil {
		t.Fatalf("first TakeAll: refused %d, %v", i, err)
	}
	i, exp, err := c.TakeAll(ctx, takes)
	if i != 1 || err != nil || !exp.IsZero() {
		t.Fatalf("second TakeAll, the slot held: refused %d (want 1), expires %v, %v", i, exp, err)
	}
	if err := c.Release(ctx, "c|n5:slots"); err != nil {
		t.Fatal(err)
	}
	// The refused TakeAll took no request: one is left in the window.
	if i, _, err := c.TakeAll(ctx, takes); i != -1 || err != nil {
		t.Fatalf("third TakeAll: refused %d, %v", i, err)
	}
	_ = c.Release(ctx, "c|n5:slots")
	i, exp, err = c.TakeAll(ctx, takes)
	if i != 0 || err != nil || exp.IsZero() || time.Until(exp) > time.Hour {
		t.Fatalf("fourth TakeAll, the window full: refused %d (want 0), expires %v, %v", i, exp, err)
	}
	r.Stop()
	if _, _, err := c.TakeAll(ctx, takes); err == nil || !strings.Contains(err.Error(), "Redis at") {
		t.Fatalf("TakeAll with Redis down: %v", err)
	}
}

// TestStateNonces: of many concurrent uses of one nonce through two
// connections (two replicas), exactly one is fresh; a nonce is forgotten
// after its ttl; with Redis down the use is an error naming Redis.
func TestStateNonces(t *testing.T) {
	t.Parallel()
	r := testkit.StartRedis(t)
	a, b := open(t, r.URL()), open(t, r.URL())
	ctx := context.Background()
	var fresh, stale int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 20 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			ok, err := s.UseStateNonce(ctx, "n1", time.Minute)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("use: %v", err)
			case ok:
				fresh++
			default:
				stale++
			}
		})
	}
	wg.Wait()
	if fresh != 1 || stale != 19 {
		t.Fatalf("20 uses of one nonce: %d fresh, %d used; want 1 and 19", fresh, stale)
	}
	if ok, err := a.UseStateNonce(ctx, "short", 50*time.Millisecond); !ok || err != nil {
		t.Fatalf("first use: %v %v", ok, err)
	}
	for {
		ok, err := b.UseStateNonce(ctx, "short", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break // forgotten once its ttl passed
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.Stop()
	_, err := a.UseStateNonce(ctx, "n2", time.Minute)
	if err == nil || !strings.Contains(err.Error(), "Redis at "+r.Addr()) || !strings.Contains(err.Error(), "requestState nonce") {
		t.Fatalf("use with Redis down: %v, want an error naming Redis at %s", err, r.Addr())
	}
}
