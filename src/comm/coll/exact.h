/* Values exact in every dtype and in any reduction order, and the reference
 * reduction over a set of ranks: the collective tests and `shoal selftest` /
 * `shoal bench --check` compare results bit for bit against these. */
#ifndef SHOAL_COMM_EXACT_H
#define SHOAL_COMM_EXACT_H
#include <stddef.h>

#include "shoal/comm.h"

/* Rank `rank`'s value of element i: small integers (products of +-1, +-2),
 * so sums, products, minima and maxima are exact in every dtype. `salt`
 * shifts the pattern (0: the tools' values). */
double shoal__exact_val(int rank, size_t i, shoal_redop_t op, int salt);

/* Element i of buf set to v in dt's representation. */
void shoal__exact_put(void *buf, size_t i, shoal_dtype_t dt, double v);

/* Element i of `out`: the reduction of value index gi over the ranks r < n
 * with in == NULL or in[r] != 0, in dt's representation; AVG divides the
 * exact sum by the number of those ranks in dt's own arithmetic; no rank
 * at all gives zero. */
void shoal__exact_expect(void *out, size_t i, shoal_dtype_t dt, shoal_redop_t op, int n, const int *in, size_t gi,
                         int salt);

#endif
