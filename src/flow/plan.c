/* The flow planner (plan.h, docs/flow.md#the-planner). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "flow/plan.h"
#include "flow/proto.h"

static const char *const policy_names[] = {"mlcc", "greedy", "equal"};

void shoal__fplan_cfg_default(shoal__fplan_cfg_t *cfg) {
  cfg->slot_s = 0.1;
  cfg->horizon = 10;
  cfg->factor = 1.6;
  cfg->policy = SHOAL__FPOL_MLCC;
  cfg->floor_frac = 0.02;
}

const char *shoal__fplan_policy_name(int policy) {
  return policy >= 0 && policy < (int)(sizeof policy_names / sizeof *policy_names) ? policy_names[policy] : "?";
}

int shoal__fplan_policy_parse(const char *s) {
  for (int i = 0; i < (int)(sizeof policy_names / sizeof *policy_names); i++)
    if (s && !strcmp(s, policy_names[i])) return i;
  return -1;
}

static int slot_idx(const shoal__fplan_t *p, int64_t abs_slot) {
  int64_t k = p->cfg.horizon;
  return (int)(((abs_slot % k) + k) % k);
}

int shoal__fplan_init(shoal__fplan_t *p, const shoal__fplan_cfg_t *cfg, const double *cap_bps, int nlinks) {
  if (!(cfg->slot_s >= 0.001 && cfg->slot_s <= 10) || cfg->horizon < 1 || cfg->horizon > SHOAL__FPLAN_MAX_K ||
      !(cfg->factor >= 1 && cfg->factor <= 10) || cfg->policy < 0 || cfg->policy > SHOAL__FPOL_EQUAL ||
      !(cfg->floor_frac > 0 && cfg->floor_frac <= 1) || nlinks < 0)
    return shoal__seterr(SHOAL_ERR_INVALID, "flow planner: slot %g s, horizon %d, factor %g, floor %g out of range",
                         cfg->slot_s, cfg->horizon, cfg->factor, cfg->floor_frac);
  memset(p, 0, sizeof *p);
  p->cfg = *cfg;
  p->nlinks = nlinks;
  p->link = calloc(nlinks ? (size_t)nlinks : 1, sizeof *p->link);
  if (!p->link) return shoal__seterr(SHOAL_ERR_NOMEM, "flow planner: out of memory");
  for (int l = 0; l < nlinks; l++) {
    if (!(cap_bps[l] > 0)) {
      free(p->link);
      return shoal__seterr(SHOAL_ERR_INVALID, "flow planner: link %d has capacity %g", l, cap_bps[l]);
    }
    p->link[l].cap = p->link[l].avail = cap_bps[l] / 8;
  }
  return 0;
}

void shoal__fplan_free(shoal__fplan_t *p) {
  free(p->link);
  free(p->flow);
  memset(p, 0, sizeof *p);
}

/* ---- schedules ---- */

static void unreserve_from(shoal__fplan_t *p, shoal__fplan_flow_t *f, int from) {
  for (int k = from; k < p->cfg.horizon; k++) {
    int i = slot_idx(p, p->now + k);
    for (int j = 0; j < f->npath; j++) p->link[f->path[j]].resv[i] -= f->sched[i];
    f->sched[i] = 0;
  }
}

static void finish(shoal__fplan_t *p, shoal__fplan_flow_t *f) {
  unreserve_from(p, f, 0);
  f->active = 0;
}

/* Bytes flow f could still get in slot now + k: the least room on its path. */
static double room(const shoal__fplan_t *p, const shoal__fplan_flow_t *f, int k) {
  int i = slot_idx(p, p->now + k);
  double r = INFINITY;
  for (int j = 0; j < f->npath; j++) {
    const shoal__fplan_link_t *l = &p->link[f->path[j]];
    double h = l->avail * p->cfg.slot_s - l->resv[i];
    if (h < r) r = h;
  }
  return r > 0 ? r : 0;
}

static double path_cap(const shoal__fplan_t *p, const shoal__fplan_flow_t *f) {
  double c = INFINITY;
  for (int j = 0; j < f->npath; j++)
    if (p->link[f->path[j]].cap < c) c = p->link[f->path[j]].cap;
  return c;
}

typedef struct {
  double load;
  int k;
} slot_load_t;

static int by_load(const void *a, const void *b) {
  const slot_load_t *x = a, *y = b;
  if (x->load != y->load) return x->load < y->load ? -1 : 1;
  return x->k - y->k;
}

/* The order in which a set of links' slots are filled: least loaded first (the load of a slot is its most
 * reserved link, as a fraction of what that link may carry), ties to the earliest. MLCC's argmin. */
static void slot_order(const shoal__fplan_t *p, const int *links, int nl, int from, slot_load_t *order, int *n) {
  *n = 0;
  for (int k = from; k < p->cfg.horizon; k++) {
    int i = slot_idx(p, p->now + k);
    double load = 0;
    for (int j = 0; j < nl; j++) {
      const shoal__fplan_link_t *l = &p->link[links[j]];
      double u = l->resv[i] / (l->avail * p->cfg.slot_s);
      if (u > load) load = u;
    }
    order[(*n)++] = (slot_load_t){load > 1 ? 1 : load, k};
  }
  qsort(order, (size_t)*n, sizeof *order, by_load);
}

/* Put vol bytes of f into the slots in order, at most per_slot bytes each. */
static void place(shoal__fplan_t *p, shoal__fplan_flow_t *f, double vol, double per_slot, const slot_load_t *order, int n) {
  for (int o = 0; o < n && vol > 0; o++) {
    double x = room(p, f, order[o].k);
    if (x > per_slot) x = per_slot;
    if (x > vol) x = vol;
    if (x <= 0) continue;
    int i = slot_idx(p, p->now + order[o].k);
    f->sched[i] += x;
    for (int j = 0; j < f->npath; j++) p->link[f->path[j]].resv[i] += x;
    vol -= x;
  }
}

/* ---- flows ---- */

static void relink(shoal__fplan_t *p, uint64_t job) {
  for (int a = 0; a < p->nflows; a++) {
    shoal__fplan_flow_t *f = &p->flow[a];
    if (f->job != job) continue;
    int succ = -1, pred = -1, ns = 0, np = 0;
    for (int b = 0; b < p->nflows; b++) {
      const shoal__fplan_flow_t *g = &p->flow[b];
      if (b == a || g->job != job || !(g->V > 0)) continue;
      if (g->hsrc == f->hdst) succ = b, ns++;
      if (g->hdst == f->hsrc) pred = b, np++;
    }
    f->succ = ns == 1 ? succ : -1;
    f->pred = np == 1 ? pred : -1;
  }
}

int shoal__fplan_flow(shoal__fplan_t *p, uint64_t job, uint32_t src, uint32_t dst, int hsrc, int hdst,
                      const int *path, int npath) {
  for (int i = 0; i < p->nflows; i++)
    if (p->flow[i].job == job && p->flow[i].src == src && p->flow[i].dst == dst) return i;
  if (p->nflows == p->capflows) {
    int cap = p->capflows ? 2 * p->capflows : 64;
    shoal__fplan_flow_t *nf = realloc(p->flow, (size_t)cap * sizeof *nf);
    if (!nf) return shoal__seterr(SHOAL_ERR_NOMEM, "flow planner: out of memory for %d flows", cap);
    p->flow = nf;
    p->capflows = cap;
  }
  shoal__fplan_flow_t *f = &p->flow[p->nflows];
  memset(f, 0, sizeof *f);
  f->job = job;
  f->src = src;
  f->dst = dst;
  f->hsrc = hsrc;
  f->hdst = hdst;
  f->npath = npath > SHOAL__FPLAN_MAX_PATH ? SHOAL__FPLAN_MAX_PATH : npath;
  memcpy(f->path, path, (size_t)f->npath * sizeof *path);
  f->pred = f->succ = -1;
  f->seen = p->now;
  f->e = f->npath ? path_cap(p, f) : 0;
  return p->nflows++;
}

static void forget(shoal__fplan_t *p) {
  int w = 0;
  for (int i = 0; i < p->nflows; i++) {
    if (p->flow[i].seen + SHOAL__FPLAN_FORGET_SLOTS < p->now) {
      finish(p, &p->flow[i]);
      continue;
    }
    if (w != i) p->flow[w] = p->flow[i];
    w++;
  }
  if (w == p->nflows) return;
  p->nflows = w;
  for (int i = 0; i < p->nflows; i++) relink(p, p->flow[i].job); /* indices moved */
}

void shoal__fplan_advance(shoal__fplan_t *p, int64_t slot) {
  if (slot <= p->now) return;
  int64_t steps = slot - p->now;
  int n = steps > p->cfg.horizon ? p->cfg.horizon : (int)steps;
  for (int s = 0; s < n; s++) {
    int i = slot_idx(p, p->now + s);
    for (int a = 0; a < p->nflows; a++) {
      p->flow[a].granted += p->flow[a].sched[i];
      p->flow[a].sched[i] = 0;
    }
    for (int l = 0; l < p->nlinks; l++) p->link[l].resv[i] = 0;
  }
  for (int l = 0; l < p->nlinks; l++) {
    p->link[l].shoal_bytes = steps == 1 ? p->link[l].shoal_cur : 0;
    p->link[l].shoal_cur = 0;
  }
  p->now = slot;
  forget(p);
}

/* Bytes/s f may plan for: its path's rate, and on each link of the path that link's share among the job's
 * flows of this iteration on it. A ring moves at its slowest hop, so the hops of one job on one link each
 * get that link's share: planned one after the other at the whole path each, the first took the link and
 * the second waited for later slots, and the ring crawled at the floor (a 4-host ring across two racks
 * has two hops on each uplink). */
static double job_path_rate(const shoal__fplan_t *p, const shoal__fplan_flow_t *f) {
  double r = f->e;
  for (int j = 0; j < f->npath; j++) {
    int n = 0;
    for (int a = 0; a < p->nflows; a++) {
      const shoal__fplan_flow_t *g = &p->flow[a];
      if (g->job != f->job || g->iter != f->iter || !(g->V > 0)) continue;
      for (int k = 0; k < g->npath; k++) n += g->path[k] == f->path[j];
    }
    double share = p->link[f->path[j]].cap / (n > 1 ? n : 1);
    if (share < r) r = share;
  }
  return r;
}

/* Bytes/s the ring f is on can move: the least job_path_rate of its hops (policy mlcc; a flow on no
 * closed ring: its own). A hop reserved above its ring's slowest hop holds link time the ring cannot use:
 * its bytes come in no faster than the slow hop forwards them. */
static double ring_rate(const shoal__fplan_t *p, const shoal__fplan_flow_t *f) {
  double own = job_path_rate(p, f), r = own;
  if (p->cfg.policy != SHOAL__FPOL_MLCC) return own;
  const shoal__fplan_flow_t *g = f;
  for (int n = 0; n < p->nflows && g->succ >= 0; n++) {
    g = &p->flow[g->succ];
    if (g == f) return r;
    double x = job_path_rate(p, g);
    if (x < r) r = x;
  }
  return own;
}

/* Is every one of the job's flows in members[] a hop of a ring (one flow in, one out of each host)? */
static int is_ring(const shoal__fplan_t *p, const int *members, int nm) {
  for (int m = 0; m < nm; m++)
    if (p->flow[members[m]].succ < 0 || p->flow[members[m]].pred < 0) return 0;
  return nm > 1;
}

/* A ring's hops planned together (policy mlcc): in each slot of the order every hop with bytes left gets
 * the same bytes, the least over the hops of the ring's rate and of each link's room divided among the
 * job's hops on it. Placed one hop after the other, the first hop on a link shared by two of its job's
 * hops (a 4-host ring across two racks) took what another job left and the second got nothing, and a hop
 * beside a slow one reserved bytes its ring could not bring. */
static void place_ring(shoal__fplan_t *p, const int *members, int nm, const slot_load_t *order, int n) {
  double left[64], per = INFINITY, T = p->cfg.slot_s;
  for (int m = 0; m < nm; m++) {
    const shoal__fplan_flow_t *g = &p->flow[members[m]];
    left[m] = g->planned - g->sent;
    double r = ring_rate(p, g) * T;
    if (r < per) per = r;
  }
  for (int o = 0; o < n; o++) {
    int i = slot_idx(p, p->now + order[o].k), busy = 0;
    double x = per;
    for (int m = 0; m < nm; m++) {
      const shoal__fplan_flow_t *g = &p->flow[members[m]];
      if (!(left[m] > 0)) continue;
      busy = 1;
      for (int j = 0; j < g->npath; j++) {
        const shoal__fplan_link_t *l = &p->link[g->path[j]];
        int c = 0;
        for (int q = 0; q < nm; q++) {
          const shoal__fplan_flow_t *o2 = &p->flow[members[q]];
          for (int k = 0; k < o2->npath && left[q] > 0; k++) c += o2->path[k] == g->path[j];
        }
        double room_l = (l->avail * T - l->resv[i]) / (c > 0 ? c : 1);
        if (room_l < x) x = room_l;
      }
    }
    if (!busy) break;
    if (!(x > 0)) continue;
    for (int m = 0; m < nm; m++) {
      shoal__fplan_flow_t *g = &p->flow[members[m]];
      double y = left[m] < x ? left[m] : x;
      if (!(y > 0)) continue;
      g->sched[i] += y;
      for (int j = 0; j < g->npath; j++) p->link[g->path[j]].resv[i] += y;
      left[m] -= y;
    }
  }
}

/* ---- reports ---- */

/* Does another job's open phase hold slot i of one of the links of members[]? */
static int held_by_another(const shoal__fplan_t *p, uint64_t job, const int *members, int nm, int i) {
  for (int a = 0; a < p->nflows; a++) {
    const shoal__fplan_flow_t *o = &p->flow[a];
    if (o->job == job || !o->open || !(o->sched[i] > 0)) continue;
    for (int m = 0; m < nm; m++)
      for (int j = 0; j < p->flow[members[m]].npath; j++)
        for (int q = 0; q < o->npath; q++)
          if (o->path[q] == p->flow[members[m]].path[j]) return 1;
  }
  return 0;
}

/* A job's first phase, whose volume nobody has measured yet: its flows (open) hold all the room their paths
 * have in every slot ahead, the same bytes on each of them (a ring moves at its slowest hop), until they
 * stop sending; a job that starts while another's open phase holds one of its links claims nothing there,
 * not even what the holder leaves (its queue, read as lost capacity, shrinks the holder's claim, and two
 * jobs claiming the rest each ran at part of the link: they collided again). First come, first served:
 * left unplanned, jobs started together all collided in their first two iterations, and left their phases
 * lined up for the plan to pull apart over the next ones (testbed, ME1 3 jobs: the first two steps'
 * allreduces took 1.2-1.35 s and 0.7-1.3 s against 0.46 alone). */
static void open_phase(shoal__fplan_t *p, uint64_t job) {
  int members[64], nm = 0;
  double T = p->cfg.slot_s;
  for (int a = 0; a < p->nflows && nm < 64; a++) {
    shoal__fplan_flow_t *g = &p->flow[a];
    if (g->job != job || !g->open) continue;
    unreserve_from(p, g, 0);
    members[nm++] = a;
  }
  for (int k = 0; k < p->cfg.horizon; k++) {
    int i = slot_idx(p, p->now + k);
    double x = held_by_another(p, job, members, nm, i) ? 0 : INFINITY;
    for (int m = 0; m < nm && x > 0; m++) {
      const shoal__fplan_flow_t *g = &p->flow[members[m]];
      if (g->e * T < x) x = g->e * T;
      for (int j = 0; j < g->npath; j++) {
        const shoal__fplan_link_t *l = &p->link[g->path[j]];
        int c = 0;
        for (int q = 0; q < nm; q++)
          for (int r = 0; r < p->flow[members[q]].npath; r++) c += p->flow[members[q]].path[r] == g->path[j];
        double h = (l->avail * T - l->resv[i]) / (c > 0 ? c : 1);
        if (h < x) x = h;
      }
    }
    if (!(x > 0)) continue;
    for (int m = 0; m < nm; m++) {
      shoal__fplan_flow_t *g = &p->flow[members[m]];
      g->sched[i] += x;
      for (int j = 0; j < g->npath; j++) p->link[g->path[j]].resv[i] += x;
    }
  }
}

/* f's job starts a phase of unknown volume: f and its job-mates reported lately with no volume of their
 * own are planned open (open_phase). */
static void open_start(shoal__fplan_t *p, int fi, uint64_t iter, double sent) {
  shoal__fplan_flow_t *f = &p->flow[fi];
  for (int a = 0; a < p->nflows; a++) {
    shoal__fplan_flow_t *g = &p->flow[a];
    if (g->job != f->job || g->V > 0 || g->open) continue;
    if (a != fi && !(g->iter < iter && g->seen + 2 >= p->now)) continue;
    unreserve_from(p, g, 0);
    g->iter = iter;
    g->base = 0;
    g->sent = a == fi ? sent : 0;
    g->granted = g->wasted = 0;
    g->slots_active = 0;
    g->planned = 0;
    g->unpaced = 0;
    g->active = g->open = 1;
  }
  open_phase(p, f->job);
}

/* The open phase of f is over: the bytes it sent are its iteration's volume. */
static void open_end(shoal__fplan_t *p, shoal__fplan_flow_t *f) {
  if (f->sent > 0) f->V = f->sent;
  f->open = 0;
  finish(p, f);
}

/* Do the flows in members[] (one job's) go around a ring of hosts, one flow into and one out of each, by
 * their hosts alone? (is_ring reads the links relink makes, which wait for known volumes.) */
static int hosts_form_ring(const shoal__fplan_t *p, const int *members, int nm) {
  for (int m = 0; m < nm; m++) {
    const shoal__fplan_flow_t *f = &p->flow[members[m]];
    int ns = 0, np = 0;
    for (int q = 0; q < nm; q++) {
      const shoal__fplan_flow_t *g = &p->flow[members[q]];
      if (q == m) continue;
      ns += g->hsrc == f->hdst;
      np += g->hdst == f->hsrc;
    }
    if (ns != 1 || np != 1) return 0;
  }
  return nm > 1;
}

/* f reports the iteration after its open phase's: a rank of the job has finished that phase, so the job's
 * phase is over on every hop (a ring's hops end within one chunk of each other, and what a rank's hop still
 * has to send is in its socket already, which the pacing does not hold). The job's other open flows give
 * the link up now, not at their own next report (measured: a hop that reported its last bytes just before
 * its job-mate's new iteration held every slot ahead until the next slot's report, and the next job
 * waited for it). f's volume is the agent's measured one when it has it. The hops of a ring carry the
 * same bytes an iteration (every rank sends its neighbour 2(n-1)/n of the gradients; the testbed's agents
 * measured equal volumes on both hops of every iteration of every ME1 job), so f's measured volume is its
 * ring-mates' too, and the next iteration plans the whole ring at once; the bytes the others reported so
 * far may be short of it. A job whose flows are not one ring keeps their volumes unknown until their own
 * next report brings the measured one. */
static void open_end_job(shoal__fplan_t *p, shoal__fplan_flow_t *f, double volume) {
  int members[64], nm = 0;
  for (int a = 0; a < p->nflows; a++) {
    shoal__fplan_flow_t *g = &p->flow[a];
    if (g->job != f->job) continue;
    if (nm < 64) members[nm++] = a;
    if (g == f || !g->open) continue;
    g->open = 0;
    finish(p, g);
  }
  if (volume > 0 && nm < 64 && hosts_form_ring(p, members, nm))
    for (int m = 0; m < nm; m++)
      if (!(p->flow[members[m]].V > 0)) p->flow[members[m]].V = volume;
  if (volume > 0) f->sent = volume;
  open_end(p, f);
}

/* A report of a flow in an open phase. The job's open phase ends when none of its open flows sent anything
 * over its last slot (after the reporting flow's second report; one that never started, after 5): a hop
 * alone may pause while it waits for its ring neighbour's bytes (measured: a hop of a waiting job sent its
 * first quarter and stopped, and a volume of a quarter was taken for the iteration's), so a hop stopping is
 * not the end. Ended by a new iteration too. Else the job's room is claimed again from now. Returns 1 when
 * the report was handled here. */
static int open_report(shoal__fplan_t *p, int fi, uint64_t iter, double volume, double sent) {
  shoal__fplan_flow_t *f = &p->flow[fi];
  if (!f->open) return 0;
  if (iter > f->iter) {
    open_end_job(p, f, volume);
    return 0;
  }
  if (iter != f->iter) {
    open_end(p, f);
    return 0;
  }
  f->sent = sent;
  f->slots_active++;
  int quiet = 1, started = 0;
  for (int a = 0; a < p->nflows; a++) {
    const shoal__fplan_flow_t *g = &p->flow[a];
    if (g->job != f->job || !g->open) continue;
    if (g->last_slot_bytes > 0) quiet = 0;
    if (g->sent > 0) started = 1;
  }
  if (quiet && f->slots_active >= (started ? 2 : 5)) {
    for (int a = 0; a < p->nflows; a++)
      if (p->flow[a].job == f->job && p->flow[a].open) open_end(p, &p->flow[a]);
  } else {
    open_phase(p, f->job);
  }
  return 1;
}

/* Did job move more than a start's worth of bytes over the slot before the current report's slot (the
 * flows already reported in this slot read it from prev_slot_bytes, the others from last_slot_bytes; a
 * flow's first report counts everything it sent before, not one slot's bytes)? */
static int job_sent_in_slot_before(const shoal__fplan_t *p, uint64_t job) {
  for (int a = 0; a < p->nflows; a++) {
    const shoal__fplan_flow_t *g = &p->flow[a];
    if (g->job != job) continue;
    double b = g->seen == p->now ? g->prev_slot_bytes : g->seen == p->now - 1 && g->nrep > 1 ? g->last_slot_bytes : 0;
    if (b > SHOAL__FPLAN_EXTRA_BYTES) return 1;
  }
  return 0;
}

/* A new iteration of f's job: every flow of the job with a known volume is planned now, in one slot
 * order for the whole job, so that the hops of a ring get the same slots (planned one by one as their
 * agents report, two jobs' rings could each get one direction first and wait on each other). A job whose
 * new phase starts right after its previous one (it moved bytes of that one over the slot before: it
 * computes for well under two slots) is not planned: its flows go unpaced this iteration. Such a job is
 * always communicating, so there is no gap in which another job's phase could go instead of colliding;
 * planned, its turns only added the handovers (a turn starts at the next slot's grant) and hops of two
 * such rings held at the floor on opposite uplinks, each ring waiting on its slow direction (testbed, 2
 * jobs at 0 ms compute: 47% slower than cubic). */
static void new_iteration(shoal__fplan_t *p, int fi, uint64_t iter, double volume, double sent) {
  shoal__fplan_flow_t *f = &p->flow[fi];
  if (volume > 0) f->V = volume;
  relink(p, f->job);
  int unpaced = job_sent_in_slot_before(p, f->job);
  int links[4 * SHOAL__FPLAN_MAX_PATH * 16] = {0}, nl = 0, members[64], nm = 0;
  for (int a = 0; a < p->nflows && nm < 64; a++) {
    shoal__fplan_flow_t *g = &p->flow[a];
    if (g->job != f->job) continue;
    if (a != fi && !(g->V > 0 && g->iter < iter && g->seen + 2 >= p->now)) continue;
    unreserve_from(p, g, 0);
    g->iter = iter;
    g->base = 0;
    g->sent = a == fi ? sent : 0;
    g->granted = g->wasted = 0;
    g->slots_active = 0;
    g->planned = p->cfg.factor * g->V;
    g->active = g->V > 0 && g->sent < g->V;
    g->unpaced = unpaced;
    if (!g->active || unpaced) continue;
    members[nm++] = a;
    for (int j = 0; j < g->npath && nl < (int)(sizeof links / sizeof *links); j++) links[nl++] = g->path[j];
  }
  slot_load_t order[SHOAL__FPLAN_MAX_K];
  int n;
  slot_order(p, links, nl, 0, order, &n);
  if (p->cfg.policy == SHOAL__FPOL_MLCC && is_ring(p, members, nm)) {
    place_ring(p, members, nm, order, n);
    return;
  }
  for (int m = 0; m < nm; m++) {
    shoal__fplan_flow_t *g = &p->flow[members[m]];
    place(p, g, g->planned - g->sent, job_path_rate(p, g) * p->cfg.slot_s, order, n);
  }
}

/* Bytes per slot f's plan may hold: what its path gives, and under the ring rule no more than its
 * predecessor delivered in the last slot (a quarter more) when that predecessor left most of its own
 * grant unused: it is held up by something the plan does not control (a slow hop, a slow host), f can
 * only forward what it brings, and rate reserved beyond that would wait unused while other jobs could
 * have had it. A predecessor that used its grant is not a reason: capping f by a rate the plan itself
 * set would throttle the ring in a circle. Nor is one that moved less than a floor's worth: a slow hop
 * moves, slowly; one that moved nothing is waiting, on its rank or on bytes that f brings (in a 2-host
 * ring f is its predecessor's predecessor), and the cap would be the floor: f held there gives it nothing
 * to forward, and it caps f again (testbed, 2 jobs at 0 ms compute: a 2-host ring's hops at the floor for
 * 14 slots, each capped by the other). */
static double per_slot_cap(const shoal__fplan_t *p, const shoal__fplan_flow_t *f) {
  double cap = f->e * p->cfg.slot_s;
  if (p->cfg.policy != SHOAL__FPOL_MLCC || f->pred < 0) return cap;
  const shoal__fplan_flow_t *g = &p->flow[f->pred];
  if (!g->active || g->iter != f->iter || g->slots_active < 2 || f->slots_active < 2) return cap;
  if (!(g->last_slot_bytes < 0.5 * g->given)) return cap;
  if (g->last_slot_bytes < p->cfg.floor_frac * g->e * p->cfg.slot_s) return cap;
  /* nor is a predecessor starved by its own input that the plan held back (the hop before it had a grant
   * under twice what it delivered): in a ring that is the plan throttling itself in a circle (measured: a
   * 2-host ring's hops capping each other up by 1.25 a slot from the floor), not a slow hop */
  if (g->pred >= 0 && p->flow[g->pred].given < 2 * g->last_slot_bytes) return cap;
  double lim = 1.25 * g->last_slot_bytes, fl = p->cfg.floor_frac * f->e * p->cfg.slot_s;
  if (lim < fl) lim = fl;
  return lim < cap ? lim : cap;
}

/* Bytes f's share of slot now + k is on its links (a hop of a ring under mlcc): on each link what other
 * jobs left, divided among its job's hops of this iteration on it. Re-planned on its own, the first hop to
 * report took all that room and its job-mate on the same link got none, and the ring waited on it. */
static double job_room(const shoal__fplan_t *p, const shoal__fplan_flow_t *f, int k) {
  int i = slot_idx(p, p->now + k);
  double r = INFINITY;
  for (int j = 0; j < f->npath; j++) {
    const shoal__fplan_link_t *l = &p->link[f->path[j]];
    double mine = 0;
    int c = 0;
    for (int a = 0; a < p->nflows; a++) {
      const shoal__fplan_flow_t *g = &p->flow[a];
      if (g->job != f->job || g->iter != f->iter || !(g == f || g->active)) continue;
      int on = 0;
      for (int q = 0; q < g->npath; q++) on |= g->path[q] == f->path[j];
      if (!on) continue;
      c++;
      if (g != f) mine += g->sched[i];
    }
    double h = (l->avail * p->cfg.slot_s - (l->resv[i] - mine)) / (c > 0 ? c : 1);
    if (h < r) r = h;
  }
  return r > 0 ? r : 0;
}

static void reschedule(shoal__fplan_t *p, shoal__fplan_flow_t *f, double sent) {
  f->sent = sent;
  if (f->V > 0 && sent >= f->V) {
    finish(p, f);
    return;
  }
  f->slots_active++;
  if (f->unpaced) return;
  /* what is left is what is untransmitted of the measured volume: the factor's margin belongs to the
   * first plan only; kept in the plan to the end, it held slots (and shut other jobs out of them) after
   * the flow had sent everything (a phase ends mid-slot, and the others' reports of that slot may come first) */
  double left = (f->V > 0 ? f->V : f->planned) - sent;
  unreserve_from(p, f, 0);
  double per = per_slot_cap(p, f), share = ring_rate(p, f) * p->cfg.slot_s;
  if (per > share) per = share;
  int from = 0;
  if (p->cfg.policy == SHOAL__FPOL_MLCC && f->succ >= 0) {
    /* the ring rule: f lags the flow that waits on it by delta bytes: send that now */
    const shoal__fplan_flow_t *s = &p->flow[f->succ];
    double delta = s->active && s->iter == f->iter ? s->granted + s->sched[slot_idx(p, p->now)] - f->granted : 0;
    if (delta > 0) {
      double x = room(p, f, 0);
      if (x > delta) x = delta;
      if (x > f->e * p->cfg.slot_s) x = f->e * p->cfg.slot_s;
      if (x > left) x = left;
      int i = slot_idx(p, p->now);
      f->sched[i] = x;
      for (int j = 0; j < f->npath; j++) p->link[f->path[j]].resv[i] += x;
      left -= x;
      from = 1;
    }
  }
  /* greedily from now (earliest slots first), not least loaded first: a phase under way that put its last
   * bytes into the emptiest slot ahead would stall its job there while later jobs took the slots before */
  slot_load_t order[SHOAL__FPLAN_MAX_K];
  int n = 0;
  for (int k = from; k < p->cfg.horizon; k++) order[n++] = (slot_load_t){0, k};
  if (p->cfg.policy == SHOAL__FPOL_MLCC && f->succ >= 0 && f->pred >= 0) {
    /* a hop of a ring: at most its share of each link among its job's hops there */
    for (int o = 0; o < n && left > 0; o++) {
      double cap = job_room(p, f, order[o].k);
      place(p, f, left < cap ? left : cap, per, order + o, 1);
      left -= f->sched[slot_idx(p, p->now + order[o].k)];
    }
    return;
  }
  place(p, f, left, per, order, n);
}

/* f, whose phase of this iteration ended, sent more than a start's worth beyond it (the model broadcast
 * after the last step, an evaluation): the bytes beyond are an extra phase of the flow alone, of its
 * volume V (the only size known), planned from now earliest slots first like the rest of a phase. Left
 * unplanned they only had the room of the current slot: behind the other jobs' plans they trickled at the
 * floor, and as other jobs' new iterations took the free slots ahead, a job's end waited on theirs
 * (testbed, ME1 3 jobs at 1000 ms: 1.0-2.1 s from a job's last step to its end, 0.5-1.4 under TCP). */
static void extra_phase(shoal__fplan_t *p, shoal__fplan_flow_t *f, double sent) {
  f->base += f->V;
  f->granted = f->wasted = 0;
  f->slots_active = 0;
  f->planned = f->V;
  f->active = 1;
  reschedule(p, f, sent - f->V);
}

/* Bytes beyond a finished phase's volume that start an extra phase: as the agent starts a phase (1% of the
 * volume, at most SHOAL__FPLAN_EXTRA_BYTES). Unplanned until then, the flow trickles at the floor behind the
 * other jobs' plans: at 64 KiB it took 6-7 slots to get there (testbed, ME1 3 jobs at 40 Mbit/s: every job's
 * final model broadcast waited 0.6-0.7 s at the floor). A few hundred bytes of statistics after the last
 * step do not start one. */
static double extra_start(const shoal__fplan_flow_t *f) {
  return f->V / 100 < SHOAL__FPLAN_EXTRA_BYTES ? f->V / 100 : SHOAL__FPLAN_EXTRA_BYTES;
}

/* Static equal share: capacity over the flows on each link that carry traffic at all. */
static double equal_rate(const shoal__fplan_t *p, const shoal__fplan_flow_t *f) {
  double r = INFINITY;
  int alone = 1;
  for (int j = 0; j < f->npath; j++) {
    int l = f->path[j], n = 0;
    for (int a = 0; a < p->nflows; a++) {
      const shoal__fplan_flow_t *g = &p->flow[a];
      if (!(g->V > 0) || g->seen + 2 < p->now) continue;
      for (int k = 0; k < g->npath; k++) n += g->path[k] == l;
    }
    if (n > 1) alone = 0;
    double share = p->link[l].avail / (n > 0 ? n : 1);
    if (share < r) r = share;
  }
  return alone ? 0 : r;
}

/* What the planner may hand out on f's path, bytes/s: its narrowest link's capacity less the background and
 * queue feedback measured there. */
static double path_avail(const shoal__fplan_t *p, const shoal__fplan_flow_t *f) {
  double c = INFINITY;
  for (int j = 0; j < f->npath; j++)
    if (p->link[f->path[j]].avail < c) c = p->link[f->path[j]].avail;
  return c;
}

/* Does another job that is planned (not unpaced) have a flow on a link of f's path? */
static int others_planned_on_path(const shoal__fplan_t *p, const shoal__fplan_flow_t *f) {
  for (int a = 0; a < p->nflows; a++) {
    const shoal__fplan_flow_t *g = &p->flow[a];
    if (g->job == f->job || g->unpaced) continue;
    for (int j = 0; j < f->npath; j++)
      for (int q = 0; q < g->npath; q++)
        if (g->path[q] == f->path[j]) return 1;
  }
  return 0;
}

/* The rate of f in the current slot: its own reservation plus what nobody reserved on its path. No limit
 * when that is (nearly) the whole path, or all the planner may hand out on it (no other flow holds any of
 * the slot there: a limit would only leave the link idle under a background estimate); never below the
 * floor. A phase on links that another planned job's flows also use is paced at SHOAL__FPLAN_TURN_FRAC of
 * its path instead of unlimited: unpaced, TCP filled the uplinks' queues, the ACKs of the ring's other
 * direction waited (and were dropped) behind its data there, and that direction moved 50-75% of a slot's
 * link bytes (testbed, ME1 3 jobs at a 20 ms queue). A job alone on its links stays unlimited. */
static double grant(const shoal__fplan_t *p, const shoal__fplan_flow_t *f) {
  if (f->npath == 0) return 0;
  if (p->cfg.policy == SHOAL__FPOL_EQUAL) return equal_rate(p, f);
  if (f->active && f->unpaced) return 0;
  double T = p->cfg.slot_s, cap = path_cap(p, f);
  double turn = f->active && others_planned_on_path(p, f) ? SHOAL__FPLAN_TURN_FRAC * cap : 0;
  /* the last bytes of a phase (more than half sent, less than a slot left) go unlimited: held to a grant
   * that a slower hop or a later report cut short, they spill into slots already planned for another job
   * and stall this one until that job is done */
  if (f->active && f->V > 0 && f->sent >= 0.5 * f->V && f->V - f->sent <= f->e * T) return turn;
  double own = f->active ? f->sched[slot_idx(p, p->now)] : 0;
  double bytes = own + room(p, f, 0);
  if (bytes >= 0.95 * cap * T || bytes >= 0.99 * path_avail(p, f) * T) return turn;
  double fl = p->cfg.floor_frac * cap;
  double r = bytes / T > fl ? bytes / T : fl;
  return turn > 0 && r > turn ? turn : r;
}

void shoal__fplan_take(shoal__fplan_t *p, int fi, int status, uint64_t iter, double volume, double sent, double e_bps) {
  shoal__fplan_flow_t *f = &p->flow[fi];
  double T = p->cfg.slot_s;
  /* bytes sent during the last slot; across an iteration boundary the end of the previous iteration
   * (its volume, now reported, minus what had been reported of it) counts too, or feedback would take it
   * for background traffic */
  if (f->seen != p->now) f->prev_slot_bytes = f->seen == p->now - 1 && f->nrep > 1 ? f->last_slot_bytes : 0;
  if (f->nrep < 2) f->nrep++;
  if (iter == f->rep_iter) f->last_slot_bytes = sent > f->rep_sent ? sent - f->rep_sent : 0;
  else f->last_slot_bytes = sent + (iter == f->rep_iter + 1 && volume > f->rep_sent ? volume - f->rep_sent : 0);
  f->rep_iter = iter;
  f->rep_sent = sent;
  f->given = f->seen == p->now - 1 ? (f->rate > 0 ? f->rate : path_cap(p, f)) * T : 0;
  if (f->active && f->given > f->last_slot_bytes) f->wasted += f->given - f->last_slot_bytes; /* given, not used */
  f->seen = p->now;
  for (int j = 0; j < f->npath; j++) p->link[f->path[j]].shoal_cur += f->last_slot_bytes;
  double cap = path_cap(p, f);
  f->e = e_bps > 0 && e_bps < cap ? e_bps : cap;
  if (volume > 0 && (status == SHOAL__FS_NEW_ITER || !(f->V > 0))) f->V = volume;
  /* the bytes of this iteration's current phase */
  if (iter == f->iter && p->cfg.policy != SHOAL__FPOL_EQUAL) sent = sent > f->base ? sent - f->base : 0;
  if (p->cfg.policy == SHOAL__FPOL_EQUAL) {
    f->iter = iter;
    f->sent = sent;
  } else if (open_report(p, fi, iter, volume, sent)) {
    /* an open phase under way */
  } else if (status != SHOAL__FS_IDLE && iter > 0 && !(f->V > 0) && (iter > f->iter || (!f->active && iter != f->iter))) {
    open_start(p, fi, iter, sent); /* the job's first phase: its volume is not known yet */
  } else if (status == SHOAL__FS_IDLE) {
    /* not sending yet: a flow its job-mate's NEW_ITER planned for this iteration keeps its plan (its
     * agent has not seen its first bytes); one still holding an older iteration's plan ends it */
    if (f->active && iter == f->iter) reschedule(p, f, sent);
    else if (f->active && iter > f->iter) finish(p, f);
    else f->sent = sent;
  } else if (iter > f->iter || (!f->active && iter != f->iter)) {
    new_iteration(p, fi, iter, volume, sent); /* NEW_ITER, or a RESCHEDULE of an iteration not seen */
  } else if (f->active) {
    reschedule(p, f, sent);
  } else if (status == SHOAL__FS_RESCHEDULE && f->V > 0 && iter == f->iter && sent > f->V + extra_start(f)) {
    extra_phase(p, f, sent);
  } else {
    f->sent = sent;
  }
}

double shoal__fplan_grant(shoal__fplan_t *p, int fi) {
  shoal__fplan_flow_t *f = &p->flow[fi];
  f->rate = grant(p, f);
  return f->rate;
}

double shoal__fplan_report(shoal__fplan_t *p, int fi, int status, uint64_t iter, double volume, double sent, double e_bps) {
  shoal__fplan_take(p, fi, status, iter, volume, sent, e_bps);
  return shoal__fplan_grant(p, fi);
}

void shoal__fplan_feedback(shoal__fplan_t *p, int l, double tx_bps, double backlog_bytes, uint64_t drops) {
  shoal__fplan_link_t *L = &p->link[l];
  double T = p->cfg.slot_s;
  /* the qdisc counts frames (Ethernet, IP and TCP headers: 1514 bytes per 1448 of payload), the agents
   * acknowledged payload; their readings are a few ms apart, hence the dead band */
  double raw = tx_bps / 8 - 1.046 * L->shoal_bytes / T;
  if (raw < 0.1 * L->cap) raw = 0;
  /* background is what shows in two slots in a row: a flow's report read 20 ms later than the qdisc puts
   * a tenth of a busy link into one slot's difference and takes it out of the next one's */
  double bg = raw < L->bg_raw ? raw : L->bg_raw;
  L->bg_raw = raw;
  L->bg = 0.5 * L->bg + 0.5 * bg;
  L->drops = drops;
  L->backlog = backlog_bytes;
  /* a queue beyond 50 ms of the link is drained over the next slot */
  double excess = backlog_bytes - 0.05 * L->cap;
  double avail = L->cap - L->bg - (excess > 0 ? excess / T : 0);
  if (avail < 0.1 * L->cap) avail = 0.1 * L->cap;
  L->avail = avail > L->cap ? L->cap : avail;
}

void shoal__fplan_background(shoal__fplan_t *p, int l, double bps) {
  shoal__fplan_link_t *L = &p->link[l];
  L->bg = 0.5 * L->bg + 0.5 * (bps > 0 ? bps : 0);
  double avail = L->cap - L->bg;
  L->avail = avail < 0.1 * L->cap ? 0.1 * L->cap : avail;
}

double shoal__fplan_reserved(const shoal__fplan_t *p, int l, int k) { return p->link[l].resv[slot_idx(p, p->now + k)]; }
