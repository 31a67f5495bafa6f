package jsonw

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
)

// DuplicateKey reports the first object member of data whose key its
// object already has, at any depth, as a path from the root ("$.tokens[1].name"):
// encoding/json keeps the last of repeated keys without a word, so a
// configuration file that repeats one means two things. found is false
// when no key repeats; err is non-nil when data is not one JSON value.
// Keys compare as decoded strings, so an escaped spelling of a key repeats
// it.
func DuplicateKey(data []byte) (path string, found bool, err error) {
	var seen []map[string]bool // the keys of each open object
	err = walk(data, func(ev walkEvent) bool {
		switch {
		case ev.open && ev.object:
			seen = append(seen, map[string]bool{})
		case ev.close:
			if ev.object {
				seen = seen[:len(seen)-1]
			}
		case ev.key:
			keys := seen[len(seen)-1]
			if keys[ev.name] {
				path, found = ev.path, true
				return false
			}
			keys[ev.name] = true
		}
		return true
	})
	if found {
		return path, true, nil
	}
	return "", false, err
}

// PathAt returns the path from the root ("$.rate_limits[1].concurrent")
// of the value of data that ends at byte offset off, or that opens there
// for an object or array (the Offset of encoding/json's
// *json.UnmarshalTypeError); "" when no value does.
func PathAt(data []byte, off int64) string {
	var path string
	_ = walk(data, func(ev walkEvent) bool {
		if (ev.open || ev.scalar) && ev.end == off {
			path = ev.path
			return false
		}
		return true
	})
	return path
}

// walkEvent is one token of a walk: a key (its name and the path of its
// member), the opening or closing of an object or array, or a scalar
// value, with the path of the value and the offset just after the token.
type walkEvent struct {
	path                     string
	name                     string // a key's decoded name
	key, open, close, scalar bool
	object                   bool // for open and close: an object, not an array
	end                      int64
}

// walk calls fn with each token of data, the one JSON value, in order,
// until fn returns false; the error is non-nil when data is not one JSON
// value (as far as it was read).
func walk(data []byte, fn func(walkEvent) bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		object bool
		index  int
		key    string // the member being read, in an object
		path   string
	}
	var stack []*frame
	elem := func() string { // the path of the value about to be read
		if len(stack) == 0 {
			return "$"
		}
		f := stack[len(stack)-1]
		if f.object {
			return f.path + "." + f.key
		}
		return f.path + "[" + strconv.Itoa(f.index) + "]"
	}
	done := func() { // a value ended
		if len(stack) > 0 && !stack[len(stack)-1].object {
			stack[len(stack)-1].index++
		}
	}
	expectKey := func() bool {
		return len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].key == ""
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if len(stack) > 0 {
				return io.ErrUnexpectedEOF
			}
			return nil
		}
		if err != nil {
			return err
		}
		end := dec.InputOffset()
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				f := &frame{object: t == '{', path: elem()}
				if !fn(walkEvent{path: f.path, open: true, object: f.object, end: end}) {
					return nil
				}
				stack = append(stack, f)
			case '}', ']':
				f := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				if !fn(walkEvent{path: f.path, close: true, object: f.object, end: end}) {
					return nil
				}
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].key = ""
				}
				done()
			}
		default:
			if s, isKey := tok.(string); isKey && expectKey() {
				f := stack[len(stack)-1]
				if !fn(walkEvent{path: f.path + "." + s, name: s, key: true, end: end}) {
					return nil
				}
				f.key = s
				continue
			}
			if !fn(walkEvent{path: elem(), scalar: true, end: end}) {
				return nil
			}
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].key = ""
			}
			done()
		}
	}
}
