/* Checkpoints: parameters and momentum of one rank plus the position in
 * training (completed epochs, iterations, training time), with a CRC-32 over
 * the whole file. Resuming is bit-exact for BSP, at an epoch boundary or in
 * the middle of an epoch, because the data order is a pure function of
 * (seed, epoch) and every step is deterministic. */
#ifndef SHOAL_TRAIN_CKPT_H
#define SHOAL_TRAIN_CKPT_H

#include <stddef.h>
#include <stdint.h>

typedef struct shoal__ckpt_meta {
  uint32_t model_kind;
  uint32_t sync_kind;
  uint32_t workers;
  uint32_t epochs_done;
  uint64_t iters_done;
  uint64_t seed;
  uint64_t nparams;
  uint32_t batch;      /* per worker */
  uint32_t ranks;      /* world size (ps: workers + servers) */
  double train_s;      /* cumulative training time (the CSV's time_s) */
  uint64_t epoch_samples; /* training samples of epoch epochs_done already used (a multiple of the
                             global batch of the run that wrote it; 0 at an epoch end) */
} shoal__ckpt_meta_t;

/* Written to path.tmp, fsync'ed, renamed over path, and the directory
 * fsync'ed: a crash leaves the old or the new checkpoint, never a torn one. */
int shoal__ckpt_save(const char *path, const shoal__ckpt_meta_t *meta, const float *params, const float *momentum);
/* Reads into params/momentum (nparams each, which must match). Errors name the file. */
/* Only the header (no CRC check of the data: shoal__ckpt_load does that). */
int shoal__ckpt_peek(const char *path, shoal__ckpt_meta_t *meta);
int shoal__ckpt_load(const char *path, shoal__ckpt_meta_t *meta, float *params, float *momentum, size_t nparams);

#endif
