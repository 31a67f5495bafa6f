package wasmhost

import "testing"

// A grow past the capacity reserves a quarter more, not twice as much
// (an instance's linear memory stays close to what the guest asked for),
// keeps the contents, and a grow within the capacity reuses the buffer;
// a size over the cap is refused and recorded.
func TestCappedMemoryGrowth(t *testing.T) {
	t.Parallel()
	const page = 64 << 10
	var refused uint64
	m := &cappedMemory{limit: 64 * page, refused: &refused}
	b := m.Reallocate(17 * page)
	b[0] = 7
	b = m.Reallocate(18 * page)
	if len(b) != 18*page || cap(b) > 22*page || b[0] != 7 {
		t.Fatalf("after a one-page grow: len %d, cap %d (want ≤ %d), first byte %d", len(b), cap(b), 22*page, b[0])
	}
	c := m.Reallocate(uint64(cap(b)))
	if &c[0] != &b[0] {
		t.Error("a grow within the capacity copied the memory")
	}
	if m.Reallocate(65*page) != nil || refused != 65*page {
		t.Errorf("a grow past the cap: refused = %d, want %d", refused, 65*page)
	}
}
