package main

//lint:file-ignore ST1005 these errors are OpenClaw's CLI messages, whole sentences printed to the user as they are (capitals and full stops included)

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/engine"
	"github.com/openclaw-go/openclaw/runtime"
	"github.com/openclaw-go/openclaw/transport"
)

// `openclaw mcp probe`, and the probe that `add`, `configure --probe` and
// `doctor --probe` run: connect servers of mcp.servers once, list their
// tools, disconnect. OpenClaw's command (src/cli/mcp-cli.ts) prints
// "MCP probe (<path>):", one "- <name>: <n> tools[, resources][, prompts]"
// line per server that answered and one "! <name>: <message>" line per
// failure; we add the transport, serverInfo, protocol version and elapsed
// time to each line, and exit 1 when a server failed.

// probeEntry is one mcp.servers entry to probe.
type probeEntry struct {
	name  string
	entry *config.Object
}

// probeOptions are the inputs of [probeServers].
type probeOptions struct {
	// timeout, when > 0, replaces each server's connection timeout.
	timeout time.Duration
	// verbose logs the servers' stderr on our stderr.
	verbose bool
	// confine asks for confined stdio servers (--confine-stdio).
	confine confineFlags
}

// firstStartTimeout is the probe's connection timeout for a server started
// through a package runner (packageRunner) when no --probe-timeout is given
// and the entry's own is shorter.
const firstStartTimeout = 3 * time.Minute

// packageRunner names the package runner that command (with args) starts a
// server through, one that may first download it (npx, uvx, bunx, pnpm
// dlx, npm exec, …), or "".
func packageRunner(command string, args []string) string {
	base := strings.TrimSuffix(filepath.Base(command), ".exe")
	switch base {
	case "npx", "uvx", "bunx", "pnpx":
		return base
	case "npm", "pnpm", "yarn", "bun", "uv":
		if len(args) > 0 && (args[0] == "exec" || args[0] == "dlx" || args[0] == "x" || (base == "uv" && args[0] == "tool")) {
			return base + " " + args[0]
		}
	}
	return ""
}

// probeServers resolves and probes entries (declaration order kept) and
// returns one result per entry: an entry without a usable transport fails
// with op "resolve".
func probeServers(ctx context.Context, stderr io.Writer, entries []probeEntry, o probeOptions) []runtime.ProbeResult {
	level := slog.LevelError + 4 // the failures are reported in the results
	if o.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level, ReplaceAttr: dropTime}))
	out := make([]runtime.ProbeResult, len(entries))
	confine, err := o.confine.confinement(policyFlags{})
	if err != nil {
		for i, pe := range entries {
			out[i] = runtime.ProbeResult{Server: pe.name, Err: &runtime.ServerError{Server: pe.name, Op: "confine", Err: err}}
		}
		return out
	}
	var servers []runtime.Server
	var at []int
	for i, pe := range entries {
		r, err := config.ResolveServer(pe.name, pe.entry)
		if err != nil {
			out[i] = runtime.ProbeResult{Server: pe.name, Err: &runtime.ServerError{Server: pe.name, Op: "resolve", Err: err}}
			continue
		}
		sv := runtime.ServerFromConfig(r)
		if o.timeout > 0 {
			sv.Entry.ConnectionTimeoutMs = float64(o.timeout.Milliseconds())
		} else if runner := packageRunner(sv.Entry.Command, sv.Entry.Args); runner != "" && sv.Entry.ConnectionTimeoutMs < float64(firstStartTimeout.Milliseconds()) {
			// Killing a runner in the middle of its first download leaves
			// its cache broken (npx: ENOENT …/_npx/…/package.json on every
			// later start), so its first start gets time to download.
			sv.Entry.ConnectionTimeoutMs = float64(firstStartTimeout.Milliseconds())
			fmt.Fprintf(stderr, "openclaw mcp: %q starts through %s, which may download the package first: waiting up to %s for it (--probe-timeout changes this)\n",
				regSanitize(pe.name), runner, firstStartTimeout)
		}
		servers = append(servers, sv)
		at = append(at, i)
	}
	popts := &runtime.ProbeOptions{
		Transport:  &transport.Options{ConfineStdio: confine},
		Logger:     logger,
		ClientInfo: &mcp.Implementation{Name: "openclaw-go", Version: version},
	}
	// The built-in sanitizer names the probed tools as a catalog of just
	// these servers, as OpenClaw's probe does, so that a toolFilter pattern
	// on exposed names counts as in a session; no other policy runs (no
	// tool is called).
	eng, err := engine.Load(ctx, &engine.Options{
		DefaultModules: []string{"builtin:sanitizer"},
		Audit:          discardAudit{},
		Logger:         logger,
	})
	if err != nil {
		fmt.Fprintf(stderr, "openclaw mcp probe: exposed tool names unavailable: %s\n", regSanitize(err.Error()))
	} else {
		defer eng.Close(context.WithoutCancel(ctx))
		popts.Sanitizer = eng
	}
	res, err := runtime.Probe(ctx, servers, popts)
	if err != nil {
		fmt.Fprintf(stderr, "openclaw mcp probe: exposed tool names unavailable: %s\n", regSanitize(err.Error()))
	}
	for j, r := range res {
		out[at[j]] = r
	}
	return out
}

// discardAudit drops audit records: naming a probe's tools is no decision
// about a call.
type discardAudit struct{}

func (discardAudit) Record(policies.AuditRecord) {}

// probeMessage is a failed probe's reason without the server name (the
// caller names it): `connect: <cause>`.
func probeMessage(err error) string {
	var se *runtime.ServerError
	if errors.As(err, &se) {
		msg := se.Err.Error()
		msg = strings.TrimPrefix(msg, config.ErrNoTransport.Error()+": ")
		return regSanitize(se.Op + ": " + msg)
	}
	return regSanitize(err.Error())
}

// probeSummary is the text after "- <name>: " for a server that answered:
// OpenClaw's "<n> tools[, resources][, prompts]" and, in parentheses, the
// transport, serverInfo, protocol version and elapsed milliseconds.
func probeSummary(r *runtime.ProbeResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d tools", len(r.Tools))
	caps := probeCaps(r)
	if caps != nil && caps.Resources != nil {
		b.WriteString(", resources")
	}
	if caps != nil && caps.Prompts != nil {
		b.WriteString(", prompts")
	}
	var details []string
	if r.Kind != "" {
		details = append(details, string(r.Kind))
	}
	if r.Init != nil && r.Init.ServerInfo != nil {
		details = append(details, strings.TrimSpace(regSanitize(r.Init.ServerInfo.Name+" "+r.Init.ServerInfo.Version)))
	}
	if r.Init != nil && r.Init.ProtocolVersion != "" {
		details = append(details, "protocol "+regSanitize(r.Init.ProtocolVersion))
	}
	if r.Filtered > 0 {
		details = append(details, fmt.Sprintf("%d hidden by toolFilter", r.Filtered))
	}
	details = append(details, strconv.FormatInt(probeMs(r.Elapsed), 10)+" ms")
	fmt.Fprintf(&b, " (%s)", strings.Join(details, ", "))
	return b.String()
}

func probeCaps(r *runtime.ProbeResult) *mcp.ServerCapabilities {
	if r.Init == nil {
		return nil
	}
	return r.Init.Capabilities
}

// probeMs rounds d to whole milliseconds, at least 1 for a probe that ran.
func probeMs(d time.Duration) int64 {
	return max(1, int64(math.Round(float64(d)/float64(time.Millisecond))))
}

// probeJSON builds `mcp probe --json`: OpenClaw's {generatedAt, servers,
// tools, diagnostics} with, per server, its launch, tool count and
// capabilities, plus our keys (path, ok; per server ok, transport,
// serverInfo, protocolVersion, elapsedMs and toolNames, the raw names).
// tools lists the exposed names, sorted, as the built-in sanitizer names a
// catalog of the probed servers (`openclaw mcp tools` applies the
// configured policies).
func probeJSON(path string, entries []probeEntry, results []runtime.ProbeResult) *config.Object {
	servers := config.NewObject()
	diags := []any{}
	tools := []string{}
	byName := map[string]*config.Object{}
	for _, pe := range entries {
		byName[pe.name] = pe.entry
	}
	order := slices.Clone(results)
	slices.SortStableFunc(order, func(a, b runtime.ProbeResult) int { return config.LocaleCompare(a.Server, b.Server) })
	for i := range order {
		r := &order[i]
		if r.Skipped {
			continue
		}
		if r.Err != nil {
			d := config.NewObject()
			d.Set("serverName", r.Server)
			d.Set("message", probeMessage(r.Err))
			if r.Elapsed > 0 {
				d.Set("elapsedMs", probeMs(r.Elapsed))
			}
			diags = append(diags, d)
			continue
		}
		s := config.NewObject()
		s.Set("launch", r.Launch)
		s.Set("tools", len(r.Tools))
		if e := byName[r.Server]; e != nil {
			if v, ok := e.Get("requestTimeoutMs"); ok && regTruthy(v) {
				s.Set("requestTimeoutMs", v)
			}
			if v, _ := e.Get("supportsParallelToolCalls"); v == true {
				s.Set("supportsParallelToolCalls", true)
			}
		}
		if r.Filtered > 0 {
			s.Set("filteredTools", r.Filtered)
		}
		caps := probeCaps(r)
		if caps != nil && caps.Resources != nil {
			s.Set("resources", true)
		}
		if caps != nil && caps.Prompts != nil {
			s.Set("prompts", true)
		}
		if caps != nil {
			lt := caps.Tools != nil && caps.Tools.ListChanged
			lr := caps.Resources != nil && caps.Resources.ListChanged
			lp := caps.Prompts != nil && caps.Prompts.ListChanged
			if lt || lr || lp {
				lc := config.NewObject()
				lc.Set("tools", lt)
				lc.Set("resources", lr)
				lc.Set("prompts", lp)
				s.Set("listChanged", lc)
			}
		}
		s.Set("ok", true)
		s.Set("transport", string(r.Kind))
		if r.Init != nil && r.Init.ServerInfo != nil {
			si := config.NewObject()
			si.Set("name", r.Init.ServerInfo.Name)
			si.Set("version", r.Init.ServerInfo.Version)
			if r.Init.ServerInfo.Title != "" {
				si.Set("title", r.Init.ServerInfo.Title)
			}
			s.Set("serverInfo", si)
		}
		if r.Init != nil {
			s.Set("protocolVersion", r.Init.ProtocolVersion)
		}
		s.Set("elapsedMs", probeMs(r.Elapsed))
		names := make([]string, 0, len(r.Tools))
		for _, t := range r.Tools {
			names = append(names, t.Name)
		}
		tools = append(tools, r.Exposed...)
		s.Set("toolNames", names)
		servers.Set(r.Server, s)
	}
	slices.Sort(tools)
	o := config.NewObject()
	o.Set("path", path)
	o.Set("ok", len(diags) == 0)
	o.Set("generatedAt", time.Now().UTC().Format("2006-01-02T15:04:05.000Z"))
	o.Set("servers", servers)
	o.Set("tools", tools)
	o.Set("diagnostics", diags)
	return o
}

// parseSeconds parses an OpenClaw "<seconds>" option: a finite number > 0,
// else `<flag> must be a positive number.`
func parseSeconds(flag, v string) (time.Duration, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("%s must be a positive number.", flag)
	}
	return time.Duration(f * float64(time.Second)), nil
}

func newMCPProbeCmd() *cobra.Command {
	var (
		asJSON, verbose bool
		timeout         string
		confine         confineFlags
	)
	cmd := &cobra.Command{
		Use:   "probe [name...]",
		Short: "Connect to configured MCP servers and list available capabilities",
		Long: `Probe connects each named server of mcp.servers (every enabled one when no name is
given), lists its tools and disconnects, without policies or a catalog. Each server that answered
gets a line "- <name>: <n> tools[, resources][, prompts] (<transport>, <serverInfo>, protocol
<version>, <ms> ms)"; each failure a line "! <name>: <step>: <reason>", secrets redacted. Servers
are probed concurrently, four at a time. The exit code is 1 when any server failed.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var to time.Duration
			if cmd.Flags().Changed("timeout") {
				var err error
				if to, err = parseSeconds("--timeout", timeout); err != nil {
					return regFail(cmd, err.Error())
				}
			}
			doc, err := loadRegistry(cmd)
			if err != nil {
				return err
			}
			servers := doc.Servers()
			var entries []probeEntry
			if len(args) == 0 {
				for _, name := range servers.Keys() {
					e, _ := doc.Server(name)
					if v, _ := e.Get("enabled"); v != false {
						entries = append(entries, probeEntry{name, e})
					}
				}
			}
			for _, name := range args {
				e, ok := doc.Server(name)
				if !ok {
					return regFail(cmd, fmt.Sprintf("No MCP server named %q in %s. %s", regSanitize(name), doc.Path, hintListServers))
				}
				if v, _ := e.Get("enabled"); v == false {
					return regFail(cmd, fmt.Sprintf("MCP server %q is disabled in %s. Run openclaw mcp configure %s --enable before probing it.", regSanitize(name), doc.Path, regSanitize(name)))
				}
				if !slices.ContainsFunc(entries, func(pe probeEntry) bool { return pe.name == name }) {
					entries = append(entries, probeEntry{name, e})
				}
			}
			sel := config.NewObject()
			for _, pe := range entries {
				sel.Set(pe.name, pe.entry)
			}
			regWarnBlockedEnv(cmd.ErrOrStderr(), sel)
			out := cmd.OutOrStdout()
			if len(entries) == 0 && !asJSON {
				fmt.Fprintf(out, "No enabled MCP servers configured in %s.\n", doc.Path)
				return nil
			}
			results := probeServers(cmd.Context(), cmd.ErrOrStderr(), entries, probeOptions{timeout: to, verbose: verbose, confine: confine})
			failed := slices.ContainsFunc(results, func(r runtime.ProbeResult) bool { return r.Err != nil })
			if asJSON {
				regPrintJSON(out, probeJSON(doc.Path, entries, results))
			} else {
				fmt.Fprintf(out, "MCP probe (%s):\n", doc.Path)
				order := slices.Clone(results)
				slices.SortStableFunc(order, func(a, b runtime.ProbeResult) int { return config.LocaleCompare(a.Server, b.Server) })
				for i := range order {
					if order[i].Err == nil {
						fmt.Fprintf(out, "- %s: %s\n", regSanitize(order[i].Server), probeSummary(&order[i]))
					}
				}
				for i := range order {
					if order[i].Err != nil {
						fmt.Fprintf(out, "! %s: %s\n", regSanitize(order[i].Server), probeMessage(order[i].Err))
					}
				}
			}
			if failed {
				return regFail(cmd, "MCP probe found failures.")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&timeout, "timeout", "", "connection timeout in seconds for each server (default: its connectionTimeoutMs, 30 s)")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log the servers' stderr on stderr")
	confine.register(cmd.Flags())
	return cmd
}

// doctorProbeIssues is what `mcp doctor --probe` adds to the static issues
// of one entry, as OpenClaw does: nothing for a disabled server or one
// that already has an error; otherwise an "error" issue "probe failed:
// <step>: <reason>" when it did not answer, and (ours) an "info" issue with
// the probe's summary when it did.
//
// Wiring in newMCPDoctorCmd (cmd/openclaw/mcp_registry.go): a --probe flag
// ("Also connect to each checked server") and, after regDoctorIssues,
// `if probe { issues = append(issues, doctorProbeIssues(cmd, name, entry, issues, probeOptions{confine: confine})...) }`.
func doctorProbeIssues(cmd *cobra.Command, name string, e *config.Object, issues []regDoctorIssue, o probeOptions) []regDoctorIssue {
	if v, _ := e.Get("enabled"); v == false {
		return nil
	}
	if slices.ContainsFunc(issues, func(is regDoctorIssue) bool { return is.level == "error" }) {
		return nil
	}
	r := probeServers(cmd.Context(), cmd.ErrOrStderr(), []probeEntry{{name, e}}, o)[0]
	switch {
	case r.Err != nil:
		return []regDoctorIssue{{"error", "probe failed: " + probeMessage(r.Err)}}
	case r.Skipped:
		return []regDoctorIssue{{"error", "probe did not connect to this server"}}
	}
	return []regDoctorIssue{{"info", "probe: " + probeSummary(&r)}}
}
