/* Reduction kernels of the collectives and the 16-bit float conversions.
 *
 * Every kernel computes dst[i] = a[i] OP b[i] with a fixed operand order:
 * the algorithms pass the lower rank's contribution as a, so that ranks that
 * compute the same element compute the same expression and get the same bits
 * (min/max with NaN is not commutative). dst may be a or b exactly (never a
 * partial overlap). bfloat16 and float16 are widened to float32, reduced, and
 * rounded back to nearest-even at every step. AVG is reduced as SUM; the
 * algorithm then calls shoal__reduce_avg_finish once on the final value
 * (integers truncate toward zero, like C division). */
#ifndef SHOAL_COMM_REDUCE_H
#define SHOAL_COMM_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "shoal/comm.h"

/* 0 if dtype/op is a valid reduction; else SHOAL_ERR_INVALID or
 * SHOAL_ERR_UNSUPPORTED with a message naming both. */
int shoal__reduce_check(shoal_dtype_t dtype, shoal_redop_t op);

void shoal__reduce3(void *dst, const void *a, const void *b, size_t n, shoal_dtype_t dtype, shoal_redop_t op);
/* n elements of SUM's (and AVG's) identity: -0.0 for the floating types (x + -0.0 is x for every x,
 * -0.0 included, where +0.0 would turn -0.0 into +0.0), 0 for the integers. */
void shoal__reduce_sum_identity(void *buf, size_t n, shoal_dtype_t dtype);
/* AVG's last step: divide n elements by nranks. */
void shoal__reduce_avg_finish(void *buf, size_t n, shoal_dtype_t dtype, int nranks);
/* The same by a divisor that need not be whole (weighted data sets): a whole one is
 * shoal__reduce_avg_finish exactly; another one is for the floating types only (an integer type is
 * divided by its whole part). */
void shoal__reduce_avg_finish_w(void *buf, size_t n, shoal_dtype_t dtype, double divisor);
/* Multiply n elements of a floating type by f (other types: unchanged). */
void shoal__reduce_scale(void *buf, size_t n, shoal_dtype_t dtype, double f);

/* IEEE binary16 and bfloat16 <-> float32: round to nearest even, subnormals,
 * infinities; NaN stays NaN (quieted). */
float    shoal__f16_to_f32(uint16_t h);
uint16_t shoal__f32_to_f16(float f);
float    shoal__bf16_to_f32(uint16_t h);
uint16_t shoal__f32_to_bf16(float f);

#endif
