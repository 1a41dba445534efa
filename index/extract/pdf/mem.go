package pdf

// heapLinearMemory is a WebAssembly memory on the Go heap, grown by
// copying: the fallback where the memory cannot be mapped.
type heapLinearMemory struct {
	buf []byte
	max uint64
}

// Reallocate grows the memory to size bytes, or returns nil past max.
func (m *heapLinearMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if size > uint64(cap(m.buf)) {
		grown := make([]byte, size, min(max(size, 2*uint64(cap(m.buf))), m.max))
		copy(grown, m.buf)
		m.buf = grown
	}
	m.buf = m.buf[:size]
	return m.buf
}

// Free drops the memory to the garbage collector.
func (m *heapLinearMemory) Free() { m.buf = nil }
