package bridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/openclaw-go/openclaw/internal/jsonw"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// This file validates tool arguments the way OpenClaw's zod schemas do, so
// that a client sees the same messages: unknown keys are dropped, each
// violation is reported as `<zod message> at <field>`, in schema order,
// several joined by "; ".

// propType is the JSON Schema type of a tool argument.
type propType string

const (
	typeString  propType = "string"
	typeInteger propType = "integer"
	typeBoolean propType = "boolean"
)

// prop describes one argument: its type and the constraints the bridge's
// schemas use. Bounds apply when hasMin/hasMax are set.
type prop struct {
	name      string
	typ       propType
	minLength int // strings: 0 means none
	enum      []string
	hasMin    bool
	min       int64
	hasMax    bool
	max       int64
}

// schemaJSON renders the property as OpenClaw's draft-07 schema does, keys
// in the same order: type, minLength | enum | minimum, maximum.
func (p *prop) schemaJSON(buf []byte) []byte {
	o := jsonw.NewObject(buf)
	o.Str("type", string(p.typ))
	if p.minLength > 0 {
		o.Int("minLength", int64(p.minLength))
	}
	if p.enum != nil {
		o.Key("enum")
		o.Buf = append(o.Buf, '[')
		for i, e := range p.enum {
			if i > 0 {
				o.Buf = append(o.Buf, ',')
			}
			o.Buf = jsonw.AppendString(o.Buf, e)
		}
		o.Buf = append(o.Buf, ']')
	}
	if p.hasMin {
		o.Int("minimum", p.min)
	}
	if p.hasMax {
		o.Int("maximum", p.max)
	}
	return o.Close()
}

// args are validated tool arguments: the known keys the client sent, in the
// order it sent them, with their raw values.
type args struct {
	keys   []string
	values map[string]json.RawMessage
}

// JSON returns the arguments as a JSON object, unknown keys removed.
func (a *args) JSON() json.RawMessage {
	o := jsonw.NewObject(nil)
	for _, k := range a.keys {
		o.Raw(k, a.values[k])
	}
	return o.Close()
}

func (a *args) str(name string) (string, bool) { return rawString(a.values[name]) }

func (a *args) integer(name string, def int64) int64 {
	raw, ok := a.values[name]
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return def
	}
	return int64(f)
}

func (a *args) boolean(name string, def bool) bool {
	switch string(a.values[name]) {
	case "true":
		return true
	case "false":
		return false
	}
	return def
}

// received names a JSON value's type as zod reports it.
func received(raw json.RawMessage) string {
	switch kindOf(raw) {
	case kindNone:
		return "undefined"
	case kindNull:
		return "null"
	case kindBool:
		return "boolean"
	case kindString:
		return "string"
	case kindArray:
		return "array"
	case kindObject:
		return "object"
	}
	return "number"
}

// validateArgs checks raw arguments against props and required. It returns
// the cleaned arguments, or the message of every violation.
func validateArgs(raw json.RawMessage, props []prop, required []string) (*args, string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if kindOf(raw) != kindObject {
		return nil, "Invalid input: expected object, received " + received(raw)
	}
	a, ok := scanArgs(raw, props)
	if !ok {
		var msg string
		if a, msg = decodeArgs(raw, props); a == nil {
			return nil, msg
		}
	}
	var issues []string
	for i := range props {
		p := &props[i]
		v, ok := a.values[p.name]
		if !ok {
			for _, r := range required {
				if r == p.name {
					issues = append(issues, fmt.Sprintf("Invalid input: expected %s, received undefined at %s", zodType(p.typ), p.name))
				}
			}
			continue
		}
		if msg := p.check(v); msg != "" {
			issues = append(issues, msg+" at "+p.name)
		}
	}
	if len(issues) > 0 {
		return nil, strings.Join(issues, "; ")
	}
	return a, ""
}

// scanArgs reads the known arguments of the JSON object raw with the
// skipping scanner, the fast path of every tool call. It declines (false)
// when raw is not valid JSON or has a key with an escape or a non-ASCII
// byte, where decodeArgs decides.
func scanArgs(raw []byte, props []prop) (*args, bool) {
	if !json.Valid(raw) {
		return nil, false
	}
	a := &args{values: make(map[string]json.RawMessage, len(props))}
	ok := true
	err := jsonw.Members(raw, func(k, v []byte) {
		if !ok {
			return
		}
		if !jsonw.PlainKey(k) {
			ok = false
			return
		}
		for i := range props {
			if string(k) == props[i].name {
				a.set(props[i].name, v)
				return
			}
		}
	})
	return a, ok && err == nil
}

// decodeArgs reads the known arguments of the JSON object raw with
// encoding/json's tokenizer; on malformed input it returns the zod-style
// message instead.
func decodeArgs(raw []byte, props []prop) (*args, string) {
	a := &args{values: map[string]json.RawMessage{}}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // {
		return nil, "Invalid input: expected object, received " + received(raw)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, "Invalid input: malformed arguments"
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, "Invalid input: malformed arguments"
		}
		k, _ := tok.(string)
		for i := range props {
			if k == props[i].name {
				a.set(k, v)
				break
			}
		}
	}
	return a, ""
}

// set records a known argument: a repeated key keeps its first position
// and takes the last value, as the object would in JavaScript.
func (a *args) set(k string, v json.RawMessage) {
	if _, dup := a.values[k]; !dup {
		a.keys = append(a.keys, k)
	}
	a.values[k] = jsonw.Compact(v)
}

// zodType is how zod names the expected type in an invalid_type message.
func zodType(t propType) string {
	if t == typeInteger {
		return "number"
	}
	return string(t)
}

// check returns the zod message for a value that violates p, or "".
func (p *prop) check(v json.RawMessage) string {
	if p.enum != nil {
		s, ok := rawString(v)
		for _, e := range p.enum {
			if ok && s == e {
				return ""
			}
		}
		quoted := make([]string, len(p.enum))
		for i, e := range p.enum {
			quoted[i] = strconv.Quote(e)
		}
		return "Invalid option: expected one of " + strings.Join(quoted, "|")
	}
	switch p.typ {
	case typeString:
		s, ok := rawString(v)
		if !ok {
			return "Invalid input: expected string, received " + received(v)
		}
		if n := len([]rune(s)); n < p.minLength {
			return fmt.Sprintf("Too small: expected string to have >=%d characters", p.minLength)
		}
	case typeBoolean:
		if kindOf(v) != kindBool {
			return "Invalid input: expected boolean, received " + received(v)
		}
	case typeInteger:
		if kindOf(v) != kindNumber {
			return "Invalid input: expected number, received " + received(v)
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || math.IsInf(f, 0) {
			return "Invalid input: expected number, received number"
		}
		if f != math.Trunc(f) {
			return "Invalid input: expected int, received number"
		}
		if p.hasMin && f < float64(p.min) {
			return fmt.Sprintf("Too small: expected number to be >=%d", p.min)
		}
		if p.hasMax && f > float64(p.max) {
			return fmt.Sprintf("Too big: expected number to be <=%d", p.max)
		}
	}
	return ""
}

// Routing arguments are canonicalized before the before_tool_call chain,
// so that the policy, the audit log and the Gateway all see one value. The
// Gateway folds what it is given: a rule on "agent:main:tg-dm" must not be
// passed by " agent:main:tg-dm" or "AGENT:MAIN:TG-DM", which reach the same
// conversation (found by a new-user trial against OpenClaw 2026.9.6).

// sessionKeyTools are the tools whose session_key the Gateway resolves
// (sessions.describe, sessions.get, chat.message.get, send): their key is
// sent in its canonical form. events_poll and events_wait are not among
// them: their session_key filters the bridge's own queue by exact match
// with the Gateway's (already canonical) event keys, as in OpenClaw, so a
// key in another form matches nothing rather than something else.
var sessionKeyTools = map[string]bool{
	ToolConversationGet: true, ToolMessagesRead: true, ToolAttachmentsFetch: true, ToolMessagesSend: true,
}

// canonicalizeArgs replaces the routing arguments of a call to tool with
// the values the Gateway and OpenClaw's channel bridge use:
//   - session_key (see sessionKeyTools): [canonicalSessionKey];
//   - channel of conversations_list: trimmed and lowercased, as OpenClaw's
//     filter normalizes it (src/mcp/channel-bridge.ts listConversations,
//     normalizeOptionalLowercaseString); one that is empty after trimming
//     is dropped, which is what OpenClaw does (no filter);
//   - id of permissions_respond: trimmed, as OpenClaw's channel bridge
//     normalizes an approval id before it resolves it (normalizeApprovalId).
func canonicalizeArgs(tool string, a *args) {
	switch {
	case sessionKeyTools[tool]:
		if s, ok := a.str("session_key"); ok {
			a.values["session_key"] = jsonw.AppendString(nil, canonicalSessionKey(s))
		}
	case tool == ToolPermissionsRespond:
		if s, ok := a.str("id"); ok {
			a.values["id"] = jsonw.AppendString(nil, normalizeApprovalID(s))
		}
	case tool == ToolConversationsList:
		if s, ok := a.str("channel"); ok {
			if c := jsLower(jsTrim(s)); c != "" {
				a.values["channel"] = jsonw.AppendString(nil, c)
			} else {
				a.remove("channel")
			}
		}
	}
}

// remove drops a known argument.
func (a *args) remove(k string) {
	delete(a.values, k)
	for i, key := range a.keys {
		if key == k {
			a.keys = append(a.keys[:i:i], a.keys[i+1:]...)
			return
		}
	}
}

// Patterns of OpenClaw's case-preserving peer ids, matched against the
// ASCII-folded key (JavaScript's /i without the u flag folds ASCII only).
var (
	signalGroupRE = regexp.MustCompile(`(^|:)signal:group:([^:]+)`)
	matrixRoomRE  = regexp.MustCompile(`^(?:(?:agent:[^:]*:)+:*)?matrix:(?:channel|group):`)
)

// canonicalSessionKey is OpenClaw's session key canonicalization,
// normalizeSessionKeyPreservingOpaquePeerIds (OpenClaw
// packages/session-url-contract/src/session-key-normalization.ts, earlier
// src/sessions/session-key-utils.ts), which the Gateway applies to every
// key it resolves (parseAgentSessionKey, the session store lookups): the
// key is trimmed and lowercased, except the case-sensitive opaque peer
// ids OpenClaw preserves, a Signal group id (the segment after
// "signal:group:", trimmed) and a Matrix room (the tail after
// "[agent:<id>:]matrix:channel:" or "…:group:", with a ":thread:" marker
// in it lowercased). The pieces between preserved spans are trimmed and
// lowercased one by one, as in OpenClaw. "" means blank.
//
// Differences from JavaScript that remain: a final capital sigma becomes
// σ, not ς, and offsets are bytes where JavaScript counts UTF-16 units,
// which can only move a ":thread:" marker behind leading blanks of a
// Matrix tail. The bridge sends the Gateway this canonical form (which the
// Gateway's own normalization leaves as is), so the policy and the Gateway
// still see the same key.
func canonicalSessionKey(key string) string {
	raw := jsTrim(key)
	if raw == "" {
		return ""
	}
	folded := asciiLower(raw)
	if !strings.Contains(folded, "signal:") && !strings.Contains(folded, "matrix:") {
		return jsLower(raw)
	}
	type span struct {
		start, end int
		trim       bool
	}
	var spans []span
	for _, m := range signalGroupRE.FindAllStringSubmatchIndex(folded, -1) {
		spans = append(spans, span{m[4], m[5], true})
	}
	if m := matrixRoomRE.FindStringIndex(folded); m != nil && m[1] < len(raw) {
		tail := m[1]
		if i := strings.LastIndex(folded[tail:], ":thread:"); i < 0 {
			spans = append(spans, span{tail, len(raw), false})
		} else {
			spans = append(spans, span{tail, tail + i, false})
			if id := tail + i + len(":thread:"); id < len(raw) {
				spans = append(spans, span{id, len(raw), false})
			}
		}
	}
	slices.SortStableFunc(spans, func(x, y span) int { return x.start - y.start })
	var sb strings.Builder
	cursor := 0
	for _, s := range spans {
		if s.end <= s.start || s.start < cursor {
			continue
		}
		sb.WriteString(jsLower(jsTrim(raw[cursor:s.start])))
		if s.trim {
			sb.WriteString(jsTrim(raw[s.start:s.end]))
		} else {
			sb.WriteString(raw[s.start:s.end])
		}
		cursor = s.end
	}
	sb.WriteString(jsLower(jsTrim(raw[cursor:])))
	return sb.String()
}

// jsTrim is JavaScript's String.prototype.trim: it removes leading and
// trailing WhiteSpace and LineTerminator code points (ECMA-262: TAB, VT,
// FF, SP, NBSP, ZWNBSP U+FEFF, category Zs, LF, CR, U+2028, U+2029). It
// differs from strings.TrimSpace, which keeps U+FEFF and removes U+0085.
func jsTrim(s string) string { return strings.TrimFunc(s, jsSpace) }

func jsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0xFEFF, 0x2028, 0x2029:
		return true
	}
	return r > 0xFF && unicode.Is(unicode.Zs, r)
}

// jsLower is JavaScript's String.prototype.toLowerCase as far as Go's
// Unicode tables allow: per code point, with U+0130 (İ) becoming "i̇" as
// in SpecialCasing.txt.
func jsLower(s string) string {
	if !strings.ContainsRune(s, 0x130) {
		return strings.ToLower(s)
	}
	return strings.ToLower(strings.ReplaceAll(s, "\u0130", "i\u0307"))
}

// asciiLower lowercases ASCII letters only, keeping every byte offset.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
