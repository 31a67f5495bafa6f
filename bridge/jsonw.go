package bridge

import (
	"bytes"
	"encoding/json"

	"github.com/openclaw-go/openclaw/internal/jsonw"
)

// This file holds the bridge's readings of raw JSON values in JavaScript's
// terms; the scanner and the writers are in internal/jsonw.

// pretty renders compact JSON as JSON.stringify(value, null, 2) would.
func pretty(compact []byte) string { return string(jsonw.Indent(compact)) }

// jsonKind classifies a raw JSON value by its first byte.
type jsonKind byte

const (
	kindNone jsonKind = iota
	kindNull
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func kindOf(raw json.RawMessage) jsonKind {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return kindNone
	}
	switch raw[0] {
	case 'n':
		return kindNull
	case 't', 'f':
		return kindBool
	case '"':
		return kindString
	case '[':
		return kindArray
	case '{':
		return kindObject
	default:
		return kindNumber
	}
}

// rawString returns the string a raw JSON value holds, and whether it is one.
func rawString(raw json.RawMessage) (string, bool) {
	if kindOf(raw) != kindString {
		return "", false
	}
	if s, ok := jsonw.PlainString(raw); ok {
		return s, true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// nonEmptyString returns the value of raw when it is a non-empty string.
func nonEmptyString(raw json.RawMessage) (string, bool) {
	s, ok := rawString(raw)
	return s, ok && s != ""
}

// present reports whether raw holds a value other than null or the empty
// string: JavaScript's notion of a usable optional field.
func present(raw json.RawMessage) bool {
	switch kindOf(raw) {
	case kindNone, kindNull:
		return false
	case kindString:
		s, _ := rawString(raw)
		return s != ""
	}
	return true
}
