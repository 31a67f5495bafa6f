package protocol

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DeviceIdentity is an Ed25519 device key as OpenClaw uses it to sign the
// connect handshake (docs/protocol-facts.md, Device identity). ID is the lowercase hex SHA-256 of the raw 32-byte
// public key.
type DeviceIdentity struct {
	ID         string
	PublicKey  ed25519.PublicKey
	PrivateKey ed25519.PrivateKey
}

// deviceFile is the on-disk JSON form, the same shape OpenClaw's own
// tooling accepts ({deviceId, publicKeyPem, privateKeyPem}; SPKI and PKCS#8).
type deviceFile struct {
	DeviceID      string `json:"deviceId"`
	PublicKeyPem  string `json:"publicKeyPem"`
	PrivateKeyPem string `json:"privateKeyPem"`
}

// NewDeviceIdentity generates a fresh Ed25519 identity.
func NewDeviceIdentity() (*DeviceIdentity, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("protocol: generating device key: %w", err)
	}
	return &DeviceIdentity{ID: DeviceID(pub), PublicKey: pub, PrivateKey: priv}, nil
}

// DeviceID returns the lowercase hex SHA-256 of a raw public key.
func DeviceID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:])
}

// LoadOrCreateDeviceIdentity reads the identity stored at path, or creates
// one there (mode 0600, parent folders 0700) when the file does not exist.
// Processes that start together (two MCP clients spawning `mcp serve`)
// end up with the same identity: the file is created whole and never
// replaced (a temporary file linked to path), and a process that finds it
// created meanwhile uses the stored one.
func LoadOrCreateDeviceIdentity(path string) (*DeviceIdentity, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		return ParseDeviceIdentity(data)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("protocol: reading device identity: %w", err)
	}
	id, err := NewDeviceIdentity()
	if err != nil {
		return nil, err
	}
	out, err := id.MarshalJSON()
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("protocol: storing device identity: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("protocol: storing device identity: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(out)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("protocol: storing device identity: %w", err)
	}
	switch err := os.Link(tmp, path); {
	case errors.Is(err, os.ErrExist):
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("protocol: reading device identity: %w", err)
		}
		return ParseDeviceIdentity(data)
	case err != nil:
		return nil, fmt.Errorf("protocol: storing device identity: %w", err)
	}
	return id, nil
}

// ParseDeviceIdentity reads the JSON form {deviceId, publicKeyPem,
// privateKeyPem}. It checks that the keys are Ed25519, that they belong
// together and that deviceId matches the public key.
func ParseDeviceIdentity(data []byte) (*DeviceIdentity, error) {
	var f deviceFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("protocol: device identity: %w", err)
	}
	block, _ := pem.Decode([]byte(f.PrivateKeyPem))
	if block == nil {
		return nil, errors.New("protocol: device identity: privateKeyPem is not PEM")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("protocol: device identity: %w", err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, errors.New("protocol: device identity: private key is not Ed25519")
	}
	pub := priv.Public().(ed25519.PublicKey)
	id := DeviceID(pub)
	if f.DeviceID != "" && f.DeviceID != id {
		return nil, fmt.Errorf("protocol: device identity: deviceId %s does not match its key (%s)", f.DeviceID, id)
	}
	return &DeviceIdentity{ID: id, PublicKey: pub, PrivateKey: priv}, nil
}

// MarshalJSON writes the {deviceId, publicKeyPem, privateKeyPem} form with
// canonical 64-column PEMs.
func (d *DeviceIdentity) MarshalJSON() ([]byte, error) {
	spki, err := x509.MarshalPKIXPublicKey(d.PublicKey)
	if err != nil {
		return nil, err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(d.PrivateKey)
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(deviceFile{
		DeviceID:      d.ID,
		PublicKeyPem:  string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: spki})),
		PrivateKeyPem: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})),
	}, "", "  ")
}

// SignedFields are the inputs of the v3 device signature string.
type SignedFields struct {
	DeviceID     string
	ClientID     string
	ClientMode   string
	Role         string
	Scopes       []string
	SignedAtMs   int64
	Token        string // auth.token, else deviceToken, else bootstrapToken, else ""
	Nonce        string
	Platform     string
	DeviceFamily string
}

// V3String is the UTF-8 string a device signs, fields joined with "|":
// v3|deviceId|clientId|mode|role|scopes,joined|signedAtMs|token|nonce|platform|deviceFamily,
// with platform and deviceFamily trimmed and ASCII-lowercased.
func (s SignedFields) V3String() string {
	return strings.Join([]string{"v3", s.DeviceID, s.ClientID, s.ClientMode, s.Role,
		strings.Join(s.Scopes, ","), strconv.FormatInt(s.SignedAtMs, 10), s.Token, s.Nonce,
		asciiLower(strings.TrimSpace(s.Platform)), asciiLower(strings.TrimSpace(s.DeviceFamily))}, "|")
}

// V2String is the legacy signed string, which stops after the nonce.
func (s SignedFields) V2String() string {
	return strings.Join([]string{"v2", s.DeviceID, s.ClientID, s.ClientMode, s.Role,
		strings.Join(s.Scopes, ","), strconv.FormatInt(s.SignedAtMs, 10), s.Token, s.Nonce}, "|")
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return string(b)
}

// TokenForSignature picks the token the signature covers (docs/protocol-facts.md, Device identity).
func TokenForSignature(a *Auth) string {
	if a == nil {
		return ""
	}
	switch {
	case a.Token != "":
		return a.Token
	case a.DeviceToken != "":
		return a.DeviceToken
	default:
		return a.BootstrapToken
	}
}

var b64 = base64.RawURLEncoding

// Prove signs the connect fields and returns the "device" object. s.DeviceID
// is filled in from d.
func (d *DeviceIdentity) Prove(s SignedFields) *DeviceProof {
	s.DeviceID = d.ID
	sig := ed25519.Sign(d.PrivateKey, []byte(s.V3String()))
	return &DeviceProof{ID: d.ID, PublicKey: b64.EncodeToString(d.PublicKey),
		Signature: b64.EncodeToString(sig), SignedAt: s.SignedAtMs, Nonce: s.Nonce}
}

// Device-auth failure reasons, as the Gateway reports them in
// error.details.reason (docs/protocol-facts.md, Device identity).
const (
	ReasonDeviceIDMismatch       = "device-id-mismatch"
	ReasonSignatureStale         = "device-signature-stale"
	ReasonNonceMissing           = "device-nonce-missing"
	ReasonNonceMismatch          = "device-nonce-mismatch"
	ReasonSignature              = "device-signature"
	ReasonDevicePublicKey        = "device-public-key"
	MaxSignatureSkewMs     int64 = 120000
)

// VerifyConnect checks a connect request's device proof the way the Gateway
// does, in the Gateway's order, and returns "" when it holds or one of the
// Reason* values. nowMs is the verifier's clock in Unix milliseconds;
// expectedNonce is the challenge nonce it sent.
func VerifyConnect(p *ConnectParams, expectedNonce string, nowMs int64) string {
	dev := p.Device
	raw, err := b64.DecodeString(strings.TrimRight(dev.PublicKey, "="))
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return ReasonDevicePublicKey
	}
	if DeviceID(raw) != dev.ID {
		return ReasonDeviceIDMismatch
	}
	if d := nowMs - dev.SignedAt; d > MaxSignatureSkewMs || d < -MaxSignatureSkewMs {
		return ReasonSignatureStale
	}
	if dev.Nonce == "" {
		return ReasonNonceMissing
	}
	if dev.Nonce != expectedNonce {
		return ReasonNonceMismatch
	}
	sig, err := b64.DecodeString(strings.TrimRight(dev.Signature, "="))
	if err != nil {
		return ReasonSignature
	}
	f := SignedFields{DeviceID: dev.ID, ClientID: p.Client.ID, ClientMode: p.Client.Mode, Role: p.Role,
		Scopes: p.Scopes, SignedAtMs: dev.SignedAt, Token: TokenForSignature(p.Auth), Nonce: dev.Nonce,
		Platform: p.Client.Platform, DeviceFamily: p.Client.DeviceFamily}
	if ed25519.Verify(raw, []byte(f.V3String()), sig) || ed25519.Verify(raw, []byte(f.V2String()), sig) {
		return ""
	}
	return ReasonSignature
}
