package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/bundle/bundlemetrics"
	"github.com/openclaw-go/openclaw/policies/engine"
	"github.com/openclaw-go/openclaw/policies/ratelimit"
)

// policyFlags are the policy inputs shared by the commands that enforce
// policies.
type policyFlags struct {
	files    []string           // --policy FILE.wasm, repeatable
	config   string             // --policy-config FILE
	auditLog string             // --audit-log FILE, "-" for stderr
	defaults []string           // modules loaded when no flag names one; nil: builtin:rules
	naming   string             // engine.Options.NamingModule: "" for a surface that names no imported tools
	auditTap policies.AuditSink // also receives every audit record (metrics); may be nil
	verbose  bool               // -v: the modules' debug log lines too
	logJSON  bool               // --log-format json: the modules' log lines are JSON too
	bundle   bundleFlags        // --policy-bundle and its keys
	// bundleMetrics counts bundle swaps and refusals and shows the running
	// bundle (/metrics); may be nil.
	bundleMetrics *bundlemetrics.Metrics
	// limits keeps the rate-limit counters (--state: shared in Redis);
	// nil: in this process.
	limits ratelimit.Store
	// swapped, when set, is called after each reload that swapped the
	// policy set (a module, its config or the rate limits changed).
	swapped func()
	// decisionLog is the decision_log of the policy file that names a
	// bundle (bundleFromPolicyFile); nil: the policy file's own.
	decisionLog *config.PolicyDecisionLog
}

// livePolicies is a running process's policy engine with what keeps it
// current: the file watcher, the SIGHUP handler and the run file that
// `openclaw policy reload` finds it by.
type livePolicies struct {
	*engine.Engine
	stop func()         // ends the watcher and the signal handler
	wg   sync.WaitGroup // the watcher and the signal handler
	reg  *runRegistration
	// bundle follows --policy-bundle; nil without one.
	bundle *bundleFollower
}

// startPolicies loads the policy engine for a long-running command (what
// is "mcp serve"), announces the active modules on stderr, registers the
// process for `openclaw policy reload` and starts swapping modules when
// their files change or SIGHUP arrives. Close undoes all of it. The
// modules' own log lines go to stderr with their names, from info level
// (debug too with fl.verbose).
func startPolicies(ctx context.Context, fl policyFlags, what string, stderr io.Writer) (*livePolicies, error) {
	level := slog.LevelInfo
	if fl.verbose {
		level = slog.LevelDebug
	}
	logger := newLogger(stderr, level, fl.logJSON)
	lp := &livePolicies{}
	if err := bundleFromPolicyFile(&fl); err != nil {
		return nil, err
	}
	if fl.bundle.ref != "" {
		f, err := openBundle(ctx, fl, stderr, logger)
		if err != nil {
			return nil, err
		}
		lp.bundle, fl.config = f, f.cur.PolicyFile
	}
	var bundleDigest string
	var pins map[string]string
	if lp.bundle != nil {
		bundleDigest, pins = string(lp.bundle.cur.Digest), lp.bundle.cur.Pins()
	}
	opts := &engine.Options{
		ConfigFile:   fl.config,
		BundleDigest: bundleDigest,
		Pins:         pins,
		LimitStore:   fl.limits,
		Files:        fl.files,
		AuditLog:     fl.auditLog,
		DecisionLog:  fl.decisionLog,
		AuditTap:     fl.auditTap,
		Logger:       logger,
		// DefaultModules: serve's nil is builtin:rules alone.
		DefaultModules: fl.defaults,
		NamingModule:   fl.naming,
		OnReload: func(res engine.ReloadResult, err error) {
			if lp.reg != nil {
				lp.reg.reloaded(lp.Engine.Modules(), res, err)
			}
			if err == nil && res.Changed() && fl.swapped != nil {
				fl.swapped()
			}
		},
	}
	eng, err := loadEngine(ctx, opts, lp.bundle)
	if err != nil {
		return nil, err
	}
	lp.Engine = eng
	if lp.bundle != nil {
		lp.bundle.started(eng)
	}
	say := announcer{w: stderr, logger: logger, asJSON: fl.logJSON}
	enforced := false
	for _, m := range eng.Modules() {
		say.info(fmt.Sprintf("openclaw mcp: policy active: %s", m),
			"openclaw mcp: policy active", "module", m.Name, "source", m.Source, "sha256", m.SHA256, "mode", m.Mode, "hooks", m.Hooks)
		if m.Mode != policies.AuditOnly && slices.Contains(m.Hooks, policies.HookBeforeToolCall) {
			enforced = true
		}
	}
	if !enforced {
		// The absence of a before_tool_call policy is said, never silent.
		say.warn("openclaw mcp: WARNING: no module enforces before_tool_call: every tool call is allowed",
			"openclaw mcp: no module enforces before_tool_call: every tool call is allowed")
	}
	say.info("openclaw mcp: decision audit log: "+eng.AuditDestination(), "openclaw mcp: decision audit log", "path", eng.AuditDestination())

	onSignal := reloadSignals()
	// Registration is best effort: without it the process still runs and
	// swaps on file changes, but `policy reload` cannot find it.
	if lp.reg, err = register(what, fl.config, eng.Modules()); err != nil {
		logger.Warn("openclaw policy reload will not reach this process", "err", err)
	}
	if lp.bundle != nil {
		lp.bundle.report = func(err error) {
			if lp.reg != nil {
				lp.reg.reloaded(lp.Engine.Modules(), engine.ReloadResult{}, err)
			}
		}
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	lp.stop = cancel
	lp.wg.Add(2)
	go func() {
		defer lp.wg.Done()
		if lp.bundle != nil {
			// A bundle's files are the cache's: the tag is polled instead.
			lp.bundle.run(wctx, fl.bundle.poll)
			return
		}
		if err := eng.Watch(wctx); err != nil {
			logger.Warn("policy files are not watched; use `openclaw policy reload` after changes", "err", err)
		}
	}()
	go func() {
		defer lp.wg.Done()
		onSignal(wctx, func() {
			if lp.bundle != nil {
				lp.bundle.poll(wctx, true)
				return
			}
			_, _ = eng.Reload(wctx)
		})
	}()
	return lp, nil
}

// Close stops watching, unregisters the process and closes the engine
// (calls in flight may finish until ctx is done).
func (lp *livePolicies) Close(ctx context.Context) error {
	lp.stop()
	lp.wg.Wait()
	var errs []error
	if lp.reg != nil {
		errs = append(errs, lp.reg.remove())
	}
	errs = append(errs, lp.Engine.Close(ctx))
	return errors.Join(errs...)
}

// loaded is the "policies" readiness check of `mcp proxy`: the engine
// loaded and verified its modules (engine.Load refuses a set it cannot
// verify) and has at least one active.
func (lp *livePolicies) loaded() error {
	if lp.Engine == nil || len(lp.Modules()) == 0 {
		return errors.New("no policy module is loaded")
	}
	return nil
}
