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
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		object bool
		keys   map[string]bool
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
				return "", false, io.ErrUnexpectedEOF
			}
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				stack = append(stack, &frame{object: t == '{', keys: map[string]bool{}, path: elem()})
			case '}', ']':
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].key = ""
				}
				done()
			}
		default:
			if s, isKey := tok.(string); isKey && expectKey() {
				f := stack[len(stack)-1]
				if f.keys[s] {
					return f.path + "." + s, true, nil
				}
				f.keys[s], f.key = true, s
				continue
			}
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].key = ""
			}
			done()
		}
	}
}
