package proxy

import (
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// Defaults of the HTTP limits in [HTTPOptions].
const (
	// DefaultReadHeaderTimeout bounds how long a client may take to send
	// a request's line and headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultBodyTimeout bounds how long a client may take to send a POST
	// body on /mcp or /sse, from the end of its headers.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultMaxConnections caps the TCP connections open at once.
	DefaultMaxConnections = 1024
	// DefaultMaxSessions caps the MCP sessions (streamable HTTP and legacy
	// SSE) open at once.
	DefaultMaxSessions = 512
)

// tooManyConnections is written to a connection over the cap before it is
// closed.
var tooManyConnections = func() string {
	const body = "openclaw mcp proxy: too many connections open at once (--max-connections)\n"
	return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}()

// limitListener accepts at most cap(slots) connections at a time. A
// connection over the cap is accepted, answered 503 and closed at once, so
// its client learns it was refused (golang.org/x/net/netutil's
// LimitListener leaves it waiting in the kernel's backlog instead).
type limitListener struct {
	net.Listener
	slots   chan struct{}
	refused func() // called for each connection refused; may be nil
}

func newLimitListener(ln net.Listener, max int, refused func()) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, max), refused: refused}
}

// Accept returns the next connection within the cap; it refuses the others
// on its way.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
		}
		// A fresh connection's send buffer takes the answer at once; the
		// deadline only covers a peer that never reads.
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = io.WriteString(c, tooManyConnections)
		_ = c.Close()
		if l.refused != nil {
			l.refused()
		}
	}
}

// limitConn gives its slot back when closed (once).
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// DefaultSessionIdleTimeout is how long a streamable HTTP session may go
// without a request in flight or an open GET stream before the proxy
// closes it (HTTPOptions.SessionIdleTimeout).
const DefaultSessionIdleTimeout = 10 * time.Minute

// idleSessions closes the streamable HTTP sessions that stay idle for
// timeout: no request of theirs in flight (a GET stream counts as one for
// as long as it is open) since their last request ended, or since
// initialize for a session that sent nothing more.
type idleSessions struct {
	timeout time.Duration
	exists  func(sid string) bool // the session is open
	expire  func(sid string)      // closes the session

	mu sync.Mutex
	m  map[string]*sessionUse
}

// sessionUse is one session's requests in flight and its idle timer.
type sessionUse struct {
	refs  int
	gen   uint64 // bumped by each begin: a timer of an earlier gen does nothing
	timer *time.Timer
}

func newIdleSessions(timeout time.Duration, exists func(string) bool, expire func(string)) *idleSessions {
	return &idleSessions{timeout: timeout, exists: exists, expire: expire, m: map[string]*sessionUse{}}
}

// begin notes a request of session sid and reports whether it is tracked
// (false for a session that is not open: the request gets go-sdk's 404);
// a tracked request is followed by end.
func (t *idleSessions) begin(sid string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	u := t.m[sid]
	if u == nil {
		if !t.exists(sid) {
			return false
		}
		u = &sessionUse{}
		t.m[sid] = u
	}
	u.refs++
	u.gen++
	if u.timer != nil {
		u.timer.Stop()
		u.timer = nil
	}
	return true
}

// end notes the end of a request begin tracked; the session's idle time
// starts when none is left.
func (t *idleSessions) end(sid string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if u := t.m[sid]; u != nil {
		u.refs--
		t.idleLocked(sid, u)
	}
}

// opened starts the idle time of session sid, which initialize opened.
func (t *idleSessions) opened(sid string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[sid] == nil {
		u := &sessionUse{}
		t.m[sid] = u
		t.idleLocked(sid, u)
	}
}

func (t *idleSessions) idleLocked(sid string, u *sessionUse) {
	if u.refs > 0 {
		return
	}
	gen := u.gen
	u.timer = time.AfterFunc(t.timeout, func() {
		t.mu.Lock()
		if t.m[sid] != u || u.gen != gen || u.refs > 0 {
			t.mu.Unlock()
			return
		}
		delete(t.m, sid)
		t.mu.Unlock()
		t.expire(sid)
	})
}
