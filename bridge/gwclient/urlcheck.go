package gwclient

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"github.com/openclaw-go/openclaw/internal/redact"
)

// EnvAllowInsecurePrivateWS, set to "1", also lets plaintext ws:// reach a
// host name that is not an IP literal (a name on a private DNS or VPN), as
// OpenClaw's break-glass of the same name does. IP literals outside the
// private ranges stay refused.
const EnvAllowInsecurePrivateWS = "OPENCLAW_ALLOW_INSECURE_PRIVATE_WS"

// ErrPlaintextRemote is wrapped by the error [CheckSecureURL] returns for a
// ws:// URL whose host may be reached across an untrusted network.
var ErrPlaintextRemote = errors.New("plaintext ws:// to a non-loopback address")

// PlaintextRemoteError refuses a ws:// Gateway URL to a host that is not
// trusted for plaintext: the token and every conversation would cross the
// network unencrypted (CWE-319). Its first line is OpenClaw's:
// `SECURITY ERROR: Gateway URL "<url>" uses plaintext ws:// to a
// non-loopback address.`; the rest says how to fix it.
type PlaintextRemoteError struct {
	// URL is the refused URL, secrets redacted.
	URL string
	// AllowPrivate reports whether [EnvAllowInsecurePrivateWS] was in force.
	AllowPrivate bool
}

// Error is OpenClaw's SECURITY ERROR line followed by the fix, on several
// lines.
func (e *PlaintextRemoteError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "SECURITY ERROR: Gateway URL %q uses plaintext ws:// to a non-loopback address.\n", e.URL)
	b.WriteString("The Gateway token and all conversation data would cross the network unencrypted.\n")
	b.WriteString("Fix: use wss:// for a remote Gateway, or an SSH tunnel (ssh -N -L 18789:127.0.0.1:18789 user@gateway-host) and ws://127.0.0.1:18789.\n")
	b.WriteString("Plaintext ws:// is accepted to loopback, private and link-local addresses and to .local and .ts.net names")
	if !e.AllowPrivate {
		b.WriteString("; on a trusted private network, " + EnvAllowInsecurePrivateWS + "=1 also accepts other host names")
	}
	return b.String()
}

// Unwrap returns [ErrPlaintextRemote].
func (e *PlaintextRemoteError) Unwrap() error { return ErrPlaintextRemote }

// cgnat is 100.64.0.0/10 (RFC 6598), which Tailscale addresses live in.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// siteLocal is fec0::/10, the deprecated IPv6 site-local range.
var siteLocal = netip.MustParsePrefix("fec0::/10")

// CheckSecureURL reports whether rawURL may carry Gateway credentials. It
// mirrors OpenClaw's isSecureWebSocketUrl (src/gateway/net.ts, and the
// client-side copy its GatewayClient checks before it dials):
//
//   - wss:// is always accepted;
//   - ws:// is accepted when the host is localhost, a loopback address
//     (127.0.0.0/8, ::1), a private or link-local address (10/8, 172.16/12,
//     192.168/16, 169.254/16, 100.64/10, fc00::/7, fe80::/10, fec0::/10;
//     IPv4-mapped IPv6 counts as its IPv4 address), or a name ending in
//     .local or .ts.net;
//   - with allowPrivateNames (OpenClaw: [EnvAllowInsecurePrivateWS]=1), ws://
//     to any host name that is not an IP literal is accepted too.
//
// Any other ws:// URL is refused with a *[PlaintextRemoteError] (wrapping
// [ErrPlaintextRemote]). http:// and https:// are judged as ws:// and
// wss://, as OpenClaw does (the Gateway's admin API takes them). URLs that
// do not parse or use another scheme are left to the dialler, which
// refuses them with its own message.
func CheckSecureURL(rawURL string, allowPrivateNames bool) error {
	u, err := url.Parse(rawURL)
	if err != nil || !strings.EqualFold(u.Scheme, "ws") && !strings.EqualFold(u.Scheme, "http") {
		return nil
	}
	if plaintextTrusted(u.Hostname(), allowPrivateNames) {
		return nil
	}
	return &PlaintextRemoteError{URL: redact.URL(rawURL), AllowPrivate: allowPrivateNames}
}

func plaintextTrusted(host string, allowPrivateNames bool) bool {
	host = strings.TrimRight(strings.ToLower(host), ".")
	if host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		addr = addr.Unmap().WithZone("")
		return addr.IsLoopback() || addr.IsPrivate() || addr.IsLinkLocalUnicast() ||
			cgnat.Contains(addr) || siteLocal.Contains(addr)
	}
	if strings.HasSuffix(host, ".local") || strings.HasSuffix(host, ".ts.net") {
		return true
	}
	return allowPrivateNames
}
