/* Checkpoints: parameters and momentum of one rank plus the position in
 * training (completed epochs and iterations), with a CRC-32 over the whole
 * file. Resuming at an epoch boundary is bit-exact for BSP because the data
 * order is a pure function of (seed, epoch) and every step is deterministic. */
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
} shoal__ckpt_meta_t;

/* Written to path.tmp, then renamed: a crash never leaves a torn checkpoint. */
int shoal__ckpt_save(const char *path, const shoal__ckpt_meta_t *meta, const float *params, const float *momentum);
/* Reads into params/momentum (nparams each, which must match). Errors name the file. */
int shoal__ckpt_load(const char *path, shoal__ckpt_meta_t *meta, float *params, float *momentum, size_t nparams);

#endif
