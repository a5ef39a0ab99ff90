/* Reduction kernels and 16-bit float conversions, checked against
 * independent references (the compiler's _Float16 for IEEE half, an exact
 * nearest-even search for bfloat16, scalar loops for the kernels). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "comm/coll/exact.h"
#include "comm/coll/redop.h"
#include "core/rng.h"
#include "../runner.h"

static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint16_t ref_f2h(float f) {
  _Float16 h = (_Float16)f;
  uint16_t u;
  memcpy(&u, &h, 2);
  return u;
}
static float ref_h2f(uint16_t u) {
  _Float16 h;
  memcpy(&h, &u, 2);
  return (float)h;
}

static void check_f2h(float f) {
  uint16_t got = shoal__f32_to_f16(f), want = ref_f2h(f);
  if (isnan(f)) {
    CHECK_MSG((got & 0x7c00) == 0x7c00 && (got & 0x3ff), "f32 %a -> f16 0x%04x: not NaN", f, got);
    return;
  }
  CHECK_MSG(got == want, "f32 %a (0x%08x) -> f16 0x%04x, want 0x%04x", f, f2u(f), got, want);
}

TEST(reduce_f16_conversion_exhaustive) {
  for (uint32_t h = 0; h < 65536; h++) {
    float got = shoal__f16_to_f32((uint16_t)h), want = ref_h2f((uint16_t)h);
    if (isnan(want)) {
      CHECK_MSG(isnan(got), "f16 0x%04x -> %a, want NaN", h, got);
      continue;
    }
    CHECK_MSG(f2u(got) == f2u(want), "f16 0x%04x -> %a, want %a", h, got, want);
    check_f2h(want); /* round trip */
    /* the exact midpoint to the next half (ties go to even), and just around it */
    if ((h & 0x7fff) < 0x7bff) {
      double mid = ((double)want + (double)ref_h2f((uint16_t)(h + 1))) / 2;
      float m = (float)mid;
      check_f2h(m);
      check_f2h(nextafterf(m, INFINITY));
      check_f2h(nextafterf(m, -INFINITY));
    }
  }
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 65504.0f, 65519.0f, 65520.0f, 65536.0f, 1e10f,
                            -1e10f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-26f, 0x1p-14f, 0x1.ffcp-15f, 3.0e38f,
                            0x1p-149f};
  for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) check_f2h(specials[i]);
  shoal_rng_t rng;
  shoal_rng_seed(&rng, 42);
  for (int i = 0; i < 200000; i++) {
    float f = u2f((uint32_t)shoal_rng_u64(&rng));
    check_f2h(f);
  }
}

/* bfloat16 reference: the nearest of the two candidates, ties to even. */
static uint16_t ref_f2bf(float f) {
  uint32_t u = f2u(f);
  uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
  if ((u & 0xffff) == 0) return lo;
  double x = f, dlo = u2f((uint32_t)lo << 16), dhi = u2f((uint32_t)hi << 16);
  if ((hi & 0x7fff) == 0x7f80) dhi = copysign(0x1p128, x); /* rounding past the largest finite value */
  double elo = fabs(x - dlo), ehi = fabs(dhi - x);
  if (elo < ehi) return lo;
  if (ehi < elo) return hi;
  return (lo & 1) ? hi : lo;
}

TEST(reduce_bf16_conversion) {
  shoal_rng_t rng;
  shoal_rng_seed(&rng, 7);
  for (int i = 0; i < 400000; i++) {
    uint32_t u = (uint32_t)shoal_rng_u64(&rng);
    if (i % 4 == 1) u = (u & 0xffff0000u) | 0x8000u; /* exact ties */
    if (i % 4 == 2) u = (u & 0xffff0000u) | 0x7fffu;
    float f = u2f(u);
    uint16_t got = shoal__f32_to_bf16(f);
    if (isnan(f)) {
      CHECK_MSG(isnan(shoal__bf16_to_f32(got)), "NaN 0x%08x -> 0x%04x", u, got);
      continue;
    }
    CHECK_MSG(got == ref_f2bf(f), "f32 0x%08x -> bf16 0x%04x, want 0x%04x", u, got, ref_f2bf(f));
  }
  for (uint32_t h = 0; h < 65536; h++) {
    float f = shoal__bf16_to_f32((uint16_t)h);
    CHECK_EQ(f2u(f), h << 16);
    if (!isnan(f)) CHECK_EQ(shoal__f32_to_bf16(f), h);
  }
  CHECK_EQ(shoal__f32_to_bf16(3.4028235e38f), 0x7f80); /* FLT_MAX rounds to inf */
  CHECK_EQ(shoal__f32_to_bf16(-INFINITY), 0xff80);
}

/* Scalar reference in double (exact for the small integers used here). */
static double get(const void *buf, size_t i, shoal_dtype_t dt) {
  switch (dt) {
  case SHOAL_FLOAT32: return ((const float *)buf)[i];
  case SHOAL_FLOAT64: return ((const double *)buf)[i];
  case SHOAL_INT32: return ((const int32_t *)buf)[i];
  case SHOAL_INT64: return (double)((const int64_t *)buf)[i];
  case SHOAL_BFLOAT16: return shoal__bf16_to_f32(((const uint16_t *)buf)[i]);
  case SHOAL_FLOAT16: return shoal__f16_to_f32(((const uint16_t *)buf)[i]);
  case SHOAL_UINT8: return ((const uint8_t *)buf)[i];
  case SHOAL_INT8: return ((const int8_t *)buf)[i];
  case SHOAL_INT16: return ((const int16_t *)buf)[i];
  default: return 0;
  }
}
static double ref_op(shoal_redop_t op, double a, double b) {
  switch (op) {
  case SHOAL_SUM: case SHOAL_AVG: return a + b;
  case SHOAL_PROD: return a * b;
  case SHOAL_MIN: return a < b ? a : b;
  case SHOAL_BAND: return (double)((int64_t)a & (int64_t)b);
  case SHOAL_BOR: return (double)((int64_t)a | (int64_t)b);
  case SHOAL_BXOR: return (double)((int64_t)a ^ (int64_t)b);
  default: return a > b ? a : b;
  }
}

TEST(reduce_kernels_all_dtypes_ops_and_aliasing) {
  const size_t ns[] = {0, 1, 7, 16, 1009};
  shoal_rng_t rng;
  shoal_rng_seed(&rng, 3);
  for (int dt = 0; dt < SHOAL_DTYPE__COUNT; dt++)
    for (int op = 0; op < SHOAL_REDOP__COUNT; op++)
      for (size_t k = 0; k < sizeof ns / sizeof ns[0] && !shoal_redop_supported(dt, op); k++) {
        size_t n = ns[k], es = shoal_dtype_size(dt);
        unsigned char a[1009 * 8], b[1009 * 8], d[1009 * 8], want[1009 * 8];
        for (size_t i = 0; i < n; i++) {
          shoal__exact_put(a, i, dt, (double)((int)(shoal_rng_u64(&rng) % 17) - 8));
          shoal__exact_put(b, i, dt, (double)((int)(shoal_rng_u64(&rng) % 17) - 8));
          shoal__exact_put(want, i, dt, ref_op(op, get(a, i, dt), get(b, i, dt)));
        }
        shoal__reduce3(d, a, b, n, dt, op); /* distinct */
        CHECK_MSG(!memcmp(d, want, n * es), "%s %s n=%zu distinct", shoal_dtype_name(dt), shoal_redop_name(op), n);
        unsigned char a2[1009 * 8], b2[1009 * 8];
        memcpy(a2, a, n * es);
        shoal__reduce3(a2, a2, b, n, dt, op); /* dst == a */
        CHECK_MSG(!memcmp(a2, want, n * es), "%s %s n=%zu dst==a", shoal_dtype_name(dt), shoal_redop_name(op), n);
        memcpy(b2, b, n * es);
        shoal__reduce3(b2, a, b2, n, dt, op); /* dst == b */
        CHECK_MSG(!memcmp(b2, want, n * es), "%s %s n=%zu dst==b", shoal_dtype_name(dt), shoal_redop_name(op), n);
      }
  /* bitwise ops on every integer dtype, on no floating-point one */
  int supported = 0;
  for (int dt = 0; dt < SHOAL_DTYPE__COUNT; dt++)
    for (int op = 0; op < SHOAL_REDOP__COUNT; op++) supported += !shoal_redop_supported(dt, op);
  CHECK_EQ(supported, 4 * 5 + 5 * 8);
  CHECK_EQ(shoal_redop_supported(SHOAL_BFLOAT16, SHOAL_BXOR), SHOAL_ERR_UNSUPPORTED);
  CHECK_CONTAINS(shoal_last_error(), "bxor");
  CHECK_CONTAINS(shoal_last_error(), "bfloat16");
  CHECK_EQ(shoal__reduce_check((shoal_dtype_t)99, SHOAL_SUM), SHOAL_ERR_INVALID);
  CHECK_EQ(shoal_redop_supported(SHOAL_INT8, (shoal_redop_t)8), SHOAL_ERR_INVALID);
}

TEST(reduce_rounding_and_wraparound) {
  /* bf16: 256 + 1 is not representable; ties to even gives 256 */
  uint16_t x = shoal__f32_to_bf16(256.0f), one = shoal__f32_to_bf16(1.0f), r;
  shoal__reduce3(&r, &x, &one, 1, SHOAL_BFLOAT16, SHOAL_SUM);
  CHECK_EQ(shoal__bf16_to_f32(r), 256.0);
  /* f16: 2048 + 1 -> 2048 (tie to even); 2048 + 3 -> 2052 */
  uint16_t h = shoal__f32_to_f16(2048.0f), three = shoal__f32_to_f16(3.0f);
  shoal__reduce3(&r, &h, &three, 1, SHOAL_FLOAT16, SHOAL_SUM);
  CHECK_EQ(shoal__f16_to_f32(r), 2052.0);
  /* int32 sum wraps instead of being undefined */
  int32_t big = INT32_MAX, o = 1, s;
  shoal__reduce3(&s, &big, &o, 1, SHOAL_INT32, SHOAL_SUM);
  CHECK_EQ(s, INT32_MIN);
  /* the small integer types wrap too, as torch's tensors do: 200 + 100 = 44 in uint8, 100 + 100 = -56 in int8 */
  uint8_t ua = 200, ub = 100, ur;
  shoal__reduce3(&ur, &ua, &ub, 1, SHOAL_UINT8, SHOAL_SUM);
  CHECK_EQ(ur, 44);
  shoal__reduce3(&ur, &ua, &ub, 1, SHOAL_UINT8, SHOAL_MIN); /* unsigned order */
  CHECK_EQ(ur, 100);
  int8_t ia = 100, ib = 100, ir;
  shoal__reduce3(&ir, &ia, &ib, 1, SHOAL_INT8, SHOAL_SUM);
  CHECK_EQ(ir, -56);
  int16_t sa = -32768, sb = -1, sr;
  shoal__reduce3(&sr, &sa, &sb, 1, SHOAL_INT16, SHOAL_PROD);
  CHECK_EQ(sr, -32768);
  int64_t xa = 0x0f0f, xb = 0x00ff, xr;
  shoal__reduce3(&xr, &xa, &xb, 1, SHOAL_INT64, SHOAL_BXOR);
  CHECK_EQ(xr, 0x0ff0);
  /* min/max keep the order: a NaN in b wins for min (like minps) */
  float fa = 1.0f, fb = NAN, fr;
  shoal__reduce3(&fr, &fa, &fb, 1, SHOAL_FLOAT32, SHOAL_MIN);
  CHECK(isnan(fr));
}

TEST(reduce_avg_finish) {
  int32_t iv[4] = {7, -7, 8, 0};
  shoal__reduce_avg_finish(iv, 4, SHOAL_INT32, 2);
  CHECK_EQ(iv[0], 3);
  CHECK_EQ(iv[1], -3); /* truncation toward zero */
  CHECK_EQ(iv[2], 4);
  int64_t lv[2] = {-9, 9};
  shoal__reduce_avg_finish(lv, 2, SHOAL_INT64, 4);
  CHECK_EQ(lv[0], -2);
  CHECK_EQ(lv[1], 2);
  float fv[2] = {1.0f, 3.0f};
  shoal__reduce_avg_finish(fv, 2, SHOAL_FLOAT32, 3);
  CHECK(fv[0] == 1.0f / 3.0f && fv[1] == 1.0f);
  uint16_t hv = shoal__f32_to_f16(3.0f);
  shoal__reduce_avg_finish(&hv, 1, SHOAL_FLOAT16, 2);
  CHECK_EQ(shoal__f16_to_f32(hv), 1.5);
  uint16_t bv = shoal__f32_to_bf16(6.0f);
  shoal__reduce_avg_finish(&bv, 1, SHOAL_BFLOAT16, 4);
  CHECK_EQ(shoal__bf16_to_f32(bv), 1.5);
  uint8_t uv[2] = {255, 7};
  shoal__reduce_avg_finish(uv, 2, SHOAL_UINT8, 2);
  CHECK(uv[0] == 127 && uv[1] == 3);
  int8_t cv[2] = {-7, 127};
  shoal__reduce_avg_finish(cv, 2, SHOAL_INT8, 2);
  CHECK(cv[0] == -3 && cv[1] == 63);
  int16_t hv16[1] = {-32767};
  shoal__reduce_avg_finish(hv16, 1, SHOAL_INT16, 3);
  CHECK_EQ(hv16[0], -10922);
}

TEST(reduce_dtype_names_and_parsers) {
  for (int d = 0; d < SHOAL_DTYPE__COUNT; d++) {
    shoal_dtype_t back;
    CHECK_OK(shoal_dtype_parse(shoal_dtype_name(d), &back));
    CHECK_EQ(back, d);
  }
  CHECK_EQ(shoal_dtype_size(SHOAL_BFLOAT16), 2);
  CHECK_EQ(shoal_dtype_size(SHOAL_FLOAT64), 8);
  CHECK_EQ(shoal_dtype_size((shoal_dtype_t)42), 0);
  shoal_dtype_t dt = SHOAL_INT64;
  CHECK_OK(shoal_dtype_parse("f16", &dt));
  CHECK_EQ(dt, SHOAL_FLOAT16);
  CHECK_EQ(shoal_dtype_parse("float17", &dt), SHOAL_ERR_INVALID);
  CHECK_EQ(dt, SHOAL_FLOAT16); /* untouched on error */
  CHECK_CONTAINS(shoal_last_error(), "float17");
  for (int o = 0; o < SHOAL_REDOP__COUNT; o++) {
    shoal_redop_t back;
    CHECK_OK(shoal_redop_parse(shoal_redop_name(o), &back));
    CHECK_EQ(back, o);
  }
  shoal_redop_t op;
  CHECK_EQ(shoal_redop_parse("xor", &op), SHOAL_ERR_INVALID);
  for (int a = 0; a < SHOAL_ALGO__COUNT; a++) {
    shoal_algo_t back;
    CHECK_OK(shoal_algo_parse(shoal_algo_name(a), &back));
    CHECK_EQ(back, a);
  }
  shoal_algo_t al;
  CHECK_OK(shoal_algo_parse("rabenseifner", &al));
  CHECK_EQ(al, SHOAL_ALGO_RHD);
  CHECK_EQ(shoal_algo_parse("tree", &al), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "tree");
  /* a NULL output pointer is an argument error, not a crash */
  CHECK_EQ(shoal_algo_parse("ring", NULL), SHOAL_ERR_INVALID);
  CHECK_EQ(shoal_dtype_parse("float32", NULL), SHOAL_ERR_INVALID);
  CHECK_EQ(shoal_redop_parse("sum", NULL), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "NULL output");
  CHECK_EQ(shoal_comm_set_timeout(NULL, 5), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "communicator is NULL");
}
