package config

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/openclaw-go/openclaw/internal/jsonw"
)

// PolicyFile is openclaw-go's own policy configuration (JSON), given with
// `--policy-config FILE`. It is kept out of openclaw.json because OpenClaw
// validates that file strictly and would reject our keys.
//
//	{
//	  "audit_log": "/var/log/openclaw/policy-audit.jsonl",
//	  "modules": [
//	    {"name": "rules", "source": "builtin:rules", "mode": "enforce",
//	     "config": {"default": "allow", "rules": [{"tool": "messages_send", "decision": "block", "reason": "read-only"}]}},
//	    {"source": "/etc/openclaw/team.wasm", "sha256": "9f86d0…", "hooks": ["before_tool_call"],
//	     "mode": "audit", "timeout_ms": 50, "memory_limit_pages": 512}
//	  ]
//	}
//
// Unknown keys are rejected with their name, so a typo never silently
// weakens a policy.
type PolicyFile struct {
	// AuditLog is the decision audit log (JSON Lines); "-" means stderr;
	// empty means the default file under the state folder. A relative path
	// is resolved against the policy file's folder by [LoadPolicyFile], as
	// module sources are, so the log does not move with the current
	// directory.
	AuditLog string `json:"audit_log,omitempty"`
	// AuditFailClosed refuses every tool call (before_tool_call blocks)
	// once the audit log cannot be written; false keeps deciding and says
	// on stderr, once, that decisions are no longer recorded.
	AuditFailClosed bool `json:"audit_fail_closed,omitempty"`
	// DecisionLog ships every audit record to an HTTP endpoint as well
	// (docs/policy-file.md); nil ships nothing.
	DecisionLog *PolicyDecisionLog `json:"decision_log,omitempty"`
	// Modules run in order for before_tool_call.
	Modules []PolicyModule `json:"modules"`
	// ToolPins chooses the pins file of the imported tools and the pin
	// mode (docs/tool-pins.md); nil means the defaults (the file beside
	// openclaw.json, mode block). Flags override it.
	ToolPins *PolicyToolPins `json:"tool_pins,omitempty"`
	// RateLimits are the rate limits of tool calls, each checked for every
	// call it matches (docs/policy-file.md).
	RateLimits []PolicyRateLimit `json:"rate_limits,omitempty"`
	// Bundle, when set, makes the process run the signed policy bundle it
	// names instead of modules of this file (docs/policy-bundles.md): a
	// file with a bundle lists no modules and no rate_limits (the
	// bundle's own policy file does); its audit_log and tool_pins stay
	// the machine's.
	Bundle *PolicyBundle `json:"bundle,omitempty"`
}

// PolicyBundle is the bundle key of a policy file, what the
// --policy-bundle flags say; flags override it.
type PolicyBundle struct {
	// Ref is the bundle, oci://REGISTRY/REPOSITORY:TAG; required.
	Ref string `json:"ref"`
	// Keys are the public keys (PEM files) a bundle must be signed with,
	// any one; at least one. Relative paths are resolved against the
	// policy file's folder by [LoadPolicyFile].
	Keys []string `json:"keys"`
	// PollIntervalS is how often the tag is checked for a new digest, in
	// seconds (±10% jitter); 0 means the default (60), -1 only on SIGHUP.
	PollIntervalS int `json:"poll_interval_s,omitempty"`
	// AllowRollback accepts a digest signed with an older sequence than
	// the accepted one.
	AllowRollback bool `json:"allow_rollback,omitempty"`
	// PlainHTTP speaks HTTP (true) or HTTPS (false) to the registry; nil
	// means HTTP for a loopback registry only.
	PlainHTTP *bool `json:"plain_http,omitempty"`
}

// PolicyDecisionLog is the decision_log key of a policy file: where and how
// the audit records are shipped off the machine, in batches.
type PolicyDecisionLog struct {
	// URL is the endpoint that receives the batches (POST, a gzipped JSON
	// array of events); https, or http for a loopback host only.
	URL string `json:"url"`
	// TokenFile holds the bearer token sent with each batch; a relative
	// path is resolved against the policy file's folder. "" sends none.
	TokenFile string `json:"token_file,omitempty"`
	// CAFile is a PEM bundle of the certificate authorities the endpoint's
	// certificate must chain to, instead of the system's; relative paths
	// as TokenFile.
	CAFile string `json:"ca_file,omitempty"`
	// Labels are added to every event (OPA's labels), beside "id", this
	// process run's.
	Labels map[string]string `json:"labels,omitempty"`
	// BufferEvents bounds the events waiting to be shipped; one over it is
	// dropped and counted. 0 means 10000.
	BufferEvents int `json:"buffer_events,omitempty"`
	// BatchEvents is the most events in one POST; 0 means 500.
	BatchEvents int `json:"batch_events,omitempty"`
	// FlushIntervalMs is the longest an event waits for its batch to fill
	// before it is sent; 0 means 1000.
	FlushIntervalMs int `json:"flush_interval_ms,omitempty"`
}

// Token reads the bearer token of TokenFile: "" when none is configured,
// an error naming the file when it cannot be read, is empty, or holds a
// character no HTTP header value carries (a second line, a control
// character): every batch would fail.
func (d *PolicyDecisionLog) Token() (string, error) {
	if d.TokenFile == "" {
		return "", nil
	}
	tok, err := ReadSecretFile(d.TokenFile, "decision_log.token_file")
	if err != nil {
		return "", err
	}
	for _, c := range []byte(tok) {
		if c < ' ' || c == 0x7f {
			return "", fmt.Errorf("decision_log.token_file: %s: the token holds a line break or control character (0x%02x); the file must hold the token alone", d.TokenFile, c)
		}
	}
	return tok, nil
}

// validate checks d's URL and bounds.
func (d *PolicyDecisionLog) validate() error {
	u, err := url.Parse(d.URL)
	switch {
	case d.URL == "":
		return errors.New("decision_log: url is required")
	case err != nil:
		return fmt.Errorf("decision_log: url: %w", err)
	case u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return fmt.Errorf("decision_log: url %q: want an https:// URL", d.URL)
	case u.Scheme == "http" && !IsLoopbackHost(u.Hostname()):
		return fmt.Errorf("decision_log: url %q: http is allowed only to a loopback host (the token and the decisions would cross the network in clear); use https", d.URL)
	case d.BufferEvents < 0 || d.BatchEvents < 0 || d.FlushIntervalMs < 0:
		return errors.New("decision_log: buffer_events, batch_events and flush_interval_ms must be ≥ 0")
	}
	return nil
}

// IsLoopbackHost reports whether host (an IP, possibly bracketed, or a
// name) is loopback: 127.0.0.0/8, ::1 or "localhost".
func IsLoopbackHost(host string) bool {
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// PolicyRateLimit is one entry of a policy file's rate_limits: the calls it
// matches (Tool and Server), how its counters are split (Per) and its
// bounds (Requests per IntervalS seconds, Concurrent calls in progress).
type PolicyRateLimit struct {
	// Name identifies the limit in refusals and audit records; required,
	// unique, of letters, digits, '.', '_' and '-'.
	Name string `json:"name"`
	// Tool is a pattern (OpenClaw's `*`-only glob) on the exposed tool
	// name; "" means "*".
	Tool string `json:"tool,omitempty"`
	// Server is a pattern on the raw server name ("" for the bridge's own
	// tools, which "*" matches); "" means "*".
	Server string `json:"server,omitempty"`
	// Per lists what gets a counter of its own, among [RateLimitPer]:
	// "identity" (the authenticated subject, else the requester key),
	// "server" and "tool", or "all" alone: one counter shared by every
	// call the limit matches. Empty means ["identity"].
	Per []string `json:"per,omitempty"`
	// Requests is the number of calls admitted per window of IntervalS
	// seconds (a fixed window starting at the counter's first call); 0
	// means no such bound.
	Requests int64 `json:"requests,omitempty"`
	// IntervalS is the window of Requests, in seconds (1 to 31536000);
	// required with Requests, refused without it.
	IntervalS int64 `json:"interval_s,omitempty"`
	// Concurrent is the number of calls in progress at once; 0 means no
	// such bound.
	Concurrent int64 `json:"concurrent,omitempty"`
}

// RateLimitPer are the values of PolicyRateLimit.Per.
var RateLimitPer = []string{"identity", "server", "tool", "all"}

// MaxRateLimitInterval is the largest interval_s (one year of seconds).
const MaxRateLimitInterval = 365 * 24 * 3600

// PolicyToolPins is the tool_pins key of a policy file.
type PolicyToolPins struct {
	// File is the pins file; a relative path is resolved against the policy
	// file's folder by [LoadPolicyFile]. "" means [DefaultToolPinsPath].
	File string `json:"file,omitempty"`
	// Mode is "block" (the default), "warn" or "audit" ([PinMode]).
	Mode string `json:"mode,omitempty"`
}

// PolicyModule configures one policy module.
type PolicyModule struct {
	// Name identifies the module in reasons and audit records; defaults to
	// the builtin name or the file's base name without extension.
	Name string `json:"name,omitempty"`
	// Source is "builtin:NAME" or a path to a .wasm file (relative paths are
	// resolved against the policy file's folder).
	Source string `json:"source"`
	// SHA256, when set, pins the module's bytes (lowercase hex).
	SHA256 string `json:"sha256,omitempty"`
	// Config is passed to the module's configure export; absent means the
	// module's default (for builtin:rules, the allow-all ruleset).
	Config json.RawMessage `json:"config,omitempty"`
	// Mode is "enforce" (default) or "audit".
	Mode string `json:"mode,omitempty"`
	// Hooks lists the hook points the module serves, a subset of
	// before_tool_call, sanitize_tool_names and decide_approval (the
	// policy ABI's export names, docs/policy-abi.md). Empty means every
	// hook the module exports; a listed hook the module does not export
	// refuses the module at load.
	Hooks []string `json:"hooks,omitempty"`
	// TimeoutMs is the per-call deadline; 0 means the host default (100 ms).
	TimeoutMs int `json:"timeout_ms,omitempty"`
	// MemoryLimitPages caps linear memory in 64 KiB pages; 0 means the host
	// default (256 pages, 16 MiB).
	MemoryLimitPages int `json:"memory_limit_pages,omitempty"`
}

// HookNames are the hook points a module may serve, in the order of the
// policy ABI (docs/policy-abi.md); they mirror policies.Hook, which this
// leaf package does not import.
var HookNames = []string{"before_tool_call", "sanitize_tool_names", "decide_approval"}

// BuiltinPrefix marks a module embedded in the binary.
const BuiltinPrefix = "builtin:"

// LoadPolicyFile reads and validates a policy file. Relative paths in it,
// the module sources that are not builtin and audit_log unless it is "-",
// are resolved against the folder of path.
func LoadPolicyFile(path string) (*PolicyFile, error) {
	return LoadPolicyFileSHA256(path, "")
}

// LoadPolicyFileSHA256 is [LoadPolicyFile] for a file whose bytes must
// have the sha256 digest sum (64 hex digits; "" checks nothing): the bytes
// read are hashed and parsed, so a file rewritten after it was verified is
// refused, naming both digests.
func LoadPolicyFileSHA256(path, sum string) (*PolicyFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy config: %w", err)
	}
	if sum != "" {
		if got := sha256.Sum256(data); !strings.EqualFold(hex.EncodeToString(got[:]), sum) {
			return nil, fmt.Errorf("policy config %s: sha256 pin mismatch: the file has %x, pinned %s", path, got, sum)
		}
	}
	pf, err := ParsePolicyFile(path, data)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	if pf.AuditLog != "" && pf.AuditLog != "-" && !filepath.IsAbs(pf.AuditLog) {
		pf.AuditLog = filepath.Join(dir, pf.AuditLog)
	}
	if tp := pf.ToolPins; tp != nil && tp.File != "" && !filepath.IsAbs(tp.File) {
		tp.File = filepath.Join(dir, tp.File)
	}
	if dl := pf.DecisionLog; dl != nil {
		for _, p := range []*string{&dl.TokenFile, &dl.CAFile} {
			if *p != "" && !filepath.IsAbs(*p) {
				*p = filepath.Join(dir, *p)
			}
		}
	}
	if b := pf.Bundle; b != nil {
		for i, k := range b.Keys {
			if !filepath.IsAbs(k) {
				b.Keys[i] = filepath.Join(dir, k)
			}
		}
	}
	for i := range pf.Modules {
		m := &pf.Modules[i]
		if !strings.HasPrefix(m.Source, BuiltinPrefix) && !filepath.IsAbs(m.Source) {
			m.Source = filepath.Join(dir, m.Source)
		}
	}
	return pf, nil
}

// ParsePolicyFile parses and validates policy file data; name is used in
// errors, which name the offending module and key.
func ParsePolicyFile(name string, data []byte) (*PolicyFile, error) {
	if key, dup, err := jsonw.DuplicateKey(data); err == nil && dup {
		return nil, fmt.Errorf("policy config %s: %s is given twice (JSON would keep the last one)", name, key)
	}
	var pf PolicyFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pf); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("policy config %s: %s", name, describeTypeError(data, te))
		}
		return nil, fmt.Errorf("policy config %s: %w", name, err)
	}
	if pf.ToolPins != nil {
		if _, err := ParsePinMode(pf.ToolPins.Mode); err != nil {
			return nil, fmt.Errorf("policy config %s: tool_pins: %w", name, err)
		}
	}
	if pf.DecisionLog != nil {
		if err := pf.DecisionLog.validate(); err != nil {
			return nil, fmt.Errorf("policy config %s: %w", name, err)
		}
	}
	if err := ValidateRateLimits(pf.RateLimits); err != nil {
		return nil, fmt.Errorf("policy config %s: %w", name, err)
	}
	if b := pf.Bundle; b != nil {
		switch {
		case !strings.HasPrefix(b.Ref, "oci://"):
			return nil, fmt.Errorf("policy config %s: bundle.ref %q must be oci://REGISTRY/REPOSITORY:TAG", name, b.Ref)
		case len(b.Keys) == 0:
			return nil, fmt.Errorf("policy config %s: bundle.keys: at least one public key is required", name)
		case b.PollIntervalS < -1:
			return nil, fmt.Errorf("policy config %s: bundle.poll_interval_s %d: want -1 (SIGHUP only), 0 (default) or seconds", name, b.PollIntervalS)
		case len(pf.Modules) > 0 || len(pf.RateLimits) > 0:
			return nil, fmt.Errorf("policy config %s: bundle: a file that names a bundle lists no modules or rate_limits (the bundle's policy file does)", name)
		}
	}
	seen := map[string]bool{}
	for i := range pf.Modules {
		m := &pf.Modules[i]
		where := fmt.Sprintf("policy config %s: modules[%d]", name, i)
		if m.Source == "" {
			return nil, fmt.Errorf("%s: source is required (builtin:NAME or a .wasm path)", where)
		}
		if m.Name == "" {
			m.Name = DefaultModuleName(m.Source)
		}
		if seen[m.Name] {
			return nil, fmt.Errorf("%s: duplicate module name %q", where, m.Name)
		}
		seen[m.Name] = true
		switch m.Mode {
		case "", "enforce", "audit":
		default:
			return nil, fmt.Errorf("%s (%s): mode %q is not enforce or audit", where, m.Name, m.Mode)
		}
		if m.TimeoutMs < 0 || m.MemoryLimitPages < 0 || m.MemoryLimitPages > 65536 {
			return nil, fmt.Errorf("%s (%s): timeout_ms and memory_limit_pages must be ≥ 0 (pages ≤ 65536)", where, m.Name)
		}
		if m.SHA256 != "" && !isHex64(m.SHA256) {
			return nil, fmt.Errorf("%s (%s): sha256 must be 64 hex digits, got %q", where, m.Name, m.SHA256)
		}
		hooks := map[string]bool{}
		for _, h := range m.Hooks {
			if !slices.Contains(HookNames, h) {
				return nil, fmt.Errorf("%s (%s): unknown hook %q (want %s)", where, m.Name, h, strings.Join(HookNames, ", "))
			}
			if hooks[h] {
				return nil, fmt.Errorf("%s (%s): hook %q listed twice", where, m.Name, h)
			}
			hooks[h] = true
		}
	}
	return &pf, nil
}

// ValidateRateLimits refuses a rate_limits list that would not limit what
// it says (a missing or duplicate name, an unknown per value, a bound
// below zero, requests without interval_s...), naming the entry and the
// key; [ParsePolicyFile] calls it.
func ValidateRateLimits(ls []PolicyRateLimit) error {
	names := map[string]bool{}
	for i := range ls {
		l := &ls[i]
		where := fmt.Sprintf("rate_limits[%d]", i)
		if l.Name == "" {
			return fmt.Errorf("%s: name is required", where)
		}
		if strings.IndexFunc(l.Name, func(r rune) bool {
			return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-')
		}) >= 0 {
			return fmt.Errorf("%s: name %q may hold only letters, digits, '.', '_' and '-'", where, l.Name)
		}
		where += " (" + l.Name + ")"
		if names[l.Name] {
			return fmt.Errorf("%s: duplicate limit name", where)
		}
		names[l.Name] = true
		per := map[string]bool{}
		for _, p := range l.Per {
			if !slices.Contains(RateLimitPer, p) {
				return fmt.Errorf("%s: per: unknown value %q (want %s)", where, p, strings.Join(RateLimitPer, ", "))
			}
			if per[p] {
				return fmt.Errorf("%s: per: %q listed twice", where, p)
			}
			per[p] = true
		}
		if per["all"] && len(per) > 1 {
			return fmt.Errorf("%s: per: \"all\" (one shared counter) cannot be combined with another value", where)
		}
		switch {
		case l.Requests < 0 || l.Concurrent < 0 || l.IntervalS < 0:
			return fmt.Errorf("%s: requests, interval_s and concurrent must be ≥ 0", where)
		case l.Requests == 0 && l.Concurrent == 0:
			return fmt.Errorf("%s: limits nothing: set requests (with interval_s) or concurrent", where)
		case l.Requests > 0 && l.IntervalS == 0:
			return fmt.Errorf("%s: requests needs interval_s, the window in seconds", where)
		case l.Requests == 0 && l.IntervalS > 0:
			return fmt.Errorf("%s: interval_s without requests", where)
		case l.IntervalS > MaxRateLimitInterval:
			return fmt.Errorf("%s: interval_s %d is more than a year (%d)", where, l.IntervalS, MaxRateLimitInterval)
		}
	}
	return nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// DefaultModuleName derives a module name from its source: the builtin's
// name, or the file's base name without ".wasm".
func DefaultModuleName(source string) string {
	if name, ok := strings.CutPrefix(source, BuiltinPrefix); ok {
		return name
	}
	return strings.TrimSuffix(filepath.Base(source), ".wasm")
}

// describeTypeError says where a value of the wrong JSON type is and what
// is wanted there: `rate_limits[1].concurrent: want a whole number, got a
// string`.
func describeTypeError(data []byte, te *json.UnmarshalTypeError) string {
	where := strings.TrimPrefix(jsonw.PathAt(data, te.Offset), "$.")
	if where == "" || where == "$" {
		where = cmp.Or(te.Field, "the file")
	}
	return fmt.Sprintf("%s: want %s, got %s", where, jsonShape(te.Type), article(te.Value))
}

// jsonShape names the JSON shape that decodes into t.
func jsonShape(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list of " + strings.TrimPrefix(strings.TrimPrefix(jsonShape(t.Elem()), "a "), "an ") + "s"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonShape(t.Elem())
	}
	return "a value of type " + t.String()
}

// article puts "a" or "an" before encoding/json's name of a JSON value
// ("string", "number 1.5", "object").
func article(v string) string {
	if v != "" && strings.ContainsRune("aeiou", rune(v[0])) {
		return "an " + v
	}
	return "a " + v
}
