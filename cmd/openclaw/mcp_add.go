package main

//lint:file-ignore ST1005 these errors are OpenClaw's CLI messages, whole sentences printed to the user as they are (capitals and full stops included)

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/openclaw-go/openclaw/config"
)

// `openclaw mcp add`: build one mcp.servers entry from flags, validate it
// like `mcp set`, probe it, then save it. Flags, texts and exit codes are
// OpenClaw's (src/cli/mcp-cli.ts), except where noted in docs/RATIONALE.md:
// timeouts are stored as requestTimeoutMs/connectionTimeoutMs (OpenClaw
// 2026.9.6 rejects the `timeout` and `connectTimeout` keys), an existing
// name is refused without --force, and stdio-only or HTTP-only flags given
// with the other transport are errors instead of being dropped.

// serverFlags are the entry fields `add` and `configure` share.
type serverFlags struct {
	confine                    confineFlags // the probe's --confine-stdio
	include, exclude           string
	timeout, connectTimeout    string
	parallel                   bool
	auth                       string
	oauthScope, oauthRedirect  string
	oauthClientMetadata        string
	sslVerify                  string
	clientCert, clientKey      string
	headers, envs              []string
	probeTimeout               string
	verbose                    bool
	includeSet, excludeSet     bool
	timeoutSet, connectTimeSet bool
	sslVerifySet               bool
}

// register binds the shared flags with OpenClaw's names and help texts.
func (f *serverFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.include, "include", "", "Comma-separated MCP tool names or '*' globs to expose")
	fl.StringVar(&f.exclude, "exclude", "", "Comma-separated MCP tool names or '*' globs to hide")
	fl.StringVar(&f.timeout, "timeout", "", "Per-request timeout in seconds (stored as requestTimeoutMs)")
	fl.StringVar(&f.connectTimeout, "connect-timeout", "", "Connection timeout in seconds (stored as connectionTimeoutMs)")
	fl.BoolVar(&f.parallel, "parallel", false, "Mark this server safe for concurrent tool calls")
	fl.StringVar(&f.auth, "auth", "", "HTTP auth mode: oauth")
	fl.StringVar(&f.oauthScope, "oauth-scope", "", "OAuth scope")
	fl.StringVar(&f.oauthRedirect, "oauth-redirect-url", "", "OAuth redirect URL")
	fl.StringVar(&f.oauthClientMetadata, "oauth-client-metadata-url", "", "OAuth client metadata URL")
	fl.StringVar(&f.sslVerify, "ssl-verify", "", "Verify HTTPS certificates: true or false")
	fl.StringVar(&f.clientCert, "client-cert", "", "HTTP mutual TLS client certificate path")
	fl.StringVar(&f.clientKey, "client-key", "", "HTTP mutual TLS client key path")
	fl.StringArrayVar(&f.headers, "header", nil, "Repeatable HTTP header KEY=VALUE (a value may reference ${ENV})")
	fl.StringArrayVar(&f.envs, "env", nil, "Repeatable stdio environment entry KEY=VALUE")
	fl.StringVar(&f.probeTimeout, "probe-timeout", "", "Connection timeout in seconds for the probe (default: the server's, 30 s)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log the probed server's stderr on stderr")
	f.confine.register(fl)
}

// changed records which optional flags were given.
func (f *serverFlags) changed(cmd *cobra.Command) {
	fl := cmd.Flags()
	f.includeSet, f.excludeSet = fl.Changed("include"), fl.Changed("exclude")
	f.timeoutSet, f.connectTimeSet = fl.Changed("timeout"), fl.Changed("connect-timeout")
	f.sslVerifySet = fl.Changed("ssl-verify")
}

// parseCSV splits a comma-separated list, trimming items and dropping
// empty ones; nil when nothing is left (OpenClaw's parseCsvList).
func parseCSV(v string) []any {
	var out []any
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// parseKeyValues parses repeated KEY=VALUE flags into an object in flag
// order (a repeated key keeps its first position and last value); nil when
// there is none. The messages are OpenClaw's.
func parseKeyValues(values []string, label string) (*config.Object, error) {
	if len(values) == 0 {
		return nil, nil
	}
	o := config.NewObject()
	for _, raw := range values {
		i := strings.Index(raw, "=")
		if i <= 0 {
			return nil, fmt.Errorf("%s entries must use KEY=VALUE.", label)
		}
		key := strings.TrimSpace(raw[:i])
		if key == "" {
			return nil, fmt.Errorf("%s entries must use a non-empty key.", label)
		}
		o.Set(key, raw[i+1:])
	}
	return o, nil
}

// parseBoolFlag parses --ssl-verify: "true" or "false", any case.
func parseBoolFlag(flag, v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%s must be true or false.", flag)
}

// parseAuth parses --auth: empty or "oauth", any case.
func parseAuth(v string) (string, error) {
	a := strings.ToLower(strings.TrimSpace(v))
	if a != "" && a != "oauth" {
		return "", errors.New(`Invalid --auth value. Use "oauth".`)
	}
	return a, nil
}

// oauthObject is the oauth object of the --oauth-* flags; nil when none
// is given.
func (f *serverFlags) oauthObject() *config.Object {
	o := config.NewObject()
	for _, kv := range [][2]string{{"scope", f.oauthScope}, {"redirectUrl", f.oauthRedirect}, {"clientMetadataUrl", f.oauthClientMetadata}} {
		if v := strings.TrimSpace(kv[1]); v != "" {
			o.Set(kv[0], v)
		}
	}
	if o.Len() == 0 {
		return nil
	}
	return o
}

// toolFilterObject is the toolFilter of --include and --exclude; nil when
// both lists are empty.
func (f *serverFlags) toolFilterObject() *config.Object {
	inc, exc := parseCSV(f.include), parseCSV(f.exclude)
	if inc == nil && exc == nil {
		return nil
	}
	tf := config.NewObject()
	if inc != nil {
		tf.Set("include", inc)
	}
	if exc != nil {
		tf.Set("exclude", exc)
	}
	return tf
}

// timeoutsMs converts --timeout and --connect-timeout (seconds) to the
// millisecond fields; 0 for a flag not given.
func (f *serverFlags) timeoutsMs() (request, connect float64, err error) {
	if f.timeoutSet {
		d, err := parseSeconds("--timeout", f.timeout)
		if err != nil {
			return 0, 0, err
		}
		request = float64(d) / float64(time.Millisecond)
	}
	if f.connectTimeSet {
		d, err := parseSeconds("--connect-timeout", f.connectTimeout)
		if err != nil {
			return 0, 0, err
		}
		connect = float64(d) / float64(time.Millisecond)
	}
	return request, connect, nil
}

// probeOpts returns the probe settings of --probe-timeout and -v.
func (f *serverFlags) probeOpts(cmd *cobra.Command) (probeOptions, error) {
	o := probeOptions{verbose: f.verbose, confine: f.confine}
	if cmd.Flags().Changed("probe-timeout") {
		d, err := parseSeconds("--probe-timeout", f.probeTimeout)
		if err != nil {
			return o, err
		}
		o.timeout = d
	}
	return o, nil
}

// probeOrFail probes the entry called name before it is saved and prints
// OpenClaw's failure sentence when it did not answer. On success it prints
// one line summing up what the server offers.
func probeOrFail(cmd *cobra.Command, path, name string, entry *config.Object, o probeOptions) error {
	res := probeServers(cmd.Context(), cmd.ErrOrStderr(), []probeEntry{{name, entry}}, o)[0]
	switch {
	case res.Err != nil:
		return regFail(cmd, fmt.Sprintf("MCP probe failed for %q in %s: %s", regSanitize(name), path, probeMessage(res.Err)))
	case res.Skipped:
		return regFail(cmd, fmt.Sprintf("MCP probe did not connect to %q in %s.", regSanitize(name), path))
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Probed MCP server %q: %s.\n", regSanitize(name), probeSummary(&res))
	return nil
}

// regSaveServer stores entry as name under the registry lock, re-reading
// openclaw.json first; check, when set, runs on the fresh document and may
// refuse. label names the operation in OpenClaw's validation message
// ("set", "configure").
func regSaveServer(cmd *cobra.Command, name string, entry *config.Object, label string, check func(doc *config.Document) error) (*config.Document, error) {
	unlock, err := lockRegistry(cmd)
	if err != nil {
		return nil, err
	}
	defer unlock()
	doc, err := loadRegistry(cmd)
	if err != nil {
		return nil, err
	}
	if check != nil {
		if err := check(doc); err != nil {
			return nil, err
		}
	}
	if err := regSetServer(cmd, doc, name, entry.Clone(), label); err != nil {
		return nil, err
	}
	if err := doc.Save(); err != nil {
		return nil, regFail(cmd, err.Error())
	}
	return doc, nil
}

// regSetServer is doc.SetServer with OpenClaw's failure sentence.
func regSetServer(cmd *cobra.Command, doc *config.Document, name string, entry *config.Object, label string) error {
	if err := doc.SetServer(name, entry); err != nil {
		var ce *config.ConfigError
		if errors.As(err, &ce) {
			return regFail(cmd, fmt.Sprintf("Config invalid after MCP %s (%s).", label, ce.Error()))
		}
		return regFail(cmd, err.Error())
	}
	return nil
}

// addEntry builds the entry of `mcp add` from its flags, in OpenClaw's key
// order (requestTimeoutMs and connectionTimeoutMs where OpenClaw writes
// timeout and connectTimeout).
func addEntry(a *addFlags) (*config.Object, error) {
	command, url := strings.TrimSpace(a.command), strings.TrimSpace(a.url)
	switch {
	case command != "" && url != "":
		return nil, errors.New("Specify either --command for stdio or --url for HTTP, not both.")
	case command == "" && url == "":
		return nil, errors.New("Specify --command for stdio or --url for HTTP.")
	}
	var misplaced []string
	if command != "" {
		for flag, set := range map[string]bool{"--transport": a.transport != "", "--header": len(a.headers) > 0, "--auth": a.auth != "",
			"--oauth-scope": a.oauthScope != "", "--oauth-redirect-url": a.oauthRedirect != "", "--oauth-client-metadata-url": a.oauthClientMetadata != "",
			"--ssl-verify": a.sslVerifySet, "--client-cert": a.clientCert != "", "--client-key": a.clientKey != ""} {
			if set {
				misplaced = append(misplaced, flag)
			}
		}
		if len(misplaced) > 0 {
			return nil, fmt.Errorf("These flags apply to --url (HTTP) servers only: %s.", strings.Join(sortedFlags(misplaced), ", "))
		}
	} else {
		for flag, set := range map[string]bool{"--arg": len(a.args) > 0, "--env": len(a.envs) > 0, "--cwd": a.cwd != ""} {
			if set {
				misplaced = append(misplaced, flag)
			}
		}
		if len(misplaced) > 0 {
			return nil, fmt.Errorf("These flags apply to --command (stdio) servers only: %s.", strings.Join(sortedFlags(misplaced), ", "))
		}
	}
	e := config.NewObject()
	if command != "" {
		e.Set("command", command)
		if len(a.args) > 0 {
			args := make([]any, len(a.args))
			for i, s := range a.args {
				args[i] = s
			}
			e.Set("args", args)
		}
		env, err := parseKeyValues(a.envs, "--env")
		if err != nil {
			return nil, err
		}
		if env != nil {
			e.Set("env", env)
		}
		if cwd := strings.TrimSpace(a.cwd); cwd != "" {
			e.Set("cwd", cwd)
		}
	} else {
		e.Set("url", url)
		if tr := strings.TrimSpace(a.transport); tr != "" {
			e.Set("transport", tr)
		}
		headers, err := parseKeyValues(a.headers, "--header")
		if err != nil {
			return nil, err
		}
		if headers != nil {
			e.Set("headers", headers)
		}
		auth, err := parseAuth(a.auth)
		if err != nil {
			return nil, err
		}
		if auth != "" {
			e.Set("auth", auth)
		}
		if o := a.oauthObject(); o != nil {
			e.Set("oauth", o)
		}
		if a.sslVerifySet {
			v, err := parseBoolFlag("--ssl-verify", a.sslVerify)
			if err != nil {
				return nil, err
			}
			e.Set("sslVerify", v)
		}
		if v := strings.TrimSpace(a.clientCert); v != "" {
			e.Set("clientCert", v)
		}
		if v := strings.TrimSpace(a.clientKey); v != "" {
			e.Set("clientKey", v)
		}
	}
	if a.disabled {
		e.Set("enabled", false)
	}
	if a.parallel {
		e.Set("supportsParallelToolCalls", true)
	}
	req, conn, err := a.timeoutsMs()
	if err != nil {
		return nil, err
	}
	if req > 0 {
		e.Set("requestTimeoutMs", req)
	}
	if conn > 0 {
		e.Set("connectionTimeoutMs", conn)
	}
	if tf := a.toolFilterObject(); tf != nil {
		e.Set("toolFilter", tf)
	}
	return e, nil
}

// sortedFlags sorts flag names for a stable message.
func sortedFlags(flags []string) []string {
	config.SortLocale(flags)
	return flags
}

// addFlags are the inputs of `mcp add`.
type addFlags struct {
	serverFlags
	command, cwd, url, transport string
	args                         []string
	disabled, noProbe, force     bool
}

func newMCPAddCmd() *cobra.Command {
	var a addFlags
	cmd := &cobra.Command{
		Use:   "add <name> (--command CMD [--arg A]... [--env K=V]... [--cwd DIR] | --url URL [--transport sse|streamable-http] [--header K=V]...)",
		Short: "Add one MCP server from flags and probe it before saving",
		Long: `Add builds an mcp.servers entry from flags, normalizes and validates it like
"openclaw mcp set", connects to it and lists its tools (unless --no-probe, --disabled or
--auth oauth), and only then saves it to openclaw.json (indented JSON, rotating backups). A name
that already exists is refused unless --force replaces it. --timeout and --connect-timeout are
in seconds and are stored as requestTimeoutMs and connectionTimeoutMs.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.changed(cmd)
			name := strings.TrimSpace(args[0])
			if name == "" {
				return regFail(cmd, "MCP server name is required.")
			}
			entry, err := addEntry(&a)
			if err != nil {
				return regFail(cmd, err.Error())
			}
			po, err := a.probeOpts(cmd)
			if err != nil {
				return regFail(cmd, err.Error())
			}
			exists := func(doc *config.Document) error {
				if _, ok := doc.Server(name); ok && !a.force {
					return regFail(cmd, fmt.Sprintf("MCP server %q already exists in %s. Use --force to replace it, or openclaw mcp configure %s to change it.", regSanitize(name), doc.Path, regSanitize(name)))
				}
				return nil
			}
			// Validate and probe before taking the lock: a probe may take
			// up to the connection timeout, and nothing is written yet.
			doc, err := loadRegistry(cmd)
			if err != nil {
				return err
			}
			if err := exists(doc); err != nil {
				return err
			}
			if err := regSetServer(cmd, doc, name, entry.Clone(), "set"); err != nil {
				return err
			}
			normalized, _ := doc.Server(name)
			regWarnBlockedEnv(cmd.ErrOrStderr(), singleServer(name, normalized))
			regWarnKeyTypos(cmd.ErrOrStderr(), nil, singleServer(name, normalized))
			if !a.noProbe && !a.disabled && !isOAuth(normalized) {
				if err := probeOrFail(cmd, doc.Path, name, normalized, po); err != nil {
					return err
				}
			}
			doc, err = regSaveServer(cmd, name, entry, "set", exists)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Saved MCP server %q to %s.\n", name, doc.Path)
			if isOAuth(normalized) {
				fmt.Fprintf(out, "Run openclaw mcp login %s to authorize this MCP server.\n", regSanitize(name))
			}
			return nil
		},
	}
	a.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&a.command, "command", "", "Stdio command to spawn")
	fl.StringArrayVar(&a.args, "arg", nil, "Repeatable stdio argument")
	fl.StringVar(&a.cwd, "cwd", "", "Working directory for stdio server")
	fl.StringVar(&a.url, "url", "", "HTTP MCP server URL")
	fl.StringVar(&a.transport, "transport", "", "HTTP transport: streamable-http or sse (default sse)")
	fl.BoolVar(&a.disabled, "disabled", false, "Save the server disabled (also --disable, as configure spells it)")
	fl.SetNormalizeFunc(flagAliases(map[string]string{"disable": "disabled"}))
	fl.BoolVar(&a.noProbe, "no-probe", false, "Save without connecting first")
	fl.BoolVar(&a.force, "force", false, "Replace an existing server of that name")
	return cmd
}

// singleServer is an mcp.servers object holding one entry.
func singleServer(name string, e *config.Object) *config.Object {
	o := config.NewObject()
	if e != nil {
		o.Set(name, e)
	}
	return o
}

func isOAuth(e *config.Object) bool {
	if e == nil {
		return false
	}
	v, _ := e.Get("auth")
	return v == "oauth"
}
