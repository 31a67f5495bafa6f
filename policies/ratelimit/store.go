package ratelimit

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
)

// Store keeps the counters of a [Limiter] by key. The in-process
// [MemoryStore] serves one process; a store shared by several processes
// (Redis) implements the same two operations atomically per key.
// Implementations are safe for concurrent use.
type Store interface {
	// Take adds one to the counter key if the result stays ≤ max and
	// reports whether it did. A counter that does not exist, or whose
	// expiry has passed, starts again at zero and, when ttl > 0, expires
	// ttl from now (a ttl of 0: it never expires). expires is the
	// counter's expiry (zero when it has none), also when ok is false. An
	// error means the counter could not be read or written; the limiter
	// then refuses the call (fail closed).
	Take(ctx context.Context, key string, max int64, ttl time.Duration) (ok bool, expires time.Time, err error)
	// Release subtracts one from the counter key, if it exists, has not
	// expired and is above zero.
	Release(ctx context.Context, key string) error
}

// Take names one counter of [BatchStore.TakeAll]: add one to Key if it
// stays ≤ Max, with TTL as in [Store.Take].
type Take struct {
	Key string
	Max int64
	TTL time.Duration
}

// BatchStore is a [Store] that also takes the counters of one call in
// one step (for a store over the network, one round trip): all of them
// or none. The [Limiter] uses TakeAll when its store has it.
type BatchStore interface {
	Store
	// TakeAll adds one to every counter of takes (distinct keys) if each
	// stays ≤ its Max, and returns refused -1; otherwise it takes none and
	// returns the index of the first counter at its Max, with that
	// counter's expiry (zero when it has none). An error means nothing
	// was taken.
	TakeAll(ctx context.Context, takes []Take) (refused int, expires time.Time, err error)
}

// MemoryStore is the in-process [Store]: counters in maps split in
// shards by key, each behind its own mutex held only for the update of
// one counter. Expired counters are dropped as takes pass. The zero value
// is not usable; call [NewMemoryStore].
type MemoryStore struct {
	seed   maphash.Seed
	shards [memShards]memShard
}

const (
	memShards = 64
	// sweepEvery is the number of takes of a shard between two sweeps of
	// its expired counters.
	sweepEvery = 1024
)

type memShard struct {
	mu    sync.Mutex
	m     map[string]*memCounter
	takes int
}

type memCounter struct {
	n       int64
	expires time.Time // zero: never
}

func (c *memCounter) expired(now time.Time) bool {
	return !c.expires.IsZero() && !now.Before(c.expires)
}

// NewMemoryStore returns an empty in-process store.
func NewMemoryStore() *MemoryStore {
	s := &MemoryStore{seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].m = map[string]*memCounter{}
	}
	return s
}

func (s *MemoryStore) shard(key string) *memShard {
	return &s.shards[maphash.String(s.seed, key)%memShards]
}

// Take implements [Store]; it never fails.
func (s *MemoryStore) Take(_ context.Context, key string, max int64, ttl time.Duration) (bool, time.Time, error) {
	now := time.Now()
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.takes++; sh.takes >= sweepEvery {
		sh.takes = 0
		for k, c := range sh.m {
			if c.expired(now) || c.n == 0 {
				delete(sh.m, k)
			}
		}
	}
	c := sh.m[key]
	if c == nil || c.expired(now) {
		c = &memCounter{}
		if ttl > 0 {
			c.expires = now.Add(ttl)
		}
		sh.m[key] = c
	}
	if c.n >= max {
		return false, c.expires, nil
	}
	c.n++
	return true, c.expires, nil
}

// Release implements [Store]; it never fails.
func (s *MemoryStore) Release(_ context.Context, key string) error {
	now := time.Now()
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c := sh.m[key]
	if c == nil || c.expired(now) || c.n == 0 {
		return nil
	}
	if c.n--; c.n == 0 && c.expires.IsZero() {
		delete(sh.m, key)
	}
	return nil
}
