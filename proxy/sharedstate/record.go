package sharedstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/openclaw-go/openclaw/internal/jsonw"
)

// RecordVersion is the version of the records this release writes, and
// the newest it reads. A change that an older release would misread
// (a field whose meaning changes, a new field it must not ignore) takes
// the next version; a field an older release may ignore keeps it
// (docs/RATIONALE.md, "Why do shared-state records carry a version?").
const RecordVersion = 1

// MaxRecordBytes is the largest record [decodeRecord] reads.
const MaxRecordBytes = 64 << 10

// VersionError is the refusal of a record written by a newer release:
// replicas of two releases run side by side during a rolling upgrade,
// and the older refuses what it cannot read rather than misread it.
type VersionError struct {
	// Kind names the record ("session", "event").
	Kind string
	// Version is the record's version, above [RecordVersion].
	Version int
}

// Error reads `shared state: a session record of version 2, written by
// a newer openclaw release (this one reads up to version 1): upgrade
// this replica`.
func (e *VersionError) Error() string {
	return fmt.Sprintf("shared state: a %s record of version %d, written by a newer openclaw release (this one reads up to version %d): upgrade this replica", e.Kind, e.Version, RecordVersion)
}

// errMalformed is the error of a record that is not one this package
// writes.
func errMalformed(kind, why string) error {
	return fmt.Errorf("shared state: a malformed %s record in Redis: %s", kind, why)
}

// header is what every record starts with.
type header struct {
	V *int `json:"v"`
}

// encodeRecord is the record v (a struct with a `V int json:"v"` field,
// which its maker sets to [RecordVersion]) as JSON.
func encodeRecord(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("sharedstate: a record does not encode: " + err.Error()) // records hold strings and numbers only
	}
	return b
}

// decodeRecord reads the record raw of kind into v: a JSON object of at
// most [MaxRecordBytes], no key twice, a "v" of 1 to [RecordVersion]
// (above: a [*VersionError]); members v does not name are ignored (a
// newer release of the same version may add some).
func decodeRecord(kind string, raw []byte, v any) error {
	if len(raw) > MaxRecordBytes {
		return errMalformed(kind, fmt.Sprintf("%d bytes, more than %d", len(raw), MaxRecordBytes))
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' || !jsonw.Valid(raw) {
		return errMalformed(kind, "not a JSON object")
	}
	switch path, dup, err := jsonw.DuplicateKey(raw); {
	case err != nil:
		return errMalformed(kind, err.Error())
	case dup:
		return errMalformed(kind, fmt.Sprintf("the key %s appears twice", path))
	}
	var h header
	if err := json.Unmarshal(raw, &h); err != nil {
		return errMalformed(kind, "its version is not a number")
	}
	switch {
	case h.V == nil:
		return errMalformed(kind, "no version (v)")
	case *h.V > RecordVersion:
		return &VersionError{Kind: kind, Version: *h.V}
	case *h.V < 1:
		return errMalformed(kind, fmt.Sprintf("version %d", *h.V))
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return errMalformed(kind, fmt.Sprintf("%s is a %s, not a %s", te.Field, te.Value, te.Type))
		}
		return errMalformed(kind, err.Error())
	}
	return nil
}
