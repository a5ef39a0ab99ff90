/* The link model the collectives are priced with: the tuning profile of a
 * world (measured, cached or built in) as the chooser reads it.
 *
 * Owner: the world (w->tune), created by shoal__tune_init (tune/tune.h). The
 * collectives (coll/) only read it through the functions below; the profile
 * (tune/, a layer above the collectives: it measures by running them) writes
 * it, and its watch over real allreduces hooks in here (watching, observe). */
#ifndef SHOAL_COMM_COLL_MODEL_H
#define SHOAL_COMM_COLL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "shoal/comm.h"

/* alpha-beta-gamma of a link (Thakur, Rabenseifner & Gropp 2005). */
typedef struct shoal__cost {
  double alpha_s; /* per-message latency, s */
  double beta_s;  /* per byte on a link, s (1 / bandwidth) */
  double gamma_s; /* per byte reduced, s (1 / reduction throughput) */
} shoal__cost_t;

/* The values of a profile, in seconds and seconds per byte; < 0 unknown. */
enum { T_SHM_A, T_SHM_B, T_NET_A, T_NET_B, T_GAMMA, T_COLL_A, T_COLL_B, T_OP_O, T_CMA_A, T_CMA_B, SHOAL__TUNE_NVALS };

typedef struct shoal__tune {
  int source;    /* 0 built-in defaults, 1 measured now, 2 from the cache file */
  char key[256]; /* host set: "hostA:2,hostB:2" */
  /* shm_alpha, shm_beta, net_alpha, net_beta, gamma, coll_alpha, coll_beta, op_o, cma_alpha, cma_beta */
  double v[SHOAL__TUNE_NVALS];
  shoal__cost_t env_net; /* the TCP defaults (SHOAL_ALPHA_US, ...), read once at creation */
  double uplink_bps;     /* SHOAL_RACK_UPLINK_GBPS in bytes/s, read at creation; <= 0: one host link's rate */
  /* per pair of hosts (topology's host indices, nh = its host count): one-way
   * small-message latency (s) and bandwidth (bytes/s) from host i to host j,
   * [i * nh + j]; < 0 unknown (then the net class stands in) */
  int nh;
  double *lat, *bw;
  long profile_bytes;  /* bytes timed per host pair unless SHOAL_PROFILE_BYTES says (the default mode times less) */
  int profile_quick;   /* the default mode's link profile: a 512 KiB lead-in, no pair measured again alone */
  double links_s;      /* how long the last measurement of the matrix took (0: from the cache) */
  unsigned links_gen;  /* incremented whenever the matrix changes */
  /* re-profiling from the times of real collectives (tune/watch.c), which sets these when it starts: the
   * dispatcher (coll/allreduce.c) asks watching() whether to time an allreduce of `bytes` on c (it reads
   * the clock only then: two clock reads cost a tenth of a tiny shared-memory allreduce here), then hands
   * observe() its time against the chooser's prediction (0 or a failure: a re-profile failed). NULL: no
   * watch. */
  struct shoal__watch *watch;
  int (*watching)(const shoal_comm_t *c, size_t bytes);
  int (*observe)(shoal_comm_t *c, size_t bytes, double predicted_s, double elapsed_s);
  /* the chooser's recent automatic choices (comm id, bytes -> algorithm and
   * its prediction), forgotten when the profile changes (shoal__tune_changed):
   * a training loop asks for the same few sizes every step */
  struct shoal__tune_pick {
    int valid;
    uint64_t comm;
    size_t bytes;
    shoal_algo_t algo;
    double t;
  } picks[8];
} shoal__tune_t;

/* The TCP link defaults, overridden by SHOAL_ALPHA_US / SHOAL_BETA_GBPS /
 * SHOAL_GAMMA_GBPS; SHOAL_ERR_CONFIG naming the variable if one is malformed. */
int  shoal__cost_params(shoal__cost_t *out);
/* Built-in defaults of the same (used when the variables are malformed and
 * no error can be returned). */
void shoal__cost_defaults(shoal__cost_t *out);

struct shoal__world;
/* alpha-beta-gamma of a link class of world w: shm != 0 for two ranks of one
 * host over shared memory, else the network between hosts. */
void shoal__tune_class(const struct shoal__world *w, int shm, shoal__cost_t *out);
/* The shared-memory-native allreduce of a host group: its fitted time for
 * `bytes` (it is not a point-to-point formula). */
double shoal__tune_shm_allreduce_time(const struct shoal__world *w, double bytes);
/* The single-copy allreduce over cross-memory attach (coll/allreduce_cma.c): the same kind of fit;
 * INFINITY unless the profile measured it (no built-in default). */
double shoal__tune_cma_allreduce_time(const struct shoal__world *w, double bytes);
/* Software overhead of one collective on the point-to-point path. */
double shoal__tune_op_overhead(const struct shoal__world *w);
/* alpha (s) and beta (s/byte) between world ranks a != b: two ranks of one
 * host over shared memory (SHOAL_SHM on) have the shm class; two hosts the
 * matrix entry where measured, else the net class (also for same-host ranks
 * over TCP). */
void shoal__tune_link(const struct shoal__world *w, int a, int b, double *alpha, double *beta);
/* Capacity (bytes/s) of host h's link out of it and into it: the best rate
 * measured from / to it (concurrent flows of one host share it), else the
 * net class. */
void shoal__tune_host_caps(const struct shoal__world *w, int h, double *out_bw, double *in_bw);
/* Capacity (bytes/s) of rack r's uplink, each way, shared by every flow between its hosts and other racks'
 * (topo.h: rack_of): SHOAL_RACK_UPLINK_GBPS, else the best host link of the rack (shoal__tune_host_caps): a
 * rack whose uplink carries one host's traffic at full rate, the oversubscription of a rack of several
 * hosts that the model assumes when nobody says. */
double shoal__tune_uplink_cap(const struct shoal__world *w, int r);
/* Source of the profile ("measured", "cache", "built-in defaults"). */
const char *shoal__tune_source(const struct shoal__world *w);
/* The profile's values changed: forget cached choices. */
void shoal__tune_changed(struct shoal__world *w);

#endif
