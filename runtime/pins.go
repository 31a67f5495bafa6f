package runtime

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/internal/jsonw"
	"github.com/openclaw-go/openclaw/policies"
)

// The pin check (docs/tool-pins.md): when the catalog is built, every tool
// of a server with pins (Options.Pins) is compared, by its digest, with the
// definition the user trusted. A tool whose definition changed, or that the
// server lists without a pin, is acted on by the pin mode: hidden and
// refused (block), or listed with a warning (warn) or an audit record
// (audit). Each tool of a pinned server carries its pin state (Tool.Pin),
// which before_tool_call sees. Servers without pins are not checked.

// PinAuditHook is the hook of the audit records of pin mismatches and of
// `openclaw mcp trust`: a host check, not a policy module's hook.
const PinAuditHook policies.Hook = "tool_pins"

// PinModule names the pin check in audit records and reasons.
const PinModule = "host:tool-pins"

// pinState is the session's pins with their mode, indexed for the pin
// check when they are set.
type pinState struct {
	file    *config.ToolPins
	mode    config.PinMode
	servers map[string]map[string]pinEntry // file.Servers, with decoded digests
}

// pinEntry is one pin as the check compares it: its digest decoded (in the
// map, beside the key the check looks up) and the pin itself.
type pinEntry struct {
	sum     [sha256.Size]byte
	valid   bool // the pin's digest is in config.ToolDigest's form
	trusted *trustedPin
}

// trustedPin is one pin and the pin state handed out while a listed tool
// matches it (shared by every build: not to be modified).
type trustedPin struct {
	pin   config.ToolPin
	state policies.ToolPin
}

// SetPins replaces the pins (Options.Pins; nil pins nothing) and the pin
// mode ("" means config.PinBlock), for instance after `openclaw mcp trust`
// wrote the pins file; the catalog is built again on its next use, so a
// tool trusted now comes back and one whose pin no longer matches leaves.
func (s *Session) SetPins(pins *config.ToolPins, mode config.PinMode) {
	s.storePins(pins, mode)
	s.mu.Lock()
	s.cat = nil
	s.mu.Unlock()
}

func (s *Session) storePins(pins *config.ToolPins, mode config.PinMode) {
	if mode == "" {
		mode = config.PinBlock
	}
	if pins == nil {
		s.pins.Store(nil)
		return
	}
	n := 0
	for _, tools := range pins.Servers {
		n += len(tools)
	}
	slab := make([]trustedPin, 0, n)
	servers := make(map[string]map[string]pinEntry, len(pins.Servers))
	for server, tools := range pins.Servers {
		m := make(map[string]pinEntry, len(tools))
		for name, pin := range tools {
			sum, ok := config.ParseToolDigest(pin.Digest)
			slab = append(slab, trustedPin{pin: pin, state: policies.ToolPin{State: policies.PinTrusted, Digest: pin.Digest, Pinned: pin.Digest}})
			m[name] = pinEntry{sum: sum, valid: ok, trusted: &slab[len(slab)-1]}
		}
		servers[server] = m
	}
	s.pins.Store(&pinState{file: pins, mode: mode, servers: servers})
}

// PinDefinition returns the part of t a pin covers (config.ToolDefinition):
// name, title, description, the schemas and the annotations as JSON. It
// fails only when a schema cannot be encoded as JSON.
func PinDefinition(t *mcp.Tool) (config.ToolDefinition, error) {
	d := config.ToolDefinition{Name: t.Name, Title: t.Title, Description: t.Description}
	var err error
	if d.InputSchema, err = schemaJSON(t.InputSchema); err != nil {
		return d, fmt.Errorf("inputSchema: %w", err)
	}
	if d.OutputSchema, err = schemaJSON(t.OutputSchema); err != nil {
		return d, fmt.Errorf("outputSchema: %w", err)
	}
	if t.Annotations != nil {
		if d.Annotations, err = json.Marshal(t.Annotations); err != nil {
			return d, fmt.Errorf("annotations: %w", err)
		}
	}
	return d, nil
}

// schemaJSON returns a schema as JSON text: as listed when the runtime
// kept it raw (the fast listing path), encoded otherwise; nil for none.
func schemaJSON(v any) (json.RawMessage, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return v, nil
	}
	return json.Marshal(v)
}

// ToolDigest returns the digest of t's definition as a pin records it
// ([config.ToolDigest] of the canonical [PinDefinition]) and that
// canonical encoding.
func ToolDigest(t *mcp.Tool) (digest string, canonical []byte, err error) {
	d, err := PinDefinition(t)
	if err != nil {
		return "", nil, err
	}
	canonical, err = d.Canonical()
	if err != nil {
		return "", nil, err
	}
	return config.ToolDigest(canonical), canonical, nil
}

// PinError refuses a call of a tool that the pin check hides in mode block:
// its definition changed since it was trusted, or its server lists it and
// has no pin for it. It is a tool error on every surface (the proxy answers
// it as one), naming the change and the command that trusts the tool.
type PinError struct {
	// Tool is the exposed name; Server the raw server name; Upstream the
	// server's own tool name.
	Tool, Server, Upstream string
	// State is policies.PinChanged or policies.PinNew.
	State string
	// Changes names the members of the definition that differ from the
	// trusted one (description, inputSchema, …); nil for a new tool.
	Changes []string
	// Digest is the listed definition's digest; Pinned the trusted one
	// ("" for a new tool).
	Digest, Pinned string
}

// Error reads `runtime: tool "docs__search" is blocked: its definition
// changed since it was trusted (description; sha256:… was sha256:…); see
// the change with "openclaw mcp tools --diff" and trust it with
// "openclaw mcp trust docs"`.
func (e *PinError) Error() string {
	return fmt.Sprintf("runtime: tool %q is blocked: %s; see the change with %q and trust it with %q",
		e.Tool, e.Reason(), "openclaw mcp tools --diff", TrustCommand(e.Server))
}

// TrustCommand is the command line that trusts the tools of the raw server
// name as listed now: `openclaw mcp trust docs`, the name single-quoted
// for a POSIX shell when it holds anything but letters, digits and _.-/:@.
func TrustCommand(server string) string {
	return "openclaw mcp trust " + shellWord(server)
}

// Reason says what differs from the pins: `its definition changed since it
// was trusted (description; sha256:… was sha256:…)` or `server "docs" lists
// it and has no pin for it (a new tool; sha256:…)`.
func (e *PinError) Reason() string {
	if e.State == policies.PinNew {
		return fmt.Sprintf("server %q lists it and has no pin for it (a new tool %q; %s)", e.Server, e.Upstream, e.Digest)
	}
	what := "its definition"
	if len(e.Changes) > 0 {
		what = strings.Join(e.Changes, ", ")
	}
	return fmt.Sprintf("its definition changed since it was trusted (%s; %s was %s)", what, e.Digest, e.Pinned)
}

// shellWord returns s as one word of a POSIX shell command line: as it is
// when it needs no quoting, single-quoted otherwise.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-/:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// DefinitionChanges names the members of the definition that differ between
// trusted and listed, both canonical encodings (config.ToolDefinition.
// Canonical), in the order name, title, description, inputSchema,
// outputSchema, annotations. A trusted encoding that cannot be read
// yields ["definition"].
func DefinitionChanges(trusted, listed []byte) []string {
	a, errA := config.ParseToolDefinition(trusted)
	b, errB := config.ParseToolDefinition(listed)
	if errA != nil || errB != nil {
		return []string{"definition"}
	}
	var out []string
	str := func(name, x, y string) {
		if x != y {
			out = append(out, name)
		}
	}
	raw := func(name string, x, y json.RawMessage) {
		if !bytes.Equal(bytes.TrimSpace(x), bytes.TrimSpace(y)) {
			out = append(out, name)
		}
	}
	str("name", a.Name, b.Name)
	str("title", a.Title, b.Title)
	str("description", a.Description, b.Description)
	raw("inputSchema", a.InputSchema, b.InputSchema)
	raw("outputSchema", a.OutputSchema, b.OutputSchema)
	raw("annotations", a.Annotations, b.Annotations)
	return out
}

// pinKey names a tool for the pin check's memory: raw server, upstream name.
type pinKey struct{ server, tool string }

// pinCheck is one catalog build's pin check. It keeps, per server, the
// digests of the listing it checked: a listing is immutable until its
// server lists again (a new slice), so a build after which no server
// listed again computes no digest.
type pinCheck struct {
	s     *Session
	state *pinState
	canon jsonw.Canonicalizer
	buf   []byte
	kept  map[string]*listingDigests // by raw server name, for the next build
}

// listingDigests are the digests of one listing, by index.
type listingDigests struct {
	tools []*mcp.Tool
	d     []pinDigest
}

// of reports whether ld holds the digests of tools.
func (ld *listingDigests) of(tools []*mcp.Tool) bool {
	return ld != nil && len(ld.tools) == len(tools) && (len(tools) == 0 || &ld.tools[0] == &tools[0])
}

// pinDigest is a listed tool's digest: the SHA-256 of its canonical
// definition, written out only where it is shown (a mismatch).
type pinDigest struct {
	done bool // computed
	ok   bool // the definition could be encoded: sum is its digest
	sum  [sha256.Size]byte
}

// String is the digest as config.ToolDigest writes it; "" when the
// definition could not be encoded.
func (d *pinDigest) String() string {
	if !d.ok {
		return ""
	}
	return config.FormatToolDigest(d.sum)
}

// serverCheck is the pin check of one pinned server's listing.
type serverCheck struct {
	pc     *pinCheck
	server string
	pins   map[string]pinEntry
	ld     *listingDigests
}

// newPinCheck starts the pin check of a build; nil when there are no pins.
// The caller holds buildMu.
func (s *Session) newPinCheck() *pinCheck {
	st := s.pins.Load()
	if st == nil {
		s.pinDigests = nil
		return nil
	}
	return &pinCheck{s: s, state: st, kept: make(map[string]*listingDigests, len(st.file.Servers))}
}

// done keeps this build's digests for the next one.
func (pc *pinCheck) done() {
	if pc != nil {
		pc.s.pinDigests = pc.kept
	}
}

// server returns the check of the listing tools of the raw server name;
// nil when the server has no pins (its tools are not checked).
func (pc *pinCheck) server(name string, tools []*mcp.Tool) *serverCheck {
	if pc == nil {
		return nil
	}
	pins, ok := pc.state.servers[name]
	if !ok {
		return nil
	}
	ld := pc.s.pinDigests[name]
	if !ld.of(tools) {
		ld = &listingDigests{tools: tools, d: make([]pinDigest, len(tools))}
	}
	pc.kept[name] = ld
	return &serverCheck{pc: pc, server: name, pins: pins, ld: ld}
}

// digest returns the digest of the j-th tool of the listing, computing it
// once: the canonical encoding of its definition (schemas as listed, the
// runtime keeps them raw) in the check's buffer, hashed.
func (sc *serverCheck) digest(j int) *pinDigest {
	d := &sc.ld.d[j]
	if d.done {
		return d
	}
	pc := sc.pc
	d.done = true
	t := sc.ld.tools[j]
	def, err := PinDefinition(t)
	if err == nil {
		pc.buf, err = def.AppendCanonical(pc.buf[:0], &pc.canon)
	}
	if err != nil {
		pc.s.log.Warn("MCP tool definition cannot be encoded for its pin: treated as changed", "server", sc.server, "tool", t.Name, "err", err.Error())
		return d
	}
	d.sum, d.ok = sha256.Sum256(pc.buf), true
	return d
}

// check returns the pin state of the j-th tool of the listing, exposed as
// name, and the error that refuses it when the mode is block (nil when it
// is trusted or the mode lets it through). A mismatch is reported (log,
// audit) once per listed digest.
func (sc *serverCheck) check(name string, j int) (*policies.ToolPin, *PinError) {
	d := sc.digest(j)
	t := sc.ld.tools[j]
	pc := sc.pc
	tp, pinned := sc.pins[t.Name]
	switch {
	case pinned && d.ok && tp.valid && tp.sum == d.sum:
		if len(pc.s.pinReported) > 0 {
			delete(pc.s.pinReported, pinKey{sc.server, t.Name})
		}
		return &tp.trusted.state, nil
	case pinned:
		digest := d.String()
		_, canonical, _ := ToolDigest(t) // a mismatch is rare: its encoding is not kept
		pe := &PinError{Tool: name, Server: sc.server, Upstream: t.Name, State: policies.PinChanged,
			Changes: DefinitionChanges(tp.trusted.pin.Definition, canonical), Digest: digest, Pinned: tp.trusted.pin.Digest}
		pc.report(pinKey{sc.server, t.Name}, pe)
		return &policies.ToolPin{State: policies.PinChanged, Digest: digest, Pinned: tp.trusted.pin.Digest}, pc.refusal(pe)
	}
	digest := d.String()
	pe := &PinError{Tool: name, Server: sc.server, Upstream: t.Name, State: policies.PinNew, Digest: digest}
	pc.report(pinKey{sc.server, t.Name}, pe)
	return &policies.ToolPin{State: policies.PinNew, Digest: digest}, pc.refusal(pe)
}

// refusal is pe when the mode blocks, nil otherwise.
func (pc *pinCheck) refusal(pe *PinError) *PinError {
	if pc.state.mode == config.PinBlock {
		return pe
	}
	return nil
}

// report logs (modes block and warn) and audits (every mode) a mismatch,
// once per tool and listed digest.
func (pc *pinCheck) report(key pinKey, pe *PinError) {
	s := pc.s
	if s.pinReported[key] == pe.Digest && pe.Digest != "" {
		return
	}
	if s.pinReported == nil {
		s.pinReported = map[pinKey]string{}
	}
	s.pinReported[key] = pe.Digest
	mode := pc.state.mode
	switch mode {
	case config.PinBlock:
		s.log.Warn("MCP tool hidden: "+pe.Reason()+"; trust it with: "+TrustCommand(pe.Server), "server", pe.Server, "tool", pe.Upstream)
	case config.PinWarn:
		s.log.Warn("MCP tool listed although "+pe.Reason()+" (tool pins mode warn)", "server", pe.Server, "tool", pe.Upstream)
	}
	if s.opts.Audit == nil {
		return
	}
	rec := policies.AuditRecord{Time: time.Now().UTC(), Hook: PinAuditHook, Surface: s.surface(), SessionKey: s.opts.SessionKey,
		Tool: pe.Tool, Server: pe.Server, Module: PinModule, Mode: policies.Enforce, Decision: string(policies.Block), Reason: pe.Reason()}
	if mode != config.PinBlock {
		rec.Mode, rec.Decision = policies.AuditOnly, string(mode)
	}
	s.opts.Audit.Record(rec)
}

// ServerTools is one server's latest listing.
type ServerTools struct {
	// Server is the raw server name.
	Server string
	// Tools are the server's own definitions, in its order (shared: do not
	// modify them).
	Tools []*mcp.Tool
}

// Listings returns the latest listing of each connected server, in
// declaration order, after bringing the catalog up to date as Tools does:
// every tool each server lists, those the tool policy, the tool filter or
// the pin check hide included. It is what `openclaw mcp trust` pins and
// `openclaw mcp tools --diff` compares with the pins. A server that is
// disabled, not connected or not listed yet is absent.
func (s *Session) Listings(ctx context.Context) ([]ServerTools, error) {
	defer s.touch()()
	cat, err := s.catalog(ctx)
	if err != nil {
		return nil, err
	}
	var out []ServerTools
	for _, c := range cat.set.conns {
		c.mu.Lock()
		ok, tools := c.cs != nil && c.listed, c.tools
		c.mu.Unlock()
		if ok {
			out = append(out, ServerTools{Server: c.cfg.Name, Tools: tools})
		}
	}
	return out, nil
}

// ListingDigest returns the digest of one server's listing as a whole:
// [config.ToolDigest] of the JSON array of [name, digest] pairs of its
// tools ([ToolDigest]), sorted. `openclaw mcp tools --diff` shows it and
// `openclaw mcp trust SERVER --digest` trusts a listing only when its
// digest is still the one reviewed.
func ListingDigest(tools []*mcp.Tool) (string, error) {
	pairs := make([][2]string, 0, len(tools))
	for _, t := range tools {
		digest, _, err := ToolDigest(t)
		if err != nil {
			return "", fmt.Errorf("tool %q: %w", t.Name, err)
		}
		pairs = append(pairs, [2]string{t.Name, digest})
	}
	slices.SortFunc(pairs, func(a, b [2]string) int { return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1])) })
	b, err := json.Marshal(pairs)
	if err != nil {
		return "", err
	}
	return config.ToolDigest(b), nil
}

// PinTools returns the pins of one server's listing, as `openclaw mcp
// trust` records them: each tool's digest and canonical definition,
// trusted at at (UTC, to the second), by the server's own tool name.
func PinTools(tools []*mcp.Tool, at time.Time) (map[string]config.ToolPin, error) {
	out := make(map[string]config.ToolPin, len(tools))
	for _, t := range tools {
		digest, canon, err := ToolDigest(t)
		if err != nil {
			return nil, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		out[t.Name] = config.ToolPin{Digest: digest, TrustedAt: at.UTC().Truncate(time.Second), Definition: canon}
	}
	return out, nil
}
