package gwclient_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/bridge/gwclient"
)

// A port that accepts the TCP connection but never answers the WebSocket
// upgrade ends the first connection with an error that says what was
// awaited, not a bare "context deadline exceeded".
func TestDialSilentPortNamesTheWait(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // read nothing, answer nothing
		}
	}()
	url := "ws://" + ln.Addr().String()
	// The timeout must fire here; its length is not asserted.
	c := gwclient.New(&gwclient.Options{URL: url, ChallengeTimeout: 300 * time.Millisecond})
	err = c.Run(context.Background())
	var de *gwclient.DialError
	if !errors.As(err, &de) {
		t.Fatalf("Run: %v, want a DialError", err)
	}
	want := "connecting to " + url + ": no answer to the WebSocket handshake within 300ms"
	if msg := err.Error(); !strings.HasPrefix(msg, want) || strings.Contains(msg, "deadline exceeded") {
		t.Fatalf("Run: %q, want it to start with %q", msg, want)
	}
}
