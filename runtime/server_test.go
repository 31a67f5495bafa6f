package runtime

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/transport"
)

func TestServersFromConfig(t *testing.T) {
	t.Parallel()
	doc, err := config.ParseDocument("openclaw.json", []byte(`{
	  mcp: { servers: {
	    files: { command: "npx", args: ["-y", "server-filesystem", "/tmp"], cwd: "/srv",
	             env: { API_TOKEN: "s3cret", DEBUG: 1, NODE_OPTIONS: "--inspect" },
	             toolFilter: { include: [" read* "], exclude: ["write"] } },
	    web: { url: "https://example.com/mcp", type: "http", headers: { Authorization: "Bearer ${TOKEN}", "X-N": 2 },
	           requestTimeoutMs: 5000, connectionTimeoutMs: 1000, sslVerify: false,
	           clientCert: "c.pem", clientKey: "k.pem", supportsParallelToolCalls: true },
	    legacy: { url: "http://127.0.0.1:9/sse", enabled: false, requestTimeoutMs: 60000 },
	  } },
	}`))
	if err != nil {
		t.Fatal(err)
	}
	resolved, errs := doc.ResolveServers()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	got := ServersFromConfig(resolved)
	f := false
	tf := &config.ToolFilter{Include: []string{"read*"}, Exclude: []string{"write"}}
	want := []Server{
		{
			// Entry is the entry as written; BlockedEnv what the filter drops.
			Name: "files",
			Entry: config.ServerEntry{
				Command: "npx", Args: []string{"-y", "server-filesystem", "/tmp"}, Cwd: "/srv",
				Env:        map[string]any{"API_TOKEN": "s3cret", "DEBUG": 1.0, "NODE_OPTIONS": "--inspect"},
				ToolFilter: tf,
			},
			BlockedEnv: []string{"NODE_OPTIONS"},
			ToolFilter: tf,
		},
		{
			Name: "web",
			Entry: config.ServerEntry{
				URL: "https://example.com/mcp", Type: "http",
				Headers:             map[string]any{"Authorization": "Bearer ${TOKEN}", "X-N": 2.0},
				RequestTimeoutMs:    5000,
				ConnectionTimeoutMs: 1000, SSLVerify: &f, ClientCert: "c.pem", ClientKey: "k.pem",
				SupportsParallelToolCalls: true,
			},
			SupportsParallelToolCalls: true,
		},
		{
			// A requestTimeoutMs written in the file is the tools/list
			// bound too, even when it equals the default (docs/protocol-facts.md, Defaults and limits).
			Name:     "legacy",
			Entry:    config.ServerEntry{URL: "http://127.0.0.1:9/sse", Enabled: &f, RequestTimeoutMs: 60000},
			Disabled: true,
		},
	}
	for i := range want {
		if i >= len(got) {
			t.Fatalf("got %d servers, want %d", len(got), len(want))
		}
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("server %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if got[0].listTimeout() != DefaultListTimeout || got[1].listTimeout().Milliseconds() != 5000 || got[1].connectTimeout().Milliseconds() != 1000 || got[2].listTimeout().Milliseconds() != 60000 {
		t.Errorf("timeouts: list %v/%v/%v connect %v", got[0].listTimeout(), got[1].listTimeout(), got[2].listTimeout(), got[1].connectTimeout())
	}
	// Each mapped entry resolves with the transport package as OpenClaw would.
	for i, wantKind := range []transport.Kind{transport.KindStdio, transport.KindStreamableHTTP, transport.KindSSE} {
		e := got[i].Entry
		e.ClientCert, e.ClientKey = "", "" // the files do not exist here
		delete(e.Env, "NODE_OPTIONS")      // refused, as BlockedEnv says
		r, err := transport.Resolve(got[i].Name, e, &transport.Options{Logger: quietLogger(), LookupEnv: func(k string) (string, bool) { return "tok", true }})
		if err != nil {
			t.Fatalf("%s: %v", got[i].Name, err)
		}
		if r.Kind != wantKind {
			t.Errorf("%s resolves to %s, want %s", got[i].Name, r.Kind, wantKind)
		}
	}
}

func TestJSONSizeEstimate(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		`{"type":"object","properties":{"path":{"type":"string","description":"where"},"n":{"type":"integer"}},"required":["path"]}`,
		`{"a":[1,true,null,"x"],"b":{}}`,
	} {
		var v any
		if err := json.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatal(err)
		}
		got := jsonSize(v)
		if got < len(doc)*8/10 || got > len(doc)*15/10 { // over is the safe side of a cap
			t.Errorf("jsonSize(%s) = %d, want between 0.8× and 1.5× of %d", doc, got, len(doc))
		}
	}
}
