package config

import (
	"fmt"
	"slices"
	"strings"
)

// serverEntryKeys are the keys of an mcp.servers entry that OpenClaw
// 2026.9.6 reads (its schema and the keys it rejects by name).
var serverEntryKeys = append([]string{
	"enabled", "command", "args", "env", "cwd", "url", "transport", "type", "headers",
	"connectionTimeoutMs", "requestTimeoutMs", "supportsParallelToolCalls", "auth", "oauth",
	"sslVerify", "clientCert", "clientKey", "toolFilter", "codex", "disabled",
}, RejectedServerKeys...)

// mcpKeys are the keys of the "mcp" section that OpenClaw reads.
var mcpKeys = []string{"servers", "sessionIdleTtlMs", "apps"}

// KeyTypo is a key of the "mcp" section or of an mcp.servers entry that
// OpenClaw does not read and that looks like one it does: OpenClaw keeps
// such a key and ignores it, so the setting the user meant is not applied.
type KeyTypo struct {
	// Path is the key's path, such as "mcp.servers.docs.evn".
	Path string
	// Key is the key as written, Want the key it probably means.
	Key, Want string
}

// Message reads `mcp.servers.docs.evn: unknown key "evn", did you mean
// "env"? (OpenClaw keeps it but ignores it)`.
func (k KeyTypo) Message() string {
	return fmt.Sprintf("%s: unknown key %q, did you mean %q? (OpenClaw keeps it but ignores it)", k.Path, k.Key, k.Want)
}

// KeyTypos returns the likely misspelled keys of root's "mcp" section and
// of its mcp.servers entries, in document order. A key counts as
// misspelled when it is not one OpenClaw reads and is within a small edit
// distance of one (or differs from it only in case); other unknown keys
// are left alone, as OpenClaw leaves them.
func KeyTypos(root *Object) []KeyTypo {
	out := SectionKeyTypos(root)
	mv, _ := root.Get("mcp")
	m, _ := mv.(*Object)
	if m == nil {
		return out
	}
	if servers, ok := m.vals["servers"].(*Object); ok {
		for _, name := range servers.Keys() {
			if e, ok := servers.vals[name].(*Object); ok {
				out = append(out, EntryKeyTypos("mcp.servers."+name, e)...)
			}
		}
	}
	return out
}

// SectionKeyTypos is [KeyTypos] for the keys of the "mcp" section itself
// (such as "servres").
func SectionKeyTypos(root *Object) []KeyTypo {
	mv, _ := root.Get("mcp")
	m, ok := mv.(*Object)
	if !ok {
		return nil
	}
	return typos(m, "mcp", mcpKeys)
}

// EntryKeyTypos is [KeyTypos] for one mcp.servers entry at path.
func EntryKeyTypos(path string, e *Object) []KeyTypo {
	return typos(e, path, serverEntryKeys)
}

func typos(o *Object, path string, known []string) []KeyTypo {
	var out []KeyTypo
	for _, k := range o.Keys() {
		if slices.Contains(known, k) {
			continue
		}
		if want := closestKey(k, known); want != "" {
			out = append(out, KeyTypo{Path: path + "." + k, Key: k, Want: want})
		}
	}
	return out
}

// closestKey returns the known key k most likely means: one equal to it
// ignoring case, else the nearest within an edit distance of 1 (keys of up
// to 5 characters) or 2; "" when none is that close, or two are.
func closestKey(k string, known []string) string {
	for _, w := range known {
		if strings.EqualFold(k, w) {
			return w
		}
	}
	limit := 2
	if len(k) <= 5 {
		limit = 1
	}
	best, bestD, ties := "", limit+1, 0
	for _, w := range known {
		switch d := editDistance(strings.ToLower(k), strings.ToLower(w)); {
		case d < bestD:
			best, bestD, ties = w, d, 0
		case d == bestD:
			ties++
		}
	}
	if bestD > limit || ties > 0 {
		return ""
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b (a
// Levenshtein distance in which swapping two adjacent bytes costs 1).
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
