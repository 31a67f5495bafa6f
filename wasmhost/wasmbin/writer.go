package wasmbin

// Writer builds a module binary: start with [NewWriter], add sections in
// the order of the core specification with [Writer.Section].
type Writer []byte

// NewWriter returns a Writer holding the magic and version.
func NewWriter() Writer { return Writer(Magic + Version) }

// U32 appends v as an unsigned LEB128 number.
func (w *Writer) U32(v uint32) { w.ULEB(uint64(v)) }

// ULEB appends v as an unsigned LEB128 number.
func (w *Writer) ULEB(v uint64) {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			*w = append(*w, c|0x80)
			continue
		}
		*w = append(*w, c)
		return
	}
}

// Byte appends bytes as they are.
func (w *Writer) Byte(b ...byte) { *w = append(*w, b...) }

// Name appends a name: its length, then its bytes.
func (w *Writer) Name(s string) {
	w.U32(uint32(len(s)))
	*w = append(*w, s...)
}

// Section appends a section of the given id with body as its contents.
func (w *Writer) Section(id byte, body Writer) {
	*w = append(*w, id)
	w.U32(uint32(len(body)))
	*w = append(*w, body...)
}

// FuncType appends a function type (the 0x60 form) to a type section's
// vector.
func (w *Writer) FuncType(ft FuncType) {
	w.Byte(0x60)
	for _, side := range [][]ValType{ft.Params, ft.Results} {
		w.U32(uint32(len(side)))
		for _, t := range side {
			w.Byte(byte(t))
		}
	}
}

// Encode writes m as a module binary, with bodies as the code of m.Funcs
// (each a function body: its local declarations, instructions and final
// end). Globals are initialized to zero. It is the inverse of [Parse] for
// the modules the host builds itself and for tests; element and data
// segments are not written.
func Encode(m *Module, bodies []Writer) []byte {
	w := NewWriter()
	vec := func(id byte, n int, each func(b *Writer, i int)) {
		if n == 0 {
			return
		}
		var b Writer
		b.U32(uint32(n))
		for i := range n {
			each(&b, i)
		}
		w.Section(id, b)
	}
	limits := func(b *Writer, l Limits) {
		if l.HasMax {
			b.Byte(0x01)
			b.ULEB(l.Min)
			b.ULEB(l.Max)
			return
		}
		b.Byte(0x00)
		b.ULEB(l.Min)
	}
	vec(SectionType, len(m.Types), func(b *Writer, i int) { b.FuncType(m.Types[i]) })
	vec(SectionImport, len(m.Imports), func(b *Writer, i int) {
		im := m.Imports[i]
		b.Name(im.Module)
		b.Name(im.Name)
		b.Byte(byte(im.Kind))
		switch im.Kind {
		case ExternFunc:
			b.U32(im.TypeIndex)
		case ExternTag:
			b.Byte(0)
			b.U32(im.TypeIndex)
		case ExternTable:
			b.Byte(byte(im.Table.Elem))
			limits(b, im.Table.Limits)
		case ExternMemory:
			limits(b, im.Memory)
		case ExternGlobal:
			b.Byte(byte(im.Global.Type), boolByte(im.Global.Mutable))
		}
	})
	vec(SectionFunction, len(m.Funcs), func(b *Writer, i int) { b.U32(m.Funcs[i]) })
	vec(SectionTable, len(m.Tables), func(b *Writer, i int) {
		b.Byte(byte(m.Tables[i].Elem))
		limits(b, m.Tables[i].Limits)
	})
	vec(SectionMemory, len(m.Memories), func(b *Writer, i int) { limits(b, m.Memories[i]) })
	vec(SectionGlobal, len(m.Globals), func(b *Writer, i int) {
		g := m.Globals[i]
		b.Byte(byte(g.Type), boolByte(g.Mutable))
		switch g.Type {
		case I64:
			b.Byte(0x42, 0)
		case F32:
			b.Byte(0x43, 0, 0, 0, 0)
		case F64:
			b.Byte(0x44, 0, 0, 0, 0, 0, 0, 0, 0)
		case FuncRef, ExternRef:
			b.Byte(0xd0, byte(g.Type))
		default:
			b.Byte(0x41, 0)
		}
		b.Byte(0x0b)
	})
	vec(SectionExport, len(m.Exports), func(b *Writer, i int) {
		b.Name(m.Exports[i].Name)
		b.Byte(byte(m.Exports[i].Kind))
		b.U32(m.Exports[i].Index)
	})
	vec(SectionCode, len(bodies), func(b *Writer, i int) {
		b.U32(uint32(len(bodies[i])))
		b.Byte(bodies[i]...)
	})
	return w
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}
