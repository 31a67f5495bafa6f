package transport

import (
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// Redacted is what every redacted secret is replaced with (OpenClaw §11.8).
const Redacted = "***"

var sensitiveQueryNames = map[string]bool{}

func init() {
	for _, n := range []string{"token", "key", "api_key", "apikey", "secret", "access_token", "auth_token",
		"password", "pass", "passwd", "auth", "jwt", "session", "id_token", "code", "client_secret",
		"app_secret", "hook_token", "refresh_token", "signature", "x_amz_signature",
		"x_amz_security_token", "private_key", "credential", "authorization", "sig", "x_api_key",
		"x_access_token", "x_auth_token"} {
		sensitiveQueryNames[n] = true
	}
}

var (
	tokenQueryRe    = regexp.MustCompile(`(?:^|_)token(?:_[a-f0-9]{16,})?$`)
	telegramBotRe   = regexp.MustCompile(`/bot\d+:[A-Za-z0-9_-]+`)
	secretFlagRe    = regexp.MustCompile(`^--(?:[a-z0-9]+(?:[-_][a-z0-9]+)*[-_])?(?:token|secret|password|passwd|passphrase|pin|api[-_]?key|api[-_]?secret|secret[-_]?key|secret[-_]?access[-_]?key|access[-_]?key(?:[-_]?id)?|account[-_]?key|client[-_]?key|consumer[-_]?key|license[-_]?key|subscription[-_]?key|webhook|credentials?|creds?|auth(?:orization)?|bearer|pat|cookie|private[-_]?key|recovery[-_]?key|signing[-_]?key|encryption[-_]?key|master[-_]?key|session[-_]?key|gateway[-_]?key|service[-_]?key|hook[-_]?key)$`)
	urlInTextRe     = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)
	bearerRe        = regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}`)
	knownTokenRe    = regexp.MustCompile(`\b(?:sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|glpat-[A-Za-z0-9_-]{20,})`)
	sensitiveKVRe   = regexp.MustCompile(`(?i)\b([A-Za-z0-9_-]*(?:token|secret|password|passwd|api[_-]?key|apikey|authorization|cookie)[A-Za-z0-9_-]*)("?\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s,;&]+)`)
	sensitiveHeader = regexp.MustCompile(`(?i)(authorization|cookie|token|secret|password|api[-_]?key|auth|session|signature|credential)`)
)

// isSensitiveQueryName reports whether a URL query parameter name holds a
// secret: the name is URL-decoded (at most 8 rounds), stripped of control and
// space characters, lower-cased, '-' mapped to '_', then matched against
// OpenClaw's set or the token pattern (§11.8).
func isSensitiveQueryName(name string) bool {
	for range 8 {
		d, err := url.QueryUnescape(name)
		if err != nil || d == name {
			break
		}
		name = d
	}
	name = strings.Map(func(r rune) rune {
		if r <= ' ' || r == 0x7f {
			return -1
		}
		return r
	}, name)
	name = strings.ReplaceAll(strings.ToLower(name), "-", "_")
	return sensitiveQueryNames[name] || tokenQueryRe.MatchString(name)
}

// RedactURL returns raw with its userinfo replaced by ***:***, the values of
// sensitive query parameters by ***, and Telegram bot tokens in the path
// (/bot<digits>:<secret>) by /bot***, as OpenClaw's redactSensitiveUrl does:
// https://user:pw@h/mcp?token=abc&x=1 → https://***:***@h/mcp?token=***&x=1.
// Other parameters and their order stay. A string that does not parse as a
// URL is passed through [RedactText].
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return RedactText(raw)
	}
	// Userinfo is re-added as text below: url.URL would percent-encode the stars.
	hadUser := u.User != nil && userinfoPresent(raw)
	u.User = nil
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			name, _, hasValue := strings.Cut(p, "=")
			if hasValue && isSensitiveQueryName(name) {
				parts[i] = name + "=" + Redacted
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	out := u.String()
	out = telegramBotRe.ReplaceAllString(out, "/bot"+Redacted)
	if hadUser {
		out = strings.Replace(out, "://", "://"+Redacted+":"+Redacted+"@", 1)
	}
	return out
}

func userinfoPresent(raw string) bool {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return false
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	return strings.Contains(rest, "@")
}

// RedactText masks secrets inside free text: URLs (through [RedactURL]),
// Bearer/Basic credentials, well-known token shapes (sk-…, ghp_…, xoxb-…,
// AKIA…, glpat-…) and key=value pairs whose key names a token, secret,
// password, API key, authorization or cookie. It is the generic redactor
// used for arguments, error text and captured child output.
func RedactText(s string) string {
	s = urlInTextRe.ReplaceAllStringFunc(s, func(m string) string {
		if strings.Contains(m, "://") && m != "" {
			if u, err := url.Parse(m); err == nil && u.Scheme != "" {
				return RedactURL(m)
			}
		}
		return m
	})
	s = bearerRe.ReplaceAllString(s, "$1 "+Redacted)
	s = knownTokenRe.ReplaceAllString(s, Redacted)
	s = sensitiveKVRe.ReplaceAllStringFunc(s, func(m string) string {
		sub := sensitiveKVRe.FindStringSubmatch(m)
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

// IsSecretFlag reports whether a command-line flag names a secret, so that
// its value must be redacted (§11.8: the flag name is lower-cased and
// matched against OpenClaw's secret-flag pattern).
func IsSecretFlag(flag string) bool {
	return secretFlagRe.MatchString(strings.ToLower(flag))
}

// RedactArgs returns a copy of args, same length, in which the element after
// a secret flag becomes ***, the value part of --flag=value becomes *** for a
// secret flag, and every other element goes through [RedactText] (§11.8).
func RedactArgs(args []string) []string {
	out := make([]string, len(args))
	redactNext := false
	for i, a := range args {
		if redactNext {
			out[i] = Redacted
			redactNext = false
			continue
		}
		if name, _, ok := strings.Cut(a, "="); ok && strings.HasPrefix(name, "--") && IsSecretFlag(name) {
			out[i] = name + "=" + Redacted
			continue
		}
		if strings.HasPrefix(a, "--") && IsSecretFlag(a) {
			out[i] = a
			redactNext = true
			continue
		}
		out[i] = RedactText(a)
	}
	return out
}

// IsSensitiveHeader reports whether an HTTP header's value is a secret
// (Authorization, Cookie, and any name mentioning a token, secret, password,
// API key, auth, session, signature or credential).
func IsSensitiveHeader(name string) bool { return sensitiveHeader.MatchString(name) }

// RedactHeaders returns a copy of h with the values of sensitive headers
// ([IsSensitiveHeader]) replaced by ***.
func RedactHeaders(h map[string]string) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		if IsSensitiveHeader(k) {
			v = Redacted
		}
		out[k] = v
	}
	return out
}

// A Redactor masks a fixed set of known secret values (env values, header
// values of one server) in addition to what [RedactText] finds. The zero
// value and nil redact with RedactText only. It is safe for concurrent use.
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
// through [RedactText].
func (r *Redactor) Redact(s string) string {
	if r != nil {
		for _, sec := range r.secrets {
			s = strings.ReplaceAll(s, sec, Redacted)
		}
	}
	return RedactText(s)
}

// StdioLaunchString is the redacted launch description OpenClaw's `mcp
// status` shows for a stdio server: "<command>[ <redacted args>][ (cwd=<cwd>)]".
func StdioLaunchString(command string, args []string, cwd string) string {
	var b strings.Builder
	b.WriteString(command)
	if len(args) > 0 {
		b.WriteByte(' ')
		b.WriteString(strings.Join(RedactArgs(args), " "))
	}
	if cwd != "" {
		b.WriteString(" (cwd=" + cwd + ")")
	}
	return b.String()
}
