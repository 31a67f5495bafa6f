package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/policies/engine"
)

// TestRunCaseOtherHooks runs cases of a hook other than before_tool_call
// against the built-in sanitizer: the input gets "abi":1, the output is
// compared as a JSON subset.
func TestRunCaseOtherHooks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, err := engine.OpenModule(ctx, "builtin:sanitizer", nil, testHost())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	cases, err := engine.ParseCases(strings.NewReader(`
# the sanitizer keeps valid names as server__tool
{"name":"kept","hook":"sanitize_tool_names","input":{"servers":[{"name":"files","tools":["read_file"]}]},"expect":{"output":{"servers":[{"safe":"files","tools":[{"name":"files__read_file"}]}]}}}
{"name":"wrong","hook":"sanitize_tool_names","input":{"servers":[{"name":"files","tools":["read_file"]}]},"expect":{"output":{"servers":[{"safe":"fs"}]}}}
{"name":"not served","hook":"decide_approval","input":{"kind":"exec"},"expect":{"error":"does not export decide_approval"}}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		pass     bool
		got      string
		mismatch string
	}{
		{true, "(output)", ""},
		{false, "(output)", `does not match {"servers":[{"safe":"fs"}]}`},
		{true, "error", ""},
	}
	for i, c := range cases {
		r := engine.RunCase(ctx, m, c)
		if r.Pass != want[i].pass || r.Got != want[i].got || (want[i].mismatch != "" && (len(r.Mismatches) != 1 || !strings.Contains(r.Mismatches[0], want[i].mismatch))) {
			t.Errorf("%s: %+v", c.Name, r)
		}
	}
	// An expected failure still reports its text.
	if r := engine.RunCase(ctx, m, cases[2]); !strings.Contains(r.Error, "does not export decide_approval") {
		t.Errorf("error of a failed call = %q, want the failure's text", r.Error)
	}
	if cases[0].Line != 3 || cases[2].Line != 5 {
		t.Errorf("lines = %d, %d; want 3, 5", cases[0].Line, cases[2].Line)
	}
}
