// The quantized search's kernels (quant.go, kernel.go): C loops compiled
// by GCC for the baseline and, by function multiversioning, for x86-64-v2
// (POPCNT) and x86-64-v3 (AVX2; target_clones), plus an AVX-512 VPOPCNTDQ version of stage 1
// chosen at run time when the CPU has it. No floating-point contraction
// (the pragma in kernel.c) and no reassociation: every version computes
// the same bits.
#include <stdint.h>

// The 4 planes of row i are planes[i*4*words : (i+1)*4*words], plane b
// at b*words (one place per row for stage 2); the top one, the signs, also
// in blocks of 8 rows for stage 1: word j of row i is
// signs[(i/8)*8*words + j*8 + i%8].

// dense_use_avx512 is whether dense_estimate runs its AVX-512 version: set
// at load when the CPU has AVX-512 F, DQ, VL and VPOPCNTDQ (tests clear it
// to compare the versions).
extern int dense_use_avx512;

void dense_rotate(const float *v, float *out, int dim, int p, const float *signs, int rounds);
void dense_encode(const float *vecs, int64_t from, int64_t n, int dim, int p, const float *rsigns, int rounds,
	int words, uint64_t *planes, uint64_t *signs,
	float *scale, uint32_t *pop, float *delta, uint32_t *sumu, float *scratch);
int64_t dense_estimate(const uint64_t *signs, const float *scale, const uint32_t *pop, int words,
	int64_t from, int64_t to, const uint64_t *qplanes, float a, float lo2, float qsum, float thr,
	int32_t *out_row, float *out_est);
void dense_refine(const uint64_t *planes, const float *delta, const uint32_t *sumu, int words,
	const int32_t *rows, int64_t n, const uint64_t *qplanes, float qlo, float qdelta, float qsum, float *out_est);
