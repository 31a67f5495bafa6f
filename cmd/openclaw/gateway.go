package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/openclaw-go/openclaw/bridge/gwclient"
	"github.com/openclaw-go/openclaw/gateway"
	"github.com/spf13/cobra"
)

// newGatewayCmd is the `openclaw gateway` command group (local Gateway).
func newGatewayCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "gateway", Short: "Run and drive a local OpenClaw-protocol Gateway"}
	cmd.AddCommand(newGatewayRunCmd(), newGatewayInjectCmd(), newGatewayApprovalCmd(), newGatewaySeedCmd())
	return cmd
}

// gatewayRunConfig is what `gateway run` flags bind to.
type gatewayRunConfig struct {
	port                int
	bind                string
	token, tokenFile    string
	password            string
	stateDir            string
	seed                string
	tickInterval        time.Duration
	unsupportedChannels []string
	verbose             bool
}

func newGatewayRunCmd() *cobra.Command {
	var c gatewayRunConfig
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Serve the local Gateway (WebSocket at ws://HOST:PORT, admin API on the same port)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGateway(cmd.Context(), &c, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.IntVar(&c.port, "port", gateway.DefaultPort, "TCP port")
	f.StringVar(&c.bind, "bind", "loopback", `address to bind: "loopback" (127.0.0.1), "all" (0.0.0.0) or an IP address`)
	f.StringVar(&c.token, "token", "", "gateway token (default $OPENCLAW_GATEWAY_TOKEN; generated and printed when no token or password is set)")
	f.StringVar(&c.tokenFile, "token-file", "", "read the gateway token from this file")
	f.StringVar(&c.password, "password", "", "also accept this password (default $OPENCLAW_GATEWAY_PASSWORD)")
	f.StringVar(&c.stateDir, "state-dir", "", "where sessions and transcripts persist (default $OPENCLAW_GO_STATE_DIR, else ~/.openclaw-go/gateway; \"none\" keeps them in memory)")
	f.StringVar(&c.seed, "seed", "", `seed to apply at start: "demo" or a seed JSON file`)
	f.DurationVar(&c.tickInterval, "tick-interval", gateway.DefaultTickInterval, "tick event period (hello-ok policy.tickIntervalMs)")
	f.StringSliceVar(&c.unsupportedChannels, "unsupported-channels", nil, `channels whose send fails with "unsupported channel: X", like a real Gateway without that plugin ("*" for all)`)
	f.BoolVarP(&c.verbose, "verbose", "v", false, "log connections and requests on stderr")
	return cmd
}

func runGateway(ctx context.Context, c *gatewayRunConfig, stderr io.Writer) error {
	token, err := resolveSecret(c.token, c.tokenFile, "OPENCLAW_GATEWAY_TOKEN")
	if err != nil {
		return err
	}
	password := c.password
	if password == "" {
		password = os.Getenv("OPENCLAW_GATEWAY_PASSWORD")
	}
	stateDir, err := resolveStateDir(c.stateDir)
	if err != nil {
		return err
	}
	host, err := bindHost(c.bind)
	if err != nil {
		return err
	}
	level := slog.LevelWarn
	if c.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	srv, err := gateway.New(&gateway.Options{Token: token, Password: password, StateDir: stateDir,
		TickInterval: c.tickInterval, UnsupportedChannels: c.unsupportedChannels, Logger: logger})
	if err != nil {
		return err
	}
	if c.seed != "" {
		sd, err := loadSeed(c.seed)
		if err != nil {
			return err
		}
		res, err := srv.ApplySeed(ctx, sd)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "[gateway] seeded %d sessions, %d new messages (%d already present)\n", res.Sessions, res.Messages, res.Skipped)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(c.port)))
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if token == "" && password == "" {
		fmt.Fprintf(stderr, "[gateway] generated token %s (pass --token or set OPENCLAW_GATEWAY_TOKEN to choose one)\n", srv.Token())
	}
	where := "in memory"
	if stateDir != "" {
		where = stateDir
	}
	fmt.Fprintf(stderr, "[gateway] state %s\n", where)
	fmt.Fprintf(stderr, "[gateway] ready on ws://%s\n", ln.Addr())
	err = srv.Serve(ctx, ln)
	fmt.Fprintln(stderr, "[gateway] stopped")
	return err
}

func bindHost(bind string) (string, error) {
	switch bind {
	case "", "loopback":
		return "127.0.0.1", nil
	case "all":
		return "0.0.0.0", nil
	}
	if net.ParseIP(bind) == nil {
		return "", fmt.Errorf("--bind %q: want loopback, all or an IP address", bind)
	}
	return bind, nil
}

func resolveStateDir(flag string) (string, error) {
	switch {
	case flag == "none":
		return "", nil
	case flag != "":
		return flag, nil
	case os.Getenv("OPENCLAW_GO_STATE_DIR") != "":
		return os.Getenv("OPENCLAW_GO_STATE_DIR"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("gateway: no --state-dir and no home directory: %w", err)
	}
	return filepath.Join(home, ".openclaw-go", "gateway"), nil
}

// resolveSecret picks the flag value, else the file's trimmed content,
// else the environment variable.
func resolveSecret(flag, file, env string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("reading token file: %w", err)
		}
		warnReadableSecretFile(os.Stderr, "--token-file", file)
		return strings.TrimSpace(string(data)), nil
	}
	return os.Getenv(env), nil
}

func loadSeed(arg string) (*gateway.Seed, error) {
	if arg == "demo" {
		return gateway.DemoSeed(), nil
	}
	data, err := os.ReadFile(arg)
	if err != nil {
		return nil, fmt.Errorf("reading seed: %w", err)
	}
	return gateway.ParseSeed(data)
}

// gatewayClientFlags are the flags of the commands that call a running
// Gateway's admin API.
type gatewayClientFlags struct {
	url, token, tokenFile string
}

func (g *gatewayClientFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&g.url, "url", "", "Gateway URL (default $OPENCLAW_GATEWAY_URL, else ws://127.0.0.1:18789)")
	f.StringVar(&g.token, "token", "", "gateway token (default $OPENCLAW_GATEWAY_TOKEN)")
	f.StringVar(&g.tokenFile, "token-file", "", "read the gateway token from this file")
}

func (g *gatewayClientFlags) client() (*gateway.AdminClient, error) {
	url := g.url
	if url == "" {
		url = os.Getenv("OPENCLAW_GATEWAY_URL")
	}
	if url == "" {
		url = fmt.Sprintf("ws://127.0.0.1:%d", gateway.DefaultPort)
	}
	// The admin API carries the Gateway token: the same plaintext rule
	// as `mcp serve`.
	if err := gwclient.CheckSecureURL(url, os.Getenv(gwclient.EnvAllowInsecurePrivateWS) == "1"); err != nil {
		return nil, err
	}
	token, err := resolveSecret(g.token, g.tokenFile, "OPENCLAW_GATEWAY_TOKEN")
	if err != nil {
		return nil, err
	}
	if token == "" {
		return nil, errors.New("no gateway token: pass --token or --token-file, or set OPENCLAW_GATEWAY_TOKEN")
	}
	return gateway.NewAdminClient(url, token, nil)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newGatewayInjectCmd() *cobra.Command {
	var g gatewayClientFlags
	var req gateway.InjectRequest
	var route gateway.Route
	cmd := &cobra.Command{
		Use:   "inject --session KEY --text TEXT",
		Short: "Deliver an inbound message to a running Gateway, as a channel would",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if route.Channel != "" || route.To != "" {
				if route.Channel == "" || route.To == "" {
					return errors.New("--channel and --to go together")
				}
				req.Route = &route
			}
			ac, err := g.client()
			if err != nil {
				return err
			}
			res, err := ac.Inject(cmd.Context(), req)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), res)
		},
	}
	g.register(cmd)
	f := cmd.Flags()
	f.StringVar(&req.SessionKey, "session", "", "session key, for example agent:main:main (created when missing)")
	f.StringVar(&req.Text, "text", "", "message text")
	f.StringVar(&req.Role, "role", "user", "user (inbound) or assistant")
	f.BoolVar(&req.SenderIsOwner, "owner", false, "mark the sender as the owner (senderIsOwner:true)")
	f.StringVar(&req.DisplayName, "display-name", "", "session display name")
	f.StringVar(&route.Channel, "channel", "", "route channel, for example imessage")
	f.StringVar(&route.To, "to", "", "route recipient")
	f.StringVar(&route.AccountID, "account", "", "route account id")
	f.StringVar(&route.ThreadID, "thread", "", "route thread id")
	cmd.MarkFlagRequired("session")
	cmd.MarkFlagRequired("text")
	return cmd
}

func newGatewayApprovalCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "approval", Short: "Raise an exec or plugin approval request on a running Gateway"}
	for _, k := range []struct{ kind, named, use, long string }{
		{"exec", "an exec", "exec --command CMD [flags]",
			"Raise an exec approval request on a running Gateway and print its answer: the acceptance, or with\n" +
				"--wait the decision. --command is required; --id picks the approval id (default: a new UUID)."},
		{"plugin", "a plugin", "plugin --plugin-id ID --title TEXT --description TEXT [flags]",
			"Raise a plugin approval request on a running Gateway and print its answer: the acceptance, or with\n" +
				"--wait the decision. --plugin-id, --title and --description are required. There is no --id: as in\n" +
				"OpenClaw, the Gateway names every plugin approval itself (plugin:<uuid>) and prints the id it chose."},
	} {
		kind := k.kind
		var g gatewayClientFlags
		var req gateway.ApprovalRequest
		var timeout time.Duration
		sub := &cobra.Command{
			Use:   k.use,
			Short: "Raise " + k.named + " approval request and print the Gateway's answer",
			Long:  k.long,
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				req.Kind = kind
				req.TimeoutMs = timeout.Milliseconds()
				ac, err := g.client()
				if err != nil {
					return err
				}
				raw, err := ac.RequestApproval(cmd.Context(), req)
				if err != nil {
					return err
				}
				var out bytes.Buffer
				if err := json.Indent(&out, raw, "", "  "); err != nil {
					return fmt.Errorf("gateway answered invalid JSON: %w", err)
				}
				out.WriteByte('\n')
				_, err = out.WriteTo(cmd.OutOrStdout())
				return err
			},
		}
		g.register(sub)
		f := sub.Flags()
		if kind == "exec" {
			f.StringVar(&req.ID, "id", "", "approval id (default: a new UUID)")
			f.StringVar(&req.Command, "command", "", "the command awaiting approval (required)")
			f.StringVar(&req.Cwd, "cwd", "", "its working directory")
			f.StringVar(&req.Host, "host", "gateway", "where it would run")
			sub.MarkFlagRequired("command")
		} else {
			f.StringVar(&req.PluginID, "plugin-id", "", "plugin id (required)")
			f.StringVar(&req.Title, "title", "", "title (required)")
			f.StringVar(&req.Description, "description", "", "description (required)")
			f.StringVar(&req.Severity, "severity", "", "severity")
			f.StringVar(&req.ToolName, "tool-name", "", "tool name")
			sub.MarkFlagRequired("plugin-id")
			sub.MarkFlagRequired("title")
			sub.MarkFlagRequired("description")
		}
		f.StringVar(&req.SessionKey, "session", "", "session key the request belongs to")
		f.StringVar(&req.AgentID, "agent", "", "agent id")
		f.DurationVar(&timeout, "timeout", 0, "expiry (default: 30m for exec, 2m for plugin)")
		f.StringVar(&req.RequestedByDeviceID, "device-id", "", "show the request only to connections with this device id")
		f.BoolVar(&req.Wait, "wait", false, "wait for the decision instead of printing the acceptance")
		cmd.AddCommand(sub)
	}
	return cmd
}

func newGatewaySeedCmd() *cobra.Command {
	var g gatewayClientFlags
	cmd := &cobra.Command{
		Use:   "seed FILE|demo",
		Short: "Add seeded sessions and transcripts to a running Gateway (idempotent)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var sd *gateway.Seed
			if args[0] != "demo" {
				var err error
				if sd, err = loadSeed(args[0]); err != nil {
					return err
				}
			}
			ac, err := g.client()
			if err != nil {
				return err
			}
			res, err := ac.Seed(cmd.Context(), sd)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), res)
		},
	}
	g.register(cmd)
	return cmd
}
