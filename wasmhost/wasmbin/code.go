package wasmbin

import "fmt"

func (p *parser) codeSection(s *Reader) error {
	n, err := s.Count(2)
	if err != nil {
		return err
	}
	first := p.m.NumImported(ExternFunc)
	for i := range n {
		idx := uint64(first) + uint64(i)
		where := fmt.Sprintf("function %d", idx)
		size, err := s.U32()
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if err := p.cap(CapFunctionBytes, uint64(size), where); err != nil {
			return err
		}
		body, err := s.Bytes(uint64(size))
		if err != nil {
			return fmt.Errorf("%s: body of %d bytes: %w", where, size, err)
		}
		if err := p.body(&Reader{b: body}, where); err != nil {
			return err
		}
		p.code++
	}
	return nil
}

// body reads a function body: its local declarations, then its
// instructions.
func (p *parser) body(r *Reader, where string) error {
	groups, err := r.Count(2)
	if err != nil {
		return fmt.Errorf("%s: locals: %w", where, err)
	}
	var locals uint64
	for range groups {
		k, err := r.U32()
		if err != nil {
			return fmt.Errorf("%s: locals: %w", where, err)
		}
		locals += uint64(k)
		if err := p.cap(CapLocals, locals, where); err != nil {
			return err
		}
		c, err := r.Byte()
		if err != nil {
			return fmt.Errorf("%s: locals: %w", where, err)
		}
		if _, err := valType(c); err != nil {
			return fmt.Errorf("%s: locals: %w", where, err)
		}
	}
	p.blocks = 0
	if err := p.instrs(r, where); err != nil {
		return err
	}
	if r.Len() != 0 {
		return fmt.Errorf("%s: %d bytes after the final end", where, r.Len())
	}
	return nil
}

// expr reads a constant expression (an instruction sequence ending in
// end), as in globals and element and data segment offsets.
func (p *parser) expr(r *Reader, where string) error { return p.instrs(r, where) }

// instrs reads instructions up to and including the end that closes the
// sequence, checking the nesting cap. Immediates are read per the
// instruction's encoding; instructions of proposals the host's compiler
// does not implement are refused as unknown.
func (p *parser) instrs(r *Reader, where string) error {
	depth := uint64(0)
	for {
		at := r.Offset()
		op, err := r.Byte()
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if err := p.immediates(r, op, &depth, where); err != nil {
			if _, ok := err.(*CapError); ok {
				return err
			}
			return fmt.Errorf("%s: instruction 0x%02x at offset %d: %w", where, op, at, err)
		}
		if op == 0x0b {
			if depth == 0 {
				return nil
			}
			depth--
		}
	}
}

func (p *parser) immediates(r *Reader, op byte, depth *uint64, where string) error {
	var err error
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
		*depth++
		if err := p.cap(CapNesting, *depth, where); err != nil {
			return err
		}
		if err := p.block(1, where); err != nil {
			return err
		}
		_, err = r.SLEB(33) // block type: 0x40, a value type or a type index
	case op == 0x0c || op == 0x0d: // br, br_if
		_, err = r.U32()
	case op == 0x0e: // br_table
		var n uint32
		if n, err = r.Count(1); err == nil {
			for i := uint32(0); i <= n && err == nil; i++ {
				_, err = r.U32()
			}
		}
	case op == 0x10 || op == 0x12: // call, return_call
		_, err = r.U32()
	case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
		if _, err = r.U32(); err == nil {
			_, err = r.U32()
		}
	case op == 0x1c: // select t*
		var n uint32
		if n, err = r.Count(1); err == nil {
			_, err = r.Bytes(uint64(n))
		}
	case op >= 0x20 && op <= 0x26: // local.*, global.*, table.get/set
		_, err = r.U32()
	case op >= 0x28 && op <= 0x3e: // loads and stores
		err = r.memarg()
	case op == 0x3f || op == 0x40: // memory.size, memory.grow
		_, err = r.U32()
	case op == 0x41: // i32.const
		_, err = r.SLEB(32)
	case op == 0x42: // i64.const
		_, err = r.SLEB(64)
	case op == 0x43:
		_, err = r.Bytes(4)
	case op == 0x44:
		_, err = r.Bytes(8)
	case op == 0xd0: // ref.null t
		_, err = r.SLEB(33)
	case op == 0xd2: // ref.func
		_, err = r.U32()
	case op == 0xfc:
		err = r.prefixFC()
	case op == 0xfd:
		err = r.prefixFD()
	case op == 0xfe:
		err = r.prefixFE()
	case op <= 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b,
		op >= 0x45 && op <= 0xc4, op == 0xd1:
		// no immediates
	default:
		return fmt.Errorf("unknown opcode")
	}
	return err
}

// block counts n blocks (block, loop, if) of the current function: the
// compiler's work grows faster than linearly with them.
func (p *parser) block(n uint64, where string) error {
	p.blocks += n
	p.moduleBlocks += n
	if err := p.cap(CapBlocks, p.blocks, where); err != nil {
		return err
	}
	return p.cap(CapModuleBlocks, p.moduleBlocks, "")
}

func (r *Reader) memarg() error {
	align, err := r.U32()
	if err != nil {
		return err
	}
	if align&0x40 != 0 { // multi-memory: a memory index follows
		if _, err := r.U32(); err != nil {
			return err
		}
	}
	_, err = r.ULEB(64)
	return err
}

// prefixFC reads the saturating truncations, bulk memory and table
// instructions.
func (r *Reader) prefixFC() error {
	sub, err := r.U32()
	if err != nil {
		return err
	}
	n := 0
	switch {
	case sub <= 7: // trunc_sat
	case sub == 8: // memory.init data, mem
		n = 2
	case sub == 9, sub == 13, sub == 15, sub == 16, sub == 17: // data.drop, elem.drop, table.grow/size/fill
		n = 1
	case sub == 10, sub == 12, sub == 14: // memory.copy, table.init, table.copy
		n = 2
	case sub == 11: // memory.fill
		n = 1
	default:
		return fmt.Errorf("unknown 0xfc instruction %d", sub)
	}
	for range n {
		if _, err := r.U32(); err != nil {
			return err
		}
	}
	return nil
}

// prefixFD reads the SIMD instructions (fixed-width and relaxed).
func (r *Reader) prefixFD() error {
	sub, err := r.U32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 11, sub == 92, sub == 93: // loads, stores, load_zero
		return r.memarg()
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		_, err = r.Bytes(16)
	case sub >= 21 && sub <= 34: // extract/replace lane
		_, err = r.Byte()
	case sub >= 84 && sub <= 91: // load/store lane
		if err = r.memarg(); err == nil {
			_, err = r.Byte()
		}
	case sub <= 0x113:
	default:
		return fmt.Errorf("unknown 0xfd instruction %d", sub)
	}
	return err
}

// prefixFE reads the atomic instructions of the threads proposal.
func (r *Reader) prefixFE() error {
	sub, err := r.U32()
	if err != nil {
		return err
	}
	switch {
	case sub == 0x03: // atomic.fence
		_, err = r.Byte()
		return err
	case sub <= 0x4e:
		return r.memarg()
	}
	return fmt.Errorf("unknown 0xfe instruction %d", sub)
}

func (p *parser) elementSection(s *Reader) error {
	n, err := s.Count(2)
	if err != nil {
		return err
	}
	if err := p.cap(CapElementSegments, uint64(n), ""); err != nil {
		return err
	}
	for i := range n {
		where := fmt.Sprintf("element segment %d", i)
		flags, err := s.U32()
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if flags > 7 {
			return fmt.Errorf("%s: unknown flags %d", where, flags)
		}
		if flags&0x02 != 0 && flags&0x01 == 0 { // an explicit table index
			if _, err := s.U32(); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
		}
		if flags&0x01 == 0 { // active: an offset
			if err := p.expr(s, where); err != nil {
				return err
			}
		}
		if flags&0x03 != 0 { // an element kind or reference type
			if _, err := s.Byte(); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
		}
		k, err := s.Count(1)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		p.elements += uint64(k)
		if err := p.cap(CapElements, p.elements, where); err != nil {
			return err
		}
		for range k {
			if flags&0x04 != 0 {
				if err := p.expr(s, where); err != nil {
					return err
				}
			} else if _, err := s.U32(); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
		}
	}
	return nil
}

func (p *parser) dataSection(s *Reader) error {
	n, err := s.Count(2)
	if err != nil {
		return err
	}
	if err := p.cap(CapDataSegments, uint64(n), ""); err != nil {
		return err
	}
	for i := range n {
		where := fmt.Sprintf("data segment %d", i)
		flags, err := s.U32()
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		switch flags {
		case 0:
			err = p.expr(s, where)
		case 1:
		case 2:
			if _, err = s.U32(); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			err = p.expr(s, where)
		default:
			return fmt.Errorf("%s: unknown flags %d", where, flags)
		}
		if err != nil {
			return err
		}
		size, err := s.U32()
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if _, err := s.Bytes(uint64(size)); err != nil {
			return fmt.Errorf("%s: %d bytes: %w", where, size, err)
		}
		p.data += uint64(size)
		if err := p.cap(CapDataBytes, p.data, where); err != nil {
			return err
		}
	}
	return nil
}
