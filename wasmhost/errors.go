package wasmhost

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Kind classifies why a guest call or a load failed.
type Kind uint8

// The kinds of [Error]. Each has a sentinel (ErrLoad, ErrTimeout, …) that
// errors.Is matches against any *Error of that kind.
const (
	// KindLoad: the module could not be compiled, linked, instantiated or
	// initialized (including an unknown import or an initial memory over
	// the cap).
	KindLoad Kind = iota + 1
	// KindTimeout: the call ran past its deadline (Options.CallTimeout or
	// the caller's context deadline) and the guest was interrupted.
	KindTimeout
	// KindCanceled: the caller's context was canceled, while waiting for an
	// instance or during the call.
	KindCanceled
	// KindTrap: the guest trapped (unreachable, out-of-bounds access,
	// division by zero, stack overflow, a Go or Rust panic).
	KindTrap
	// KindMemoryLimit: the guest trapped with its linear memory at the
	// per-module cap (Options.MemoryLimitPages): it ran out of memory.
	KindMemoryLimit
	// KindExit: the guest called WASI proc_exit.
	KindExit
	// KindABI: the guest broke the calling convention: a missing or
	// mistyped export, an alloc that failed, a result pointer/length
	// outside its memory, a result over Options.MaxResultBytes. Adapters
	// also use it for malformed output.
	KindABI
	// KindClosed: the module was closed.
	KindClosed
)

var kindNames = [...]string{
	KindLoad:        "load",
	KindTimeout:     "timeout",
	KindCanceled:    "canceled",
	KindTrap:        "trap",
	KindMemoryLimit: "memory limit",
	KindExit:        "exit",
	KindABI:         "bad result",
	KindClosed:      "closed",
}

// String returns the kind's short name, e.g. "timeout" or "bad result".
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Sentinels for errors.Is, one per [Kind]: errors.Is(err, ErrTimeout) is
// true for any *Error whose Kind is KindTimeout.
var (
	ErrLoad        = &sentinel{KindLoad}
	ErrTimeout     = &sentinel{KindTimeout}
	ErrCanceled    = &sentinel{KindCanceled}
	ErrTrap        = &sentinel{KindTrap}
	ErrMemoryLimit = &sentinel{KindMemoryLimit}
	ErrExit        = &sentinel{KindExit}
	ErrABI         = &sentinel{KindABI}
	ErrClosed      = &sentinel{KindClosed}
)

type sentinel struct{ kind Kind }

func (s *sentinel) Error() string { return "wasmhost: " + s.kind.String() }

// Error is the one error type of this package: every failure of Load, a
// call, or an instance initialization is an *Error. Module is the module's
// configured name; Export the guest export being called ("" for a load
// failure outside any export); Err the cause. Stderr holds the tail of what
// the guest wrote to WASI stdout/stderr during the failed call, if anything.
//
// Error() names the module and export and shows only the first line of Err
// (wazero appends a multi-line wasm stack trace to traps; it stays in Err):
//
//	wasm module "rules": before_tool_call: deadline of 100ms exceeded
type Error struct {
	Module string
	Export string
	Kind   Kind
	Err    error
	Stderr string
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "wasm module %q: ", e.Module)
	if e.Export != "" {
		b.WriteString(e.Export)
		b.WriteString(": ")
	}
	if e.Err == nil {
		b.WriteString(e.Kind.String())
	} else {
		b.WriteString(firstLine(e.Err))
	}
	if line := guestSummary(e.Stderr); line != "" {
		b.WriteString(" (guest output: ")
		b.WriteString(line)
		b.WriteString(")")
	}
	return b.String()
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// Is matches the sentinel of e.Kind.
func (e *Error) Is(target error) bool {
	s, ok := target.(*sentinel)
	return ok && s.kind == e.Kind
}

// guestSummary returns the line of a guest's output that says what went
// wrong, cut to 200 bytes: a Go runtime's first "panic: " or "fatal error: "
// line (what follows is the goroutine trace), Rust's "panicked at FILE:"
// joined with the message on the next line (Rust ≥ 1.73 prints them on two
// lines), else the last non-empty line (AssemblyScript's abort, a guest's
// own message).
func guestSummary(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i, line := range lines {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "panic: "), strings.HasPrefix(line, "fatal error: "):
			return cut200(line)
		case strings.Contains(line, "panicked at ") && strings.HasSuffix(line, ":") && i+1 < len(lines):
			if next := strings.TrimSpace(lines[i+1]); next != "" {
				return cut200(line + " " + next)
			}
		}
	}
	last := strings.TrimRight(s, "\r\n\t ")
	if i := strings.LastIndexByte(last, '\n'); i >= 0 {
		last = last[i+1:]
	}
	return cut200(strings.TrimSpace(last))
}

// cut200 cuts s to 200 bytes, marking the cut, without splitting a UTF-8
// sequence.
func cut200(s string) string {
	if len(s) <= 200 {
		return s
	}
	n := 200
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// errorf builds an *Error with a formatted cause.
func errorf(module, export string, kind Kind, format string, args ...any) *Error {
	return &Error{Module: module, Export: export, Kind: kind, Err: fmt.Errorf(format, args...)}
}

// causeError has its own message and unwraps to the wazero error it
// explains.
type causeError struct {
	msg string
	err error
}

func (c *causeError) Error() string { return c.msg }
func (c *causeError) Unwrap() error { return c.err }

func wrapMsg(err error, format string, args ...any) error {
	return &causeError{msg: fmt.Sprintf(format, args...), err: err}
}

// firstLine returns the first line of err's message.
func firstLine(err error) string {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return msg
}
