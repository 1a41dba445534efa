//go:build !unix

package pdf

import "github.com/tetratelabs/wazero/experimental"

// pdfMemory is Go-heap memory where there is no mmap.
var pdfMemory experimental.MemoryAllocator = experimental.MemoryAllocatorFunc(func(capacity, max uint64) experimental.LinearMemory {
	return &heapLinearMemory{max: max}
})

func pdfEnter() {}
func pdfLeave() {}
