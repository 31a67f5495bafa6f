package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// This file reads the static shape of a WebAssembly binary (imports,
// exports, function signatures, memories) without compiling it, so that
// `openclaw policy inspect` can describe a module the host refuses. It
// follows the binary format of the WebAssembly core specification §5
// (https://webassembly.github.io/spec/core/binary/modules.html) and reads
// only the sections it needs, skipping the others by their size.

// Import is one import of a module.
type Import struct {
	Module string `json:"module"`
	Name   string `json:"name"`
	// Kind is func, table, memory, global or tag.
	Kind string `json:"kind"`
	// Type is the function signature "(i32, i32) -> (i64)" for a func,
	// the limits for a memory or table, the value type for a global.
	Type string `json:"type,omitempty"`
}

// Export is one export of a module.
type Export struct {
	Name string `json:"name"`
	// Kind is func, table, memory, global or tag.
	Kind string `json:"kind"`
	// Type is as for [Import].
	Type string `json:"type,omitempty"`
}

// Memory is a module's linear memory, in 64 KiB pages.
type Memory struct {
	InitialPages uint64 `json:"initial_pages"`
	// MaxPages is the declared maximum; nil when the module declares none
	// (the host's cap applies either way).
	MaxPages *uint64 `json:"max_pages,omitempty"`
	// Imported is true when the memory is imported rather than defined
	// (which the policy ABI forbids).
	Imported bool `json:"imported,omitempty"`
}

// wasmShape is what parseWasm reads.
type wasmShape struct {
	imports  []Import
	exports  []Export
	memories []Memory
}

var errShort = errors.New("unexpected end of data")

type wreader struct {
	b   []byte
	off int
}

func (r *wreader) byte() (byte, error) {
	if r.off >= len(r.b) {
		return 0, errShort
	}
	c := r.b[r.off]
	r.off++
	return c, nil
}

// uleb reads an unsigned LEB128 of at most bits bits.
func (r *wreader) uleb(bits uint) (uint64, error) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if shift >= bits+7 {
			return 0, errors.New("LEB128 number too long")
		}
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, nil
		}
	}
}

func (r *wreader) u32() (uint32, error) {
	v, err := r.uleb(32)
	if v > 1<<32-1 {
		return 0, errors.New("u32 out of range")
	}
	return uint32(v), err
}

func (r *wreader) bytes(n uint32) ([]byte, error) {
	if uint64(r.off)+uint64(n) > uint64(len(r.b)) {
		return nil, errShort
	}
	b := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return b, nil
}

func (r *wreader) name() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	b, err := r.bytes(n)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", errors.New("name is not UTF-8")
	}
	return string(b), nil
}

// count reads a vector length, refusing one that cannot fit in the data
// left (each element takes at least one byte).
func (r *wreader) count() (uint32, error) {
	n, err := r.u32()
	if err != nil {
		return 0, err
	}
	if int(n) > len(r.b)-r.off {
		return 0, fmt.Errorf("vector of %d elements in %d bytes", n, len(r.b)-r.off)
	}
	return n, nil
}

func valType(c byte) (string, error) {
	switch c {
	case 0x7f:
		return "i32", nil
	case 0x7e:
		return "i64", nil
	case 0x7d:
		return "f32", nil
	case 0x7c:
		return "f64", nil
	case 0x7b:
		return "v128", nil
	case 0x70:
		return "funcref", nil
	case 0x6f:
		return "externref", nil
	}
	return "", fmt.Errorf("unknown value type 0x%02x", c)
}

func (r *wreader) limits() (min uint64, max *uint64, err error) {
	flags, err := r.byte()
	if err != nil {
		return 0, nil, err
	}
	bits := uint(32)
	if flags&0x04 != 0 {
		bits = 64
	}
	if min, err = r.uleb(bits); err != nil {
		return 0, nil, err
	}
	if flags&0x01 != 0 {
		m, err := r.uleb(bits)
		if err != nil {
			return 0, nil, err
		}
		max = &m
	}
	return min, max, nil
}

func limitsString(min uint64, max *uint64) string {
	if max == nil {
		return fmt.Sprintf("min %d", min)
	}
	return fmt.Sprintf("min %d, max %d", min, *max)
}

var kindNames = []string{"func", "table", "memory", "global", "tag"}

// parseWasm reads the imports, exports and memories of a module binary.
func parseWasm(b []byte) (*wasmShape, error) {
	if len(b) < 8 || string(b[:4]) != "\x00asm" {
		return nil, errors.New("not a WebAssembly binary (no \\0asm magic)")
	}
	if v := binary.LittleEndian.Uint32(b[4:8]); v != 1 {
		return nil, fmt.Errorf("WebAssembly binary version %d (want 1: a core module, not a component)", v)
	}
	r := &wreader{b: b, off: 8}
	var (
		types     []string // function signatures by type index
		funcTypes []uint32 // type index by function index (imports first)
		globals   []string // global types by index (imports first)
		tables    []string
		shape     = &wasmShape{}
		exports   []struct {
			name string
			kind byte
			idx  uint32
		}
	)
	for r.off < len(b) {
		id, err := r.byte()
		if err != nil {
			return nil, err
		}
		size, err := r.u32()
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", id, err)
		}
		body, err := r.bytes(size)
		if err != nil {
			return nil, fmt.Errorf("section %d: size %d: %w", id, size, err)
		}
		s := &wreader{b: body}
		switch id {
		case 1: // type
			err = s.vec(func() error {
				form, err := s.byte()
				if err != nil {
					return err
				}
				if form != 0x60 {
					return fmt.Errorf("type form 0x%02x is not a function type", form)
				}
				var sides [2][]string
				for i := range sides {
					n, err := s.count()
					if err != nil {
						return err
					}
					for range n {
						c, err := s.byte()
						if err != nil {
							return err
						}
						t, err := valType(c)
						if err != nil {
							return err
						}
						sides[i] = append(sides[i], t)
					}
				}
				types = append(types, "("+strings.Join(sides[0], ", ")+") -> ("+strings.Join(sides[1], ", ")+")")
				return nil
			})
		case 2: // import
			err = s.vec(func() error {
				var im Import
				var err error
				if im.Module, err = s.name(); err != nil {
					return err
				}
				if im.Name, err = s.name(); err != nil {
					return err
				}
				kind, err := s.byte()
				if err != nil {
					return err
				}
				switch kind {
				case 0x00, 0x04: // func, tag: a type index
					ti, err := s.u32()
					if err != nil {
						return err
					}
					if int(ti) >= len(types) {
						return fmt.Errorf("import %q.%q: type index %d out of range", im.Module, im.Name, ti)
					}
					im.Type = types[ti]
					if kind == 0x00 {
						funcTypes = append(funcTypes, ti)
					}
				case 0x01: // table
					c, err := s.byte()
					if err != nil {
						return err
					}
					t, err := valType(c)
					if err != nil {
						return err
					}
					min, max, err := s.limits()
					if err != nil {
						return err
					}
					im.Type = t + " " + limitsString(min, max)
					tables = append(tables, im.Type)
				case 0x02: // memory
					min, max, err := s.limits()
					if err != nil {
						return err
					}
					im.Type = limitsString(min, max)
					shape.memories = append(shape.memories, Memory{InitialPages: min, MaxPages: max, Imported: true})
				case 0x03: // global
					t, err := s.globalType()
					if err != nil {
						return err
					}
					im.Type = t
					globals = append(globals, t)
				default:
					return fmt.Errorf("import %q.%q: unknown kind 0x%02x", im.Module, im.Name, kind)
				}
				im.Kind = kindNames[kind]
				shape.imports = append(shape.imports, im)
				return nil
			})
		case 3: // function
			err = s.vec(func() error {
				ti, err := s.u32()
				if err != nil {
					return err
				}
				if int(ti) >= len(types) {
					return fmt.Errorf("function type index %d out of range", ti)
				}
				funcTypes = append(funcTypes, ti)
				return nil
			})
		case 4: // table
			err = s.vec(func() error {
				c, err := s.byte()
				if err != nil {
					return err
				}
				t, err := valType(c)
				if err != nil {
					return err
				}
				min, max, err := s.limits()
				if err != nil {
					return err
				}
				tables = append(tables, t+" "+limitsString(min, max))
				return nil
			})
		case 5: // memory
			err = s.vec(func() error {
				min, max, err := s.limits()
				if err != nil {
					return err
				}
				shape.memories = append(shape.memories, Memory{InitialPages: min, MaxPages: max})
				return nil
			})
		case 6: // global: only the types are read; the init expressions end at 0x0b
			err = s.vec(func() error {
				t, err := s.globalType()
				if err != nil {
					return err
				}
				globals = append(globals, t)
				return s.skipConstExpr()
			})
		case 7: // export
			err = s.vec(func() error {
				n, err := s.name()
				if err != nil {
					return err
				}
				kind, err := s.byte()
				if err != nil {
					return err
				}
				idx, err := s.u32()
				if err != nil {
					return err
				}
				if int(kind) >= len(kindNames) {
					return fmt.Errorf("export %q: unknown kind 0x%02x", n, kind)
				}
				exports = append(exports, struct {
					name string
					kind byte
					idx  uint32
				}{n, kind, idx})
				return nil
			})
		}
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", id, err)
		}
	}
	for _, ex := range exports {
		e := Export{Name: ex.name, Kind: kindNames[ex.kind]}
		switch ex.kind {
		case 0x00:
			if int(ex.idx) < len(funcTypes) {
				e.Type = types[funcTypes[ex.idx]]
			}
		case 0x01:
			if int(ex.idx) < len(tables) {
				e.Type = tables[ex.idx]
			}
		case 0x02:
			if int(ex.idx) < len(shape.memories) {
				m := shape.memories[ex.idx]
				e.Type = limitsString(m.InitialPages, m.MaxPages)
			}
		case 0x03:
			if int(ex.idx) < len(globals) {
				e.Type = globals[ex.idx]
			}
		}
		shape.exports = append(shape.exports, e)
	}
	return shape, nil
}

func (r *wreader) vec(each func() error) error {
	n, err := r.count()
	if err != nil {
		return err
	}
	for range n {
		if err := each(); err != nil {
			return err
		}
	}
	return nil
}

func (r *wreader) globalType() (string, error) {
	c, err := r.byte()
	if err != nil {
		return "", err
	}
	t, err := valType(c)
	if err != nil {
		return "", err
	}
	mut, err := r.byte()
	if err != nil {
		return "", err
	}
	if mut == 1 {
		return "mut " + t, nil
	}
	return t, nil
}

// skipConstExpr skips a constant expression: the MVP's single constant
// instructions and global.get, then end (0x0b). Extended constant
// expressions fall back to scanning for the end byte of the section's
// remaining global, which is good enough to read the types.
func (r *wreader) skipConstExpr() error {
	for {
		op, err := r.byte()
		if err != nil {
			return err
		}
		switch op {
		case 0x0b: // end
			return nil
		case 0x41, 0x23, 0xd2: // i32.const, global.get, ref.func
			_, err = r.uleb(64)
		case 0x42: // i64.const
			_, err = r.uleb(70)
		case 0x43: // f32.const
			_, err = r.bytes(4)
		case 0x44: // f64.const
			_, err = r.bytes(8)
		case 0xd0: // ref.null t
			_, err = r.byte()
		case 0xfd: // v128.const
			if _, err = r.u32(); err == nil {
				_, err = r.bytes(16)
			}
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended-const arithmetic
		default:
			return fmt.Errorf("unsupported instruction 0x%02x in a constant expression", op)
		}
		if err != nil {
			return err
		}
	}
}
