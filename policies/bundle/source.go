package bundle

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/openclaw-go/openclaw/wasmhost"
)

// Reasons a bundle is refused, the reason label of the refusal metric.
const (
	ReasonUnsigned       = "unsigned"
	ReasonBadSignature   = "bad_signature"
	ReasonDigestMismatch = "digest_mismatch"
	ReasonInvalid        = "invalid_bundle"
	ReasonRollback       = "rollback"
	ReasonTestFailed     = "test_failed"
	ReasonModuleLoad     = "module_load"
)

// Refusal is a bundle refused for Reason (one of the Reason constants):
// it was not accepted and the running set stays.
type Refusal struct {
	Reason string
	Digest digest.Digest
	Err    error
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("bundle %s refused (%s): %v", r.Digest, r.Reason, r.Err)
}

func (r *Refusal) Unwrap() error { return r.Err }

// Source is a bundle reference that a process follows: where it is, the
// keys it must be signed with, the cache and the rollback rule.
type Source struct {
	Ref    Ref
	Keys   []TrustedKey
	Cache  *Cache
	Remote Remote
	// AllowRollback accepts a digest whose signature is not newer than
	// the accepted one's.
	AllowRollback bool
	// Host are the sandbox options the bundle's test cases run with.
	Host wasmhost.Options
}

// Resolve returns the digest the reference names in the registry now.
func (s *Source) Resolve(ctx context.Context) (digest.Digest, error) {
	desc, err := Resolve(ctx, s.Ref, s.Remote)
	if err != nil {
		return "", err
	}
	return desc.Digest, nil
}

// Fetch verifies the signature of digest d, applies the rollback rule
// against the cache's state, pulls the bundle checking its layers, stages
// it in the cache and runs its test cases. A refused bundle is a *Refusal; an
// error reaching the registry is returned as is. The caller swaps the
// accepted bundle in, then calls Cache.Commit (or Cache.Discard).
func (s *Source) Fetch(ctx context.Context, d digest.Digest) (*Accepted, error) {
	// The signature first: it is small, and it says whether the layers
	// are worth pulling.
	sigs, err := FetchSignatures(ctx, s.Ref, d, s.Remote)
	if errors.Is(err, ErrNotFound) {
		return nil, &Refusal{Reason: ReasonUnsigned, Digest: d, Err: err}
	}
	if errors.Is(err, ErrInvalid) {
		return nil, &Refusal{Reason: ReasonBadSignature, Digest: d, Err: err}
	}
	if err != nil {
		return nil, err
	}
	v, err := VerifySignatures(s.Ref, d, sigs, s.Keys)
	if err != nil {
		return nil, &Refusal{Reason: ReasonBadSignature, Digest: d, Err: err}
	}
	st, ok, err := s.Cache.State(s.Ref)
	if err != nil {
		return nil, err
	}
	if ok && st.Digest != d && v.Sequence <= st.Sequence && !s.AllowRollback {
		return nil, &Refusal{Reason: ReasonRollback, Digest: d, Err: fmt.Errorf(
			"%s names %s, signed with sequence %d, not newer than the accepted %s (sequence %d): a rollback (allow it with --allow-rollback, or sign the digest again)",
			s.Ref, d, v.Sequence, st.Digest, st.Sequence)}
	}
	ref := s.Ref
	ref.Digest = d
	p, err := Pull(ctx, ref, s.Remote)
	if err != nil {
		switch {
		case errors.Is(err, ErrDigestMismatch):
			return nil, &Refusal{Reason: ReasonDigestMismatch, Digest: d, Err: err}
		case errors.Is(err, ErrInvalid):
			return nil, &Refusal{Reason: ReasonInvalid, Digest: d, Err: err}
		}
		return nil, err
	}
	a, err := s.Cache.Stage(s.Ref, p, v)
	if err != nil {
		return nil, err
	}
	if err := s.Test(ctx, a); err != nil {
		s.Cache.Discard(a)
		return nil, err
	}
	return a, nil
}

// SignatureReason reports whether a refusal for reason depends on the
// digest's signatures, which can be added later (a bundle is often pushed,
// then signed), rather than on its content, which a digest fixes.
func SignatureReason(reason string) bool {
	return reason == ReasonUnsigned || reason == ReasonBadSignature || reason == ReasonRollback
}

// Test runs a staged or cached bundle's test cases; a failing case or a
// module that does not load is a *Refusal naming them.
func (s *Source) Test(ctx context.Context, a *Accepted) error {
	_, failed, err := RunCases(ctx, a.Dir, a.Bundle, s.Host)
	if err != nil {
		return &Refusal{Reason: ReasonModuleLoad, Digest: a.Digest, Err: err}
	}
	if len(failed) > 0 {
		var b strings.Builder
		for i, f := range failed {
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%s:%d %q: %s", f.File, f.Line, f.Name, strings.Join(f.Mismatches, ", "))
		}
		return &Refusal{Reason: ReasonTestFailed, Digest: a.Digest, Err: fmt.Errorf("%d test case(s) failed: %s", len(failed), b.String())}
	}
	return nil
}
