#if defined(__clang__)
#pragma clang fp contract(off)
#else
#pragma GCC optimize("fp-contract=off")
#endif
#include <math.h>
#include <string.h>
#include "kernel.h"

// Function multiversioning and the AVX-512 version need x86-64 and ifunc
// (GNU/Linux); elsewhere (arm64, macOS, …), or with -DDENSE_PORTABLE in
// CGO_CFLAGS (how make test checks that path), each kernel is compiled once,
// for the target's baseline, with the same arithmetic.
#if defined(__x86_64__) && defined(__linux__) && !defined(DENSE_PORTABLE)
#define DENSE_X86 1
#include <immintrin.h>
#define CLONES __attribute__((target_clones("arch=x86-64-v3", "arch=x86-64-v2", "default")))
#else
#define CLONES
#endif

// fwht is the unnormalized fast Walsh–Hadamard transform of x[0:n] in
// place (n a power of two).
static inline void fwht(float *x, int n) {
	for (int h = 1; h < n; h *= 2) {
		for (int i = 0; i < n; i += 2 * h) {
			float *a = x + i, *b = x + i + h;
			for (int j = 0; j < h; j++) {
				float s = a[j] + b[j], d = a[j] - b[j];
				a[j] = s;
				b[j] = d;
			}
		}
	}
}

// dense_rotate writes R·v to out (rotation.go describes R).
CLONES void dense_rotate(const float *v, float *out, int dim, int p, const float *signs, int rounds) {
	memcpy(out, v, sizeof(float) * dim);
	float scale = (float)(1 / sqrt((double)p));
	for (int r = 0; r < rounds; r++) {
		const float *s = signs + (int64_t)r * dim;
		for (int j = 0; j < dim; j++) out[j] *= s[j];
		int off = (r % 2 == 1) ? dim - p : 0;
		fwht(out + off, p);
		for (int j = off; j < off + p; j++) out[j] *= scale;
	}
}

// sign_word is the index of word j of row i in the sign plane.
static inline int64_t sign_word(int64_t i, int j, int words) {
	return (i >> 3) * 8 * words + j * 8 + (i & 7);
}

// dense_encode writes the codes of the n rows of vecs at rows from,
// from+1, … (quant.go describes them).
CLONES void dense_encode(const float *vecs, int64_t from, int64_t n, int dim, int p, const float *rsigns, int rounds,
	int words, uint64_t *planes, uint64_t *signs,
	float *scale, uint32_t *pop, float *delta, uint32_t *sumu, float *y) {
	for (int64_t k = 0; k < n; k++) {
		int64_t i = from + k;
		dense_rotate(vecs + k * dim, y, dim, p, rsigns, rounds);
		uint64_t *row = planes + i * 4 * words;
		memset(row, 0, sizeof(uint64_t) * 4 * words);
		for (int j = 0; j < words; j++) signs[sign_word(i, j, words)] = 0;
		double abs = 0, mx = 0;
		for (int j = 0; j < dim; j++) {
			double x = fabs((double)y[j]);
			abs += x;
			if (x > mx) mx = x;
		}
		scale[i] = 0, pop[i] = 0, delta[i] = 0, sumu[i] = 0;
		if (mx == 0) continue;
		double d = mx / 8;
		int np = 0;
		uint32_t sum = 0;
		for (int j = 0; j < dim; j++) {
			int u = (int)floor((double)y[j] / d) + 8;
			if (u < 0) u = 0;
			if (u > 15) u = 15;
			if (y[j] < 0 && u >= 8) u = 7; // keep the top plane the sign
			for (int b = 0; b < 4; b++)
				row[b * words + (j >> 6)] |= (uint64_t)((u >> b) & 1) << (j & 63);
			signs[sign_word(i, j >> 6, words)] |= (uint64_t)(u >> 3) << (j & 63);
			np += u >= 8;
			sum += u;
		}
		scale[i] = (float)(1 / abs), pop[i] = np, delta[i] = (float)d, sumu[i] = sum;
	}
}

// estimate_scalar is dense_estimate without vector instructions.
CLONES static int64_t estimate_scalar(const uint64_t *signs, const float *scale, const uint32_t *pop, int w,
	int64_t from, int64_t to, const uint64_t *q, float a, float lo2, float qsum, float thr,
	int32_t *out_row, float *out_est) {
	int64_t n = 0;
	for (int64_t i = from; i < to; i++) {
		int s0 = 0, s1 = 0, s2 = 0, s3 = 0;
		for (int j = 0; j < w; j++) {
			uint64_t x = signs[sign_word(i, j, w)];
			s0 += __builtin_popcountll(x & q[j]);
			s1 += __builtin_popcountll(x & q[w + j]);
			s2 += __builtin_popcountll(x & q[2 * w + j]);
			s3 += __builtin_popcountll(x & q[3 * w + j]);
		}
		int s = s0 + 2 * s1 + 4 * s2 + 8 * s3;
		float e = scale[i] * (a * (float)s + lo2 * (float)pop[i] - qsum);
		if (e >= thr) out_row[n] = (int32_t)i, out_est[n] = e, n++;
	}
	return n;
}

#ifdef DENSE_X86
#define AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512vpopcntdq")))

// estimate_avx512 is dense_estimate 8 rows at a time (from a multiple of
// 8), with VPOPCNTQ; the same arithmetic as estimate_scalar.
AVX512 static int64_t estimate_avx512(const uint64_t *signs, const float *scale, const uint32_t *pop, int w,
	int64_t from, int64_t to, const uint64_t *q, float a, float lo2, float qsum, float thr,
	int32_t *out_row, float *out_est) {
	int64_t n = 0;
	const __m256 va = _mm256_set1_ps(a), vlo2 = _mm256_set1_ps(lo2), vq = _mm256_set1_ps(qsum), vthr = _mm256_set1_ps(thr);
	const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	for (int64_t b = from; b < to; b += 8) {
		const uint64_t *blk = signs + b * w;
		__m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
		for (int j = 0; j < w; j++) {
			__m512i x = _mm512_loadu_si512((const void *)(blk + j * 8));
			s0 = _mm512_add_epi64(s0, _mm512_popcnt_epi64(_mm512_and_si512(x, _mm512_set1_epi64((long long)q[j]))));
			s1 = _mm512_add_epi64(s1, _mm512_popcnt_epi64(_mm512_and_si512(x, _mm512_set1_epi64((long long)q[w + j]))));
			s2 = _mm512_add_epi64(s2, _mm512_popcnt_epi64(_mm512_and_si512(x, _mm512_set1_epi64((long long)q[2 * w + j]))));
			s3 = _mm512_add_epi64(s3, _mm512_popcnt_epi64(_mm512_and_si512(x, _mm512_set1_epi64((long long)q[3 * w + j]))));
		}
		__m512i s = _mm512_add_epi64(_mm512_add_epi64(s0, _mm512_slli_epi64(s1, 1)),
			_mm512_add_epi64(_mm512_slli_epi64(s2, 2), _mm512_slli_epi64(s3, 3)));
		__m256 sf = _mm512_cvtepi64_ps(s);
		__m256 pf = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(pop + b)));
		__m256 e = _mm256_mul_ps(_mm256_loadu_ps(scale + b),
			_mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(va, sf), _mm256_mul_ps(vlo2, pf)), vq));
		__mmask8 m = _mm256_cmp_ps_mask(e, vthr, _CMP_GE_OQ);
		if (to - b < 8) m &= (__mmask8)((1u << (to - b)) - 1);
		if (m) {
			__m256i rows = _mm256_add_epi32(_mm256_set1_epi32((int)b), lane);
			_mm256_mask_compressstoreu_epi32(out_row + n, m, rows);
			_mm256_mask_compressstoreu_ps(out_est + n, m, e);
			n += __builtin_popcount(m);
		}
	}
	return n;
}

#endif

int dense_use_avx512;

// init chooses stage 1's version when the library loads.
__attribute__((constructor)) static void init(void) {
#ifdef DENSE_X86
	__builtin_cpu_init();
	dense_use_avx512 = __builtin_cpu_supports("avx512vpopcntdq") && __builtin_cpu_supports("avx512vl") &&
		__builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512f");
#endif
}

// dense_estimate is stage 1 over rows [from, to) (from a multiple of 8):
// each row whose estimate is at least thr is written to out_row and
// out_est; it returns how many.
int64_t dense_estimate(const uint64_t *signs, const float *scale, const uint32_t *pop, int words,
	int64_t from, int64_t to, const uint64_t *q, float a, float lo2, float qsum, float thr,
	int32_t *out_row, float *out_est) {
#ifdef DENSE_X86
	if (dense_use_avx512)
		return estimate_avx512(signs, scale, pop, words, from, to, q, a, lo2, qsum, thr, out_row, out_est);
#endif
	return estimate_scalar(signs, scale, pop, words, from, to, q, a, lo2, qsum, thr, out_row, out_est);
}

// dense_refine is stage 2: the four-bit estimate of each of rows.
CLONES void dense_refine(const uint64_t *planes, const float *delta, const uint32_t *sumu, int words,
	const int32_t *rows, int64_t n, const uint64_t *q, float qlo, float qdelta, float qsum, float *out_est) {
	for (int64_t k = 0; k < n; k++) {
		int64_t i = rows[k];
		int64_t uv = 0;
		for (int b = 0; b < 4; b++) {
			int s0 = 0, s1 = 0, s2 = 0, s3 = 0;
			for (int j = 0; j < words; j++) {
				uint64_t x = planes[(i * 4 + b) * words + j];
				s0 += __builtin_popcountll(x & q[j]);
				s1 += __builtin_popcountll(x & q[words + j]);
				s2 += __builtin_popcountll(x & q[2 * words + j]);
				s3 += __builtin_popcountll(x & q[3 * words + j]);
			}
			uv += (int64_t)(s0 + 2 * s1 + 4 * s2 + 8 * s3) << b;
		}
		out_est[k] = delta[i] * (qlo * (float)sumu[i] + qdelta * (float)uv - 7.5f * qsum);
	}
}
