package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/runtime"
	"github.com/openclaw-go/openclaw/transport"
)

// `openclaw mcp login <name>` and `openclaw mcp logout <name>`: OAuth for
// the HTTP servers of mcp.servers with auth "oauth" (reference §11.2). The
// flow itself is transport.Login (go-sdk's discovery, registration and
// authorization code flow with PKCE); tokens live in
// <state dir>/mcp-oauth, where the runtime (`mcp tools`, `mcp call`, `mcp
// proxy`) finds and refreshes them.

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
func oauthServer(cmd *cobra.Command, name string) (transport.ServerEntry, *config.Object, error) {
	doc, err := loadRegistry(cmd)
	if err != nil {
		return transport.ServerEntry{}, nil, err
	}
	obj, ok := doc.Server(name)
	if !ok {
		return transport.ServerEntry{}, nil, regFail(cmd, fmt.Sprintf("No MCP server named %q in %s. %s", name, doc.Path, hintListServers))
	}
	r, err := config.ResolveServer(name, obj)
	if err != nil {
		return transport.ServerEntry{}, nil, regFail(cmd, fmt.Sprintf("MCP server %q: %v", name, err))
	}
	if r.Transport == config.TransportStdio {
		return transport.ServerEntry{}, nil, regFail(cmd, fmt.Sprintf("MCP server %q is a stdio server: OAuth login applies to HTTP servers (url).", name))
	}
	if !r.OAuth {
		return transport.ServerEntry{}, nil, regFail(cmd, fmt.Sprintf(`MCP server %q does not use OAuth: set "auth": "oauth" in its entry first (openclaw mcp set).`, name))
	}
	oauth, _ := obj.Get("oauth")
	block, _ := oauth.(*config.Object)
	return runtime.ServerFromConfig(r).Entry, block, nil
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

// loginConfig holds the flags of `mcp login`.
type loginConfig struct {
	timeout     time.Duration
	open        bool
	redirectURL string
	verbose     bool
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
The tokens are stored under <state dir>/mcp-oauth (mode 0600) and refreshed when they expire.`,
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
	return cmd
}

func runLogin(cmd *cobra.Command, name string, c *loginConfig) error {
	entry, block, err := oauthServer(cmd, name)
	if err != nil {
		return err
	}
	if oauthString(block, "identity") == "per-requester" {
		return regFail(cmd, fmt.Sprintf(`MCP server %q uses the "per-requester" OAuth identity, which openclaw-go does not support yet: each requester logs in through OpenClaw.`, name))
	}
	store, err := oauthTokenStore()
	if err != nil {
		return regFail(cmd, err.Error())
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
		OAuth:  &transport.OAuthOptions{Store: store},
	})
	if err != nil {
		return regFail(cmd, fmt.Sprintf("MCP login for %q failed: %s", name, transport.RedactText(err.Error())))
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

func newMCPLogoutCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "logout <name>",
		Short: "Delete the stored OAuth tokens of an MCP server",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			entry, _, err := oauthServer(cmd, name)
			if err != nil {
				return err
			}
			store, err := oauthTokenStore()
			if err != nil {
				return regFail(cmd, err.Error())
			}
			had, err := transport.Logout(name, entry.URL, store, nil)
			if err != nil {
				return regFail(cmd, err.Error())
			}
			if had {
				fmt.Fprintf(cmd.OutOrStdout(), "Logged out of MCP server %q.\n", name)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "No stored OAuth credentials for MCP server %q.\n", name)
			}
			return nil
		},
	}
}
