/* Seeded pseudo-random numbers (xoshiro256**, seeded by splitmix64): the
 * same seed gives the same stream on every machine, which the simulator's
 * determinism and the training runtime's shuffles rely on. */
#ifndef SHOAL_CORE_RNG_H
#define SHOAL_CORE_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct { uint64_t s[4]; } shoal_rng_t;

void     shoal_rng_seed(shoal_rng_t *r, uint64_t seed);
/* An independent stream derived from (seed, stream id). */
void     shoal_rng_seed2(shoal_rng_t *r, uint64_t seed, uint64_t stream);
uint64_t shoal_rng_u64(shoal_rng_t *r);
double   shoal_rng_uniform(shoal_rng_t *r);            /* [0,1) */
uint64_t shoal_rng_below(shoal_rng_t *r, uint64_t n);  /* [0,n), unbiased; n > 0 */
double   shoal_rng_normal(shoal_rng_t *r);              /* N(0,1) */
double   shoal_rng_exponential(shoal_rng_t *r, double rate);
double   shoal_rng_lognormal(shoal_rng_t *r, double mu, double sigma);
void     shoal_rng_shuffle_u32(shoal_rng_t *r, uint32_t *a, size_t n);

#endif
