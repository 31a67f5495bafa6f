package sharedstate

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/openclaw-go/openclaw/policies/ratelimit"
)

// ConcurrentLease is how long a concurrent-calls counter (a counter
// taken with no ttl) lives in Redis after its last take: a replica
// killed during a call never gives its slot back, and the lease ends
// such a leak once the counter is idle that long.
const ConcurrentLease = 10 * time.Minute

// counterPrefix starts the keys of the rate-limit counters.
const counterPrefix = KeyPrefix + "rl:"

// Counters is the ratelimit.Store of a policy file's rate_limits shared
// by every replica on one Redis: each take and release is one Lua script
// run atomically on the counter's key. An error is an [*Error] (the
// limiter then refuses the call, fail closed).
type Counters struct{ s *State }

// Counters returns the rate-limit counter store on s.
func (s *State) Counters() *Counters { return &Counters{s: s} }

// takeScript adds one to KEYS[1] unless it is at ARGV[1]; a counter with
// no expiry gets ARGV[2] ms (the window, for a new counter; the lease,
// renewed at every take, for one of concurrent calls when ARGV[3] is
// "1"). It returns {taken (0 or 1), the counter's PTTL (ms; -1: none)}.
var takeScript = redis.NewScript(`
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
local pttl = redis.call('PTTL', KEYS[1])
if n >= tonumber(ARGV[1]) then
  return {0, pttl}
end
redis.call('INCR', KEYS[1])
if pttl < 0 or ARGV[3] == '1' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  pttl = tonumber(ARGV[2])
end
return {1, pttl}
`)

// releaseScript subtracts one from KEYS[1] if it is above zero.
var releaseScript = redis.NewScript(`
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n > 0 then
  redis.call('DECR', KEYS[1])
end
return n
`)

// Take implements ratelimit.Store. A counter of concurrent calls (ttl 0)
// lives [ConcurrentLease] after its last take; expires is then zero, as
// for a counter that never expires.
func (c *Counters) Take(ctx context.Context, key string, limit int64, ttl time.Duration) (bool, time.Time, error) {
	lease := "0"
	ms := ttl.Milliseconds()
	if ttl <= 0 {
		lease, ms = "1", ConcurrentLease.Milliseconds()
	}
	now := time.Now()
	res, err := takeScript.Run(ctx, c.s.client, []string{counterPrefix + key}, limit, max(ms, 1), lease).Int64Slice()
	if err != nil {
		return false, time.Time{}, c.s.wrap("rate-limit counter", err)
	}
	if len(res) != 2 {
		return false, time.Time{}, c.s.wrap("rate-limit counter", errMalformed("counter", "the script's answer"))
	}
	var expires time.Time
	if ttl > 0 && res[1] > 0 {
		expires = now.Add(time.Duration(res[1]) * time.Millisecond)
	}
	return res[0] == 1, expires, nil
}

// Release implements ratelimit.Store.
func (c *Counters) Release(ctx context.Context, key string) error {
	return c.s.wrap("rate-limit counter", releaseScript.Run(ctx, c.s.client, []string{counterPrefix + key}).Err())
}

// takeAllScript takes one from every KEYS[i] (ARGV[3i-2] its bound,
// ARGV[3i-1] its window or lease in ms, ARGV[3i] "1" for a lease) if none
// is at its bound, else none. It returns {0, 0} when it took them, or
// {i, PTTL of KEYS[i]} for the first counter at its bound.
var takeAllScript = redis.NewScript(`
for i = 1, #KEYS do
  if tonumber(redis.call('GET', KEYS[i]) or '0') >= tonumber(ARGV[3*i-2]) then
    return {i, redis.call('PTTL', KEYS[i])}
  end
end
for i = 1, #KEYS do
  local pttl = redis.call('PTTL', KEYS[i])
  redis.call('INCR', KEYS[i])
  if pttl < 0 or ARGV[3*i] == '1' then
    redis.call('PEXPIRE', KEYS[i], ARGV[3*i-1])
  end
end
return {0, 0}
`)

// TakeAll implements ratelimit.BatchStore: one script, one round trip,
// for every counter of a call. (The keys of one call may hash to
// different slots: a Redis Cluster is not supported.)
func (c *Counters) TakeAll(ctx context.Context, takes []ratelimit.Take) (int, time.Time, error) {
	keys := make([]string, len(takes))
	args := make([]any, 0, 3*len(takes))
	for i, t := range takes {
		keys[i] = counterPrefix + t.Key
		lease, ms := "0", t.TTL.Milliseconds()
		if t.TTL <= 0 {
			lease, ms = "1", ConcurrentLease.Milliseconds()
		}
		args = append(args, t.Max, max(ms, 1), lease)
	}
	now := time.Now()
	res, err := takeAllScript.Run(ctx, c.s.client, keys, args...).Int64Slice()
	if err != nil {
		return -1, time.Time{}, c.s.wrap("rate-limit counter", err)
	}
	if len(res) != 2 || res[0] < 0 || res[0] > int64(len(takes)) {
		return -1, time.Time{}, c.s.wrap("rate-limit counter", errMalformed("counter", "the script's answer"))
	}
	if res[0] == 0 {
		return -1, time.Time{}, nil
	}
	i := int(res[0] - 1)
	var expires time.Time
	if takes[i].TTL > 0 && res[1] > 0 {
		expires = now.Add(time.Duration(res[1]) * time.Millisecond)
	}
	return i, expires, nil
}
