package sharedstate

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/openclaw-go/openclaw/internal/oauthcred"
)

// The keys of the upstream OAuth tokens: oauthPrefix, the server's id and
// the principal's id (oauthcred.ID), so that every principal
// of one server is found by one SCAN; the refresh locks take
// oauthLockPrefix instead.
const (
	oauthPrefix     = KeyPrefix + "oauth:"
	oauthLockPrefix = KeyPrefix + "oauth-lock:"
)

// OAuthLockTTL is how long a replica's refresh lock on one set of tokens
// lives in Redis unless renewed or released: the holder renews it every
// third of that while its refresh goes on, so a replica that dies while
// refreshing holds up the others that long at most. A replica waits up to
// twice as long for another's lock.
const OAuthLockTTL = 10 * time.Second

// MinOAuthKeyBytes is the shortest key [State.OAuthTokens] accepts (the
// --request-state-key-file key of the replicas).
const MinOAuthKeyBytes = 32

// HKDF infos of the two values derived from the replicas' key: the
// AES-256-GCM key of the token records, and its id, which each record
// names so that a replica given another key says so.
const (
	oauthKeyInfo   = "openclaw-go mcp proxy: upstream OAuth token records, AES-256-GCM key"
	oauthKeyIDInfo = "openclaw-go mcp proxy: upstream OAuth token records, key id"
)

// OAuthTokens is the oauthcred.Backend of the upstream OAuth tokens
// the replicas share: one record per (server, principal) in Redis, its
// credentials sealed with AES-256-GCM under a key derived with HKDF-SHA256
// from the replicas' key, bound to its version, key id and Redis key (a
// record copied to another key does not open); one refresh at a time per
// record across replicas (a SET NX PX lock, released by compare and
// delete). Errors are [*Error]s naming Redis, or say why a record is
// refused; none quotes a token.
type OAuthTokens struct {
	s       *State
	aead    cipher.AEAD
	keyID   string
	lockTTL time.Duration // OAuthLockTTL (tests shorten it)
}

var _ oauthcred.Backend = (*OAuthTokens)(nil)

// OAuthTokens returns the token backend on s whose records are sealed
// under key (at least [MinOAuthKeyBytes]; replicas sharing records need
// the same key).
func (s *State) OAuthTokens(key []byte) (*OAuthTokens, error) {
	if len(key) < MinOAuthKeyBytes {
		return nil, fmt.Errorf("shared state: the key of the OAuth token records has %d bytes; it needs at least %d", len(key), MinOAuthKeyBytes)
	}
	sub, err := hkdf.Key(sha256.New, key, nil, oauthKeyInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("shared state: deriving the key of the OAuth token records: %w", err)
	}
	id, err := hkdf.Key(sha256.New, key, nil, oauthKeyIDInfo, 8)
	if err != nil {
		return nil, fmt.Errorf("shared state: deriving the key id of the OAuth token records: %w", err)
	}
	block, err := aes.NewCipher(sub)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &OAuthTokens{s: s, aead: aead, keyID: hex.EncodeToString(id), lockTTL: OAuthLockTTL}, nil
}

// KeyID is the id of the key the records are sealed under (not secret:
// 16 hex digits derived from it), which [OAuthTokens] errors name.
func (o *OAuthTokens) KeyID() string { return o.keyID }

// oauthRecord is a token record as stored: the credentials
// (oauthcred.Credentials as JSON) sealed with AES-256-GCM.
type oauthRecord struct {
	V int `json:"v"`
	// KeyID names the key the record is sealed under ([OAuthTokens.KeyID]).
	KeyID string `json:"kid"`
	// Nonce is the GCM nonce, Sealed the ciphertext and tag (base64).
	Nonce  []byte `json:"nonce"`
	Sealed []byte `json:"sealed"`
}

// oauthKey is the Redis key of the credentials of principal at server.
func oauthKey(prefix, server, serverURL, principal string) string {
	sid, pid := oauthcred.ID(server, serverURL, principal)
	if pid == "" {
		pid = "shared"
	}
	return prefix + sid + ":" + pid
}

// additionalData binds a record to its version, key id and Redis key.
func additionalData(v int, keyID, redisKey string) []byte {
	return []byte("openclaw-go oauth token\x00v" + strconv.Itoa(v) + "\x00" + keyID + "\x00" + redisKey)
}

// seal is the record of c at redisKey.
func (o *OAuthTokens) seal(c *oauthcred.Credentials, redisKey string) []byte {
	plain, err := json.Marshal(c)
	if err != nil {
		panic("sharedstate: credentials do not encode: " + err.Error()) // strings, numbers and times only
	}
	nonce := make([]byte, o.aead.NonceSize())
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails
	rec := oauthRecord{V: RecordVersion, KeyID: o.keyID, Nonce: nonce}
	rec.Sealed = o.aead.Seal(nil, nonce, plain, additionalData(rec.V, rec.KeyID, redisKey))
	return encodeRecord(rec)
}

// errRefused is the error of a token record that does not open.
func errRefused(redisKey, why string) error {
	return fmt.Errorf("shared state: the OAuth token record %s in Redis is refused: %s", redisKey, why)
}

// open reads the record raw stored at redisKey: its credentials, which
// must be those of server and principal. The error says why a record is
// refused: not one this package writes, a newer release's (a
// [*VersionError]), sealed under another key, or altered or moved from
// another key.
func (o *OAuthTokens) open(raw []byte, redisKey, server, principal string) (*oauthcred.Credentials, error) {
	var rec oauthRecord
	if err := decodeRecord("OAuth token", raw, &rec); err != nil {
		return nil, err
	}
	switch {
	case rec.KeyID != o.keyID:
		return nil, errRefused(redisKey, fmt.Sprintf("sealed under the key with id %q, not this replica's %q (give every replica the same --request-state-key-file)", rec.KeyID, o.keyID))
	case len(rec.Nonce) != o.aead.NonceSize():
		return nil, errRefused(redisKey, "its nonce is not 12 bytes")
	}
	plain, err := o.aead.Open(nil, rec.Nonce, rec.Sealed, additionalData(rec.V, rec.KeyID, redisKey))
	if err != nil {
		return nil, errRefused(redisKey, "it does not decrypt: altered, or moved from another key")
	}
	var c oauthcred.Credentials
	if err := json.Unmarshal(plain, &c); err != nil {
		return nil, errRefused(redisKey, "its credentials do not parse")
	}
	if c.Server != server || c.Principal != principal {
		return nil, errRefused(redisKey, "it holds the credentials of another server or principal")
	}
	return &c, nil
}

// LoadToken implements oauthcred.Backend.
func (o *OAuthTokens) LoadToken(ctx context.Context, server, serverURL, principal string) (*oauthcred.Credentials, error) {
	k := oauthKey(oauthPrefix, server, serverURL, principal)
	raw, err := o.s.client.Get(ctx, k).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, nil
	case err != nil:
		return nil, o.s.wrap("OAuth token", err)
	}
	return o.open(raw, k, server, principal)
}

// SaveToken implements oauthcred.Backend: one SET of the sealed
// record, which never expires (a logout deletes it).
func (o *OAuthTokens) SaveToken(ctx context.Context, c *oauthcred.Credentials) error {
	cc := *c
	cc.Saved = time.Now().UTC()
	k := oauthKey(oauthPrefix, c.Server, c.ServerURL, c.Principal)
	return o.s.wrap("OAuth token", o.s.client.Set(ctx, k, o.seal(&cc, k), 0).Err())
}

// DeleteToken implements oauthcred.Backend.
func (o *OAuthTokens) DeleteToken(ctx context.Context, server, serverURL, principal string) (bool, error) {
	n, err := o.s.client.Del(ctx, oauthKey(oauthPrefix, server, serverURL, principal)).Result()
	if err != nil {
		return false, o.s.wrap("OAuth token", err)
	}
	return n > 0, nil
}

// DeleteAll removes the records of server (serverURL): its shared tokens
// and those of every principal, found with SCAN, and returns how many it
// removed.
func (o *OAuthTokens) DeleteAll(ctx context.Context, server, serverURL string) (int, error) {
	sid, _ := oauthcred.ID(server, serverURL, "")
	n := 0
	iter := o.s.client.Scan(ctx, 0, oauthPrefix+sid+":*", 100).Iterator()
	for iter.Next(ctx) {
		d, err := o.s.client.Del(ctx, iter.Val()).Result()
		if err != nil {
			return n, o.s.wrap("OAuth token", err)
		}
		n += int(d)
	}
	return n, o.s.wrap("OAuth token", iter.Err())
}

// unlockScript deletes KEYS[1] if it still holds ARGV[1]: a lock that
// expired and was taken by another replica stays its.
var unlockScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// renewScript gives KEYS[1] another ARGV[2] milliseconds if it still
// holds ARGV[1]; 0 when it does not (the lock was lost).
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// unlockTimeout bounds the release of a refresh lock.
const unlockTimeout = time.Second

// LockToken implements oauthcred.Backend: SET NX PX [OAuthLockTTL]
// with a random value, tried again (5 ms doubling up to 100 ms) while
// another replica holds it, for up to twice OAuthLockTTL. While held, the
// lock is renewed every third of its TTL until unlock (compare and
// delete) or until ctx is done, so that a refresh slower than the TTL
// still has it alone. A replica that waited then reads the tokens the
// other one saved.
func (o *OAuthTokens) LockToken(ctx context.Context, server, serverURL, principal string) (func(), error) {
	k := oauthKey(oauthLockPrefix, server, serverURL, principal)
	token := rand.Text()
	maxWait := 2 * o.lockTTL
	deadline := time.Now().Add(maxWait)
	wait := 5 * time.Millisecond
	for {
		ok, err := o.s.client.SetNX(ctx, k, token, o.lockTTL).Result()
		if err != nil {
			return nil, o.s.wrap("OAuth refresh lock", err)
		}
		if ok {
			stop, stopped := make(chan struct{}), make(chan struct{})
			go o.renewLock(ctx, k, token, stop, stopped)
			return sync.OnceFunc(func() {
				close(stop)
				<-stopped
				uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
				defer cancel()
				// Unreleased, the lock expires after its TTL.
				_ = unlockScript.Run(uctx, o.s.client, []string{k}, token).Err()
			}), nil
		}
		if time.Now().After(deadline) {
			return nil, o.s.wrap("OAuth refresh lock", fmt.Errorf("other replicas have held the refresh lock of server %q for over %v", server, maxWait))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// renewLock renews the refresh lock k, holding token, every third of its
// TTL until stop is closed, ctx is done or the lock is found lost (a
// failed renewal is tried again on the next tick: the lock lives a full
// TTL after the last one that passed); it closes stopped when it ends.
func (o *OAuthTokens) renewLock(ctx context.Context, k, token string, stop <-chan struct{}, stopped chan<- struct{}) {
	defer close(stopped)
	tick := time.NewTicker(o.lockTTL / 3)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rctx, cancel := context.WithTimeout(ctx, o.lockTTL/3)
		held, err := renewScript.Run(rctx, o.s.client, []string{k}, token, o.lockTTL.Milliseconds()).Int()
		cancel()
		if err == nil && held == 0 {
			return
		}
	}
}
