/* The allreduce algorithms as one table (algos.c), one chooser (choose.c)
 * and one dispatcher (allreduce.c).
 *
 * An algorithm is a file that defines one shoal__coll_algo_t (its name, when
 * it applies, its cost from the profile, the parameters it runs with, how it
 * runs) plus its line in the table; its id is its position in the table,
 * which is what shoal_algo_parse / shoal_algo_name / SHOAL_ALGO / the wire
 * header use. The first ids are the constants of include/shoal/comm.h.
 * Tools list algorithms by walking the table (shoal__algo_count). */
#ifndef SHOAL_COMM_COLL_ALGO_H
#define SHOAL_COMM_COLL_ALGO_H

#include <stddef.h>

#include "comm/coll/coll.h"
#include "comm/topo.h"
#include "comm/coll/model.h"

#define SHOAL__ALGO_MAX 16

/* What an algorithm runs with, decided with it (by the chooser, or for an
 * explicit request by the same rule). */
typedef struct shoal__plan {
  size_t chunk_bytes; /* pipeline chunk (ring, rhd, trees) */
  int ntrees;         /* trees: concurrent trees */
  int key;            /* trees: how hosts are ordered (trees.c) */
} shoal__plan_t;

struct shoal__world;
/* What the chooser knows when it prices the algorithms for a set of ranks. */
typedef struct shoal__coll_ctx {
  const shoal_comm_t *c;          /* the communicator, or NULL for a model-only question */
  const struct shoal__world *w;   /* its world, or NULL */
  int p;                          /* ranks */
  const int *wranks;              /* [p] their world ranks (NULL when w is NULL) */
  shoal__layout_t layout;         /* on the hosts (c == NULL: p hosts of one rank each) */
  int shm_ok;                     /* the shared-memory collectives may run on c (topo.h) */
  int one_host_shm;               /* shm_ok, one host, SHOAL_SHM on, p > 1 */
  shoal__cost_t flat;             /* the link a flat algorithm sees: the slowest class it crosses */
  shoal__cost_t net;              /* between hosts */
  double o;                       /* overhead of one collective on the point-to-point path */
} shoal__coll_ctx_t;

enum {
  SHOAL__ALGO_TAGGED = 1, /* its messages carry the algorithm id in the header's tag (a mismatch is an error) */
  SHOAL__ALGO_FLAT = 2,   /* point-to-point only: runs on any set of ranks (also among hier's host leaders) */
};

typedef struct shoal__coll_algo {
  const char *name;       /* SHOAL_ALGO=name, shoal bench -a name, shoal_algo_name() */
  const char *alias[2];   /* other names shoal_algo_parse accepts */
  const char *what;       /* one line for tools and logs */
  unsigned flags;         /* SHOAL__ALGO_* */
  int tie;                /* equal predictions: the lower wins */
  /* NULL: runs on every communicator. Else 0, or a status with the reason
   * in shoal_last_error() (an explicit request for it is refused with it). */
  int (*applies)(const shoal__coll_ctx_t *x);
  /* Predicted seconds for an allreduce of `bytes` (INFINITY: never chosen
   * automatically here). Pure: no error, no side effect. */
  double (*cost)(const shoal__coll_ctx_t *x, size_t bytes);
  /* Optional: the parameters for `bytes` (0 or a configuration error). */
  int (*plan)(const shoal__coll_ctx_t *x, size_t bytes, shoal__plan_t *out);
  /* Optional: the plan in words, for logs and tools ("4 trees, key pin slow, chunk 67951 B, leaves in every tree: 3"). */
  void (*describe)(const shoal__coll_ctx_t *x, const shoal__plan_t *plan, char *out, size_t cap);
  /* Run it: c's op is begun; p > 1 and count > 0. */
  int (*run)(shoal_comm_t *c, const shoal__op_t *op, const void *src, void *dst, size_t count,
             const shoal__plan_t *plan);
  /* Optional: 0, or SHOAL_ERR_CONFIG naming a malformed variable of its own (checked when a world is
   * created, as SHOAL_ALGO, not when the model first picks it). */
  int (*check_env)(void);
} shoal__coll_algo_t;

/* ---- the fluid link model (flows.c) ---- */
typedef struct shoal__flow {
  int a, b;     /* ranks of the context (0 .. p-1): from a to b */
  double bytes;
} shoal__flow_t;
/* alpha (s) and beta (s/byte) of the link from rank i to rank j of x. */
void   shoal__ctx_link(const shoal__coll_ctx_t *x, int i, int j, double *alpha, double *beta);
/* Seconds to move every flow at once: each rank's flows out (and in) one
 * after the other over their pairs' links, and each host's outgoing and
 * incoming bytes over its link's capacity (flows of one host share its
 * link). *alpha_max (may be NULL): the largest latency among the flows. */
double shoal__flows_time(const shoal__coll_ctx_t *x, const shoal__flow_t *f, int n, double *alpha_max);

/* Costs of the pairwise-exchange algorithms (fold.c): rhd's halving and
 * doubling steps, rd's full-vector steps, each after MPICH's fold. */
double shoal__cost_rhd(const shoal__coll_ctx_t *x, double S);
double shoal__cost_rd(const shoal__coll_ctx_t *x, double S);

/* Trees (allreduce_trees.c): in how many of the plan's trees rank r of x is
 * an interior rank (has children); -1 when out of memory. */
int shoal__trees_interior(const shoal__coll_ctx_t *x, const shoal__plan_t *plan, int rank);
/* The plan of algorithm a in words (its describe, else its chunk). */
void shoal__plan_describe(shoal_algo_t a, const shoal__coll_ctx_t *x, const shoal__plan_t *plan, char *out, size_t cap);

/* The single-copy allreduce over cross-memory attach (allreduce_cma.c), which the tuning profile times. */
extern const shoal__coll_algo_t shoal__algo_cma;

/* ---- the table (algos.c) ---- */
int shoal__algo_count(void);                            /* ids are 0 .. count-1; id 0 is AUTO */
const shoal__coll_algo_t *shoal__algo(shoal_algo_t id); /* NULL for AUTO and out of range */
/* SHOAL_ALGO parsed (AUTO when unset), SHOAL_CHUNK_BYTES and each algorithm's own variables checked; a
 * world reads them at creation. */
int shoal__algo_env(shoal_algo_t *out);
/* "ring, rhd, rd, ..." for messages. */
const char *shoal__algo_list(void);

/* ---- the chooser (choose.c) ---- */
/* The context of communicator c (its layout and its world's profile). */
void shoal__coll_ctx(const shoal_comm_t *c, shoal__coll_ctx_t *x);
/* The context of a set of host leaders of world w (hier's step 2): one rank
 * per host, over the network, inside another collective (no overhead o). */
void shoal__coll_ctx_leaders(const struct shoal__world *w, const int *wranks, int m, shoal__coll_ctx_t *x);
/* A model-only context: p ranks on p hosts over the TCP defaults
 * (SHOAL_ALPHA_US, ...), no profile. 0 or a configuration error. */
int  shoal__coll_ctx_model(int p, shoal__coll_ctx_t *x);

typedef struct shoal__choice {
  shoal_algo_t algo;
  shoal__plan_t plan;
  double t[SHOAL__ALGO_MAX]; /* each algorithm's prediction (INFINITY: not a candidate) */
  int cached;                /* the answer of the last call of this size: why is written on demand */
  char why[256];             /* the reason, for the log: read it with shoal__choice_why */
} shoal__choice_t;

enum {
  SHOAL__CHOOSE_FLAT = 1,  /* flat algorithms only, SHOAL_ALGO ignored (hier's leaders) */
  SHOAL__CHOOSE_QUIET = 2, /* no log line */
  SHOAL__CHOOSE_NOPLAN = 4 /* the algorithm only, no plan (shoal_allreduce_choose, tools) */
};
/* The model's pick for `bytes` on x: every candidate's prediction in out->t,
 * the cheapest (ties: the lower tie rank) in out->algo, and its plan. */
int shoal__coll_price(const shoal__coll_ctx_t *x, size_t bytes, unsigned flags, shoal__choice_t *out);
/* The algorithm of one allreduce on c: requested (explicit, not AUTO) >
 * SHOAL_ALGO (the world's, read at creation) > the model (cached per
 * communicator and size until the profile changes). 0, or a status when the
 * requested or forced algorithm cannot run on c (message set), or a plan's
 * configuration error. */
int shoal__coll_choose(shoal_comm_t *c, size_t bytes, shoal_algo_t requested, unsigned flags, shoal__choice_t *out);
/* ch's reason, written now if the chooser left it for later (a cached answer). */
const char *shoal__choice_why(const shoal_comm_t *c, shoal__choice_t *ch);

#endif
