package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/internal/testkit"
)

// TestMCPServeMetrics: `mcp serve --metrics-listen` serves the policy
// bundle's series from a real registry: the bundle deciding
// (openclaw_policy_bundle_info, its digest) and, after a push signed with
// a key it does not trust, the refusal with its reason, while the old set
// keeps deciding.
func TestMCPServeMetrics(t *testing.T) {
	reg := testkit.StartRegistry(t)
	priv, pub := writeKeyPair(t, t.TempDir(), nil)
	otherPriv, _ := writeKeyPair(t, t.TempDir(), nil)
	tag := "oci://" + reg.Host + "/team/serve-metrics:live"
	push := func(reason, key, seq string) (digest string) {
		dir := writeToolBundle(t, t.TempDir(), "*", reason, reason)
		out, code, err := runPolicyCLI(t, "policy", "push", dir, tag)
		if code != 0 {
			t.Fatalf("push: %v\n%s", err, out)
		}
		pinned := digestRef.FindString(out)
		if out, code, err := runPolicyCLI(t, "policy", "sign", pinned, "--key", key, "--sequence", seq); code != 0 {
			t.Fatalf("sign: %v\n%s", err, out)
		}
		_, digest, _ = strings.Cut(pinned, "@")
		return digest
	}
	v1 := push("v1", priv, "1")

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	gw, _ := silentGateway(t)
	s := startServeChild(t, ctx, "--url", gw, "--policy-bundle", tag, "--policy-key", pub, "--policy-poll", "0",
		"--metrics-listen", "127.0.0.1:0")
	s.initialize(t, ctx)
	id := 10
	decides := func() string {
		id++
		s.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"events_poll","arguments":{}}}`, id))
		text, _ := resultText(s.answer(t, ctx, float64(id)))
		return text
	}
	if got := decides(); !strings.Contains(got, "v1") {
		t.Fatalf("at start: decides %q, want v1\n%s", got, s.stderr.String())
	}
	m := regexp.MustCompile(`metrics on (http://\S+)/metrics`).FindStringSubmatch(s.stderr.String())
	if m == nil {
		t.Fatalf("no metrics address on stderr:\n%s", s.stderr.String())
	}
	url := m[1] + "/metrics"
	info := regexp.MustCompile(`(?m)^openclaw_policy_bundle_info\{digest="` + v1 + `",key="` + regexp.QuoteMeta(pub) + `",ref="[^"]*serve-metrics:live",sequence="1"\} 1$`)
	body := httpGet(t, url)
	if !info.MatchString(body) || !strings.Contains(body, `openclaw_policy_bundle_updates_total{outcome="accepted",reason=""} 1`) {
		t.Errorf("/metrics at start, want the bundle %s running and accepted:\n%s", v1, grepLines(body, "bundle"))
	}

	push("v2", otherPriv, "2")
	if err := syscall.Kill(s.cmd.Process.Pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(s.stderr.String(), "REFUSED (bad_signature)") {
		select {
		case <-ctx.Done():
			t.Fatalf("no refusal on stderr:\n%s", s.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	body = httpGet(t, url)
	if !strings.Contains(body, `openclaw_policy_bundle_updates_total{outcome="refused",reason="bad_signature"} 1`) || !info.MatchString(body) {
		t.Errorf("/metrics after the refusal, want it counted as bad_signature and %s still running:\n%s", v1, grepLines(body, "bundle"))
	}
	if got := decides(); !strings.Contains(got, "v1") {
		t.Errorf("after the refusal: decides %q, want v1 (the old set)", got)
	}
}

// TestMCPServeMetricsLoopbackOnly: --metrics-listen refuses an address
// that is not loopback, naming it, before anything starts.
func TestMCPServeMetricsLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:9464", "[::]:9464", "192.0.2.1:9464", ":9464"} {
		_, code, err := runPolicyCLI(t, "mcp", "serve", "--metrics-listen", addr)
		if code != 1 || err == nil || !strings.Contains(err.Error(), fmt.Sprintf("--metrics-listen %q: want a loopback address", addr)) {
			t.Errorf("--metrics-listen %s: exit %d, %v; want 1 and the address refused", addr, code, err)
		}
	}
	if _, code, err := runPolicyCLI(t, "mcp", "serve", "--metrics-listen", "127.0.0.1"); code != 1 || err == nil || !strings.Contains(err.Error(), "want HOST:PORT") {
		t.Errorf("--metrics-listen without a port: exit %d, %v", code, err)
	}
}
