// Package wasmbin reads and writes the WebAssembly binary format (the
// core specification's chapter 5, "Binary Format") without compiling
// anything: a module's imports, exports, signatures and memories, the
// sizes that [Limits] bound (locals, function bodies, block nesting, …),
// and a [Writer] for small modules built by the host. It imports only the
// standard library, so that wasmhost, the policy engine and the OPA
// adapter share one reader.
//
// [Parse] is safe on untrusted bytes: it never panics, its work is linear
// in the input, and what it allocates is bounded by the input's size (a
// declared count is checked against the bytes left before anything is
// allocated for it).
package wasmbin

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrShort is returned when the data ends inside a construct.
var ErrShort = errors.New("unexpected end of data")

// Reader walks a byte slice with bounds checks. Its methods return
// [ErrShort] at the end of the data and an error naming the problem for a
// malformed LEB128 number or name.
type Reader struct {
	b   []byte
	off int
}

// NewReader returns a Reader at the start of b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Len returns the number of bytes left.
func (r *Reader) Len() int { return len(r.b) - r.off }

// Offset returns the number of bytes read so far.
func (r *Reader) Offset() int { return r.off }

// Byte reads one byte.
func (r *Reader) Byte() (byte, error) {
	if r.off >= len(r.b) {
		return 0, ErrShort
	}
	c := r.b[r.off]
	r.off++
	return c, nil
}

// ULEB reads an unsigned LEB128 number of at most bits (≤ 64) bits.
func (r *Reader) ULEB(bits uint) (uint64, error) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if shift >= bits {
			return 0, errors.New("LEB128 number too long")
		}
		c, err := r.Byte()
		if err != nil {
			return 0, err
		}
		if bits-shift < 7 && c&0x7f>>(bits-shift) != 0 {
			return 0, fmt.Errorf("LEB128 number over %d bits", bits)
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, nil
		}
	}
}

// SLEB reads a signed LEB128 number of at most bits (≤ 64) bits.
func (r *Reader) SLEB(bits uint) (int64, error) {
	var v int64
	for shift := uint(0); ; shift += 7 {
		if shift >= bits {
			return 0, errors.New("LEB128 number too long")
		}
		c, err := r.Byte()
		if err != nil {
			return 0, err
		}
		if shift < 64 {
			v |= int64(c&0x7f) << shift
		}
		if c&0x80 == 0 {
			if shift+7 < 64 && c&0x40 != 0 {
				v |= -1 << (shift + 7)
			}
			return v, nil
		}
	}
}

// U32 reads an unsigned LEB128 u32.
func (r *Reader) U32() (uint32, error) {
	v, err := r.ULEB(32)
	return uint32(v), err
}

// Bytes reads n bytes; the result aliases the Reader's data.
func (r *Reader) Bytes(n uint64) ([]byte, error) {
	if n > uint64(r.Len()) {
		return nil, ErrShort
	}
	b := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return b, nil
}

// Name reads a name: a u32 length and that many bytes of UTF-8.
func (r *Reader) Name() (string, error) {
	n, err := r.U32()
	if err != nil {
		return "", err
	}
	b, err := r.Bytes(uint64(n))
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", errors.New("name is not UTF-8")
	}
	return string(b), nil
}

// Count reads a vector length, refusing one that cannot fit in the data
// left at minSize bytes per element, so that a caller can allocate for it.
func (r *Reader) Count(minSize int) (uint32, error) {
	n, err := r.U32()
	if err != nil {
		return 0, err
	}
	if uint64(n)*uint64(max(minSize, 1)) > uint64(r.Len()) {
		return 0, fmt.Errorf("vector of %d elements in %d bytes", n, r.Len())
	}
	return n, nil
}
