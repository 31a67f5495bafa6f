package builtin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
)

// exposedOf returns what a host has exposed after naming req with res:
// every server's safe name and every named tool.
func exposedOf(req *policies.SanitizeRequest, res *policies.SanitizeResult) []policies.ExposedServer {
	out := make([]policies.ExposedServer, len(req.Servers))
	for i, s := range req.Servers {
		out[i] = policies.ExposedServer{Server: s.Name, Safe: res.Servers[i].Safe}
		for j, raw := range s.Tools {
			if n := res.Servers[i].Tools[j].Name; n != "" {
				out[i].Tools = append(out[i].Tools, raw)
				out[i].Names = append(out[i].Names, n)
			}
		}
	}
	return out
}

// byTool maps "server\x00tool" to the exposed name.
func byTool(req *policies.SanitizeRequest, res *policies.SanitizeResult) map[string]string {
	m := map[string]string{}
	for i, s := range req.Servers {
		for j, raw := range s.Tools {
			if n := res.Servers[i].Tools[j].Name; n != "" {
				m[s.Name+"\x00"+raw] = n
			}
		}
	}
	return m
}

// TestSanitizerExposedNamesStay: with the names already exposed passed
// as "exposed", a tool keeps its name when another tool or server comes,
// and the newcomer takes the suffix or the hash (docs/tool-names.md §8).
// Each case also names the second catalog fresh, to show that without
// "exposed" the old name would move.
func TestSanitizerExposedNamesStay(t *testing.T) {
	t.Parallel()
	m := loadSanitizer(t)
	doc := "search_cloudflare_documentation_and_return_the_most_relevant_pages_x"
	doc2 := "search_cloudflare_documentation_and_return_the_most_relevant_pages_y"
	platform := "Acme_Enterprise_Data_Management_Platform_"
	for _, tc := range []struct {
		title         string
		before, after []policies.SanitizeServer
		// keep: the tools (server, tool) whose name must not change.
		keep [][2]string
		// want: names of the second catalog, by server and tool.
		want map[string]string
	}{
		{"a second long tool does not rename the first",
			[]policies.SanitizeServer{srv("cloudflare", doc)},
			[]policies.SanitizeServer{srv("cloudflare", doc, doc2)},
			[][2]string{{"cloudflare", doc}},
			map[string]string{"cloudflare\x00" + doc2: "cloudflare__" + doc2[:43] + "-" + hash8("cloudflare", doc2)}},
		{"a second long server does not rename the first's tools",
			[]policies.SanitizeServer{srv(platform+"2", "list_assets", "get_asset")},
			[]policies.SanitizeServer{srv(platform+"2", "list_assets", "get_asset"), srv(platform+"3", "list_assets")},
			[][2]string{{platform + "2", "list_assets"}, {platform + "2", "get_asset"}},
			map[string]string{platform + "3\x00list_assets": platform[:21] + "-" + hash8(platform+"3") + "__list_assets"}},
		{"a tool that sanitizes to an exposed name takes the suffix",
			[]policies.SanitizeServer{srv("netapp", "Create-CIFS-Share")},
			[]policies.SanitizeServer{srv("netapp", "Create CIFS Share", "Create-CIFS-Share")},
			[][2]string{{"netapp", "Create-CIFS-Share"}},
			map[string]string{"netapp\x00Create CIFS Share": "netapp__Create-CIFS-Share-2"}},
		{"a removed tool's name is not given to another",
			[]policies.SanitizeServer{srv("netapp", "Create-CIFS-Share")},
			[]policies.SanitizeServer{srv("netapp", "Create CIFS Share")},
			nil,
			map[string]string{"netapp\x00Create CIFS Share": "netapp__Create-CIFS-Share-2"}},
		{"a removed server's names are not given to another",
			[]policies.SanitizeServer{srv("my server", "a")},
			[]policies.SanitizeServer{srv("my.server", "a")},
			nil,
			map[string]string{"my.server\x00a": "my-server__a-2"}},
	} {
		t.Run(tc.title, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			req1 := &policies.SanitizeRequest{Servers: tc.before}
			res1, err := m.SanitizeToolNames(ctx, req1)
			if err != nil {
				t.Fatal(err)
			}
			first := byTool(req1, res1)
			req2 := &policies.SanitizeRequest{Servers: tc.after, Exposed: exposedOf(req1, res1)}
			res2, err := m.SanitizeToolNames(ctx, req2)
			if err != nil {
				t.Fatal(err)
			}
			second := byTool(req2, res2)
			fresh, err := m.SanitizeToolNames(ctx, &policies.SanitizeRequest{Servers: tc.after})
			if err != nil {
				t.Fatal(err)
			}
			moved := false
			for _, k := range tc.keep {
				key := k[0] + "\x00" + k[1]
				if second[key] != first[key] {
					t.Errorf("%q of %q: %q, then %q", k[1], k[0], first[key], second[key])
				}
				moved = moved || byTool(&policies.SanitizeRequest{Servers: tc.after}, fresh)[key] != first[key]
			}
			for key, want := range tc.want {
				if second[key] != want {
					t.Errorf("%q: got %q, want %q", key, second[key], want)
				}
			}
			// No exposed name points at another tool.
			owner := map[string]string{}
			for key, n := range first {
				owner[strings.ToLower(n)] = key
			}
			for key, n := range second {
				if o, ok := owner[strings.ToLower(n)]; ok && o != key {
					t.Errorf("name %q moved from %q to %q", n, o, key)
				}
			}
			if len(tc.keep) > 0 && !moved {
				t.Errorf("fresh naming keeps the names too: the case shows nothing")
			}
		})
	}
}

// TestSanitizerExposedRulesChange: an exposed name the current rules
// cannot give the tool (another prefix mode, another budget) is dropped:
// the tool gets its new name and the old one stays taken.
func TestSanitizerExposedRulesChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	old := []policies.ExposedServer{{Server: "a", Safe: "a", Tools: []string{"x"}, Names: []string{"a__x"}}}
	never := loadSanitizerConfig(t, `{"prefix":"never"}`)
	res, err := never.SanitizeToolNames(ctx, &policies.SanitizeRequest{
		Servers: []policies.SanitizeServer{srv("a", "x"), srv("b", "a__x")}, Exposed: old})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(res); !slices.Equal(got, []string{"a: x", "b: a__x-2"}) {
		t.Errorf("prefix never after always: %q", got)
	}
	long := strings.Repeat("t", 60)
	short := loadSanitizerConfig(t, `{"maxNameLength":40}`)
	res, err = short.SanitizeToolNames(ctx, &policies.SanitizeRequest{
		Servers: []policies.SanitizeServer{srv("s", long)},
		Exposed: []policies.ExposedServer{{Server: "s", Safe: "s", Tools: []string{long}, Names: []string{"s__" + long[:59]}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(res); !slices.Equal(got, []string{"s: s__" + long[:37]}) {
		t.Errorf("budget 40 after 64: %q", got)
	}
	// A hostile or stale entry (invalid, reserved, repeated) is not kept.
	m := loadSanitizer(t)
	res, err = m.SanitizeToolNames(ctx, &policies.SanitizeRequest{
		Reserved: []string{"S__R"},
		Servers:  []policies.SanitizeServer{srv("s", "a", "b", "r")},
		Exposed: []policies.ExposedServer{{Server: "s", Tools: []string{"a", "b", "r", "a"},
			Names: []string{"s__b", "S__B", "s__r", "bad name"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(res); !slices.Equal(got, []string{"s: s__a s__b-2 s__r-2"}) {
		t.Errorf("hostile entries: %q", got)
	}
}

// budgetModules caches one module per maxNameLength for the fuzz tests.
var budgetModules sync.Map

func sanitizerWithBudget(t testing.TB, budget int) *wasmpolicy.Module {
	if m, ok := budgetModules.Load(budget); ok {
		return m.(*wasmpolicy.Module)
	}
	m, err := wasmpolicy.Load(context.Background(), "sanitizer", builtin.Sanitizer(), json.RawMessage(fmt.Sprintf(`{"maxNameLength":%d}`, budget)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if prev, loaded := budgetModules.LoadOrStore(budget, m); loaded {
		m.Close(context.Background())
		return prev.(*wasmpolicy.Module)
	}
	return m
}

// TestSanitizerNameBudget: with maxNameLength every name fits the budget,
// the server part is cut to min(30, (budget-2)/2), and names cut into a
// collision keep the stable hash.
func TestSanitizerNameBudget(t *testing.T) {
	t.Parallel()
	x70 := strings.Repeat("x", 70)
	for _, tc := range []struct {
		budget  int
		servers []policies.SanitizeServer
		want    []string
	}{
		{49, []policies.SanitizeServer{srv("files", "read_file")}, []string{"files: files__read_file"}},
		{49, []policies.SanitizeServer{srv("srv", x70+"a", x70+"b")},
			[]string{"srv: srv__" + strings.Repeat("x", 35) + "-" + hash8("srv", x70+"a") +
				" srv__" + strings.Repeat("x", 35) + "-" + hash8("srv", x70+"b")}},
		{49, []policies.SanitizeServer{srv(strings.Repeat("s", 40), strings.Repeat("t", 40))},
			[]string{strings.Repeat("s", 23) + ": " + strings.Repeat("s", 23) + "__" + strings.Repeat("t", 24)}},
		{24, []policies.SanitizeServer{srv(strings.Repeat("s", 40)+"1", "t"), srv(strings.Repeat("s", 40)+"2", "t")},
			[]string{"ss-" + hash8(strings.Repeat("s", 40)+"1") + ": ss-" + hash8(strings.Repeat("s", 40)+"1") + "__t",
				"ss-" + hash8(strings.Repeat("s", 40)+"2") + ": ss-" + hash8(strings.Repeat("s", 40)+"2") + "__t"}},
		{64, []policies.SanitizeServer{srv(strings.Repeat("s", 40), strings.Repeat("t", 40))},
			[]string{strings.Repeat("s", 30) + ": " + strings.Repeat("s", 30) + "__" + strings.Repeat("t", 32)}},
	} {
		t.Run(fmt.Sprint(tc.budget), func(t *testing.T) {
			t.Parallel()
			m := loadSanitizerConfig(t, fmt.Sprintf(`{"maxNameLength":%d}`, tc.budget))
			res := sanitize(t, m, nil, tc.servers...)
			if got := names(res); !slices.Equal(got, tc.want) {
				t.Errorf("got\n  %q\nwant\n  %q", got, tc.want)
			}
		})
	}
	for _, tc := range []struct{ config, want string }{
		{`{"maxNameLength":23}`, "maxNameLength: want an integer from 24 to 64, got 23"},
		{`{"maxNameLength":65}`, "got 65"},
		{`{"maxNameLength":40.5}`, "got 40.5"},
		{`{"maxNameLength":"40"}`, "maxNameLength: want an integer"},
	} {
		m, err := wasmpolicy.Load(context.Background(), "sanitizer", builtin.Sanitizer(), json.RawMessage(tc.config), nil)
		if err == nil {
			m.Close(context.Background())
			t.Errorf("config %s accepted", tc.config)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("config %s: %v, want %q", tc.config, err, tc.want)
		}
	}
}

// FuzzSanitizerStable: under any budget, two catalogs in a row (the second
// one with the first's names as "exposed") are named validly (the adapter
// checks charset, 64 and uniqueness), every name fits the budget, and no
// name of the first catalog points at another tool in the second.
func FuzzSanitizerStable(f *testing.F) {
	f.Add(uint8(64), "netapp", "Create-CIFS-Share", "Create CIFS Share\nCreate-CIFS-Share", "web", "fetch")
	f.Add(uint8(49), strings.Repeat("s", 40)+"2", strings.Repeat("t", 70), strings.Repeat("t", 70)+"\n"+strings.Repeat("t", 71), strings.Repeat("s", 40)+"3", "x")
	f.Add(uint8(24), "a", "b__c", "b__c\nb c", "a__b", "c")
	f.Fuzz(func(t *testing.T, b uint8, s1, tools1, tools1b, s2, tools2 string) {
		for _, s := range []string{s1, tools1, tools1b, s2, tools2} {
			if !utf8.ValidString(s) {
				t.Skip("names reach the sanitizer as JSON: invalid UTF-8 is U+FFFD by then, and two raw names become one")
			}
		}
		budget := 24 + int(b)%41
		m := sanitizerWithBudget(t, budget)
		ctx := context.Background()
		req1 := &policies.SanitizeRequest{Servers: []policies.SanitizeServer{{Name: s1, Tools: strings.Split(tools1, "\n")}}}
		res1, err := m.SanitizeToolNames(ctx, req1)
		if err != nil {
			t.Fatal(err)
		}
		req2 := &policies.SanitizeRequest{Exposed: exposedOf(req1, res1), Servers: []policies.SanitizeServer{
			{Name: s1, Tools: strings.Split(tools1b, "\n")}, {Name: s2, Tools: strings.Split(tools2, "\n")}}}
		res2, err := m.SanitizeToolNames(ctx, req2)
		if err != nil {
			t.Fatal(err)
		}
		owner := map[string]string{}
		for i, s := range req1.Servers {
			for j, raw := range s.Tools {
				if n := res1.Servers[i].Tools[j].Name; n != "" {
					owner[strings.ToLower(n)] = s.Name + "\x00" + raw
				}
			}
		}
		for _, r := range []*policies.SanitizeResult{res1, res2} {
			for _, s := range r.Servers {
				for _, tn := range s.Tools {
					if len(tn.Name) > budget {
						t.Errorf("name %q over the budget %d", tn.Name, budget)
					}
				}
			}
		}
		for i, s := range req2.Servers {
			for j, raw := range s.Tools {
				n := res2.Servers[i].Tools[j].Name
				// A raw name listed twice is one tool to the sanitizer.
				twice := slices.Index(s.Tools, raw) != j || slices.Index(s.Tools[j+1:], raw) >= 0
				if o, ok := owner[strings.ToLower(n)]; ok && o != s.Name+"\x00"+raw && !twice {
					t.Errorf("name %q moved from %q to %q", n, o, s.Name+"\x00"+raw)
				}
			}
		}
	})
}

// FuzzSanitizerExposedInput: any "exposed" input (as a hostile or broken
// host could send) is answered without a failure, and the answer keeps the
// contract (the adapter validates it).
func FuzzSanitizerExposedInput(f *testing.F) {
	f.Add("s", "a\nb", "s", "s__", "a\nb\nc", "s__a\nS__A\ns__a-2")
	f.Add("é", "x", "é", "é__x", "x", "mcp-__x-hash")
	m := loadSanitizer(f)
	f.Fuzz(func(t *testing.T, server, tools, eserver, safe, etools, enames string) {
		et, en := strings.Split(etools, "\n"), strings.Split(enames, "\n")
		n := min(len(et), len(en))
		req := &policies.SanitizeRequest{
			Servers: []policies.SanitizeServer{{Name: server, Tools: strings.Split(tools, "\n")}},
			Exposed: []policies.ExposedServer{{Server: eserver, Safe: safe, Tools: et[:n], Names: en[:n]}},
		}
		if _, err := m.SanitizeToolNames(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	})
}
