/* The synchronization strategies behind include/shoal/sync.h (sync.c): one
 * table of strategies, each one file: bsp.c (bucketed gradient allreduce),
 * dssync.c (group parameter averaging with shuffled groups), localsgd.c
 * (periodic parameter average), ps.c (sharded parameter servers). sync.c
 * holds what they share: buckets, config parsing, the communication thread. */
#ifndef SHOAL_TRAIN_SYNC_H
#define SHOAL_TRAIN_SYNC_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "shoal/comm.h"
#include "shoal/train.h"
#include "train/model.h"
#include "shoal/sync.h"

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

/* ---- the strategy table ---- */

typedef struct shoal__cfg shoal__cfg_t; /* parsed key=value config */
/* Fetch a key (marks it used); absent: *out = def. Errors name the key. */
int shoal__cfg_int(shoal__cfg_t *c, const char *key, long def, long lo, long hi, long *out);
int shoal__cfg_double(shoal__cfg_t *c, const char *key, double def, double lo, double hi, double *out);
/* NULL when absent. */
const char *shoal__cfg_str(shoal__cfg_t *c, const char *key);

typedef struct shoal__strategy {
  const char *name;
  const char *keys; /* for messages: "overlap" */
  /* Parse the config (every key must be fetched) and set s->impl. */
  int (*create)(shoal_sync_t *s, shoal__cfg_t *cfg);
  void (*destroy)(shoal_sync_t *s);
  /* Called once after the buckets are registered, before the first step. */
  int (*setup)(shoal_sync_t *s);
  int (*begin)(shoal_sync_t *s);
  int (*bucket_ready)(shoal_sync_t *s, int i);
  int (*finish)(shoal_sync_t *s);
  int (*end)(shoal_sync_t *s);
  int (*final)(shoal_sync_t *s);
  int (*serve)(shoal_sync_t *s);
  int (*checkpoint)(shoal_sync_t *s);
  int (*pause)(shoal_sync_t *s); /* optional: between steps, leave the communicator to the caller */
} shoal__strategy_t;

extern const shoal__strategy_t shoal__strategy_bsp, shoal__strategy_dssync, shoal__strategy_localsgd,
    shoal__strategy_ps;
extern const shoal__strategy_t shoal__strategy_partial; /* partial.c */

typedef struct shoal__bucket {
  float *p, *g;
  size_t n, off; /* off: position in the flat concatenation */
} shoal__bucket_t;

typedef int (*shoal__job_fn)(shoal_sync_t *s, int arg);

struct shoal_sync {
  const shoal__strategy_t *st;
  shoal_comm_t *comm;    /* as given */
  shoal_comm_t *workers; /* comm, or the strategy's split (owned then) */
  int owns_workers;
  int flags;
  shoal__bucket_t *b;
  int nb, capb;
  size_t total;          /* parameters over all buckets */
  int set_up;
  long step;
  int in_step;           /* 1 after begin, 2 after finish */
  double lr;
  void *impl;
  /* the last step's figures */
  double wait_s, payload;
  int gsize;
  int max_stale;
  /* the communication thread: jobs run in the order posted */
  pthread_t th;
  int th_started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct {
    shoal__job_fn fn;
    int arg;
  } q[64];
  int posted, done, stop, job_err;
  char job_msg[512];
  int failed;
  char err[512];
  char *conf; /* the strategy and its settings sorted by key, compared across the ranks at the first step */
};

/* Run fn(s, arg) on the communication thread (started on first use), in
 * order; `threaded` 0 runs it here at once. */
int shoal__sync_post(shoal_sync_t *s, shoal__job_fn fn, int arg, int threaded);
/* Wait until every posted job ran; the first job error, with its message set. */
int shoal__sync_drain(shoal_sync_t *s);
/* Copy the buckets' parameters (or gradients) to/from one flat array of s->total. */
void shoal__sync_gather(const shoal_sync_t *s, int grads, float *flat);
void shoal__sync_scatter(shoal_sync_t *s, int grads, const float *flat);
/* Allreduce-average every bucket's parameters over the workers. */
int shoal__sync_average_params(shoal_sync_t *s, const char *what);
/* Worker 0's parameters to every worker (exact): the final model of the
 * strategies whose workers apply the same updates (bsp, partial), which
 * stay apart only if they started apart. */
int shoal__sync_broadcast_params(shoal_sync_t *s, const char *what);
/* Whether the key=value list cfg (separated as shoal_sync_create splits it) sets key. */
int shoal__sync_config_has(const char *cfg, const char *key);

#endif
