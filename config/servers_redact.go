package config

import (
	"net/url"
	"regexp"
	"strings"
	"unicode"
)

// Redaction of launch strings, as `openclaw mcp status` prints them
// (openclaw-protocol.md §11.8). The transport package (H11) needs the same
// helpers for its logs and errors; these are the ones the CLI uses now and
// are meant to be merged with theirs.

// Redacted is what a secret is replaced with.
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
	tokenNameRE   = regexp.MustCompile(`(?:^|_)token(?:_[a-f0-9]{16,})?$`)
	telegramBotRE = regexp.MustCompile(`/bot\d+:[^/?#]+`)
)

// IsSensitiveQueryName reports whether a URL query parameter name holds a
// secret: the name is percent-decoded (up to 8 rounds), stripped of control
// and space characters, lowercased, '-' turned into '_', then looked up in
// OpenClaw's list or matched against (?:^|_)token(?:_[a-f0-9]{16,})?$.
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
	return sensitiveQueryNames[name] || tokenNameRE.MatchString(name)
}

// RedactURL hides the secrets of a URL the way OpenClaw's status does:
// userinfo becomes ***:***, values of sensitive query parameters
// ([IsSensitiveQueryName]) become ***, a Telegram bot token in the path
// (/bot<digits>:<secret>) becomes /bot***. Everything else is kept as
// written. A string that does not parse as a URL goes through
// [RedactSecretText].
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return RedactSecretText(raw)
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

// IsSensitiveKeyName reports whether a header or env name usually carries
// a secret, as OpenClaw's doctor judges it: Authorization,
// Proxy-Authorization, X-Api-Key, Api-Key, api_key, or a name ending (after
// "_" or "-", or whole) in api_key/apikey/api-key, authorization, bearer,
// password, secret or token; case-insensitive.
func IsSensitiveKeyName(name string) bool {
	n := strings.ToLower(strings.TrimSpace(name))
	switch n {
	case "authorization", "proxy-authorization", "x-api-key", "api-key", "api_key":
		return true
	}
	return sensitiveKeyRE.MatchString(n)
}

var sensitiveKeyRE = regexp.MustCompile(`(?:^|[_-])(?:api[_-]?key|authorization|bearer|password|secret|token)$`)

// secretFlagRE matches flag names (lowercased) whose value is a secret.
var secretFlagRE = regexp.MustCompile(`^--(?:[a-z0-9]+(?:[-_][a-z0-9]+)*[-_])?(?:token|secret|password|passwd|passphrase|pin|api[-_]?key|api[-_]?secret|secret[-_]?key|secret[-_]?access[-_]?key|access[-_]?key(?:[-_]?id)?|account[-_]?key|client[-_]?key|consumer[-_]?key|license[-_]?key|subscription[-_]?key|webhook|credentials?|creds?|auth(?:orization)?|bearer|pat|cookie|private[-_]?key|recovery[-_]?key|signing[-_]?key|encryption[-_]?key|master[-_]?key|session[-_]?key|gateway[-_]?key|service[-_]?key|hook[-_]?key)$`)

// secretFlags are secret flags the pattern does not cover.
var secretFlags = map[string]bool{"--key": true, "--pass": true, "--pwd": true, "--apikey": true}

// IsSecretFlag reports whether an argument like "--api-key" names a secret
// whose value follows it (or follows "=").
func IsSecretFlag(flag string) bool {
	f := strings.ToLower(flag)
	return secretFlags[f] || secretFlagRE.MatchString(f)
}

// RedactArgs returns a copy of a stdio command's args, same length, with
// secrets hidden: the element after a secret flag becomes ***, the value of
// "--secret-flag=value" becomes ***, every other element goes through
// [RedactSecretText].
func RedactArgs(args []string) []string {
	out := make([]string, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if name, _, ok := strings.Cut(a, "="); ok && strings.HasPrefix(name, "--") && IsSecretFlag(name) {
			out[i] = name + "=" + Redacted
			continue
		}
		out[i] = RedactSecretText(a)
		if IsSecretFlag(a) && i+1 < len(args) {
			i++
			out[i] = Redacted
		}
	}
	return out
}

// StdioLaunchDescription is the launch string of a stdio server in
// `mcp status`: "<command>[ <redacted args>][ (cwd=<cwd>)]".
func StdioLaunchDescription(command string, args []string, cwd string) string {
	var b strings.Builder
	b.WriteString(command)
	for _, a := range RedactArgs(args) {
		b.WriteByte(' ')
		b.WriteString(a)
	}
	if cwd != "" {
		b.WriteString(" (cwd=" + cwd + ")")
	}
	return b.String()
}

var (
	urlInTextRE   = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)
	bearerRE      = regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}`)
	tokenPrefixRE = regexp.MustCompile(`\b(?:sk-[A-Za-z0-9_-]{16,}|sk_(?:live|test)_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}|glpat-[A-Za-z0-9_-]{20,}|npm_[A-Za-z0-9]{36})`)
	assignRE      = regexp.MustCompile(`(?i)\b([A-Za-z0-9_-]*(?:token|secret|password|passwd|api[_-]?key|apikey|authorization)[A-Za-z0-9_-]*)=([^\s&]+)`)
)

// RedactSecretText hides secrets inside free text: URLs go through
// [RedactURL], "Bearer <token>" keeps only the scheme, well-known token
// shapes (sk-…, ghp_…, github_pat_…, xoxb-…, AKIA…, AIza…, glpat-…, npm_…)
// and NAME=value assignments with a secret-looking name lose the value.
func RedactSecretText(s string) string {
	s = urlInTextRE.ReplaceAllStringFunc(s, func(u string) string {
		if strings.Contains(u, "://") {
			if p, err := url.Parse(u); err == nil && p.Scheme != "" {
				return RedactURL(u)
			}
		}
		return u
	})
	s = bearerRE.ReplaceAllString(s, "$1 "+Redacted)
	s = tokenPrefixRE.ReplaceAllString(s, Redacted)
	s = assignRE.ReplaceAllStringFunc(s, func(m string) string {
		name, _, _ := strings.Cut(m, "=")
		return name + "=" + Redacted
	})
	return s
}
