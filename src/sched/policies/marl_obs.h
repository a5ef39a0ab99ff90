/* What one agent of the learned placer sees (docs/learned-placement.md,
 * "Features"): its partition of the cluster (a contiguous group of racks) as
 * sockets, servers and racks, with per-node features, and the job being
 * placed, worker by worker. */
#ifndef SHOAL_SCHED_POLICIES_MARL_OBS_H
#define SHOAL_SCHED_POLICIES_MARL_OBS_H

#include "sched/model/colocation.h"
#include "sched/model/marl_net.h"
#include "sched/policy.h"

typedef struct shoal__marl_part {
  int rack0, nrack;             /* racks [rack0, rack0 + nrack) */
  int nserv, nsock, gpus;
  int32_t *serv_m;              /* [nserv]: machine id */
  int32_t *serv_rack;           /* [nserv]: rack index in the partition */
  int32_t *sock_serv;           /* [nsock]: server index in the partition */
  int8_t *sock_k;               /* [nsock]: socket of its machine */
  int32_t *sock_slots;          /* [nsock]: slots of the socket */
} shoal__marl_part_t;

/* The agents' partitions: racks split into `agents` contiguous groups (sizes differ by at most one). */
int  shoal__marl_parts(const shoal_cluster_t *c, int agents, shoal__marl_part_t **out);
void shoal__marl_parts_free(shoal__marl_part_t *p, int agents);

/* One agent's observation while it places a job: the feature arrays and the
 * job's tentative workers (placed by earlier steps, not assigned yet). */
typedef struct shoal__marl_view {
  const shoal__marl_part_t *part;
  float *xs, *xm, *xr, xj[SHOAL_MARL_FJ];
  uint8_t *mask;
  int16_t *t_sock, *t_serv, *t_rack;   /* tentative workers per socket, server, rack */
  int16_t *hint;                       /* per server: the workers consolidation would put there */
  float *own, *imposed, *nic;          /* per job: per socket, per socket, per server */
  float *xjobs;                        /* per rack: cross-rack jobs there */
  int *rooms;                          /* scratch: rooms of the servers the job does not use yet */
  uint8_t *serv_ok;                    /* per server: may take the next worker (with a limit) */
  int placed;                          /* workers placed so far */
  int limit;                           /* at most this many servers for the job (0: any number) */
} shoal__marl_view_t;

int  shoal__marl_view_init(shoal__marl_view_t *v, const shoal__marl_part_t *p);
void shoal__marl_view_fini(shoal__marl_view_t *v);
/* Start placing job j: the features that do not change while its workers are placed. queued_gpus:
 * the GPUs of the jobs waiting in the queue; cons[0..ncons): where consolidation would put j's workers
 * (machines outside the partition are ignored; ncons 0: nowhere). keep_machines: when all of cons lies
 * in the partition, the job gets at most ncons servers (the mask keeps the rest reachable). */
void shoal__marl_view_job(shoal__marl_view_t *v, shoal_sched_t *s, const shoal__colo_t *x, const shoal_job_t *j,
                          double queued_gpus, const shoal_place_t *cons, int ncons, int keep_machines);
/* The observation for the next worker; returns the number of feasible sockets. A socket is feasible
 * when it has a free slot, its server room for one more worker of j, and (with a server limit) choosing
 * it leaves room for the job's other workers on at most the limit's servers. */
int  shoal__marl_view_step(shoal__marl_view_t *v, shoal_sched_t *s, const shoal_job_t *j, shoal_marl_obs_t *o);
/* The next worker goes to socket i (feasible). */
void shoal__marl_view_take(shoal__marl_view_t *v, int i);

#endif
