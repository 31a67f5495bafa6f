package proxy

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// getWith is a GET of url with the header set; a refused connection is
// status 0.
func getWith(t *testing.T, url string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if host, ok := header["Host"]; ok {
		req.Host = host
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

// readyBody decodes a /readyz answer.
func readyBody(t *testing.T, body string) ready {
	t.Helper()
	var r ready
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("/readyz body %q: %v", body, err)
	}
	return r
}

// TestReadyChecks: /readyz is 200 while every check holds, 503 naming the
// one that does not (with its reason) otherwise, and passes the Host check
// like every path; openclaw_proxy_ready follows it.
func TestReadyChecks(t *testing.T) {
	t.Parallel()
	const token = "r"
	var missing atomic.Bool
	missing.Store(true)
	f := newHTTPFixture(t, HTTPOptions{Token: token, Ready: []ReadyCheck{{Name: "policies", Check: func() error {
		if missing.Load() {
			return errors.New("no policy module is loaded")
		}
		return nil
	}}}})
	auth := map[string]string{"Authorization": "Bearer " + token}

	code, _, body := getWith(t, f.url+PathReady, nil)
	if r := readyBody(t, body); code != http.StatusServiceUnavailable || r.Ready || r.NotReady["policies"] != "no policy module is loaded" {
		t.Fatalf("/readyz with a failing check = %d %s, want 503 naming policies", code, body)
	}
	if _, _, m := getWith(t, f.url+PathMetrics, auth); !strings.Contains(m, "openclaw_proxy_ready 0") {
		t.Errorf("metrics while not ready lack openclaw_proxy_ready 0:\n%s", m)
	}
	missing.Store(false)
	code, _, body = getWith(t, f.url+PathReady, nil)
	if r := readyBody(t, body); code != http.StatusOK || !r.Ready || r.NotReady != nil {
		t.Fatalf("/readyz when ready = %d %s, want 200 {\"ready\":true}", code, body)
	}
	if _, _, m := getWith(t, f.url+PathMetrics, auth); !strings.Contains(m, "openclaw_proxy_ready 1") || !strings.Contains(m, "openclaw_proxy_draining 0") {
		t.Errorf("metrics when ready lack openclaw_proxy_ready 1 / openclaw_proxy_draining 0:\n%s", m)
	}
	if code, _, body := getWith(t, f.url+PathReady, map[string]string{"Host": "evil.example"}); code != http.StatusForbidden {
		t.Errorf("/readyz with a foreign Host = %d %s, want 403", code, body)
	}
	if code, _, body := getWith(t, f.url+PathReady, map[string]string{"Origin": "https://evil.example"}); code != http.StatusForbidden {
		t.Errorf("/readyz with a foreign Origin = %d %s, want 403", code, body)
	}
}
