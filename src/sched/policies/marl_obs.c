/* One agent's observation (marl_obs.h). The features, per node:
 *   socket: free slots (share), this job's workers here (share of its GPUs), interference a worker
 *           here would suffer, interference it would cause, slots held by other jobs (share), slots/8
 *   server: free GPUs (share), this job's workers here (share), idle before this job, the NIC term
 *           a worker here would suffer if the job spans machines, room for all its remaining workers,
 *           placing here adds a machine to the job, consolidation's workers here not placed yet (share)
 *   rack:   free GPUs (share), this job's workers here (share), jobs sending across racks per
 *           server, uplink / (servers x NIC) (1 / oversubscription)
 *   job:    log2(GPUs)/7, workers left to place (share), locality sensitivity (1 - rate on 2
 *           machines / rate on one), mean interference it suffers and causes per co-runner
 *           (socket level), the partition's free GPUs (share), queued GPUs / partition GPUs (<= 4)/4 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sched/model/place.h"
#include "sched/policies/marl_obs.h"

void shoal__marl_parts_free(shoal__marl_part_t *p, int agents) {
  if (!p) return;
  for (int a = 0; a < agents; a++) {
    free(p[a].serv_m);
    free(p[a].serv_rack);
    free(p[a].sock_serv);
    free(p[a].sock_k);
    free(p[a].sock_slots);
  }
  free(p);
}

static int part_fill(const shoal_cluster_t *c, shoal__marl_part_t *p) {
  const shoal_rack_t *r0 = &c->racks[p->rack0], *rl = &c->racks[p->rack0 + p->nrack - 1];
  int first = r0->first, last = rl->first + rl->count;
  p->nserv = last - first;
  p->nsock = 0;
  for (int m = first; m < last; m++) p->nsock += c->m[m].cap.gpus > 0 ? c->m[m].sockets : 0;
  p->serv_m = malloc((size_t)p->nserv * sizeof *p->serv_m);
  p->serv_rack = malloc((size_t)p->nserv * sizeof *p->serv_rack);
  p->sock_serv = malloc((size_t)(p->nsock ? p->nsock : 1) * sizeof *p->sock_serv);
  p->sock_k = malloc((size_t)(p->nsock ? p->nsock : 1));
  p->sock_slots = malloc((size_t)(p->nsock ? p->nsock : 1) * sizeof *p->sock_slots);
  if (!p->serv_m || !p->serv_rack || !p->sock_serv || !p->sock_k || !p->sock_slots)
    return shoal__seterr(SHOAL_ERR_NOMEM, "marl: out of memory");
  int k = 0;
  for (int i = 0; i < p->nserv; i++) {
    int m = first + i;
    const shoal_machine_t *mm = &c->m[m];
    p->serv_m[i] = m;
    p->serv_rack[i] = mm->rack - p->rack0;
    p->gpus += mm->cap.gpus;
    for (int s = 0; mm->cap.gpus > 0 && s < mm->sockets; s++, k++) {
      p->sock_serv[k] = i;
      p->sock_k[k] = (int8_t)s;
      /* the block k*S/g == s (gpu_slots.h) */
      p->sock_slots[k] = ((s + 1) * mm->cap.gpus + mm->sockets - 1) / mm->sockets - (s * mm->cap.gpus + mm->sockets - 1) / mm->sockets;
    }
  }
  return 0;
}

int shoal__marl_parts(const shoal_cluster_t *c, int agents, shoal__marl_part_t **out) {
  if (agents < 1 || agents > c->nracks)
    return shoal__seterr(SHOAL_ERR_CONFIG, "marl: %d agents for %d racks (each agent places on a group of whole racks)",
                         agents, c->nracks);
  shoal__marl_part_t *p = calloc((size_t)agents, sizeof *p);
  if (!p) return shoal__seterr(SHOAL_ERR_NOMEM, "marl: out of memory");
  for (int a = 0; a < agents; a++) {
    p[a].rack0 = (int)((long)a * c->nracks / agents);
    p[a].nrack = (int)((long)(a + 1) * c->nracks / agents) - p[a].rack0;
    int rc = part_fill(c, &p[a]);
    if (rc) {
      shoal__marl_parts_free(p, agents);
      return rc;
    }
  }
  *out = p;
  return 0;
}

int shoal__marl_view_init(shoal__marl_view_t *v, const shoal__marl_part_t *p) {
  memset(v, 0, sizeof *v);
  v->part = p;
  size_t S = (size_t)(p->nsock ? p->nsock : 1), M = (size_t)p->nserv, R = (size_t)p->nrack;
  v->xs = malloc(S * SHOAL_MARL_FS * sizeof *v->xs);
  v->xm = malloc(M * SHOAL_MARL_FM * sizeof *v->xm);
  v->xr = malloc(R * SHOAL_MARL_FR * sizeof *v->xr);
  v->mask = malloc(S);
  v->t_sock = calloc(S, sizeof *v->t_sock);
  v->t_serv = calloc(M, sizeof *v->t_serv);
  v->t_rack = calloc(R, sizeof *v->t_rack);
  v->hint = calloc(M, sizeof *v->hint);
  v->own = malloc(S * sizeof *v->own);
  v->imposed = malloc(S * sizeof *v->imposed);
  v->nic = malloc(M * sizeof *v->nic);
  v->xjobs = malloc(R * sizeof *v->xjobs);
  v->rooms = malloc(M * sizeof *v->rooms);
  v->serv_ok = malloc(M);
  if (!v->rooms || !v->serv_ok || !v->xs || !v->xm || !v->xr || !v->mask || !v->t_sock || !v->t_serv || !v->t_rack || !v->hint || !v->own || !v->imposed ||
      !v->nic || !v->xjobs) {
    shoal__marl_view_fini(v);
    return shoal__seterr(SHOAL_ERR_NOMEM, "marl: out of memory");
  }
  return 0;
}

void shoal__marl_view_fini(shoal__marl_view_t *v) {
  free(v->xs);
  free(v->xm);
  free(v->xr);
  free(v->mask);
  free(v->t_sock);
  free(v->t_serv);
  free(v->t_rack);
  free(v->hint);
  free(v->own);
  free(v->imposed);
  free(v->nic);
  free(v->xjobs);
  free(v->rooms);
  free(v->serv_ok);
  memset(v, 0, sizeof *v);
}

/* 1 - (rate on two machines) / (rate on one), for j at its requested size */
static float locality(shoal_sched_t *s, const shoal_job_t *j) {
  if (j->gpus < 2) return 0;
  double one = shoal_sched_rate_consolidated(s, j, j->gpus, 0);
  shoal_shape_t sh = shoal__shape_consolidated(s->cluster, j->gpus, 0);
  if (sh.machines < 2) sh.machines = 2;
  double two = s->speed->rate(s->speed, s->cluster, j, &sh);
  double l = one > 0 ? 1 - two / one : 0;
  return (float)(l < 0 ? 0 : l > 1 ? 1 : l);
}

/* jobs holding GPUs in more than one rack, per rack of the partition */
static void cross_rack_jobs(shoal__marl_view_t *v, shoal_sched_t *s) {
  const shoal__marl_part_t *p = v->part;
  const shoal_cluster_t *c = s->cluster;
  for (int r = 0; r < p->nrack; r++) v->xjobs[r] = 0;
  for (int i = 0; i < s->nactive; i++) {
    const shoal_alloc_t *a = &s->active[i]->alloc;
    if (a->n < 2 || c->m[a->p[0].machine].rack == c->m[a->p[a->n - 1].machine].rack) continue;
    int last = -1;
    for (int k = 0; k < a->n; k++) {
      int r = c->m[a->p[k].machine].rack;
      if (r == last) continue;
      last = r;
      if (r >= p->rack0 && r < p->rack0 + p->nrack) v->xjobs[r - p->rack0] += 1;
    }
  }
}

void shoal__marl_view_job(shoal__marl_view_t *v, shoal_sched_t *s, const shoal__colo_t *x, const shoal_job_t *j,
                          double queued_gpus, const shoal_place_t *cons, int ncons, int keep_machines) {
  const shoal__marl_part_t *p = v->part;
  const shoal__slots_t *sl = s->slots;
  for (int i = 0; i < p->nsock; i++) {
    double own, imposed;
    shoal__colo_socket(x, sl, j, p->serv_m[p->sock_serv[i]], p->sock_k[i], &own, &imposed);
    v->own[i] = (float)own;
    v->imposed[i] = (float)imposed;
    v->t_sock[i] = 0;
  }
  for (int i = 0; i < p->nserv; i++) {
    v->nic[i] = (float)shoal__colo_nic(x, sl, j, p->serv_m[i]);
    v->t_serv[i] = 0;
    v->hint[i] = 0;
  }
  /* the partition's servers are its machines [serv_m[0], serv_m[0] + nserv) */
  v->limit = keep_machines ? ncons : 0;
  for (int k = 0; k < ncons; k++) {
    int i = cons[k].machine - p->serv_m[0];
    if (i >= 0 && i < p->nserv) v->hint[i] = cons[k].workers;
    else v->limit = 0;
  }
  for (int r = 0; r < p->nrack; r++) v->t_rack[r] = 0;
  cross_rack_jobs(v, s);
  v->placed = 0;
  int cj = shoal__colo_class(x, j), nc = shoal__interference_nclasses(x->im);
  double sens = 0, press = 0;
  for (int c = 0; c < nc; c++) {
    sens += shoal__interference_term(x->im, SHOAL_IL_SOCKET, cj, c);
    press += shoal__interference_term(x->im, SHOAL_IL_SOCKET, c, cj);
  }
  int free_gpus = 0;
  for (int r = 0; r < p->nrack; r++) free_gpus += s->cluster->racks[p->rack0 + r].gpus_free;
  double q = p->gpus > 0 ? queued_gpus / p->gpus : 0;
  v->xj[0] = (float)(log2((double)j->gpus) / 7);
  v->xj[1] = 1;
  v->xj[2] = locality(s, j);
  v->xj[3] = (float)(nc ? sens / nc : 0);
  v->xj[4] = (float)(nc ? press / nc : 0);
  v->xj[5] = (float)(p->gpus > 0 ? (double)free_gpus / p->gpus : 0);
  v->xj[6] = (float)((q < 4 ? q : 4) / 4);
}

static int by_room_desc(const void *a, const void *b) {
  return *(const int *)b - *(const int *)a;
}

/* With a server limit: which servers may take the next worker (ok[i]). A server the job uses already may;
 * a new one only while fewer than the limit are used, and if the job's remaining workers still fit on
 * the servers it uses, this one and the roomiest of the others it could still add. Consolidation's
 * placement fits within the limit, so some server may, and that stays true after every choice. */
static void servers_within_limit(shoal__marl_view_t *v, const shoal_cluster_t *c, const shoal_job_t *j, uint8_t *ok) {
  const shoal__marl_part_t *p = v->part;
  int rem = j->gpus - v->placed, used = 0, open_room = 0, n = 0;
  for (int i = 0; i < p->nserv; i++) {
    int room = shoal__place_room(c, j, p->serv_m[i]) - v->t_serv[i];
    if (room < 0) room = 0;
    if (v->t_serv[i]) used++, open_room += room;
    else if (room > 0) v->rooms[n++] = room;
  }
  int k = v->limit - used - 1; /* new servers allowed after this one */
  if (k >= 0) qsort(v->rooms, (size_t)n, sizeof *v->rooms, by_room_desc);
  long top_k = 0, top_k1 = 0;
  for (int q = 0; k >= 0 && q < n && q <= k; q++) {
    if (q < k) top_k += v->rooms[q];
    top_k1 += v->rooms[q];
  }
  for (int i = 0; i < p->nserv; i++) {
    int room = shoal__place_room(c, j, p->serv_m[i]) - v->t_serv[i];
    if (v->t_serv[i] || room <= 0 || k < 0) {
      ok[i] = v->t_serv[i] > 0;
      continue;
    }
    /* the roomiest k others: the top k, or the top k + 1 without this one if it is among them */
    long others = k > 0 && (k >= n || room >= v->rooms[k - 1]) ? top_k1 - room : top_k;
    ok[i] = open_room + room + others >= rem;
  }
}

int shoal__marl_view_step(shoal__marl_view_t *v, shoal_sched_t *s, const shoal_job_t *j, shoal_marl_obs_t *o) {
  const shoal__marl_part_t *p = v->part;
  const shoal_cluster_t *c = s->cluster;
  const shoal__slots_t *sl = s->slots;
  float g = (float)j->gpus;
  int rem = j->gpus - v->placed, feasible = 0;
  if (v->limit) servers_within_limit(v, c, j, v->serv_ok);
  for (int i = 0; i < p->nserv; i++) {
    const shoal_machine_t *m = &c->m[p->serv_m[i]];
    int room = shoal__place_room(c, j, m->id) - v->t_serv[i];
    float *x = v->xm + (size_t)i * SHOAL_MARL_FM;
    x[0] = m->cap.gpus ? (float)(m->free.gpus - v->t_serv[i]) / (float)m->cap.gpus : 0;
    x[1] = (float)v->t_serv[i] / g;
    x[2] = m->free.gpus == m->cap.gpus;
    x[3] = v->nic[i];
    x[4] = room >= rem;
    x[5] = v->placed > 0 && v->t_serv[i] == 0;
    x[6] = v->hint[i] > v->t_serv[i] ? (float)(v->hint[i] - v->t_serv[i]) / g : 0;
  }
  for (int i = 0; i < p->nsock; i++) {
    int srv = p->sock_serv[i], m = p->serv_m[srv], slots = p->sock_slots[i];
    int held = slots - shoal__slots_free_in(sl, m, p->sock_k[i]);
    int left = slots - held - v->t_sock[i];
    int room = shoal__place_room(c, j, m) - v->t_serv[srv];
    float *x = v->xs + (size_t)i * SHOAL_MARL_FS;
    x[0] = (float)left / (float)slots;
    x[1] = (float)v->t_sock[i] / g;
    x[2] = v->own[i];
    x[3] = v->imposed[i];
    x[4] = (float)held / (float)slots;
    x[5] = (float)slots / 8;
    v->mask[i] = left > 0 && room > 0 && (!v->limit || v->serv_ok[srv]);
    feasible += v->mask[i];
  }
  for (int r = 0; r < p->nrack; r++) {
    const shoal_rack_t *rk = &c->racks[p->rack0 + r];
    float *x = v->xr + (size_t)r * SHOAL_MARL_FR;
    double nic = c->m[rk->first].nic_gbps;
    x[0] = rk->gpus ? (float)(rk->gpus_free - v->t_rack[r]) / (float)rk->gpus : 0;
    x[1] = (float)v->t_rack[r] / g;
    x[2] = v->xjobs[r] / (float)rk->count;
    x[3] = (float)(rk->uplink_gbps / (rk->count * nic));
  }
  v->xj[1] = (float)rem / g;
  o->nsock = p->nsock;
  o->nserv = p->nserv;
  o->nrack = p->nrack;
  o->xs = v->xs;
  o->xm = v->xm;
  o->xr = v->xr;
  o->xj = v->xj;
  o->sock_serv = p->sock_serv;
  o->serv_rack = p->serv_rack;
  o->mask = v->mask;
  return feasible;
}

void shoal__marl_view_take(shoal__marl_view_t *v, int i) {
  const shoal__marl_part_t *p = v->part;
  v->t_sock[i]++;
  v->t_serv[p->sock_serv[i]]++;
  v->t_rack[p->serv_rack[p->sock_serv[i]]]++;
  v->placed++;
}
