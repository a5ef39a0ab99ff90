/* See coll_check.h: the library's exact values (comm/coll/exact.h) over whole buffers. */
#include <string.h>

#include "comm/coll/exact.h"
#include "coll_check.h"

void shoal_tool_fill(void *buf, size_t count, shoal_dtype_t dt, int rank, shoal_redop_t op, size_t base) {
  for (size_t i = 0; i < count; i++) shoal__exact_put(buf, i, dt, shoal__exact_val(rank, base + i, op, 0));
}

void shoal_tool_expect(void *out, size_t count, shoal_dtype_t dt, shoal_redop_t op, int n, size_t base) {
  for (size_t i = 0; i < count; i++) shoal__exact_expect(out, i, dt, op, n, NULL, base + i, 0);
}

size_t shoal_tool_count_wrong(const void *got, const void *want, size_t count, size_t es) {
  if (!memcmp(got, want, count * es)) return 0;
  size_t wrong = 0;
  for (size_t i = 0; i < count; i++)
    wrong += memcmp((const char *)got + i * es, (const char *)want + i * es, es) != 0;
  return wrong;
}
