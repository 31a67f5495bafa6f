package policies

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openclaw-go/openclaw/internal/jsonw"
)

// AuditRecord is one line of the decision audit log (JSON Lines). It never
// carries argument values.
type AuditRecord struct {
	// DecisionID names the record uniquely within the process run, and
	// is the same in the local log and the shipped decision log (the
	// policy engine sets it; "" when nothing did).
	DecisionID string    `json:"decision_id,omitempty"`
	Time       time.Time `json:"time"`
	Hook       Hook      `json:"hook"`
	Surface    Surface   `json:"surface,omitempty"`
	SessionKey string    `json:"session_key,omitempty"`
	Caller     string    `json:"caller,omitempty"`
	// Subject and Issuer name the authenticated caller (Identity), when
	// the surface has one.
	Subject string `json:"subject,omitempty"`
	Issuer  string `json:"issuer,omitempty"`
	Tool    string `json:"tool,omitempty"`
	Server  string `json:"server,omitempty"`
	// Method and Task name a tasks-extension request (tasks/get,
	// tasks/update, tasks/cancel) and the server's taskId it was for.
	Method string `json:"method,omitempty"`
	Task   string `json:"task,omitempty"`
	Module string `json:"module"`
	// ModuleSHA256 is the hex SHA-256 of the bytes of the module that
	// decided, when a loaded module did (the policy engine sets it).
	ModuleSHA256 string `json:"module_sha256,omitempty"`
	// BundleDigest is the digest of the policy bundle the deciding
	// module came from, when the policy set was loaded from one.
	BundleDigest string `json:"bundle_digest,omitempty"`
	Mode         Mode   `json:"mode,omitempty"`
	Decision     string `json:"decision"`
	Reason       string `json:"reason,omitempty"`
	Error        string `json:"error,omitempty"`
	DurationUs   int64  `json:"duration_us"`
}

// processID is this process run's random 64-bit name, in hex.
var processID = func() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return hex.EncodeToString(b[:])
}()

var decisionSeq atomic.Uint64

// ProcessID returns this process run's name: 16 random hex digits chosen
// at start, the prefix of its decision IDs.
func ProcessID() string { return processID }

// NextDecisionID returns a decision ID unique to this process run and, by
// its random prefix, across runs: [ProcessID], "-", and a sequence number
// from 1 ("5f0c9a1e2b3d4c6f-42").
func NextDecisionID() string {
	var b [len("5f0c9a1e2b3d4c6f-") + 20]byte
	n := copy(b[:], processID)
	b[n] = '-'
	return string(strconv.AppendUint(b[:n+1], decisionSeq.Add(1), 10))
}

// SetIdentity names id, the authenticated caller, in r (Subject and
// Issuer); a nil id leaves r unchanged.
func (r *AuditRecord) SetIdentity(id *Identity) {
	if id != nil {
		r.Subject, r.Issuer = id.Subject, id.Issuer
	}
}

// AuditSink receives audit records. Record must be safe for concurrent use
// and must not block for long.
type AuditSink interface {
	Record(AuditRecord)
}

// AuditLog writes records as JSON Lines to a writer, one Write per record.
type AuditLog struct {
	mu      sync.Mutex
	line    []byte // the record being written, reused
	w       io.Writer
	err     error
	onError func(error)
}

// NewAuditLog returns an AuditLog writing to w.
func NewAuditLog(w io.Writer) *AuditLog { return &AuditLog{w: w} }

// AuditLogOptions configure [NewAuditLogWith]. The zero value is
// [NewAuditLog]'s behaviour.
type AuditLogOptions struct {
	// OnError is called once, with the first write error, so that a
	// process can say loudly that decisions are no longer being recorded
	// (a full disk, a revoked file). It must not call back into the log.
	OnError func(error)
}

// NewAuditLogWith returns an AuditLog writing to w with options.
func NewAuditLogWith(w io.Writer, opts *AuditLogOptions) *AuditLog {
	l := &AuditLog{w: w}
	if opts != nil {
		l.onError = opts.OnError
	}
	return l
}

// Record writes r as one JSON line: the members of [AuditRecord]'s JSON
// tags, in their order, empty omitempty members left out, the time in
// RFC 3339 with nanoseconds, strings as [jsonw.AppendString] writes them.
// A write error is kept (see Err) and later records are still attempted.
func (l *AuditLog) Record(r AuditRecord) {
	l.mu.Lock()
	l.line = append(r.AppendJSON(l.line[:0]), '\n')
	_, err := l.w.Write(l.line)
	if err != nil && l.err == nil {
		l.err = err
		if l.onError != nil {
			l.onError(err)
		}
	}
	if cap(l.line) > 64<<10 {
		l.line = nil // do not keep a huge record's memory
	}
	l.mu.Unlock()
}

// AppendJSON appends r as one JSON object, as encoding/json would marshal
// it (the same members in the same order, as the same values): the one
// encoding of an audit record, for the local log and the shipped decision
// log alike.
func (r *AuditRecord) AppendJSON(buf []byte) []byte {
	o := jsonw.NewObject(buf)
	if r.DecisionID != "" {
		o.Str("decision_id", r.DecisionID)
	}
	o.Key("time")
	o.Buf = append(o.Buf, '"')
	o.Buf = r.Time.AppendFormat(o.Buf, time.RFC3339Nano)
	o.Buf = append(o.Buf, '"')
	o.Str("hook", string(r.Hook))
	str := func(k, v string) {
		if v != "" {
			o.Str(k, v)
		}
	}
	str("surface", string(r.Surface))
	str("session_key", r.SessionKey)
	str("caller", r.Caller)
	str("subject", r.Subject)
	str("issuer", r.Issuer)
	str("tool", r.Tool)
	str("server", r.Server)
	str("method", r.Method)
	str("task", r.Task)
	o.Str("module", r.Module)
	str("module_sha256", r.ModuleSHA256)
	str("bundle_digest", r.BundleDigest)
	str("mode", string(r.Mode))
	o.Str("decision", r.Decision)
	str("reason", r.Reason)
	str("error", r.Error)
	o.Int("duration_us", r.DurationUs)
	return o.Close()
}

// Err returns the first write error, if any.
func (l *AuditLog) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}
