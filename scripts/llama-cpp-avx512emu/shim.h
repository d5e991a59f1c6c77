/*
 * avx512emu-shim.h -- forced include (gcc -include) for ggml-cpu ONLY.
 *
 * Compiles ggml-cpu's AVX-512 code paths (__AVX512F__/CD/VL/DQ/BW/VBMI/VNNI/BF16)
 * on a CPU with only AVX2/FMA/F16C: every AVX-512 intrinsic resolves to SIMDe's
 * portable implementation (SIMDE_ENABLE_NATIVE_ALIASES), or to the replacements
 * below, which reproduce the exact arithmetic of the real instruction / of GCC's
 * intrinsic header (e.g. the reduction order of _mm512_reduce_add_ps).
 *
 * Do NOT compile with -mavx512*: the AVX-512 feature macros are defined here,
 * after GCC's <immintrin.h> and SIMDe have been included without them.
 */
#ifndef AVX512EMU_SHIM_H
#define AVX512EMU_SHIM_H

#if defined(__AVX512F__) || defined(__AVX512BW__) || defined(__AVX512VNNI__)
#error "avx512emu shim: compile WITHOUT -mavx512* (the shim defines the macros itself)"
#endif
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "avx512emu shim: needs -mavx2 -mfma -mf16c"
#endif

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define SIMDE_ENABLE_NATIVE_ALIASES 1
#include <simde/x86/avx512.h>

#if defined(SIMDE_X86_AVX512F_NATIVE) || !defined(SIMDE_X86_AVX2_NATIVE) || !defined(SIMDE_X86_FMA_NATIVE)
#error "avx512emu shim: unexpected SIMDe native configuration"
#endif

#define AVX512EMU_INLINE static inline __attribute__((__always_inline__, __unused__))

/* Optimization barrier: in the real build the 512->256 extracts are opaque builtins, so GCC
 * cannot contract e.g. a _mm512_mul_ps into the first add of _mm512_reduce_add_ps (FMA
 * contraction, -ffp-contract=fast). Keep our split halves equally opaque. */
#define AVX512EMU_OPAQUE(v) __asm__("" : "+x"(v))

/* ---- helpers: split / join 512-bit values into two native 256-bit halves ---- */
typedef struct { __m256  lo, hi; } avx512emu_ps2;
typedef struct { __m256i lo, hi; } avx512emu_si2;

AVX512EMU_INLINE avx512emu_ps2 avx512emu_split_ps(simde__m512 a) {
    simde__m512_private p = simde__m512_to_private(a);
    avx512emu_ps2 r = { p.m256[0], p.m256[1] };
    AVX512EMU_OPAQUE(r.lo); AVX512EMU_OPAQUE(r.hi);
    return r;
}
AVX512EMU_INLINE simde__m512 avx512emu_join_ps(__m256 lo, __m256 hi) {
    simde__m512_private p;
    p.m256[0] = lo; p.m256[1] = hi;
    return simde__m512_from_private(p);
}
AVX512EMU_INLINE avx512emu_si2 avx512emu_split_si(simde__m512i a) {
    simde__m512i_private p = simde__m512i_to_private(a);
    avx512emu_si2 r = { p.m256i[0], p.m256i[1] };
    AVX512EMU_OPAQUE(r.lo); AVX512EMU_OPAQUE(r.hi);
    return r;
}
AVX512EMU_INLINE simde__m512i avx512emu_join_si(__m256i lo, __m256i hi) {
    simde__m512i_private p;
    p.m256i[0] = lo; p.m256i[1] = hi;
    return simde__m512i_from_private(p);
}

/* ---- SIMDe 0.7.4 alias bugs ---- */
#undef _mm512_madd_epi16
#define _mm512_madd_epi16(a, b) simde_mm512_madd_epi16(a, b)

/* ---- intrinsics missing from SIMDe 0.7.4 (element-wise: exact via AVX2/F16C halves) ---- */

/* vcvtph2ps zmm: exact widening, per element identical to the 256-bit F16C instruction */
AVX512EMU_INLINE simde__m512 avx512emu_mm512_cvtph_ps(__m256i a) {
    return avx512emu_join_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(a)),
                             _mm256_cvtph_ps(_mm256_extracti128_si256(a, 1)));
}
#define _mm512_cvtph_ps(a) avx512emu_mm512_cvtph_ps(a)

/* vcvtps2ph zmm, imm: per element identical to the 256-bit F16C instruction */
#define _mm512_cvtps_ph(a, imm) __extension__ ({                                   \
    avx512emu_ps2 avx512emu_t_ = avx512emu_split_ps(a);                             \
    _mm256_set_m128i(_mm256_cvtps_ph(avx512emu_t_.hi, (imm)),                       \
                     _mm256_cvtps_ph(avx512emu_t_.lo, (imm))); })

/* vcvtdq2ps zmm: per element identical (MXCSR rounding, RNE) */
AVX512EMU_INLINE simde__m512 avx512emu_mm512_cvtepi32_ps(simde__m512i a) {
    avx512emu_si2 t = avx512emu_split_si(a);
    return avx512emu_join_ps(_mm256_cvtepi32_ps(t.lo), _mm256_cvtepi32_ps(t.hi));
}
#define _mm512_cvtepi32_ps(a) avx512emu_mm512_cvtepi32_ps(a)

/* vpshufd zmm, imm: in-lane 32-bit shuffle (pure data movement) */
#define _mm512_shuffle_epi32(a, imm) __extension__ ({                                \
    avx512emu_si2 avx512emu_t_ = avx512emu_split_si(a);                               \
    avx512emu_join_si(_mm256_shuffle_epi32(avx512emu_t_.lo, (int)(imm)),              \
                      _mm256_shuffle_epi32(avx512emu_t_.hi, (int)(imm))); })

/* vpmovzxwd zmm, ymm */
AVX512EMU_INLINE simde__m512i avx512emu_mm512_cvtepu16_epi32(__m256i a) {
    return avx512emu_join_si(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(a)),
                             _mm256_cvtepu16_epi32(_mm256_extracti128_si256(a, 1)));
}
#define _mm512_cvtepu16_epi32(a) avx512emu_mm512_cvtepu16_epi32(a)

/* vpmovzxbw zmm, ymm */
AVX512EMU_INLINE simde__m512i avx512emu_mm512_cvtepu8_epi16(__m256i a) {
    return avx512emu_join_si(_mm256_cvtepu8_epi16(_mm256_castsi256_si128(a)),
                             _mm256_cvtepu8_epi16(_mm256_extracti128_si256(a, 1)));
}
#define _mm512_cvtepu8_epi16(a) avx512emu_mm512_cvtepu8_epi16(a)

/* mask bits -> two 256-bit lane masks (all-ones where bit set) */
AVX512EMU_INLINE __m256i avx512emu_mask8_to_vec(unsigned k8) {
    const __m256i bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)k8), bits), bits);
}

/* masked load/store: masked-off elements are not accessed (vmaskmovps does not fault on them) */
AVX512EMU_INLINE simde__m512 avx512emu_mm512_maskz_loadu_ps(uint16_t k, const void * p) {
    const float * f = (const float *) p;
    return avx512emu_join_ps(_mm256_maskload_ps(f,     avx512emu_mask8_to_vec(k & 0xff)),
                             _mm256_maskload_ps(f + 8, avx512emu_mask8_to_vec(k >> 8)));
}
#define _mm512_maskz_loadu_ps(k, p) avx512emu_mm512_maskz_loadu_ps((uint16_t)(k), (p))

AVX512EMU_INLINE void avx512emu_mm512_mask_storeu_ps(void * p, uint16_t k, simde__m512 a) {
    float * f = (float *) p;
    avx512emu_ps2 t = avx512emu_split_ps(a);
    _mm256_maskstore_ps(f,     avx512emu_mask8_to_vec(k & 0xff), t.lo);
    _mm256_maskstore_ps(f + 8, avx512emu_mask8_to_vec(k >> 8),   t.hi);
}
#define _mm512_mask_storeu_ps(p, k, a) avx512emu_mm512_mask_storeu_ps((p), (uint16_t)(k), (a))

/* vfmadd231ps zmm{k}: k ? fma(a,b,c) : c  (single rounding) */
AVX512EMU_INLINE simde__m512 avx512emu_mm512_mask3_fmadd_ps(simde__m512 a, simde__m512 b, simde__m512 c, uint16_t k) {
    avx512emu_ps2 ta = avx512emu_split_ps(a), tb = avx512emu_split_ps(b), tc = avx512emu_split_ps(c);
    __m256 lo = _mm256_blendv_ps(tc.lo, _mm256_fmadd_ps(ta.lo, tb.lo, tc.lo), _mm256_castsi256_ps(avx512emu_mask8_to_vec(k & 0xff)));
    __m256 hi = _mm256_blendv_ps(tc.hi, _mm256_fmadd_ps(ta.hi, tb.hi, tc.hi), _mm256_castsi256_ps(avx512emu_mask8_to_vec(k >> 8)));
    return avx512emu_join_ps(lo, hi);
}
#define _mm512_mask3_fmadd_ps(a, b, c, k) avx512emu_mm512_mask3_fmadd_ps((a), (b), (c), (uint16_t)(k))

/* vandps: |x| by clearing the sign bit (SIMDe uses x < 0 ? -x : x, which keeps -0.0) */
AVX512EMU_INLINE simde__m512 avx512emu_mm512_abs_ps(simde__m512 a) {
    avx512emu_ps2 t = avx512emu_split_ps(a);
    const __m256 m = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    return avx512emu_join_ps(_mm256_and_ps(t.lo, m), _mm256_and_ps(t.hi, m));
}
#undef _mm512_abs_ps
#define _mm512_abs_ps(a) avx512emu_mm512_abs_ps(a)

/* vpdpbusd (no saturation): src + sum of 4 u8*s8 products per dword, wrapping.
 * Exact with AVX2: split bytes into even/odd 16-bit lanes (products <= 255*128 fit pmaddwd). */
AVX512EMU_INLINE __m256i avx512emu_dpbusd256(__m256i src, __m256i a, __m256i b) {
    const __m256i m = _mm256_set1_epi16(0x00ff);
    const __m256i a_e = _mm256_and_si256(a, m);
    const __m256i a_o = _mm256_srli_epi16(a, 8);
    const __m256i b_e = _mm256_srai_epi16(_mm256_slli_epi16(b, 8), 8);
    const __m256i b_o = _mm256_srai_epi16(b, 8);
    return _mm256_add_epi32(src, _mm256_add_epi32(_mm256_madd_epi16(a_e, b_e), _mm256_madd_epi16(a_o, b_o)));
}
AVX512EMU_INLINE simde__m512i avx512emu_mm512_dpbusd_epi32(simde__m512i src, simde__m512i a, simde__m512i b) {
    avx512emu_si2 s = avx512emu_split_si(src), x = avx512emu_split_si(a), y = avx512emu_split_si(b);
    return avx512emu_join_si(avx512emu_dpbusd256(s.lo, x.lo, y.lo), avx512emu_dpbusd256(s.hi, x.hi, y.hi));
}
#undef _mm512_dpbusd_epi32
#define _mm512_dpbusd_epi32(src, a, b) avx512emu_mm512_dpbusd_epi32((src), (a), (b))
#undef _mm256_dpbusd_epi32
#define _mm256_dpbusd_epi32(src, a, b) avx512emu_dpbusd256((src), (a), (b))

/* vdpbf16ps, per the Intel SDM pseudo-code:
 *   srcdest.fp32[i] += make_fp32(src1.bf16[2i+1]) * make_fp32(src2.bf16[2i+1])
 *   srcdest.fp32[i] += make_fp32(src1.bf16[2i+0]) * make_fp32(src2.bf16[2i+0])
 * each an FP32 FMA with DAZ in, FTZ out, RNE, MXCSR not consulted.
 * (SIMDe adds the even product first and has no DAZ/FTZ.) */
AVX512EMU_INLINE __m256 avx512emu_daz256(__m256 x) {
    const __m256i xi = _mm256_castps_si256(x);
    const __m256i ez = _mm256_cmpeq_epi32(_mm256_and_si256(xi, _mm256_set1_epi32(0x7f800000)), _mm256_setzero_si256());
    return _mm256_castsi256_ps(_mm256_blendv_epi8(xi, _mm256_and_si256(xi, _mm256_set1_epi32((int)0x80000000u)), ez));
}
AVX512EMU_INLINE __m256 avx512emu_dpbf16_256(__m256 src, __m256i a, __m256i b) {
    const __m256i hi_m = _mm256_set1_epi32((int)0xffff0000u);
    const __m256 a_o = avx512emu_daz256(_mm256_castsi256_ps(_mm256_and_si256(a, hi_m)));
    const __m256 b_o = avx512emu_daz256(_mm256_castsi256_ps(_mm256_and_si256(b, hi_m)));
    const __m256 a_e = avx512emu_daz256(_mm256_castsi256_ps(_mm256_slli_epi32(a, 16)));
    const __m256 b_e = avx512emu_daz256(_mm256_castsi256_ps(_mm256_slli_epi32(b, 16)));
    __m256 acc = avx512emu_daz256(src);
    acc = avx512emu_daz256(_mm256_fmadd_ps(a_o, b_o, acc));
    acc = avx512emu_daz256(_mm256_fmadd_ps(a_e, b_e, acc));
    return acc;
}
AVX512EMU_INLINE simde__m512 avx512emu_mm512_dpbf16_ps(simde__m512 src, simde__m512bh a, simde__m512bh b) {
    avx512emu_ps2 s = avx512emu_split_ps(src);
    __m256i a2[2], b2[2];
    memcpy(a2, &a, sizeof(a2));
    memcpy(b2, &b, sizeof(b2));
    return avx512emu_join_ps(avx512emu_dpbf16_256(s.lo, a2[0], b2[0]), avx512emu_dpbf16_256(s.hi, a2[1], b2[1]));
}
AVX512EMU_INLINE __m256 avx512emu_mm256_dpbf16_ps(__m256 src, simde__m256bh a, simde__m256bh b) {
    __m256i a1, b1;
    memcpy(&a1, &a, sizeof(a1));
    memcpy(&b1, &b, sizeof(b1));
    return avx512emu_dpbf16_256(src, a1, b1);
}
#undef _mm512_dpbf16_ps
#define _mm512_dpbf16_ps(src, a, b) avx512emu_mm512_dpbf16_ps((src), (a), (b))
#undef _mm256_dpbf16_ps
#define _mm256_dpbf16_ps(src, a, b) avx512emu_mm256_dpbf16_ps((src), (a), (b))

/* vscalefps: a * 2^floor(b) with a single rounding (no DAZ: MXCSR default).
 * Done exactly in double (a * 2^n is exact for |n| <= 512), then one RNE rounding to float.
 * SIMDe flushes subnormal a and uses exp2f, which is 0 for n < -149. */
AVX512EMU_INLINE __m128 avx512emu_scalef_half(__m128 a, __m128i n) {
    const __m256d ad = _mm256_cvtps_pd(a);
    const __m256i e = _mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(n), _mm256_set1_epi64x(1023)), 52);
    return _mm256_cvtpd_ps(_mm256_mul_pd(ad, _mm256_castsi256_pd(e)));
}
AVX512EMU_INLINE __m256 avx512emu_scalef256(__m256 a, __m256 b) {
    const __m256 fb = _mm256_floor_ps(b);
    const __m256 cl = _mm256_min_ps(_mm256_max_ps(fb, _mm256_set1_ps(-512.0f)), _mm256_set1_ps(512.0f));
    const __m256i n = _mm256_cvtps_epi32(cl);
    __m256 r = _mm256_set_m128(avx512emu_scalef_half(_mm256_extractf128_ps(a, 1), _mm256_extracti128_si256(n, 1)),
                               avx512emu_scalef_half(_mm256_castps256_ps128(a), _mm256_castsi256_si128(n)));
    /* special cases: b NaN -> QNaN(b); a==0 && b==+inf, |a|==inf && b==-inf -> default NaN; a NaN -> QNaN(a) */
    const __m256 inf = _mm256_set1_ps(__builtin_inff());
    const __m256 b_nan = _mm256_cmp_ps(b, b, _CMP_UNORD_Q);
    const __m256 a_nan = _mm256_cmp_ps(a, a, _CMP_UNORD_Q);
    const __m256 inv = _mm256_or_ps(
        _mm256_and_ps(_mm256_cmp_ps(a, _mm256_setzero_ps(), _CMP_EQ_OQ), _mm256_cmp_ps(b, inf, _CMP_EQ_OQ)),
        _mm256_and_ps(_mm256_cmp_ps(_mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))), inf, _CMP_EQ_OQ), _mm256_cmp_ps(b, _mm256_sub_ps(_mm256_setzero_ps(), inf), _CMP_EQ_OQ)));
    const __m256 qb = _mm256_or_ps(b, _mm256_castsi256_ps(_mm256_set1_epi32(0x00400000)));
    const __m256 qa = _mm256_or_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x00400000)));
    r = _mm256_blendv_ps(r, _mm256_castsi256_ps(_mm256_set1_epi32((int)0xffc00000u)), inv);
    r = _mm256_blendv_ps(r, qb, b_nan);
    r = _mm256_blendv_ps(r, qa, a_nan);
    return r;
}
AVX512EMU_INLINE simde__m512 avx512emu_mm512_scalef_ps(simde__m512 a, simde__m512 b) {
    avx512emu_ps2 x = avx512emu_split_ps(a), y = avx512emu_split_ps(b);
    return avx512emu_join_ps(avx512emu_scalef256(x.lo, y.lo), avx512emu_scalef256(x.hi, y.hi));
}
#undef _mm512_scalef_ps
#define _mm512_scalef_ps(a, b) avx512emu_mm512_scalef_ps((a), (b))

/* kortestw: ZF = ((k1 | k2) == 0) */
#define _mm512_kortestz(k1, k2) ((int)((((uint16_t)(k1)) | ((uint16_t)(k2))) == 0))

/* ---- horizontal reductions: GCC 12 avx512fintrin.h __MM512_REDUCE_OP order ----
 * (hi256 op lo256) -> (hi128 op lo128) -> T6 op shuffle(T6,{2,3,0,1}) -> T8[0] op T8[1] */
AVX512EMU_INLINE float avx512emu_mm512_reduce_add_ps(simde__m512 a) {
    avx512emu_ps2 t = avx512emu_split_ps(a);
    __m256 t3 = _mm256_add_ps(t.hi, t.lo);
    __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
    __m128 t7 = _mm_shuffle_ps(t6, t6, _MM_SHUFFLE(1, 0, 3, 2));
    __m128 t8 = _mm_add_ps(t6, t7);
    return _mm_cvtss_f32(t8) + _mm_cvtss_f32(_mm_shuffle_ps(t8, t8, 1));
}
#define _mm512_reduce_add_ps(a) avx512emu_mm512_reduce_add_ps(a)

/* reduce_max_ps: (hi,lo) operand order as GCC: max(T1=hi, T2=lo), max(T4=hi128, T5=lo128),
 * max(T6, T7=shuf{2,3,0,1}), max(T8, T9=shuf{1,0,1,0}) -> [0] */
AVX512EMU_INLINE float avx512emu_mm512_reduce_max_ps(simde__m512 a) {
    avx512emu_ps2 t = avx512emu_split_ps(a);
    __m256 t3 = _mm256_max_ps(t.hi, t.lo);
    __m128 t6 = _mm_max_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
    __m128 t7 = _mm_shuffle_ps(t6, t6, _MM_SHUFFLE(1, 0, 3, 2));
    __m128 t8 = _mm_max_ps(t6, t7);
    __m128 t9 = _mm_shuffle_ps(t8, t8, _MM_SHUFFLE(0, 1, 0, 1));
    return _mm_cvtss_f32(_mm_max_ps(t8, t9));
}
#define _mm512_reduce_max_ps(a) avx512emu_mm512_reduce_max_ps(a)

AVX512EMU_INLINE int avx512emu_mm512_reduce_add_epi32(simde__m512i a) {
    avx512emu_si2 t = avx512emu_split_si(a);
    __m256i t3 = _mm256_add_epi32(t.hi, t.lo);
    __m128i t6 = _mm_add_epi32(_mm256_extracti128_si256(t3, 1), _mm256_castsi256_si128(t3));
    __m128i t8 = _mm_add_epi32(t6, _mm_shuffle_epi32(t6, _MM_SHUFFLE(1, 0, 3, 2)));
    return (int)((unsigned)_mm_cvtsi128_si32(t8) + (unsigned)_mm_extract_epi32(t8, 1));
}
#define _mm512_reduce_add_epi32(a) avx512emu_mm512_reduce_add_epi32(a)

/* ---- GCC auto-vectorization of float in-order reductions --------------------------------------
 * Without -ffast-math GCC 12 still vectorizes `for (i) sum += a[i]*b[i]` (float) as an in-order
 * ("fold-left") reduction: products are computed with vmulps (rounded, NOT fused) and added one by
 * one in order; the iterations left to the scalar tail are contracted to vfmadd231ss. The split
 * therefore depends on the vector width: the real -mavx512f build uses a 16-wide main loop plus
 * one 8-wide epilogue (first n & ~7 products rounded, the last n % 8 fused), while an AVX2 build
 * uses 8 + 4 (n & ~3 / n % 4). ggml-cpu sources patched for the emulated build call these helpers
 * to reproduce the AVX-512 build's split exactly (see avx512emu-llama.cpp.patch). */
AVX512EMU_INLINE float avx512emu_foldleft_dot(float sum, const float * a, long sa, const float * b, long sb,
                                              long n, long vmul /* 8 or 4 */) {
    const long nv = n - n % vmul;
    long i = 0;
    for (; i < nv; ++i) {
        float p = a[i*sa] * b[i*sb];
        AVX512EMU_OPAQUE(p);          /* keep the product rounded and the loop scalar */
        sum += p;
    }
    for (; i < n; ++i) {
        __m128 r = _mm_fmadd_ss(_mm_set_ss(a[i*sa]), _mm_set_ss(b[i*sb]), _mm_set_ss(sum));
        AVX512EMU_OPAQUE(r);
        sum = _mm_cvtss_f32(r);
    }
    return sum;
}

/* ---- feature macros: take the same branches as a -mavx512f -mavx512cd -mavx512vl
 *      -mavx512dq -mavx512bw -mavx512vbmi -mavx512vnni -mavx512bf16 build ---- */
#define __AVX512F__ 1
#define __AVX512CD__ 1
#define __AVX512VL__ 1
#define __AVX512DQ__ 1
#define __AVX512BW__ 1
#define __AVX512VBMI__ 1
#define __AVX512VNNI__ 1
#define __AVX512BF16__ 1

#endif /* AVX512EMU_SHIM_H */
