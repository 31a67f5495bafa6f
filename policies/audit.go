package policies

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// AuditRecord is one line of the decision audit log (JSON Lines). It never
// carries argument values.
type AuditRecord struct {
	Time       time.Time `json:"time"`
	Hook       Hook      `json:"hook"`
	Surface    Surface   `json:"surface,omitempty"`
	SessionKey string    `json:"session_key,omitempty"`
	Caller     string    `json:"caller,omitempty"`
	// Subject and Issuer name the authenticated caller (Identity), when
	// the surface has one.
	Subject    string `json:"subject,omitempty"`
	Issuer     string `json:"issuer,omitempty"`
	Tool       string `json:"tool,omitempty"`
	Server     string `json:"server,omitempty"`
	Module     string `json:"module"`
	Mode       Mode   `json:"mode,omitempty"`
	Decision   string `json:"decision"`
	Reason     string `json:"reason,omitempty"`
	Error      string `json:"error,omitempty"`
	DurationUs int64  `json:"duration_us"`
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

// Record writes r. A write error is kept (see Err) and later records are
// still attempted.
func (l *AuditLog) Record(r AuditRecord) {
	line, err := json.Marshal(r)
	if err != nil {
		return
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.w.Write(line); err != nil && l.err == nil {
		l.err = err
		if l.onError != nil {
			l.onError(err)
		}
	}
}

// Err returns the first write error, if any.
func (l *AuditLog) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}
