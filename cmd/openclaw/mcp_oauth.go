package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/openclaw-go/openclaw/internal/redact"
	"github.com/openclaw-go/openclaw/proxy/sharedstate"

	"github.com/spf13/cobra"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/transport"
)

// `openclaw mcp login <name> [--principal ID]` and `openclaw mcp logout
// <name> [--principal ID|--all]`: OAuth for the HTTP servers of mcp.servers
// with auth "oauth" (docs/protocol-facts.md, mcp.servers entry schema). The flow itself is transport.Login
// (go-sdk's discovery, registration and authorization code flow with PKCE);
// tokens live in <state dir>/mcp-oauth, where the runtime (`mcp tools`, `mcp
// call`, `mcp proxy`) finds and refreshes them: one set per server, or per
// (server, principal) for oauth.identity "per-requester". This file also
// holds the OAuth view `mcp list`, `status` and `doctor` print (oauthView),
// read from the store without connecting. oauth.authProfileId names a
// credential in OpenClaw's auth-profile store, which openclaw-go does not
// have: login refuses such a server and doctor reports it as an error.

// defaultLoginTimeout bounds the whole login, the user's visit to the
// authorization page included.
const defaultLoginTimeout = 5 * time.Minute

// oauthTokenStore is the store login writes and the runtime reads
// (transport.DefaultTokenDir follows the same rule as config.StateDir).
func oauthTokenStore() (*transport.TokenStore, error) {
	dir, err := config.StateDir()
	if err != nil {
		return nil, err
	}
	return transport.NewTokenStore(filepath.Join(dir, "mcp-oauth")), nil
}

// oauthServer looks up name in mcp.servers and checks it is an HTTP server
// with auth "oauth"; it returns the entry as the transport reads it and
// its oauth block.
func oauthServer(cmd *cobra.Command, name string) (config.ServerEntry, *config.Object, error) {
	doc, err := loadRegistry(cmd)
	if err != nil {
		return config.ServerEntry{}, nil, err
	}
	obj, ok := doc.Server(name)
	if !ok {
		return config.ServerEntry{}, nil, regFail(cmd, fmt.Sprintf("No MCP server named %q in %s. %s", name, doc.Path, hintListServers))
	}
	r, err := config.ResolveServer(name, obj)
	if err != nil {
		return config.ServerEntry{}, nil, regFail(cmd, fmt.Sprintf("MCP server %q: %v", name, err))
	}
	if r.Transport == config.TransportStdio {
		return config.ServerEntry{}, nil, regFail(cmd, fmt.Sprintf("MCP server %q is a stdio server: OAuth login applies to HTTP servers (url).", name))
	}
	if !r.OAuth {
		return config.ServerEntry{}, nil, regFail(cmd, fmt.Sprintf(`MCP server %q does not use OAuth: set "auth": "oauth" in its entry first (openclaw mcp set).`, name))
	}
	oauth, _ := obj.Get("oauth")
	block, _ := oauth.(*config.Object)
	return r.Entry, block, nil
}

// oauthString is a string key of the oauth block ("" when absent).
func oauthString(block *config.Object, key string) string {
	if block == nil {
		return ""
	}
	v, _ := block.Get(key)
	s, _ := v.(string)
	return s
}

// oauthIdentityOf reads the entry's oauth block: whether it uses the
// per-requester identity, and its authProfileId ("" when absent).
func oauthIdentityOf(block *config.Object) (perRequester bool, profile string) {
	return oauthString(block, "identity") == "per-requester", oauthString(block, "authProfileId")
}

// profileRefusal is why openclaw-go cannot log in to (or connect) a server
// whose credentials come from an OpenClaw auth profile.
func profileRefusal(name, profile string) string {
	return fmt.Sprintf(`MCP server %q takes its OAuth credentials from OpenClaw auth profile %q (oauth.authProfileId). openclaw-go has no auth-profile store: remove oauth.authProfileId to log in with "openclaw mcp login %s" instead.`, name, profile, name)
}

// loginConfig holds the flags of `mcp login`.
type loginConfig struct {
	timeout     time.Duration
	open        bool
	redirectURL string
	verbose     bool
	principal   string
	state       stateFlags
	importFiles bool
}

func newMCPLoginCmd() *cobra.Command {
	var c loginConfig
	cmd := &cobra.Command{
		Use:   "login <name>",
		Short: "Log in to an OAuth-protected MCP server (auth: \"oauth\") and store its tokens",
		Long: `Runs the OAuth authorization code flow with PKCE for the mcp.servers entry <name>:
discovers the server's authorization server, registers this client (oauth.clientMetadataUrl,
or dynamic client registration), prints the authorization URL on stderr and waits for the
browser's redirect to a loopback URL (oauth.redirectUrl, or 127.0.0.1 on a free port).
The tokens are stored under <state dir>/mcp-oauth (mode 0600) and refreshed when they expire.

A server with "oauth": {"identity": "per-requester"} keeps one set of tokens per principal:
log each principal in with --principal <id>; the runtime sends the tokens of the principal
that makes each request (transport.WithPrincipal). With --state redis://… and
--request-state-key-file (those of the mcp proxy replicas) a principal's tokens go to Redis,
encrypted, for every replica; --import copies the tokens already in files there instead of
logging in (one principal with --principal, else all of the server's). A server with
oauth.authProfileId takes its credentials from OpenClaw's auth-profile store, which openclaw-go
does not have: login refuses it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLogin(cmd, args[0], &c)
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&c.timeout, "timeout", defaultLoginTimeout, "how long to wait for the whole login, the browser's redirect included")
	fl.BoolVar(&c.open, "open", false, "open the authorization URL in the default browser (xdg-open / open)")
	fl.StringVar(&c.redirectURL, "redirect-url", "", "loopback redirect URL to listen on (default: oauth.redirectUrl, else http://127.0.0.1:<free port>/oauth/callback)")
	fl.BoolVarP(&c.verbose, "verbose", "v", false, "log the flow's steps on stderr")
	fl.StringVar(&c.principal, "principal", "", `principal whose tokens to store (servers with "identity": "per-requester" only)`)
	c.state.flags(cmd)
	fl.BoolVar(&c.importFiles, "import", false, "with --state: copy the principals' tokens stored in files into Redis instead of logging in")
	return cmd
}

func runLogin(cmd *cobra.Command, name string, c *loginConfig) error {
	entry, block, err := oauthServer(cmd, name)
	if err != nil {
		return err
	}
	perRequester, profile := oauthIdentityOf(block)
	switch {
	case profile != "":
		return regFail(cmd, profileRefusal(name, profile))
	case perRequester && c.principal == "" && !c.importFiles:
		return regFail(cmd, fmt.Sprintf(`MCP server %q uses the "per-requester" OAuth identity: name the principal whose tokens to store with --principal <id>.`, name))
	case !perRequester && c.principal != "":
		return regFail(cmd, fmt.Sprintf(`MCP server %q uses the shared OAuth identity: --principal applies to servers with "oauth": {"identity": "per-requester"}.`, name))
	}
	tokens, where, closeTokens, err := c.state.open(name, perRequester)
	if err != nil {
		return regFail(cmd, err.Error())
	}
	if tokens != nil {
		defer closeTokens()
	}
	if c.importFiles {
		return runImport(cmd, name, entry.URL, c.principal, tokens, where)
	}
	store, err := oauthTokenStore()
	if err != nil {
		return regFail(cmd, err.Error())
	}
	oauth := &transport.OAuthOptions{Store: store, Principal: c.principal}
	if tokens != nil {
		oauth.Backend = tokens
	}
	stderr := cmd.ErrOrStderr()
	redirect := c.redirectURL
	if redirect == "" {
		redirect = oauthString(block, "redirectUrl")
	}
	flow := &transport.OAuthFlow{
		Scope:             oauthString(block, "scope"),
		RedirectURL:       redirect,
		ClientMetadataURL: oauthString(block, "clientMetadataUrl"),
		OnAuthURL: func(u string) {
			fmt.Fprintf(stderr, "Open this URL in a browser to authorize MCP server %q:\n\n  %s\n\nWaiting for the redirect (up to %v)...\n", name, u, c.timeout)
			if c.open {
				openBrowser(cmd.Context(), stderr, u)
			}
		},
	}
	level := slog.LevelWarn
	if c.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	ctx, cancel := context.WithTimeout(cmd.Context(), c.timeout)
	defer cancel()
	_, err = transport.Login(ctx, name, entry, flow, &transport.Options{
		Logger: log,
		OAuth:  oauth,
	})
	if err != nil {
		return regFail(cmd, fmt.Sprintf("MCP login for %q failed: %s", name, redact.Text(err.Error())))
	}
	switch {
	case tokens != nil:
		fmt.Fprintf(cmd.OutOrStdout(), "Logged in to MCP server %q as principal %q, for every mcp proxy replica on %s.\n", name, c.principal, where)
		return nil
	case c.principal != "":
		fmt.Fprintf(cmd.OutOrStdout(), "Logged in to MCP server %q as principal %q.\n", name, c.principal)
		return nil
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Logged in to MCP server %q.\n", name)
	return nil
}

// openBrowser asks the desktop to open u, and says so when it cannot.
func openBrowser(ctx context.Context, stderr io.Writer, u string) {
	opener := "xdg-open"
	if goruntime.GOOS == "darwin" {
		opener = "open"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := exec.CommandContext(ctx, opener, u).Run(); err != nil {
		fmt.Fprintf(stderr, "Could not open a browser (%s: %v); open the URL yourself.\n", opener, err)
	}
}

// runImport is `mcp login <name> --import --state …`: the file tokens
// of principal (all principals when "") copied into tokens.
func runImport(cmd *cobra.Command, name, u, principal string, tokens *sharedstate.OAuthTokens, where string) error {
	if tokens == nil {
		return regFail(cmd, "--import copies the tokens in files into the Redis of the mcp proxy replicas: give --state and --request-state-key-file")
	}
	done, err := importTokens(cmd.Context(), tokens, name, u, principal)
	if err != nil {
		return regFail(cmd, fmt.Sprintf("MCP login --import for %q failed after %d principal%s: %s", name, len(done), plural(len(done)), err))
	}
	if len(done) == 0 {
		return regFail(cmd, fmt.Sprintf("No principal of MCP server %q has OAuth credentials in files to import.", name))
	}
	quoted := make([]string, len(done))
	for i, p := range done {
		quoted[i] = fmt.Sprintf("%q", p)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Imported the OAuth credentials of %d principal%s of MCP server %q (%s) into %s.\n", len(done), plural(len(done)), name, strings.Join(quoted, ", "), where)
	return nil
}

func newMCPLogoutCmd() *cobra.Command {
	var principal string
	var all bool
	var state stateFlags
	cmd := &cobra.Command{
		Use:   "logout <name>",
		Short: "Delete the stored OAuth tokens of an MCP server (of one principal, or all)",
		Long: `Deletes the OAuth tokens "openclaw mcp login" stored for <name>. For a server with
"oauth": {"identity": "per-requester"}, name the principal with --principal <id>, or use --all
to delete the tokens of every principal. --all on any server deletes all its stored tokens.
With --state and --request-state-key-file (those of the mcp proxy replicas) the tokens of a
per-requester server are deleted from Redis instead, for every replica.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLogout(cmd, args[0], principal, all, state)
		},
	}
	cmd.Flags().StringVar(&principal, "principal", "", `principal whose tokens to delete (servers with "identity": "per-requester")`)
	cmd.Flags().BoolVar(&all, "all", false, "delete the tokens of every principal and the shared ones")
	cmd.MarkFlagsMutuallyExclusive("principal", "all")
	state.flags(cmd)
	return cmd
}

func runLogout(cmd *cobra.Command, name, principal string, all bool, state stateFlags) error {
	entry, block, err := oauthServer(cmd, name)
	if err != nil {
		return err
	}
	perRequester, _ := oauthIdentityOf(block)
	switch {
	case perRequester && principal == "" && !all:
		return regFail(cmd, fmt.Sprintf(`MCP server %q uses the "per-requester" OAuth identity: name the principal to log out with --principal <id>, or use --all.`, name))
	case !perRequester && principal != "":
		return regFail(cmd, fmt.Sprintf(`MCP server %q uses the shared OAuth identity: --principal applies to servers with "oauth": {"identity": "per-requester"}.`, name))
	}
	tokens, _, closeTokens, err := state.open(name, perRequester)
	if err != nil {
		return regFail(cmd, err.Error())
	}
	store, err := oauthTokenStore()
	if err != nil {
		return regFail(cmd, err.Error())
	}
	deleteAll := func() (int, error) { return store.DeleteAll(name, entry.URL) }
	deleteOne := func() (bool, error) { return store.DeletePrincipal(name, entry.URL, principal) }
	if tokens != nil {
		defer closeTokens()
		deleteAll = func() (int, error) { return tokens.DeleteAll(cmd.Context(), name, entry.URL) }
		deleteOne = func() (bool, error) { return tokens.DeleteToken(cmd.Context(), name, entry.URL, principal) }
	}
	out := cmd.OutOrStdout()
	if all {
		n, err := deleteAll()
		if err != nil {
			return regFail(cmd, err.Error())
		}
		if n == 0 {
			fmt.Fprintf(out, "No stored OAuth credentials for MCP server %q.\n", name)
			return nil
		}
		fmt.Fprintf(out, "Logged out of MCP server %q: deleted %d set%s of OAuth credentials.\n", name, n, plural(n))
		return nil
	}
	had, err := deleteOne()
	if err != nil {
		return regFail(cmd, err.Error())
	}
	switch {
	case principal != "" && had:
		fmt.Fprintf(out, "Logged out principal %q of MCP server %q.\n", principal, name)
	case principal != "":
		fmt.Fprintf(out, "No stored OAuth credentials for principal %q of MCP server %q.\n", principal, name)
	case had:
		fmt.Fprintf(out, "Logged out of MCP server %q.\n", name)
	default:
		fmt.Fprintf(out, "No stored OAuth credentials for MCP server %q.\n", name)
	}
	return nil
}

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// oauthView is the OAuth side of one HTTP mcp.servers entry with auth
// "oauth", read from the token store without connecting, as `mcp list`,
// `status` and `doctor` show it.
type oauthView struct {
	// perRequester is oauth.identity "per-requester"; principals is then
	// how many principals have tokens stored.
	perRequester bool
	principals   int
	// profile is oauth.authProfileId.
	profile string
	// status is the state of the shared tokens (not per-requester).
	status transport.AuthStatus
	// err is why the store could not be read.
	err error
}

// oauthViewOf reads the OAuth state of entry e (resolved as r); ok is
// false unless e has auth "oauth" and an HTTP transport, like OpenClaw's
// status and doctor.
func oauthViewOf(name string, e *config.Object, r *config.ResolvedServer) (v oauthView, ok bool) {
	if a, _ := e.Get("auth"); a != "oauth" || r == nil || r.Transport == config.TransportStdio {
		return v, false
	}
	oauth, _ := e.Get("oauth")
	block, _ := oauth.(*config.Object)
	v.perRequester, v.profile = oauthIdentityOf(block)
	store, err := oauthTokenStore()
	if err != nil {
		v.err = err
		return v, true
	}
	if v.perRequester {
		ps, err := store.Principals(name, r.URL)
		v.principals, v.err = len(ps), err
		return v, true
	}
	c, err := store.Load(name, r.URL)
	v.status, v.err = transport.StatusOf(c, time.Now()), err
	return v, true
}

// listSuffix is what `mcp list` adds after the name: OpenClaw's
// " (<n> connected principal[s])" for per-requester servers.
func (v oauthView) listSuffix() string {
	if !v.perRequester {
		return ""
	}
	return fmt.Sprintf(" (%d connected principal%s)", v.principals, plural(v.principals))
}

// statusFlags is what the `mcp status` line adds after " oauth":
// " authorized", our " expired", or OpenClaw's " <n>-principal[s]-connected".
func (v oauthView) statusFlags() string {
	if v.perRequester {
		return fmt.Sprintf(" %d-principal%s-connected", v.principals, plural(v.principals))
	}
	switch v.status.State {
	case transport.AuthAuthorized:
		return " authorized"
	case transport.AuthExpired:
		return " expired"
	}
	return ""
}

// verboseLine is the text after "  oauth: " in `mcp status -v`.
func (v oauthView) verboseLine(name string) string {
	switch {
	case v.err != nil:
		return "token store unreadable: " + v.err.Error()
	case v.profile != "":
		return fmt.Sprintf("auth profile %q (OpenClaw's auth-profile store; not supported by openclaw-go)", v.profile)
	case v.perRequester:
		return fmt.Sprintf("per-requester, connected principals: %d", v.principals)
	}
	st := v.status
	switch {
	case st.State == transport.AuthAuthorized && !st.ExpiresAt.IsZero():
		return "authorized (expires " + st.ExpiresAt.UTC().Format(time.RFC3339) + ")"
	case st.State == transport.AuthAuthorized:
		return "authorized"
	case st.State == transport.AuthExpired && st.Refreshable:
		return "expired (refreshable)"
	case st.State == transport.AuthExpired:
		return "expired (not refreshable: run openclaw mcp login " + name + ")"
	}
	return "unauthenticated (run openclaw mcp login " + name + ")"
}

// statusJSON sets the OAuth keys of one `mcp status --json` row: OpenClaw's
// connectedPrincipals for per-requester servers, else authStatus with
// OpenClaw's hasTokens, hasClientInformation, state and expiresAt (epoch
// ms) and our refreshable; authProfileId when set.
func (v oauthView) statusJSON(row *config.Object) {
	if v.profile != "" {
		row.Set("authProfileId", v.profile)
	}
	if v.perRequester {
		row.Set("connectedPrincipals", float64(v.principals))
		return
	}
	st := v.status
	a := config.NewObject()
	a.Set("hasTokens", st.State != transport.AuthUnauthenticated)
	a.Set("hasClientInformation", st.HasClient)
	a.Set("state", string(st.State))
	if !st.ExpiresAt.IsZero() {
		a.Set("expiresAt", float64(st.ExpiresAt.UnixMilli()))
	}
	a.Set("refreshable", st.Refreshable)
	row.Set("authStatus", a)
}

// doctorIssues are the OAuth findings of `mcp doctor`: OpenClaw's warning
// when the shared tokens need a login, ours for expired tokens without a
// refresh token, an unreadable store, an auth profile (an error: openclaw-go
// cannot use such a server) and a per-requester server nobody logged in to
// (info).
func (v oauthView) doctorIssues(name string) []regDoctorIssue {
	switch {
	case v.err != nil:
		return []regDoctorIssue{{"error", "OAuth token store unreadable: " + v.err.Error()}}
	case v.profile != "":
		return []regDoctorIssue{{"error", fmt.Sprintf("oauth.authProfileId %q names an OpenClaw auth profile; openclaw-go has no auth-profile store and cannot authorize this server", v.profile)}}
	case v.perRequester && v.principals == 0:
		return []regDoctorIssue{{"info", "per-requester OAuth: no principal has logged in yet; run openclaw mcp login " + name + " --principal <id>"}}
	case v.perRequester:
		return nil
	case v.status.State == transport.AuthUnauthenticated:
		return []regDoctorIssue{{"warning", "OAuth credentials are not authorized; run openclaw mcp login " + name}}
	case v.status.NeedsLogin():
		return []regDoctorIssue{{"warning", "OAuth credentials have expired and cannot be refreshed; run openclaw mcp login " + name}}
	}
	return nil
}
