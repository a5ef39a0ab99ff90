/* Inputs and expected results for checking collectives from the CLI
 * (shoal bench --check, shoal selftest). Values are small integers, so any
 * reduction order gives exact results in every dtype (bf16 included) and the
 * comparison is bit for bit. */
#ifndef SHOAL_TOOLS_COLL_CHECK_H
#define SHOAL_TOOLS_COLL_CHECK_H

#include <stddef.h>

#include "shoal/comm.h"

/* buf[i] = rank `rank`'s input for op at element base + i, for i < count (the library's exact values,
 * comm/coll/exact.h: |v| <= 8 for sum/avg, 100 for min/max, 2 for prod). */
void   shoal_tool_fill(void *buf, size_t count, shoal_dtype_t dt, int rank, shoal_redop_t op, size_t base);
/* out[i] = the reduction over ranks 0..n-1 of val(r, base + i), AVG in dt's arithmetic. */
void   shoal_tool_expect(void *out, size_t count, shoal_dtype_t dt, shoal_redop_t op, int n, size_t base);
/* Number of elements whose bytes differ. */
size_t shoal_tool_count_wrong(const void *got, const void *want, size_t count, size_t es);

#endif
