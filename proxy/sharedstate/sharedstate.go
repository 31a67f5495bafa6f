// Package sharedstate is the state several `openclaw mcp proxy` replicas
// share through Redis (or a Redis-compatible server such as Valkey),
// named by `--state redis://[user:pass@]HOST:PORT/DB` (rediss:// for
// TLS): rate-limit counters ([Counters]), the fan-out of reloads between
// replicas ([State.Publish], [State.Subscribe]) and the MCP session
// records ([State.PutSession]). Every record carries a version
// ([RecordVersion]); one written by a newer release is refused, never
// misread.
//
// Redis is reached with short timeouts: when it is down, an operation
// fails within about a second with an [*Error] naming Redis and its
// address, and the next one tries again, so that a replica recovers by
// itself when Redis returns. Without --state the proxy keeps all of this
// in its own process.
package sharedstate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
)

// The timeouts of a connection to Redis, unless the URL sets them
// (go-redis's dial_timeout, read_timeout, write_timeout, pool_timeout
// query parameters): an outage is an error within about a second, never
// a hang.
const (
	DefaultDialTimeout = 500 * time.Millisecond
	DefaultIOTimeout   = 300 * time.Millisecond
	DefaultPoolTimeout = 500 * time.Millisecond
)

// KeyPrefix starts every key and channel this package uses in Redis, so
// that a Redis database may hold other data beside it.
const KeyPrefix = "openclaw:"

// Options configure [Open]. A nil *Options means the defaults.
type Options struct {
	// Observe, when set, is called after every Redis command (or
	// pipeline) with the operation's name (the command, lower case, e.g.
	// "evalsha", "publish"), how long it took, and its error (nil on
	// success; a missing key is not an error). It must be cheap.
	Observe func(op string, took time.Duration, err error)
	// TracerProvider, when set, makes a client span of each Redis command
	// made within a traced operation (a child of its span); nil makes
	// none, at no cost.
	TracerProvider trace.TracerProvider
	// Logger receives go-redis's own messages (a failed dial, a pub/sub
	// reconnection) at debug level; nil drops them. The callers' errors
	// say what failed. go-redis has one logger per process: the last
	// Open's wins.
	Logger *slog.Logger
}

// State is a connection pool to the Redis of --state. Its methods are
// safe for concurrent use.
type State struct {
	client  *redis.Client
	addr    string // HOST:PORT, for errors
	url     string // the URL without its password, for logs
	replica string // this process's id in events
	closed  atomic.Bool
	ready   atomic.Pointer[readyState] // the latest ping's outcome; nil before the first
}

// Error is the failure of an operation on Redis: Op is what was asked
// ("rate-limit counter", "publish", ...), Addr the server's HOST:PORT.
type Error struct {
	Op   string
	Addr string
	Err  error
}

// Error reads `shared state (Redis at 127.0.0.1:6379): rate-limit
// counter: dial tcp 127.0.0.1:6379: connect: connection refused`.
func (e *Error) Error() string {
	return fmt.Sprintf("shared state (Redis at %s): %s: %v", e.Addr, e.Op, e.Err)
}

// Unwrap returns Redis's error.
func (e *Error) Unwrap() error { return e.Err }

// ParseURL checks a --state value and returns go-redis's options for it:
// redis:// or rediss:// (TLS), with an optional user and password (Redis
// AUTH) and database number, parsed by go-redis's own ParseURL, with
// this package's timeouts where the URL sets none. The error names the
// URL without its password.
func ParseURL(raw string) (*redis.Options, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("--state: not a URL (want redis://[user:password@]HOST:PORT/DB): %v", err)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, fmt.Errorf("--state %s: want redis://[user:password@]HOST:PORT/DB or rediss://… (TLS)", u.Redacted())
	}
	if u.Host == "" {
		return nil, fmt.Errorf("--state %s: no HOST:PORT", u.Redacted())
	}
	o, err := redis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("--state %s: %v", u.Redacted(), err)
	}
	q := u.Query()
	if !q.Has("dial_timeout") {
		o.DialTimeout = DefaultDialTimeout
	}
	if !q.Has("read_timeout") {
		o.ReadTimeout = DefaultIOTimeout
	}
	if !q.Has("write_timeout") {
		o.WriteTimeout = DefaultIOTimeout
	}
	if !q.Has("pool_timeout") {
		o.PoolTimeout = DefaultPoolTimeout
	}
	o.DialerRetries = 1 // one dial per attempt: a refused connection is an error at once
	if !q.Has("max_retries") {
		o.MaxRetries = -1 // one attempt: the caller fails closed and the next call tries again
	}
	o.ContextTimeoutEnabled = true
	return o, nil
}

// Open returns a [State] for the --state URL raw (see [ParseURL]). It
// does not wait for Redis: a replica started while Redis is down serves
// what needs no shared state, reports itself not ready ([State.Ping]),
// and uses Redis once it answers.
func Open(raw string, opts *Options) (*State, error) {
	o, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(raw) // ParseURL parsed it
	id := make([]byte, 8)
	_, _ = rand.Read(id) // crypto/rand.Read never fails
	s := &State{addr: o.Addr, url: u.Redacted(), replica: hex.EncodeToString(id)}
	o.ClientName = "openclaw-mcp-proxy-" + s.replica
	s.client = redis.NewClient(o)
	if opts == nil {
		opts = &Options{}
	}
	if opts.Observe != nil {
		s.client.AddHook(observeHook(opts.Observe))
	}
	if opts.TracerProvider != nil {
		s.client.AddHook(newTraceHook(opts.TracerProvider, o.Addr))
	}
	redis.SetLogger(redisLogger{opts.Logger})
	return s, nil
}

// URL returns the --state URL with its password masked.
func (s *State) URL() string { return s.url }

// Replica returns this process's random id, which its events carry.
func (s *State) Replica() string { return s.replica }

// wrap makes err an [*Error] for op; nil stays nil.
func (s *State) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if s.closed.Load() && errors.Is(err, redis.ErrClosed) {
		return &Error{Op: op, Addr: s.addr, Err: errors.New("closed")}
	}
	return &Error{Op: op, Addr: s.addr, Err: err}
}

// Ping asks Redis for PONG: nil when it answers, else an [*Error]. It is
// the readiness check of a replica with --state.
func (s *State) Ping(ctx context.Context) error {
	return s.wrap("ping", s.client.Ping(ctx).Err())
}

// Close closes the connections; later operations fail.
func (s *State) Close() error {
	s.closed.Store(true)
	return s.client.Close()
}

// redisLogger passes go-redis's messages to a slog.Logger at debug level.
type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if r.l != nil {
		r.l.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
	}
}

// observeHook reports each command to observe.
type observeHook func(op string, took time.Duration, err error)

func (h observeHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h observeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		h(strings.ToLower(cmd.Name()), time.Since(start), redisErr(err))
		return err
	}
}

func (h observeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmds)
		h("pipeline", time.Since(start), redisErr(err))
		return err
	}
}

// redisErr is err, but nil for redis.Nil (a missing key: an answer).
func redisErr(err error) error {
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}

// Monitor pings Redis every interval until ctx is done, so that
// [State.Ready] knows whether Redis answers; call it once, in a goroutine
// of its own.
func (s *State) Monitor(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, every)
		err := s.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		s.setReady(err)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// errNotPinged is Ready's answer before Monitor's first ping.
var errNotPinged = errors.New("shared state: Redis not reached yet")

func (s *State) setReady(err error) {
	if err == nil {
		s.ready.Store(&readyState{})
		return
	}
	s.ready.Store(&readyState{err: err})
}

// Ready returns nil when the latest ping of [State.Monitor] was answered,
// else its error (an [*Error] naming Redis). It does not wait.
func (s *State) Ready() error {
	r := s.ready.Load()
	if r == nil {
		return errNotPinged
	}
	return r.err
}

type readyState struct{ err error }
