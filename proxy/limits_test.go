package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawConn dials the fixture and writes head (a request line and headers,
// without the blank line that ends them, when partial) as is.
func rawConn(t *testing.T, f *httpFixture, head string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(f.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if head != "" {
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// readAnswer reads what the proxy writes on c until it closes c. A proxy
// that neither answers nor closes fails the test when the test's own
// safety bound (far above the proxy's timeouts) runs out.
func readAnswer(t *testing.T, c net.Conn) (status string, body string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, err := io.ReadAll(c)
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the proxy neither answered nor closed the connection; read so far %q", b)
	}
	if len(b) == 0 {
		return "", "" // closed without a word
	}
	res, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(b))), nil)
	if err != nil {
		t.Fatalf("not an HTTP answer: %q (%v)", b, err)
	}
	rb, _ := io.ReadAll(res.Body)
	return res.Status, string(rb)
}

func postHead(token string, length int) string {
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	return fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n%sContent-Length: %d\r\n\r\n", auth, length)
}

// TestSlowClientsAreRefused: a client that sends its body one byte at a
// time (or its headers, or nothing) is answered and cut off, not waited
// for; an unauthenticated one gets its 401 before the body.
func TestSlowClientsAreRefused(t *testing.T) {
	t.Parallel()
	const token = "tok"
	f := newHTTPFixture(t, HTTPOptions{Token: token, ReadHeaderTimeout: 200 * time.Millisecond, BodyTimeout: 200 * time.Millisecond})

	t.Run("no token, body pending", func(t *testing.T) {
		t.Parallel()
		c := rawConn(t, f, postHead("", len(initBody))+initBody[:1])
		if status, body := readAnswer(t, c); !strings.HasPrefix(status, "401") || !strings.Contains(body, "missing bearer token") {
			t.Fatalf("answer = %q %q, want 401 before the body", status, body)
		}
	})
	t.Run("token, body trickles", func(t *testing.T) {
		t.Parallel()
		c := rawConn(t, f, postHead(token, len(initBody))+initBody[:30])
		status, body := readAnswer(t, c)
		if !strings.HasPrefix(status, "408") || !strings.Contains(body, "did not arrive within 200ms") || !strings.Contains(body, `"id":1`) {
			t.Fatalf("answer = %q %q, want 408 naming the body timeout, with the request id", status, body)
		}
	})
	t.Run("headers trickle", func(t *testing.T) {
		t.Parallel()
		c := rawConn(t, f, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
		readAnswer(t, c) // closed: readAnswer fails if it stays open
	})
	t.Run("a GET with a body", func(t *testing.T) {
		t.Parallel()
		c := rawConn(t, f, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nx")
		if status, body := readAnswer(t, c); !strings.HasPrefix(status, "400") || !strings.Contains(body, "carries no body") {
			t.Fatalf("answer = %q %q, want 400 before the body", status, body)
		}
	})
	// The connection is still served after the slow ones.
	if code, _, body := do(t, "GET", f.url+PathHealth, nil, ""); code != 200 {
		t.Fatalf("healthz = %d %s", code, body)
	}
}

// TestConnectionCap: connections over MaxConnections are answered 503 and
// closed; a slot freed is taken again.
func TestConnectionCap(t *testing.T) {
	t.Parallel()
	f := newHTTPFixture(t, HTTPOptions{NoAuth: true, MaxConnections: 3, ReadHeaderTimeout: time.Minute})
	var held []net.Conn
	for range 3 {
		c := rawConn(t, f, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n") // headers never end
		held = append(held, c)
	}
	// The three are accepted (the listener holds their slots) once the
	// server reads from them; a fourth is refused whatever the order.
	c := rawConn(t, f, "")
	status, body := readAnswer(t, c)
	if !strings.HasPrefix(status, "503") || !strings.Contains(body, "too many connections") {
		t.Fatalf("fourth connection: %q %q, want 503 too many connections", status, body)
	}
	_ = held[0].Close()
	// The slot comes back once the server has seen the close.
	for i := 0; ; i++ {
		c := rawConn(t, f, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
		status, _ := readAnswer(t, c)
		if strings.HasPrefix(status, "200") {
			break
		}
		if i == 200 {
			t.Fatalf("no slot after a connection closed: %q", status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSessionCap: an initialize over MaxSessions is answered 503 with a
// JSON-RPC error; a session closed makes room.
func TestSessionCap(t *testing.T) {
	t.Parallel()
	f := newHTTPFixture(t, HTTPOptions{NoAuth: true, MaxSessions: 2})
	hdr := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	var ids []string
	for range 2 {
		req, _ := http.NewRequest("POST", f.url+PathMCP, strings.NewReader(initBody))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("initialize = %d", res.StatusCode)
		}
		ids = append(ids, res.Header.Get("Mcp-Session-Id"))
	}
	code, _, body := do(t, "POST", f.url+PathMCP, hdr, initBody)
	if code != 503 || !strings.Contains(body, `"id":1`) || !strings.Contains(body, "at most 2") {
		t.Fatalf("third initialize = %d %s, want 503 with a JSON-RPC error naming the cap", code, body)
	}
	code, _, body = do(t, "GET", f.url+PathSSE, nil, "")
	if code != 503 || !strings.Contains(body, "too many MCP sessions") {
		t.Fatalf("GET /sse over the cap = %d %s, want 503", code, body)
	}
	if code, _, body := do(t, "DELETE", f.url+PathMCP, map[string]string{"Mcp-Session-Id": ids[0]}, ""); code != 204 {
		t.Fatalf("DELETE = %d %s", code, body)
	}
	if code, _, body := do(t, "POST", f.url+PathMCP, hdr, initBody); code != 200 {
		t.Fatalf("initialize after a DELETE = %d %s", code, body)
	}
}

// TestHostAndOriginOnEveryPath: a DNS-rebinding request (a foreign Host on
// a loopback listener) is refused on every path, /metrics and /healthz
// included, unless the Host is allowed; two Origin headers are refused.
func TestHostAndOriginOnEveryPath(t *testing.T) {
	t.Parallel()
	f := newHTTPFixture(t, HTTPOptions{NoAuth: true, ListenHost: "127.0.0.1", AllowedHosts: []string{"LB.internal"}})
	for _, path := range []string{PathMCP, PathSSE, PathMetrics, PathHealth} {
		for _, tc := range []struct {
			host, origins string
			want          string
		}{
			{"evil.example.com:8765", "", "403"},
			{"evil.example.com", "", "403"},
			{"lb.internal:9000", "", "not 403"},
			{"localhost:8765", "", "not 403"},
			{"127.0.0.1", "Origin: http://localhost:3000\r\nOrigin: http://evil.example.com\r\n", "403"},
			{"127.0.0.1", "Origin: http://localhost:3000\r\n", "not 403"},
		} {
			method := "GET"
			if path == PathMCP {
				method = "DELETE" // answered at once, whatever the session
			}
			c := rawConn(t, f, fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n", method, path, tc.host, tc.origins))
			// The status line only: an SSE stream that opens stays open.
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
			status, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				t.Fatalf("%s %s Host %s: no answer: %v", method, path, tc.host, err)
			}
			refused := strings.HasPrefix(status, "HTTP/1.1 403")
			if refused != (tc.want == "403") {
				t.Errorf("%s %s Host %s %q: %q, want %s", method, path, tc.host, tc.origins, status, tc.want)
			}
			_ = c.Close()
		}
	}
}
