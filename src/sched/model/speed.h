/* Speed models: steps/s of a job for a placement. Pluggable: the analytic
 * alpha-beta model (speed_analytic.c) and the table model read from Gavel's
 * measured throughputs (speed_table.c). Formulas in docs/simulator.md.
 *
 * A placement is reduced to its shape (workers, PSs, machines, racks, PS
 * locality); a speed model is a pure function of (model, shape), so callers
 * may cache it. */
#ifndef SHOAL_SCHED_MODEL_SPEED_H
#define SHOAL_SCHED_MODEL_SPEED_H

#include "sched/model/cluster.h"
#include "sched/model/job.h"

typedef struct shoal_model {
  char name[64];
  double grad_bytes;        /* m: gradient (= parameter) bytes exchanged per step */
  double compute_s;         /* per-step compute of one worker at its local batch (s) */
  double spread_penalty;    /* multiplier when a job spans > 1 machine (Blox placement_penalty) */
  int min_gpus, max_gpus;   /* sizes this model exists for (table: measured sizes) */
  int table_row;            /* speed_table: row in its table, -1 otherwise */
} shoal_model_t;

typedef struct shoal_shape {
  int workers;
  int ps;
  int machines;             /* machines touched by workers or PSs */
  int racks;
  int min_local_ps;         /* PS jobs: fewest PSs co-located with any one worker */
  double xrack_gbps;        /* cross-rack jobs: this job's share of the rack uplinks
                             * (min over its racks of uplink/x_k, Gb/s); 0: the
                             * static share NIC/oversub (what policies see) */
} shoal_shape_t;

typedef struct shoal_speed shoal_speed_t;
struct shoal_speed {
  const char *name;         /* "analytic", "table" */
  int nmodels;
  shoal_model_t *models;
  /* steps/s of job j (its model, sync flag, arch) for a shape; 0 if the shape
   * cannot run (no workers, PS job without PSs) */
  double (*rate)(const shoal_speed_t *s, const shoal_cluster_t *c, const shoal_job_t *j, const shoal_shape_t *sh);
  void (*destroy)(shoal_speed_t *s);
  void *impl;
  /* parameters common to both (see docs/simulator.md) */
  double overlap;           /* 0: T = comp + comm; 1: T = max(comp, comm) */
  int clamp_spread;         /* table: clamp spread/consolidated ratio to <= 1 */
};

/* Shape of an allocation on a cluster. */
shoal_shape_t shoal__shape_of(const shoal_cluster_t *c, const shoal_alloc_t *a);
/* Shape of n workers (+ ps PSs) consolidated on the fewest machines of size g. */
shoal_shape_t shoal__shape_consolidated(const shoal_cluster_t *c, int workers, int ps);

/* The analytic model with its built-in model zoo (docs/simulator.md). */
int shoal__speed_analytic_create(shoal_speed_t **out);
/* The table model from Gavel's throughputs.json; gpu = "v100", "p100" or "k80". */
int shoal__speed_table_create(const char *json_path, const char *gpu, int clamp_spread, shoal_speed_t **out);
void shoal__speed_destroy(shoal_speed_t *s);

/* Index of the model called name, -1 if absent. */
int shoal__speed_find_model(const shoal_speed_t *s, const char *name);

#endif
