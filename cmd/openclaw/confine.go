package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/transport"
)

// The environment spellings of --confine-stdio and --confine-protect, for
// every command that starts stdio servers.
const (
	confineStdioEnv   = "OPENCLAW_GO_CONFINE_STDIO"
	confineProtectEnv = "OPENCLAW_GO_CONFINE_PROTECT"
)

// confineFlags ask for the confinement of stdio servers (Landlock): off
// unless --confine-stdio or OPENCLAW_GO_CONFINE_STDIO=1 turns it on.
type confineFlags struct {
	on      bool     // --confine-stdio
	protect []string // --confine-protect PATH, repeatable
}

func (f *confineFlags) register(fl *pflag.FlagSet) {
	fl.BoolVar(&f.on, "confine-stdio", false, "run stdio servers confined (Linux Landlock): no access to the OpenClaw folder, the state folder, token files, the policy file and its modules (also $"+confineStdioEnv+"=1)")
	fl.StringArrayVar(&f.protect, "confine-protect", nil, "with --confine-stdio: also keep confined servers out of this file or folder (repeatable; also $"+confineProtectEnv+", a list separated by '"+string(os.PathListSeparator)+"')")
}

// confinement returns the Confinement asked for, nil when none is, or an
// error that names the reason confinement cannot be had (never a silent
// fallback to unconfined servers). pol and files name the policy inputs
// and secret files of the command, which are protected.
func (f *confineFlags) confinement(pol policyFlags, files ...string) (*transport.Confinement, error) {
	on := f.on
	if v, ok := os.LookupEnv(confineStdioEnv); ok && v != "" && !on {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("$%s=%q: want 1 or 0 (true or false)", confineStdioEnv, v)
		}
		on = b
	}
	if !on {
		if len(f.protect) > 0 {
			return nil, fmt.Errorf("--confine-protect needs --confine-stdio (or $%s=1)", confineStdioEnv)
		}
		return nil, nil
	}
	if err := transport.ConfinementAvailable(); err != nil {
		return nil, fmt.Errorf("--confine-stdio: %w; not starting any stdio server unconfined", err)
	}
	protect, err := defaultProtected(pol)
	if err != nil {
		return nil, fmt.Errorf("--confine-stdio: %w", err)
	}
	for _, p := range files {
		if p != "" && p != "-" {
			protect = append(protect, p)
		}
	}
	protect = append(protect, f.protect...)
	protect = append(protect, filepath.SplitList(os.Getenv(confineProtectEnv))...)
	return &transport.Confinement{Protect: protect}, nil
}

// defaultProtected lists what a confined server never reaches: the
// OpenClaw folder (<home>/.openclaw, with openclaw.json), the config file
// wherever $OPENCLAW_CONFIG_PATH puts it, the state folder (run files,
// OAuth tokens, the default audit log), the policy file with the folders
// of its modules, the folders of --policy modules and the audit log.
func defaultProtected(pol policyFlags) ([]string, error) {
	home, err := config.Home()
	if err != nil {
		return nil, err
	}
	cfg, err := config.Path()
	if err != nil {
		return nil, err
	}
	state, err := config.StateDir()
	if err != nil {
		return nil, err
	}
	out := []string{filepath.Join(home, ".openclaw"), cfg, state}
	if d, err := transport.DefaultTokenDir(os.LookupEnv); err == nil {
		out = append(out, d)
	}
	module := func(src, base string) {
		if src == "" || strings.HasPrefix(src, "builtin:") {
			return
		}
		if !filepath.IsAbs(src) && base != "" {
			src = filepath.Join(base, src)
		}
		out = append(out, filepath.Dir(src))
	}
	for _, m := range pol.files {
		module(m, "")
	}
	if pol.config != "" {
		out = append(out, pol.config)
		base := filepath.Dir(pol.config)
		out = append(out, base)
		if pf, err := config.LoadPolicyFile(pol.config); err == nil {
			for _, m := range pf.Modules {
				module(m.Source, base)
			}
			if pf.AuditLog != "" && pf.AuditLog != "-" {
				out = append(out, pf.AuditLog)
			}
		}
	}
	if pol.auditLog != "" && pol.auditLog != "-" {
		out = append(out, pol.auditLog)
	}
	return out, nil
}
