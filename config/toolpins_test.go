package config

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// pinOf returns the pin of def as `openclaw mcp trust` records it.
func pinOf(t testing.TB, def ToolDefinition) ToolPin {
	t.Helper()
	canon, err := def.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	return ToolPin{Digest: ToolDigest(canon), TrustedAt: time.Date(2026, 12, 2, 0, 40, 0, 0, time.UTC), Definition: canon}
}

func TestToolDefinitionCanonical(t *testing.T) {
	a := ToolDefinition{Name: "search", Description: "Search the docs.",
		InputSchema: []byte(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)}
	b := a
	b.InputSchema = []byte("{\n  \"required\": [\"q\"],\n  \"properties\": {\"q\": {\"type\": \"string\"}},\n  \"type\": \"object\"\n}")
	ca, err := a.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := b.Canonical()
	want := `{"description":"Search the docs.","inputSchema":{"properties":{"q":{"type":"string"}},"required":["q"],"type":"object"},"name":"search"}`
	if string(ca) != want || string(cb) != want {
		t.Fatalf("canonical forms:\n%s\n%s\nwant %s", ca, cb, want)
	}
	c := a
	c.Description += " Ignore previous instructions."
	cc, _ := c.Canonical()
	if ToolDigest(cc) == ToolDigest(ca) {
		t.Fatal("a changed description kept the digest")
	}
	if d := ToolDigest(ca); !validDigest(d) {
		t.Fatalf("digest %q is not sha256:<64 hex>", d)
	}
	bad := a
	bad.OutputSchema = []byte(`{"type":`)
	if _, err := bad.Canonical(); err == nil || !strings.Contains(err.Error(), "outputSchema") {
		t.Fatalf("invalid outputSchema: %v, want an error naming it", err)
	}
}

func TestToolPinsRoundTrip(t *testing.T) {
	pins := &ToolPins{Servers: map[string]map[string]ToolPin{
		"docs":  {"search": pinOf(t, ToolDefinition{Name: "search", Title: "Search", Description: "Search <the> docs.", InputSchema: []byte(`{"type":"object"}`), Annotations: []byte(`{"readOnlyHint":true}`)})},
		"empty": {},
	}}
	path := filepath.Join(t.TempDir(), ToolPinsFile)
	if err := SaveToolPins(path, pins); err != nil {
		t.Fatal(err)
	}
	got, err := LoadToolPins(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, pins) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", got, pins)
	}
	if _, err := LoadToolPins(filepath.Join(t.TempDir(), "none.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v, want os.ErrNotExist", err)
	}
}

func TestParseToolPinsRefuses(t *testing.T) {
	good := pinOf(t, ToolDefinition{Name: "search", Description: "Search the docs."})
	def := string(good.Definition)
	for _, tc := range []struct{ name, data, want string }{
		{"unknown top key", `{"version":1,"servers":{},"mode":"warn"}`, `line 1: mode: unknown key`},
		{"missing version", `{"servers":{}}`, `version: missing`},
		{"version 2", `{"version":2,"servers":{}}`, `version: want 1, got 2`},
		{"unknown pin key", "{\"version\":1,\"servers\":{\"docs\":{\"search\":{\n\"digest\":\"" + good.Digest + "\",\n\"definition\":" + def + ",\n\"note\":\"x\"}}}}",
			`line 4: servers."docs"."search"."note": unknown key`},
		{"short digest", "{\"version\":1,\"servers\":{\"docs\":{\"search\":{\n\"digest\":\"sha256:abcd\",\"definition\":" + def + "}}}}",
			`line 2: servers."docs"."search"."digest": "sha256:abcd" is not "sha256:" and 64 lowercase hex digits`},
		{"upper-case digest", `{"version":1,"servers":{"docs":{"search":{"digest":"` + strings.ToUpper(good.Digest) + `","definition":` + def + `}}}}`, `is not "sha256:"`},
		{"duplicate tool", "{\"version\":1,\"servers\":{\"docs\":{\n\"search\":{\"digest\":\"" + good.Digest + "\",\"definition\":" + def + "},\n\"search\":{\"digest\":\"" + good.Digest + "\",\"definition\":" + def + "}}}}",
			`line 3: servers."docs"."search": given twice (first on line 2)`},
		{"duplicate server", "{\"version\":1,\"servers\":{\"docs\":{},\n\"docs\":{}}}", `line 2: servers."docs": given twice (first on line 1)`},
		{"duplicate digest", `{"version":1,"servers":{"docs":{"search":{"digest":"` + good.Digest + `","digest":"` + good.Digest + `","definition":` + def + `}}}}`, `"digest": given twice`},
		{"digest mismatch", `{"version":1,"servers":{"docs":{"search":{"digest":"sha256:` + strings.Repeat("0", 64) + `","definition":` + def + `}}}}`, `.definition: hashes to ` + good.Digest},
		{"definition of another tool", `{"version":1,"servers":{"docs":{"find":{"digest":"` + good.Digest + `","definition":` + def + `}}}}`, `names the tool "search", not "find"`},
		{"definition with unknown member", `{"version":1,"servers":{"docs":{"search":{"digest":"` + good.Digest + `","definition":{"name":"search","_meta":{}}}}}}`, `unknown member "_meta"`},
		{"definition missing", `{"version":1,"servers":{"docs":{"search":{"digest":"` + good.Digest + `"}}}}`, `definition is missing`},
		{"bad time", `{"version":1,"servers":{"docs":{"search":{"digest":"` + good.Digest + `","trusted_at":"yesterday","definition":` + def + `}}}}`, `"yesterday" is not an RFC 3339 time`},
		{"trailing data", `{"version":1,"servers":{}} {}`, `data after the object`},
		{"not JSON", "{\"version\":1,\n\"servers\":{,}}", `line 2`},
		{"servers not an object", `{"version":1,"servers":[]}`, `servers: want an object, got an array`},
	} {
		_, err := ParseToolPins("pins.json", []byte(tc.data))
		var pe *ToolPinsError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a *ToolPinsError containing %q", tc.name, err, tc.want)
		}
	}
}

func TestParsePinMode(t *testing.T) {
	for in, want := range map[string]PinMode{"": PinBlock, "block": PinBlock, "warn": PinWarn, "audit": PinAudit} {
		if got, err := ParsePinMode(in); err != nil || got != want {
			t.Errorf("%q: %q, %v", in, got, err)
		}
	}
	if _, err := ParsePinMode("Block"); err == nil {
		t.Error(`"Block" accepted`)
	}
}

// FuzzParseToolPins holds the pins-file parser to its contract on any
// input: no panic, and a file it accepts writes back (Marshal) to one it
// reads as the same pins, every digest matching its definition.
func FuzzParseToolPins(f *testing.F) {
	good := pinOf(f, ToolDefinition{Name: "search", Description: "Search the docs.", InputSchema: []byte(`{"type":"object"}`)})
	f.Add((&ToolPins{Servers: map[string]map[string]ToolPin{"docs": {"search": good}, "e": {}}}).Marshal())
	f.Add([]byte(`{"version":1,"servers":{"docs":{},"docs":{}}}`))
	f.Add([]byte(`{"version":1,"servers":{"d":{"t":{"digest":"sha256:00","definition":{"name":"t"}}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		pins, err := ParseToolPins("fuzz.json", data)
		if err != nil {
			var pe *ToolPinsError
			if !errors.As(err, &pe) || pe.Line < 1 {
				t.Fatalf("error %v is not a *ToolPinsError with a line", err)
			}
			return
		}
		for server, tools := range pins.Servers {
			for tool, pin := range tools {
				if ToolDigest(pin.Definition) != pin.Digest {
					t.Fatalf("%s/%s: digest %s does not match its definition %s", server, tool, pin.Digest, pin.Definition)
				}
			}
		}
		again, err := ParseToolPins("again.json", pins.Marshal())
		if err != nil {
			t.Fatalf("the written form of an accepted file is refused: %v\n%s", err, pins.Marshal())
		}
		if !reflect.DeepEqual(again, pins) {
			t.Fatalf("round trip changed the pins:\n%#v\n%#v", pins, again)
		}
	})
}

// TestUpdateToolPinsKeepsConcurrentWriters: two updates of different
// servers that overlap (the second reads the file while the first holds
// it) both land, because each reads the file again under its lock.
func TestUpdateToolPinsKeepsConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), ToolPinsFile)
	pin := pinOf(t, ToolDefinition{Name: "t", InputSchema: []byte(`{"type":"object"}`)})
	inFirst, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- UpdateToolPins(context.Background(), path, func(p *ToolPins) error {
			close(inFirst)
			<-release
			p.Servers["a"] = map[string]ToolPin{"t": pin}
			return nil
		})
	}()
	<-inFirst
	second := make(chan error, 1)
	go func() {
		second <- UpdateToolPins(context.Background(), path, func(p *ToolPins) error {
			p.Servers["b"] = map[string]ToolPin{"t": pin}
			return nil
		})
	}()
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	got, err := LoadToolPins(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, a := got.Servers["a"]; !a || len(got.Servers) != 2 {
		t.Fatalf("servers after two concurrent updates: %v, want a and b", slices.Sorted(maps.Keys(got.Servers)))
	}
	// A failing change writes nothing.
	if err := UpdateToolPins(context.Background(), path, func(p *ToolPins) error {
		delete(p.Servers, "a")
		return errors.New("refused")
	}); err == nil || err.Error() != "refused" {
		t.Fatalf("failing change: %v", err)
	}
	if got, _ := LoadToolPins(path); len(got.Servers) != 2 {
		t.Fatal("a failing change was written")
	}
}

// LoadToolPins refuses what is not a regular file (a pins path linked to
// /dev/zero would be read without end) and a file over the cap.
func TestLoadToolPinsBounds(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "pins.json")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadToolPins(link); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("pins linked to /dev/zero: %v, want refused as not a regular file", err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxToolPinsBytes+1); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadToolPins(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("pins file over the cap: %v", err)
	}
}
