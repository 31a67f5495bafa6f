package config

import (
	"strings"
	"testing"
)

func TestServerPartBase(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"files": "files", "my.server": "my-server", "123": "mcp-123", "": "mcp", " \u00a0web\ufeff": "web",
		"größe": "gr--e", "😀": "mcp---", "a__b": "a__b", strings.Repeat("s", 40): strings.Repeat("s", 30),
	} {
		if got := ServerPartBase(in); got != want {
			t.Errorf("ServerPartBase(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAmbiguousServerNames: servers a, a__b and a_ (issue case): a__b's and
// a_'s names start with "a__", so a "a__*" glob matches them; a alone is
// not ambiguous.
func TestAmbiguousServerNames(t *testing.T) {
	t.Parallel()
	got := AmbiguousServerNames([]string{"a", "a__b", "a_", "files", "x__y"})
	if len(got) != 3 || got[0].Server != "a__b" || got[1].Server != "a_" || got[2].Server != "x__y" {
		t.Fatalf("warnings %+v: want a__b, a_ and x__y", got)
	}
	for _, w := range got[:2] {
		if !strings.Contains(w.Message, `they start like the names of server "a", whose glob "a__*" in tools.allow or tools.deny also matches this server's tools`) ||
			!strings.Contains(w.Message, "tool.server and tool.original") {
			t.Errorf("%s: %s", w.Server, w.Message)
		}
	}
	if strings.Contains(got[2].Message, "start like") {
		t.Errorf("x__y has no other server in front: %s", got[2].Message)
	}
	if w := AmbiguousServerNames([]string{"files", "web", "my server"}); len(w) != 0 {
		t.Errorf("plain names warned: %+v", w)
	}
}
