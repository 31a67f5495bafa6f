package policies_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
)

// recorder is an AuditSink keeping records in memory.
type recorder struct{ recs []policies.AuditRecord }

func (r *recorder) Record(rec policies.AuditRecord) { r.recs = append(r.recs, rec) }

var sanReq = &policies.SanitizeRequest{Reserved: []string{"events_poll"}, Servers: []policies.SanitizeServer{
	{Name: "files", Tools: []string{"read", "write file", ""}}, {Name: "web", Tools: []string{"fetch"}}}}

func names(safe1 string, n1 []policies.ToolName, safe2 string, n2 []policies.ToolName) *policies.SanitizeResult {
	return &policies.SanitizeResult{Servers: []policies.SanitizedServer{{Safe: safe1, Tools: n1}, {Safe: safe2, Tools: n2}}}
}

func good() *policies.SanitizeResult {
	return names("files", []policies.ToolName{{Name: "files__read"}, {Name: "files__write-file"}, {Reject: "empty"}},
		"web", []policies.ToolName{{Name: "web__fetch"}})
}

func TestValidateSanitized(t *testing.T) {
	t.Parallel()
	tn := func(n string) policies.ToolName { return policies.ToolName{Name: n} }
	for _, tc := range []struct {
		name string
		res  *policies.SanitizeResult
		want string // "" for valid
	}{
		{"valid", good(), ""},
		{"nil", nil, "no result"},
		{"a server missing", &policies.SanitizeResult{Servers: good().Servers[:1]}, "1 servers answered for 2 asked"},
		{"a tool missing", names("files", []policies.ToolName{tn("files__read")}, "web", []policies.ToolName{tn("web__fetch")}),
			`server "files": 1 tools answered for 3 asked`},
		{"unsanitized name", names("files", []policies.ToolName{tn("files__read"), tn("files__write file"), {Reject: "x"}}, "web", []policies.ToolName{tn("web__fetch")}),
			`server "files" tool "write file": invalid name "files__write file"`},
		{"65 characters", names("files", []policies.ToolName{tn("files__read"), tn("f" + strings.Repeat("x", 64)), {Reject: "x"}}, "web", []policies.ToolName{tn("web__fetch")}),
			`tool "write file": invalid name`},
		{"duplicate ignoring case", names("files", []policies.ToolName{tn("files__read"), tn("FILES__READ"), {Reject: "x"}}, "web", []policies.ToolName{tn("web__fetch")}),
			`name "FILES__READ" collides with tool "read" of server "files"`},
		{"reserved", names("files", []policies.ToolName{tn("Events_Poll"), tn("files__w"), {Reject: "x"}}, "web", []policies.ToolName{tn("web__fetch")}),
			`name "Events_Poll" collides with a reserved name`},
		{"neither", names("files", []policies.ToolName{tn("files__read"), tn("files__w"), {}}, "web", []policies.ToolName{tn("web__fetch")}),
			`tool "": neither a name nor a rejection`},
		{"both", names("files", []policies.ToolName{tn("files__read"), tn("files__w"), {Name: "a", Reject: "b"}}, "web", []policies.ToolName{tn("web__fetch")}),
			`both a name and a rejection`},
		{"invalid safe name", names("fi les", good().Servers[0].Tools, "web", good().Servers[1].Tools), `invalid safe server name "fi les"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := policies.ValidateSanitized("m", sanReq, tc.res)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			if !errors.Is(err, policies.ErrInvalidNames) || !strings.Contains(err.Error(), tc.want) ||
				!strings.HasPrefix(err.Error(), `sanitize_tool_names: module "m"`) {
				t.Fatalf("got %v, want ErrInvalidNames naming module m and containing %q", err, tc.want)
			}
		})
	}
}

func TestSanitizeChain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := func() time.Time { return time.Unix(1700000000, 0) }

	t.Run("empty chain fails", func(t *testing.T) {
		t.Parallel()
		_, err := policies.NewSanitizeChain(nil, nil).SanitizeToolNames(ctx, sanReq)
		if !errors.Is(err, policies.ErrNoSanitizer) {
			t.Fatalf("got %v, want ErrNoSanitizer", err)
		}
	})
	t.Run("a failing module fails the build, naming it", func(t *testing.T) {
		t.Parallel()
		rec := &recorder{}
		bad := &policiestest.Sanitizer{Module: "bad", Err: errors.New("trap")}
		_, err := policies.NewSanitizeChain([]policies.SanitizeEntry{{Hook: &policiestest.Sanitizer{Module: "a", Result: good()}}, {Hook: bad}},
			&policies.ChainOptions{Audit: rec, Now: clock}).SanitizeToolNames(ctx, sanReq)
		var se *policies.SanitizeError
		if !errors.As(err, &se) || se.Module != "bad" || err.Error() != `sanitize_tool_names: module "bad": trap` {
			t.Fatalf("got %v", err)
		}
		if len(rec.recs) != 2 || rec.recs[1].Decision != "fail" || rec.recs[1].Module != "bad" || rec.recs[1].Hook != policies.HookSanitizeToolNames {
			t.Fatalf("audit: %+v", rec.recs)
		}
		if rec.recs[0].Reason != "2 servers, 3 tools named, 1 renamed, 1 rejected" {
			t.Errorf("audit reason %q", rec.recs[0].Reason)
		}
	})
	t.Run("invalid names fail the build", func(t *testing.T) {
		t.Parallel()
		res := good()
		res.Servers[1].Tools[0].Name = "web fetch"
		_, err := policies.NewSanitizeChain([]policies.SanitizeEntry{{Hook: &policiestest.Sanitizer{Module: "liar", Result: res}}}, nil).SanitizeToolNames(ctx, sanReq)
		if !errors.Is(err, policies.ErrInvalidNames) || !strings.Contains(err.Error(), `module "liar": server "web" tool "fetch"`) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("the next module sees the proposal and decides", func(t *testing.T) {
		t.Parallel()
		second := good()
		second.Servers[1].Tools[0].Name = "web__get"
		b := &policiestest.Sanitizer{Module: "b", Result: second}
		a := &policiestest.Sanitizer{Module: "a", Result: good()}
		got, err := policies.NewSanitizeChain([]policies.SanitizeEntry{{Hook: a}, {Hook: b}}, nil).SanitizeToolNames(ctx, sanReq)
		if err != nil {
			t.Fatal(err)
		}
		if ag, bg := a.Requests()[0], b.Requests()[0]; ag.Proposed != nil || len(bg.Proposed) != 2 || bg.Proposed[1].Tools[0].Name != "web__fetch" {
			t.Fatalf("proposals: a %v, b %v", ag.Proposed, bg.Proposed)
		}
		if got.Servers[1].Tools[0].Name != "web__get" {
			t.Fatalf("got %+v, want the last module's names", got)
		}
	})
	t.Run("audit mode is recorded, never decides nor fails", func(t *testing.T) {
		t.Parallel()
		rec := &recorder{}
		got, err := policies.NewSanitizeChain([]policies.SanitizeEntry{
			{Hook: &policiestest.Sanitizer{Module: "a", Result: good()}},
			{Hook: &policiestest.Sanitizer{Module: "trial", Err: errors.New("boom")}, Mode: policies.AuditOnly},
		}, &policies.ChainOptions{Audit: rec}).SanitizeToolNames(ctx, sanReq)
		if err != nil || got.Servers[0].Tools[0].Name != "files__read" {
			t.Fatalf("got %+v, %v", got, err)
		}
		if len(rec.recs) != 2 || rec.recs[1].Mode != policies.AuditOnly || rec.recs[1].Decision != "fail" {
			t.Fatalf("audit: %+v", rec.recs)
		}
	})
}
