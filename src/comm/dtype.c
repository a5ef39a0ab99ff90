/* Names and sizes of the public comm enums (dtypes, reduction ops) and their
 * parsers for CLI options. The allreduce algorithms' names are in their
 * table (coll/algos.c). */
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "shoal/comm.h"

static const struct {
  const char *name;
  size_t size;
  const char *aliases[4];
} dtypes[SHOAL_DTYPE__COUNT] = {
  [SHOAL_FLOAT32] = {"float32", 4, {"float", "f32", "fp32", NULL}},
  [SHOAL_FLOAT64] = {"float64", 8, {"double", "f64", "fp64", NULL}},
  [SHOAL_INT32] = {"int32", 4, {"int", "i32", NULL, NULL}},
  [SHOAL_INT64] = {"int64", 8, {"long", "i64", NULL, NULL}},
  [SHOAL_BFLOAT16] = {"bfloat16", 2, {"bf16", NULL, NULL, NULL}},
  [SHOAL_FLOAT16] = {"float16", 2, {"half", "f16", "fp16", NULL}},
  [SHOAL_UINT8] = {"uint8", 1, {"byte", "u8", NULL, NULL}},
  [SHOAL_INT8] = {"int8", 1, {"char", "i8", NULL, NULL}},
  [SHOAL_INT16] = {"int16", 2, {"short", "i16", NULL, NULL}},
};

static const char *const redops[SHOAL_REDOP__COUNT] = {
  [SHOAL_SUM] = "sum", [SHOAL_AVG] = "avg", [SHOAL_MIN] = "min", [SHOAL_MAX] = "max", [SHOAL_PROD] = "prod",
  [SHOAL_BAND] = "band", [SHOAL_BOR] = "bor", [SHOAL_BXOR] = "bxor",
};

size_t shoal_dtype_size(shoal_dtype_t dtype) {
  return (unsigned)dtype < SHOAL_DTYPE__COUNT ? dtypes[dtype].size : 0;
}

const char *shoal_dtype_name(shoal_dtype_t dtype) {
  return (unsigned)dtype < SHOAL_DTYPE__COUNT ? dtypes[dtype].name : "?";
}

const char *shoal_redop_name(shoal_redop_t op) {
  return (unsigned)op < SHOAL_REDOP__COUNT ? redops[op] : "?";
}

int shoal_dtype_parse(const char *s, shoal_dtype_t *out) {
  if (!s) return shoal__seterr(SHOAL_ERR_INVALID, "dtype: missing value");
  if (!out) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_dtype_parse: NULL output pointer");
  for (int d = 0; d < SHOAL_DTYPE__COUNT; d++) {
    int hit = !strcasecmp(s, dtypes[d].name);
    for (int a = 0; !hit && a < 4 && dtypes[d].aliases[a]; a++) hit = !strcasecmp(s, dtypes[d].aliases[a]);
    if (hit) {
      *out = (shoal_dtype_t)d;
      return 0;
    }
  }
  return shoal__seterr(SHOAL_ERR_INVALID,
                       "unknown dtype '%s' (expected float32, float64, int32, int64, bfloat16, float16, uint8, int8, int16)", s);
}

int shoal_redop_parse(const char *s, shoal_redop_t *out) {
  if (!s) return shoal__seterr(SHOAL_ERR_INVALID, "reduction op: missing value");
  if (!out) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_redop_parse: NULL output pointer");
  for (int o = 0; o < SHOAL_REDOP__COUNT; o++)
    if (!strcasecmp(s, redops[o])) {
      *out = (shoal_redop_t)o;
      return 0;
    }
  if (!strcasecmp(s, "mean")) {
    *out = SHOAL_AVG;
    return 0;
  }
  return shoal__seterr(SHOAL_ERR_INVALID, "unknown reduction op '%s' (expected sum, avg, min, max, prod, band, bor, bxor)", s);
}
