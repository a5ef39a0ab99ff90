/* Reduction kernels. Each (dtype, op) pair gets plain element-wise loops that
 * gcc -O2 vectorizes (checked with -fopt-info-vec, see docs/collectives.md):
 * three restrict-qualified variants (dst distinct, dst == a, dst == b) so the
 * compiler needs no runtime alias checks, plus an unqualified fallback. Signed
 * integer sum/prod wrap (computed in unsigned: no undefined behaviour). */
/* -O2 in gcc 12 vectorizes only with the "very cheap" cost model, which
 * refuses loops needing an epilogue (all of these): ask for the full one. */
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")

#include <string.h>

#include "comm/coll/redop.h"
#include "core/error.h"

static inline uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Branch-free so that the 16-bit kernels vectorize. */
static inline float h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t em = h & 0x7fffu;
  /* em << 13 read as a float32 has exponent (e - 15 + 127) - 112: scaling by
   * 2^112 fixes the bias, and is exact for subnormal halves too. */
  uint32_t m = f2u(u2f(em << 13) * 0x1p112f);
  m = em >= 0x7c00u ? (m | 0x7f800000u) : m; /* inf/nan keep their payload */
  return u2f(m | sign);
}

/* After F. Giesen's float_to_half_fast3_rtne (public domain). */
static inline uint16_t f2h(float f) {
  const uint32_t f32infty = 255u << 23, f16max = (127u + 16u) << 23;
  const float denorm_magic = u2f(((127u - 15u) + (23u - 10u) + 1u) << 23);
  uint32_t u = f2u(f);
  uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint32_t o_big = u > f32infty ? 0x7e00u : 0x7c00u;
  /* subnormal or zero: the FPU's own round-to-nearest-even does the work */
  uint32_t o_sub = f2u(u2f(u) + denorm_magic) - f2u(denorm_magic);
  uint32_t o_norm = (u + (uint32_t)((15 - 127) * (1 << 23)) + 0xfffu + ((u >> 13) & 1u)) >> 13;
  uint32_t o = u >= f16max ? o_big : (u < (113u << 23) ? o_sub : o_norm);
  return (uint16_t)(o | (sign >> 16));
}

static inline float bf2f(uint16_t h) { return u2f((uint32_t)h << 16); }
static inline uint16_t f2bf(float f) {
  uint32_t u = f2u(f);
  uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t q = (u >> 16) | 0x40u; /* quiet NaN, sign and payload kept */
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? q : r);
}

float shoal__f16_to_f32(uint16_t h) { return h2f(h); }
uint16_t shoal__f32_to_f16(float f) { return f2h(f); }
float shoal__bf16_to_f32(uint16_t h) { return bf2f(h); }
uint16_t shoal__f32_to_bf16(float f) { return f2bf(f); }

typedef void (*kernel_fn)(void *d, const void *a, const void *b, size_t n);

/* p is a[i], q is b[i]. */
#define K_SUM(p, q) ((p) + (q))
#define K_PROD(p, q) ((p) * (q))
#define K_MIN(p, q) ((p) < (q) ? (p) : (q))
#define K_MAX(p, q) ((p) > (q) ? (p) : (q))
#define K_USUM(U, T, p, q) ((T)((U)(p) + (U)(q)))
#define K_UPROD(U, T, p, q) ((T)((U)(p) * (U)(q)))
#define K_AND(T, p, q) ((T)((p) & (q)))
#define K_OR(T, p, q) ((T)((p) | (q)))
#define K_XOR(T, p, q) ((T)((p) ^ (q)))

#define DEF_KERNEL(NAME, T, EXPR)                                                          \
  static void NAME##_3(T *restrict d, const T *restrict x, const T *restrict y, size_t n) { \
    for (size_t i = 0; i < n; i++) {                                                       \
      T p = x[i], q = y[i];                                                                \
      d[i] = (EXPR);                                                                       \
    }                                                                                      \
  }                                                                                        \
  static void NAME##_a(T *restrict d, const T *restrict y, size_t n) {                      \
    for (size_t i = 0; i < n; i++) {                                                       \
      T p = d[i], q = y[i];                                                                \
      d[i] = (EXPR);                                                                       \
    }                                                                                      \
  }                                                                                        \
  static void NAME##_b(T *restrict d, const T *restrict x, size_t n) {                      \
    for (size_t i = 0; i < n; i++) {                                                       \
      T p = x[i], q = d[i];                                                                \
      d[i] = (EXPR);                                                                       \
    }                                                                                      \
  }                                                                                        \
  static void NAME##_g(T *d, const T *x, const T *y, size_t n) {                            \
    for (size_t i = 0; i < n; i++) {                                                       \
      T p = x[i], q = y[i];                                                                \
      d[i] = (EXPR);                                                                       \
    }                                                                                      \
  }                                                                                        \
  static void NAME(void *d, const void *a, const void *b, size_t n) {                      \
    if (d == a && d == b) NAME##_g(d, a, b, n);                                            \
    else if (d == a) NAME##_a(d, b, n);                                                    \
    else if (d == b) NAME##_b(d, a, n);                                                    \
    else if ((const char *)d + n * sizeof(T) <= (const char *)a ||                         \
             (const char *)a + n * sizeof(T) <= (const char *)d)                           \
      NAME##_3(d, a, b, n);                                                                \
    else NAME##_g(d, a, b, n);                                                             \
  }

DEF_KERNEL(f32_sum, float, K_SUM(p, q))
DEF_KERNEL(f32_prod, float, K_PROD(p, q))
DEF_KERNEL(f32_min, float, K_MIN(p, q))
DEF_KERNEL(f32_max, float, K_MAX(p, q))
DEF_KERNEL(f64_sum, double, K_SUM(p, q))
DEF_KERNEL(f64_prod, double, K_PROD(p, q))
DEF_KERNEL(f64_min, double, K_MIN(p, q))
DEF_KERNEL(f64_max, double, K_MAX(p, q))
DEF_KERNEL(bf16_sum, uint16_t, f2bf(K_SUM(bf2f(p), bf2f(q))))
DEF_KERNEL(bf16_prod, uint16_t, f2bf(K_PROD(bf2f(p), bf2f(q))))
DEF_KERNEL(bf16_min, uint16_t, f2bf(K_MIN(bf2f(p), bf2f(q))))
DEF_KERNEL(bf16_max, uint16_t, f2bf(K_MAX(bf2f(p), bf2f(q))))
DEF_KERNEL(f16_sum, uint16_t, f2h(K_SUM(h2f(p), h2f(q))))
DEF_KERNEL(f16_prod, uint16_t, f2h(K_PROD(h2f(p), h2f(q))))
DEF_KERNEL(f16_min, uint16_t, f2h(K_MIN(h2f(p), h2f(q))))
DEF_KERNEL(f16_max, uint16_t, f2h(K_MAX(h2f(p), h2f(q))))
/* The integer types' kernels: sum and product wrap (computed unsigned), bitwise ops. */
#define DEF_INT_KERNELS(P, T, U)                    \
  DEF_KERNEL(P##_sum, T, K_USUM(U, T, p, q))        \
  DEF_KERNEL(P##_prod, T, K_UPROD(U, T, p, q))      \
  DEF_KERNEL(P##_min, T, K_MIN(p, q))               \
  DEF_KERNEL(P##_max, T, K_MAX(p, q))               \
  DEF_KERNEL(P##_and, T, K_AND(T, p, q))            \
  DEF_KERNEL(P##_or, T, K_OR(T, p, q))              \
  DEF_KERNEL(P##_xor, T, K_XOR(T, p, q))
DEF_INT_KERNELS(i32, int32_t, uint32_t)
DEF_INT_KERNELS(i64, int64_t, uint64_t)
DEF_INT_KERNELS(u8, uint8_t, unsigned)
DEF_INT_KERNELS(i8, int8_t, unsigned)
DEF_INT_KERNELS(i16, int16_t, unsigned)

/* [dtype][op]; AVG reduces as SUM; NULL: not defined (bitwise ops on floating point). */
#define INT_ROW(P) {P##_sum, P##_sum, P##_min, P##_max, P##_prod, P##_and, P##_or, P##_xor}
static const kernel_fn kernels[SHOAL_DTYPE__COUNT][SHOAL_REDOP__COUNT] = {
  [SHOAL_FLOAT32] = {f32_sum, f32_sum, f32_min, f32_max, f32_prod},
  [SHOAL_FLOAT64] = {f64_sum, f64_sum, f64_min, f64_max, f64_prod},
  [SHOAL_INT32] = INT_ROW(i32),
  [SHOAL_INT64] = INT_ROW(i64),
  [SHOAL_BFLOAT16] = {bf16_sum, bf16_sum, bf16_min, bf16_max, bf16_prod},
  [SHOAL_FLOAT16] = {f16_sum, f16_sum, f16_min, f16_max, f16_prod},
  [SHOAL_UINT8] = INT_ROW(u8),
  [SHOAL_INT8] = INT_ROW(i8),
  [SHOAL_INT16] = INT_ROW(i16),
};

int shoal__reduce_check(shoal_dtype_t dtype, shoal_redop_t op) {
  if ((unsigned)dtype >= SHOAL_DTYPE__COUNT) return shoal__seterr(SHOAL_ERR_INVALID, "invalid dtype %d", (int)dtype);
  if ((unsigned)op >= SHOAL_REDOP__COUNT) return shoal__seterr(SHOAL_ERR_INVALID, "invalid reduction op %d", (int)op);
  if (!kernels[dtype][op])
    return shoal__seterr(SHOAL_ERR_UNSUPPORTED, "reduction %s is not defined on %s (bitwise ops take integer dtypes)",
                         shoal_redop_name(op), shoal_dtype_name(dtype));
  return 0;
}

int shoal_redop_supported(shoal_dtype_t dtype, shoal_redop_t op) { return shoal__reduce_check(dtype, op); }

void shoal__reduce3(void *dst, const void *a, const void *b, size_t n, shoal_dtype_t dtype, shoal_redop_t op) {
  if (n == 0) return;
  kernels[dtype][op](dst, a, b, n);
}

#define DEF_FILL(NAME, T)                                            \
  static void NAME(T *restrict d, size_t n, T v) {                   \
    for (size_t i = 0; i < n; i++) d[i] = v;                         \
  }
DEF_FILL(fill32, uint32_t)
DEF_FILL(fill64, uint64_t)
DEF_FILL(fill16, uint16_t)

void shoal__reduce_sum_identity(void *buf, size_t n, shoal_dtype_t dtype) {
  if (n == 0) return;
  switch (dtype) {
  case SHOAL_FLOAT32: fill32(buf, n, 0x80000000u); break;
  case SHOAL_FLOAT64: fill64(buf, n, 0x8000000000000000ull); break;
  case SHOAL_BFLOAT16:
  case SHOAL_FLOAT16: fill16(buf, n, 0x8000u); break;
  default: memset(buf, 0, n * shoal_dtype_size(dtype)); break;
  }
}

#define DEF_DIV(NAME, T, EXPR)                                       \
  static void NAME(T *restrict d, size_t n, int nranks) {            \
    for (size_t i = 0; i < n; i++) {                                 \
      T p = d[i];                                                    \
      d[i] = (EXPR);                                                 \
    }                                                                \
  }
DEF_DIV(f32_div, float, p / (float)nranks)
DEF_DIV(f64_div, double, p / (double)nranks)
DEF_DIV(i32_div, int32_t, (int32_t)(p / nranks))
DEF_DIV(i64_div, int64_t, p / (int64_t)nranks)
DEF_DIV(bf16_div, uint16_t, f2bf(bf2f(p) / (float)nranks))
DEF_DIV(f16_div, uint16_t, f2h(h2f(p) / (float)nranks))
DEF_DIV(u8_div, uint8_t, (uint8_t)(p / (unsigned)nranks))
DEF_DIV(i8_div, int8_t, (int8_t)(p / nranks))
DEF_DIV(i16_div, int16_t, (int16_t)(p / nranks))

void shoal__reduce_avg_finish(void *buf, size_t n, shoal_dtype_t dtype, int nranks) {
  if (n == 0 || nranks == 1) return;
  switch (dtype) {
  case SHOAL_FLOAT32: f32_div(buf, n, nranks); break;
  case SHOAL_FLOAT64: f64_div(buf, n, nranks); break;
  case SHOAL_INT32: i32_div(buf, n, nranks); break;
  case SHOAL_INT64: i64_div(buf, n, nranks); break;
  case SHOAL_BFLOAT16: bf16_div(buf, n, nranks); break;
  case SHOAL_FLOAT16: f16_div(buf, n, nranks); break;
  case SHOAL_UINT8: u8_div(buf, n, nranks); break;
  case SHOAL_INT8: i8_div(buf, n, nranks); break;
  case SHOAL_INT16: i16_div(buf, n, nranks); break;
  default: break;
  }
}

/* Element-wise p OP= x for the floating types (16-bit ones widened and rounded back). */
#define DEF_FMAP(name, T, EXPR)                                      \
  static void name(void *buf, size_t n, double x) {                \
    T *d = buf;                                                      \
    for (size_t i = 0; i < n; i++) {                                 \
      T p = d[i];                                                    \
      d[i] = (EXPR);                                                 \
    }                                                                \
  }
DEF_FMAP(f32_divx, float, p / (float)x)
DEF_FMAP(f64_divx, double, p / x)
DEF_FMAP(bf16_divx, uint16_t, f2bf(bf2f(p) / (float)x))
DEF_FMAP(f16_divx, uint16_t, f2h(h2f(p) / (float)x))
DEF_FMAP(f32_mul, float, p * (float)x)
DEF_FMAP(f64_mul, double, p * x)
DEF_FMAP(bf16_mul, uint16_t, f2bf(bf2f(p) * (float)x))
DEF_FMAP(f16_mul, uint16_t, f2h(h2f(p) * (float)x))

void shoal__reduce_avg_finish_w(void *buf, size_t n, shoal_dtype_t dtype, double divisor) {
  if (divisor == (double)(int)divisor) {
    shoal__reduce_avg_finish(buf, n, dtype, (int)divisor);
    return;
  }
  switch (dtype) {
  case SHOAL_FLOAT32: f32_divx(buf, n, divisor); break;
  case SHOAL_FLOAT64: f64_divx(buf, n, divisor); break;
  case SHOAL_BFLOAT16: bf16_divx(buf, n, divisor); break;
  case SHOAL_FLOAT16: f16_divx(buf, n, divisor); break;
  default: shoal__reduce_avg_finish(buf, n, dtype, divisor < 1 ? 1 : (int)divisor); break;
  }
}

void shoal__reduce_scale(void *buf, size_t n, shoal_dtype_t dtype, double f) {
  switch (dtype) {
  case SHOAL_FLOAT32: f32_mul(buf, n, f); break;
  case SHOAL_FLOAT64: f64_mul(buf, n, f); break;
  case SHOAL_BFLOAT16: bf16_mul(buf, n, f); break;
  case SHOAL_FLOAT16: f16_mul(buf, n, f); break;
  default: break;
  }
}
