package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/engine"
	"github.com/openclaw-go/openclaw/runtime"
	"github.com/openclaw-go/openclaw/transport"
)

// The runtime commands: `openclaw mcp tools` and `openclaw mcp call`
// connect the servers of mcp.servers through the embedded client runtime
// (package runtime), with the policy engine behind every hook point, as an
// agent harness would. Results go to stdout; per-server diagnostics, policy
// refusals and failures go to stderr.

// runtimeDefaultModules are the modules loaded when neither --policy nor
// --policy-config names one: the default ruleset (allow and audit every
// call), OpenClaw's tool names, and decide_approval's "ask a human".
var runtimeDefaultModules = []string{"builtin:rules", "builtin:sanitizer", "builtin:approvals"}

// namingModule names imported tools when the configured policies have no
// sanitize_tool_names module in enforce mode (engine.Options.NamingModule):
// a user who adds a before_tool_call module keeps OpenClaw's tool names.
const namingModule = "builtin:sanitizer"

// runtimeFlags are the inputs shared by `mcp tools` and `mcp call`.
type runtimeFlags struct {
	policy  policyFlags
	verbose bool
	// principal names the requester (--principal): servers with the
	// per-requester OAuth identity list and call with its tokens.
	principal string
	// calls is set by the commands that call tools: they warn when no
	// module enforces before_tool_call.
	calls bool
	// confine asks for confined stdio servers (--confine-stdio).
	confine confineFlags
	// pins choose the tool pins file and mode (--tool-pins, --tool-pins-mode).
	pins pinFlags
	// protocol is the MCP revision offered to the servers whose entry pins
	// none (--upstream-protocol); "" is the runtime's default.
	protocol string
	// connectWait bounds the wait for the servers before the command goes
	// on with the ready ones (runtime.Options.ConnectWait; --connect-wait
	// on `mcp call`); 0 waits for every server.
	connectWait time.Duration
	// tracing chooses where traces go (--otlp-endpoint, OTEL_*).
	tracing tracingFlags
}

func (f *runtimeFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringArrayVar(&f.policy.files, "policy", nil, "policy module FILE.wasm or builtin:NAME (repeatable, runs in order; replaces the default modules)")
	fl.StringVar(&f.policy.config, "policy-config", "", "policy file (JSON) listing modules, their config and mode (replaces the default modules)")
	f.policy.bundle.register(fl)
	fl.StringVar(&f.policy.auditLog, "audit-log", "", `decision audit log (JSON Lines); "-" for stderr (default: <state dir>/openclaw-go/policy-audit.jsonl)`)
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log the servers' stderr and the runtime's progress on stderr")
	f.confine.register(fl)
	f.pins.register(fl)
	f.tracing.register(fl)
	fl.StringVar(&f.protocol, "upstream-protocol", "", `MCP revision offered to the servers whose entry has no "protocolVersion" (default `+runtime.DefaultProtocolVersion+`, falling back to older revisions with servers that do not offer it)`)
	fl.StringVar(&f.principal, "principal", "", `requester whose OAuth tokens servers with "oauth": {"identity": "per-requester"} use (openclaw mcp login <name> --principal <id>)`)
}

// runtimeSession is a connected runtime session with its policy engine.
type runtimeSession struct {
	*runtime.Session
	eng     *engine.Engine
	tracing *tracing
	servers []runtime.Server
	// pins are the tool pins read from pinPath (nil when the file does not
	// exist), checked in mode pinMode.
	pins    *config.ToolPins
	pinPath string
	pinMode config.PinMode
	// strayPins are the servers of pins that mcp.servers does not
	// configure (strayPins).
	strayPins []string
}

// close disconnects every server (no child process survives) and closes
// the policy engine.
func (rs *runtimeSession) close(ctx context.Context, stderr io.Writer) {
	if err := rs.Session.Close(ctx); err != nil {
		fmt.Fprintf(stderr, "openclaw mcp: closing the MCP servers: %v\n", err)
	}
	if err := rs.eng.Close(ctx); err != nil {
		fmt.Fprintf(stderr, "openclaw mcp: closing the policy engine: %v\n", err)
	}
	// The spans of the command are sent before it exits.
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rs.tracing.Shutdown(sctx); err != nil {
		fmt.Fprintf(stderr, "openclaw mcp: traces not all exported: %v\n", err)
	}
}

// openRuntime reads openclaw.json, loads the policy engine, connects the
// servers through the runtime and prints each server's diagnostic on
// stderr. When only is not empty, every other server is declared disabled:
// it still takes part in naming (so exposed names do not change) but is not
// started. approve asks a human for require_approval outcomes (a nil ask
// refuses) and names who answers in the audit log.
// A returned error has already been printed.
func openRuntime(cmd *cobra.Command, f *runtimeFlags, only string, approve approver) (*runtimeSession, error) {
	if f.principal != "" {
		// Every later use of the command's context (connecting, listing,
		// calling) is made on behalf of this principal.
		cmd.SetContext(runtime.WithPrincipal(cmd.Context(), f.principal))
	}
	ctx := cmd.Context()
	stderr := cmd.ErrOrStderr()
	if err := runtime.CheckProtocolVersion(f.protocol); err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("openclaw mcp: --upstream-protocol %w", err)}
	}
	doc, err := loadRegistry(cmd)
	if err != nil {
		return nil, err
	}
	resolved, diags := doc.ResolveServers()
	for _, d := range diags {
		fmt.Fprintf(stderr, "openclaw mcp: %s\n", regSanitize(d.Error()))
	}
	regWarnKeyTypos(stderr, doc.Root, doc.Servers())
	// tools.profile, tools.allow/deny and the sandbox gate decide which
	// imported tools the agent sees; a mistake there is an error, never an
	// open catalog.
	toolPolicy, err := doc.ToolPolicy()
	if err != nil {
		return nil, regFail(cmd, "openclaw mcp: "+regSanitize(err.Error()))
	}
	// The tool pins: an invalid pins file refuses the command, never
	// leaves a pinned server unchecked.
	pc, err := f.pins.resolve(doc.Path, f.policy.config)
	if err != nil {
		return nil, regFail(cmd, "openclaw mcp: "+err.Error())
	}
	pins, err := pc.load()
	if err != nil {
		return nil, regFail(cmd, "openclaw mcp: "+regSanitize(err.Error()))
	}
	stray := strayPins(pins, doc)
	if len(stray) > 0 {
		fmt.Fprintln(stderr, strayPinsWarning(pc.path, stray))
	}
	// A confined server reaches neither the pins file (it would bless its
	// own rug pull) nor what defaultProtected lists.
	confine, err := f.confine.confinement(f.policy, pc.path)
	if err != nil {
		return nil, regFail(cmd, "openclaw mcp: "+err.Error())
	}
	servers := runtime.ServersFromConfig(resolved) // oauth.identity, oauth.authProfileId
	if only != "" {
		i := slices.IndexFunc(servers, func(s runtime.Server) bool { return s.Name == only })
		if i < 0 {
			return nil, regFail(cmd, fmt.Sprintf("No usable MCP server named %q in %s. %s", regSanitize(only), doc.Path, hintListServers))
		}
		for j := range servers {
			if j != i {
				servers[j].Disabled = true
			}
		}
	}
	level := slog.LevelError
	if f.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level, ReplaceAttr: dropTime}))
	pol := f.policy
	if err := bundleFromPolicyFile(&pol); err != nil {
		return nil, regFail(cmd, "openclaw mcp: policies: "+err.Error())
	}
	policyFile, bundleDigest := pol.config, ""
	var follow *bundleFollower
	if pol.bundle.ref != "" {
		if follow, err = openBundle(ctx, pol, stderr, logger); err != nil {
			return nil, regFail(cmd, "openclaw mcp: policies: "+err.Error())
		}
		policyFile, bundleDigest = follow.cur.PolicyFile, string(follow.cur.Digest)
	}
	opts := &engine.Options{
		ConfigFile:     policyFile,
		BundleDigest:   bundleDigest,
		Files:          pol.files,
		AuditLog:       pol.auditLog,
		DecisionLog:    pol.decisionLog,
		Logger:         logger,
		DefaultModules: runtimeDefaultModules,
		NamingModule:   namingModule,
	}
	eng, err := loadEngine(ctx, opts, follow)
	if err != nil {
		return nil, regFail(cmd, "openclaw mcp: policies: "+err.Error())
	}
	if follow != nil {
		follow.started(eng)
	}
	enforced := false
	for _, m := range eng.Modules() {
		if f.verbose {
			fmt.Fprintf(stderr, "openclaw mcp: policy active: %s\n", m)
		}
		if m.Mode != policies.AuditOnly && slices.Contains(m.Hooks, policies.HookBeforeToolCall) {
			enforced = true
		}
	}
	if f.calls && !enforced {
		// As in `mcp serve`: the absence of a before_tool_call policy is
		// said, never silent.
		fmt.Fprintln(stderr, "openclaw mcp: WARNING: no module enforces before_tool_call: every tool call is allowed")
	}
	tr, err := f.tracing.start(ctx, "openclaw mcp", os.Getenv)
	if err != nil {
		eng.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	connectWait := f.connectWait
	if only == "" && len(config.AmbiguousServerNames(doc.Servers().Keys())) > 0 {
		// A name like a__b__c may belong to server a or to server a__b:
		// which one takes it is known once both have listed.
		connectWait = 0
	}
	s, err := runtime.New(servers, &runtime.Options{
		Enforcer:        eng,
		Limiter:         eng,
		Sanitizer:       eng,
		ApprovalDecider: eng,
		AskHuman:        approve.ask,
		Approver:        approve.name,
		Audit:           eng.AuditSink(),
		ToolPolicy:      toolPolicy,
		Pins:            pins,
		PinMode:         pc.mode,
		Caller:          policies.Caller{Name: "openclaw-go-cli", Version: version},
		Logger:          logger,
		Transport:       &transport.Options{ConfineStdio: confine},
		ProtocolVersion: f.protocol,
		ConnectWait:     connectWait,
		TracerProvider:  tr.Provider(),
		ClientInfo: &mcp.Implementation{
			Name: "openclaw-go", Version: version,
		},
	})
	if err != nil {
		eng.Close(context.WithoutCancel(ctx))
		_ = tr.Shutdown(context.WithoutCancel(ctx))
		return nil, regFail(cmd, "openclaw mcp: "+err.Error())
	}
	rs := &runtimeSession{Session: s, eng: eng, tracing: tr, servers: servers, pins: pins, pinPath: pc.path, pinMode: pc.mode, strayPins: stray}
	if err := s.Connect(ctx); err != nil {
		printServerDiagnostics(stderr, s)
		rs.close(context.WithoutCancel(ctx), stderr)
		return nil, regFail(cmd, "openclaw mcp: the tool catalog could not be built: "+err.Error())
	}
	printServerDiagnostics(stderr, s)
	return rs, nil
}

// printServerDiagnostics prints one line per server that failed (to
// resolve, to start, to connect or to list), was refused for a blocked env
// key, or is paused.
func printServerDiagnostics(w io.Writer, s *runtime.Session) {
	for _, st := range s.Status() {
		switch {
		case st.Err != nil:
			fmt.Fprintf(w, "openclaw mcp: server %q failed: %s\n", regSanitize(st.Name), regSanitize(st.Err.Error()))
		case !st.PausedUntil.IsZero():
			fmt.Fprintf(w, "openclaw mcp: server %q is paused until %s\n", regSanitize(st.Name), st.PausedUntil.UTC().Format("2006-01-02T15:04:05Z"))
		}
	}
}

// catalogEntry is one tool of `openclaw mcp tools --json`. The field set
// and order are stable.
type catalogEntry struct {
	// Name is the exposed name (what an agent calls, and `mcp call` takes).
	Name string `json:"name"`
	// Server is the raw mcp.servers name.
	Server string `json:"server"`
	// Tool is the server's own name for the tool.
	Tool string `json:"tool"`
	// Description is the server's description, whole.
	Description string `json:"description"`
	// InputSchema is the server's input schema.
	InputSchema any `json:"inputSchema"`
}

func newMCPToolsCmd() *cobra.Command {
	var (
		f      runtimeFlags
		asJSON bool
		server string
		diff   bool
	)
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "Connect the MCP servers of openclaw.json and print the tool catalog an agent would see",
		Long: `Tools connects every enabled server of mcp.servers through the embedded runtime, names
the catalog with the sanitize_tool_names policies and prints each tool: exposed name, server,
the server's own name and the first line of its description. A server that fails is reported on
stderr and contributes no tools; the exit code is 0 whenever the catalog was built, 1 when it
could not be named or openclaw.json is invalid. A tool of a server pinned by "openclaw mcp trust"
whose definition changed since, or that is new, is said on stderr (and hidden in tool pins mode
block). With --diff, Tools prints instead what changed since each pinned server was trusted: a
line diff of each changed description, the changed members of its schemas and annotations by JSON
Pointer, and the new and removed tools.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rs, err := openRuntime(cmd, &f, server, approver{})
			if err != nil {
				return err
			}
			defer rs.close(context.WithoutCancel(cmd.Context()), cmd.ErrOrStderr())
			tools, err := rs.Tools(cmd.Context())
			if err != nil {
				return regFail(cmd, "openclaw mcp: "+err.Error())
			}
			listings, err := rs.Listings(cmd.Context())
			if err != nil {
				return regFail(cmd, "openclaw mcp: "+err.Error())
			}
			if diff {
				if err := printPinDiff(cmd.OutOrStdout(), rs, listings, server); err != nil {
					return regFail(cmd, "openclaw mcp tools --diff: "+regSanitize(err.Error()))
				}
				return nil
			}
			warnPinned(cmd.ErrOrStderr(), rs, listings)
			if server != "" {
				tools = slices.DeleteFunc(tools, func(t runtime.Tool) bool { return t.Server != server })
			}
			out := cmd.OutOrStdout()
			if asJSON {
				entries := make([]catalogEntry, 0, len(tools))
				for _, t := range tools {
					entries = append(entries, catalogEntry{
						Name: t.Name, Server: t.Server, Tool: t.RawName(),
						Description: t.Upstream.Description, InputSchema: t.Upstream.InputSchema,
					})
				}
				b, err := json.MarshalIndent(entries, "", "  ")
				if err != nil {
					return regFail(cmd, "openclaw mcp: encoding the catalog: "+err.Error())
				}
				out.Write(append(b, '\n'))
				return nil
			}
			if len(tools) == 0 {
				fmt.Fprintln(out, "No MCP tools.")
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TOOL\tSERVER\tUPSTREAM\tDESCRIPTION")
			utility := 0
			for _, t := range tools {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, regSanitize(t.Server), regSanitize(t.RawName()), firstLine(t.Upstream.Description))
				if t.Utility != "" {
					utility++
				}
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if utility > 0 {
				// `mcp proxy` lists fewer tools: say why.
				fmt.Fprintf(out, "\n%d of these are utility tools (UPSTREAM resources_list, resources_read, prompts_list, prompts_get) that give an agent without MCP resources and prompts access to them, as OpenClaw does; openclaw mcp proxy serves resources and prompts themselves instead and does not list them.\n",
					utility)
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the catalog as a JSON array of {name, server, tool, description, inputSchema}")
	cmd.Flags().StringVar(&server, "server", "", "start only this server and list its tools (names stay those of the full catalog)")
	cmd.Flags().BoolVar(&diff, "diff", false, "print what changed in the pinned servers' tool definitions since openclaw mcp trust")
	return cmd
}

// firstLine is the first non-empty line of a description, without control
// characters.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(regSanitize(l)); l != "" {
			return l
		}
	}
	return ""
}

func newMCPCallCmd() *cobra.Command {
	var (
		f      = runtimeFlags{calls: true}
		asJSON bool
		args   string
		server string
	)
	cmd := &cobra.Command{
		Use:   "call EXPOSED_NAME",
		Short: "Call one tool of the catalog through the runtime, with every policy applied",
		Long: `Call connects the MCP servers of openclaw.json like "openclaw mcp tools" and calls the tool
with that exposed name. The call passes before_tool_call first: a block prints the module's reason
and exits 1. A call that needs approval is asked on the terminal when stdin is one, and refused
otherwise. The result's text content is printed on stdout (on stderr, with exit 1, when the tool
reports an error). With --json, stdout is the result's structuredContent as indented JSON when the
result has one. With --principal ID, servers with "oauth": {"identity": "per-requester"} list and
call with the tokens of principal ID (openclaw mcp login <name> --principal ID); without it a call
to such a server is refused. With --server NAME only that server is started (the others still take
part in naming, as on "openclaw mcp tools --server"); without it the servers start in parallel and
the call goes ahead with those ready within --connect-wait, waiting for the others only when none
of the ready ones has the tool (or when server names make exposed names ambiguous, see
"openclaw mcp status").`,
		Args: func(cmd *cobra.Command, pos []string) error {
			if len(pos) == 2 {
				// The arguments given as a second word, as other MCP CLIs
				// take them.
				return fmt.Errorf("openclaw mcp call: the tool's arguments go in --args: openclaw mcp call %s --args %s", pos[0], shellQuote(pos[1]))
			}
			return cobra.ExactArgs(1)(cmd, pos)
		},
		RunE: func(cmd *cobra.Command, pos []string) error {
			callArgs, err := readCallArgs(args)
			if err != nil {
				return regFail(cmd, "openclaw mcp call: --args: "+err.Error())
			}
			approve := approver{"nobody", refuseApproval}
			if isTerminal(os.Stdin) {
				approve = approver{"terminal", terminalApproval(os.Stdin, cmd.ErrOrStderr())}
			}
			if f.connectWait < 0 {
				return regFail(cmd, fmt.Sprintf("openclaw mcp call: --connect-wait %v: want a duration of 0 (wait for every server) or more, e.g. 3s", f.connectWait))
			}
			rs, err := openRuntime(cmd, &f, server, approve)
			if err != nil {
				return err
			}
			defer rs.close(context.WithoutCancel(cmd.Context()), cmd.ErrOrStderr())
			return printCallResult(cmd, pos[0], asJSON, rs, callArgs)
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result's structuredContent as indented JSON")
	cmd.Flags().StringVar(&args, "args", "", "the tool's arguments: a JSON object, or @FILE to read it from FILE (default {})")
	cmd.Flags().StringVar(&server, "server", "", "start only the MCP server NAME, the tool's")
	cmd.Flags().DurationVar(&f.connectWait, "connect-wait", defaultConnectWait, "how long to wait for the MCP servers before calling with the ready ones (0: wait for every server, each bounded by its connectionTimeoutMs)")
	return cmd
}

// printCallResult calls the tool and prints what a user needs to see.
func printCallResult(cmd *cobra.Command, name string, asJSON bool, rs *runtimeSession, args []byte) error {
	stderr := cmd.ErrOrStderr()
	res, err := rs.CallTool(cmd.Context(), name, args)
	if err != nil {
		var pe *runtime.PolicyError
		var he *runtime.HiddenToolError
		var pin *runtime.PinError
		switch {
		case errors.As(err, &pin):
			return regFail(cmd, "openclaw mcp call: "+regSanitize(strings.TrimPrefix(pin.Error(), "runtime: ")))
		case errors.As(err, &he):
			return regFail(cmd, fmt.Sprintf("openclaw mcp call: unknown tool %q: hidden by %s.", regSanitize(name), regSanitize(he.Rule)))
		case errors.Is(err, runtime.ErrUnknownTool):
			return regFail(cmd, fmt.Sprintf("openclaw mcp call: unknown tool %q. See the catalog with: openclaw mcp tools", regSanitize(name)))
		case errors.As(err, &pe):
			return regFail(cmd, fmt.Sprintf("openclaw mcp call: %s: %s", pe.Tool, regSanitize(pe.Message())))
		default:
			return regFail(cmd, "openclaw mcp call: "+regSanitize(err.Error()))
		}
	}
	out := cmd.OutOrStdout()
	if res.IsError {
		out = stderr
	}
	if asJSON && res.StructuredContent != nil && !res.IsError {
		b, err := json.MarshalIndent(res.StructuredContent, "", "  ")
		if err != nil {
			return regFail(cmd, "openclaw mcp call: encoding structuredContent: "+err.Error())
		}
		out.Write(append(b, '\n'))
	} else {
		printContent(out, res.Content)
	}
	if res.IsError {
		return errRegReported
	}
	return nil
}

// printContent prints text content as is, one block per line, and a
// one-line summary for every other kind of content.
func printContent(w io.Writer, content []mcp.Content) {
	for _, c := range content {
		switch c := c.(type) {
		case *mcp.TextContent:
			fmt.Fprintln(w, strings.TrimSuffix(c.Text, "\n"))
		case *mcp.ImageContent:
			fmt.Fprintf(w, "[image %s, %d bytes]\n", c.MIMEType, len(c.Data))
		case *mcp.AudioContent:
			fmt.Fprintf(w, "[audio %s, %d bytes]\n", c.MIMEType, len(c.Data))
		case *mcp.ResourceLink:
			fmt.Fprintf(w, "[resource link %s]\n", c.URI)
		case *mcp.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				fmt.Fprintln(w, strings.TrimSuffix(c.Resource.Text, "\n"))
			} else if c.Resource != nil {
				fmt.Fprintf(w, "[resource %s, %d bytes]\n", c.Resource.URI, len(c.Resource.Blob))
			}
		default:
			fmt.Fprintf(w, "[%T content]\n", c)
		}
	}
}

// readCallArgs returns the --args value as a JSON object: the value itself,
// the contents of FILE for @FILE, or {} when empty.
func readCallArgs(v string) ([]byte, error) {
	data := []byte(v)
	if name, ok := strings.CutPrefix(v, "@"); ok {
		var err error
		if data, err = os.ReadFile(name); err != nil {
			return nil, err
		}
	}
	if strings.TrimSpace(string(data)) == "" {
		return []byte("{}"), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		if err == nil {
			err = errors.New("null")
		}
		return nil, fmt.Errorf("want a JSON object: %v", err)
	}
	return data, nil
}

// isTerminal reports whether f is a character device other than the null
// device: a terminal, for the stdin of an interactive shell (a process
// started with stdin closed to /dev/null, as by a script or a test, is not
// asked).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(fi, null)
}

// shellQuote quotes s for a POSIX shell (single quotes).
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// approver is who `mcp call` asks when a policy requires approval: the
// callback and its name in the audit record of each answer.
type approver struct {
	name string
	ask  runtime.ApprovalFunc
}

// refuseApproval is the approval callback when nobody can be asked.
func refuseApproval(_ context.Context, req *runtime.ApprovalRequest) (bool, error) {
	return false, fmt.Errorf("module %q asks for approval (%s), and stdin is not a terminal to ask on; run the command in a terminal or change the policy", req.Module, req.Reason)
}

// terminalApproval asks on w and reads the answer from in: "y" or "yes"
// approves, anything else (or the end of ctx) refuses. The reading
// goroutine ends with the next line on in or with the process; the command
// exits right after its one call.
func terminalApproval(in io.Reader, w io.Writer) runtime.ApprovalFunc {
	lines := bufio.NewReader(in)
	return func(ctx context.Context, req *runtime.ApprovalRequest) (bool, error) {
		title := req.Title
		if title == "" {
			title = "Run tool " + req.Tool.Name
		}
		fmt.Fprintf(w, "%s\n  module %q: %s\n  arguments: %s\nApprove? [y/N] ", regSanitize(title), req.Module, regSanitize(req.Reason), regSanitize(string(req.Arguments)))
		answer := make(chan string, 1)
		go func() {
			l, _ := lines.ReadString('\n')
			answer <- l
		}()
		select {
		case <-ctx.Done():
			fmt.Fprintln(w)
			return false, fmt.Errorf("no answer in time: %w", ctx.Err())
		case l := <-answer:
			switch strings.ToLower(strings.TrimSpace(l)) {
			case "y", "yes":
				return true, nil
			}
			return false, errors.New("refused on the terminal")
		}
	}
}
