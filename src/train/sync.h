/* The synchronization strategies behind shoal_train_run (runtime.c):
 * bsp.c (bucketed gradient allreduce, overlapped with backward on a
 * communication thread), dssync.c (group parameter averaging with shuffled
 * groups), ps.c (sharded parameter servers), and localsgd (runtime.c). */
#ifndef SHOAL_TRAIN_SYNC_H
#define SHOAL_TRAIN_SYNC_H

#include <stddef.h>
#include <stdint.h>

#include "shoal/comm.h"
#include "shoal/train.h"
#include "train/model.h"

/* ---- bsp ---- */
typedef struct shoal__bsp shoal__bsp_t;
/* Buckets of at least bucket_bytes, whole layers, last layer first. */
int  shoal__bsp_create(shoal_comm_t *comm, shoal_model_t *m, size_t bucket_bytes, int overlap, shoal__bsp_t **out);
void shoal__bsp_destroy(shoal__bsp_t *b);
/* The grad-ready hook for shoal__model_backward (arg = the bsp). */
void shoal__bsp_layer_ready(int layer, void *arg);
/* Wait until every bucket of this iteration is averaged (without overlap,
 * allreduce them all now). *wait_s = time this thread was blocked. */
int  shoal__bsp_finish(shoal__bsp_t *b, double *wait_s);
int  shoal__bsp_nbuckets(const shoal__bsp_t *b);

/* ---- dssync ---- */
typedef struct shoal__ds_params {
  shoal_ds_pattern_t kind;
  int n;              /* workers */
  int k;              /* group size (random, fixed) or largest radix (butterfly, topo local) */
  int h, b;           /* topo: bridge period and width (0: defaults) */
  uint64_t seed;
  const int *rack_of; /* topo: rack id of each worker (n entries) */
} shoal__ds_params_t;

typedef struct shoal__ds shoal__ds_t;
/* Validates (e.g. topo without racks) with errors naming the option. */
int  shoal__ds_create(shoal_comm_t *world, const shoal__ds_params_t *p, shoal__ds_t **out);
void shoal__ds_destroy(shoal__ds_t *ds);
/* Pure: group id (0..*ngroups-1, numbered by smallest member) of every worker in round t. */
int  shoal__ds_groups(const shoal__ds_t *ds, uint64_t t, int *group_of, int *ngroups);
/* The number of rounds after which butterfly averaging is exact (L), 0 if not butterfly. */
int  shoal__ds_rounds_exact(const shoal__ds_t *ds);
/* Average params within this rank's group of round t (collective over world:
 * a new partition triggers one shoal_comm_split, cached afterwards). */
int  shoal__ds_sync(shoal__ds_t *ds, uint64_t t, float *params, size_t n, int *group_size);
/* The spec's expected contraction rho = (N-k) / (k (N-1)) of random partitions. */
double shoal__ds_random_rho(int n, int k);

/* ---- ps ---- */
/* Run the server loop on this (server) rank until every worker is done. */
int shoal__ps_server(shoal_comm_t *world, const shoal_train_opts_t *o, int nworkers, shoal_model_t *m,
                     shoal_train_result_t *res);
typedef struct shoal__ps_worker shoal__ps_worker_t;
int  shoal__ps_worker_create(shoal_comm_t *world, const shoal_train_opts_t *o, int nworkers, size_t nparams,
                             shoal__ps_worker_t **out);
void shoal__ps_worker_destroy(shoal__ps_worker_t *w);
/* Push this iteration's gradients (lr for the servers' step), pull new parameters. */
int  shoal__ps_push_pull(shoal__ps_worker_t *w, const float *grads, float *params, double lr);
/* Tell the servers this worker is done and receive the final parameters. */
int  shoal__ps_finish(shoal__ps_worker_t *w, float *params);
/* Shard s of n parameters over S servers: [*off, *off + *len). */
void shoal__ps_shard(size_t n, int S, int s, size_t *off, size_t *len);

#endif
