/* The learned placement policy's network (docs/learned-placement.md): a
 * hierarchical graph encoder over one agent's partition of the cluster
 * (sockets -> servers -> racks -> partition) and a scorer that gives every
 * socket a logit for the next worker of the job being placed. Weights come
 * from a text file written by the trainer (python/shoal/marl.py); this is the
 * forward pass the policy runs, in C, with the same float32 arithmetic.
 *
 *   hs = relu(Ws xs + bs)                                  per socket
 *   hm = relu(Wm [xm, mean hs, max hs] + bm)               per server, over its sockets
 *   hr = relu(Wr [xr, mean hm, max hm] + br)               per rack, over its servers
 *   hp = [mean hr, max hr]                                 the partition
 *   z  = relu(Wc [hs, hm(server of s), hr(rack of s), hp, xj] + bc)
 *   logit(s) = wo . z + bo                                 masked: infeasible sockets get -inf
 *
 * Weights file (text; '#' starts a comment line):
 *   shoal-marl-weights 1
 *   hierarchy rack,server,socket
 *   features socket=F1 server=F2 rack=F3 job=F4
 *   hidden H
 *   agents A
 *   trained <free text>                     (optional)
 *   tensor NAME ROWS COLS                   then ROWS x COLS numbers, for every tensor in order:
 *     socket.W H x F1, socket.b H x 1, server.W H x (F2+2H), server.b, rack.W H x (F3+2H), rack.b,
 *     score.W H x (5H+F4), score.b, out.W 1 x H, out.b 1 x 1
 *   end */
#ifndef SHOAL_SCHED_MODEL_MARL_NET_H
#define SHOAL_SCHED_MODEL_MARL_NET_H

#include <stddef.h>
#include <stdint.h>

/* features per node (the order and meaning: docs/learned-placement.md, marl_obs.c) */
#define SHOAL_MARL_FS 6
#define SHOAL_MARL_FM 7
#define SHOAL_MARL_FR 4
#define SHOAL_MARL_FJ 7
#define SHOAL_MARL_MAX_HIDDEN 256
#define SHOAL_MARL_MAX_AGENTS 64

typedef struct shoal_marl_net shoal_marl_net_t;

/* One agent's observation: its partition's nodes and the job. Sockets of a
 * server and servers of a rack need not be contiguous. */
typedef struct shoal_marl_obs {
  int nsock, nserv, nrack;
  const float *xs;              /* [nsock][SHOAL_MARL_FS] */
  const float *xm;              /* [nserv][SHOAL_MARL_FM] */
  const float *xr;              /* [nrack][SHOAL_MARL_FR] */
  const float *xj;              /* [SHOAL_MARL_FJ] */
  const int32_t *sock_serv;     /* [nsock]: server index 0..nserv-1 */
  const int32_t *serv_rack;     /* [nserv]: rack index 0..nrack-1 */
  const uint8_t *mask;          /* [nsock]: 1 = feasible */
} shoal_marl_obs_t;

int shoal__marl_net_load(const char *path, shoal_marl_net_t **out);
/* From memory; name is used in messages. */
int shoal__marl_net_parse(const char *name, const char *text, size_t len, shoal_marl_net_t **out);
/* The trained weights shipped with shoal (data/marl-default.weights). */
int shoal__marl_net_shipped(shoal_marl_net_t **out);
void shoal__marl_net_free(shoal_marl_net_t *n);

int shoal__marl_net_agents(const shoal_marl_net_t *n);
int shoal__marl_net_hidden(const shoal_marl_net_t *n);
const char *shoal__marl_net_origin(const shoal_marl_net_t *n);  /* file name, or "shipped ..." */
const char *shoal__marl_net_trained(const shoal_marl_net_t *n); /* the "trained" line, "" if none */

/* Logits of every socket (masked ones -INFINITY) into logits[nsock]. Returns
 * the index of the largest feasible logit (ties: lowest index), -1 when no
 * socket is feasible, or a negative error code. Not thread-safe per net (it
 * keeps its scratch space). */
int shoal__marl_net_scores(shoal_marl_net_t *n, const shoal_marl_obs_t *o, float *logits);

#endif
