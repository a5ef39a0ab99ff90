/* See exact.h. */
#include "comm/coll/exact.h"

#include <stdint.h>
#include <string.h>

#include "comm/coll/redop.h"

double shoal__exact_val(int rank, size_t i, shoal_redop_t op, int salt) {
  switch (op) {
  case SHOAL_MIN: case SHOAL_MAX: return (double)((int)((i * 31 + (size_t)rank * 17 + (size_t)salt) % 201) - 100);
  case SHOAL_PROD: {
    static const double m[4] = {1, -1, 2, -2};
    return m[(i + (size_t)rank * 3 + (size_t)salt) % 4];
  }
  default: return (double)((int)((i * 7 + (size_t)rank * 13 + (size_t)salt) % 17) - 8);
  }
}

void shoal__exact_put(void *buf, size_t i, shoal_dtype_t dt, double v) {
  switch (dt) {
  case SHOAL_FLOAT32: ((float *)buf)[i] = (float)v; break;
  case SHOAL_FLOAT64: ((double *)buf)[i] = v; break;
  case SHOAL_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
  case SHOAL_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
  case SHOAL_BFLOAT16: ((uint16_t *)buf)[i] = shoal__f32_to_bf16((float)v); break;
  case SHOAL_FLOAT16: ((uint16_t *)buf)[i] = shoal__f32_to_f16((float)v); break;
  case SHOAL_UINT8: ((uint8_t *)buf)[i] = (uint8_t)(int)v; break;
  case SHOAL_INT8: ((int8_t *)buf)[i] = (int8_t)(uint8_t)(int)v; break;
  case SHOAL_INT16: ((int16_t *)buf)[i] = (int16_t)v; break;
  default: break;
  }
}

/* One rank's value as dt holds it: unsigned bytes order the wrapped value. */
static double as_dtype(shoal_dtype_t dt, double v) { return dt == SHOAL_UINT8 ? (double)(uint8_t)(int)v : v; }

void shoal__exact_expect(void *out, size_t i, shoal_dtype_t dt, shoal_redop_t op, int n, const int *in, size_t gi,
                         int salt) {
  double acc = 0;
  int64_t bits = 0;
  int cnt = 0;
  for (int r = 0; r < n; r++) {
    if (in && !in[r]) continue;
    double v = as_dtype(dt, shoal__exact_val(r, gi, op, salt));
    int64_t b = (int64_t)v;
    if (!cnt++) acc = v, bits = b;
    else if (op == SHOAL_PROD && dt == SHOAL_UINT8) acc = (double)(uint8_t)((unsigned)acc * (unsigned)v); /* exact mod 256 */
    else if (op == SHOAL_PROD) acc *= v;
    else if (op == SHOAL_MIN) acc = v < acc ? v : acc;
    else if (op == SHOAL_MAX) acc = v > acc ? v : acc;
    else if (op == SHOAL_BAND) bits &= b;
    else if (op == SHOAL_BOR) bits |= b;
    else if (op == SHOAL_BXOR) bits ^= b;
    else acc += v;
  }
  if (!cnt) {
    memset((char *)out + i * shoal_dtype_size(dt), 0, shoal_dtype_size(dt));
    return;
  }
  if (op == SHOAL_BAND || op == SHOAL_BOR || op == SHOAL_BXOR) acc = (double)bits;
  if (op != SHOAL_AVG) {
    shoal__exact_put(out, i, dt, acc);
    return;
  }
  switch (dt) {
  case SHOAL_FLOAT32: ((float *)out)[i] = (float)acc / (float)cnt; break;
  case SHOAL_FLOAT64: ((double *)out)[i] = acc / cnt; break;
  case SHOAL_INT32: ((int32_t *)out)[i] = (int32_t)acc / cnt; break;
  case SHOAL_INT64: ((int64_t *)out)[i] = (int64_t)acc / cnt; break;
  case SHOAL_BFLOAT16: ((uint16_t *)out)[i] = shoal__f32_to_bf16((float)acc / (float)cnt); break;
  case SHOAL_FLOAT16: ((uint16_t *)out)[i] = shoal__f32_to_f16((float)acc / (float)cnt); break;
  case SHOAL_UINT8: ((uint8_t *)out)[i] = (uint8_t)((uint8_t)(int)acc / cnt); break;
  case SHOAL_INT8: ((int8_t *)out)[i] = (int8_t)((int8_t)(int)acc / cnt); break;
  case SHOAL_INT16: ((int16_t *)out)[i] = (int16_t)((int16_t)acc / cnt); break;
  default: break;
  }
}
