/* Measured choice of the allreduce algorithm (tune.c, tune_profile.c).
 *
 * A short profile measures, per link class, one-way times of point-to-point
 * messages of a few sizes and fits t = alpha + beta*S by least squares:
 *   shm: two same-host ranks over the shm rings;
 *   net: the leaders of hosts 0 and 1 over TCP (only when the world spans
 *        hosts; otherwise the TCP defaults of algo.c / SHOAL_ALPHA_US...);
 *   coll: the shm-native allreduce of the host group at three sizes
 *        (fitted the same way: it is what the shm algorithm costs);
 *   gamma: the float32 sum kernel's time per byte;
 *   op: the software overhead o of one whole collective on the point-to-
 *       point path (entry, headers, dispatch), measured as a 4-byte rd
 *       allreduce minus what the link model predicts for it; added to the
 *       ring/rhd/rd predictions so that they are compared fairly with the
 *       shm-native allreduce, whose fit is end to end already.
 * All ranks agree on the values (MAX over ranks), so every rank makes the
 * same choice. The profile is cached in SHOAL_TUNE_FILE under a key naming
 * the host set (host:ranks, sorted). SHOAL_TUNE: off | cache (default: use
 * the file's entry if any, else built-in defaults) | init (profile at
 * communicator creation when the cache has no entry) | force. */
#ifndef SHOAL_COMM_TUNE_H
#define SHOAL_COMM_TUNE_H

#include <stdio.h>

#include "comm/coll/coll.h"
#include "comm/transport/shm.h"

enum { SHOAL__TUNE_NVALS = 8 };
typedef struct shoal__tune {
  int source;    /* 0 built-in defaults, 1 measured now, 2 from the cache file */
  char key[256]; /* host set: "hostA:2,hostB:2" */
  /* shm_alpha, shm_beta, net_alpha, net_beta, gamma, coll_alpha, coll_beta, op_o (s, s/B); < 0 unknown */
  double v[SHOAL__TUNE_NVALS];
  shoal__cost_t env_net; /* algo.c's parameters (SHOAL_ALPHA_US, ...), read once at creation */
  /* the last automatic choice (comm id, bytes -> algorithm), reset when v changes */
  int last_valid;
  uint64_t last_comm;
  size_t last_bytes;
  shoal_algo_t last_pick;
} shoal__tune_t;
enum { T_SHM_A, T_SHM_B, T_NET_A, T_NET_B, T_GAMMA, T_COLL_A, T_COLL_B, T_OP_O };

/* At world creation (shm.c): cache lookup, optional profile. Collective. */
int  shoal__tune_init(shoal_comm_t *c);
void shoal__tune_free(shoal__shm_t *s);
/* Rank 0 writes c's profile into SHOAL_TUNE_FILE (if set). */
int  shoal__tune_store(shoal_comm_t *c);
/* Run the profile now on the world communicator c (collective) and, on
 * rank 0, store it in SHOAL_TUNE_FILE if set. */
int  shoal__tune_profile(shoal_comm_t *c, int write_cache);
/* alpha-beta-gamma of a link class for the flat algorithms: shm != 0 for
 * a communicator inside one host with shared memory, else the network. */
void shoal__tune_cost(const shoal_comm_t *c, int shm, shoal__cost_t *out);
/* Predicted time of each allreduce algorithm on c for `bytes` (INFINITY
 * where not applicable) and the cheapest. */
shoal_algo_t shoal__tune_pick(const shoal_comm_t *c, size_t bytes, double t[SHOAL_ALGO__COUNT]);
/* The allreduce dispatcher (hooked at the top of shoal_allreduce_algo):
 * handles SHOAL_ALGO_SHM / _HIER (explicit or from SHOAL_ALGO) and AUTO
 * (the fitted model picks). Sets *handled = 0 when the caller should go on
 * with ring/rhd/rd itself: with *flat_pick the fitted model's choice, or
 * SHOAL_ALGO_AUTO when the caller's own model decides. */
int  shoal__tune_allreduce(shoal_comm_t *c, const void *src, void *dst, size_t count, shoal_dtype_t dtype,
                           shoal_redop_t redop, shoal_algo_t algo, int inplace, int *handled,
                           shoal_algo_t *flat_pick);
/* Print the fitted parameters and the choice per size (shoal bench --explain, shoal tune). */
void shoal__tune_explain(shoal_comm_t *c, FILE *f);

#endif
