package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/titanous/json5"
)

// ReservedServerName is the one server name OpenClaw refuses: it would
// reach a JavaScript object's prototype (docs/protocol-facts.md, mcp.servers config file).
const ReservedServerName = "__proto__"

// Backups is how many rotating backups a write keeps: openclaw.json.bak and
// openclaw.json.bak.1 to .bak.(Backups-1), as OpenClaw does (docs/protocol-facts.md, mcp.servers config file).
const Backups = 5

// ErrInvalidConfig is wrapped by [LoadDocument] and [ParseDocument] errors
// when the file on disk does not parse or its top level is not an object.
// OpenClaw's CLI then says "Config file is invalid; fix it before using MCP
// config commands."
var ErrInvalidConfig = errors.New("config: invalid config file")

// ErrEmptyServerName is returned for a server name that is empty after
// trimming (OpenClaw: "MCP server name is required.").
var ErrEmptyServerName = errors.New("config: MCP server name is empty")

// ConfigError says why a config file or a change to it is not acceptable.
// Path is the dotted path of the culprit ("mcp.servers.docs.url"), empty for
// a file that does not parse; Issue is the message OpenClaw's schema gives.
type ConfigError struct {
	Path  string
	Issue string
}

// Error reads `<path>: <issue>`, or the issue alone when Path is empty.
func (e *ConfigError) Error() string {
	if e.Path == "" {
		return e.Issue
	}
	return e.Path + ": " + e.Issue
}

// Document is the whole of openclaw.json as read from disk, every key kept
// in its order (see [Object]), so that a change to mcp.servers writes the
// rest back untouched. It is not safe for concurrent use.
type Document struct {
	// Path is the file the document was read from and is written to.
	Path string
	// Root is the top-level object. Keys this package does not own are
	// never changed.
	Root *Object

	// base is the file content the document was read from, baseExists
	// whether there was a file; Save checks both again so that a
	// concurrent writer is not overwritten.
	base       []byte
	baseExists bool
}

// ErrConfigChanged is returned by [Document.Save] when the file changed on
// disk after it was read (another `openclaw mcp set`, an editor, OpenClaw
// itself); nothing is written, and the command can be run again.
var ErrConfigChanged = errors.New("config: the file changed since it was read")

// LoadDocument reads the config file at path (JSON5). A missing or empty
// file is an empty document. A file that does not parse, or whose top level
// is not an object, is an error wrapping [ErrInvalidConfig] that names the
// path and the position.
func LoadDocument(path string) (*Document, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &Document{Path: path, Root: NewObject()}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("config: reading %s: %w", path, err)
	}
	d, err := ParseDocument(path, data)
	if err != nil {
		return nil, err
	}
	d.base, d.baseExists = data, true
	return d, nil
}

// ParseDocument parses config data; path is recorded and used in errors.
// The data must also be accepted by the JSON5 decoder [Load] uses, so that
// both readers agree on what a valid file is.
func ParseDocument(path string, data []byte) (*Document, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return &Document{Path: path, Root: NewObject()}, nil
	}
	v, err := ParseOrdered(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not valid JSON5: %v", ErrInvalidConfig, path, err)
	}
	var probe any
	if err := json5.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%w: %s is not valid JSON5: %v", ErrInvalidConfig, path, err)
	}
	root, ok := v.(*Object)
	if !ok {
		return nil, fmt.Errorf("%w: %s: the top level is not an object", ErrInvalidConfig, path)
	}
	return &Document{Path: path, Root: root}, nil
}

// mcpSection returns the "mcp" object, or nil when absent or not an object.
func (d *Document) mcpSection() *Object {
	v, _ := d.Root.Get("mcp")
	o, _ := v.(*Object)
	return o
}

// Servers returns mcp.servers as OpenClaw reads it: the entries whose value
// is an object, in file order. It never returns nil. The entries are the
// document's own: changing them changes the document.
func (d *Document) Servers() *Object {
	out := NewObject()
	m := d.mcpSection()
	if m == nil {
		return out
	}
	v, _ := m.Get("servers")
	s, ok := v.(*Object)
	if !ok {
		return out
	}
	for _, k := range s.keys {
		if e, ok := s.vals[k].(*Object); ok {
			out.Set(k, e)
		}
	}
	return out
}

// Server returns the entry called name.
func (d *Document) Server(name string) (*Object, bool) {
	v, ok := d.Servers().Get(name)
	if !ok {
		return nil, false
	}
	return v.(*Object), true
}

// Check validates the document's mcp section against OpenClaw's schema
// (docs/protocol-facts.md, mcp.servers entry schema) and returns the first issue as a [*ConfigError], or nil.
func (d *Document) Check() error {
	if issues := ValidateMCP(d.Root); len(issues) > 0 {
		return issues[0]
	}
	return nil
}

// SetServer normalizes entry as `openclaw mcp set` does (docs/protocol-facts.md, mcp set normalization, see
// [NormalizeServer]), stores it under the trimmed name (in place if the
// name exists, last otherwise) and validates the result. On a validation
// failure the document is left unchanged and the error is a
// [*ConfigError]. entry is taken over by the document.
func (d *Document) SetServer(name string, entry *Object) error {
	name = strings.TrimSpace(name)
	if name == "" {
		return ErrEmptyServerName
	}
	next := d.Root.Clone()
	NormalizeServer(entry)
	servers := ensureServers(next)
	servers.Set(name, entry)
	if issues := ValidateMCP(next); len(issues) > 0 {
		return issues[0]
	}
	d.Root = next
	return nil
}

// UnsetServer removes the entry called name (trimmed). It reports false,
// and changes nothing, when there is no such entry. Removing the last entry
// removes mcp.servers, and mcp itself when nothing else is left in it.
func (d *Document) UnsetServer(name string) (bool, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return false, ErrEmptyServerName
	}
	if _, ok := d.Server(name); !ok {
		return false, nil
	}
	next := d.Root.Clone()
	m, _ := next.vals["mcp"].(*Object)
	s, _ := m.vals["servers"].(*Object)
	s.Delete(name)
	dropNonObjects(s)
	if s.Len() == 0 {
		m.Delete("servers")
		if m.Len() == 0 {
			next.Delete("mcp")
		}
	}
	if issues := ValidateMCP(next); len(issues) > 0 {
		return false, issues[0]
	}
	d.Root = next
	return true, nil
}

// ensureServers returns root.mcp.servers, creating the objects it needs and
// dropping entries that are not objects (OpenClaw rebuilds the map from its
// normalized view on every write).
func ensureServers(root *Object) *Object {
	m, ok := root.vals["mcp"].(*Object)
	if !ok {
		m = NewObject()
		root.Set("mcp", m)
	}
	s, ok := m.vals["servers"].(*Object)
	if !ok {
		s = NewObject()
		m.Set("servers", s)
	}
	dropNonObjects(s)
	return s
}

func dropNonObjects(s *Object) {
	for _, k := range append([]string(nil), s.keys...) {
		if _, ok := s.vals[k].(*Object); !ok {
			s.Delete(k)
		}
	}
}

// NormalizeServer rewrites one mcp.servers entry in place the way
// `openclaw mcp set` does before validation (docs/protocol-facts.md, mcp set normalization):
//   - a known "type" (http, streamable-http, sse, stdio; any case) is
//     removed, and, when "transport" is not already a string, http and
//     streamable-http become transport "streamable-http" and sse becomes
//     transport "sse"; unknown types stay;
//   - "workingDirectory" becomes "cwd" unless cwd is already a string, and
//     is removed;
//   - the snake-case aliases supports_parallel_tool_calls, ssl_verify,
//     client_cert, client_key and codex.default_tools_approval_mode become
//     their camelCase keys unless those are set, and are removed.
//
// New keys go at the end of the object, as in JavaScript.
func NormalizeServer(e *Object) {
	if t, ok := e.Get("type"); ok {
		if ts, ok := t.(string); ok {
			lt := strings.ToLower(ts)
			switch lt {
			case "http", "streamable-http", "sse", "stdio":
				tr, _ := e.Get("transport")
				if _, isStr := tr.(string); !isStr {
					switch lt {
					case "http", "streamable-http":
						e.Set("transport", "streamable-http")
					case "sse":
						e.Set("transport", "sse")
					}
				}
				e.Delete("type")
			}
		}
	}
	if wd, ok := e.Get("workingDirectory"); ok {
		cwd, _ := e.Get("cwd")
		if _, isStr := cwd.(string); !isStr {
			if s, ok := wd.(string); ok {
				e.Set("cwd", s)
			}
		}
		e.Delete("workingDirectory")
	}
	moveAlias(e, "supports_parallel_tool_calls", "supportsParallelToolCalls")
	moveAlias(e, "ssl_verify", "sslVerify")
	moveAlias(e, "client_cert", "clientCert")
	moveAlias(e, "client_key", "clientKey")
	if c, ok := e.Get("codex"); ok {
		if co, ok := c.(*Object); ok {
			moveAlias(co, "default_tools_approval_mode", "defaultToolsApprovalMode")
		}
	}
}

func moveAlias(e *Object, from, to string) {
	v, ok := e.Get(from)
	if !ok {
		return
	}
	if !e.Has(to) {
		e.Set(to, v)
	}
	e.Delete(from)
}

// Save writes the document the way OpenClaw does (docs/protocol-facts.md, mcp.servers config file): JSON.stringify
// with a 2-space indent and a final newline, file mode 0600, atomically (a
// temporary file in the same folder, synced, then renamed over the old
// one). Before the write the previous file is kept as openclaw.json.bak,
// the older backups shifting to .bak.1 … .bak.4 (the oldest dropped). After
// it, openclaw.json.last-good holds a copy of what was written, which is
// always a config that passed validation. The folder is created (0700)
// when missing.
//
// Like OpenClaw's write with a base hash, Save refuses to overwrite a file
// that changed since [LoadDocument] read it, with [ErrConfigChanged].
func (d *Document) Save() error {
	data := append(MarshalIndent(d.Root), '\n')
	cur, err := os.ReadFile(d.Path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if d.baseExists {
			return fmt.Errorf("%w: %s was removed", ErrConfigChanged, d.Path)
		}
	case err != nil:
		return fmt.Errorf("config: reading %s: %w", d.Path, err)
	case !d.baseExists || !bytes.Equal(cur, d.base):
		return fmt.Errorf("%w: %s; run the command again", ErrConfigChanged, d.Path)
	}
	dir := filepath.Dir(d.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("config: creating %s: %w", dir, err)
	}
	if err := rotateBackups(d.Path); err != nil {
		return err
	}
	if err := writeAtomic(d.Path, data); err != nil {
		return err
	}
	d.base, d.baseExists = data, true
	return writeAtomic(d.Path+".last-good", data)
}

// BackupPath returns the path of backup i: openclaw.json.bak for 0,
// openclaw.json.bak.<i> otherwise.
func BackupPath(path string, i int) string {
	if i == 0 {
		return path + ".bak"
	}
	return fmt.Sprintf("%s.bak.%d", path, i)
}

func rotateBackups(path string) error {
	cur, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("config: reading %s for its backup: %w", path, err)
	}
	for i := Backups - 2; i >= 0; i-- {
		from, to := BackupPath(path, i), BackupPath(path, i+1)
		if err := os.Rename(from, to); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("config: rotating backup %s: %w", from, err)
		}
	}
	return writeAtomic(BackupPath(path, 0), cur)
}

func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("config: writing %s: %w", path, err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("config: writing %s: %w", path, err)
	}
	if err := f.Chmod(0o600); err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("config: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("config: writing %s: %w", path, err)
	}
	return nil
}
