//go:build unix

package extract

import (
	"github.com/tetratelabs/wazero/experimental"
	"golang.org/x/sys/unix"
)

// pdfMemory backs PDFium's WebAssembly memory with an anonymous mapping of
// its maximum size, reserved (PROT_NONE) and made readable and writable
// as the memory grows. Growing never copies, so a process holds what the
// instance uses, not twice that during a copy, and Free unmaps it: the
// memory goes back to the system when the instance closes, whatever the
// Go heap does.
var pdfMemory experimental.MemoryAllocator = experimental.MemoryAllocatorFunc(func(capacity, max uint64) experimental.LinearMemory {
	mem, err := unix.Mmap(-1, 0, int(max), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		return &heapLinearMemory{max: max}
	}
	return &mappedLinearMemory{mem: mem}
})

type mappedLinearMemory struct {
	mem       []byte // the whole reservation
	committed int    // bytes made readable and writable, from 0
}

// Reallocate grows the accessible part to size bytes (rounded up to the
// page size) in place. It returns nil past the reservation or when the
// system refuses, which the WebAssembly module sees as a failed grow.
func (m *mappedLinearMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.mem)) {
		return nil
	}
	if n := int(size); n > m.committed {
		page := unix.Getpagesize()
		end := min((n+page-1)/page*page, len(m.mem))
		if err := unix.Mprotect(m.mem[m.committed:end], unix.PROT_READ|unix.PROT_WRITE); err != nil {
			return nil
		}
		m.committed = end
	}
	return m.mem[:size]
}

// Free unmaps the memory.
func (m *mappedLinearMemory) Free() {
	if m.mem != nil {
		unix.Munmap(m.mem)
		m.mem, m.committed = nil, 0
	}
}
