package bundle_test

import (
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/policies/bundle"
)

var goodManifest = `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
"artifactType":"application/vnd.openclaw.policy.bundle.v1",
"config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},
"layers":[{"mediaType":"application/vnd.openclaw.policy.file.v1+json","digest":"sha256:` + hex64a + `","size":10,"annotations":{"org.opencontainers.image.title":"policy.json"}},
{"mediaType":"application/vnd.openclaw.policy.module.v1+wasm","digest":"sha256:` + hex64a + `","size":10,"annotations":{"org.opencontainers.image.title":"mods/rules.wasm"}},
{"mediaType":"application/vnd.openclaw.policy.cases.v1+jsonl","digest":"sha256:` + hex64a + `","size":10,"annotations":{"org.opencontainers.image.title":"tests/rules.jsonl"}}]}`

const hex64a = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

func TestParseManifest(t *testing.T) {
	if _, err := bundle.ParseManifest([]byte(goodManifest)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to, want string }{
		{"application/vnd.openclaw.policy.bundle.v1", "application/x", "not a policy bundle"},
		{`"mods/rules.wasm"`, `"../rules.wasm"`, "not a clean relative path"},
		{`"mods/rules.wasm"`, `"/rules.wasm"`, "not a clean relative path"},
		{`"mods/rules.wasm"`, `"tests/rules.wasm"`, "outside tests/"},
		{`"tests/rules.jsonl"`, `"rules.jsonl"`, "tests/NAME.jsonl"},
		{`"mods/rules.wasm"`, `"policy.json"`, "must be a .wasm path"},
		{`"size":10,"annotations":{"org.opencontainers.image.title":"policy.json"}`, `"size":-1,"annotations":{"org.opencontainers.image.title":"policy.json"}`, "size -1"},
		{"sha256:" + hex64a + `","size":10,"annotations":{"org.opencontainers.image.title":"policy.json"}`, `md5:00","size":10,"annotations":{"org.opencontainers.image.title":"policy.json"}`, "not sha256"},
		{"application/vnd.openclaw.policy.file.v1+json", "application/vnd.openclaw.policy.module.v1+wasm", "must be a .wasm path"},
		{`"schemaVersion":2`, `"schemaVersion":1`, "schemaVersion 1"},
	} {
		data := strings.Replace(goodManifest, c.from, c.to, 1)
		if data == goodManifest {
			t.Fatalf("%q is not in the manifest", c.from)
		}
		if _, err := bundle.ParseManifest([]byte(data)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s → %s: %v, want %q", c.from, c.to, err, c.want)
		}
	}
}

// FuzzParseManifest: whatever the bytes, the parser returns an error or a
// manifest whose layers are all of the bundle layout, never panics.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(goodManifest))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"schemaVersion":2,"layers":[null]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := bundle.ParseManifest(data)
		if err != nil {
			return
		}
		titles := map[string]bool{}
		for _, l := range m.Layers {
			title := l.Annotations["org.opencontainers.image.title"]
			if titles[title] || title == "" || strings.Contains(title, "..") || strings.HasPrefix(title, "/") {
				t.Fatalf("accepted layer title %q", title)
			}
			titles[title] = true
		}
		if !titles["policy.json"] {
			t.Fatal("accepted a manifest without policy.json")
		}
	})
}
