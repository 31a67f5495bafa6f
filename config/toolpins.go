package config

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/openclaw-go/openclaw/internal/jsonw"
)

// ToolPins is the content of a pins file (docs/tool-pins.md): the tool
// definitions a user trusted (`openclaw mcp trust`), by raw server name and
// the server's own tool name, never by exposed name, so that a rename by
// the sanitizer or a reload does not move a pin to another tool. A server
// absent from Servers has no pins: its tools are not checked.
//
// The file is JSON, read strictly by [ParseToolPins]:
//
//	{
//	  "version": 1,
//	  "servers": {
//	    "docs": {
//	      "search": {
//	        "digest": "sha256:9f2c…",
//	        "trusted_at": "2026-12-02T00:40:00Z",
//	        "definition": {"description": "Search the docs.", "inputSchema": {…}, "name": "search"}
//	      }
//	    }
//	  }
//	}
type ToolPins struct {
	// Servers maps a raw server name to its pins by upstream tool name. A
	// server with an empty map is pinned with no tools: every tool it
	// lists is new.
	Servers map[string]map[string]ToolPin
}

// ToolPin is one trusted tool definition.
type ToolPin struct {
	// Digest is [ToolDigest] of Definition: "sha256:" and 64 lowercase hex
	// digits.
	Digest string
	// TrustedAt is when it was trusted (UTC, to the second); zero when the
	// file does not say.
	TrustedAt time.Time
	// Definition is the trusted definition in its canonical encoding
	// ([ToolDefinition.Canonical]), for `openclaw mcp tools --diff`.
	Definition json.RawMessage
}

// ToolDefinition is the part of an MCP tool definition a pin covers: what a
// model or a user reads of the tool (its name, title, description,
// annotations) and what shapes its calls and results (the input and output
// schemas). _meta and icons are not covered. Schemas and annotations are
// JSON text; nil or JSON null means absent.
type ToolDefinition struct {
	Name, Title, Description  string
	InputSchema, OutputSchema json.RawMessage
	Annotations               json.RawMessage
}

// Canonical returns the canonical encoding of d that its digest is taken
// over: the JSON object of its members
// {"annotations", "description", "inputSchema", "name", "outputSchema",
// "title"} (in that order, the order of RFC 8785), an empty string, an
// absent or null schema and absent annotations left out, every value in
// RFC 8785 form ([jsonw.AppendCanonical]). It fails when a schema or the
// annotations are not one JSON value.
func (d *ToolDefinition) Canonical() ([]byte, error) {
	var c jsonw.Canonicalizer
	return d.AppendCanonical(make([]byte, 0, 64+len(d.Description)+len(d.InputSchema)+len(d.OutputSchema)+len(d.Annotations)), &c)
}

// AppendCanonical appends [ToolDefinition.Canonical] to dst, with c's
// buffers (for the definitions of a catalog in a row).
func (d *ToolDefinition) AppendCanonical(dst []byte, c *jsonw.Canonicalizer) ([]byte, error) {
	n := len(dst)
	dst = append(dst, '{')
	sep := false
	member := func(key string) {
		if sep {
			dst = append(dst, ',')
		}
		sep = true
		dst = append(dst, '"')
		dst = append(dst, key...)
		dst = append(dst, '"', ':')
	}
	raw := func(key string, v json.RawMessage) error {
		if absentJSON(v) {
			return nil
		}
		member(key)
		var err error
		if dst, err = c.Append(dst, v); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		return nil
	}
	str := func(key, v string) {
		if v != "" {
			member(key)
			dst = jsonw.AppendString(dst, v)
		}
	}
	if err := raw("annotations", d.Annotations); err != nil {
		return dst[:n], err
	}
	str("description", d.Description)
	if err := raw("inputSchema", d.InputSchema); err != nil {
		return dst[:n], err
	}
	member("name")
	dst = jsonw.AppendString(dst, d.Name)
	if err := raw("outputSchema", d.OutputSchema); err != nil {
		return dst[:n], err
	}
	str("title", d.Title)
	return append(dst, '}'), nil
}

// absentJSON reports whether v is empty or JSON null.
func absentJSON(v json.RawMessage) bool {
	t := bytes.TrimSpace(v)
	return len(t) == 0 || string(t) == "null"
}

// DigestPrefix starts every tool digest.
const DigestPrefix = "sha256:"

// ToolDigest returns the digest of a canonical definition: "sha256:" and the
// lowercase hex SHA-256 of its bytes.
func ToolDigest(canonical []byte) string {
	return FormatToolDigest(sha256.Sum256(canonical))
}

// FormatToolDigest returns the digest whose SHA-256 is sum: "sha256:" and
// 64 lowercase hex digits, as [ToolDigest] writes it.
func FormatToolDigest(sum [sha256.Size]byte) string {
	var b [len(DigestPrefix) + 2*sha256.Size]byte
	copy(b[:], DigestPrefix)
	hex.Encode(b[len(DigestPrefix):], sum[:])
	return string(b[:])
}

// ParseToolDigest returns the SHA-256 a digest in [ToolDigest]'s form
// names; ok is false when digest is not "sha256:" and 64 lowercase hex
// digits.
func ParseToolDigest(digest string) (sum [sha256.Size]byte, ok bool) {
	if !validDigest(digest) {
		return sum, false
	}
	_, err := hex.Decode(sum[:], []byte(digest[len(DigestPrefix):]))
	return sum, err == nil
}

// PinMode says what the runtime does with a tool whose listed definition
// differs from its pin, or that a pinned server lists without a pin.
type PinMode string

// The pin modes.
const (
	// PinBlock hides the tool from the catalog and refuses its calls until
	// it is trusted again: its new text never reaches a model. The default.
	PinBlock PinMode = "block"
	// PinWarn lists the tool and logs a warning.
	PinWarn PinMode = "warn"
	// PinAudit lists the tool and writes an audit record only.
	PinAudit PinMode = "audit"
)

// ParsePinMode returns the mode named s; "" is PinBlock.
func ParsePinMode(s string) (PinMode, error) {
	switch m := PinMode(s); m {
	case "":
		return PinBlock, nil
	case PinBlock, PinWarn, PinAudit:
		return m, nil
	}
	return "", fmt.Errorf("tool pins mode %q is not block, warn or audit", s)
}

// ToolPinsFile is the default pins file's name, in the folder of
// openclaw.json.
const ToolPinsFile = "tool-pins.json"

// DefaultToolPinsPath returns the pins file beside the config file
// configPath.
func DefaultToolPinsPath(configPath string) string {
	return filepath.Join(filepath.Dir(configPath), ToolPinsFile)
}

// MaxToolPinsBytes bounds the pins file LoadToolPins reads (64 MiB: a
// catalog of 50 servers of 100 tools with their definitions is a few MiB).
const MaxToolPinsBytes = 64 << 20

// LoadToolPins reads and checks the pins file at path. A file that does not
// exist is no pins: it returns nil and an error wrapping os.ErrNotExist. A
// path that is not a regular file, or a file over MaxToolPinsBytes, is
// refused naming it.
func LoadToolPins(path string) (*ToolPins, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tool pins: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("tool pins: %w", err)
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("tool pins: %s is not a regular file (%s)", path, st.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxToolPinsBytes+1))
	if err != nil {
		return nil, fmt.Errorf("tool pins: %s: %w", path, err)
	}
	if len(data) > MaxToolPinsBytes {
		return nil, fmt.Errorf("tool pins: %s is larger than %d MiB", path, MaxToolPinsBytes>>20)
	}
	return ParseToolPins(path, data)
}

// SaveToolPins writes p to path atomically (mode 0600), in
// [ToolPins.Marshal]'s form.
func SaveToolPins(path string, p *ToolPins) error {
	return writeAtomic(path, p.Marshal())
}

// UpdateToolPins changes the pins file at path under its lock ([Lock] on
// path): it reads the file as it is now (no file: no pins), lets change
// modify it, and writes it back ([SaveToolPins]) unless change fails, so
// that concurrent `openclaw mcp trust` runs for different servers keep
// each other's pins. It waits for the lock until ctx is done.
func UpdateToolPins(ctx context.Context, path string, change func(*ToolPins) error) error {
	lock, err := Lock(ctx, path)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	p, err := LoadToolPins(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		p = &ToolPins{Servers: map[string]map[string]ToolPin{}}
	case err != nil:
		return err
	}
	if err := change(p); err != nil {
		return err
	}
	return SaveToolPins(path, p)
}

// Marshal returns p as a pins file: indented JSON, servers and tools sorted
// by name (byte order), so that a file under version control changes only
// where a pin did.
func (p *ToolPins) Marshal() []byte {
	o := jsonw.NewObject(nil)
	o.Int("version", 1)
	o.Key("servers")
	so := jsonw.NewObject(o.Buf)
	for _, server := range slices.Sorted(maps.Keys(p.Servers)) {
		so.Key(server)
		to := jsonw.NewObject(so.Buf)
		tools := p.Servers[server]
		for _, tool := range slices.Sorted(maps.Keys(tools)) {
			pin := tools[tool]
			to.Key(tool)
			po := jsonw.NewObject(to.Buf)
			po.Str("digest", pin.Digest)
			if !pin.TrustedAt.IsZero() {
				po.Str("trusted_at", pin.TrustedAt.UTC().Format(time.RFC3339))
			}
			po.Raw("definition", pin.Definition)
			to.Buf = po.Close()
		}
		so.Buf = to.Close()
	}
	o.Buf = so.Close()
	return append(jsonw.Indent(o.Close()), '\n')
}

// ToolPinsError is a pins file that [ParseToolPins] refuses: its Line (from
// 1) and the Key path of the member at fault, e.g. `servers."docs"."search".digest`.
type ToolPinsError struct {
	File string
	Line int
	Key  string
	Msg  string
}

// Error reads `tool pins FILE: line 7: servers."docs"."search".digest: …`.
func (e *ToolPinsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "tool pins %s: line %d", e.File, e.Line)
	if e.Key != "" {
		b.WriteString(": " + e.Key)
	}
	return b.String() + ": " + e.Msg
}

// ParseToolPins parses and checks pins file data; name is used in errors.
// It is strict, so that a hand edit or a tampered file never weakens a pin
// silently: an unknown key, a key given twice (at any level), a version
// other than 1, a digest that is not "sha256:" and 64 lowercase hex
// digits, a trusted_at that is not RFC 3339, a definition that is missing,
// has unknown members, names another tool or does not hash to its digest,
// and anything after the object are each a *ToolPinsError naming the line
// and the key.
func ParseToolPins(name string, data []byte) (*ToolPins, error) {
	p := &pinsParser{file: name, data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	p.dec.UseNumber()
	pins, err := p.file1()
	if err != nil {
		return nil, err
	}
	return pins, nil
}

// pinsParser reads a pins file token by token: encoding/json alone would
// keep the last of repeated keys and could not say on which line a fault is.
type pinsParser struct {
	file string
	data []byte
	dec  *json.Decoder
}

// line is the line (from 1) of the byte before the decoder's position.
func (p *pinsParser) line() int {
	off := int(p.dec.InputOffset())
	off = min(off, len(p.data))
	return 1 + bytes.Count(p.data[:off], []byte{'\n'})
}

func (p *pinsParser) fail(key, format string, args ...any) error {
	return &ToolPinsError{File: p.file, Line: p.line(), Key: key, Msg: fmt.Sprintf(format, args...)}
}

// token reads the next token; a syntax error names its line.
func (p *pinsParser) token(key string) (json.Token, error) {
	tok, err := p.dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, p.fail(key, "unexpected end of the file")
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, &ToolPinsError{File: p.file, Line: 1 + bytes.Count(p.data[:min(int(se.Offset), len(p.data))], []byte{'\n'}), Key: key, Msg: "invalid JSON: " + err.Error()}
		}
		return nil, p.fail(key, "invalid JSON: %v", err)
	}
	return tok, nil
}

// object reads an object's members: for each key, member is called with the
// decoder positioned at its value, which it must read. A key seen twice is
// an error naming both lines.
func (p *pinsParser) object(path string, member func(key, path string) error) error {
	tok, err := p.token(path)
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return p.fail(path, "want an object, got %s", describeToken(tok))
	}
	seen := map[string]int{}
	for p.dec.More() {
		tok, err := p.token(path)
		if err != nil {
			return err
		}
		key := tok.(string) // inside an object, Token returns the keys as strings
		sub := key
		if path != "" {
			sub = path + "." + strconv.Quote(key)
		}
		if first, dup := seen[key]; dup {
			return p.fail(sub, "given twice (first on line %d)", first)
		}
		seen[key] = p.line()
		if err := member(key, sub); err != nil {
			return err
		}
	}
	_, err = p.token(path) // the closing '}'
	return err
}

// str reads a string value.
func (p *pinsParser) str(path string) (string, error) {
	tok, err := p.token(path)
	if err != nil {
		return "", err
	}
	s, ok := tok.(string)
	if !ok {
		return "", p.fail(path, "want a string, got %s", describeToken(tok))
	}
	return s, nil
}

func describeToken(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		if v == '[' {
			return "an array"
		}
		return strconv.Quote(v.String())
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}

func (p *pinsParser) file1() (*ToolPins, error) {
	pins := &ToolPins{}
	version := false
	err := p.object("", func(key, path string) error {
		switch key {
		case "version":
			tok, err := p.token(path)
			if err != nil {
				return err
			}
			if n, ok := tok.(json.Number); !ok || n.String() != "1" {
				return p.fail(path, "want 1, got %v", tok)
			}
			version = true
			return nil
		case "servers":
			pins.Servers = map[string]map[string]ToolPin{}
			return p.object(path, func(server, path string) error {
				tools := map[string]ToolPin{}
				pins.Servers[server] = tools
				return p.object(path, func(tool, path string) error {
					pin, err := p.pin(tool, path)
					tools[tool] = pin
					return err
				})
			})
		}
		return p.fail(path, "unknown key (want version, servers)")
	})
	if err != nil {
		return nil, err
	}
	if _, err := p.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, p.fail("", "data after the object")
	}
	if !version {
		return nil, p.fail("version", "missing (want 1)")
	}
	if pins.Servers == nil {
		pins.Servers = map[string]map[string]ToolPin{}
	}
	return pins, nil
}

// pin reads one tool's pin and checks its digest against its definition.
func (p *pinsParser) pin(tool, path string) (ToolPin, error) {
	var (
		pin     ToolPin
		def     json.RawMessage
		defLine int
	)
	err := p.object(path, func(key, sub string) error {
		switch key {
		case "digest":
			s, err := p.str(sub)
			if err != nil {
				return err
			}
			if !validDigest(s) {
				return p.fail(sub, "%q is not %q and 64 lowercase hex digits", s, DigestPrefix)
			}
			pin.Digest = s
			return nil
		case "trusted_at":
			s, err := p.str(sub)
			if err != nil {
				return err
			}
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return p.fail(sub, "%q is not an RFC 3339 time", s)
			}
			pin.TrustedAt = t.UTC()
			return nil
		case "definition":
			if err := p.dec.Decode(&def); err != nil {
				return p.fail(sub, "invalid JSON: %v", err)
			}
			defLine = p.line()
			return nil
		}
		return p.fail(sub, "unknown key (want digest, trusted_at, definition)")
	})
	if err != nil {
		return pin, err
	}
	switch {
	case pin.Digest == "":
		return pin, p.fail(path, "digest is missing")
	case def == nil:
		return pin, p.fail(path, "definition is missing")
	}
	d, err := parseDefinition(def)
	if err != nil {
		return pin, &ToolPinsError{File: p.file, Line: defLine, Key: path + ".definition", Msg: err.Error()}
	}
	if d.Name != tool {
		return pin, &ToolPinsError{File: p.file, Line: defLine, Key: path + ".definition", Msg: fmt.Sprintf("names the tool %q, not %q", d.Name, tool)}
	}
	canon, err := d.Canonical()
	if err != nil {
		return pin, &ToolPinsError{File: p.file, Line: defLine, Key: path + ".definition", Msg: err.Error()}
	}
	if got := ToolDigest(canon); got != pin.Digest {
		return pin, &ToolPinsError{File: p.file, Line: defLine, Key: path + ".definition",
			Msg: fmt.Sprintf("hashes to %s, not to the pin's digest %s (edited by hand? trust the server again)", got, pin.Digest)}
	}
	pin.Definition = canon
	return pin, nil
}

// validDigest reports whether s is "sha256:" and 64 lowercase hex digits.
func validDigest(s string) bool {
	h, ok := strings.CutPrefix(s, DigestPrefix)
	if !ok || len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ParseToolDefinition reads a definition as [ToolDefinition.Canonical]
// writes it (any JSON form of it): an object with the members name
// (required), title, description, inputSchema, outputSchema and
// annotations, each at most once.
func ParseToolDefinition(raw []byte) (ToolDefinition, error) {
	return parseDefinition(raw)
}

func parseDefinition(raw []byte) (ToolDefinition, error) {
	var d ToolDefinition
	seen := map[string]bool{}
	hasName := false
	end, err := jsonw.EachMember(raw, jsonw.SkipSpace(raw, 0), jsonw.MaxDepth, func(key []byte, _, vs int) (int, error) {
		k := string(key)
		if seen[k] {
			return vs, fmt.Errorf("member %q given twice", k)
		}
		seen[k] = true
		e, err := jsonw.ScanValue(raw, vs, jsonw.MaxDepth-1)
		if err != nil {
			return e, err
		}
		v := raw[vs:e]
		var dst *string
		switch k {
		case "name":
			dst, hasName = &d.Name, true
		case "title":
			dst = &d.Title
		case "description":
			dst = &d.Description
		case "inputSchema":
			d.InputSchema = v
			return e, nil
		case "outputSchema":
			d.OutputSchema = v
			return e, nil
		case "annotations":
			d.Annotations = v
			return e, nil
		default:
			return e, fmt.Errorf("unknown member %q (want name, title, description, inputSchema, outputSchema, annotations)", k)
		}
		if err := json.Unmarshal(v, dst); err != nil || v[0] != '"' {
			return e, fmt.Errorf("member %q: want a string", k)
		}
		return e, nil
	})
	if err != nil {
		return d, err
	}
	if jsonw.SkipSpace(raw, end) != len(raw) {
		return d, errors.New("data after the definition")
	}
	if !hasName {
		return d, errors.New("member \"name\" is missing")
	}
	return d, nil
}
