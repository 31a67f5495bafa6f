package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies/builtin"
)

// Dynamic shell completion (`openclaw completion bash|zsh|fish`): server
// names from openclaw.json's mcp.servers, policy modules (builtin:NAME refs
// and *.wasm files), and for `mcp call` the "<server>__" prefix of the
// exposed names. A tool's full exposed name is not completed: knowing it
// means starting every server, which a key press must not do.

// registerCompletions attaches the completion functions to the commands of
// root that take a server name (the first word of show, set, unset,
// configure, doctor, login and logout; every word of probe; tools
// --server), an exposed tool name (call) or a policy module (--policy).
func registerCompletions(root *cobra.Command) {
	one := func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return completeServers(toComplete, nil, ""), cobra.ShellCompDirectiveNoFileComp
	}
	many := func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return completeServers(toComplete, args, ""), cobra.ShellCompDirectiveNoFileComp
	}
	for _, path := range []string{"mcp show", "mcp set", "mcp unset", "mcp configure", "mcp doctor", "mcp login", "mcp logout"} {
		if c := findCommand(root, path); c != nil {
			c.ValidArgsFunction = one
		}
	}
	if c := findCommand(root, "mcp probe"); c != nil {
		c.ValidArgsFunction = many
	}
	if c := findCommand(root, "mcp call"); c != nil {
		c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return completeServers(toComplete, nil, "__"), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
		}
	}
	for _, path := range []string{"mcp tools", "mcp call"} {
		if c := findCommand(root, path); c != nil {
			c.RegisterFlagCompletionFunc("server", func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				return completeServers(toComplete, nil, ""), cobra.ShellCompDirectiveNoFileComp
			})
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Flags().Lookup("policy") != nil {
			c.RegisterFlagCompletionFunc("policy", completePolicy)
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

// findCommand returns the command at path below root ("mcp show"), or nil.
func findCommand(root *cobra.Command, path string) *cobra.Command {
	c, rest, err := root.Find(strings.Fields(path))
	if err != nil || len(rest) > 0 || c == root {
		return nil
	}
	return c
}

// completeServers returns the mcp.servers names of openclaw.json starting
// with toComplete, minus those in skip, each followed by suffix. A missing
// or unreadable file completes nothing: completion never prints errors.
func completeServers(toComplete string, skip []string, suffix string) []string {
	path, err := config.Path()
	if err != nil {
		return nil
	}
	doc, err := config.LoadDocument(path)
	if err != nil || doc.Servers() == nil {
		return nil
	}
	var out []string
	for _, name := range regSortedNames(doc.Servers()) {
		if strings.HasPrefix(name, toComplete) && !slices.Contains(skip, name) {
			out = append(out, name+suffix)
		}
	}
	return out
}

// completePolicy completes --policy: the built-in refs (builtin:rules, …,
// with their descriptions) and the folders and *.wasm files matching
// toComplete. Folders end in "/" and suppress the trailing space, so that
// completion goes on inside them.
func completePolicy(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	var out []string
	for _, m := range builtin.List() {
		if ref := builtin.Scheme + m.Name; strings.HasPrefix(ref, toComplete) {
			out = append(out, ref+"\t"+m.Description)
		}
	}
	if builtin.IsRef(toComplete) {
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	dir, base := filepath.Split(toComplete)
	entries, err := os.ReadDir(dirOrDot(dir))
	directive := cobra.ShellCompDirectiveNoFileComp
	if err == nil {
		for _, e := range entries {
			name := e.Name()
			if !strings.HasPrefix(name, base) || (strings.HasPrefix(name, ".") && !strings.HasPrefix(base, ".")) {
				continue
			}
			isDir := e.IsDir()
			if e.Type()&os.ModeSymlink != 0 {
				if fi, err := os.Stat(filepath.Join(dirOrDot(dir), name)); err == nil {
					isDir = fi.IsDir()
				}
			}
			switch {
			case isDir:
				out = append(out, dir+name+"/")
				directive |= cobra.ShellCompDirectiveNoSpace
			case strings.HasSuffix(name, ".wasm"):
				out = append(out, dir+name)
			}
		}
	}
	return out, directive
}

func dirOrDot(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}
