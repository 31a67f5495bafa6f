// Package redact hides secrets in the text openclaw-go prints and logs: URLs
// (userinfo, sensitive query values, Telegram bot tokens), stdio command
// lines (the values of secret flags), free text (Bearer credentials,
// well-known token shapes, name=value pairs with a secret-looking name) and
// the known secret values of one server ([Redactor]). The URL and argument
// rules are those of OpenClaw's `mcp status` (docs/protocol-facts.md, Redaction).
//
// It is a standard-library-only leaf: config, transport and the Gateway
// client all use it.
package redact

import (
	"net/url"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// Redacted is what every redacted secret is replaced with.
const Redacted = "***"

var sensitiveQueryNames = map[string]bool{}

func init() {
	for _, n := range []string{"token", "key", "api_key", "apikey", "secret", "access_token",
		"auth_token", "password", "pass", "passwd", "auth", "jwt", "session", "id_token", "code",
		"client_secret", "app_secret", "hook_token", "refresh_token", "signature", "x_amz_signature",
		"x_amz_security_token", "private_key", "credential", "authorization", "sig", "x_api_key",
		"x_access_token", "x_auth_token"} {
		sensitiveQueryNames[n] = true
	}
}

var (
	tokenQueryRE = regexp.MustCompile(`(?:^|_)token(?:_[a-f0-9]{16,})?$`)
	// telegramBotRE takes the whole path segment after "/bot<digits>:", so
	// that no part of the token stays (a token with a '.' included).
	telegramBotRE     = regexp.MustCompile(`/bot\d+:[^/?#]+`)
	secretFlagRE      = regexp.MustCompile(`^--(?:[a-z0-9]+(?:[-_][a-z0-9]+)*[-_])?(?:token|secret|password|passwd|passphrase|pin|api[-_]?key|api[-_]?secret|secret[-_]?key|secret[-_]?access[-_]?key|access[-_]?key(?:[-_]?id)?|account[-_]?key|client[-_]?key|consumer[-_]?key|license[-_]?key|subscription[-_]?key|webhook|credentials?|creds?|auth(?:orization)?|bearer|pat|cookie|private[-_]?key|recovery[-_]?key|signing[-_]?key|encryption[-_]?key|master[-_]?key|session[-_]?key|gateway[-_]?key|service[-_]?key|hook[-_]?key)$`)
	urlInTextRE       = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)
	bearerRE          = regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}`)
	knownTokenRE      = regexp.MustCompile(`\b(?:sk-[A-Za-z0-9_-]{16,}|sk_(?:live|test)_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}|glpat-[A-Za-z0-9_-]{20,}|npm_[A-Za-z0-9]{36})`)
	sensitiveKVRE     = regexp.MustCompile(`(?i)\b([A-Za-z0-9_-]*(?:token|secret|password|passwd|api[_-]?key|apikey|authorization|cookie)[A-Za-z0-9_-]*)("?\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s,;&]+)`)
	sensitiveKeyRE    = regexp.MustCompile(`(?:^|[_-])(?:api[_-]?key|authorization|bearer|password|secret|token)$`)
	sensitiveHeaderRE = regexp.MustCompile(`(?i)(authorization|cookie|token|secret|password|api[-_]?key|auth|session|signature|credential)`)
)

// secretFlags are secret flags of OpenClaw's explicit set that the pattern
// does not cover.
var secretFlags = map[string]bool{"--key": true, "--pass": true, "--pwd": true, "--apikey": true}

// IsSensitiveQueryName reports whether a URL query parameter name holds a
// secret: the name is percent-decoded (at most 8 rounds), stripped of
// control and space characters, lower-cased, '-' turned into '_', then
// looked up in OpenClaw's set or matched against
// (?:^|_)token(?:_[a-f0-9]{16,})?$.
func IsSensitiveQueryName(name string) bool {
	for range 8 {
		d, err := url.QueryUnescape(name)
		if err != nil || d == name {
			break
		}
		name = d
	}
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return -1
		}
		return r
	}, name)
	name = strings.ReplaceAll(strings.ToLower(name), "-", "_")
	return sensitiveQueryNames[name] || tokenQueryRE.MatchString(name)
}

// URL hides the secrets of a URL the way OpenClaw's status does: userinfo
// becomes ***:***, the values of sensitive query parameters
// ([IsSensitiveQueryName]) become ***, a Telegram bot token in the path
// (/bot<digits>:<token>, up to the next '/', '?' or '#') becomes /bot***:
// https://user:pw@h/mcp?token=abc&x=1 → https://***:***@h/mcp?token=***&x=1.
// Everything else is kept as written, in order. A string that does not
// parse as a URL with a scheme goes through [Text].
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return Text(raw)
	}
	out := raw
	if u.User != nil {
		// The userinfo sits between "//" and the last "@" before the path.
		if i := strings.Index(out, "//"); i >= 0 {
			rest := out[i+2:]
			end := strings.IndexAny(rest, "/?#")
			if end < 0 {
				end = len(rest)
			}
			if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
				out = out[:i+2] + Redacted + ":" + Redacted + rest[at:]
			}
		}
	}
	out = telegramBotRE.ReplaceAllString(out, "/bot"+Redacted)
	q := strings.Index(out, "?")
	if q < 0 {
		return out
	}
	query, frag := out[q+1:], ""
	if h := strings.Index(query, "#"); h >= 0 {
		query, frag = query[:h], query[h:]
	}
	parts := strings.Split(query, "&")
	for i, p := range parts {
		name, _, _ := strings.Cut(p, "=")
		if name != "" && IsSensitiveQueryName(name) {
			parts[i] = name + "=" + Redacted
		}
	}
	return out[:q+1] + strings.Join(parts, "&") + frag
}

// Text hides secrets inside free text: URLs go through [URL], "Bearer
// <token>" and "Basic <token>" keep only the scheme, well-known token
// shapes (sk-…, sk_live_…, ghp_…, github_pat_…, xoxb-…, AKIA…, AIza…,
// glpat-…, npm_…) become ***, and name=value or name: value pairs whose name
// mentions a token, secret, password, API key, authorization or cookie lose
// the value (quotes kept). It is the generic redactor for arguments, error
// text and captured child output.
func Text(s string) string {
	s = urlInTextRE.ReplaceAllStringFunc(s, func(m string) string {
		if u, err := url.Parse(m); err == nil && u.Scheme != "" {
			return URL(m)
		}
		return m
	})
	s = bearerRE.ReplaceAllString(s, "$1 "+Redacted)
	s = knownTokenRE.ReplaceAllString(s, Redacted)
	s = sensitiveKVRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := sensitiveKVRE.FindStringSubmatch(m)
		v := sub[3]
		if strings.Contains(v, Redacted) || strings.EqualFold(v, "bearer") || strings.EqualFold(v, "basic") {
			return m
		}
		if q := v[0]; q == '"' || q == '\'' {
			return sub[1] + sub[2] + string(q) + Redacted + string(q)
		}
		return sub[1] + sub[2] + Redacted
	})
	return s
}

// IsSecretFlag reports whether a command-line flag such as "--api-key"
// names a secret whose value follows it (or follows "="): the flag name is
// lower-cased and matched against OpenClaw's secret-flag pattern and its
// explicit names.
func IsSecretFlag(flag string) bool {
	f := strings.ToLower(flag)
	return secretFlags[f] || secretFlagRE.MatchString(f)
}

// Args returns a copy of a stdio command's args, same length, with secrets
// hidden: the element after a secret flag becomes ***, the value of
// "--secret-flag=value" becomes ***, every other element goes through
// [Text].
func Args(args []string) []string {
	out := make([]string, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if name, _, ok := strings.Cut(a, "="); ok && strings.HasPrefix(name, "--") && IsSecretFlag(name) {
			out[i] = name + "=" + Redacted
			continue
		}
		out[i] = Text(a)
		if IsSecretFlag(a) && i+1 < len(args) {
			i++
			out[i] = Redacted
		}
	}
	return out
}

// StdioLaunch is the launch string of a stdio server in `mcp status`:
// "<command>[ <redacted args>][ (cwd=<cwd>)]".
func StdioLaunch(command string, args []string, cwd string) string {
	var b strings.Builder
	b.WriteString(command)
	for _, a := range Args(args) {
		b.WriteByte(' ')
		b.WriteString(a)
	}
	if cwd != "" {
		b.WriteString(" (cwd=" + cwd + ")")
	}
	return b.String()
}

// IsSensitiveKeyName reports whether a header or env name usually carries
// a secret, as OpenClaw's doctor judges it (a literal value under such a
// name is warned about): Authorization, Proxy-Authorization, X-Api-Key,
// Api-Key, api_key, or a name ending (after "_" or "-", or whole) in
// api_key/apikey/api-key, authorization, bearer, password, secret or token;
// case-insensitive.
func IsSensitiveKeyName(name string) bool {
	n := strings.ToLower(strings.TrimSpace(name))
	switch n {
	case "authorization", "proxy-authorization", "x-api-key", "api-key", "api_key":
		return true
	}
	return sensitiveKeyRE.MatchString(n)
}

// IsSensitiveHeader reports whether an HTTP header's value is masked in
// what we print: Authorization, Cookie, and any name mentioning a token,
// secret, password, API key, auth, session, signature or credential. It is
// wider than [IsSensitiveKeyName], which says what OpenClaw's doctor warns
// about.
func IsSensitiveHeader(name string) bool { return sensitiveHeaderRE.MatchString(name) }

// Headers returns a copy of h with the values of sensitive headers
// ([IsSensitiveHeader]) replaced by ***.
func Headers(h map[string]string) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		if IsSensitiveHeader(k) {
			v = Redacted
		}
		out[k] = v
	}
	return out
}

// A Redactor masks a fixed set of known secret values (the env values or
// header values of one server) in addition to what [Text] finds. The zero
// value and nil redact with Text only. It is safe for concurrent use.
type Redactor struct {
	secrets []string // longest first, so a secret containing another is masked whole
}

// NewRedactor returns a Redactor for the given secret values. Values shorter
// than 4 bytes are ignored: masking them would garble ordinary text and they
// protect nothing.
func NewRedactor(secrets ...string) *Redactor {
	r := &Redactor{}
	seen := map[string]bool{}
	for _, s := range secrets {
		if len(s) >= 4 && !seen[s] {
			seen[s] = true
			r.secrets = append(r.secrets, s)
		}
	}
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
	return r
}

// Redact returns s with every known secret replaced by *** and then passed
// through [Text].
func (r *Redactor) Redact(s string) string {
	if r != nil {
		for _, sec := range r.secrets {
			s = strings.ReplaceAll(s, sec, Redacted)
		}
	}
	return Text(s)
}
