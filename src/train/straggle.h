/* Straggler injection for experiments (`shoal train --straggle SPEC`): after
 * its forward pass and after each backward layer, before that layer's
 * gradients are reported, a worker sleeps (F - 1) x the time that part took
 * (runtime.c), so its step takes F times its measured compute and its
 * gradients come late. SPEC is a comma list
 * of patterns, multiplied together:
 *   slow:R:X      worker R: F = 1 + X (one rank X x 100 % slower)
 *   jitter:S      every worker: F = exp(S (Z + 2)) with Z ~ N(0, 1), at least 1
 *                 (a lognormal of sigma S; median e^(2S) so that the delay, which
 *                 cannot be negative, is clipped in only 2.3 % of the draws)
 *   spike:P:X     every worker, each step with probability P: F = X
 *   spike1:P:LO:HI  in a share P of the steps one worker, drawn anew each time,
 *                 F uniform in [LO, HI] (spike1:P:X: F = X); the others F = 1
 * Draws are a pure function of (seed, worker, iteration), so two runs with
 * the same seed (say bsp and partial) see the same pattern. */
#ifndef SHOAL_TRAIN_STRAGGLE_H
#define SHOAL_TRAIN_STRAGGLE_H

#include <stdint.h>

typedef struct shoal__straggle {
  int on;
  int slow_rank;      /* -1: none */
  double slow_extra;
  double jitter;      /* sigma; 0: none */
  double spike_p, spike_x;
  double one_p, one_lo, one_hi; /* spike1; one_p 0: none */
  int workers;
  uint64_t seed;
} shoal__straggle_t;

/* spec NULL or "": off. Errors name --straggle and the bad item. */
int shoal__straggle_parse(const char *spec, uint64_t seed, int workers, shoal__straggle_t *out);
/* The factor F of worker w at iteration it (>= 1). */
double shoal__straggle_factor(const shoal__straggle_t *s, int w, long it);
/* Sleep (F - 1) x compute_s; returns the seconds slept. */
double shoal__straggle_apply(const shoal__straggle_t *s, int w, long it, double compute_s);

#endif
