//go:build unix

package pdf

import (
	"sync"

	"github.com/tetratelabs/wazero/experimental"
	"golang.org/x/sys/unix"
)

// pdfMemory backs PDFium's WebAssembly memory with an anonymous mapping of
// its maximum size, reserved (PROT_NONE) and made readable and writable
// as the memory grows. Growing never copies, so a process holds what the
// instance uses, not twice that during a copy; Free gives the pages back
// to the system at once (MADV_DONTNEED) and unmaps the reservation once
// no PDF extraction is running (see pdfEnter): an extraction abandoned at
// its time limit may still be copying into the memory of the instance
// that was killed under it, and must find it mapped.
var pdfMemory experimental.MemoryAllocator = experimental.MemoryAllocatorFunc(func(capacity, max uint64) experimental.LinearMemory {
	mem, err := unix.Mmap(-1, 0, int(max), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		return &heapLinearMemory{max: max}
	}
	return &mappedLinearMemory{mem: mem}
})

type mappedLinearMemory struct {
	mu        sync.Mutex
	mem       []byte // the whole reservation; nil once freed
	committed int    // bytes made readable and writable, from 0
}

// Reallocate grows the accessible part to size bytes (rounded up to the
// page size) in place. It returns nil past the reservation, after Free, or
// when the system refuses, which the module sees as a failed grow.
func (m *mappedLinearMemory) Reallocate(size uint64) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mem == nil || size > uint64(len(m.mem)) {
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

// Free returns the pages to the system and unmaps the reservation when no
// extraction runs, else at the end of the last one running.
func (m *mappedLinearMemory) Free() {
	m.mu.Lock()
	mem, committed := m.mem, m.committed
	m.mem, m.committed = nil, 0
	m.mu.Unlock()
	if mem == nil {
		return
	}
	if committed > 0 {
		unix.Madvise(mem[:committed], unix.MADV_DONTNEED)
	}
	pdfMaps.mu.Lock()
	defer pdfMaps.mu.Unlock()
	if pdfMaps.running == 0 {
		unix.Munmap(mem)
		return
	}
	pdfMaps.dead = append(pdfMaps.dead, mem)
}

// pdfMaps counts the PDF extractions running and holds the reservations
// freed meanwhile.
var pdfMaps struct {
	mu      sync.Mutex
	running int
	dead    [][]byte
}

// pdfEnter and pdfLeave bracket a PDF extraction (its goroutine, to the
// end, even when Extract has given up on it).
func pdfEnter() {
	pdfMaps.mu.Lock()
	pdfMaps.running++
	pdfMaps.mu.Unlock()
}

func pdfLeave() {
	pdfMaps.mu.Lock()
	defer pdfMaps.mu.Unlock()
	pdfMaps.running--
	if pdfMaps.running == 0 {
		for _, mem := range pdfMaps.dead {
			unix.Munmap(mem)
		}
		pdfMaps.dead = nil
	}
}
