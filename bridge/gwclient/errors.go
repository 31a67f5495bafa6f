package gwclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/openclaw-go/openclaw/internal/redact"

	"github.com/coder/websocket"

	"github.com/openclaw-go/openclaw/gateway/protocol"
)

var (
	// ErrClosed is returned by Request, WaitReady and Run once Close was called.
	ErrClosed = errors.New("gwclient: client closed")
	// ErrAlreadyRunning is returned by a second call of Run.
	ErrAlreadyRunning = errors.New("gwclient: Run called twice")
	// ErrNotConnected is wrapped by the error of a request made while the
	// client, connected before, is reconnecting: it is not sent. The
	// message is OpenClaw's ("gateway not connected").
	ErrNotConnected = errors.New("gateway not connected")
	// ErrConnectionLost is wrapped by the error of a request whose
	// connection dropped before its response arrived.
	ErrConnectionLost = errors.New("gateway connection lost")
	// ErrRequestTimeout is wrapped by the error of a request that got no
	// response within the request timeout. Its message, "gateway request
	// timeout for <method>", is the one OpenClaw's retry policy matches.
	ErrRequestTimeout = errors.New("gateway request timeout")
	// ErrChallengeTimeout is returned when connect.challenge did not arrive
	// in time; the first connection retries it (docs/protocol-facts.md, Connect failures).
	ErrChallengeTimeout = errors.New("gateway connect challenge timeout")
	// ErrFingerprintMismatch is wrapped when the pinned TLS fingerprint does
	// not match the Gateway's leaf certificate.
	ErrFingerprintMismatch = errors.New("gateway tls fingerprint mismatch")
)

// DialError is a failure to open the WebSocket (refused connection, TLS
// failure, HTTP status other than 101). Its message names the URL and the
// cause, e.g. "connecting to ws://127.0.0.1:1: dial tcp 127.0.0.1:1:
// connect: connection refused"; Unwrap gives the full chain.
type DialError struct {
	URL string
	Err error
	// Timeout is the bound of the dial (Options.ChallengeTimeout); a dial
	// that hit it reads "no answer to the WebSocket handshake within
	// <Timeout>" instead of "context deadline exceeded".
	Timeout time.Duration
}

// Error names the URL (secrets redacted: userinfo, token query values)
// and the most specific cause.
func (e *DialError) Error() string { return redact.Text(e.message()) }

func (e *DialError) message() string {
	var op *net.OpError
	var cv *tls.CertificateVerificationError
	switch {
	case errors.As(e.Err, &cv):
		return "connecting to " + redact.URL(e.URL) + ": " + cv.Error()
	case errors.Is(e.Err, ErrFingerprintMismatch):
		// The TLS error wraps ours; print it without the HTTP layers.
		var fp *fingerprintError
		if errors.As(e.Err, &fp) {
			return "connecting to " + redact.URL(e.URL) + ": " + fp.Error()
		}
	case errors.As(e.Err, &op) && op.Op == "dial":
		return "connecting to " + redact.URL(e.URL) + ": " + op.Error()
	case errors.Is(e.Err, context.DeadlineExceeded):
		// The port accepted the connection; nothing answered the upgrade.
		return fmt.Sprintf("connecting to %s: no answer to the WebSocket handshake within %v (is a Gateway listening there?)",
			redact.URL(e.URL), e.Timeout)
	case errors.As(e.Err, &op):
		return "connecting to " + redact.URL(e.URL) + ": " + op.Error()
	}
	return "connecting to " + redact.URL(e.URL) + ": " + strings.TrimPrefix(e.Err.Error(), "failed to WebSocket dial: ")
}

// Unwrap returns the dial error with all its layers.
func (e *DialError) Unwrap() error { return e.Err }

// closedError describes why a connection ended: the close frame the Gateway
// (or we) sent, or the transport error.
type closedError struct {
	Code   int // WebSocket close code, -1 without a close frame
	Reason string
	Err    error
}

func (e *closedError) Error() string {
	if e.Code >= 0 {
		return fmt.Sprintf("gateway closed (%d): %s", e.Code, e.Reason)
	}
	return "gateway connection closed: " + e.Err.Error()
}

func (e *closedError) Unwrap() error { return e.Err }

func newClosedError(err error) *closedError {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return &closedError{Code: int(ce.Code), Reason: ce.Reason, Err: err}
	}
	return &closedError{Code: -1, Err: err}
}

// retryableInitial reports whether OpenClaw retries the first connection
// after err (docs/protocol-facts.md, Connect failures): a Gateway error marked retryable, or a connect or
// challenge timeout.
func retryableInitial(err error) bool {
	var re *protocol.RequestError
	if errors.As(err, &re) && re.IsRetryable() {
		return true
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "gateway request timeout for connect") ||
		strings.Contains(msg, "gateway connect challenge timeout")
}

// retryAfter is the minimum delay a retryable Gateway error asks for.
func retryAfter(err error) time.Duration {
	var re *protocol.RequestError
	if errors.As(err, &re) && re.IsRetryable() && re.RetryAfterMs != nil && *re.RetryAfterMs > 0 {
		return time.Duration(*re.RetryAfterMs) * time.Millisecond
	}
	return 0
}
