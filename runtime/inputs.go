package runtime

//lint:file-ignore SA1019 an input request (SEP-2322) may ask for sampling or roots, deprecated by SEP-2577 but still served during its deprecation window: the runtime answers them on purpose

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/errgroup"
)

// Limits of the multi round-trip loop (SEP-2322) for one request.
const (
	// maxInputRounds bounds the rounds of input requests one tools/call,
	// prompts/get or resources/read may take before it fails.
	maxInputRounds = 10
	// maxBusyRounds bounds the retries of a request a server answered with
	// an empty set of input requests (it sheds load: "retry later").
	maxBusyRounds = 3
	// busyBackoff is the wait before the first such retry; it doubles.
	busyBackoff = 100 * time.Millisecond
)

// InputRequestError is the error of a request whose server asked for input
// (SEP-2322 input requests, MCP 2026-07-28) the session could not give: no
// handler for that kind of request in Options, a handler that failed, or a
// server that kept asking or kept shedding load past the round limits.
type InputRequestError struct {
	// Server is the MCP server that asked.
	Server string
	// Method is the request the server needs answered
	// ("sampling/createMessage", "elicitation/create", "roots/list"), or ""
	// when the loop itself gave up.
	Method string
	// ID is the server's key of the input request, or "".
	ID string
	// Err says why.
	Err error
}

// Error reads `MCP server "x" asked for elicitation/create (input request
// "who"): <cause>`, or `MCP server "x": input requests: <cause>` when the
// loop gave up.
func (e *InputRequestError) Error() string {
	if e.Method == "" {
		return fmt.Sprintf("MCP server %q: input requests: %v", e.Server, e.Err)
	}
	return fmt.Sprintf("MCP server %q asked for %s (input request %q): %v", e.Server, e.Method, e.ID, e.Err)
}

// Unwrap returns Err.
func (e *InputRequestError) Unwrap() error { return e.Err }

// errNoHandler is the cause when the embedder supplied no handler for what a
// server asked (the capability was not advertised, so the server should not
// have asked).
var errNoHandler = errors.New("this client answers no such requests (no handler in runtime.Options; the capability was not advertised)")

// InputRound is one retry of a request whose server asked for input
// (SEP-2322), made by a caller that relays the input requests to its own
// client (see [WithInputRelay]).
type InputRound struct {
	// Responses answer the server's input requests of the previous round,
	// under the keys the server gave them.
	Responses mcp.InputResponseMap
	// State is the server's requestState of the previous round, echoed
	// exactly; "" when it gave none.
	State string
}

type inputRelayKey struct{}

// WithInputRelay returns a context in which a tools/call, prompts/get or
// resources/read (CallTool, GetPrompt, ReadResource) whose server asks for
// input returns the server's input-required result as it is (its
// InputRequests, under the server's keys, and RequestState) instead of
// answering it through Options.Elicit, CreateMessage and ListRoots. round,
// when not nil, is sent with the request: the answers to the previous
// round and the server's state. A server's request sent during the call
// (MCP 2025-11-25 and older) still goes to the Options handlers, and so do
// the input requests of the prompts/get or resources/read behind a utility
// tool (Tool.Utility): its caller called a tool, whose result cannot carry
// them.
func WithInputRelay(ctx context.Context, round *InputRound) context.Context {
	if round == nil {
		round = &InputRound{}
	}
	return context.WithValue(ctx, inputRelayKey{}, round)
}

// withoutInputRelay returns ctx with WithInputRelay's relay removed: the
// Options handlers answer the server's input requests.
func withoutInputRelay(ctx context.Context) context.Context {
	if ctx.Value(inputRelayKey{}) == nil {
		return ctx
	}
	return context.WithValue(ctx, inputRelayKey{}, (*InputRound)(nil))
}

type clientCapsKey struct{}

// WithClientCapabilities returns a context in which a tools/call,
// prompts/get or resources/read carries caps, the capabilities of the
// client the request is made for, in its _meta
// (io.modelcontextprotocol/clientCapabilities, MCP 2026-07-28), in place of
// the session's own: a server that needs one the client lacks refuses the
// request (MissingRequiredClientCapabilityError, -32021) before it runs.
// Servers on older revisions read the session's capabilities of
// initialize, unless they honour the key too. A nil caps means none.
func WithClientCapabilities(ctx context.Context, caps *mcp.ClientCapabilities) context.Context {
	wire := map[string]any{}
	if caps != nil {
		if raw, err := json.Marshal(caps); err == nil {
			_ = json.Unmarshal(raw, &wire) // the JSON of a struct decodes into a map
		}
		// go-sdk's ClientCapabilities encodes the roots capability of
		// RootsV2 only in its own wire form: "roots" is present when
		// RootsV2 is.
		delete(wire, "roots")
		if caps.RootsV2 != nil {
			wire["roots"] = caps.RootsV2
		}
	}
	return context.WithValue(ctx, clientCapsKey{}, wire)
}

// inputMiddleware is the sending middleware that answers a 2026-07-28
// server's input requests: when a tools/call, prompts/get or
// resources/read result asks for input instead of carrying content, each
// input request goes to the embedder's handler (Options.CreateMessage,
// Elicit, ListRoots) with the request's context, the answers of one round
// concurrently, and the request is sent again with the answers and the
// server's request state, until a result is complete. It replaces go-sdk's
// own loop, which answers roots/list from go-sdk's static roots (where the
// Session.RootsChanged marker lives) and checks elicitation schemas the
// passthrough leaves to the client that answers (see requestMiddleware).
func (c *conn) inputMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" && method != "prompts/get" && method != "resources/read" {
			return next(ctx, method, req)
		}
		if caps, ok := ctx.Value(clientCapsKey{}).(map[string]any); ok {
			if p := req.GetParams(); p != nil {
				m := maps.Clone(p.GetMeta())
				if m == nil {
					m = map[string]any{}
				}
				m[mcp.MetaKeyClientCapabilities] = caps
				p.SetMeta(m)
			}
		}
		if round, _ := ctx.Value(inputRelayKey{}).(*InputRound); round != nil {
			// The caller relays the input requests to its own client: one
			// round, sent with the answers to the previous one.
			if round.State != "" || round.Responses != nil {
				var err error
				if req, err = withInputResponses(req, round.Responses, round.State); err != nil {
					return nil, err
				}
			}
			return next(ctx, method, req)
		}
		busy := 0
		for round := 1; ; round++ {
			res, err := next(ctx, method, req)
			if err != nil {
				return res, err
			}
			asks, state, ok := inputRequestsOf(res)
			if !ok {
				return res, nil
			}
			if round >= maxInputRounds {
				return nil, &InputRequestError{Server: c.cfg.Name, Err: fmt.Errorf("%s still needs input after %d rounds", method, round)}
			}
			if len(asks) == 0 {
				// Load shedding: the server is busy and asks to be retried.
				if busy++; busy >= maxBusyRounds {
					return nil, &InputRequestError{Server: c.cfg.Name, Err: fmt.Errorf("%s: the server stayed busy (asked to retry %d times)", method, busy)}
				}
				t := time.NewTimer(busyBackoff << (busy - 1))
				select {
				case <-ctx.Done():
					t.Stop()
					return nil, ctx.Err()
				case <-t.C:
				}
				continue
			}
			answers, err := c.answerInputs(ctx, asks)
			if err != nil {
				return nil, err
			}
			if req, err = withInputResponses(req, answers, state); err != nil {
				return nil, err
			}
		}
	}
}

// inputRequestsOf returns the input requests and the request state of a
// result that asks for input; ok is false for a complete result.
func inputRequestsOf(res mcp.Result) (asks mcp.InputRequestMap, state string, ok bool) {
	switch r := res.(type) {
	case *mcp.CallToolResult:
		return r.InputRequests, r.RequestState, r.NeedsInput() || r.InputRequests != nil
	case *mcp.GetPromptResult:
		return r.InputRequests, r.RequestState, r.NeedsInput() || r.InputRequests != nil
	case *mcp.ReadResourceResult:
		return r.InputRequests, r.RequestState, r.NeedsInput() || r.InputRequests != nil
	}
	return nil, "", false
}

// withInputResponses returns the request to send next: a copy of req's
// params (the caller's are never changed) carrying the answers and the
// state to echo.
func withInputResponses(req mcp.Request, answers mcp.InputResponseMap, state string) (mcp.Request, error) {
	cs, _ := req.GetSession().(*mcp.ClientSession)
	var p mcp.Params
	switch orig := req.GetParams().(type) {
	case *mcp.CallToolParams:
		cp := *orig
		cp.InputResponses, cp.RequestState = answers, state
		p = &cp
	case *mcp.CallToolParamsRaw:
		cp := *orig
		cp.InputResponses, cp.RequestState = answers, state
		p = &cp
	case *mcp.GetPromptParams:
		cp := *orig
		cp.InputResponses, cp.RequestState = answers, state
		p = &cp
	case *mcp.ReadResourceParams:
		cp := *orig
		cp.InputResponses, cp.RequestState = answers, state
		p = &cp
	default:
		return nil, fmt.Errorf("runtime: cannot retry a request with params %T after input requests", orig)
	}
	return &mcp.ClientRequest[mcp.Params]{Session: cs, Params: p}, nil
}

// answerInputs answers one round of input requests concurrently. The first
// failure cancels the others and fails the round.
func (c *conn) answerInputs(ctx context.Context, asks mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	ids := make([]string, 0, len(asks))
	for id := range asks {
		ids = append(ids, id)
	}
	sort.Strings(ids) // a deterministic start order for handlers and logs
	g, gctx := errgroup.WithContext(ctx)
	var mu sync.Mutex
	answers := make(mcp.InputResponseMap, len(asks))
	for _, id := range ids {
		g.Go(func() error {
			method, ans, err := c.answerInput(gctx, asks[id])
			if err != nil {
				return &InputRequestError{Server: c.cfg.Name, Method: method, ID: id, Err: err}
			}
			mu.Lock()
			answers[id] = ans
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return answers, nil
}

// answerInput answers one input request with the embedder's handler and
// names its method.
func (c *conn) answerInput(ctx context.Context, ask mcp.InputRequest) (method string, ans mcp.InputResponse, err error) {
	o := c.s.opts
	switch p := ask.(type) {
	case *mcp.ElicitParams:
		if o.Elicit == nil {
			return "elicitation/create", nil, errNoHandler
		}
		r, err := o.Elicit(ctx, c.cfg.Name, p)
		if err == nil && r != nil {
			err = checkElicitAnswer(p, r)
		}
		ans, err := answered(r, err)
		return "elicitation/create", ans, err
	case *mcp.CreateMessageParams:
		if o.CreateMessage == nil {
			return "sampling/createMessage", nil, errNoHandler
		}
		ans, err := answered(o.CreateMessage(ctx, c.cfg.Name, p))
		return "sampling/createMessage", ans, err
	case *mcp.CreateMessageWithToolsParams:
		if o.CreateMessage == nil {
			return "sampling/createMessage", nil, errNoHandler
		}
		base, err := samplingWithoutTools(p)
		if err != nil {
			return "sampling/createMessage", nil, err
		}
		ans, err := answered(o.CreateMessage(ctx, c.cfg.Name, base))
		return "sampling/createMessage", ans, err
	case *mcp.ListRootsParams:
		if o.ListRoots == nil {
			return "roots/list", nil, errNoHandler
		}
		r, err := o.ListRoots(ctx, c.cfg.Name)
		if err != nil {
			return "roots/list", nil, err
		}
		if r == nil {
			r = &mcp.ListRootsResult{}
		}
		if r.Roots == nil {
			r.Roots = []*mcp.Root{} // never null on the wire
		}
		return "roots/list", r, nil
	}
	return fmt.Sprintf("%T", ask), nil, errors.New("unknown kind of input request")
}

// checkElicitAnswer checks an accepted elicitation's content against the
// requested schema, as a client must (MCP 2025-11-25, elicitation: the
// content conforms to requestedSchema). An answer that does not is refused
// here, on the first round and with the reason, instead of the server
// asking the same person again round after round.
func checkElicitAnswer(p *mcp.ElicitParams, r *mcp.ElicitResult) error {
	if r.Action != "accept" || p.RequestedSchema == nil || r.Content == nil {
		return nil
	}
	raw, err := json.Marshal(p.RequestedSchema)
	if err != nil {
		return fmt.Errorf("the requested schema: %w", err)
	}
	var schema jsonschema.Schema
	if err := json.Unmarshal(raw, &schema); err != nil {
		return fmt.Errorf("the requested schema: %w", err)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		return fmt.Errorf("the requested schema cannot be resolved: %w", err)
	}
	// The content as the server will read it: JSON values, not Go types.
	var content any
	if raw, err = json.Marshal(r.Content); err == nil {
		err = json.Unmarshal(raw, &content)
	}
	if err != nil {
		return fmt.Errorf("the answer's content: %w", err)
	}
	if err := resolved.Validate(content); err != nil {
		return fmt.Errorf("the handler's answer does not match the requested schema: %w", err)
	}
	return nil
}

// answered turns a handler's answer into an input response; an answer of
// nil without an error is refused rather than sent as null.
func answered[R interface {
	*mcp.ElicitResult | *mcp.CreateMessageResult
	mcp.InputResponse
}](r R, err error) (mcp.InputResponse, error) {
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, errors.New("the handler answered nothing")
	}
	return r, nil
}

// samplingWithoutTools turns a sampling input request (go-sdk decodes every
// one as the with-tools form) into the single-content form
// Options.CreateMessage takes. A request that offers tools or sends several
// content blocks in one message is refused: the runtime does not advertise
// sampling with tools (MCP 2025-11-25, sampling "tools" capability).
func samplingWithoutTools(p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageParams, error) {
	if len(p.Tools) > 0 || p.ToolChoice != nil {
		return nil, errors.New("sampling with tools, which this client does not support")
	}
	msgs := make([]*mcp.SamplingMessage, 0, len(p.Messages))
	for i, m := range p.Messages {
		if len(m.Content) != 1 {
			return nil, fmt.Errorf("message %d has %d content blocks; this client takes exactly one per message", i, len(m.Content))
		}
		msgs = append(msgs, &mcp.SamplingMessage{Role: m.Role, Content: m.Content[0]})
	}
	return &mcp.CreateMessageParams{
		Meta:             p.Meta,
		IncludeContext:   p.IncludeContext,
		MaxTokens:        p.MaxTokens,
		Messages:         msgs,
		Metadata:         p.Metadata,
		ModelPreferences: p.ModelPreferences,
		StopSequences:    p.StopSequences,
		SystemPrompt:     p.SystemPrompt,
		Temperature:      p.Temperature,
	}, nil
}
