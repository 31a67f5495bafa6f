package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/runtime"
)

// Tool pins (docs/tool-pins.md): `openclaw mcp trust` records the digest of
// each tool definition of a server in the pins file; the runtime commands
// and the proxy check every listing of a pinned server against it.

// pinFlags choose the pins file and the pin mode (--tool-pins,
// --tool-pins-mode); the policy file's tool_pins key comes next, then the
// defaults (the file beside openclaw.json, mode block).
type pinFlags struct {
	file string
	mode string
}

func (f *pinFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.file, "tool-pins", "", "tool pins file written by openclaw mcp trust (default: tool-pins.json beside openclaw.json, or the policy file's tool_pins.file)")
	fl.StringVar(&f.mode, "tool-pins-mode", "", "what a tool whose definition changed since it was trusted, or a new tool of a pinned server, gets: block (hidden, calls refused), warn or audit (default block, or the policy file's tool_pins.mode)")
}

// pinConfig is where the pins are and what a mismatch gets.
type pinConfig struct {
	path string
	mode config.PinMode
}

// resolve returns the pins file and mode for the config file cfgPath and
// the policy file policyFile ("" for none).
func (f *pinFlags) resolve(cfgPath, policyFile string) (pinConfig, error) {
	file, mode := f.file, f.mode
	if policyFile != "" && (file == "" || mode == "") {
		pf, err := config.LoadPolicyFile(policyFile)
		if err != nil {
			return pinConfig{}, err
		}
		if tp := pf.ToolPins; tp != nil {
			file = firstSet(file, tp.File)
			mode = firstSet(mode, tp.Mode)
		}
	}
	m, err := config.ParsePinMode(mode)
	if err != nil {
		return pinConfig{}, fmt.Errorf("--tool-pins-mode: %w", err)
	}
	if file == "" {
		file = config.DefaultToolPinsPath(cfgPath)
	}
	return pinConfig{path: file, mode: m}, nil
}

// firstSet returns the first of a and b that is not empty.
func firstSet(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// load reads the pins file: nil pins when it does not exist (no server is
// pinned), an error naming the file, line and key when it is invalid (the
// command refuses to start rather than run unchecked).
func (pc pinConfig) load() (*config.ToolPins, error) {
	pins, err := config.LoadToolPins(pc.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return pins, err
}

// strayPins returns, sorted, the servers that pins has pins for and that
// mcp.servers does not configure (a server renamed or removed since it
// was trusted, a typo in an edited file): their pins check nothing.
func strayPins(pins *config.ToolPins, doc *config.Document) []string {
	if pins == nil {
		return nil
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(pins.Servers)) {
		if _, ok := doc.Server(name); !ok {
			out = append(out, name)
		}
	}
	return out
}

// strayPinsWarning is the line that names the stray servers of the pins
// file path.
func strayPinsWarning(path string, stray []string) string {
	quoted := make([]string, len(stray))
	for i, s := range stray {
		quoted[i] = strconv.Quote(regSanitize(s))
	}
	return fmt.Sprintf("openclaw mcp: WARNING: tool pins file %s pins servers that are not in mcp.servers, whose pins are ignored: %s", path, strings.Join(quoted, ", "))
}

// toolChange is one difference between a pinned server's listing and its
// pins.
type toolChange struct {
	tool    string // the server's own tool name
	state   string // policies.PinChanged, policies.PinNew, or "removed"
	members []string
	pinned  *config.ToolPin // nil for a new tool
	listed  *mcp.Tool       // nil for a removed tool
	digest  string          // the listed definition's
}

// pinChanges compares the tools of one server's listing with its pins, in
// the order: the listing's, then the removed tools by name.
func pinChanges(tools []*mcp.Tool, pins map[string]config.ToolPin) ([]toolChange, error) {
	var out []toolChange
	listed := map[string]bool{}
	for _, t := range tools {
		listed[t.Name] = true
		digest, canon, err := runtime.ToolDigest(t)
		if err != nil {
			return nil, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		pin, ok := pins[t.Name]
		switch {
		case !ok:
			out = append(out, toolChange{tool: t.Name, state: policies.PinNew, listed: t, digest: digest})
		case pin.Digest != digest:
			out = append(out, toolChange{tool: t.Name, state: policies.PinChanged, listed: t, digest: digest, pinned: &pin,
				members: runtime.DefinitionChanges(pin.Definition, canon)})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(pins)) {
		if !listed[name] {
			pin := pins[name]
			out = append(out, toolChange{tool: name, state: "removed", pinned: &pin})
		}
	}
	return out, nil
}

// warnPinned prints, for `mcp tools` and `mcp call`, one line per tool of a
// pinned server that differs from its pins, saying what the mode did.
func warnPinned(w io.Writer, rs *runtimeSession, listings []runtime.ServerTools) {
	if rs.pins == nil {
		return
	}
	for _, l := range listings {
		pins, ok := rs.pins.Servers[l.Server]
		if !ok {
			continue
		}
		changes, err := pinChanges(l.Tools, pins)
		if err != nil {
			fmt.Fprintf(w, "openclaw mcp: tool pins: server %q: %s\n", regSanitize(l.Server), regSanitize(err.Error()))
			continue
		}
		for _, c := range changes {
			if c.state == "removed" {
				continue
			}
			what := "is new (no pin)"
			if c.state == policies.PinChanged {
				what = "changed since it was trusted (" + strings.Join(c.members, ", ") + ")"
			}
			did := "hidden and refused"
			if rs.pinMode != config.PinBlock {
				did = "listed (tool pins mode " + string(rs.pinMode) + ")"
			}
			fmt.Fprintf(w, "openclaw mcp: tool pins: server %q: tool %q %s: %s; see openclaw mcp tools --diff, trust it with: %s\n",
				regSanitize(l.Server), regSanitize(c.tool), what, did, regSanitize(runtime.TrustCommand(l.Server)))
		}
	}
}

// printPinDiff prints what changed in each pinned server's listing since it
// was trusted: for a changed tool, a line diff of its description and the
// changed members of its schemas and annotations; new and removed tools.
func printPinDiff(w io.Writer, rs *runtimeSession, listings []runtime.ServerTools, only string) error {
	if rs.pins == nil {
		fmt.Fprintf(w, "No tool pins (%s does not exist): trust a server with: openclaw mcp trust [SERVER]\n", rs.pinPath)
		return nil
	}
	differ := false
	byServer := map[string][]*mcp.Tool{}
	var order []string
	for _, l := range listings {
		byServer[l.Server] = l.Tools
		order = append(order, l.Server)
	}
	for _, name := range slices.Sorted(maps.Keys(rs.pins.Servers)) {
		if !slices.Contains(order, name) {
			order = append(order, name)
		}
	}
	for _, server := range order {
		if only != "" && server != only {
			continue
		}
		pins, pinned := rs.pins.Servers[server]
		tools, listed := byServer[server]
		exactly := func() error { // the command that trusts this listing and no other
			d, err := runtime.ListingDigest(tools)
			if err != nil {
				return fmt.Errorf("server %q: %w", server, err)
			}
			fmt.Fprintf(w, "  trust exactly this listing with: %s --digest %s\n", regSanitize(runtime.TrustCommand(server)), d)
			return nil
		}
		switch {
		case !pinned && listed:
			fmt.Fprintf(w, "MCP server %q: no pins\n", regSanitize(server))
			if err := exactly(); err != nil {
				return err
			}
			continue
		case !pinned:
			fmt.Fprintf(w, "MCP server %q: no pins; trust it with: %s\n", regSanitize(server), regSanitize(runtime.TrustCommand(server)))
			continue
		case slices.Contains(rs.strayPins, server):
			fmt.Fprintf(w, "MCP server %q: not in mcp.servers; its %d pins are ignored\n", regSanitize(server), len(pins))
			continue
		case !listed:
			fmt.Fprintf(w, "MCP server %q: did not list its tools (see the diagnostics above); %d tools pinned\n", regSanitize(server), len(pins))
			continue
		}
		changes, err := pinChanges(tools, pins)
		if err != nil {
			return fmt.Errorf("server %q: %w", server, err)
		}
		if len(changes) == 0 {
			fmt.Fprintf(w, "MCP server %q: %d tools, as trusted\n", regSanitize(server), len(tools))
			continue
		}
		differ = true
		fmt.Fprintf(w, "MCP server %q: %d of %d tools differ from the pins in %s\n", regSanitize(server), len(changes), len(tools), rs.pinPath)
		for _, c := range changes {
			switch c.state {
			case policies.PinNew:
				fmt.Fprintf(w, "  new tool %q (%s)\n", regSanitize(c.tool), c.digest)
				if d := c.listed.Description; d != "" {
					printDescription(w, "+ ", d)
				}
			case "removed":
				fmt.Fprintf(w, "  removed tool %q (was %s)\n", regSanitize(c.tool), c.pinned.Digest)
			default:
				when := ""
				if !c.pinned.TrustedAt.IsZero() {
					when = ", trusted " + c.pinned.TrustedAt.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(w, "  changed tool %q: %s (%s, was %s%s)\n", regSanitize(c.tool), strings.Join(c.members, ", "), c.digest, c.pinned.Digest, when)
				printDefinitionDiff(w, c)
			}
		}
		if err := exactly(); err != nil {
			return err
		}
	}
	if !differ {
		fmt.Fprintln(w, "No changes since the tools were trusted.")
	}
	return nil
}

// printDescription prints each line of a description with prefix.
func printDescription(w io.Writer, prefix, d string) {
	for _, l := range strings.Split(d, "\n") {
		fmt.Fprintf(w, "      %s%s\n", prefix, regSanitize(l))
	}
}

// printDefinitionDiff prints the changed members of a changed tool.
func printDefinitionDiff(w io.Writer, c toolChange) {
	old, err := config.ParseToolDefinition(c.pinned.Definition)
	if err != nil {
		return
	}
	cur, err := runtime.PinDefinition(c.listed)
	if err != nil {
		return
	}
	for _, m := range c.members {
		switch m {
		case "name", "title", "description":
			a, b := old.Name, cur.Name
			if m == "title" {
				a, b = old.Title, cur.Title
			} else if m == "description" {
				a, b = old.Description, cur.Description
			}
			fmt.Fprintf(w, "    %s:\n", m)
			for _, l := range lineDiff(strings.Split(a, "\n"), strings.Split(b, "\n")) {
				fmt.Fprintf(w, "      %s\n", regSanitize(l))
			}
		default:
			a, b := old.InputSchema, cur.InputSchema
			if m == "outputSchema" {
				a, b = old.OutputSchema, cur.OutputSchema
			} else if m == "annotations" {
				a, b = old.Annotations, cur.Annotations
			}
			fmt.Fprintf(w, "    %s:\n", m)
			for _, l := range jsonChanges(a, b) {
				fmt.Fprintf(w, "      %s\n", regSanitize(l))
			}
		}
	}
}

// lineDiff returns a line diff of a and b: common lines prefixed "  ",
// removed "- ", added "+ ", in the order of a longest common subsequence.
// Descriptions are short: the quadratic table is small.
func lineDiff(a, b []string) []string {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			out = append(out, "  "+a[i])
			i, j = i+1, j+1
		case lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, "- "+a[i])
			i++
		default:
			out = append(out, "+ "+b[j])
			j++
		}
	}
	for ; i < n; i++ {
		out = append(out, "- "+a[i])
	}
	for ; j < m; j++ {
		out = append(out, "+ "+b[j])
	}
	return out
}

// jsonChanges lists the differences between two JSON values by JSON
// Pointer (RFC 6901): `~ /properties/q/type: "string" → "number"`,
// `+ /properties/extra: {…}`, `- /required/1: "q"`. Object members are
// compared by name, array elements by index.
func jsonChanges(a, b json.RawMessage) []string {
	var va, vb any
	if len(a) > 0 {
		if err := json.Unmarshal(a, &va); err != nil {
			return []string{"(the trusted value is not JSON)"}
		}
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &vb); err != nil {
			return []string{"(the listed value is not JSON)"}
		}
	}
	var out []string
	var walk func(path string, x, y any, hasX, hasY bool)
	walk = func(path string, x, y any, hasX, hasY bool) {
		show := func(v any) string {
			s, _ := json.Marshal(v)
			if len(s) > 200 {
				return string(s[:200]) + "…"
			}
			return string(s)
		}
		p := path
		if p == "" {
			p = "/"
		}
		switch {
		case !hasX:
			out = append(out, "+ "+p+": "+show(y))
			return
		case !hasY:
			out = append(out, "- "+p+": "+show(x))
			return
		}
		switch xv := x.(type) {
		case map[string]any:
			if yv, ok := y.(map[string]any); ok {
				keys := slices.Sorted(maps.Keys(xv))
				for k := range yv {
					if _, ok := xv[k]; !ok {
						keys = append(keys, k)
					}
				}
				slices.Sort(keys)
				for _, k := range slices.Compact(keys) {
					xe, inX := xv[k]
					ye, inY := yv[k]
					walk(path+"/"+pointerToken(k), xe, ye, inX, inY)
				}
				return
			}
		case []any:
			if yv, ok := y.([]any); ok {
				for i := range max(len(xv), len(yv)) {
					var xe, ye any
					if i < len(xv) {
						xe = xv[i]
					}
					if i < len(yv) {
						ye = yv[i]
					}
					walk(path+"/"+strconv.Itoa(i), xe, ye, i < len(xv), i < len(yv))
				}
				return
			}
		}
		if sx, sy := show(x), show(y); sx != sy {
			out = append(out, "~ "+p+": "+sx+" → "+sy)
		}
	}
	walk("", va, vb, va != nil, vb != nil)
	return out
}

// pointerToken escapes a member name for a JSON Pointer.
func pointerToken(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

func newMCPTrustCmd() *cobra.Command {
	var f runtimeFlags
	var digest string
	cmd := &cobra.Command{
		Use:   "trust [SERVER]",
		Short: "Pin the tool definitions of MCP servers as they are listed now",
		Long: `Trust connects the servers of mcp.servers (only SERVER when given) through the embedded runtime
and records, for each tool each one lists, the digest of its definition (name, title, description,
input and output schemas, annotations; docs/tool-pins.md) in the tool pins file, by server and the
server's own tool name. From then on the runtime, openclaw mcp proxy, mcp tools and mcp call check
every listing of a pinned server: a tool whose definition changed, or a new tool, is hidden and its
calls refused (--tool-pins-mode block, the default), or listed with a warning (warn) or an audit
record (audit). Review what changed with "openclaw mcp tools --diff" before trusting again.
A server that fails to list keeps its pins. Each pin change is written to the audit log.
With --digest (and SERVER), the listing is trusted only if it is still the one reviewed: the
digest "openclaw mcp tools --diff" printed for it; a server that changed in between is refused.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, pos []string) error {
			only := ""
			if len(pos) == 1 {
				only = pos[0]
			}
			if digest != "" && only == "" {
				return usage("--digest names one listing: give the SERVER it is of")
			}
			rs, err := openRuntime(cmd, &f, only, approver{})
			if err != nil {
				return err
			}
			defer rs.close(cmd.Context(), cmd.ErrOrStderr())
			listings, err := rs.Listings(cmd.Context())
			if err != nil {
				return regFail(cmd, "openclaw mcp trust: "+err.Error())
			}
			if only != "" && !slices.ContainsFunc(listings, func(l runtime.ServerTools) bool { return l.Server == only }) {
				return regFail(cmd, fmt.Sprintf("openclaw mcp trust: server %q did not list its tools; nothing trusted", regSanitize(only)))
			}
			if len(listings) == 0 {
				return regFail(cmd, "openclaw mcp trust: no server listed its tools; nothing trusted")
			}
			if digest != "" {
				i := slices.IndexFunc(listings, func(l runtime.ServerTools) bool { return l.Server == only })
				live, err := runtime.ListingDigest(listings[i].Tools)
				if err != nil {
					return regFail(cmd, "openclaw mcp trust: "+regSanitize(err.Error()))
				}
				if live != digest {
					return regFail(cmd, fmt.Sprintf("openclaw mcp trust: server %q lists other definitions than the reviewed ones (listing %s, --digest %s): nothing trusted; review them with: openclaw mcp tools --diff",
						regSanitize(only), live, regSanitize(digest)))
				}
			}
			return trustListings(cmd, rs, listings)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&digest, "digest", "", `with SERVER: trust its listing only if its digest is this one (the "sha256:…" that openclaw mcp tools --diff printed for it)`)

	return cmd
}

// trustListings replaces the pins of each listed server by its listing
// (an unchanged tool keeps its pin and trusted_at) in the pins file, under
// the file's lock (config.UpdateToolPins).
func trustListings(cmd *cobra.Command, rs *runtimeSession, listings []runtime.ServerTools) error {
	out := cmd.OutOrStdout()
	ctx, cancel := context.WithTimeout(cmd.Context(), regLockWait)
	defer cancel()
	// The file is read again under its lock: another trust run may have
	// written it since this one started listing.
	err := config.UpdateToolPins(ctx, rs.pinPath, func(pins *config.ToolPins) error {
		return trustInto(cmd, rs, pins, listings)
	})
	switch {
	case errors.Is(err, errRegReported):
		return err
	case err != nil:
		return regFail(cmd, "openclaw mcp trust: "+err.Error())
	}
	fmt.Fprintf(out, "Wrote %s.\n", rs.pinPath)
	return nil
}

// trustInto replaces the pins of each listed server in pins by its
// listing, audits every change and prints a summary per server.
func trustInto(cmd *cobra.Command, rs *runtimeSession, pins *config.ToolPins, listings []runtime.ServerTools) error {
	out := cmd.OutOrStdout()
	now := time.Now()
	audit := rs.eng.AuditSink()
	var lines []string
	for _, l := range listings {
		fresh, err := runtime.PinTools(l.Tools, now)
		if err != nil {
			return regFail(cmd, fmt.Sprintf("openclaw mcp trust: server %q: %s", regSanitize(l.Server), regSanitize(err.Error())))
		}
		old, had := pins.Servers[l.Server]
		changes, err := pinChanges(l.Tools, old)
		if err != nil {
			return regFail(cmd, "openclaw mcp trust: "+regSanitize(err.Error()))
		}
		for name, pin := range fresh {
			if prev, ok := old[name]; ok && prev.Digest == pin.Digest {
				fresh[name] = prev // unchanged: the pin stays as it was
			}
		}
		pins.Servers[l.Server] = fresh
		counts := map[string]int{}
		for _, c := range changes {
			counts[c.state]++
			reason := c.state + ": " + c.digest
			switch c.state {
			case policies.PinChanged:
				reason = fmt.Sprintf("changed (%s): %s, was %s", strings.Join(c.members, ", "), c.digest, c.pinned.Digest)
			case "removed":
				reason = "removed: was " + c.pinned.Digest
			}
			audit.Record(policies.AuditRecord{Time: now.UTC(), Hook: runtime.PinAuditHook, Caller: "openclaw mcp trust",
				Tool: c.tool, Server: l.Server, Module: "openclaw mcp trust", Mode: policies.Enforce, Decision: "trust", Reason: reason})
			lines = append(lines, fmt.Sprintf("  %s tool %q", c.state, regSanitize(c.tool)))
		}
		what := "first trust"
		if had {
			what = fmt.Sprintf("%d changed, %d new, %d removed", counts[policies.PinChanged], counts[policies.PinNew], counts["removed"])
		}
		fmt.Fprintf(out, "Trusted %d tools of MCP server %q (%s).\n", len(fresh), regSanitize(l.Server), what)
		if had {
			for _, line := range lines {
				fmt.Fprintln(out, line)
			}
		}
		lines = lines[:0]
	}
	return nil
}
