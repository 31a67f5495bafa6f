package main

//lint:file-ignore ST1005 these errors are OpenClaw's CLI messages, whole sentences printed to the user as they are (capitals and full stops included)

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/openclaw-go/openclaw/config"
)

// `openclaw mcp configure <name>`: change operator controls of an existing
// mcp.servers entry without replacing it. Flags, texts and exit codes are
// OpenClaw's (src/cli/mcp-cli.ts); --header/--unset-header and
// --env/--unset-env are ours (OpenClaw has no flag for them), and a run
// without any change is refused instead of rewriting the file unchanged.

// configureFlags are the inputs of `mcp configure`.
type configureFlags struct {
	serverFlags
	enable, disable, noParallel bool
	clearTools, clearTimeouts   bool
	clearAuth, clearTLS, probe  bool
	unsetHeaders, unsetEnvs     []string
	parallelSet, noParallelSet  bool
}

// flagAliases returns a flag normalizer that accepts each key of aliases
// for the flag it names: where two commands spell one flag differently,
// each accepts both.
func flagAliases(aliases map[string]string) func(*pflag.FlagSet, string) pflag.NormalizedName {
	return func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if to, ok := aliases[name]; ok {
			return pflag.NormalizedName(to)
		}
		return pflag.NormalizedName(name)
	}
}

// changeFlags are the flags that change the entry; a run needs one.
var changeFlags = []string{
	"enable", "disable", "include", "exclude", "clear-tools", "timeout", "connect-timeout",
	"clear-timeouts", "parallel", "no-parallel", "auth", "clear-auth", "oauth-scope",
	"oauth-redirect-url", "oauth-client-metadata-url", "ssl-verify", "client-cert", "client-key",
	"clear-tls", "header", "unset-header", "env", "unset-env",
}

// apply changes entry in place, in OpenClaw's order, and returns an error
// with the sentence to print for a bad flag value or a key to unset that
// is not there.
func (f *configureFlags) apply(name string, e *config.Object) error {
	if f.enable {
		e.Delete("enabled")
	}
	if f.disable {
		e.Set("enabled", false)
	}
	if f.clearTools {
		e.Delete("toolFilter")
	} else if tf := f.toolFilterObject(); tf != nil {
		e.Set("toolFilter", tf)
	}
	if f.clearTimeouts {
		for _, k := range []string{"timeout", "connectTimeout", "connect_timeout", "requestTimeoutMs", "connectionTimeoutMs"} {
			e.Delete(k)
		}
	}
	req, conn, err := f.timeoutsMs()
	if err != nil {
		return err
	}
	if req > 0 {
		e.Set("requestTimeoutMs", req)
	}
	if conn > 0 {
		e.Set("connectionTimeoutMs", conn)
	}
	if f.parallelSet && f.parallel {
		e.Set("supportsParallelToolCalls", true)
	}
	if f.noParallelSet && f.noParallel {
		e.Delete("supportsParallelToolCalls")
		e.Delete("supports_parallel_tool_calls")
	}
	if f.clearAuth {
		e.Delete("auth")
		e.Delete("oauth")
	}
	auth, err := parseAuth(f.auth)
	if err != nil {
		return err
	}
	if auth != "" {
		e.Set("auth", auth)
	}
	if o := f.oauthObject(); o != nil {
		e.Set("oauth", o)
	}
	if f.clearTLS {
		for _, k := range []string{"sslVerify", "ssl_verify", "clientCert", "client_cert", "clientKey", "client_key"} {
			e.Delete(k)
		}
	}
	if f.sslVerifySet {
		v, err := parseBoolFlag("--ssl-verify", f.sslVerify)
		if err != nil {
			return err
		}
		e.Set("sslVerify", v)
	}
	if v := strings.TrimSpace(f.clientCert); v != "" {
		e.Set("clientCert", v)
	}
	if v := strings.TrimSpace(f.clientKey); v != "" {
		e.Set("clientKey", v)
	}
	if err := editRecord(name, e, "headers", "header", "header", f.headers, f.unsetHeaders); err != nil {
		return err
	}
	return editRecord(name, e, "env", "env", "env entry", f.envs, f.unsetEnvs)
}

// editRecord sets the KEY=VALUE entries of set in the record e[field],
// then removes the keys of unset (each must be there), and drops the
// record when it ends up empty. flag names the flags and what one item in
// messages.
func editRecord(name string, e *config.Object, field, flag, what string, set, unset []string) error {
	if len(set) == 0 && len(unset) == 0 {
		return nil
	}
	kv, err := parseKeyValues(set, "--"+flag)
	if err != nil {
		return err
	}
	cur, _ := e.Get(field)
	rec, ok := cur.(*config.Object)
	switch {
	case !ok && cur != nil:
		return fmt.Errorf("MCP server %q has a %s value that is not an object; fix it with openclaw mcp set.", regSanitize(name), field)
	case !ok:
		rec = config.NewObject()
	default:
		rec = rec.Clone()
	}
	if kv != nil {
		for _, k := range kv.Keys() {
			v, _ := kv.Get(k)
			rec.Set(k, v)
		}
	}
	for _, k := range unset {
		k = strings.TrimSpace(k)
		if !rec.Has(k) {
			return fmt.Errorf("MCP server %q has no %s %q to remove (--unset-%s).", regSanitize(name), what, regSanitize(k), flag)
		}
		rec.Delete(k)
	}
	if rec.Len() == 0 {
		e.Delete(field)
	} else {
		e.Set(field, rec)
	}
	return nil
}

func newMCPConfigureCmd() *cobra.Command {
	var f configureFlags
	cmd := &cobra.Command{
		Use:   "configure <name>",
		Short: "Update MCP server operator controls without replacing the server",
		Long: `Configure changes fields of an existing mcp.servers entry: enabled, the tool filter,
timeouts (in seconds, stored as requestTimeoutMs and connectionTimeoutMs), the parallel marker,
auth and OAuth metadata, TLS settings, and single headers or env entries. The changed entry is
normalized and validated like "openclaw mcp set" before it is saved; with --probe it must also
answer a probe. Other keys of the entry, and other entries, are kept as they are on disk at the
moment of writing.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.changed(cmd)
			fl := cmd.Flags()
			f.parallelSet, f.noParallelSet = fl.Changed("parallel"), fl.Changed("no-parallel")
			name := args[0]
			switch {
			case f.enable && f.disable:
				return regFail(cmd, "Specify only one of --enable or --disable.")
			case f.parallelSet && f.parallel && f.noParallelSet && f.noParallel:
				return regFail(cmd, "Specify only one of --parallel or --no-parallel.")
			}
			anyChange := false
			for _, n := range changeFlags {
				anyChange = anyChange || fl.Changed(n)
			}
			if !anyChange {
				return regFail(cmd, "Specify at least one change to make; see openclaw mcp configure --help.")
			}
			po, err := f.probeOpts(cmd)
			if err != nil {
				return regFail(cmd, err.Error())
			}
			// change applies the flags to the entry of doc; it fails, with
			// the sentence printed, when there is no such entry or a value
			// is bad. It runs on a first read (validation, probe) and
			// again on the fresh file under the lock.
			change := func(doc *config.Document) (next *config.Object, removed bool, err error) {
				cur, ok := doc.Server(name)
				if !ok {
					return nil, false, regFail(cmd, fmt.Sprintf("No MCP server named %q in %s. %s", regSanitize(name), doc.Path, hintListServers))
				}
				next = cur.Clone()
				if err := f.apply(name, next); err != nil {
					return nil, false, regFail(cmd, err.Error())
				}
				return next, f.enable && next.Len() == 0, nil
			}
			doc, err := loadRegistry(cmd)
			if err != nil {
				return err
			}
			next, removed, err := change(doc)
			if err != nil {
				return err
			}
			if !removed {
				if err := regSetServer(cmd, doc, name, next.Clone(), "configure"); err != nil {
					return err
				}
				normalized, _ := doc.Server(name)
				regWarnBlockedEnv(cmd.ErrOrStderr(), singleServer(name, normalized))
				regWarnKeyTypos(cmd.ErrOrStderr(), nil, singleServer(name, normalized))
				if v, _ := normalized.Get("enabled"); f.probe && v != false && !isOAuth(normalized) {
					if err := probeOrFail(cmd, doc.Path, name, normalized, po); err != nil {
						return err
					}
				}
			}

			unlock, err := lockRegistry(cmd)
			if err != nil {
				return err
			}
			defer unlock()
			if doc, err = loadRegistry(cmd); err != nil {
				return err
			}
			if next, removed, err = change(doc); err != nil {
				return err
			}
			if removed {
				if _, err := doc.UnsetServer(name); err != nil {
					var ce *config.ConfigError
					if errors.As(err, &ce) {
						return regFail(cmd, fmt.Sprintf("Config invalid after MCP unset (%s).", ce.Error()))
					}
					return regFail(cmd, err.Error())
				}
			} else if err := regSetServer(cmd, doc, name, next, "configure"); err != nil {
				return err
			}
			if err := doc.Save(); err != nil {
				return regFail(cmd, err.Error())
			}
			if removed {
				fmt.Fprintf(cmd.OutOrStdout(), "Removed disabled MCP override for %q in %s.\n", name, doc.Path)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Updated MCP server %q in %s.\n", name, doc.Path)
			return nil
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.BoolVar(&f.enable, "enable", false, "Enable this saved server")
	fl.BoolVar(&f.disable, "disable", false, "Disable this saved server (also --disabled, as add spells it)")
	fl.SetNormalizeFunc(flagAliases(map[string]string{"disabled": "disable", "enabled": "enable"}))
	fl.BoolVar(&f.clearTools, "clear-tools", false, "Clear this server's MCP tool filter")
	fl.BoolVar(&f.clearTimeouts, "clear-timeouts", false, "Clear request and connection timeout overrides")
	fl.BoolVar(&f.noParallel, "no-parallel", false, "Clear the concurrent tool-call marker")
	fl.BoolVar(&f.clearAuth, "clear-auth", false, "Clear auth and OAuth metadata")
	fl.BoolVar(&f.clearTLS, "clear-tls", false, "Clear TLS verification and mTLS overrides")
	fl.StringArrayVar(&f.unsetHeaders, "unset-header", nil, "Repeatable: remove this HTTP header")
	fl.StringArrayVar(&f.unsetEnvs, "unset-env", nil, "Repeatable: remove this stdio environment entry")
	fl.BoolVar(&f.probe, "probe", false, "Probe the updated server before saving")
	return cmd
}
