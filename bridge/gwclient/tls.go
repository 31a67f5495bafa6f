package gwclient

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// ParseFingerprint normalizes a certificate pin in any of the forms OpenClaw
// accepts for gateway.remote.tlsFingerprint: 64 hex digits, optionally
// separated by colons, dashes or spaces ("AA:BB:…"), optionally prefixed
// "sha256:" or "SHA-256:", in either case. It returns the 32-byte SHA-256.
func ParseFingerprint(s string) ([]byte, error) {
	t := strings.TrimSpace(s)
	lower := strings.ToLower(t)
	for _, p := range []string{"sha256:", "sha-256:", "sha256/", "sha256="} {
		if strings.HasPrefix(lower, p) {
			t = t[len(p):]
			break
		}
	}
	t = strings.Map(func(r rune) rune {
		switch r {
		case ':', '-', ' ', '\t':
			return -1
		}
		return r
	}, t)
	b, err := hex.DecodeString(t)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("gwclient: TLS fingerprint %q is not a SHA-256 (64 hex digits)", s)
	}
	return b, nil
}

// fingerprintError reports a pinned-certificate mismatch.
type fingerprintError struct {
	Want, Got []byte
}

func (e *fingerprintError) Error() string {
	return fmt.Sprintf("%v: certificate sha256 is %s, pinned %s", ErrFingerprintMismatch, colonHex(e.Got), colonHex(e.Want))
}

func (e *fingerprintError) Unwrap() error { return ErrFingerprintMismatch }

func colonHex(b []byte) string {
	h := strings.ToUpper(hex.EncodeToString(b))
	var sb strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			sb.WriteByte(':')
		}
		sb.WriteString(h[i : i+2])
	}
	return sb.String()
}

// pinnedTLSConfig accepts exactly the leaf certificate whose DER hashes to
// pin, with no CA chain or host name check, as OpenClaw does for a pinned
// Gateway.
func pinnedTLSConfig(pin []byte) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by the pin check below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("gateway tls fingerprint unavailable: no peer certificate")
			}
			sum := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if subtle.ConstantTimeCompare(sum[:], pin) != 1 {
				return &fingerprintError{Want: pin, Got: sum[:]}
			}
			return nil
		},
	}
}
