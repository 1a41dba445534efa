package dense

// #cgo CFLAGS: -O3
// #cgo LDFLAGS: -lm
// #include "kernel.h"
import "C"

import (
	"math"
	"unsafe"
)

// The cgo calls of the quantized search (kernel.c): each runs over many
// rows (a shard, a chunk of one, a batch of vectors), never one call per
// vector scanned. Slices are passed as pointers to their first element;
// an empty one is never passed.

func f32p(s []float32) *C.float   { return (*C.float)(unsafe.Pointer(unsafe.SliceData(s))) }
func u64p(s []uint64) *C.uint64_t { return (*C.uint64_t)(unsafe.Pointer(unsafe.SliceData(s))) }
func u32p(s []uint32) *C.uint32_t { return (*C.uint32_t)(unsafe.Pointer(unsafe.SliceData(s))) }
func i32p(s []int32) *C.int32_t   { return (*C.int32_t)(unsafe.Pointer(unsafe.SliceData(s))) }

// rotate writes r·v into out (both of r.dim components).
func (r *rotation) rotate(out, v []float32) {
	C.dense_rotate(f32p(v), f32p(out), C.int(r.dim), C.int(r.p), f32p(r.signs), C.int(rotationRounds))
}

// encodeRows writes the codes of the rows of vecs at rows from, from+1, …
// of c (which has room for them).
func (c *codes) encodeRows(from int, vecs []float32) {
	dim := c.rot.dim
	n := len(vecs) / dim
	if n == 0 {
		return
	}
	y := make([]float32, dim)
	C.dense_encode(f32p(vecs), C.int64_t(from), C.int64_t(n), C.int(dim), C.int(c.rot.p), f32p(c.rot.signs), C.int(rotationRounds),
		C.int(c.words), u64p(c.planes), u64p(c.signs),
		f32p(c.scale), u32p(c.pop), f32p(c.delta), u32p(c.sumU), f32p(y))
}

// estimateChunk is stage 1 over rows [from, to) (from a multiple of 8):
// the rows whose estimate is at least thr, appended to rows and ests
// (which have room for to−from more).
func (c *codes) estimateChunk(qq *quantQuery, from, to int, thr float32, rows []int32, ests []float32) ([]int32, []float32) {
	n := C.dense_estimate(u64p(c.signs), f32p(c.scale), u32p(c.pop), C.int(c.words),
		C.int64_t(from), C.int64_t(to), u64p(qq.planes), C.float(2*qq.delta), C.float(2*qq.lo), C.float(qq.sum), C.float(thr),
		i32p(rows[len(rows):len(rows)+1]), f32p(ests[len(ests):len(ests)+1]))
	return rows[:len(rows)+int(n)], ests[:len(ests)+int(n)]
}

// refineRows is stage 2: the four-bit estimates of rows, into est.
func (c *codes) refineRows(qq *quantQuery, rows []int32, est []float32) {
	if len(rows) == 0 {
		return
	}
	C.dense_refine(u64p(c.planes), f32p(c.delta), u32p(c.sumU), C.int(c.words), i32p(rows), C.int64_t(len(rows)),
		u64p(qq.planes), C.float(qq.lo), C.float(qq.delta), C.float(qq.sum), f32p(est))
}

var negInf = float32(math.Inf(-1))

// useAVX512 sets whether stage 1 runs its AVX-512 version (on says
// whether the CPU has it: asking for it without is refused) and returns
// the previous setting. Only tests change it.
func useAVX512(on bool) (was bool, ok bool) {
	was = C.dense_use_avx512 != 0
	if on && !was && !hasAVX512 {
		return was, false
	}
	C.dense_use_avx512 = 0
	if on {
		C.dense_use_avx512 = 1
	}
	return was, true
}

// hasAVX512 is whether the CPU runs stage 1's AVX-512 version.
var hasAVX512 = C.dense_use_avx512 != 0
