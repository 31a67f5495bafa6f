package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/engine"
	"github.com/openclaw-go/openclaw/wasmhost"
)

const fileArgHelp = `FILE is a .wasm policy module or builtin:NAME (` + "`openclaw policy inspect builtin:rules`" + `).`

func newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Inspect, test, benchmark, reload and ship policy modules",
		Long: `Tools for the teams that write policy modules (docs/policy-abi.md): inspect a module,
run it against expected decisions in CI, measure its latency, and make running
"openclaw mcp serve" and "openclaw mcp proxy" processes load changed modules without a restart;
push, sign, verify and pull signed policy bundles through an OCI registry (docs/policy-bundles.md).`,
	}
	cmd.AddCommand(newPolicyInspectCmd(), newPolicyTestCmd(), newPolicyBenchCmd(), newPolicyReloadCmd(),
		newPolicyPushCmd(), newPolicyPullCmd(), newPolicySignCmd(), newPolicyVerifyCmd())
	return cmd
}

// moduleFlags are the module settings shared by test and bench.
type moduleFlags struct {
	config    string // --config JSON or @FILE
	timeoutMs int    // --timeout-ms
	memPages  int    // --memory-limit-pages
}

func (f *moduleFlags) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.config, "config", "", "module config passed to configure: inline JSON, or @FILE (default: a built-in's default config, else none)")
	cmd.Flags().IntVar(&f.timeoutMs, "timeout-ms", 0, "per-call deadline in ms (default 100)")
	cmd.Flags().IntVar(&f.memPages, "memory-limit-pages", 0, "memory cap in 64 KiB pages (default 256)")
}

// configJSON returns the --config value: nil when not given.
func (f *moduleFlags) configJSON() (json.RawMessage, error) {
	if f.config == "" {
		return nil, nil
	}
	data := []byte(f.config)
	if name, ok := strings.CutPrefix(f.config, "@"); ok {
		var err error
		if data, err = os.ReadFile(name); err != nil {
			return nil, fmt.Errorf("--config: %w", err)
		}
	}
	if !json.Valid(data) {
		return nil, fmt.Errorf("--config: not valid JSON: %.80q", data)
	}
	return json.RawMessage(data), nil
}

// host returns the sandbox options of the flags; the module's own log
// lines (every level) go to stderr with its name.
func (f *moduleFlags) host(stderr io.Writer) wasmhost.Options {
	return wasmhost.Options{CallTimeout: time.Duration(f.timeoutMs) * time.Millisecond, MemoryLimitPages: uint32(f.memPages),
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: dropTime}))}
}

func newPolicyInspectCmd() *cobra.Command {
	var asJSON bool
	var mf moduleFlags
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Show a module's ABI version, exports, hooks, imports, size, sha256 and memory",
		Long: `Inspect describes a policy module without running a decision: its policy ABI version,
the hooks and other exports with their signatures, its imports, size, sha256 (to pin it
in a policy file) and initial/maximum memory, and whether this host would load it
(with --config, or the built-in's default config). It exits 1 when the module
would not load, after describing it. ` + fileArgHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := mf.configJSON()
			if err != nil {
				return err
			}
			in, err := engine.Inspect(cmd.Context(), args[0], cfg, mf.host(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetEscapeHTML(false)
				enc.SetIndent("", "  ")
				if err := enc.Encode(in); err != nil {
					return err
				}
			} else {
				printInspection(out, in)
			}
			if !in.Loadable {
				return &exitError{code: 1, err: fmt.Errorf("openclaw policy inspect: %s would not load: %s", args[0], in.LoadError)}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&mf.config, "config", "", "config for the load check: inline JSON, or @FILE")
	return cmd
}

func printInspection(w io.Writer, in *engine.Inspection) {
	abi := "unknown (no callable policy_abi_version)"
	switch {
	case in.ABIVersion != nil:
		abi = strconv.Itoa(int(*in.ABIVersion))
	case in.OPAABIVersion != "":
		abi = "OPA Wasm ABI " + in.OPAABIVersion
	case in.Format == "opa":
		abi = "OPA Wasm ABI (unknown: the module does not load)"
	}
	mem := "none"
	if m := in.Memory; m != nil {
		mem = fmt.Sprintf("%d pages initial (%s)", m.InitialPages, pagesSize(m.InitialPages))
		if m.MaxPages != nil {
			mem += fmt.Sprintf(", %d pages max (%s)", *m.MaxPages, pagesSize(*m.MaxPages))
		} else {
			mem += ", no declared max"
		}
		if m.Imported {
			mem += ", imported"
		}
	}
	hooks := make([]string, len(in.Hooks))
	for i, h := range in.Hooks {
		hooks[i] = string(h)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "source\t%s\n", in.Source)
	fmt.Fprintf(tw, "format\t%s\n", in.Format)
	fmt.Fprintf(tw, "size\t%d bytes\n", in.Size)
	fmt.Fprintf(tw, "sha256\t%s\n", in.SHA256)
	fmt.Fprintf(tw, "abi version\t%s\n", abi)
	fmt.Fprintf(tw, "hooks\t%s\n", orDash(strings.Join(hooks, ", ")))
	fmt.Fprintf(tw, "memory\t%s\n", mem)
	if in.Loadable {
		fmt.Fprintf(tw, "loads\tyes\n")
	} else {
		fmt.Fprintf(tw, "loads\tno: %s\n", in.LoadError)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nexports (%d):\n", len(in.Exports))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, e := range in.Exports {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", e.Name, e.Kind, e.Type)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nimports (%d):\n", len(in.Imports))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, i := range in.Imports {
		fmt.Fprintf(tw, "  %s.%s\t%s\t%s\n", i.Module, i.Name, i.Kind, i.Type)
	}
	tw.Flush()
}

func pagesSize(pages uint64) string {
	b := pages * 65536
	if b >= 1<<20 {
		return fmt.Sprintf("%g MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", b>>10)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newPolicyTestCmd() *cobra.Command {
	var mf moduleFlags
	var casesFile string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "test FILE --cases CASES.jsonl",
		Short: "Run hook inputs through a module and compare the decisions (for CI)",
		Long: `Test loads the module (with --config) and runs each case of CASES.jsonl, one JSON object
a line:

  {"name":"sends are blocked","input":{"surface":"serve","tool":{"name":"messages_send"}},"expect":{"decision":"block"}}
  {"name":"bad input fails","input":{"surface":"serve","tool":{"name":"x"}},"expect":{"error":"unreachable"}}
  {"hook":"decide_approval","input":{"kind":"exec","request":{"command":"ls"}},"expect":{"decision":"allow-once"}}

"hook" defaults to before_tool_call; "expect" may check decision, reason, reason_contains,
arguments (a rewrite), output (a subset of the module's JSON output) or error (the call
must fail with this text). A call that fails without "error" expected is a FAIL. It prints
a PASS/FAIL table and "N passed, N failed"; the exit code is 1 when a case fails, 2 when
the module or the cases cannot be loaded. ` + fileArgHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if casesFile == "" {
				return &exitError{code: 2, err: errors.New("--cases FILE.jsonl is required")}
			}
			f, err := os.Open(casesFile)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			cases, err := engine.ParseCases(f)
			f.Close()
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("%s: %w", casesFile, err)}
			}
			if len(cases) == 0 {
				return &exitError{code: 2, err: fmt.Errorf("%s: no cases", casesFile)}
			}
			cfg, err := mf.configJSON()
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			ctx := cmd.Context()
			m, err := engine.OpenModule(ctx, args[0], cfg, mf.host(cmd.ErrOrStderr()))
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			defer m.Close(context.WithoutCancel(ctx))
			out := cmd.OutOrStdout()
			if asJSON {
				return printCasesJSON(ctx, out, m, cases)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "CASE\tHOOK\tEXPECTED\tGOT\tRESULT")
			passed, failed := 0, 0
			var details []string
			for _, c := range cases {
				r := engine.RunCase(ctx, m, c)
				verdict := "PASS"
				if r.Pass {
					passed++
				} else {
					verdict = "FAIL"
					failed++
					for _, mm := range r.Mismatches {
						details = append(details, fmt.Sprintf("FAIL %s (%s:%d): %s", r.Name, filepath.Base(casesFile), c.Line, mm))
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.Hook, r.Expected, r.Got, verdict)
			}
			tw.Flush()
			if len(details) > 0 {
				fmt.Fprintln(out)
				for _, d := range details {
					fmt.Fprintln(out, d)
				}
			}
			fmt.Fprintf(out, "\n%d passed, %d failed\n", passed, failed)
			if failed > 0 {
				return &exitError{code: 1, err: errors.New("")}
			}
			return nil
		},
	}
	mf.bind(cmd)
	cmd.Flags().StringVar(&casesFile, "cases", "", "test cases, JSON Lines (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"cases":[…],"passed":N,"failed":N} instead of the table`)
	return cmd
}

// printCasesJSON runs the cases and prints the JSON report; the exit code
// is that of the table.
func printCasesJSON(ctx context.Context, out io.Writer, m engine.Module, cases []engine.TestCase) error {
	report := struct {
		Cases  []engine.CaseResult `json:"cases"`
		Passed int                 `json:"passed"`
		Failed int                 `json:"failed"`
	}{Cases: []engine.CaseResult{}}
	for _, c := range cases {
		r := engine.RunCase(ctx, m, c)
		if r.Pass {
			report.Passed++
		} else {
			report.Failed++
		}
		report.Cases = append(report.Cases, r)
	}
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(report); err != nil {
		return err
	}
	if report.Failed > 0 {
		return &exitError{code: 1, err: errors.New("")}
	}
	return nil
}

func newPolicyBenchCmd() *cobra.Command {
	var mf moduleFlags
	var n int
	var hooks []string
	var casesFile string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "bench FILE",
		Short: "Measure a module's per-hook latency percentiles",
		Long: `Bench loads the module (with --config) and calls each hook it exports (or those of --hook)
N times, one call at a time, with the deadline interruption on as in production, after a
warm-up; it prints p50/p90/p99/max/mean latency per hook. Inputs are the cases' inputs of
--cases (as for "policy test"), else a sample input per hook. ` + fileArgHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cfg, err := mf.configJSON()
			if err != nil {
				return err
			}
			m, err := engine.OpenModule(ctx, args[0], cfg, mf.host(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			defer m.Close(context.WithoutCancel(ctx))
			inputs := map[policies.Hook][]json.RawMessage{}
			if casesFile != "" {
				f, err := os.Open(casesFile)
				if err != nil {
					return err
				}
				cases, err := engine.ParseCases(f)
				f.Close()
				if err != nil {
					return fmt.Errorf("%s: %w", casesFile, err)
				}
				for _, c := range cases {
					inputs[c.Hook] = append(inputs[c.Hook], c.Input)
				}
			}
			targets := m.Hooks()
			if len(hooks) > 0 {
				targets = nil
				for _, h := range hooks {
					if !m.Has(policies.Hook(h)) {
						return fmt.Errorf("--hook %s: the module does not export it (it exports %v)", h, m.Hooks())
					}
					targets = append(targets, policies.Hook(h))
				}
			}
			var results []engine.BenchResult
			for _, h := range targets {
				r, err := engine.Bench(ctx, m, h, inputs[h], n)
				if err != nil {
					return err
				}
				results = append(results, r)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetEscapeHTML(false)
				enc.SetIndent("", "  ")
				return enc.Encode(results)
			}
			timeout := wasmhost.DefaultCallTimeout
			if mf.timeoutMs > 0 {
				timeout = time.Duration(mf.timeoutMs) * time.Millisecond
			}
			fmt.Fprintf(out, "%s: %d calls per hook, one at a time, interruption on, deadline %v\n\n", args[0], n, timeout)
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "HOOK\tCALLS\tERRORS\tP50\tP90\tP99\tMAX\tMEAN")
			for _, r := range results {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Hook, r.Calls, r.Errors,
					fmtDur(r.P50), fmtDur(r.P90), fmtDur(r.P99), fmtDur(r.Max), fmtDur(r.Mean))
			}
			tw.Flush()
			for _, r := range results {
				if r.Errors > 0 {
					fmt.Fprintf(out, "\n%s: %d of %d calls failed; first: %s\n", r.Hook, r.Errors, r.Calls, r.FirstError)
				}
			}
			return nil
		},
	}
	mf.bind(cmd)
	cmd.Flags().IntVarP(&n, "n", "n", 10000, "calls per hook")
	cmd.Flags().StringArrayVar(&hooks, "hook", nil, "hook to measure (repeatable; default: every hook the module exports)")
	cmd.Flags().StringVar(&casesFile, "cases", "", "take inputs from these test cases (JSON Lines)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (durations in ns)")
	return cmd
}

// fmtDur prints a latency with 3 significant digits: 2.31µs, 140µs, 1.2ms.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d.Nanoseconds())
	case d < time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e3, 'g', 3, 64) + "µs"
	case d < time.Second:
		return strconv.FormatFloat(float64(d)/1e6, 'g', 3, 64) + "ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'g', 3, 64) + "s"
}

func newPolicyReloadCmd() *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "reload",
		Short: "Make running openclaw mcp serve and proxy processes reload their policy modules",
		Long: `Reload finds the running processes that enforce policies (each registers itself in
<state dir>/openclaw-go/run/<pid>.json), sends each SIGHUP, and reports what it did:
modules swapped, or why the reload was refused (the previous modules then stay active).
Calls in flight finish on the modules they started with. The processes also swap a
module on their own when its file changes; this command is for changes a watcher
cannot see (a policy file edited on another mount, a forced re-read). Exit code 1 when
a process refused the reload or did not answer within --wait. The signal is shared: a running
"mcp proxy" also re-reads mcp.servers (as "openclaw mcp reload" asks), applying only what changed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPolicyReload(cmd.Context(), cmd.OutOrStdout(), wait)
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 5*time.Second, "how long to wait for each process to report")
	return cmd
}

func runPolicyReload(ctx context.Context, out io.Writer, wait time.Duration) error {
	dir, err := runDir()
	if err != nil {
		return err
	}
	infos, err := readRunFiles(dir)
	if err != nil {
		return err
	}
	targets := make([]reloadTarget, len(infos))
	for i, in := range infos {
		targets[i] = reloadTarget{PID: in.PID, Command: in.Command, StartTicks: in.StartTicks, Started: in.Started, Reloads: in.Reloads}
	}
	read := func(path string) (reloadAnswer, error) {
		cur, err := readRunFile(path)
		a := reloadAnswer{Reloads: cur.Reloads}
		if cur.LastReload != nil {
			a.HasLast, a.Error, a.Result = true, cur.LastReload.Error, fmt.Sprint(cur.LastReload.Result)
		}
		return a, err
	}
	live, failed, err := signalReloads(ctx, out, dir, targets, wait, read, "the previous policies stay active")
	switch {
	case err != nil:
		return &exitError{code: 1, err: fmt.Errorf("openclaw policy reload: %w", err)}
	case live == 0:
		fmt.Fprintln(out, "no running openclaw process enforces policies; nothing to reload")
		return nil
	case failed > 0:
		return &exitError{code: 1, err: fmt.Errorf("openclaw policy reload: %d of %d processes did not reload", failed, live)}
	}
	return nil
}
