package builtin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
)

// loadSanitizer loads the embedded sanitizer module, closed at the end of
// the test.
func loadSanitizer(t testing.TB) *wasmpolicy.Module {
	t.Helper()
	return loadSanitizerWith(t, nil)
}

func loadSanitizerWith(t testing.TB, opts *wasmpolicy.Options) *wasmpolicy.Module {
	t.Helper()
	ctx := context.Background()
	m, err := wasmpolicy.Load(ctx, "sanitizer", builtin.Sanitizer(), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

func sanitize(t *testing.T, m *wasmpolicy.Module, reserved []string, servers ...policies.SanitizeServer) *policies.SanitizeResult {
	t.Helper()
	req := &policies.SanitizeRequest{Reserved: reserved, Servers: servers}
	res, err := m.SanitizeToolNames(context.Background(), req)
	if err != nil {
		t.Fatalf("SanitizeToolNames: %v", err)
	}
	return res
}

// names flattens a result: "safe: name name …" per server, a rejection
// shown as "!".
func names(res *policies.SanitizeResult) []string {
	var out []string
	for _, s := range res.Servers {
		var ts []string
		for _, tn := range s.Tools {
			if tn.Reject != "" {
				ts = append(ts, "!")
			} else {
				ts = append(ts, tn.Name)
			}
		}
		out = append(out, s.Safe+": "+strings.Join(ts, " "))
	}
	return out
}

// hash8 is the sanitizer's stable short hash (docs/tool-names.md):
// FNV-1a 64 of the parts joined by a zero byte, low 32 bits in hex.
func hash8(parts ...string) string {
	h := fnv.New64a()
	h.Write([]byte(strings.Join(parts, "\x00")))
	return fmt.Sprintf("%08x", uint32(h.Sum64()))
}

func srv(name string, tools ...string) policies.SanitizeServer {
	return policies.SanitizeServer{Name: name, Tools: tools}
}

// TestSanitizerRules checks cases derived by hand from OpenClaw's rules
// (docs/tool-names.md §2), and the two places where ours differ on purpose.
func TestSanitizerRules(t *testing.T) {
	t.Parallel()
	m := loadSanitizer(t)
	x70 := strings.Repeat("x", 70)
	a41 := strings.Repeat("a", 40)
	for _, tc := range []struct {
		title    string
		reserved []string
		servers  []policies.SanitizeServer
		want     []string
	}{
		{"kept as is", nil, []policies.SanitizeServer{srv("files", "read_file", "Write-File")},
			[]string{"files: files__read_file files__Write-File"}},
		{"dots slashes spaces become dashes", nil, []policies.SanitizeServer{srv("my.server", "fs/read", "list files")},
			[]string{"my-server: my-server__fs-read my-server__list-files"}},
		{"a letter first", nil, []policies.SanitizeServer{srv("123", "456", "_x")},
			[]string{"mcp-123: mcp-123__tool-456 mcp-123__tool-_x"}},
		{"empty names", nil, []policies.SanitizeServer{srv("", "", " \t", "ok")},
			[]string{"mcp: ! ! mcp__ok"}},
		{"non-ASCII: one dash per UTF-16 code unit", nil, []policies.SanitizeServer{srv("café", "größe", "😀", "x😀y")},
			[]string{"caf-: caf-__gr--e caf-__tool--- caf-__x--y"}},
		{"JS trim", nil, []policies.SanitizeServer{srv("\u00a0srv\ufeff", "\u3000tool\u2003")},
			[]string{"srv: srv__tool"}},
		{"servers colliding after sanitizing, case-insensitively", nil,
			[]policies.SanitizeServer{srv("my server", "a"), srv("my.server", "a"), srv("My-Server", "a")},
			[]string{"my-server: my-server__a", "my-server-2: my-server-2__a", "My-Server-3: My-Server-3__a"}},
		{"tools colliding after sanitizing get suffixes in localeCompare order", nil,
			[]policies.SanitizeServer{srv("s", "a.b", "a b", "a-b", "A B")},
			// localeCompare: "a b" < "A B" < "a-b" < "a.b".
			[]string{"s: s__a-b-4 s__a-b s__a-b-3 s__A-B-2"}},
		{"reserved names, case-insensitively", []string{"S__SEND"},
			[]policies.SanitizeServer{srv("s", "send")}, []string{"s: s__send-2"}},
		{"a suffix that meets a natural name", nil,
			[]policies.SanitizeServer{srv("s", "a b", "a-b", "a-b-2")},
			// Order: "a b", "a-b", "a-b-2": "a-b" takes s__a-b-2 first.
			[]string{"s: s__a-b s__a-b-2 s__a-b-2-2"}},
		{"200-character names", nil, []policies.SanitizeServer{srv(strings.Repeat("s", 200), strings.Repeat("t", 200))},
			[]string{strings.Repeat("s", 30) + ": " + strings.Repeat("s", 30) + "__" + strings.Repeat("t", 32)}},
		{"long tool names cut into a collision keep a stable hash", nil,
			[]policies.SanitizeServer{srv("srv", x70+"a", x70+"b", strings.Repeat("x", 59))},
			[]string{"srv: srv__" + strings.Repeat("x", 50) + "-" + hash8("srv", x70+"a") +
				" srv__" + strings.Repeat("x", 50) + "-" + hash8("srv", x70+"b") +
				" srv__" + strings.Repeat("x", 59)}},
		{"long server names cut into a collision keep a stable hash", nil,
			[]policies.SanitizeServer{srv(a41+"1", "x"), srv(a41+"2", "x")},
			[]string{strings.Repeat("a", 21) + "-" + hash8(a41+"1") + ": " + strings.Repeat("a", 21) + "-" + hash8(a41+"1") + "__x",
				strings.Repeat("a", 21) + "-" + hash8(a41+"2") + ": " + strings.Repeat("a", 21) + "-" + hash8(a41+"2") + "__x"}},
	} {
		t.Run(tc.title, func(t *testing.T) {
			t.Parallel()
			got := names(sanitize(t, m, tc.reserved, tc.servers...))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got\n  %q\nwant\n  %q", got, tc.want)
			}
		})
	}
}

type goldenCase struct {
	Title    string                    `json:"title"`
	Reserved []string                  `json:"reserved"`
	Servers  []policies.SanitizeServer `json:"servers"`
	OpenClaw struct {
		Safe  []string    `json:"safe"`
		Names [][]*string `json:"names"`
	} `json:"openclaw"`
}

var (
	hashedServer = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,20}-[0-9a-f]{8}(-[0-9]+)?$`)
	hashedTool   = regexp.MustCompile(`__[A-Za-z0-9_-]+-([0-9a-f]{8})(-[0-9]+)?$`)
	suffixed     = regexp.MustCompile(`-[0-9]+$`)
)

// TestSanitizerGolden compares the module with OpenClaw's algorithm run
// under Node (testdata/sanitizer_golden.json, generated by
// guests/sanitizer/testdata/openclaw_names.mjs): every name must be
// OpenClaw's, except a name OpenClaw cut into a collision, which must be
// the stable hash form. Reversing the order of every server's tools must
// not change any name but suffixed ones (whose order decides, as in
// OpenClaw, for tools listed twice under the same raw name).
func TestSanitizerGolden(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/sanitizer_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Cases []goldenCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	if len(golden.Cases) < 50 {
		t.Fatalf("only %d golden cases", len(golden.Cases))
	}
	m := loadSanitizer(t)
	hashed := 0
	for _, c := range golden.Cases {
		t.Run(c.Title, func(t *testing.T) {
			res := sanitize(t, m, c.Reserved, c.Servers...)
			for i, s := range c.Servers {
				got, want := res.Servers[i].Safe, c.OpenClaw.Safe[i]
				if got != want {
					if !hashedServer.MatchString(got) || !strings.Contains(got, hash8(s.Name)) {
						t.Errorf("server %q: safe name %q, OpenClaw %q", s.Name, got, want)
					}
					hashed++
				}
				for j, tool := range s.Tools {
					g, w := res.Servers[i].Tools[j], c.OpenClaw.Names[i][j]
					if w == nil {
						if g.Reject == "" {
							t.Errorf("server %q tool %q: got %q, OpenClaw skips it", s.Name, tool, g.Name)
						}
						continue
					}
					if g.Name == *w || got != want && strings.TrimPrefix(g.Name, got) == strings.TrimPrefix(*w, want) {
						continue
					}
					sub := hashedTool.FindStringSubmatch(g.Name)
					if len(*w) < 60 || sub == nil || sub[1] != hash8(s.Name, tool) {
						t.Errorf("server %q tool %q: got %q, OpenClaw %q", s.Name, tool, g.Name, *w)
					}
					hashed++
				}
			}
			// Stability: the same catalog with each server's tools reversed.
			rev := make([]policies.SanitizeServer, len(c.Servers))
			for i, s := range c.Servers {
				rev[i] = srv(s.Name, slices.Clone(s.Tools)...)
				slices.Reverse(rev[i].Tools)
			}
			res2 := sanitize(t, m, c.Reserved, rev...)
			for i, s := range c.Servers {
				for j := range s.Tools {
					a, b := res.Servers[i].Tools[j], res2.Servers[i].Tools[len(s.Tools)-1-j]
					if a != b && !suffixed.MatchString(a.Name) && !suffixed.MatchString(b.Name) {
						t.Errorf("server %q tool %q: %q, reversed %q", s.Name, s.Tools[j], a.Name, b.Name)
					}
				}
			}
		})
	}
	if hashed == 0 {
		t.Error("no golden case exercised the stable hash")
	}
}

// TestSanitizerHostile: names that break LLM APIs or naive sanitizers
// always come out valid, unique and stable, and a JSON escape in the
// input (which the guest decodes on its slow path) gives the same names.
func TestSanitizerHostile(t *testing.T) {
	t.Parallel()
	m := loadSanitizer(t)
	long := strings.Repeat("ü", 100) + strings.Repeat("x", 100)
	servers := []policies.SanitizeServer{
		srv("a.b/c d", "../../etc/passwd", "rm -rf /", "a\x00b", "\u2028", "tab\there", "<script>", long, long+"y", "😀😀😀"),
		srv("42", "1", "2", "-", "_", "--", "__"),
		srv("", ""), srv(" "), srv("mcp", "x"), srv("MCP-2", "x"), srv("mcp 2", "x"),
		srv(strings.Repeat("é", 40), "t"), srv(strings.Repeat("è", 40), "t"),
	}
	res := sanitize(t, m, []string{"mcp__x"}, servers...)
	// Validated by the adapter; spot checks on what users see:
	got := names(res)
	for _, want := range []string{"mcp-42: mcp-42__tool-1 mcp-42__tool-2 mcp-42__tool-- mcp-42__tool-_ mcp-42__tool--- mcp-42__tool-__"} {
		if !slices.Contains(got, want) {
			t.Errorf("missing %q in %q", want, got)
		}
	}
	if res.Servers[0].Tools[0].Name != "a-b-c-d__tool-------etc-passwd" {
		t.Errorf("path traversal name: %q", res.Servers[0].Tools[0].Name)
	}
	for i, s := range res.Servers {
		for j, tn := range s.Tools {
			if tn.Reject == "" && !policies.ValidToolName(tn.Name) {
				t.Errorf("server %d tool %d: invalid %q", i, j, tn.Name)
			}
		}
	}
	again := sanitize(t, m, []string{"mcp__x"}, servers...)
	if !slices.Equal(names(again), got) {
		t.Errorf("not deterministic:\n%q\n%q", names(again), got)
	}
}

// FuzzSanitizer: any catalog is named without a failure (the adapter
// validates every answer: valid, unique, not reserved, same shape).
func FuzzSanitizer(f *testing.F) {
	f.Add("files", "read_file\nwrite file\n\n😀", "conversations_list", "web", "fetch url\nFETCH-URL")
	f.Add(strings.Repeat("s", 40), strings.Repeat("t", 70)+"\n"+strings.Repeat("t", 71), "", strings.Repeat("s", 41), "x")
	m := loadSanitizer(f)
	f.Fuzz(func(t *testing.T, s1, tools1, reserved, s2, tools2 string) {
		req := &policies.SanitizeRequest{Reserved: strings.Split(reserved, "\n"), Servers: []policies.SanitizeServer{
			{Name: s1, Tools: strings.Split(tools1, "\n")}, {Name: s2, Tools: strings.Split(tools2, "\n")}}}
		if _, err := m.SanitizeToolNames(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	})
}

// loadSanitizerConfig loads the embedded sanitizer with a config, closed
// at the end of the test.
func loadSanitizerConfig(t testing.TB, config string) *wasmpolicy.Module {
	t.Helper()
	m, err := wasmpolicy.Load(context.Background(), "sanitizer", builtin.Sanitizer(), json.RawMessage(config), nil)
	if err != nil {
		t.Fatalf("config %s: %v", config, err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// TestSanitizerPrefixModes checks the "prefix" option (docs/tool-names.md
// §6): "never" drops the server part, "auto" drops it only for a catalog
// of one server, "always" (and no config) is OpenClaw's naming. Every
// guarantee holds without the prefix: charset, a letter first, 64
// characters, case-insensitive uniqueness against each other and the
// reserved names, stable hashes for names cut into a collision.
func TestSanitizerPrefixModes(t *testing.T) {
	t.Parallel()
	x70 := strings.Repeat("x", 70)
	one := []policies.SanitizeServer{srv("everything", "test_simple_text", "test_image_content", "echo")}
	two := []policies.SanitizeServer{srv("a", "echo", "only_a"), srv("b", "ECHO", "only_b", "echo")}
	for _, tc := range []struct {
		title, config string
		reserved      []string
		servers       []policies.SanitizeServer
		want          []string
	}{
		{"no config: OpenClaw's prefix", "", nil, one,
			[]string{"everything: everything__test_simple_text everything__test_image_content everything__echo"}},
		{"always", `{"prefix":"always"}`, nil, one,
			[]string{"everything: everything__test_simple_text everything__test_image_content everything__echo"}},
		{"never: raw names", `{"prefix":"never"}`, nil, one,
			[]string{"everything: test_simple_text test_image_content echo"}},
		{"auto with one server: raw names", `{"prefix":"auto"}`, nil, one,
			[]string{"everything: test_simple_text test_image_content echo"}},
		{"auto with two servers: prefixed", `{"prefix":"auto"}`, nil, two,
			[]string{"a: a__echo a__only_a", "b: b__ECHO-2 b__only_b b__echo"}},
		{"never: collisions across servers get suffixes in catalog order", `{"prefix":"never"}`, nil, two,
			// Catalog order: server a before b; in b, "echo" before "ECHO".
			[]string{"a: echo only_a", "b: ECHO-3 only_b echo-2"}},
		{"never: sanitized, a letter first, empty rejected", `{"prefix":"never"}`, nil,
			[]policies.SanitizeServer{srv("s", "fs/read", "123", "", "😀")},
			[]string{"s: fs-read tool-123 ! tool---"}},
		{"never: reserved names, ignoring case", `{"prefix":"never"}`, []string{"Conversations_List"},
			[]policies.SanitizeServer{srv("s", "conversations_list", "events_poll")},
			[]string{"s: conversations_list-2 events_poll"}},
		{"never: 64 characters", `{"prefix":"never"}`, nil,
			[]policies.SanitizeServer{srv("s", strings.Repeat("t", 200))},
			[]string{"s: " + strings.Repeat("t", 64)}},
		{"never: names cut into a collision keep a stable hash", `{"prefix":"never"}`, nil,
			[]policies.SanitizeServer{srv("srv", x70+"a", x70+"b")},
			[]string{"srv: " + strings.Repeat("x", 55) + "-" + hash8("srv", x70+"a") +
				" " + strings.Repeat("x", 55) + "-" + hash8("srv", x70+"b")}},
	} {
		t.Run(tc.title, func(t *testing.T) {
			t.Parallel()
			m := loadSanitizerConfig(t, tc.config)
			res := sanitize(t, m, tc.reserved, tc.servers...)
			got := names(res)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got\n  %q\nwant\n  %q", got, tc.want)
			}
			seen := map[string]bool{}
			for _, r := range tc.reserved {
				seen[strings.ToLower(r)] = true
			}
			for _, s := range res.Servers {
				for _, tn := range s.Tools {
					if tn.Reject != "" {
						continue
					}
					if !policies.ValidToolName(tn.Name) || len(tn.Name) > 64 {
						t.Errorf("invalid name %q", tn.Name)
					}
					if seen[strings.ToLower(tn.Name)] {
						t.Errorf("name %q taken twice (ignoring case) or reserved", tn.Name)
					}
					seen[strings.ToLower(tn.Name)] = true
				}
			}
		})
	}
}

// TestSanitizerConfigErrors: a config the sanitizer does not understand
// refuses the module at load, naming the key or value.
func TestSanitizerConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ config, want string }{
		{`{"prefix":"sometimes"}`, `prefix: unknown value "sometimes"`},
		{`{"prefx":"never"}`, `unknown key "prefx"`},
		{`{"prefix":1}`, `prefix`},
		{`[]`, `config`},
	} {
		t.Run(tc.config, func(t *testing.T) {
			t.Parallel()
			m, err := wasmpolicy.Load(context.Background(), "sanitizer", builtin.Sanitizer(), json.RawMessage(tc.config), nil)
			if err == nil {
				m.Close(context.Background())
				t.Fatalf("config %s accepted", tc.config)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// FuzzSanitizerRaw is FuzzSanitizer in raw-name mode ("prefix":"never"),
// where tools of different servers compete for the same names.
func FuzzSanitizerRaw(f *testing.F) {
	f.Add("files", "read_file\nwrite file\n\n😀", "read_file", "web", "READ_FILE\nread file\nread_file-2")
	f.Add(strings.Repeat("s", 40), strings.Repeat("t", 70)+"\n"+strings.Repeat("t", 71), "", strings.Repeat("s", 41), strings.Repeat("t", 70))
	m := loadSanitizerConfig(f, `{"prefix":"never"}`)
	f.Fuzz(func(t *testing.T, s1, tools1, reserved, s2, tools2 string) {
		req := &policies.SanitizeRequest{Reserved: strings.Split(reserved, "\n"), Servers: []policies.SanitizeServer{
			{Name: s1, Tools: strings.Split(tools1, "\n")}, {Name: s2, Tools: strings.Split(tools2, "\n")}}}
		if _, err := m.SanitizeToolNames(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	})
}
