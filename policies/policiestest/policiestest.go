// Package policiestest provides test doubles of the policy contract for
// the tests of the packages that consume it (surfaces, the engine, the
// proxy), in the manner of net/http/httptest.
package policiestest

import (
	"slices"
	"sync"

	"github.com/openclaw-go/openclaw/policies"
)

// AuditRecorder is a policies.AuditSink that keeps every record in memory,
// in order. It is safe for concurrent use; the zero value is ready.
type AuditRecorder struct {
	mu   sync.Mutex
	recs []policies.AuditRecord
}

// Record keeps r.
func (a *AuditRecorder) Record(r policies.AuditRecord) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs = append(a.recs, r)
}

// Records returns a copy of the records kept so far.
func (a *AuditRecorder) Records() []policies.AuditRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.recs)
}

// Find returns a copy of the first record of module, or nil.
func (a *AuditRecorder) Find(module string) *policies.AuditRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.recs {
		if r.Module == module {
			return &r
		}
	}
	return nil
}
