package wasmhost

// cappedMemory backs one instance's linear memory and enforces the
// module's memory cap itself, so that the host can tell a refused
// memory.grow (the guest ran out of memory) from any other trap. The
// wazero Runtime's own limit is set to the 4 GiB maximum so that every
// grow request reaches Reallocate.
type cappedMemory struct {
	limit   uint64 // bytes
	buf     []byte
	refused *uint64 // set to a size refused by the cap
}

func (m *cappedMemory) Reallocate(size uint64) []byte {
	if size > m.limit {
		*m.refused = size
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		// Bytes past len were never handed out (memory never shrinks), so
		// they are still zero.
		m.buf = m.buf[:size]
		return m.buf
	}
	// A quarter more than before, not twice: a policy guest grows its
	// memory a few times while it starts and rarely after, and every byte
	// of the capacity can end up resident (the allocator zeroes reused
	// memory), so the spare room is kept small.
	c := min(max(size, uint64(cap(m.buf))+uint64(cap(m.buf))/4), m.limit)
	nb := make([]byte, size, c)
	copy(nb, m.buf)
	m.buf = nb
	return m.buf
}

func (m *cappedMemory) Free() { m.buf = nil }
