package runtime

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// ServerChanges is what differs between two declarations of a session's
// servers (openclaw.json before and after an edit): what a reload must
// connect, close and reconnect. Names are raw mcp.servers names.
type ServerChanges struct {
	// Added are declared only in the new list, in its order.
	Added []string
	// Removed are declared only in the old list, in its order.
	Removed []string
	// Changed are in both lists with a different definition (entry,
	// transport, enabled, blocked env keys, toolFilter or
	// supportsParallelToolCalls), in the new list's order: their
	// connection must be closed and opened again.
	Changed []string
	// Unchanged are in both lists with the same definition; their
	// connection can be kept.
	Unchanged []string
	// Reordered reports that the servers kept are declared in another
	// order: the safe server names (§11.6, assigned in declaration order),
	// and so exposed tool names, may change even if nothing else did.
	Reordered bool
}

// Empty reports whether the two declarations are the same.
func (c ServerChanges) Empty() bool {
	return len(c.Added) == 0 && len(c.Removed) == 0 && len(c.Changed) == 0 && !c.Reordered
}

// String sums the changes up for a log line or a CLI answer:
// `1 added (web), 1 removed (old), 0 changed, 2 unchanged`.
func (c ServerChanges) String() string {
	part := func(n []string, what string) string {
		s := strconv.Itoa(len(n)) + " " + what
		if len(n) > 0 && what != "unchanged" {
			s += " (" + strings.Join(n, ", ") + ")"
		}
		return s
	}
	s := part(c.Added, "added") + ", " + part(c.Removed, "removed") + ", " + part(c.Changed, "changed") + ", " + part(c.Unchanged, "unchanged")
	if c.Reordered {
		s += ", reordered"
	}
	return s
}

// DiffServers compares two declarations of a session's servers by name. A
// server whose Transport is set (an embedder's in-process transport) is
// unchanged only when the new declaration holds the same Transport value.
// Names are expected unique within each list, as New requires; a repeated
// name counts once, at its first position.
func DiffServers(old, next []Server) ServerChanges {
	var c ServerChanges
	before := make(map[string]*Server, len(old))
	for i := range old {
		if _, dup := before[old[i].Name]; !dup {
			before[old[i].Name] = &old[i]
		}
	}
	after := make(map[string]bool, len(next))
	var keptOld, keptNew []string
	for i := range next {
		sv := &next[i]
		if after[sv.Name] {
			continue
		}
		after[sv.Name] = true
		prev, ok := before[sv.Name]
		switch {
		case !ok:
			c.Added = append(c.Added, sv.Name)
			continue
		case sameServer(prev, sv):
			c.Unchanged = append(c.Unchanged, sv.Name)
		default:
			c.Changed = append(c.Changed, sv.Name)
		}
		keptNew = append(keptNew, sv.Name)
	}
	seen := make(map[string]bool, len(old))
	for i := range old {
		name := old[i].Name
		if seen[name] {
			continue
		}
		seen[name] = true
		if after[name] {
			keptOld = append(keptOld, name)
		} else {
			c.Removed = append(c.Removed, name)
		}
	}
	c.Reordered = !slices.Equal(keptOld, keptNew)
	return c
}

// sameServer reports whether two declarations of one server can share a
// connection and catalog entry.
func sameServer(a, b *Server) bool {
	return a.Transport == b.Transport &&
		a.Disabled == b.Disabled &&
		a.SupportsParallelToolCalls == b.SupportsParallelToolCalls &&
		slices.Equal(a.BlockedEnv, b.BlockedEnv) &&
		reflect.DeepEqual(a.ToolFilter, b.ToolFilter) &&
		reflect.DeepEqual(a.Entry, b.Entry)
}
