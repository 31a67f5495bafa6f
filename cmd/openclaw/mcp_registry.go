package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/openclaw-go/openclaw/internal/redact"

	"github.com/spf13/cobra"

	"github.com/openclaw-go/openclaw/config"
)

// The registry commands: `openclaw mcp list | show | set | unset | status |
// doctor`, reading and writing mcp.servers in OpenClaw's openclaw.json with
// OpenClaw's texts and exit codes (docs/protocol-facts.md, Registry CLI,
// golden transcripts in testdata/openclaw/cli/). Results go to
// stdout, failures and warnings to stderr.

// Sentences of ours where OpenClaw prints a hint or a note (the captured
// transcripts show them as "[hint omitted]" and "[scope note line omitted]").
const (
	hintAddServer   = `Add one with: openclaw mcp add <name> --command npx --arg -y --arg <package>`
	hintListServers = "See the configured servers with: openclaw mcp list"
	hintDoctorAdd   = "Add one with: openclaw mcp set <name> '<json>'"
	scopeNote       = "Note: only the OpenClaw-managed mcp.servers entries are listed; servers from config/mcporter.json are not."
	envBlockedWarn  = "is on OpenClaw's stdio env blocklist: OpenClaw drops it at launch, openclaw-go does not start the server until it is removed (see openclaw mcp doctor)"
)

// errRegReported is returned once a command has printed its own failure: main
// prints nothing more and exits 1.
var errRegReported = &exitError{code: 1, err: errors.New("")}

func newMCPRegistryCmds() []*cobra.Command {
	return []*cobra.Command{
		newMCPListCmd(), newMCPShowCmd(), newMCPSetCmd(), newMCPUnsetCmd(),
		newMCPStatusCmd(), newMCPDoctorCmd(),
		newMCPLoginCmd(), newMCPLogoutCmd(),
	}
}

// regFail prints msg on stderr and makes the command exit 1.
func regFail(cmd *cobra.Command, msg string) error {
	fmt.Fprintln(cmd.ErrOrStderr(), msg)
	return errRegReported
}

// regLockWait bounds how long set and unset wait for another writer's lock
// on openclaw.json: a writer holds it for one read, change and write, so a
// longer wait means a stuck process.
const regLockWait = 30 * time.Second

// lockRegistry takes the exclusive advisory lock on openclaw.json (see
// [config.Lock]) for a command's whole read-modify-write, so that concurrent
// `mcp set` and `mcp unset` runs serialize instead of losing entries and
// backups. The caller releases it with the returned function.
func lockRegistry(cmd *cobra.Command) (unlock func(), err error) {
	path, err := config.Path()
	if err != nil {
		return nil, regFail(cmd, err.Error())
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), regLockWait)
	defer cancel()
	l, err := config.Lock(ctx, path)
	if err != nil {
		return nil, regFail(cmd, err.Error())
	}
	return func() {
		if err := l.Unlock(); err != nil {
			fmt.Fprintln(cmd.ErrOrStderr(), err)
		}
	}, nil
}

// loadRegistry reads openclaw.json and checks its mcp section, as every
// registry command does first. OpenClaw's sentence for a bad file is
// followed by a line naming the culprit.
func loadRegistry(cmd *cobra.Command) (*config.Document, error) {
	path, err := config.Path()
	if err != nil {
		return nil, regFail(cmd, err.Error())
	}
	doc, err := config.LoadDocument(path)
	if err == nil {
		err = doc.Check()
	}
	if err != nil {
		var ce *config.ConfigError
		switch {
		case errors.As(err, &ce):
			return nil, regFail(cmd, "Config file is invalid; fix it before using MCP config commands.\n"+path+": "+ce.Error())
		case errors.Is(err, config.ErrInvalidConfig):
			return nil, regFail(cmd, "Config file is invalid; fix it before using MCP config commands.\n"+strings.TrimPrefix(err.Error(), config.ErrInvalidConfig.Error()+": "))
		default:
			return nil, regFail(cmd, err.Error())
		}
	}
	return doc, nil
}

// regWarnBlockedEnv prints one `[bundle-mcp]` warning per blocked env key of
// every stdio server on stderr (docs/protocol-facts.md, stdio env filter).
func regWarnBlockedEnv(w io.Writer, servers *config.Object) {
	for _, name := range servers.Keys() {
		e, _ := servers.Get(name)
		for _, k := range config.BlockedStdioEnvKeys(e.(*config.Object)) {
			fmt.Fprintf(w, "[bundle-mcp] server %q: env %q %s\n", regSanitize(name), regSanitize(k), envBlockedWarn)
		}
	}
}

// regWarnKeyTypos warns on w about misspelled keys (config.KeyTypo) of the
// "mcp" section of root (nil: none) and of the entries of servers: OpenClaw
// keeps such keys and ignores them, so the setting meant is not applied.
func regWarnKeyTypos(w io.Writer, root, servers *config.Object) {
	var typos []config.KeyTypo
	if root != nil {
		typos = config.SectionKeyTypos(root)
	}
	for _, name := range servers.Keys() {
		e, _ := servers.Get(name)
		typos = append(typos, config.EntryKeyTypos("mcp.servers."+name, e.(*config.Object))...)
	}
	for _, k := range typos {
		fmt.Fprintf(w, "openclaw mcp: warning: %s\n", regSanitize(k.Message()))
	}
}

// regWarnAmbiguousNames writes one stderr line per server whose exposed
// tool names do not say where its name ends (config.AmbiguousServerNames;
// docs/tool-names.md §9).
func regWarnAmbiguousNames(w io.Writer, servers *config.Object) {
	for _, a := range config.AmbiguousServerNames(servers.Keys()) {
		fmt.Fprintf(w, "warning: server %q: %s\n", regSanitize(a.Server), regSanitize(a.Message))
	}
}

// regSanitize drops control characters so a name cannot forge log lines.
func regSanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
}

func regPrintJSON(w io.Writer, v any) {
	w.Write(append(config.MarshalIndent(v), '\n'))
}

func regSortedNames(servers *config.Object) []string {
	names := servers.Keys()
	config.SortLocale(names)
	return names
}

func newMCPListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the OpenClaw-managed MCP servers of mcp.servers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, err := loadRegistry(cmd)
			if err != nil {
				return err
			}
			servers := doc.Servers()
			out := cmd.OutOrStdout()
			if asJSON {
				regPrintJSON(out, servers)
				return nil
			}
			regWarnBlockedEnv(cmd.ErrOrStderr(), servers)
			regWarnKeyTypos(cmd.ErrOrStderr(), doc.Root, servers)
			if servers.Len() == 0 {
				fmt.Fprintf(out, "No OpenClaw-managed MCP servers configured in %s. %s\n", doc.Path, hintAddServer)
				fmt.Fprintln(out, scopeNote)
				return nil
			}
			fmt.Fprintf(out, "OpenClaw-managed MCP servers (%s):\n", doc.Path)
			for _, n := range regSortedNames(servers) {
				// A disabled server is listed, and said to be (OpenClaw
				// lists the name alone).
				suffix := regOAuthListSuffix(servers, n)
				if e, _ := servers.Get(n); e != nil {
					if v, _ := e.(*config.Object).Get("enabled"); v == false {
						suffix += " (disabled)"
					}
				}
				fmt.Fprintf(out, "- %s%s\n", n, suffix)
			}
			fmt.Fprintln(out)
			fmt.Fprintln(out, scopeNote)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print mcp.servers as JSON, in file order, unredacted")
	return cmd
}

func newMCPShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show [name]",
		Short: "Show one MCP server entry, or all of mcp.servers, as JSON (unredacted)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := loadRegistry(cmd)
			if err != nil {
				return err
			}
			var value any = doc.Servers()
			if len(args) == 1 {
				e, ok := doc.Server(args[0])
				if !ok {
					return regFail(cmd, fmt.Sprintf("No MCP server named %q in %s. %s", args[0], doc.Path, hintListServers))
				}
				value = e
			}
			out := cmd.OutOrStdout()
			if !asJSON {
				if len(args) == 1 {
					fmt.Fprintf(out, "OpenClaw-managed MCP server %q (%s):\n", args[0], doc.Path)
				} else {
					fmt.Fprintf(out, "OpenClaw-managed MCP servers (%s):\n", doc.Path)
				}
			}
			regPrintJSON(out, value)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the bare JSON")
	return cmd
}

func newMCPSetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "set <name> <json>",
		Short: "Add or replace one MCP server entry (a JSON object), normalized and validated like OpenClaw",
		Long: `Set stores <json> as mcp.servers.<name> in openclaw.json. The entry is normalized as
OpenClaw does (type → transport, workingDirectory → cwd, snake_case aliases → camelCase) and the
whole mcp section is validated before anything is written. The file is rewritten as indented JSON
with rotating backups (openclaw.json.bak, .bak.1 … .bak.4) and openclaw.json.last-good.
Concurrent set and unset runs take turns on an advisory lock (openclaw.json.lock); a file
changed meanwhile by a writer that does not lock (OpenClaw, an editor) is not overwritten:
the command fails and can be run again.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := strings.TrimSpace(args[0])
			if name == "" {
				return regFail(cmd, "MCP server name is required.")
			}
			v, err := config.ParseOrdered([]byte(args[1]))
			entry, ok := v.(*config.Object)
			if err != nil || !ok {
				return regFail(cmd, "MCP server config must be a JSON object.")
			}
			unlock, err := lockRegistry(cmd)
			if err != nil {
				return err
			}
			defer unlock()
			doc, err := loadRegistry(cmd)
			if err != nil {
				return err
			}
			if err := doc.SetServer(name, entry); err != nil {
				var ce *config.ConfigError
				if errors.As(err, &ce) {
					return regFail(cmd, fmt.Sprintf("Config invalid after MCP set (%s).", ce.Error()))
				}
				return regFail(cmd, err.Error())
			}
			regWarnKeyTypos(cmd.ErrOrStderr(), nil, singleServer(name, entry))
			if err := doc.Save(); err != nil {
				return regFail(cmd, err.Error())
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Saved MCP server %q to %s.\n", name, doc.Path)
			return nil
		},
	}
}

func newMCPUnsetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "unset <name>",
		Short: "Remove one MCP server entry from mcp.servers",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := strings.TrimSpace(args[0])
			if name == "" {
				return regFail(cmd, "MCP server name is required.")
			}
			unlock, err := lockRegistry(cmd)
			if err != nil {
				return err
			}
			defer unlock()
			doc, err := loadRegistry(cmd)
			if err != nil {
				return err
			}
			removed, err := doc.UnsetServer(name)
			if err != nil {
				var ce *config.ConfigError
				if errors.As(err, &ce) {
					return regFail(cmd, fmt.Sprintf("Config invalid after MCP unset (%s).", ce.Error()))
				}
				return regFail(cmd, err.Error())
			}
			if !removed {
				return regFail(cmd, fmt.Sprintf("No MCP server named %q in %s. %s", name, doc.Path, hintListServers))
			}
			if err := doc.Save(); err != nil {
				return regFail(cmd, err.Error())
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Removed MCP server %q from %s.\n", name, doc.Path)
			return nil
		},
	}
}

// regStatusEntry builds one `mcp status --json` row in OpenClaw's key order;
// keys whose value OpenClaw leaves undefined are absent.
func regStatusEntry(name string, e *config.Object) (*config.Object, *config.ResolvedServer) {
	r, _ := config.ResolveServer(name, e)
	enabled := true
	if v, _ := e.Get("enabled"); v == false {
		enabled = false
	}
	o := config.NewObject()
	o.Set("name", name)
	o.Set("configured", true)
	o.Set("enabled", enabled)
	o.Set("ok", enabled && r != nil)
	if r != nil {
		o.Set("transport", r.Transport)
		o.Set("launch", r.Description)
		o.Set("requestTimeoutMs", r.RequestTimeoutMs)
		o.Set("connectionTimeoutMs", r.ConnectionTimeoutMs)
		o.Set("supportsParallelToolCalls", r.SupportsParallelToolCalls)
	}
	for _, k := range []string{"toolFilter", "codex"} {
		if v, ok := e.Get(k); ok && v != nil {
			o.Set(k, v)
		}
	}
	if v, ok := e.Get("auth"); ok && regTruthy(v) {
		o.Set("auth", v)
	}
	if v, ok := oauthViewOf(name, e, r); ok {
		v.statusJSON(o)
	}
	return o, r
}

// regOAuthListSuffix is the `mcp list` suffix of server n: the connected
// principal count of a per-requester OAuth server, else "".
func regOAuthListSuffix(servers *config.Object, n string) string {
	e, _ := servers.Get(n)
	eo, ok := e.(*config.Object)
	if !ok {
		return ""
	}
	r, _ := config.ResolveServer(n, eo)
	v, ok := oauthViewOf(n, eo, r)
	if !ok {
		return ""
	}
	return v.listSuffix()
}

// regTruthy is JavaScript's truthiness for a JSON value.
func regTruthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case float64:
		return x != 0 && !math.IsNaN(x)
	case string:
		return x != ""
	}
	return true
}

// runningSkippedLines sums, by server name, the skipped stdout lines that
// the running processes serving configPath's servers (`mcp proxy`)
// published in their mcp-run files; nil when none runs.
func runningSkippedLines(configPath string) map[string]int64 {
	dir, err := mcpRunDir()
	if err != nil {
		return nil
	}
	infos, err := readMCPRunFiles(dir)
	if err != nil {
		return nil
	}
	var sum map[string]int64
	for _, in := range infos {
		if filepath.Clean(in.Config) != filepath.Clean(configPath) || !processState(runInfo{PID: in.PID, StartTicks: in.StartTicks}) {
			continue
		}
		for name, n := range in.SkippedLines {
			if sum == nil {
				sum = map[string]int64{}
			}
			sum[name] += n
		}
	}
	return sum
}

func newMCPStatusCmd() *cobra.Command {
	var asJSON, verbose bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show each MCP server's transport, launch (secrets redacted) and timeouts, without connecting",
		Long: `Status prints each mcp.servers entry of openclaw.json: its transport and flags, and with -v
its launch (secrets redacted), timeouts, OAuth state and tool filter. It connects nothing. When an
openclaw mcp proxy serving the same openclaw.json runs, the stdout lines of its stdio servers that
were not JSON-RPC messages (banners, debug prints) are shown as stdout-lines-skipped=N
("skippedStdoutLines" in --json), as that proxy last published them (every 2 s).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, err := loadRegistry(cmd)
			if err != nil {
				return err
			}
			servers := doc.Servers()
			regWarnBlockedEnv(cmd.ErrOrStderr(), servers)
			regWarnKeyTypos(cmd.ErrOrStderr(), doc.Root, servers)
			regWarnAmbiguousNames(cmd.ErrOrStderr(), servers)
			out := cmd.OutOrStdout()
			skipped := runningSkippedLines(doc.Path)
			var rows []any
			var views []*oauthView // per row; nil unless an HTTP OAuth server
			for _, name := range regSortedNames(servers) {
				e, _ := servers.Get(name)
				row, r := regStatusEntry(name, e.(*config.Object))
				if n := skipped[name]; n > 0 {
					row.Set("skippedStdoutLines", float64(n))
				}
				rows = append(rows, row)
				var view *oauthView
				if v, ok := oauthViewOf(name, e.(*config.Object), r); ok {
					view = &v
				}
				views = append(views, view)
			}
			if asJSON {
				o := config.NewObject()
				o.Set("path", doc.Path)
				if rows == nil {
					rows = []any{}
				}
				o.Set("servers", rows)
				regPrintJSON(out, o)
				return nil
			}
			if len(rows) == 0 {
				fmt.Fprintf(out, "No MCP servers configured in %s.\n", doc.Path)
				return nil
			}
			fmt.Fprintf(out, "MCP server status (%s):\n", doc.Path)
			for i, x := range rows {
				row := x.(*config.Object)
				view := views[i]
				get := func(k string) any { v, _ := row.Get(k); return v }
				transport := "disabled"
				if get("enabled") == true {
					transport = "invalid"
					if t, ok := get("transport").(string); ok {
						transport = t
					}
				}
				var flags string
				if get("auth") == "oauth" {
					flags += " oauth"
				}
				if view != nil {
					flags += view.statusFlags()
				}
				if row.Has("toolFilter") {
					flags += " tool-filtered"
				}
				if get("supportsParallelToolCalls") == true {
					flags += " parallel"
				}
				if n, ok := get("skippedStdoutLines").(float64); ok {
					flags += fmt.Sprintf(" stdout-lines-skipped=%s", config.FormatNumber(n))
				}
				fmt.Fprintf(out, "- %s: %s%s\n", get("name"), transport, flags)
				if transport == "invalid" {
					name := get("name").(string)
					e, _ := servers.Get(name)
					if _, err := config.ResolveServer(name, e.(*config.Object)); err != nil {
						fmt.Fprintf(out, "  error: %s\n", regSanitize(strings.TrimPrefix(err.Error(), config.ErrNoTransport.Error()+": ")))
					}
				}
				if !verbose {
					continue
				}
				na := func(k string) string {
					switch v := get(k).(type) {
					case string:
						return v
					case float64:
						return config.FormatNumber(v)
					}
					return "n/a"
				}
				fmt.Fprintf(out, "  launch: %s\n", na("launch"))
				fmt.Fprintf(out, "  timeouts: connect=%sms request=%sms\n", na("connectionTimeoutMs"), na("requestTimeoutMs"))
				switch {
				case view != nil:
					fmt.Fprintf(out, "  oauth: %s\n", view.verboseLine(get("name").(string)))
				case get("auth") == "oauth":
					fmt.Fprintln(out, "  oauth: n/a (OAuth applies to HTTP servers)")
				}
				if tf, ok := row.Get("toolFilter"); ok {
					fmt.Fprintf(out, "  tools: %s\n", config.MarshalCompact(tf))
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "show launch, timeouts, OAuth state and tool filters")
	return cmd
}

// regDoctorIssue is one finding of `mcp doctor`: level "error", "warning" or
// "info".
type regDoctorIssue struct{ level, message string }

func newMCPDoctorCmd() *cobra.Command {
	var asJSON, probe bool
	var confine confineFlags
	cmd := &cobra.Command{
		Use:   "doctor [name]",
		Short: "Check MCP server entries for setup problems (with --probe, also connect)",
		Long: `Doctor checks each mcp.servers entry without connecting: a usable transport, the stdio
command and cwd, TLS and client certificate files, literal secrets in headers and env, empty tool
filters (OpenClaw's checks), and env keys on OpenClaw's stdio env blocklist, an error here because
openclaw-go does not start such a server. With --probe it also connects each enabled server that has
no error yet and lists its tools; a failed probe is an error. It exits 1 when any error is found.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := loadRegistry(cmd)
			if err != nil {
				return err
			}
			servers := doc.Servers()
			regWarnBlockedEnv(cmd.ErrOrStderr(), servers)
			regWarnKeyTypos(cmd.ErrOrStderr(), doc.Root, config.NewObject()) // the entries' typos are issues
			names := regSortedNames(servers)
			if len(args) == 1 {
				if _, ok := servers.Get(args[0]); !ok {
					return regFail(cmd, fmt.Sprintf("No MCP server named %q in %s. %s", args[0], doc.Path, hintListServers))
				}
				names = []string{args[0]}
			}
			ambiguous := map[string]string{}
			for _, a := range config.AmbiguousServerNames(servers.Keys()) {
				ambiguous[a.Server] = a.Message
			}
			allOK := true
			var results []any
			for _, name := range names {
				e, _ := servers.Get(name)
				issues := regDoctorIssues(name, e.(*config.Object))
				if msg, ok := ambiguous[name]; ok {
					issues = append(issues, regDoctorIssue{"warning", msg})
				}
				if probe {
					issues = append(issues, doctorProbeIssues(cmd, name, e.(*config.Object), issues, probeOptions{confine: confine})...)
				}
				ok := true
				list := []any{}
				for _, is := range issues {
					if is.level == "error" {
						ok = false
					}
					iss := config.NewObject()
					iss.Set("level", is.level)
					iss.Set("message", is.message)
					list = append(list, iss)
				}
				allOK = allOK && ok
				r := config.NewObject()
				r.Set("name", name)
				r.Set("ok", ok)
				r.Set("issues", list)
				results = append(results, r)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				o := config.NewObject()
				o.Set("path", doc.Path)
				o.Set("ok", allOK)
				if results == nil {
					results = []any{}
				}
				o.Set("servers", results)
				regPrintJSON(out, o)
				if !allOK {
					return regFail(cmd, "MCP doctor found errors.")
				}
				return nil
			}
			if len(results) == 0 {
				fmt.Fprintf(out, "No MCP servers configured in %s. %s\n", doc.Path, hintDoctorAdd)
				return nil
			}
			fmt.Fprintf(out, "MCP doctor (%s):\n", doc.Path)
			for _, x := range results {
				r := x.(*config.Object)
				name, _ := r.Get("name")
				ok, _ := r.Get("ok")
				state := "issues"
				if ok == true {
					state = "ok"
				}
				fmt.Fprintf(out, "- %s: %s\n", name, state)
				list, _ := r.Get("issues")
				for _, y := range list.([]any) {
					is := y.(*config.Object)
					level, _ := is.Get("level")
					msg, _ := is.Get("message")
					prefix := "i"
					switch level {
					case "error":
						prefix = "!"
					case "warning":
						prefix = "-"
					}
					fmt.Fprintf(out, "  %s %s: %s\n", prefix, level, msg)
				}
			}
			if !allOK {
				return regFail(cmd, "MCP doctor found errors.")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&probe, "probe", false, "also connect to each checked server and list its tools (a failure is an error)")
	confine.register(cmd.Flags())
	return cmd
}

// regDoctorIssues runs OpenClaw's static checks on one entry, plus ours for
// blocked env keys.
func regDoctorIssues(name string, e *config.Object) []regDoctorIssue {
	var issues []regDoctorIssue
	add := func(level, format string, args ...any) {
		issues = append(issues, regDoctorIssue{level, fmt.Sprintf(format, args...)})
	}
	r, rerr := config.ResolveServer(name, e)
	for _, k := range config.EntryKeyTypos("mcp.servers."+name, e) {
		add("warning", "%s", k.Message())
	}
	disabled := false
	if v, _ := e.Get("enabled"); v == false {
		disabled = true
		add("warning", `server is disabled ("enabled": false)`)
	}
	if !disabled {
		if rerr != nil {
			add("error", "no usable transport: %s", strings.TrimPrefix(rerr.Error(), config.ErrNoTransport.Error()+": "))
		}
		if r != nil && r.Transport == config.TransportStdio {
			env := map[string]string{}
			hasEnv := false
			for _, kv := range r.Env {
				env[kv.Key] = kv.Value
				hasEnv = true
			}
			if !regCommandExists(r.Command, r.Cwd, env, hasEnv) {
				add("error", "stdio command %s is not an executable file (looked up on PATH)", r.Command)
			}
			if r.Cwd != "" && !regIsDir(r.Cwd) {
				add("error", "stdio cwd %s is not an existing folder", r.Cwd)
			}
			for _, k := range r.BlockedEnv {
				add("error", "env %q is on OpenClaw's stdio env blocklist; openclaw-go does not start this server until the key is removed", k)
			}
		}
		if r != nil && r.Transport != config.TransportStdio {
			if a, _ := e.Get("auth"); a == "oauth" {
				if v, ok := oauthViewOf(name, e, r); ok {
					issues = append(issues, v.doctorIssues(name)...)
				}
				if h, ok := e.Get("headers"); ok {
					if ho, ok := h.(*config.Object); ok && ho.Has("Authorization") {
						add("warning", `the static Authorization header is not sent: auth is "oauth"`)
					}
				}
			}
			if !r.SSLVerify {
				add("warning", "TLS certificate verification is off (sslVerify: false)")
			}
			if r.ClientCert != "" && !regIsFile(r.ClientCert) {
				add("error", "clientCert file %s does not exist", r.ClientCert)
			}
			if r.ClientKey != "" && !regIsFile(r.ClientKey) {
				add("error", "clientKey file %s does not exist", r.ClientKey)
			}
		}
	}
	for _, field := range []string{"headers", "env"} {
		v, _ := e.Get(field)
		o, ok := v.(*config.Object)
		if !ok {
			continue
		}
		for _, k := range o.Keys() {
			val, _ := o.Get(k)
			if s, ok := val.(string); ok && redact.IsSensitiveKeyName(k) && strings.TrimSpace(s) != "" && !strings.HasPrefix(strings.TrimSpace(s), "$") {
				add("warning", "%s.%s holds a literal secret; keep it out of the config file and reference an environment variable instead", field, k)
			}
		}
	}
	if v, ok := e.Get("toolFilter"); ok {
		if tf, ok := v.(*config.Object); ok {
			_, inc := tf.Get("include")
			_, exc := tf.Get("exclude")
			if !inc && !exc {
				add("warning", "toolFilter has neither an include nor an exclude list")
			}
		}
	}
	return issues
}

func regIsDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func regIsFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func regIsExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// regCommandExists looks command up as the child would be started: a path is
// taken relative to cwd; a bare name is searched on the entry's PATH (its
// env's PATH when set, ours otherwise), relative PATH entries against cwd.
func regCommandExists(command, cwd string, env map[string]string, hasEnv bool) bool {
	base := cwd
	if base == "" {
		base, _ = os.Getwd()
	}
	resolve := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(base, p)
	}
	if strings.ContainsAny(command, `/\`) {
		return regIsExecutable(resolve(command))
	}
	path := os.Getenv("PATH")
	if p, ok := env["PATH"]; hasEnv && ok {
		path = p
	}
	for _, dir := range filepath.SplitList(path) {
		if dir = strings.TrimSpace(dir); dir == "" {
			dir = "."
		}
		if regIsExecutable(filepath.Join(resolve(dir), command)) {
			return true
		}
	}
	return false
}
