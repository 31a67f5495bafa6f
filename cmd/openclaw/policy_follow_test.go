package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/internal/e2e"
	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/bundle"
	"github.com/openclaw-go/openclaw/policies/bundle/bundlemetrics"
)

// pushBundle pushes a bundle whose rules block "blocked" with reason (its
// test case expects expectReason) to tag and signs it with key (none when
// ""), sequence seq; it returns the pushed digest reference.
func pushBundle(t *testing.T, tag, reason, expectReason, key, seq string) string {
	t.Helper()
	dir := writeTestBundle(t, t.TempDir(), reason, expectReason)
	out, code, err := runPolicyCLI(t, "policy", "push", dir, tag)
	if code != 0 {
		t.Fatalf("push: %v\n%s", err, out)
	}
	pinned := digestRef.FindString(out)
	if key != "" {
		if out, code, err := runPolicyCLI(t, "policy", "sign", pinned, "--key", key, "--sequence", seq); code != 0 {
			t.Fatalf("sign: %v\n%s", err, out)
		}
	}
	return pinned
}

// bundleUpdates is the value of
// openclaw_policy_bundle_updates_total{outcome,reason} in reg (0 when absent).
func bundleUpdates(t *testing.T, reg *prometheus.Registry, outcome, reason string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "openclaw_policy_bundle_updates_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["outcome"] == outcome && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestPolicyBundleHotSwap: a process following a tag swaps to each new
// signed digest whose cases pass, and refuses an unsigned one, one signed
// with another key, a tampered layer, a failing case and a module that
// does not load, each named on stderr, in the audit log and counted,
// while the old set keeps deciding; with the registry down it keeps
// serving, and a restart loads the cached verified bundle.
func TestPolicyBundleHotSwap(t *testing.T) {
	ctx := context.Background()
	reg := testkit.StartRegistry(t)
	t.Setenv(config.EnvStateDir, t.TempDir())
	keyDir, otherDir := t.TempDir(), t.TempDir()
	priv, pub := writeKeyPair(t, keyDir, nil)
	otherPriv, _ := writeKeyPair(t, otherDir, nil)
	tag := "oci://" + reg.Host + "/team/policy:live"
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	metrics := prometheus.NewRegistry()
	fl := policyFlags{auditLog: audit, bundle: bundleFlags{ref: tag, keys: []string{pub}},
		bundleMetrics: bundlemetrics.New(metrics)}

	pushBundle(t, tag, "v1", "v1", priv, "1")
	stderr := &e2e.LockedBuffer{}
	lp, err := startPolicies(ctx, fl, "test", stderr)
	if err != nil {
		t.Fatal(err)
	}
	decides := func() string {
		return lp.BeforeToolCall(ctx, &policies.ToolCall{Surface: policies.SurfaceServe, Tool: policies.ToolRef{Name: "blocked"}}).Reason
	}
	if got := decides(); got != "v1" {
		t.Fatalf("at start: decided %q, want v1\n%s", got, stderr.String())
	}
	pushBundle(t, tag, "v2", "v2", priv, "2")
	lp.bundle.poll(ctx, false)
	if got := decides(); got != "v2" {
		t.Fatalf("after the push of v2: decided %q\n%s", got, stderr.String())
	}

	refused := func(what, reason string) {
		t.Helper()
		lp.bundle.poll(ctx, false)
		if got := decides(); got != "v2" {
			t.Errorf("%s: decided %q, want v2 (the old set)", what, got)
		}
		if !strings.Contains(stderr.String(), "REFUSED ("+reason+")") {
			t.Errorf("%s: stderr does not say REFUSED (%s):\n%s", what, reason, stderr.String())
		}
	}
	pushBundle(t, tag, "v3", "v3", "", "")
	refused("unsigned", bundle.ReasonUnsigned)
	pushBundle(t, tag, "v4", "v4", otherPriv, "4")
	refused("another key", bundle.ReasonBadSignature)
	pushBundle(t, tag, "v5", "not v5", priv, "5")
	refused("failing case", bundle.ReasonTestFailed)
	v6 := pushBundle(t, tag, "v6", "v6", priv, "6")
	ref6, _ := bundle.ParseRef(v6)
	p6, err := bundle.Pull(ctx, ref6, bundle.Remote{})
	if err != nil {
		t.Fatal(err)
	}
	blob := reg.BlobPath(p6.Parsed.Layers[0].Digest.String())
	data, _ := os.ReadFile(blob)
	if err := os.WriteFile(blob, bytes.Replace(data, []byte(`"v6"`), []byte(`"v7"`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	refused("tampered layer", bundle.ReasonDigestMismatch)
	// A module that does not load (no case exercises it): the swap fails.
	dir := writeTestBundle(t, t.TempDir(), "v8", "v8")
	if err := os.WriteFile(filepath.Join(dir, "policy.json"), []byte(`{"modules":[{"name":"rules","source":"rules.wasm",
 "config":{"default":"allow","rules":[{"tool":"blocked","decision":"block","reason":"v8"}]}},{"name":"broken","source":"broken.wasm"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken.wasm"), []byte("\x00asm\x01\x00\x00\x00garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code, err := runPolicyCLI(t, "policy", "push", dir, tag)
	if code != 0 {
		t.Fatalf("push: %v\n%s", err, out)
	}
	if out, code, err := runPolicyCLI(t, "policy", "sign", digestRef.FindString(out), "--key", priv, "--sequence", "8"); code != 0 {
		t.Fatalf("sign: %v\n%s", err, out)
	}
	refused("module that does not load", bundle.ReasonModuleLoad)

	// A process started now pulls that bundle, cannot load it and runs
	// the accepted one, auditing the refusal.
	audit2 := filepath.Join(t.TempDir(), "audit.jsonl")
	fl2 := fl
	fl2.auditLog, fl2.bundleMetrics = audit2, nil
	started := &e2e.LockedBuffer{}
	lp2, err := startPolicies(ctx, fl2, "test", started)
	if err != nil {
		t.Fatalf("a start while the tag names a bundle whose module does not load: %v", err)
	}
	if got := lp2.BeforeToolCall(ctx, &policies.ToolCall{Surface: policies.SurfaceServe, Tool: policies.ToolRef{Name: "blocked"}}).Reason; got != "v2" {
		t.Errorf("started while the tag names v8: decides %q, want v2\n%s", got, started.String())
	}
	if log2, _ := os.ReadFile(audit2); !bytes.Contains(log2, []byte(`"decision":"refused","reason":"module_load"`)) {
		t.Errorf("the refusal at start is not audited:\n%s", log2)
	}
	if err := lp2.Close(ctx); err != nil {
		t.Fatal(err)
	}

	log, _ := os.ReadFile(audit)
	for _, r := range []string{bundle.ReasonUnsigned, bundle.ReasonBadSignature, bundle.ReasonTestFailed, bundle.ReasonDigestMismatch, bundle.ReasonModuleLoad} {
		if !bytes.Contains(log, []byte(`"hook":"policy_bundle"`)) || !bytes.Contains(log, []byte(`"decision":"refused","reason":"`+r+`"`)) {
			t.Errorf("the audit log has no refusal %s:\n%s", r, log)
		}
		if n := bundleUpdates(t, metrics, "refused", r); n != 1 {
			t.Errorf("refused/%s counted %v times, want 1", r, n)
		}
	}

	// The registry down: serving goes on; a restart runs the cache.
	reg.Stop()
	lp.bundle.poll(ctx, true)
	if got := decides(); got != "v2" || !strings.Contains(stderr.String(), "registry unreachable") {
		t.Errorf("registry down: decided %q\n%s", got, stderr.String())
	}
	if err := lp.Close(ctx); err != nil {
		t.Fatal(err)
	}
	stderr2 := &e2e.LockedBuffer{}
	lp, err = startPolicies(ctx, fl, "test", stderr2)
	if err != nil {
		t.Fatalf("restart with the registry down: %v", err)
	}
	defer lp.Close(ctx)
	if got := decides(); got != "v2" || !strings.Contains(stderr2.String(), "running the cached verified bundle") {
		t.Errorf("restart with the registry down: decided %q\n%s", got, stderr2.String())
	}
}

// BenchmarkBundleSwap measures one swap as a fleet member sees it, the
// poll interval excluded: push and sign a bundle, poll (HEAD, pull, verify
// signature and layers, run the cases, reload), decide with the new set.
func BenchmarkBundleSwap(b *testing.B) {
	reg := testkit.StartRegistry(b)
	b.Setenv(config.EnvStateDir, b.TempDir())
	priv, pub := writeKeyPair(b, b.TempDir(), nil)
	tag := "oci://" + reg.Host + "/team/bench:live"
	push := func(reason string, seq int) {
		dir := writeToolBundle(b, b.TempDir(), "blocked", reason, reason)
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs([]string{"policy", "push", dir, tag})
		if err := root.ExecuteContext(context.Background()); err != nil {
			b.Fatalf("push: %v\n%s", err, out.String())
		}
		root = newRootCmd()
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs([]string{"policy", "sign", digestRef.FindString(out.String()), "--key", priv, "--sequence", strconv.Itoa(seq)})
		if err := root.ExecuteContext(context.Background()); err != nil {
			b.Fatalf("sign: %v\n%s", err, out.String())
		}
	}
	push("v0", 0)
	ctx := context.Background()
	stderr := &e2e.LockedBuffer{}
	lp, err := startPolicies(ctx, policyFlags{auditLog: filepath.Join(b.TempDir(), "audit.jsonl"), bundle: bundleFlags{ref: tag, keys: []string{pub}}}, "bench", stderr)
	if err != nil {
		b.Fatal(err)
	}
	defer lp.Close(ctx)
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		want := "v" + strconv.Itoa(i)
		push(want, i)
		lp.bundle.poll(ctx, false)
		if got := lp.BeforeToolCall(ctx, &policies.ToolCall{Surface: policies.SurfaceServe, Tool: policies.ToolRef{Name: "blocked"}}).Reason; got != want {
			b.Fatalf("decided %q, want %q\n%s", got, want, stderr.String())
		}
	}
}

// TestPolicyBundlePollInterval: with --policy-poll set, a pushed bundle
// is found by the poll alone; refused while unsigned, it is swapped in
// once its signature is pushed.
func TestPolicyBundlePollInterval(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	reg := testkit.StartRegistry(t)
	t.Setenv(config.EnvStateDir, t.TempDir())
	priv, pub := writeKeyPair(t, t.TempDir(), nil)
	tag := "oci://" + reg.Host + "/team/policy:live"
	pushBundle(t, tag, "v1", "v1", priv, "1")
	stderr := &e2e.LockedBuffer{}
	lp, err := startPolicies(ctx, policyFlags{auditLog: filepath.Join(t.TempDir(), "audit.jsonl"),
		bundle: bundleFlags{ref: tag, keys: []string{pub}, poll: 20 * time.Millisecond}}, "test", stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer lp.Close(context.Background())
	pinned := pushBundle(t, tag, "v2", "v2", "", "")
	for !strings.Contains(stderr.String(), "REFUSED (unsigned)") {
		select {
		case <-ctx.Done():
			t.Fatalf("the unsigned bundle was not refused:\n%s", stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if out, code, err := runPolicyCLI(t, "policy", "sign", pinned, "--key", priv, "--sequence", "2"); code != 0 {
		t.Fatalf("sign: %v\n%s", err, out)
	}
	for {
		if lp.BeforeToolCall(ctx, &policies.ToolCall{Surface: policies.SurfaceServe, Tool: policies.ToolRef{Name: "blocked"}}).Reason == "v2" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the poll never swapped in v2:\n%s", stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// followedBundle starts a registry and a state folder for the test,
// pushes v1 to team/policy:live signed (sequence 1) with a new key priv,
// and returns the flags that follow that tag.
func followedBundle(t *testing.T) (reg *testkit.Registry, priv string, fl policyFlags) {
	t.Helper()
	reg = testkit.StartRegistry(t)
	t.Setenv(config.EnvStateDir, t.TempDir())
	priv, pub := writeKeyPair(t, t.TempDir(), nil)
	tag := "oci://" + reg.Host + "/team/policy:live"
	pushBundle(t, tag, "v1", "v1", priv, "1")
	return reg, priv, policyFlags{auditLog: os.DevNull, bundle: bundleFlags{ref: tag, keys: []string{pub}}}
}

// TestPolicyBundleSharedCache: two processes of one machine follow a tag
// through one cache: each swaps in what the other staged first, and with
// the registry down SIGHUP moves one to the bundle the other accepted.
func TestPolicyBundleSharedCache(t *testing.T) {
	ctx := context.Background()
	reg, priv, fl := followedBundle(t)
	tag := fl.bundle.ref
	errA, errB := &e2e.LockedBuffer{}, &e2e.LockedBuffer{}
	a, err := startPolicies(ctx, fl, "a", errA)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	b, err := startPolicies(ctx, fl, "b", errB)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	decides := func(lp *livePolicies) string {
		return lp.BeforeToolCall(ctx, &policies.ToolCall{Surface: policies.SurfaceServe, Tool: policies.ToolRef{Name: "blocked"}}).Reason
	}
	pushBundle(t, tag, "v2", "v2", priv, "2")
	a.bundle.poll(ctx, false)
	b.bundle.poll(ctx, false)
	if da, db := decides(a), decides(b); da != "v2" || db != "v2" {
		t.Fatalf("after v2: a decides %q, b %q\na:\n%s\nb:\n%s", da, db, errA.String(), errB.String())
	}
	pushBundle(t, tag, "v3", "v3", priv, "3")
	a.bundle.poll(ctx, false)
	reg.Stop()
	b.bundle.poll(ctx, true)
	if got := decides(b); got != "v3" {
		t.Fatalf("b after SIGHUP with the registry down: %q, want v3 (accepted by a)\n%s", got, errB.String())
	}
	// The registry back: b runs v3 already and swaps nothing.
	reg.Start()
	b.bundle.poll(ctx, false)
	if n := strings.Count(errB.String(), "policy bundle swapped"); n != 1 {
		t.Errorf("b swapped %d times, want once (to v2; v3 came from the cache):\n%s", n, errB.String())
	}
	if strings.Contains(errA.String()+errB.String(), "REFUSED") {
		t.Errorf("a refusal:\na:\n%s\nb:\n%s", errA.String(), errB.String())
	}
}

// TestMCPCallAuditsBundleDigest: `mcp call --policy-bundle` decides with
// the bundle, and its audit record names the bundle's digest
// (bundle_digest), as serve's and proxy's do.
func TestMCPCallAuditsBundleDigest(t *testing.T) {
	reg := testkit.StartRegistry(t)
	keyDir := t.TempDir()
	priv, pub := writeKeyPair(t, keyDir, nil)
	tag := "oci://" + reg.Host + "/team/policy:live"
	pinned := pushBundle(t, tag, "v1", "v1", priv, "1")
	cli := newRuntimeCLI(t)
	r := cli.newHome(t, map[string]any{"tiny": map[string]any{"command": cli.tiny}}, nil)
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd, stdout, stderr := r.start(t, ctx, "mcp", "call", "tiny__echo", "--args", `{"message":"hi"}`, "--audit-log", audit,
		"--policy-bundle", tag, "--policy-key", pub)
	if err := cmd.Wait(); err != nil || !strings.Contains(stdout.String(), "tiny says hi") {
		t.Fatalf("mcp call = %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr.String())
	}
	digest := pinned[strings.LastIndexByte(pinned, '@')+1:]
	log, _ := os.ReadFile(audit)
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		if strings.Contains(line, `"hook":"before_tool_call"`) {
			if !strings.Contains(line, `"bundle_digest":"`+digest+`"`) {
				t.Fatalf("the call's audit record does not name bundle_digest %s:\n%s", digest, line)
			}
			return
		}
	}
	t.Fatalf("no before_tool_call record in the audit log:\n%s", log)
}

// TestPolicyFileBundleShipsDecisions: the decision_log of a policy file
// that names a bundle ships the decisions of the bundle's set, with the
// file's token (the bundle's own policy file may name none).
func TestPolicyFileBundleShipsDecisions(t *testing.T) {
	ctx := context.Background()
	reg := testkit.StartRegistry(t)
	t.Setenv(config.EnvStateDir, t.TempDir())
	dir := t.TempDir()
	priv, pub := writeKeyPair(t, dir, nil)
	tag := "oci://" + reg.Host + "/team/policy:live"
	pushBundle(t, tag, "v1", "v1", priv, "1")
	var mu sync.Mutex
	var got []string
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		zr, err := gzip.NewReader(r.Body)
		if err == nil {
			body, _ := io.ReadAll(zr)
			mu.Lock()
			got = append(got, r.Header.Get("Authorization")+" "+string(body))
			mu.Unlock()
		}
	}))
	defer sink.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "token"), []byte("t0ken\n"), 0o600))
	pf := filepath.Join(dir, "policy.json")
	must(os.WriteFile(pf, []byte(`{"decision_log":{"url":"`+sink.URL+`/v1/decisions","token_file":"token"},
 "bundle":{"ref":"`+tag+`","keys":["`+filepath.Base(pub)+`"],"poll_interval_s":-1}}`), 0o600))
	lp, err := startPolicies(ctx, policyFlags{config: pf, auditLog: os.DevNull}, "test", &e2e.LockedBuffer{})
	must(err)
	if got := lp.BeforeToolCall(ctx, &policies.ToolCall{Surface: policies.SurfaceServe, Tool: policies.ToolRef{Name: "blocked"}}).Reason; got != "v1" {
		t.Fatalf("decided %q, want the bundle's v1", got)
	}
	must(lp.Close(ctx))
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(got, "\n")
	if !strings.Contains(all, "Bearer t0ken") || !strings.Contains(all, `"reason":"v1"`) {
		t.Fatalf("the decision log received %d batches, want the bundle's block with the file's token:\n%s", len(got), all)
	}
}

// TestPolicyBundleRegistryNeverAnswers: with a verified bundle in the
// cache, a start against a registry that accepts connections and never
// answers asks it, gives up and serves from the cache; a poll waiting on
// that registry does not hold back a forced poll (SIGHUP, `policy
// reload`), which reaches the registry while the first still waits.
func TestPolicyBundleRegistryNeverAnswers(t *testing.T) {
	ctx := context.Background()
	reg, _, fl := followedBundle(t)
	lp, err := startPolicies(ctx, fl, "test", &e2e.LockedBuffer{})
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// The registry's port now accepts and never answers.
	reg.Stop()
	l, err := net.Listen("tcp", reg.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	defer func() {
		for {
			select {
			case c := <-accepted:
				c.Close()
			default:
				return
			}
		}
	}()

	type result struct {
		lp  *livePolicies
		err error
	}
	stderr := &e2e.LockedBuffer{}
	started := make(chan result, 1)
	go func() {
		lp, err := startPolicies(ctx, fl, "test", stderr)
		started <- result{lp, err}
	}()
	select {
	case c := <-accepted:
		defer c.Close()
	case r := <-started:
		t.Fatalf("started without asking the registry: %v\n%s", r.err, stderr.String())
	}
	// The start gives up on the registry after its 5 s bound (the line
	// comes before the cached bundle's modules compile, which can take
	// long on a loaded machine), then serves from the cache.
	const gaveUp = "running the cached verified bundle"
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(stderr.String(), gaveUp); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) { // a hang guard far above the bound
			t.Fatalf("the start still waits on the registry that never answers\n%s", stderr.String())
		}
	}
	var r result
	select {
	case r = <-started:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the start said it runs the cached bundle and did not return\n%s", stderr.String())
	}
	if r.err != nil {
		t.Fatalf("start: %v", r.err)
	}
	lp = r.lp
	defer lp.Close(ctx)
	if got := lp.BeforeToolCall(ctx, &policies.ToolCall{Surface: policies.SurfaceServe, Tool: policies.ToolRef{Name: "blocked"}}).Reason; got != "v1" ||
		!strings.Contains(stderr.String(), "running the cached verified bundle") {
		t.Fatalf("decided %q, want v1 from the cache\n%s", got, stderr.String())
	}

	first := make(chan struct{})
	go func() { lp.bundle.poll(ctx, false); close(first) }()
	select {
	case c := <-accepted:
		defer c.Close()
	case <-first:
		t.Fatalf("the poll did not ask the registry\n%s", stderr.String())
	}
	forced := make(chan struct{})
	go func() { lp.bundle.poll(ctx, true); close(forced) }()
	select {
	case c := <-accepted:
		defer c.Close()
		select {
		case <-first:
			t.Errorf("the first poll ended before the forced one asked the registry")
		default:
		}
	case <-first:
		t.Errorf("the forced poll asked the registry only once the first poll ended: it waited on the first one's lock")
	}
	<-first
	<-forced
	if got := lp.BeforeToolCall(ctx, &policies.ToolCall{Surface: policies.SurfaceServe, Tool: policies.ToolRef{Name: "blocked"}}).Reason; got != "v1" ||
		!strings.Contains(stderr.String(), "registry unreachable") {
		t.Errorf("after the polls: decided %q, want v1\n%s", got, stderr.String())
	}
}

// TestPolicyBundleRewrittenAfterVerification: a bundle's module or policy
// file rewritten in the cache after the bundle was verified and its cases
// passed, before the engine loads it (a same-user process racing the
// swap), is refused naming the sha256 mismatch, and the old set keeps
// deciding.
func TestPolicyBundleRewrittenAfterVerification(t *testing.T) {
	ctx := context.Background()
	reg := testkit.StartRegistry(t)
	t.Setenv(config.EnvStateDir, t.TempDir())
	priv, pub := writeKeyPair(t, t.TempDir(), nil)
	tamper := map[string]func(data []byte) []byte{
		// The same module with a custom section appended: valid Wasm,
		// other bytes.
		"rules.wasm": func(data []byte) []byte { return append(data, 0x00, 0x05, 0x03, 'x', 'y', 'z', 0x00) },
		"policy.json": func(data []byte) []byte {
			return bytes.Replace(data, []byte(`"reason":"v2"`), []byte(`"reason":"evil"`), 1)
		},
	}
	for file, rewrite := range tamper {
		t.Run(file, func(t *testing.T) {
			tag := "oci://" + reg.Host + "/team/" + strings.TrimSuffix(file, filepath.Ext(file)) + ":live"
			pushBundle(t, tag, "v1", "v1", priv, "1")
			stderr := &e2e.LockedBuffer{}
			lp, err := startPolicies(ctx, policyFlags{auditLog: os.DevNull, bundle: bundleFlags{ref: tag, keys: []string{pub}}}, "test", stderr)
			if err != nil {
				t.Fatal(err)
			}
			defer lp.Close(ctx)
			pushBundle(t, tag, "v2", "v2", priv, "2")
			rewritten := false
			lp.bundle.staged = func(a *bundle.Accepted) {
				p := filepath.Join(a.Dir, file)
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, rewrite(data), 0o600); err != nil {
					t.Fatal(err)
				}
				rewritten = true
			}
			lp.bundle.poll(ctx, false)
			if !rewritten {
				t.Fatalf("v2 was not staged\n%s", stderr.String())
			}
			if got := lp.BeforeToolCall(ctx, &policies.ToolCall{Surface: policies.SurfaceServe, Tool: policies.ToolRef{Name: "blocked"}}).Reason; got != "v1" {
				t.Errorf("decided %q, want v1 (the old set)\n%s", got, stderr.String())
			}
			if s := stderr.String(); !strings.Contains(s, "REFUSED (module_load)") || !strings.Contains(s, "sha256 pin mismatch") {
				t.Errorf("the refusal does not name the sha256 mismatch:\n%s", s)
			}
		})
	}
}
