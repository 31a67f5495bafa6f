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
