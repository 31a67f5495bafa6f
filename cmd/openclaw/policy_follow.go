package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/pflag"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/bundle"
	"github.com/openclaw-go/openclaw/policies/bundle/bundlemetrics"
	"github.com/openclaw-go/openclaw/policies/engine"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// bundleFlags are the --policy-bundle settings of serve, proxy and call.
type bundleFlags struct {
	ref           string        // --policy-bundle oci://…:TAG
	keys          []string      // --policy-key FILE.pub, repeatable
	poll          time.Duration // --policy-poll; 0: no polling
	allowRollback bool          // --policy-allow-rollback
	// plainHTTP is --policy-plain-http when given (or the policy file's
	// bundle.plain_http); nil: HTTP for a loopback registry only.
	plainHTTP *bool
}

// plainHTTPFlag is --policy-plain-http: a bool flag that records whether it
// was given.
type plainHTTPFlag struct{ b *bundleFlags }

func (f plainHTTPFlag) String() string {
	if f.b == nil || f.b.plainHTTP == nil {
		return "false"
	}
	return strconv.FormatBool(*f.b.plainHTTP)
}

func (f plainHTTPFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	f.b.plainHTTP = &v
	return nil
}

func (plainHTTPFlag) Type() string     { return "bool" }
func (plainHTTPFlag) IsBoolFlag() bool { return true }

func (b *bundleFlags) register(f *pflag.FlagSet) {
	f.StringVar(&b.ref, "policy-bundle", "", "run the signed policy bundle oci://REGISTRY/REPO:TAG (docs/policy-bundles.md) instead of --policy-config")
	f.StringArrayVar(&b.keys, "policy-key", nil, "public key a --policy-bundle must be signed with (PEM, repeatable: any one)")
	f.DurationVar(&b.poll, "policy-poll", time.Minute, "with --policy-bundle, how often to check the tag for a new digest (±10% jitter; 0: only on SIGHUP)")
	f.BoolVar(&b.allowRollback, "policy-allow-rollback", false, "with --policy-bundle, accept a digest signed with an older sequence than the accepted one")
	f.Var(plainHTTPFlag{b}, "policy-plain-http", "with --policy-bundle, speak HTTP, not HTTPS, to the registry (default: HTTP for a loopback registry only)")
	f.Lookup("policy-plain-http").NoOptDefVal = "true"
}

// bundleFromPolicyFile applies the bundle key of the policy file fl names
// (config.PolicyBundle) when no --policy-bundle is given: the process then
// follows that bundle, and the file gives only the audit log (unless
// --audit-log does) and the decision log.
func bundleFromPolicyFile(fl *policyFlags) error {
	if fl.config == "" || fl.bundle.ref != "" {
		return nil
	}
	pf, err := config.LoadPolicyFile(fl.config)
	if err != nil || pf.Bundle == nil {
		return err
	}
	b := pf.Bundle
	fl.bundle.ref, fl.bundle.keys, fl.bundle.allowRollback = b.Ref, b.Keys, b.AllowRollback
	if fl.bundle.plainHTTP == nil {
		fl.bundle.plainHTTP = b.PlainHTTP
	}
	switch {
	case b.PollIntervalS < 0:
		fl.bundle.poll = 0
	case b.PollIntervalS > 0:
		fl.bundle.poll = time.Duration(b.PollIntervalS) * time.Second
	default:
		fl.bundle.poll = time.Minute
	}
	if fl.auditLog == "" {
		fl.auditLog = pf.AuditLog
	}
	fl.decisionLog = pf.DecisionLog
	fl.config = ""
	return nil
}

// bundleAuditHook is the hook field of the audit records of bundle swaps
// and refusals.
const bundleAuditHook policies.Hook = "policy_bundle"

// resolveTimeout bounds the request that asks the registry which digest
// the tag names when a verified bundle is there to run without it: at
// start with one in the cache, and at every poll (docs/policy-bundles.md,
// docs/RATIONALE.md "Why a 5 s registry timeout when a bundle is cached?").
const resolveTimeout = 5 * time.Second

// bundleFollower keeps a process on the bundle a tag names: it pulls,
// verifies and tests each new digest, then swaps it in; a refusal or an
// unreachable registry leaves the running set in place.
type bundleFollower struct {
	src    *bundle.Source
	say    func(string)
	logger *slog.Logger
	// metrics counts swaps and refusals and shows the running bundle; may
	// be nil.
	metrics *bundlemetrics.Metrics
	// report records a forced poll that ended without a reload (a
	// refusal, an unreachable registry) where `openclaw policy reload`
	// reads it; may be nil.
	report func(err error)

	mu    sync.Mutex // one poll at a time
	eng   *engine.Engine
	audit policies.AuditSink
	cur   *bundle.Accepted
	// refused is the digest last refused and refusedFor the reason: a
	// content refusal is not retried until the tag moves (or SIGHUP); a
	// signature refusal is retried each poll (a signature may follow the
	// push) and said again only when its reason changes.
	refused    digest.Digest
	refusedFor string
	// atStart is a refusal at start, audited once the engine's audit log
	// is open.
	atStart *bundle.Refusal
	down    bool // the registry was unreachable at the last poll
	// staged, when set, is called with a new bundle once it is verified
	// and its cases passed, before the engine loads it (tests).
	staged func(*bundle.Accepted)
}

// openBundle resolves the bundle of fl at start: the digest the tag names
// now, pulled, verified and tested; with the registry unreachable, or the
// tag's digest refused, the bundle accepted last (from the cache, verified
// again). With neither, the start is refused.
func openBundle(ctx context.Context, fl policyFlags, stderr io.Writer, logger *slog.Logger) (*bundleFollower, error) {
	if fl.config != "" {
		return nil, errors.New("--policy-bundle and --policy-config: give one (the bundle holds the policy file)")
	}
	ref, err := bundle.ParseRef(fl.bundle.ref)
	if err != nil {
		return nil, err
	}
	keys, err := bundle.LoadPublicKeys(fl.bundle.keys)
	if err != nil {
		return nil, fmt.Errorf("--policy-bundle: %w", err)
	}
	dir, err := config.StateDir()
	if err != nil {
		return nil, err
	}
	f := &bundleFollower{
		src: &bundle.Source{Ref: ref, Keys: keys, Cache: &bundle.Cache{Dir: filepath.Join(dir, "openclaw-go", "policy-bundles")},
			Remote:        bundle.Remote{PlainHTTP: fl.bundle.plainHTTP},
			AllowRollback: fl.bundle.allowRollback, Host: wasmhost.Options{Logger: logger}},
		say:     func(s string) { fmt.Fprintln(stderr, s) },
		logger:  logger,
		metrics: fl.bundleMetrics,
	}
	st, cached, _ := f.src.Cache.State(ref)
	var d digest.Digest
	var rerr error
	if cached {
		d, rerr = f.resolve(ctx)
	} else {
		d, rerr = f.src.Resolve(ctx)
	}
	if rerr == nil {
		if cached && st.Digest == d {
			if a, err := f.loadCached(ctx); err == nil {
				f.cur = a
				return f, nil
			}
		}
		a, err := f.src.Fetch(ctx, d)
		if err == nil {
			f.cur = a
			return f, nil
		}
		rerr = err
		var r *bundle.Refusal
		if errors.As(err, &r) {
			f.refused, f.refusedFor, f.atStart = d, r.Reason, r
		}
	}
	a, cerr := f.loadCached(ctx)
	if cerr != nil {
		return nil, fmt.Errorf("--policy-bundle %s: %v; and no verified bundle in the cache: %v", ref, rerr, cerr)
	}
	f.say(fmt.Sprintf("openclaw mcp: policy bundle %s: %v; running the cached verified bundle %s", ref, rerr, a.Digest))
	f.cur = a
	return f, nil
}

// loadEngine is engine.Load; when f (nil without a bundle) opened a new
// bundle whose modules do not load, it refuses that bundle and loads the
// accepted one.
func loadEngine(ctx context.Context, opts *engine.Options, f *bundleFollower) (*engine.Engine, error) {
	eng, err := engine.Load(ctx, opts)
	if err == nil || f == nil {
		return eng, err
	}
	a, ferr := f.fallBack(ctx, err)
	if ferr != nil {
		return nil, err
	}
	opts.ConfigFile, opts.BundleDigest, opts.Pins = a.PolicyFile, string(a.Digest), a.Pins()
	return engine.Load(ctx, opts)
}

// fallBack is called when the bundle opened at start does not load
// (loadErr): unless it is the accepted one, it is refused (module_load)
// and the cache's accepted bundle becomes the one to run.
func (f *bundleFollower) fallBack(ctx context.Context, loadErr error) (*bundle.Accepted, error) {
	if st, ok, _ := f.src.Cache.State(f.src.Ref); !ok || st.Digest == f.cur.Digest {
		return nil, loadErr
	}
	a, err := f.loadCached(ctx)
	if err != nil {
		return nil, loadErr
	}
	r := &bundle.Refusal{Reason: bundle.ReasonModuleLoad, Digest: f.cur.Digest, Err: loadErr}
	f.src.Cache.Discard(f.cur)
	f.refused, f.refusedFor, f.atStart = r.Digest, r.Reason, r
	f.say(fmt.Sprintf("openclaw mcp: policy bundle %s@%s REFUSED (%s): %v; running the cached verified bundle %s", f.src.Ref.Name(), r.Digest, r.Reason, loadErr, a.Digest))
	f.cur = a
	return a, nil
}

// loadCached loads the cache's accepted bundle, verified again, and runs
// its test cases.
func (f *bundleFollower) loadCached(ctx context.Context) (*bundle.Accepted, error) {
	a, err := f.src.Cache.Load(f.src.Ref, f.src.Keys)
	if err != nil {
		return nil, err
	}
	if err := f.src.Test(ctx, a); err != nil {
		return nil, err
	}
	return a, nil
}

// started records the bundle the engine loaded at start as accepted.
func (f *bundleFollower) started(eng *engine.Engine) {
	f.eng, f.audit = eng, eng.AuditSink()
	if err := f.src.Cache.Commit(f.cur); err != nil {
		f.logger.Warn("policy bundle: the cache state cannot be written", "err", err)
	}
	f.say(fmt.Sprintf("openclaw mcp: policy bundle: %s@%s (signed by %s, sequence %d)", f.src.Ref, f.cur.Digest, f.cur.Verified.Key.Path, f.cur.Verified.Sequence))
	if r := f.atStart; r != nil {
		f.record("refused", r.Reason, r)
	}
	f.record("accepted", "", nil)
}

// run polls every interval (±10%) until ctx ends.
func (f *bundleFollower) run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		<-ctx.Done()
		return
	}
	for {
		wait := interval + time.Duration((rand.Float64()*0.2-0.1)*float64(interval))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		f.poll(ctx, false)
	}
}

// poll checks the tag's digest (a HEAD request) and swaps in a new one
// that is accepted. forced (SIGHUP) also retries a refused digest and,
// when nothing is new, reloads the running bundle from the cache, verified
// again.
func (f *bundleFollower) poll(ctx context.Context, forced bool) {
	// The registry is asked before the lock is taken: one that does not
	// answer holds back no other poll (SIGHUP, `policy reload`).
	d, err := f.resolve(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		if !f.down {
			f.say(fmt.Sprintf("openclaw mcp: policy bundle %s: registry unreachable, %s keeps running: %v", f.src.Ref, f.cur.Digest, err))
		}
		f.down = true
		if forced {
			f.reloadCached(ctx)
		}
		return
	}
	f.down = false
	if d == f.cur.Digest {
		if forced {
			f.reloadCached(ctx)
		}
		return
	}
	if d == f.refused && !forced && !bundle.SignatureReason(f.refusedFor) {
		return
	}
	a, err := f.src.Fetch(ctx, d)
	if err != nil {
		var r *bundle.Refusal
		if errors.As(err, &r) {
			if !forced && r.Digest == f.refused && r.Reason == f.refusedFor {
				return // said already
			}
			f.refuse(r)
		} else {
			f.say(fmt.Sprintf("openclaw mcp: policy bundle %s: %v; %s keeps running", f.src.Ref, err, f.cur.Digest))
		}
		if forced && f.report != nil {
			f.report(err)
		}
		return
	}
	if f.staged != nil {
		f.staged(a)
	}
	res, err := f.eng.ReloadFrom(ctx, a.PolicyFile, string(a.Digest), a.Pins())
	if err != nil {
		// The engine's OnReload recorded the failed reload.
		f.src.Cache.Discard(a)
		f.refuse(&bundle.Refusal{Reason: bundle.ReasonModuleLoad, Digest: d, Err: err})
		return
	}
	if err := f.src.Cache.Commit(a); err != nil {
		f.logger.Warn("policy bundle: the cache state cannot be written", "err", err)
	}
	old := f.cur.Digest
	f.cur, f.refused, f.refusedFor = a, "", ""
	f.say(fmt.Sprintf("openclaw mcp: policy bundle swapped: %s %s → %s (%s)", f.src.Ref, old, d, res))
	f.record("swapped", "", nil)
}

// resolve is Source.Resolve bounded by resolveTimeout.
func (f *bundleFollower) resolve(ctx context.Context) (digest.Digest, error) {
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	return f.src.Resolve(ctx)
}

// reloadCached loads the cache's accepted bundle, verified again and its
// cases run, and reloads the engine from it: the running bundle, or one
// that another process on this machine accepted since.
func (f *bundleFollower) reloadCached(ctx context.Context) {
	a, err := f.loadCached(ctx)
	if err != nil {
		f.say(fmt.Sprintf("openclaw mcp: policy bundle %s: the cached bundle fails verification, the loaded set keeps running: %v", f.src.Ref, err))
		reason := bundle.ReasonDigestMismatch
		var r *bundle.Refusal
		if errors.As(err, &r) {
			reason = r.Reason
		}
		f.record("refused", reason, err)
		if f.report != nil {
			f.report(err)
		}
		return
	}
	if _, err := f.eng.ReloadFrom(ctx, a.PolicyFile, string(a.Digest), a.Pins()); err == nil {
		f.cur = a
		f.showRunning()
	}
}

func (f *bundleFollower) refuse(r *bundle.Refusal) {
	f.refused, f.refusedFor = r.Digest, r.Reason
	f.say(fmt.Sprintf("openclaw mcp: policy bundle %s@%s REFUSED (%s): %v; %s keeps running", f.src.Ref.Name(), r.Digest, r.Reason, r.Err, f.cur.Digest))
	f.record("refused", r.Reason, r)
}

// record writes the audit record of a bundle event and counts it.
func (f *bundleFollower) record(decision, reason string, err error) {
	rec := policies.AuditRecord{Time: time.Now().UTC(), Hook: bundleAuditHook, Module: f.src.Ref.String(), Decision: decision, Reason: reason}
	if f.cur != nil {
		rec.Reason = f.cur.Digest.String()
		if reason != "" {
			rec.Reason = reason
		}
	}
	if err != nil {
		rec.Error = err.Error()
	}
	if f.audit != nil {
		f.audit.Record(rec)
	}
	f.outcome(decision, reason)
}

// outcome counts a bundle event and shows the bundle running after it.
func (f *bundleFollower) outcome(decision, reason string) {
	if f.metrics != nil {
		f.metrics.Observe(decision, reason)
	}
	f.showRunning()
}

// showRunning makes the running bundle the one the metrics show.
func (f *bundleFollower) showRunning() {
	if f.metrics != nil && f.cur != nil && f.cur.Verified != nil && f.eng != nil {
		f.metrics.Running(f.src.Ref.String(), f.cur.Digest.String(), f.cur.Verified.Key.Path, f.cur.Verified.Sequence)
	}
}
