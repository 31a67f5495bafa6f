package config

import (
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strings"
)

// ServerTransports are the values OpenClaw's schema accepts for an entry's
// "transport" key (docs/protocol-facts.md, mcp.servers entry schema).
var ServerTransports = []string{"stdio", "sse", "streamable-http"}

// RejectedServerKeys are the legacy spellings OpenClaw's schema refuses
// with an unrecognized-key error (docs/protocol-facts.md, mcp.servers entry schema). `mcp set` rewrites some of them
// first ([NormalizeServer]); in a hand-edited file they make it invalid.
var RejectedServerKeys = []string{
	"connectTimeout", "connect_timeout", "timeout", "workingDirectory",
	"supports_parallel_tool_calls", "ssl_verify", "client_cert", "client_key",
}

var codexAgentRE = regexp.MustCompile(`(?i)^[a-z0-9][a-z0-9_-]{0,63}$`)

// ValidateMCP checks root's "mcp" section the way OpenClaw's zod schema
// does (docs/protocol-facts.md, mcp.servers config file and mcp.servers entry schema) and returns every issue found, in schema order: per
// entry the key types, then the rejected keys, then the cross-field rules.
// Keys outside "mcp" are not OpenClaw's MCP schema and are not checked.
// Validation also applies the schema's one transform: toolFilter patterns
// are trimmed in place.
func ValidateMCP(root *Object) []*ConfigError {
	var v validator
	mv, ok := root.Get("mcp")
	if !ok {
		return nil
	}
	m, ok := mv.(*Object)
	if !ok {
		v.add("mcp", expected("object", mv))
		return v.issues
	}
	if t, ok := m.Get("sessionIdleTtlMs"); ok {
		if f, ok := t.(float64); !ok || math.IsNaN(f) || math.IsInf(f, 0) {
			v.add("mcp.sessionIdleTtlMs", expected("finite number", t))
		} else if f < 0 {
			v.add("mcp.sessionIdleTtlMs", "Too small: expected number to be >=0")
		}
	}
	if a, ok := m.Get("apps"); ok {
		if ao, ok := a.(*Object); !ok {
			v.add("mcp.apps", expected("object", a))
		} else {
			v.optBool(ao, "mcp.apps", "enabled")
			v.optString(ao, "mcp.apps", "sandboxOrigin")
			if p, ok := ao.Get("sandboxPort"); ok {
				if _, ok := p.(float64); !ok {
					v.add("mcp.apps.sandboxPort", expected("number", p))
				}
			}
		}
	}
	sv, ok := m.Get("servers")
	if !ok {
		return v.issues
	}
	servers, ok := sv.(*Object)
	if !ok {
		v.add("mcp.servers", expected("record", sv))
		return v.issues
	}
	for _, name := range servers.Keys() {
		p := "mcp.servers." + name
		if name == ReservedServerName {
			v.add(p, fmt.Sprintf("server name %q is reserved", name))
			continue
		}
		e, ok := servers.vals[name].(*Object)
		if !ok {
			v.add(p, expected("object", servers.vals[name]))
			continue
		}
		v.server(p, e)
	}
	return v.issues
}

type validator struct{ issues []*ConfigError }

func (v *validator) add(path, issue string) {
	v.issues = append(v.issues, &ConfigError{Path: path, Issue: issue})
}

// typeName names a value's type the way zod reports what it received.
func typeName(x any) string {
	switch t := x.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		if math.IsNaN(t) {
			return "NaN"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case *Object:
		return "object"
	}
	return fmt.Sprintf("%T", x)
}

func expected(what string, got any) string {
	return fmt.Sprintf("Invalid input: expected %s, received %s", what, typeName(got))
}

func (v *validator) optBool(o *Object, p, k string) {
	if x, ok := o.Get(k); ok {
		if _, ok := x.(bool); !ok {
			v.add(p+"."+k, expected("boolean", x))
		}
	}
}

func (v *validator) optString(o *Object, p, k string) {
	if x, ok := o.Get(k); ok {
		if _, ok := x.(string); !ok {
			v.add(p+"."+k, expected("string", x))
		}
	}
}

func (v *validator) optPositive(o *Object, p, k string) {
	x, ok := o.Get(k)
	if !ok {
		return
	}
	f, isNum := x.(float64)
	switch {
	case !isNum || math.IsNaN(f):
		v.add(p+"."+k, expected("number", x))
	case math.IsInf(f, 0):
		v.add(p+"."+k, "Invalid input: expected a finite number")
	case f <= 0:
		v.add(p+"."+k, "Too small: expected number to be >0")
	}
}

func (v *validator) optEnum(o *Object, p, k string, allowed ...string) {
	x, ok := o.Get(k)
	if !ok {
		return
	}
	s, isStr := x.(string)
	for _, a := range allowed {
		if isStr && s == a {
			return
		}
	}
	v.add(p+"."+k, "Invalid option: expected one of "+quoteJoin(allowed))
}

func quoteJoin(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, "|")
}

// httpURL reports whether s parses as an absolute http: or https: URL.
func httpURL(s string, httpsOnly bool) (*url.URL, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return nil, false
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return u, true
	case "http":
		return u, !httpsOnly
	}
	return nil, false
}

func (v *validator) optURL(o *Object, p, k string, httpsOnly, needPath bool) {
	x, ok := o.Get(k)
	if !ok {
		return
	}
	s, isStr := x.(string)
	if !isStr {
		v.add(p+"."+k, expected("string", x))
		return
	}
	u, ok := httpURL(s, httpsOnly)
	switch {
	case !ok && httpsOnly:
		v.add(p+"."+k, "must be an https: URL")
	case !ok:
		v.add(p+"."+k, "must be an http: or https: URL")
	case needPath && (u.Path == "" || u.Path == "/"):
		v.add(p+"."+k, "must be an https: URL with a non-root path")
	}
}

func (v *validator) scalarRecord(o *Object, p, k string) {
	x, ok := o.Get(k)
	if !ok {
		return
	}
	r, ok := x.(*Object)
	if !ok {
		v.add(p+"."+k, expected("record", x))
		return
	}
	for _, rk := range r.Keys() {
		switch r.vals[rk].(type) {
		case string, float64, bool:
		default:
			v.add(p+"."+k+"."+rk, expected("string, number or boolean", r.vals[rk]))
		}
	}
}

func (v *validator) stringArray(o *Object, p, k string, minItems int, trim bool, item func(string) string) {
	x, ok := o.Get(k)
	if !ok {
		return
	}
	a, ok := x.([]any)
	if !ok {
		v.add(p+"."+k, expected("array", x))
		return
	}
	if len(a) < minItems {
		v.add(p+"."+k, fmt.Sprintf("Too small: expected array to have >=%d items", minItems))
		return
	}
	for i, e := range a {
		ip := fmt.Sprintf("%s.%s.%d", p, k, i)
		s, ok := e.(string)
		if !ok {
			v.add(ip, expected("string", e))
			continue
		}
		if trim {
			s = strings.TrimSpace(s)
			a[i] = s
			if s == "" {
				v.add(ip, "Too small: expected string to have >=1 characters")
				continue
			}
		}
		if item != nil {
			if msg := item(s); msg != "" {
				v.add(ip, msg)
			}
		}
	}
}

// strict reports keys of o outside known as zod's strict objects do.
func (v *validator) strict(o *Object, p string, known ...string) {
	for _, k := range o.Keys() {
		found := false
		for _, kk := range known {
			if k == kk {
				found = true
				break
			}
		}
		if !found {
			v.add(p, fmt.Sprintf("Unrecognized key: %q", k))
		}
	}
}

func (v *validator) server(p string, e *Object) {
	v.optBool(e, p, "enabled")
	v.optString(e, p, "command")
	v.stringArray(e, p, "args", 0, false, nil)
	v.scalarRecord(e, p, "env")
	v.optString(e, p, "cwd")
	v.optURL(e, p, "url", false, false)
	v.optEnum(e, p, "transport", ServerTransports...)
	v.scalarRecord(e, p, "headers")
	v.optPositive(e, p, "connectionTimeoutMs")
	v.optPositive(e, p, "requestTimeoutMs")
	v.optBool(e, p, "supportsParallelToolCalls")
	if a, ok := e.Get("auth"); ok && a != "oauth" {
		v.add(p+".auth", `Invalid input: expected "oauth"`)
	}
	if x, ok := e.Get("oauth"); ok {
		if o, ok := x.(*Object); !ok {
			v.add(p+".oauth", expected("object", x))
		} else {
			op := p + ".oauth"
			v.optEnum(o, op, "identity", "shared", "per-requester")
			v.optString(o, op, "authProfileId")
			v.optString(o, op, "scope")
			v.optURL(o, op, "redirectUrl", false, false)
			v.optURL(o, op, "clientMetadataUrl", true, true)
			v.strict(o, op, "identity", "authProfileId", "scope", "redirectUrl", "clientMetadataUrl")
		}
	}
	v.optBool(e, p, "sslVerify")
	v.optString(e, p, "clientCert")
	v.optString(e, p, "clientKey")
	if x, ok := e.Get("toolFilter"); ok {
		if o, ok := x.(*Object); !ok {
			v.add(p+".toolFilter", expected("object", x))
		} else {
			tp := p + ".toolFilter"
			v.stringArray(o, tp, "include", 1, true, nil)
			v.stringArray(o, tp, "exclude", 1, true, nil)
			v.strict(o, tp, "include", "exclude")
		}
	}
	if x, ok := e.Get("codex"); ok {
		if o, ok := x.(*Object); !ok {
			v.add(p+".codex", expected("object", x))
		} else {
			cp := p + ".codex"
			v.stringArray(o, cp, "agents", 1, false, func(s string) string {
				if !codexAgentRE.MatchString(s) {
					return "Invalid string: must match pattern " + codexAgentRE.String()
				}
				return ""
			})
			v.optEnum(o, cp, "defaultToolsApprovalMode", "auto", "prompt", "approve")
			if o.Has("default_tools_approval_mode") {
				v.add(cp+".default_tools_approval_mode", `Unrecognized key: "default_tools_approval_mode"`)
			}
			v.strict(o, cp, "agents", "defaultToolsApprovalMode", "default_tools_approval_mode")
		}
	}
	// Rejected keys of the catch-all.
	for _, k := range RejectedServerKeys {
		if e.Has(k) {
			v.add(p+"."+k, fmt.Sprintf("Unrecognized key: %q", k))
		}
	}
	if d, ok := e.Get("disabled"); ok {
		hint := `use "enabled" instead`
		if b, ok := d.(bool); ok {
			hint = fmt.Sprintf(`use "enabled": %t instead`, !b)
		}
		v.add(p+".disabled", `unsupported key "disabled"; `+hint)
	}
	// Cross-field rules.
	cmd, _ := e.Get("command")
	cmdStr, _ := cmd.(string)
	tr, _ := e.Get("transport")
	if tr == "stdio" && strings.TrimSpace(cmdStr) == "" {
		v.add(p+".transport", `"stdio" transport requires a non-empty command`)
	}
	if o, ok := e.vals["oauth"].(*Object); ok && o.vals["identity"] == "per-requester" {
		ip := p + ".oauth.identity"
		if a, _ := e.Get("auth"); a != "oauth" {
			v.add(ip, `"per-requester" identity requires auth "oauth"`)
		}
		if o.Has("authProfileId") {
			v.add(p+".oauth.authProfileId", `cannot be combined with the "per-requester" identity`)
		}
		if !e.Has("url") {
			v.add(ip, `"per-requester" identity requires a url`)
		}
		if e.Has("command") || tr == "stdio" {
			v.add(ip, `"per-requester" identity cannot be used with a stdio server`)
		}
	}
}
