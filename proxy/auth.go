package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/openclaw-go/openclaw/internal/jsonw"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/runtime"
)

// PathProtectedResource is where the OAuth 2.0 protected resource metadata
// (RFC 9728) is served when the proxy is a resource server
// (HTTPOptions.OAuth): at this path, and at this path followed by the path
// of the resource (e.g. /.well-known/oauth-protected-resource/mcp).
const PathProtectedResource = "/.well-known/oauth-protected-resource"

// IssuerTokensFile is the policies.Identity.Issuer of a static token of
// the tokens file.
const IssuerTokensFile = "tokens-file"

// StaticToken is one entry of the tokens file (--tokens-file): a bearer
// token, kept as its SHA-256, and the identity it stands for.
type StaticToken struct {
	// SHA256 is the SHA-256 of the token.
	SHA256 [sha256.Size]byte
	// Identity is who the token names: Issuer IssuerTokensFile, Subject
	// the entry's name, its scopes and claims.
	Identity policies.Identity
}

// tokensFile is the JSON of a tokens file.
type tokensFile struct {
	Tokens []struct {
		Name   string                     `json:"name"`
		SHA256 string                     `json:"sha256"`
		Token  string                     `json:"token"`
		Scopes []string                   `json:"scopes"`
		Claims map[string]json.RawMessage `json:"claims"`
	} `json:"tokens"`
}

// LoadTokensFile reads a tokens file: a JSON object whose "tokens" array
// lists {"name", "sha256" (hex of the token's SHA-256) or "token" (the
// token itself), "scopes", "claims"} (docs/proxy.md). Unknown keys, a
// missing or repeated name, a hash that is not 64 hex digits, both or
// neither of sha256 and token, a token with whitespace and two entries
// with one token are errors naming the entry.
func LoadTokensFile(path string) ([]StaticToken, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseTokensFile(path, b)
}

func parseTokensFile(path string, b []byte) ([]StaticToken, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf(`%s: the file is empty (want {"tokens":[{"name":…,"sha256":…}]})`, path)
	}
	if key, dup, err := jsonw.DuplicateKey(b); err == nil && dup {
		return nil, fmt.Errorf("%s: %s is given twice (JSON would keep the last one)", path, key)
	}
	var f tokensFile
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(f.Tokens) == 0 {
		return nil, fmt.Errorf(`%s: no tokens (want {"tokens":[{"name":…,"sha256":…}]})`, path)
	}
	names, hashes := map[string]bool{}, map[[sha256.Size]byte]string{}
	out := make([]StaticToken, 0, len(f.Tokens))
	for i, e := range f.Tokens {
		at := fmt.Sprintf("%s: tokens[%d]", path, i)
		if e.Name == "" {
			return nil, fmt.Errorf("%s: no name", at)
		}
		at += fmt.Sprintf(" (%q)", e.Name)
		if names[e.Name] {
			return nil, fmt.Errorf("%s: the name is used twice", at)
		}
		names[e.Name] = true
		var st StaticToken
		switch {
		case (e.SHA256 == "") == (e.Token == ""):
			return nil, fmt.Errorf(`%s: give one of "sha256" (the token's SHA-256 in hex) and "token"`, at)
		case e.Token != "":
			if strings.ContainsAny(e.Token, " \t\r\n") {
				return nil, fmt.Errorf("%s: the token contains whitespace", at)
			}
			st.SHA256 = sha256.Sum256([]byte(e.Token))
		default:
			h, err := hex.DecodeString(e.SHA256)
			if err != nil || len(h) != sha256.Size {
				return nil, fmt.Errorf(`%s: "sha256" %q is not 64 hex digits (printf %%s TOKEN | sha256sum)`, at, e.SHA256)
			}
			copy(st.SHA256[:], h)
		}
		if prev, ok := hashes[st.SHA256]; ok {
			return nil, fmt.Errorf("%s: the same token as %q", at, prev)
		}
		hashes[st.SHA256] = e.Name
		st.Identity = policies.Identity{Issuer: IssuerTokensFile, Subject: e.Name, Scopes: e.Scopes, Claims: e.Claims}
		out = append(out, st)
	}
	return out, nil
}

// identityKey carries the authenticated identity of a request.
type identityKey struct{}

// requestIdentity returns the identity the request's bearer token was
// verified as, nil for the single static token or without authentication.
func requestIdentity(ctx context.Context) *policies.Identity {
	id, _ := ctx.Value(identityKey{}).(*policies.Identity)
	return id
}

// tokenInfoIdentity is the key of the identity in auth.TokenInfo.Extra,
// where go-sdk hands it to the tool handlers (mcp.RequestExtra.TokenInfo).
const tokenInfoIdentity = "openclaw.identity"

// identityFromExtra returns the identity go-sdk carried to a request's
// handler, nil when none.
func identityFromExtra(extra *mcp.RequestExtra) *policies.Identity {
	if extra == nil || extra.TokenInfo == nil {
		return nil
	}
	id, _ := extra.TokenInfo.Extra[tokenInfoIdentity].(*policies.Identity)
	return id
}

// Principal is the requester whose OAuth tokens an MCP server with the
// per-requester identity (oauth.identity "per-requester") uses for the
// requests of id: its issuer, "#" and its subject, e.g.
// "https://idp.example.com#248289761001" or, for a static token of the
// tokens file, "tokens-file#ci-deploy" (`openclaw mcp login <server>
// --principal <that>` stores its tokens). An issuer has no fragment (RFC
// 8414 §2), so no two identities share one. "" for a nil id.
func Principal(id *policies.Identity) string {
	if id == nil {
		return ""
	}
	return id.Issuer + "#" + id.Subject
}

// requesterPrincipal is the receiving middleware that names the
// authenticated caller of every request as its principal
// (runtime.WithPrincipal): a per-requester server lists, calls, reads
// and completes with that caller's own tokens, never another's. A request
// without an identity (stdio, the single static token) names none.
func requesterPrincipal(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if p := Principal(identityFromExtra(req.GetExtra())); p != "" {
			ctx = runtime.WithPrincipal(ctx, p)
		}
		return next(ctx, method, req)
	}
}

// sessionUser is the user an MCP session is bound to: go-sdk refuses a
// request for a session with another (403 "session user mismatch").
func sessionUser(id *policies.Identity) string {
	return id.Issuer + "\x00" + id.Subject
}

// withTokenInfo hands the request's identity to go-sdk as an
// auth.TokenInfo (whose UserID binds the session it opens to the identity)
// through go-sdk's own middleware, which alone may set it; the token was
// verified before.
var withTokenInfo = auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
	id := requestIdentity(ctx)
	return &auth.TokenInfo{Scopes: id.Scopes, UserID: sessionUser(id), Extra: map[string]any{tokenInfoIdentity: id}}, nil
}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})

// anonymousUser is the session user of the single static token when
// other tokens name identities: no identity's sessionUser (issuer, NUL,
// subject) has an empty subject after a NUL-free issuer like it.
const anonymousUser = "openclaw-mcp-proxy anonymous token\x00"

// withAnonymousTokenInfo is withTokenInfo for the single static token: a
// session user and no identity.
var withAnonymousTokenInfo = auth.RequireBearerToken(func(context.Context, string, *http.Request) (*auth.TokenInfo, error) {
	return &auth.TokenInfo{UserID: anonymousUser}, nil
}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})

// authState is what [HTTPHandler] checks bearer tokens against: the single
// static token, the tokens file and the OAuth verifier.
type authState struct {
	single   bool // a single static token (HTTPOptions.Token)
	hash     [sha256.Size]byte
	tokens   map[[sha256.Size]byte]*policies.Identity
	oauth    *OAuthVerifier
	scopes   []string // required for every request
	call     []string // required in addition for tools/call
	metadata string   // the resource_metadata URL, "" without OAuth
}

// identities reports whether tokens name identities (tokens file, OAuth).
func (a *authState) identities() bool { return len(a.tokens) > 0 || a.oauth != nil }

// challenge writes the WWW-Authenticate header of a refusal: the realm
// alone for the single static token (as it always was); otherwise the
// RFC 6750 error, its description, the scope needed and the
// resource_metadata URL (MCP authorization: a client starts its login
// from there).
func (a *authState) challenge(w http.ResponseWriter, code, desc string, scope []string) {
	if !a.identities() {
		v := `Bearer realm="openclaw-mcp-proxy"`
		if code != "" {
			v += `, error="` + code + `"`
		}
		w.Header().Set("WWW-Authenticate", v)
		return
	}
	var params []string
	if code != "" {
		params = append(params, `error="`+code+`"`)
	}
	if desc != "" {
		params = append(params, `error_description="`+challengeText(desc)+`"`)
	}
	if len(scope) > 0 {
		params = append(params, `scope="`+challengeText(strings.Join(scope, " "))+`"`)
	}
	if a.metadata != "" {
		params = append(params, `resource_metadata="`+a.metadata+`"`)
	}
	w.Header().Set("WWW-Authenticate", "Bearer "+strings.Join(params, ", "))
}

// challengeText keeps the characters RFC 6750 §3 allows in a quoted
// parameter (%x20-21 / %x23-5B / %x5D-7E), replacing the others by '?'.
func challengeText(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return '?'
		}
		return r
	}, s)
}

// authorized requires a valid bearer token before next, unless NoAuth: the
// single static token, a token of the tokens file or an access token the
// OAuth verifier accepts, carrying the required scopes. An identity is
// handed on in the request's context (and to go-sdk, binding the session
// it opens). A refusal is answered before the body is read.
func (h *HTTPHandler) authorized(next http.Handler) http.Handler {
	if h.opts.NoAuth {
		return next
	}
	a := h.auth
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		tok = strings.TrimSpace(tok)
		if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
			a.challenge(w, "", "", a.scopes)
			refuse(w, http.StatusUnauthorized, "openclaw mcp proxy: missing bearer token (Authorization: Bearer <token>)")
			return
		}
		// Hashes compare in constant time whatever the lengths.
		got := sha256.Sum256([]byte(tok))
		if a.single {
			if subtle.ConstantTimeCompare(got[:], a.hash[:]) == 1 {
				if a.identities() {
					// Beside tokens that name identities, the sessions the
					// anonymous token opens are bound too, so that no
					// identity takes one over (nor it an identity's).
					withAnonymousTokenInfo(next).ServeHTTP(w, r)
					return
				}
				next.ServeHTTP(w, r)
				return
			}
		}
		id := a.tokens[got]
		if id == nil && a.oauth != nil {
			var err error
			if id, err = a.oauth.Verify(r.Context(), tok); err != nil {
				a.challenge(w, "invalid_token", err.Error(), nil)
				refuse(w, http.StatusUnauthorized, "openclaw mcp proxy: invalid bearer token: "+err.Error())
				return
			}
		}
		if id == nil {
			a.challenge(w, "invalid_token", "unknown token", nil)
			refuse(w, http.StatusUnauthorized, "openclaw mcp proxy: invalid bearer token")
			return
		}
		if missing := missingScopes(id, a.scopes); len(missing) > 0 {
			a.challenge(w, "insufficient_scope", "the token lacks scope "+strings.Join(missing, " "), a.scopes)
			refuse(w, http.StatusForbidden, fmt.Sprintf("openclaw mcp proxy: insufficient scope: %s needs scope %q", r.URL.Path, strings.Join(missing, " ")))
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), identityKey{}, id))
		withTokenInfo(next).ServeHTTP(w, r)
	})
}

// missingScopes returns the scopes of want that id lacks.
func missingScopes(id *policies.Identity, want []string) []string {
	var missing []string
	for _, s := range want {
		if !slices.Contains(id.Scopes, s) {
			missing = append(missing, s)
		}
	}
	return missing
}

// refuseCallScope answers 403 insufficient_scope when msgs hold a
// tools/call and the request's identity lacks a scope HTTPOptions.CallScopes
// requires; it reports whether it refused.
func (h *HTTPHandler) refuseCallScope(w http.ResponseWriter, r *http.Request, msgs []jsonrpc.Message) bool {
	id := requestIdentity(r.Context())
	if id == nil || len(h.auth.call) == 0 {
		return false
	}
	for _, m := range msgs {
		req, ok := m.(*jsonrpc.Request)
		if !ok || req.Method != "tools/call" {
			continue
		}
		missing := missingScopes(id, h.auth.call)
		if len(missing) == 0 {
			return false
		}
		h.auth.challenge(w, "insufficient_scope", "tools/call needs scope "+strings.Join(missing, " "), append(slices.Clone(h.auth.scopes), h.auth.call...))
		writeRPCError(w, http.StatusForbidden, req.ID, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("insufficient scope: tools/call needs scope %q; the token of %q has %q", strings.Join(missing, " "), id.Subject, strings.Join(id.Scopes, " ")))
		return true
	}
	return false
}

// newAuthState resolves the token options of opts.
func newAuthState(opts *HTTPOptions) (*authState, error) {
	a := &authState{single: opts.Token != "", oauth: opts.OAuth, scopes: opts.Scopes, call: opts.CallScopes}
	a.hash = sha256.Sum256([]byte(opts.Token))
	if len(opts.Tokens) > 0 {
		a.tokens = make(map[[sha256.Size]byte]*policies.Identity, len(opts.Tokens))
		for i := range opts.Tokens {
			st := &opts.Tokens[i]
			if st.SHA256 == a.hash && a.single {
				return nil, fmt.Errorf("proxy: tokens file entry %q has the bearer token of --token-file", st.Identity.Subject)
			}
			id := st.Identity
			a.tokens[st.SHA256] = &id
		}
	}
	if a.oauth != nil {
		a.metadata = a.oauth.MetadataURL()
	}
	return a, nil
}

// resourceMetadataURL is where the metadata of resource (a URL) is served:
// its origin, PathProtectedResource, then its path (RFC 9728 §3.1).
func resourceMetadataURL(resource string) (string, error) {
	u, err := url.Parse(resource)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("audience %q: want the proxy's URL, e.g. https://mcp.example.com/mcp (no query or fragment)", resource)
	}
	return u.Scheme + "://" + u.Host + PathProtectedResource + strings.TrimSuffix(u.Path, "/"), nil
}

// protectedResource serves the metadata of the resource the verifier
// guards.
func protectedResource(v *OAuthVerifier, scopes []string) http.Handler {
	return auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               v.opts.Audience,
		AuthorizationServers:   []string{v.opts.Issuer},
		ScopesSupported:        scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "openclaw mcp proxy",
	})
}

// errLegacySSEIdentity refuses legacy SSE when tokens name identities.
var errLegacySSEIdentity = errors.New("openclaw mcp proxy: legacy SSE (/sse, MCP 2024-11-05) is not served when tokens name identities (--auth-issuer, --tokens-file): its sessions cannot be bound to one; use streamable HTTP on /mcp")
