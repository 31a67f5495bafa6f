package wasmbin

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// ValType is a value type byte: i32, i64, f32, f64, v128, funcref or
// externref.
type ValType byte

// The value types of the core specification.
const (
	I32       ValType = 0x7f
	I64       ValType = 0x7e
	F32       ValType = 0x7d
	F64       ValType = 0x7c
	V128      ValType = 0x7b
	FuncRef   ValType = 0x70
	ExternRef ValType = 0x6f
)

// String returns the type's text-format name, e.g. "i32".
func (v ValType) String() string {
	switch v {
	case I32:
		return "i32"
	case I64:
		return "i64"
	case F32:
		return "f32"
	case F64:
		return "f64"
	case V128:
		return "v128"
	case FuncRef:
		return "funcref"
	case ExternRef:
		return "externref"
	}
	return fmt.Sprintf("0x%02x", byte(v))
}

func valType(c byte) (ValType, error) {
	switch v := ValType(c); v {
	case I32, I64, F32, F64, V128, FuncRef, ExternRef:
		return v, nil
	}
	return 0, fmt.Errorf("unknown value type 0x%02x", c)
}

// ExternKind is the kind of an import or export.
type ExternKind byte

// The kinds of imports and exports.
const (
	ExternFunc   ExternKind = 0
	ExternTable  ExternKind = 1
	ExternMemory ExternKind = 2
	ExternGlobal ExternKind = 3
	ExternTag    ExternKind = 4
)

var kindNames = [...]string{"func", "table", "memory", "global", "tag"}

// String returns "func", "table", "memory", "global" or "tag".
func (k ExternKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind 0x%02x", byte(k))
}

// FuncType is a function signature.
type FuncType struct {
	Params, Results []ValType
}

// String formats a signature as "(i32, i32) -> (i64)".
func (f FuncType) String() string {
	return "(" + typeList(f.Params) + ") -> (" + typeList(f.Results) + ")"
}

func typeList(ts []ValType) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.String()
	}
	return strings.Join(s, ", ")
}

// Limits are the size limits of a memory (in 64 KiB pages) or a table (in
// elements).
type Limits struct {
	Min uint64
	// Max is the declared maximum when HasMax is set.
	Max    uint64
	HasMax bool
}

// String formats limits as "min 1" or "min 1, max 2".
func (l Limits) String() string {
	if !l.HasMax {
		return fmt.Sprintf("min %d", l.Min)
	}
	return fmt.Sprintf("min %d, max %d", l.Min, l.Max)
}

// TableType is a table's element type and limits.
type TableType struct {
	Elem   ValType
	Limits Limits
}

// String formats a table type as "funcref min 1".
func (t TableType) String() string { return t.Elem.String() + " " + t.Limits.String() }

// GlobalType is a global's value type and mutability.
type GlobalType struct {
	Type    ValType
	Mutable bool
}

// String formats a global type as "i32" or "mut i32".
func (g GlobalType) String() string {
	if g.Mutable {
		return "mut " + g.Type.String()
	}
	return g.Type.String()
}

// Import is one import. Which of TypeIndex, Table, Memory and Global is
// set depends on Kind: TypeIndex for a func or tag (an index into
// [Module.Types]).
type Import struct {
	Module, Name string
	Kind         ExternKind
	TypeIndex    uint32
	Table        TableType
	Memory       Limits
	Global       GlobalType
}

// Export is one export: Index is in the index space of Kind (imports
// first).
type Export struct {
	Name  string
	Kind  ExternKind
	Index uint32
}

// Module is what [Parse] reads of a module binary. Index spaces count
// imports first: function i < NumImported(ExternFunc) is an import.
type Module struct {
	Types   []FuncType
	Imports []Import
	// Funcs are the type indexes of the functions the module defines.
	Funcs    []uint32
	Tables   []TableType
	Memories []Limits
	Globals  []GlobalType
	Exports  []Export
}

// Section ids of the core specification.
const (
	SectionCustom    = 0
	SectionType      = 1
	SectionImport    = 2
	SectionFunction  = 3
	SectionTable     = 4
	SectionMemory    = 5
	SectionGlobal    = 6
	SectionExport    = 7
	SectionStart     = 8
	SectionElement   = 9
	SectionCode      = 10
	SectionData      = 11
	SectionDataCount = 12
	SectionTag       = 13
)

// Magic and Version open every core module binary.
const (
	Magic   = "\x00asm"
	Version = "\x01\x00\x00\x00"
)

// Parse reads a module binary. caps, when not nil, bounds it: the first
// cap exceeded fails Parse with a *[CapError] before anything more is
// read, and the Module returned with it holds what was read until then
// (the sections before the one over the cap). Code, element and data sections are walked instruction by
// instruction (for the locals, body-size and nesting caps) but not
// validated: that is the compiler's job. A malformed binary fails with an
// error naming the section.
func Parse(b []byte, caps *Caps) (*Module, error) {
	if len(b) < 8 || string(b[:4]) != Magic {
		return nil, errors.New("not a WebAssembly binary (no \\0asm magic)")
	}
	if v := binary.LittleEndian.Uint32(b[4:8]); v != 1 {
		return nil, fmt.Errorf("WebAssembly binary version %d (want 1: a core module, not a component)", v)
	}
	p := &parser{m: &Module{}, caps: caps}
	if err := p.cap(CapModuleBytes, uint64(len(b)), ""); err != nil {
		return p.m, err
	}
	r := &Reader{b: b, off: 8}
	for r.Len() > 0 {
		id, err := r.Byte()
		if err != nil {
			return nil, err
		}
		size, err := r.U32()
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", id, err)
		}
		body, err := r.Bytes(uint64(size))
		if err != nil {
			return nil, fmt.Errorf("section %d: size %d: %w", id, size, err)
		}
		if err := p.section(id, &Reader{b: body}); err != nil {
			var ce *CapError
			if errors.As(err, &ce) {
				return p.m, err
			}
			return nil, fmt.Errorf("section %d: %w", id, err)
		}
	}
	return p.m, nil
}

type parser struct {
	m    *Module
	caps *Caps

	funcs        uint64 // functions, imported and defined
	code         uint32 // function bodies read
	blocks       uint64 // control-flow targets of the current function body
	moduleBlocks uint64 // control-flow targets of all function bodies
	data         uint64 // bytes of data segments
	elements     uint64 // elements of element segments
}

// cap fails when value is over the cap c (0 in Caps means no cap).
func (p *parser) cap(c Cap, value uint64, where string) error {
	if p.caps == nil {
		return nil
	}
	if limit := p.caps.get(c); limit != 0 && value > limit {
		return &CapError{Cap: c, Value: value, Limit: limit, Where: where}
	}
	return nil
}

func (p *parser) section(id byte, s *Reader) error {
	m := p.m
	switch id {
	case SectionType:
		n, err := s.Count(1)
		if err != nil {
			return err
		}
		if err := p.cap(CapTypes, uint64(n), ""); err != nil {
			return err
		}
		for range n {
			form, err := s.Byte()
			if err != nil {
				return err
			}
			if form != 0x60 {
				return fmt.Errorf("type form 0x%02x is not a function type", form)
			}
			var ft FuncType
			for _, side := range []*[]ValType{&ft.Params, &ft.Results} {
				k, err := s.Count(1)
				if err != nil {
					return err
				}
				if err := p.cap(CapTypeArity, uint64(k), fmt.Sprintf("type %d", len(m.Types))); err != nil {
					return err
				}
				*side = make([]ValType, k)
				for i := range *side {
					c, err := s.Byte()
					if err != nil {
						return err
					}
					if (*side)[i], err = valType(c); err != nil {
						return err
					}
				}
			}
			m.Types = append(m.Types, ft)
		}
	case SectionImport:
		n, err := s.Count(4)
		if err != nil {
			return err
		}
		if err := p.cap(CapImports, uint64(n), ""); err != nil {
			return err
		}
		m.Imports = make([]Import, 0, n)
		for range n {
			var im Import
			if im.Module, err = s.Name(); err != nil {
				return err
			}
			if im.Name, err = s.Name(); err != nil {
				return err
			}
			kind, err := s.Byte()
			if err != nil {
				return err
			}
			im.Kind = ExternKind(kind)
			switch im.Kind {
			case ExternFunc, ExternTag:
				if im.Kind == ExternTag {
					if _, err := s.Byte(); err != nil { // attribute
						return err
					}
				}
				if im.TypeIndex, err = s.U32(); err != nil {
					return err
				}
				if int(im.TypeIndex) >= len(m.Types) {
					return fmt.Errorf("import %q.%q: type index %d out of range", im.Module, im.Name, im.TypeIndex)
				}
				if im.Kind == ExternFunc {
					p.funcs++
				}
			case ExternTable:
				if im.Table, err = p.tableType(s, fmt.Sprintf("import %q.%q", im.Module, im.Name)); err != nil {
					return err
				}
			case ExternMemory:
				if im.Memory, err = s.limits(); err != nil {
					return err
				}
			case ExternGlobal:
				if im.Global, err = s.globalType(); err != nil {
					return err
				}
			default:
				return fmt.Errorf("import %q.%q: unknown kind 0x%02x", im.Module, im.Name, kind)
			}
			m.Imports = append(m.Imports, im)
		}
		if err := p.cap(CapFunctions, p.funcs, ""); err != nil {
			return err
		}
	case SectionFunction:
		n, err := s.Count(1)
		if err != nil {
			return err
		}
		if err := p.cap(CapFunctions, p.funcs+uint64(n), ""); err != nil {
			return err
		}
		p.funcs += uint64(n)
		m.Funcs = make([]uint32, n)
		for i := range m.Funcs {
			if m.Funcs[i], err = s.U32(); err != nil {
				return err
			}
			if int(m.Funcs[i]) >= len(m.Types) {
				return fmt.Errorf("function type index %d out of range", m.Funcs[i])
			}
		}
	case SectionTable:
		n, err := s.Count(3)
		if err != nil {
			return err
		}
		for range n {
			t, err := p.tableType(s, fmt.Sprintf("table %d", len(m.Tables)))
			if err != nil {
				return err
			}
			m.Tables = append(m.Tables, t)
		}
	case SectionMemory:
		n, err := s.Count(2)
		if err != nil {
			return err
		}
		for range n {
			l, err := s.limits()
			if err != nil {
				return err
			}
			m.Memories = append(m.Memories, l)
		}
	case SectionGlobal:
		n, err := s.Count(3)
		if err != nil {
			return err
		}
		if err := p.cap(CapGlobals, uint64(n), ""); err != nil {
			return err
		}
		for range n {
			g, err := s.globalType()
			if err != nil {
				return err
			}
			if err := p.expr(s, fmt.Sprintf("global %d", len(m.Globals))); err != nil {
				return err
			}
			m.Globals = append(m.Globals, g)
		}
	case SectionExport:
		n, err := s.Count(3)
		if err != nil {
			return err
		}
		if err := p.cap(CapExports, uint64(n), ""); err != nil {
			return err
		}
		m.Exports = make([]Export, 0, n)
		for range n {
			var e Export
			if e.Name, err = s.Name(); err != nil {
				return err
			}
			kind, err := s.Byte()
			if err != nil {
				return err
			}
			if int(kind) >= len(kindNames) {
				return fmt.Errorf("export %q: unknown kind 0x%02x", e.Name, kind)
			}
			e.Kind = ExternKind(kind)
			if e.Index, err = s.U32(); err != nil {
				return err
			}
			m.Exports = append(m.Exports, e)
		}
	case SectionElement:
		return p.elementSection(s)
	case SectionCode:
		return p.codeSection(s)
	case SectionData:
		return p.dataSection(s)
	}
	// Custom, start, data count, tag and unknown sections are skipped by
	// their size (the compiler refuses unknown ones).
	return nil
}

func (p *parser) tableType(s *Reader, where string) (TableType, error) {
	c, err := s.Byte()
	if err != nil {
		return TableType{}, err
	}
	t := TableType{}
	if t.Elem, err = valType(c); err != nil {
		return t, err
	}
	if t.Limits, err = s.limits(); err != nil {
		return t, err
	}
	return t, p.cap(CapTableSize, t.Limits.Min, where)
}

func (r *Reader) limits() (Limits, error) {
	flags, err := r.Byte()
	if err != nil {
		return Limits{}, err
	}
	bits := uint(32)
	if flags&0x04 != 0 {
		bits = 64
	}
	var l Limits
	if l.Min, err = r.ULEB(bits); err != nil {
		return l, err
	}
	if flags&0x01 != 0 {
		if l.Max, err = r.ULEB(bits); err != nil {
			return l, err
		}
		l.HasMax = true
	}
	return l, nil
}

func (r *Reader) globalType() (GlobalType, error) {
	c, err := r.Byte()
	if err != nil {
		return GlobalType{}, err
	}
	t, err := valType(c)
	if err != nil {
		return GlobalType{}, err
	}
	mut, err := r.Byte()
	if err != nil {
		return GlobalType{}, err
	}
	return GlobalType{Type: t, Mutable: mut == 1}, nil
}

// NumImported returns how many imports of kind k the module has: the
// first index of k's index space that the module defines.
func (m *Module) NumImported(k ExternKind) uint32 {
	n := uint32(0)
	for _, im := range m.Imports {
		if im.Kind == k {
			n++
		}
	}
	return n
}

// FuncTypeOf returns the signature of function idx (imports first).
func (m *Module) FuncTypeOf(idx uint32) (FuncType, bool) {
	ti, ok := uint32(0), false
	for _, im := range m.Imports {
		if im.Kind != ExternFunc {
			continue
		}
		if idx == 0 {
			ti, ok = im.TypeIndex, true
			break
		}
		idx--
	}
	if !ok {
		if uint64(idx) >= uint64(len(m.Funcs)) {
			return FuncType{}, false
		}
		ti = m.Funcs[idx]
	}
	return m.Types[ti], true
}

// ExportKinds returns the module's export names with their kinds.
func (m *Module) ExportKinds() map[string]ExternKind {
	out := make(map[string]ExternKind, len(m.Exports))
	for _, e := range m.Exports {
		out[e.Name] = e.Kind
	}
	return out
}
