package config

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestPolicyFileRateLimits(t *testing.T) {
	t.Parallel()
	pf, err := ParsePolicyFile("p.json", []byte(`{"modules":[],"rate_limits":[
		{"name":"per-agent","requests":60,"interval_s":60,"concurrent":4},
		{"name":"deploys","tool":"prod__deploy*","server":"prod","per":["all"],"requests":1,"interval_s":3600}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []PolicyRateLimit{
		{Name: "per-agent", Requests: 60, IntervalS: 60, Concurrent: 4},
		{Name: "deploys", Tool: "prod__deploy*", Server: "prod", Per: []string{"all"}, Requests: 1, IntervalS: 3600},
	}
	got, _ := json.Marshal(pf.RateLimits)
	if w, _ := json.Marshal(want); string(got) != string(w) {
		t.Errorf("rate_limits %s, want %s", got, w)
	}
	for _, tc := range []struct{ limits, want string }{
		{`[{"name":"a","requets":5,"interval_s":1}]`, `unknown field "requets"`},
		{`[{"name":"a","requests":5,"requests":500,"interval_s":1}]`, `$.rate_limits[0].requests is given twice`},
		{`[{"requests":5,"interval_s":1}]`, `rate_limits[0]: name is required`},
		{`[{"name":"a b","concurrent":1}]`, `name "a b" may hold only`},
		{`[{"name":"a","concurrent":1},{"name":"a","concurrent":2}]`, `rate_limits[1] (a): duplicate limit name`},
		{`[{"name":"a"}]`, `rate_limits[0] (a): limits nothing`},
		{`[{"name":"a","requests":5}]`, `(a): requests needs interval_s`},
		{`[{"name":"a","interval_s":5,"concurrent":1}]`, `(a): interval_s without requests`},
		{`[{"name":"a","concurrent":-1}]`, `(a): requests, interval_s and concurrent must be ≥ 0`},
		{`[{"name":"a","requests":1,"interval_s":31536001}]`, `more than a year`},
		{`[{"name":"a","concurrent":1,"per":["user"]}]`, `per: unknown value "user"`},
		{`[{"name":"a","concurrent":1,"per":["tool","tool"]}]`, `per: "tool" listed twice`},
		{`[{"name":"a","concurrent":1,"per":["all","tool"]}]`, `"all" (one shared counter) cannot be combined`},
		{`[{"name":"a","concurrent":"4"}]`, `policy config p.json: rate_limits[0].concurrent: want a whole number, got a string`},
		{`[{"name":"a","concurrent":1},{"name":"b","requests":1.5,"interval_s":1}]`, `policy config p.json: rate_limits[1].requests: want a whole number, got a number 1.5`},
		{`[{"name":"a","concurrent":1,"per":"all"}]`, `policy config p.json: rate_limits[0].per: want a list of strings, got a string`},
		{`[{"name":"a","interval_s":true,"requests":1}]`, `policy config p.json: rate_limits[0].interval_s: want a whole number, got a bool`},
		{`{"name":"a"}`, `policy config p.json: rate_limits: want a list of objects, got an object`},
	} {
		_, err := ParsePolicyFile("p.json", []byte(`{"modules":[],"rate_limits":`+tc.limits+`}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "p.json") {
			t.Errorf("%s: err = %v, want one naming p.json and %q", tc.limits, err, tc.want)
		}
	}
}

// FuzzPolicyRateLimits: any rate_limits the parser accepts is a list of
// limits that limit something, with valid names and per values; nothing
// makes it panic.
func FuzzPolicyRateLimits(f *testing.F) {
	for _, s := range []string{
		`[{"name":"a","requests":60,"interval_s":60,"concurrent":4}]`,
		`[{"name":"d","tool":"prod__*","server":"*","per":["identity","tool"],"concurrent":1}]`,
		`[{"name":"a","requests":5}]`, `[{"name":"a","per":["all","tool"],"concurrent":1}]`, `[]`, `null`,
		`[{"name":"a","requests":1e3,"interval_s":1}]`, `[{"name":"","concurrent":1}]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, limits string) {
		pf, err := ParsePolicyFile("p.json", []byte(`{"modules":[],"rate_limits":`+limits+`}`))
		if err != nil {
			if !strings.Contains(err.Error(), "p.json") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		names := map[string]bool{}
		for _, l := range pf.RateLimits {
			if l.Name == "" || names[l.Name] {
				t.Fatalf("accepted an empty or duplicate name: %+v", pf.RateLimits)
			}
			names[l.Name] = true
			if l.Requests < 0 || l.Concurrent < 0 || l.Requests == 0 && l.Concurrent == 0 ||
				(l.Requests > 0) != (l.IntervalS > 0) || l.IntervalS > MaxRateLimitInterval {
				t.Fatalf("accepted a limit that limits nothing or has no window: %+v", l)
			}
			for _, p := range l.Per {
				if p != "identity" && p != "server" && p != "tool" && !(p == "all" && len(l.Per) == 1) {
					t.Fatalf("accepted per %q in %+v", p, l.Per)
				}
			}
		}
	})
}
