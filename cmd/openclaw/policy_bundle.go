package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"

	"github.com/openclaw-go/openclaw/policies/bundle"
)

const bundleRefHelp = `REF is oci://REGISTRY/REPOSITORY:TAG (or @sha256:DIGEST). A loopback registry
(localhost, 127.0.0.0/8, ::1) is spoken to in plain HTTP, any other in HTTPS;
--plain-http says which. Credentials come from the Docker config
(~/.docker/config.json). docs/policy-bundles.md describes the format.`

// remoteFlags are the registry settings of the bundle commands.
type remoteFlags struct {
	plainHTTP bool
}

func (f *remoteFlags) bind(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.plainHTTP, "plain-http", false, "speak HTTP, not HTTPS, to the registry (default: HTTP for a loopback registry only)")
}

func (f *remoteFlags) remote(cmd *cobra.Command) bundle.Remote {
	var o bundle.Remote
	if cmd.Flags().Changed("plain-http") {
		v := f.plainHTTP
		o.PlainHTTP = &v
	}
	return o
}

func newPolicyPushCmd() *cobra.Command {
	var rf remoteFlags
	cmd := &cobra.Command{
		Use:   "push DIR REF",
		Short: "Push a policy bundle (policy.json, its modules, tests/*.jsonl) to an OCI registry",
		Long: `Push reads the bundle in DIR: DIR/policy.json (a policy file whose module sources are
builtin:NAME or paths inside DIR), the .wasm modules it names and DIR/tests/NAME.jsonl,
the "openclaw policy test" cases of the module named NAME. It uploads them as one OCI
artifact and tags it; it prints the digest to sign. ` + bundleRefHelp,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := bundle.ParseRef(args[1])
			if err != nil {
				return err
			}
			b, err := bundle.ReadDir(args[0])
			if err != nil {
				return err
			}
			desc, err := bundle.Push(cmd.Context(), b, ref, rf.remote(cmd))
			if err != nil {
				return err
			}
			ref.Digest = desc.Digest
			fmt.Fprintf(cmd.OutOrStdout(), "pushed %s (%d files)\n%s\n", args[1], len(b.Files), ref)
			return nil
		},
	}
	rf.bind(cmd)
	return cmd
}

func newPolicyPullCmd() *cobra.Command {
	var rf remoteFlags
	var keys []string
	cmd := &cobra.Command{
		Use:   "pull REF DIR",
		Short: "Pull a policy bundle into a folder, checking every layer's digest (and the signature with --key)",
		Long: `Pull fetches the bundle REF names, checks each layer against its sha256 digest and the
bundle's layout, and writes its files into DIR. With --key it first verifies the
signature as "openclaw policy verify" does and writes nothing when it does not hold. ` + bundleRefHelp,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := bundle.ParseRef(args[0])
			if err != nil {
				return err
			}
			ctx, o := cmd.Context(), rf.remote(cmd)
			p, err := bundle.Pull(ctx, ref, o)
			if err != nil {
				return err
			}
			if len(keys) > 0 {
				if _, err := verifyBundle(cmd, ref, p.Digest, keys, o); err != nil {
					return err
				}
			}
			if err := p.Bundle.WriteDir(args[1]); err != nil {
				return err
			}
			ref.Digest = p.Digest
			fmt.Fprintf(cmd.OutOrStdout(), "pulled %s (%d files) into %s\n", ref, len(p.Bundle.Files), args[1])
			if len(keys) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "openclaw policy pull: the signature was not checked (give --key FILE.pub)")
			}
			return nil
		},
	}
	rf.bind(cmd)
	cmd.Flags().StringArrayVar(&keys, "key", nil, "verify the signature with this public key first (repeatable: any one may have signed)")
	return cmd
}

func newPolicySignCmd() *cobra.Command {
	var rf remoteFlags
	var key string
	var seq int64
	cmd := &cobra.Command{
		Use:   "sign REF --key FILE",
		Short: "Sign a pushed bundle with a private key (cosign's keyed, tag-based layout; no transparency log)",
		Long: `Sign signs the manifest digest REF names (a tag is resolved to its digest first: sign
the digest "policy push" printed to be sure of what is signed) and stores the signature
as cosign does on registries without the referrers API: a simple signing payload
naming the repository and the digest, in the tag sha256-HEX.sig beside it. "cosign
verify --key" accepts it. The key is an ECDSA P-256 PEM private key, or cosign's
encrypted cosign.key (password in $COSIGN_PASSWORD). --sequence orders the signatures
of a repository: a process following a tag refuses a digest whose signature is not
newer than the one it accepted (a rollback). ` + bundleRefHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if key == "" {
				return errors.New("--key FILE is required")
			}
			ref, err := bundle.ParseRef(args[0])
			if err != nil {
				return err
			}
			signer, err := bundle.LoadPrivateKey(key, cosignPassword)
			if err != nil {
				return err
			}
			ctx, o := cmd.Context(), rf.remote(cmd)
			d := ref.Digest
			if d == "" {
				desc, err := bundle.Resolve(ctx, ref, o)
				if err != nil {
					return err
				}
				d = desc.Digest
			}
			if !cmd.Flags().Changed("sequence") {
				seq = time.Now().UnixMilli()
			}
			if err := bundle.Sign(ctx, ref, d, signer, seq, o); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "signed %s@%s (sequence %d) as %s\n", ref.Name(), d, seq, bundle.SignatureTag(d))
			return nil
		},
	}
	rf.bind(cmd)
	cmd.Flags().StringVar(&key, "key", "", "private key file (PEM; cosign.key with $COSIGN_PASSWORD)")
	cmd.Flags().Int64Var(&seq, "sequence", 0, "signature sequence, higher is newer (default: the time in Unix milliseconds)")
	return cmd
}

// cosignPassword returns $COSIGN_PASSWORD, the password of an encrypted
// key, as cosign reads it.
func cosignPassword() ([]byte, error) {
	pw, ok := os.LookupEnv("COSIGN_PASSWORD")
	if !ok {
		return nil, errors.New("the key is encrypted: set COSIGN_PASSWORD")
	}
	return []byte(pw), nil
}

func newPolicyVerifyCmd() *cobra.Command {
	var rf remoteFlags
	var keys []string
	cmd := &cobra.Command{
		Use:   "verify REF --key FILE.pub",
		Short: "Verify a bundle's signature with trusted public keys",
		Long: `Verify resolves REF to its manifest digest and checks its signatures (cosign's tag
layout): at least one must be made by a --key (several keys are allowed, for rotation)
over a payload that names this digest and this repository (a signature copied to
another repository is refused). It prints the key and sequence that verified, or why
each signature was refused, and exits 1 then. ` + bundleRefHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := bundle.ParseRef(args[0])
			if err != nil {
				return err
			}
			ctx, o := cmd.Context(), rf.remote(cmd)
			desc, err := bundle.Resolve(ctx, ref, o)
			if err != nil {
				return err
			}
			v, err := verifyBundle(cmd, ref, desc.Digest, keys, o)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "verified %s@%s: signed by %s (sha256 %s), sequence %s\n",
				ref.Name(), desc.Digest, v.Key.Path, v.Key.Fingerprint[:16], strconv.FormatInt(v.Sequence, 10))
			return nil
		},
	}
	rf.bind(cmd)
	cmd.Flags().StringArrayVar(&keys, "key", nil, "trusted public key (PEM, repeatable)")
	return cmd
}

// verifyBundle checks digest d's signatures in ref's repository against
// the key files.
func verifyBundle(cmd *cobra.Command, ref bundle.Ref, d digest.Digest, keyFiles []string, o bundle.Remote) (*bundle.Verified, error) {
	keys, err := bundle.LoadPublicKeys(keyFiles)
	if err != nil {
		return nil, err
	}
	sigs, err := bundle.FetchSignatures(cmd.Context(), ref, d, o)
	if err != nil {
		return nil, err
	}
	return bundle.VerifySignatures(ref, d, sigs, keys)
}
