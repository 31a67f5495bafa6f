package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/sync/singleflight"

	"github.com/openclaw-go/openclaw/policies"
)

// DefaultLeeway is the clock skew OAuthOptions.Leeway defaults to: a token
// is accepted up to this long after its exp and before its nbf or iat.
const DefaultLeeway = 30 * time.Second

// DefaultJWKSRefresh is the shortest interval between two fetches of the
// issuer's JWKS (OAuthOptions.MinRefresh): a token whose key id the cached
// set does not know makes the verifier fetch it again, at most this often.
const DefaultJWKSRefresh = 30 * time.Second

// jwksMaxAge is how long a fetched JWKS is used before it is fetched again
// on the next verification (a key the issuer withdrew stops verifying).
const jwksMaxAge = time.Hour

// maxMetadataBytes caps the discovery document and the JWKS read.
const maxMetadataBytes = 1 << 20

// OAuthOptions configure [NewOAuthVerifier]: the proxy as an OAuth 2.1
// resource server (MCP authorization) accepting JWT access tokens.
type OAuthOptions struct {
	// Issuer is the authorization server's issuer URL; its OpenID
	// Connect discovery document (Issuer + /.well-known/openid-configuration)
	// names the JWKS and the signing algorithms. Required.
	Issuer string
	// Audience is the proxy's resource identifier, its public URL (e.g.
	// https://mcp.example.com/mcp): a token's aud must contain it (RFC
	// 8707, MCP authorization), and it is the resource of the protected
	// resource metadata. Required.
	Audience string
	// Claims are the further claims copied into policies.Identity.Claims
	// when a token carries them (e.g. "groups").
	Claims []string
	// Leeway is the clock skew allowed on exp, nbf and iat; 0 means
	// DefaultLeeway, a negative value none.
	Leeway time.Duration
	// MinRefresh is the shortest interval between two JWKS fetches
	// triggered by an unknown key id; 0 or less means DefaultJWKSRefresh.
	MinRefresh time.Duration
	// HTTPClient fetches the discovery document and the JWKS; nil means
	// a client with a 10 s timeout.
	HTTPClient *http.Client
	// Now is the verifier's clock; nil means time.Now.
	Now func() time.Time
}

// OAuthVerifier verifies JWT access tokens of one issuer for one audience.
// It is safe for concurrent use.
type OAuthVerifier struct {
	opts     OAuthOptions
	keys     *keySet
	metadata string // resource_metadata URL

	mu       sync.Mutex
	verified map[[sha256.Size]byte]verifiedToken // by the token's SHA-256
}

// verifiedToken is a token Verify accepted: what it names, until when, and
// the key that signed it.
type verifiedToken struct {
	id       *policies.Identity
	nbf, exp time.Time
	kid      string
}

// maxVerified bounds the verified tokens kept; at the bound the expired
// ones are dropped, and all of them if none was.
const maxVerified = 4096

// NewOAuthVerifier discovers the issuer (go-oidc: the discovery document's
// issuer must be Issuer) and fetches its JWKS once, so that a wrong issuer
// fails at start. The signing algorithms are the discovery document's
// id_token_signing_alg_values_supported (never "none" nor an HMAC one;
// RS256 when it names none).
func NewOAuthVerifier(ctx context.Context, opts *OAuthOptions) (*OAuthVerifier, error) {
	o := *opts
	if o.Issuer == "" || o.Audience == "" {
		return nil, errors.New("proxy: OAuth needs an issuer and an audience (--auth-issuer, --auth-audience)")
	}
	meta, err := resourceMetadataURL(o.Audience)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	if o.Leeway == 0 {
		o.Leeway = DefaultLeeway
	} else if o.Leeway < 0 {
		o.Leeway = 0
	}
	if o.MinRefresh <= 0 {
		o.MinRefresh = DefaultJWKSRefresh
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, o.HTTPClient), o.Issuer)
	if err != nil {
		return nil, fmt.Errorf("proxy: OAuth issuer %s: discovery: %w", o.Issuer, err)
	}
	var disc struct {
		JWKSURI string   `json:"jwks_uri"`
		Algs    []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := provider.Claims(&disc); err != nil || disc.JWKSURI == "" {
		return nil, fmt.Errorf("proxy: OAuth issuer %s: the discovery document names no jwks_uri", o.Issuer)
	}
	ks := &keySet{url: disc.JWKSURI, client: o.HTTPClient, minRefresh: o.MinRefresh, now: o.Now}
	for _, a := range disc.Algs {
		// An access token is signed with the issuer's private key: "none"
		// and shared-secret algorithms have no place here.
		if !strings.EqualFold(a, "none") && !strings.HasPrefix(strings.ToUpper(a), "HS") {
			ks.algs = append(ks.algs, jose.SignatureAlgorithm(a))
		}
	}
	if len(ks.algs) == 0 {
		ks.algs = []jose.SignatureAlgorithm{jose.RS256}
	}
	if _, err := ks.fetch(ctx); err != nil {
		return nil, fmt.Errorf("proxy: OAuth issuer %s: %w", o.Issuer, err)
	}
	return &OAuthVerifier{opts: o, keys: ks, metadata: meta, verified: map[[sha256.Size]byte]verifiedToken{}}, nil
}

// JWKSFetches returns how many fetches of the issuer's JWKS (at start, on
// an unknown key id, after its maximum age) succeeded, and how many failed.
func (v *OAuthVerifier) JWKSFetches() (ok, failed uint64) {
	return v.keys.fetchOK.Load(), v.keys.fetchFailed.Load()
}

// jwksLoaded is the "oauth" [ReadyCheck]: the issuer's discovery document
// was read and its JWKS fetched at least once.
func (v *OAuthVerifier) jwksLoaded() error {
	v.keys.mu.Lock()
	defer v.keys.mu.Unlock()
	if !v.keys.loaded {
		return fmt.Errorf("the JWKS of issuer %s has not been fetched", v.opts.Issuer)
	}
	return nil
}

// MetadataURL returns the URL of the protected resource metadata, named in
// the WWW-Authenticate of every refusal.
func (v *OAuthVerifier) MetadataURL() string { return v.metadata }

// Verify checks a JWT access token (go-jose): one signature, by a key of
// the issuer's JWKS, with an algorithm the issuer announces (never
// "none"); iss (must be Issuer), aud (must contain Audience), exp
// (required), nbf and iat with the leeway, and sub (required). It returns
// the identity the token names; the error says what was wrong, for the
// client's WWW-Authenticate.
//
// A token verified once is known by its SHA-256 until its exp: a request
// with it again costs a hash and a lookup, while exp and nbf are checked
// again and the key that signed it must still be in the issuer's JWKS.
func (v *OAuthVerifier) Verify(ctx context.Context, token string) (*policies.Identity, error) {
	sum := sha256.Sum256([]byte(token))
	now := v.opts.Now()
	v.mu.Lock()
	seen, ok := v.verified[sum]
	v.mu.Unlock()
	if ok && !now.Add(v.opts.Leeway).Before(seen.nbf) && !now.Add(-v.opts.Leeway).After(seen.exp) && v.keys.has(seen.kid) {
		return seen.id, nil
	}
	payload, kid, err := v.keys.verify(ctx, token)
	if err != nil {
		return nil, err
	}
	var c jwt.Claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, fmt.Errorf("the token's registered claims do not decode: %w", err)
	}
	if c.Expiry == nil {
		return nil, errors.New("the token has no exp claim")
	}
	e := jwt.Expected{Issuer: v.opts.Issuer, AnyAudience: []string{v.opts.Audience}, Time: now}
	switch err := c.ValidateWithLeeway(e, v.opts.Leeway); {
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return nil, fmt.Errorf("the token is issued by %q, not %q", c.Issuer, v.opts.Issuer)
	case errors.Is(err, jwt.ErrInvalidAudience):
		return nil, fmt.Errorf("the token is for audience %q, not %q", []string(c.Audience), v.opts.Audience)
	case errors.Is(err, jwt.ErrExpired):
		return nil, fmt.Errorf("the token expired at %s", c.Expiry.Time().UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrNotValidYet):
		return nil, fmt.Errorf("the token is not valid before %s", c.NotBefore.Time().UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return nil, fmt.Errorf("the token is issued in the future (%s)", c.IssuedAt.Time().UTC().Format(time.RFC3339))
	case err != nil:
		return nil, err
	}
	id, err := identityFromClaims(payload, v.opts.Claims)
	if err != nil {
		return nil, err
	}
	vt := verifiedToken{id: id, exp: c.Expiry.Time(), kid: kid}
	if c.NotBefore != nil {
		vt.nbf = c.NotBefore.Time()
	}
	v.mu.Lock()
	if len(v.verified) >= maxVerified {
		maps.DeleteFunc(v.verified, func(_ [sha256.Size]byte, t verifiedToken) bool { return now.Add(-v.opts.Leeway).After(t.exp) })
		if len(v.verified) >= maxVerified {
			clear(v.verified)
		}
	}
	v.verified[sum] = vt
	v.mu.Unlock()
	return id, nil
}

// identityFromClaims maps a verified token's claims to the identity:
// iss, sub (required, a non-empty string), client_id (else azp), the
// scopes of "scope" (space separated) or "scp" (a string or an array of
// strings), and the named claims present. A claim of the wrong type is an
// error naming it.
func identityFromClaims(payload []byte, names []string) (*policies.Identity, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(payload, &m); err != nil {
		return nil, fmt.Errorf("the token's claims are not a JSON object: %w", err)
	}
	str := func(name string) (string, error) {
		raw, ok := m[name]
		if !ok || string(raw) == "null" {
			return "", nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("the token's %s claim is not a string", name)
		}
		return s, nil
	}
	id := &policies.Identity{}
	var err error
	if id.Issuer, err = str("iss"); err != nil {
		return nil, err
	}
	if id.Subject, err = str("sub"); err != nil {
		return nil, err
	}
	if id.Subject == "" {
		return nil, errors.New("the token has no sub claim")
	}
	if id.ClientID, err = str("client_id"); err != nil {
		return nil, err
	}
	if id.ClientID == "" {
		if id.ClientID, err = str("azp"); err != nil {
			return nil, err
		}
	}
	scope, err := str("scope")
	if err != nil {
		return nil, err
	}
	id.Scopes = strings.Fields(scope)
	if raw, ok := m["scp"]; ok && len(id.Scopes) == 0 {
		var list []string
		if json.Unmarshal(raw, &list) != nil {
			s, err := str("scp")
			if err != nil {
				return nil, errors.New("the token's scp claim is neither a string nor an array of strings")
			}
			list = strings.Fields(s)
		}
		id.Scopes = list
	}
	for _, n := range names {
		if raw, ok := m[n]; ok {
			if id.Claims == nil {
				id.Claims = map[string]json.RawMessage{}
			}
			id.Claims[n] = raw
		}
	}
	return id, nil
}

// keySet is the issuer's JWKS: cached, fetched again when a token names a
// key id it does not hold (key rotation), at most once per minRefresh
// whatever the tokens, and after jwksMaxAge. A key whose "use" is not
// "sig", or whose "alg" is not the token's, never verifies.
type keySet struct {
	url        string
	client     *http.Client
	algs       []jose.SignatureAlgorithm
	minRefresh time.Duration
	now        func() time.Time

	group   singleflight.Group
	mu      sync.Mutex
	keys    []jose.JSONWebKey
	fetched time.Time
	loaded  bool // a fetch has succeeded

	fetchOK, fetchFailed atomic.Uint64 // JWKS fetches that succeeded, and those that failed
}

// has reports whether the cached set holds a key of id kid.
func (k *keySet) has(kid string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := range k.keys {
		if k.keys[i].KeyID == kid {
			return true
		}
	}
	return false
}

// verify parses the compact JWS raw, allowing only the issuer's
// algorithms, and returns its payload once a key of the set verifies it,
// with that key's id.
func (k *keySet) verify(ctx context.Context, raw string) (payload []byte, kid string, err error) {
	jws, err := jose.ParseSignedCompact(raw, k.algs)
	if err != nil {
		return nil, "", fmt.Errorf("malformed jwt: %w", err)
	}
	h := jws.Signatures[0].Header // compact serialization: exactly one
	k.mu.Lock()
	keys, age := k.keys, k.now().Sub(k.fetched)
	k.mu.Unlock()
	if age < jwksMaxAge {
		if p, kid, known := verifyWith(jws, keys, h); p != nil {
			return p, kid, nil
		} else if known && h.KeyID != "" {
			return nil, "", fmt.Errorf("signature does not verify with key %q of the issuer", h.KeyID)
		}
	}
	if age < k.minRefresh {
		return nil, "", fmt.Errorf("signature does not verify: no key of the issuer's JWKS is %q (fetched %v ago; fetched again at most every %v)", h.KeyID, age.Round(time.Second), k.minRefresh)
	}
	if keys, err = k.fetch(ctx); err != nil {
		return nil, "", err
	}
	if p, kid, _ := verifyWith(jws, keys, h); p != nil {
		return p, kid, nil
	}
	return nil, "", fmt.Errorf("signature does not verify with any key of the issuer (key id %q)", h.KeyID)
}

// verifyWith verifies jws with the key of keys h names (any usable key
// when h names none), returning the payload and the key's id; known
// reports whether a key has h's key id.
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, h jose.Header) (payload []byte, kid string, known bool) {
	for i := range keys {
		key := &keys[i]
		if h.KeyID != "" && key.KeyID != h.KeyID {
			continue
		}
		known = true
		if (key.Use != "" && key.Use != "sig") || (key.Algorithm != "" && key.Algorithm != h.Algorithm) {
			continue
		}
		if p, err := jws.Verify(key); err == nil {
			return p, key.KeyID, true
		}
	}
	return nil, "", known
}

// fetch reads the JWKS (one fetch at a time) and caches it.
func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	ch := k.group.DoChan("jwks", func() (keys any, err error) {
		defer func() {
			if err != nil {
				k.fetchFailed.Add(1)
			} else {
				k.fetchOK.Add(1)
			}
		}()
		req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodGet, k.url, nil)
		if err != nil {
			return nil, err
		}
		resp, err := k.client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("fetching the JWKS %s: %w", k.url, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes))
		if err != nil {
			return nil, fmt.Errorf("fetching the JWKS %s: %w", k.url, err)
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("fetching the JWKS %s: %s", k.url, resp.Status)
		}
		var set jose.JSONWebKeySet
		if err := json.Unmarshal(body, &set); err != nil {
			return nil, fmt.Errorf("the JWKS %s does not decode: %w", k.url, err)
		}
		k.mu.Lock()
		k.keys, k.fetched, k.loaded = set.Keys, k.now(), true
		k.mu.Unlock()
		return set.Keys, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			k.mu.Lock()
			k.fetched = k.now() // a failing issuer is not asked again at once
			k.mu.Unlock()
			return nil, r.Err
		}
		return r.Val.([]jose.JSONWebKey), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
