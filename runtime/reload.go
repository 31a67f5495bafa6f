package runtime

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	// order: the safe server names (docs/tool-names.md §2, assigned in declaration order),
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
		reflect.DeepEqual(a.Entry, b.Entry) &&
		a.OAuthIdentity == b.OAuthIdentity &&
		a.ListPrincipal == b.ListPrincipal &&
		a.AuthProfileID == b.AuthProfileID
}

// Reload event kinds (Options.OnEvent).
const (
	// EventReloaded: Session.Reload applied a new declaration of servers
	// (Event.Server is empty). The added and changed servers were
	// connected first (EventConnected or EventFailed each); the catalog is
	// named again on its next use.
	EventReloaded EventKind = "reloaded"
	// EventRemoved: the connection of a server that a reload removed or
	// replaced was closed, once the calls in flight on it had ended (a
	// stdio server and everything it started is then stopped). Err is the
	// failure to close it, if any.
	EventRemoved EventKind = "removed"
)

// errRetired is the cause of a *ServerError for a server whose connection
// a reload removed or replaced while the request was being routed.
var errRetired = errors.New("the server was removed or replaced by a reload")

// connSet is one declaration of a session's servers and their
// connections, immutable once published: Reload replaces it as a whole.
type connSet struct {
	decl  []Server         // as declared (DiffServers input)
	conns []*conn          // declaration order
	byKey map[string]*conn // by raw server name
}

func (cs *connSet) add(c *conn) {
	cs.conns = append(cs.conns, c)
	cs.byKey[c.cfg.Name] = c
}

// newConn returns the unconnected connection of sv.
func (s *Session) newConn(sv Server) *conn {
	c := &conn{s: s, cfg: sv}
	if !sv.SupportsParallelToolCalls {
		c.turn = make(chan struct{}, 1)
	}
	s.levelMu.Lock()
	c.px.logLevel = s.logLevel // applied when it connects (afterConnect)
	s.levelMu.Unlock()
	return c
}

// hold starts a use of c for a request (op names it in the error); the
// error is a *ServerError when a reload retired c meanwhile.
func (c *conn) hold(op string) (release func(), err error) {
	if !c.rl.acquire() {
		return nil, &ServerError{Server: c.cfg.Name, Op: op, Err: errRetired}
	}
	return c.rl.release, nil
}

// checkServers refuses an empty or repeated server name.
func checkServers(servers []Server) error {
	seen := make(map[string]bool, len(servers))
	for i, sv := range servers {
		if sv.Name == "" {
			return fmt.Errorf("runtime: server %d has an empty name", i)
		}
		if seen[sv.Name] {
			return fmt.Errorf("runtime: server %q is declared twice", sv.Name)
		}
		seen[sv.Name] = true
	}
	return nil
}

// connLife counts the uses of a connection in flight (a tool call, a
// prompt, a resource read) and lets a reload retire it: once retired, no
// new use starts, and drained is closed when the last one ends.
type connLife struct {
	mu      sync.Mutex
	uses    int
	retired bool
	drained chan struct{}
}

// acquire starts a use; false when the connection is retired.
func (l *connLife) acquire() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.retired {
		return false
	}
	l.uses++
	return true
}

// release ends a use started by acquire.
func (l *connLife) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.uses--
	if l.retired && l.uses == 0 {
		close(l.drained)
	}
}

// retire stops new uses and returns a channel closed when none is left.
func (l *connLife) retire() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.retired {
		l.retired, l.drained = true, make(chan struct{})
		if l.uses == 0 {
			close(l.drained)
		}
	}
	return l.drained
}

func (l *connLife) isRetired() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.retired
}

// Reload replaces the session's servers by servers (declaration order, as
// for New) and returns what changed (DiffServers). Unchanged servers keep
// their connection, listing, pause and logging level. Added and changed
// servers get new connections, connected and listed concurrently, each
// bounded by its connection timeout, before the new set is published in
// one step: a call, listing or status never sees half of a reload, and
// the servers it keeps or replaces serve calls until then. A server that
// fails to connect becomes a diagnostic, as in Connect. The catalog (and
// the prompt names) are then named again on their next use: the safe
// server names are assigned over all declared servers in declaration
// order, so an added, removed or reordered server may shift exposed names.
// The connections of removed and changed servers are closed in the
// background once the calls in flight on them have ended (EventRemoved);
// Close waits for that. Before Connect, Reload only replaces the
// declaration; on an idle (reaped) session, the next use connects.
//
// Reloads are serialized. Errors: a server name that is empty or repeated
// (nothing changes), ErrClosed, and ctx's error when it ends while the new
// servers connect (their connections are closed; the previous servers stay
// in use).
func (s *Session) Reload(ctx context.Context, servers []Server) (ServerChanges, error) {
	if err := checkServers(servers); err != nil {
		return ServerChanges{}, err
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if err := s.closedErr(); err != nil {
		return ServerChanges{}, err
	}
	defer s.touch()() // holds off the idle reaper
	old := s.set.Load()
	ch := DiffServers(old.decl, servers)
	if ch.Empty() {
		return ch, nil
	}
	next := &connSet{decl: slices.Clone(servers), byKey: make(map[string]*conn, len(servers))}
	kept := make(map[*conn]bool, len(ch.Unchanged))
	var fresh []*conn
	for _, sv := range servers {
		if c := old.byKey[sv.Name]; c != nil && slices.Contains(ch.Unchanged, sv.Name) {
			next.add(c)
			kept[c] = true
			continue
		}
		c := s.newConn(sv)
		next.add(c)
		fresh = append(fresh, c)
	}

	s.mu.Lock()
	attempted := s.connected && !s.idle
	s.mu.Unlock()
	if attempted {
		cctx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(s.life, cancel) // Close aborts connecting
		s.connectAll(cctx, fresh)
		stop()
		cancel()
		if err := ctx.Err(); err != nil {
			s.closeNow(fresh)
			return ServerChanges{}, fmt.Errorf("runtime: reload abandoned while connecting, the previous servers stay in use: %w", err)
		}
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.closeNow(fresh)
		return ServerChanges{}, ErrClosed
	}
	s.set.Store(next)
	s.cat = nil
	var retired []*conn
	for _, c := range old.conns {
		if kept[c] {
			continue
		}
		retired = append(retired, c)
		drained := c.rl.retire()
		s.bg.Go(func() { s.closeRetired(c, drained) }) // Close waits for bg after setting closed
	}
	s.mu.Unlock()
	s.retryMu.Lock()
	for _, c := range retired {
		delete(s.connFailed, c)
		delete(s.retryCount, c)
		if tm := s.retryTimer[c]; tm != nil {
			tm.Stop()
			delete(s.retryTimer, c)
		}
	}
	s.retryMu.Unlock()

	if !attempted {
		// Connect or a revive may have run with the previous set while this
		// reload was deciding: connect what they could not see. revive
		// holds buildMu until it is done.
		s.buildMu.Lock()
		s.mu.Lock()
		now := s.connected && !s.idle && !s.closed
		s.mu.Unlock()
		s.buildMu.Unlock()
		if now {
			cctx, cancel := context.WithCancel(ctx)
			stop := context.AfterFunc(s.life, cancel)
			s.connectAll(cctx, fresh)
			stop()
			cancel()
			s.dirty.Store(true)
		}
	}
	s.log.Info("MCP servers reloaded", "changes", ch.String())
	s.emit(Event{Kind: EventReloaded})
	return ch, nil
}

// closeRetired closes a connection retired by a reload once drained is
// closed (no use in flight). It runs in s.bg.
func (s *Session) closeRetired(c *conn, drained <-chan struct{}) {
	<-drained
	c.dialMu.Lock() // a (re)connection in progress ends first
	err := c.close()
	c.dialMu.Unlock()
	c.px.reset()
	if err != nil {
		s.log.Warn("closing a removed MCP server", "server", c.cfg.Name, "err", err.Error())
	}
	s.emit(Event{Kind: EventRemoved, Server: c.cfg.Name, Err: err})
}

// closeNow closes connections that were never published.
func (s *Session) closeNow(conns []*conn) {
	var wg sync.WaitGroup
	for _, c := range conns {
		c.rl.retire()
		wg.Go(func() {
			c.dialMu.Lock()
			if err := c.close(); err != nil {
				s.log.Warn("closing an MCP server", "server", c.cfg.Name, "err", err.Error())
			}
			c.dialMu.Unlock()
		})
	}
	wg.Wait()
}

// SetToolPolicy replaces the tool policy (Options.ToolPolicy; nil hides
// nothing), for instance after openclaw.json changed; the catalog is named
// again on its next use, so tools it now hides disappear from it and
// become uncallable (*HiddenToolError), and tools it no longer hides come
// back.
func (s *Session) SetToolPolicy(p *ToolPolicy) {
	s.policy.Store(compileToolPolicy(p))
	s.mu.Lock()
	s.cat = nil
	s.mu.Unlock()
}
