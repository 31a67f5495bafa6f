// Package config reads OpenClaw's configuration file, openclaw.json (JSON5),
// and resolves what `openclaw mcp serve` needs from it: the Gateway URL, its
// TLS pin and the credentials, with OpenClaw's precedence of flags, then
// environment, then config (docs/protocol-facts.md, Gateway target and credentials).
//
// It also reads and writes the mcp.servers registry the way OpenClaw's
// `openclaw mcp set|unset` do (docs/protocol-facts.md, mcp.servers config file to Registry CLI): [LoadDocument] keeps the whole file in
// order ([Object]), [Document.SetServer] normalizes and validates an entry,
// [Document.Save] writes indented JSON atomically with OpenClaw's rotating
// backups. [ServerEntry] is the one model of an mcp.servers entry and
// [ResolveEntry] (or [ResolveServer] for an entry of the file) the one
// resolver: how an entry is launched or dialed, with its secrets redacted
// and its env filtered as OpenClaw does; the transport package connects
// the result.
//
// It is a leaf package: cmd/openclaw, transport and runtime read it; of
// this module it imports only internal/redact. Keys it does not own are
// kept untouched.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/titanous/json5"
)

// DefaultGatewayPort is the local Gateway port OpenClaw uses when
// gateway.port is not set.
const DefaultGatewayPort = 18789

// Environment variables OpenClaw reads for the Gateway target.
const (
	EnvGatewayURL      = "OPENCLAW_GATEWAY_URL"
	EnvGatewayToken    = "OPENCLAW_GATEWAY_TOKEN"
	EnvGatewayPassword = "OPENCLAW_GATEWAY_PASSWORD"
	EnvHome            = "OPENCLAW_HOME"
	EnvStateDir        = "OPENCLAW_STATE_DIR"
	EnvConfigPath      = "OPENCLAW_CONFIG_PATH"
)

// File is the part of openclaw.json this package understands. Unknown keys
// are ignored when reading.
type File struct {
	Gateway Gateway `json:"gateway"`
}

// Gateway is the "gateway" section of openclaw.json.
type Gateway struct {
	// Mode is "local" (the default) or "remote".
	Mode string `json:"mode"`
	// Port is the local Gateway port; 0 means DefaultGatewayPort.
	Port int `json:"port"`
	// Auth holds the local Gateway's shared secrets.
	Auth GatewayAuth `json:"auth"`
	// Remote is used when Mode is "remote".
	Remote GatewayRemote `json:"remote"`
}

// GatewayAuth is gateway.auth: mode "token" or "password" and the secrets.
type GatewayAuth struct {
	Mode     string `json:"mode"`
	Token    string `json:"token"`
	Password string `json:"password"`
}

// GatewayRemote is gateway.remote: the URL of a remote Gateway, its
// credentials and an optional certificate pin (SHA-256 fingerprint).
type GatewayRemote struct {
	URL            string `json:"url"`
	Token          string `json:"token"`
	Password       string `json:"password"`
	TLSFingerprint string `json:"tlsFingerprint"`
}

// Home returns OpenClaw's home folder: $OPENCLAW_HOME, else the user's home.
func Home() (string, error) {
	if h := os.Getenv(EnvHome); h != "" {
		return h, nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("config: no home folder: %w", err)
	}
	return h, nil
}

// Path returns the config file path: $OPENCLAW_CONFIG_PATH, else
// <home>/.openclaw/openclaw.json.
func Path() (string, error) {
	if p := os.Getenv(EnvConfigPath); p != "" {
		return p, nil
	}
	h, err := Home()
	if err != nil {
		return "", err
	}
	return filepath.Join(h, ".openclaw", "openclaw.json"), nil
}

// StateDir returns OpenClaw's state folder: $OPENCLAW_STATE_DIR, else
// <home>/.openclaw/state.
func StateDir() (string, error) {
	if d := os.Getenv(EnvStateDir); d != "" {
		return d, nil
	}
	h, err := Home()
	if err != nil {
		return "", err
	}
	return filepath.Join(h, ".openclaw", "state"), nil
}

// Load reads and parses the config file at path. A missing file is an
// empty config, not an error; a file that does not parse is an error naming
// the path and the position.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &File{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("config: reading %s: %w", path, err)
	}
	return Parse(path, data)
}

// Parse parses config data (JSON5); name is used in errors.
func Parse(name string, data []byte) (*File, error) {
	var f File
	if len(strings.TrimSpace(string(data))) == 0 {
		return &f, nil
	}
	if err := json5.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("config: %s is not valid JSON5: %w", name, err)
	}
	return &f, nil
}

// Target is a resolved Gateway target. Source fields say where each value
// came from ("flag", "env", "config", "default"), for diagnostics.
type Target struct {
	URL            string
	Token          string
	Password       string
	TLSFingerprint string
	URLSource      string
	SecretSource   string
}

// Flags are the command-line inputs to [Resolve]. The *File fields name
// files whose trimmed content is the secret.
type Flags struct {
	URL          string
	Token        string
	TokenFile    string
	Password     string
	PasswordFile string
}

// Resolve applies OpenClaw's precedence (docs/protocol-facts.md, Gateway target and credentials). URL: flag, then
// $OPENCLAW_GATEWAY_URL, then config (remote mode: gateway.remote.url;
// otherwise ws://127.0.0.1:<gateway.port or 18789>). Secrets: flags (token,
// token file, password, password file), then $OPENCLAW_GATEWAY_TOKEN /
// $OPENCLAW_GATEWAY_PASSWORD, then config — except that config credentials
// are not reused when the URL came from the environment. getenv is
// os.Getenv in production. cfg may be nil.
func Resolve(fl Flags, cfg *File, getenv func(string) string) (*Target, error) {
	if cfg == nil {
		cfg = &File{}
	}
	t := &Target{}
	gw := cfg.Gateway
	remote := strings.EqualFold(gw.Mode, "remote")
	switch {
	case fl.URL != "":
		t.URL, t.URLSource = fl.URL, "flag"
	case getenv(EnvGatewayURL) != "":
		t.URL, t.URLSource = getenv(EnvGatewayURL), "env"
	case remote && gw.Remote.URL != "":
		t.URL, t.URLSource = gw.Remote.URL, "config"
	default:
		port := gw.Port
		if port == 0 {
			port = DefaultGatewayPort
		}
		t.URL, t.URLSource = "ws://127.0.0.1:"+strconv.Itoa(port), "default"
	}
	if remote && t.URLSource == "config" {
		t.TLSFingerprint = gw.Remote.TLSFingerprint
	}
	if fl.Token != "" && fl.TokenFile != "" {
		return nil, errors.New("use either --token or --token-file, not both")
	}
	if fl.Password != "" && fl.PasswordFile != "" {
		return nil, errors.New("use either --password or --password-file, not both")
	}
	var err error
	switch {
	case fl.Token != "":
		t.Token, t.SecretSource = fl.Token, "flag"
	case fl.TokenFile != "":
		if t.Token, err = ReadSecretFile(fl.TokenFile, "--token-file"); err != nil {
			return nil, err
		}
		t.SecretSource = "flag"
	}
	switch {
	case fl.Password != "":
		t.Password, t.SecretSource = fl.Password, "flag"
	case fl.PasswordFile != "":
		if t.Password, err = ReadSecretFile(fl.PasswordFile, "--password-file"); err != nil {
			return nil, err
		}
		t.SecretSource = "flag"
	}
	if t.SecretSource != "" {
		return t, nil
	}
	if tok, pw := getenv(EnvGatewayToken), getenv(EnvGatewayPassword); tok != "" || pw != "" {
		t.Token, t.Password, t.SecretSource = tok, pw, "env"
		return t, nil
	}
	if t.URLSource == "env" {
		return t, nil
	}
	if remote && t.URLSource == "config" && (gw.Remote.Token != "" || gw.Remote.Password != "") {
		t.Token, t.Password, t.SecretSource = gw.Remote.Token, gw.Remote.Password, "config"
		return t, nil
	}
	if gw.Auth.Token != "" || gw.Auth.Password != "" {
		t.Token, t.Password, t.SecretSource = gw.Auth.Token, gw.Auth.Password, "config"
	}
	return t, nil
}

// ReadSecretFile reads the secret in the file at path (a token, a
// password) with its surrounding whitespace trimmed. flag names where the
// path was given (a flag or a policy-file key) and prefixes every error;
// an unreadable file and an empty one (nothing but whitespace) are errors.
func ReadSecretFile(path, flag string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	s := strings.TrimSpace(string(data))
	if s == "" {
		return "", fmt.Errorf("%s: %s is empty", flag, path)
	}
	return s, nil
}
