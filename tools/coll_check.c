/* See coll_check.h. */
#include <stdint.h>
#include <string.h>

#include "comm/coll/redop.h"
#include "coll_check.h"

double shoal_tool_val(int rank, size_t i, shoal_redop_t op) {
  switch (op) {
  case SHOAL_MIN: case SHOAL_MAX: return (double)((int)((i * 31 + (size_t)rank * 17) % 201) - 100);
  case SHOAL_PROD: {
    static const double m[4] = {1, -1, 2, -2};
    return m[(i + (size_t)rank * 3) % 4];
  }
  default: return (double)((int)((i * 7 + (size_t)rank * 13) % 17) - 8);
  }
}

void shoal_tool_put(void *buf, size_t i, shoal_dtype_t dt, double v) {
  switch (dt) {
  case SHOAL_FLOAT32: ((float *)buf)[i] = (float)v; break;
  case SHOAL_FLOAT64: ((double *)buf)[i] = v; break;
  case SHOAL_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
  case SHOAL_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
  case SHOAL_BFLOAT16: ((uint16_t *)buf)[i] = shoal__f32_to_bf16((float)v); break;
  case SHOAL_FLOAT16: ((uint16_t *)buf)[i] = shoal__f32_to_f16((float)v); break;
  case SHOAL_UINT8: ((uint8_t *)buf)[i] = (uint8_t)(int)v; break;
  default: break;
  }
}

void shoal_tool_fill(void *buf, size_t count, shoal_dtype_t dt, int rank, shoal_redop_t op, size_t base) {
  for (size_t i = 0; i < count; i++) shoal_tool_put(buf, i, dt, shoal_tool_val(rank, base + i, op));
}

void shoal_tool_expect(void *out, size_t count, shoal_dtype_t dt, shoal_redop_t op, int n, size_t base) {
  for (size_t i = 0; i < count; i++) {
    double acc = shoal_tool_val(0, base + i, op);
    for (int r = 1; r < n; r++) {
      double v = shoal_tool_val(r, base + i, op);
      if (op == SHOAL_PROD) acc *= v;
      else if (op == SHOAL_MIN) acc = v < acc ? v : acc;
      else if (op == SHOAL_MAX) acc = v > acc ? v : acc;
      else acc += v;
    }
    if (op != SHOAL_AVG) {
      shoal_tool_put(out, i, dt, acc);
      continue;
    }
    switch (dt) {
    case SHOAL_FLOAT32: ((float *)out)[i] = (float)acc / (float)n; break;
    case SHOAL_FLOAT64: ((double *)out)[i] = acc / n; break;
    case SHOAL_INT32: ((int32_t *)out)[i] = (int32_t)acc / n; break;
    case SHOAL_INT64: ((int64_t *)out)[i] = (int64_t)acc / n; break;
    case SHOAL_BFLOAT16: ((uint16_t *)out)[i] = shoal__f32_to_bf16((float)acc / (float)n); break;
    case SHOAL_FLOAT16: ((uint16_t *)out)[i] = shoal__f32_to_f16((float)acc / (float)n); break;
    default: break;
    }
  }
}

size_t shoal_tool_count_wrong(const void *got, const void *want, size_t count, size_t es) {
  if (!memcmp(got, want, count * es)) return 0;
  size_t wrong = 0;
  for (size_t i = 0; i < count; i++)
    wrong += memcmp((const char *)got + i * es, (const char *)want + i * es, es) != 0;
  return wrong;
}
