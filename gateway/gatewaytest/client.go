package gatewaytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"
	"github.com/openclaw-go/openclaw/gateway/protocol"
)

// DialOptions configure [Dial]. Zero values are the defaults noted.
type DialOptions struct {
	// Token and Password are connect auth.token / auth.password.
	Token    string
	Password string
	// Device signs the connect request when set; nil: no device block.
	Device *protocol.DeviceIdentity
	// DeviceToken is connect auth.deviceToken (the token an earlier hello-ok
	// issued to Device), used when Token and Password are empty.
	DeviceToken string
	// ClientID is client.id; empty: "cli". Mode is client.mode; empty: "cli".
	ClientID string
	Mode     string
	// DisplayName is client.displayName; empty: "gatewaytest".
	DisplayName string
	// Caps are connect caps; nil: ["approvals"].
	Caps []string
	// Scopes; nil: operator.read, operator.write, operator.approvals.
	Scopes []string
	// Role; empty: "operator".
	Role string
}

// Client is a minimal Gateway protocol client for tests. Its reader
// goroutine runs until Close or until the Gateway closes the socket.
type Client struct {
	ws        *websocket.Conn
	challenge protocol.Challenge
	hello     json.RawMessage
	next      atomic.Int64
	events    chan *protocol.Frame
	done      chan struct{}
	closeErr  error

	mu      sync.Mutex
	pending map[string]chan *protocol.Frame
}

// Dial connects, answers the challenge and completes the handshake. A
// rejected connect is returned as a *protocol.RequestError.
func Dial(ctx context.Context, url string, opts *DialOptions) (*Client, error) {
	var o DialOptions
	if opts != nil {
		o = *opts
	}
	if o.ClientID == "" {
		o.ClientID = "cli"
	}
	if o.Mode == "" {
		o.Mode = "cli"
	}
	if o.DisplayName == "" {
		o.DisplayName = "gatewaytest"
	}
	if o.Caps == nil {
		o.Caps = []string{"approvals"}
	}
	if o.Scopes == nil {
		o.Scopes = []string{protocol.ScopeOperatorRead, protocol.ScopeOperatorWrite, protocol.ScopeOperatorApproval}
	}
	if o.Role == "" {
		o.Role = protocol.RoleOperator
	}
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return nil, fmt.Errorf("gatewaytest: dialing %s: %w", url, err)
	}
	ws.SetReadLimit(64 << 20)
	c := &Client{ws: ws, events: make(chan *protocol.Frame, 4096), done: make(chan struct{}),
		pending: map[string]chan *protocol.Frame{}}
	_, data, err := ws.Read(ctx)
	if err != nil {
		ws.CloseNow()
		return nil, fmt.Errorf("gatewaytest: reading challenge: %w", err)
	}
	f, err := protocol.Decode(data)
	if err != nil || f.Event != protocol.EventConnectChallenge {
		ws.CloseNow()
		return nil, fmt.Errorf("gatewaytest: first frame is not connect.challenge: %s", data)
	}
	if err := json.Unmarshal(f.Payload, &c.challenge); err != nil {
		ws.CloseNow()
		return nil, fmt.Errorf("gatewaytest: challenge: %w", err)
	}
	p := protocol.ConnectParams{MinProtocol: protocol.Version, MaxProtocol: protocol.Version,
		Client: protocol.ClientInfo{ID: o.ClientID, DisplayName: o.DisplayName, Version: "test", Platform: "linux",
			DeviceFamily: "Linux", Mode: o.Mode},
		Caps: o.Caps, Role: o.Role, Scopes: o.Scopes}
	if o.Token != "" || o.Password != "" || o.DeviceToken != "" {
		p.Auth = &protocol.Auth{Token: o.Token, Password: o.Password, DeviceToken: o.DeviceToken}
	}
	if o.Device != nil {
		p.Device = o.Device.Prove(protocol.SignedFields{ClientID: p.Client.ID, ClientMode: p.Client.Mode, Role: p.Role,
			Scopes: p.Scopes, SignedAtMs: c.challenge.TS, Token: protocol.TokenForSignature(p.Auth),
			Nonce: c.challenge.Nonce, Platform: p.Client.Platform, DeviceFamily: p.Client.DeviceFamily})
	}
	go c.readLoop()
	hello, err := c.Request(ctx, "connect", p)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.hello = hello
	return c, nil
}

// Challenge returns the connect.challenge payload the Gateway sent.
func (c *Client) Challenge() protocol.Challenge { return c.challenge }

// Hello returns the hello-ok payload.
func (c *Client) Hello() json.RawMessage { return c.hello }

func (c *Client) readLoop() {
	defer close(c.done)
	defer close(c.events)
	for {
		_, data, err := c.ws.Read(context.Background())
		if err != nil {
			c.closeErr = err
			return
		}
		f, err := protocol.Decode(data)
		if err != nil {
			c.closeErr = err
			c.ws.CloseNow()
			return
		}
		switch f.Type {
		case protocol.TypeEvent:
			select {
			case c.events <- f:
			default: // a test that ignores events must not stall the reader
			}
		case protocol.TypeResponse:
			c.mu.Lock()
			ch := c.pending[f.ID]
			c.mu.Unlock()
			if ch != nil {
				select {
				case ch <- f:
				default:
				}
			}
		}
	}
}

// Requests sends one request and returns the channel its responses arrive
// on (two for a twoPhase approval request). The channel is never closed.
func (c *Client) Requests(ctx context.Context, method string, params any) (string, <-chan *protocol.Frame, error) {
	id := strconv.FormatInt(c.next.Add(1), 10) + ":test"
	f, err := protocol.Request(id, method, params)
	if err != nil {
		return "", nil, err
	}
	data, err := json.Marshal(f)
	if err != nil {
		return "", nil, err
	}
	ch := make(chan *protocol.Frame, 4)
	c.mu.Lock()
	c.pending[id] = ch
	c.mu.Unlock()
	if err := c.ws.Write(ctx, websocket.MessageText, data); err != nil {
		return "", nil, fmt.Errorf("gatewaytest: sending %s: %w", method, err)
	}
	return id, ch, nil
}

// Request sends one request and waits for its (first) response; a failed
// response is a *protocol.RequestError.
func (c *Client) Request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	_, ch, err := c.Requests(ctx, method, params)
	if err != nil {
		return nil, err
	}
	return c.Await(ctx, method, ch)
}

// Await waits for the next response on ch.
func (c *Client) Await(ctx context.Context, method string, ch <-chan *protocol.Frame) (json.RawMessage, error) {
	select {
	case f := <-ch:
		if !*f.OK {
			return nil, &protocol.RequestError{Method: method, ErrorShape: *f.Error}
		}
		return f.Payload, nil
	case <-c.done:
		// A response may have raced with the close.
		select {
		case f := <-ch:
			if !*f.OK {
				return nil, &protocol.RequestError{Method: method, ErrorShape: *f.Error}
			}
			return f.Payload, nil
		default:
		}
		return nil, fmt.Errorf("gatewaytest: %s: connection closed: %w", method, c.closeErr)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// NextEvent returns the next event whose name is one of names (any event
// when names is empty), skipping others.
func (c *Client) NextEvent(ctx context.Context, names ...string) (*protocol.Frame, error) {
	for {
		select {
		case f, ok := <-c.events:
			if !ok {
				return nil, fmt.Errorf("gatewaytest: connection closed: %w", c.closeErr)
			}
			if len(names) == 0 || slices.Contains(names, f.Event) {
				return f, nil
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Done is closed when the connection has ended; CloseStatus then reports
// the Gateway's close code (-1 when none).
func (c *Client) Done() <-chan struct{} { return c.done }

// CloseStatus is the WebSocket close code the connection ended with, or -1.
// Call it after Done is closed.
func (c *Client) CloseStatus() websocket.StatusCode { return websocket.CloseStatus(c.closeErr) }

// Close closes the connection and waits for the reader to end. Closing a
// connection the Gateway already closed is not an error.
func (c *Client) Close() error {
	select {
	case <-c.done:
		return nil
	default:
	}
	err := c.ws.Close(websocket.StatusNormalClosure, "")
	<-c.done
	var ce websocket.CloseError
	if err == nil || errors.As(err, &ce) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	if websocket.CloseStatus(c.closeErr) != -1 {
		return nil // the Gateway closed first
	}
	return err
}
