/* The policy's cluster from the manager's nodes (nodes.c in ctl.h).
 *
 * The cluster is built once, from the nodes of the controller's partition
 * (racks from the manager's topology, one group of machines per rack, every
 * machine with the most GPUs any node has). What the policy must not hand out
 * is taken from its cluster as `blocked`, per node, and given back when it
 * frees up: the GPUs a smaller node does not have; everything on a node that is
 * down, drained or not responding; and what jobs that are not the controller's
 * (another user's plain jobs, another controller's, jobs released outside the
 * controller) hold there. A blocked GPU still held by one of the controller's
 * own jobs is taken once that job lets it go. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "live/ctl.h"

static int in_partition(const shoal_live_ctl_t *L, const shoal_live_node_t *n) {
  return !L->cfg.partition || !L->cfg.partition[0] || shoal__live_list_has(n->partitions, L->cfg.partition);
}

/* a node's state for the log: what keeps work off it */
static const char *node_word(const char *state) {
  if (strstr(state, "NOT_RESPONDING")) return "not responding";
  if (strstr(state, "DRAIN")) return "drained";
  if (strstr(state, "FAIL") || strstr(state, "fail")) return "failed";
  if (strstr(state, "down") || strstr(state, "DOWN")) return "down";
  return "unusable";
}

static int alloc_nodes(shoal_live_ctl_t *L, int n) {
  L->node = calloc((size_t)n, sizeof *L->node);
  L->node_state = calloc((size_t)n, sizeof *L->node_state);
  L->node_gpus = calloc((size_t)n, sizeof(int));
  L->node_cpus = calloc((size_t)n, sizeof(int));
  L->usable = calloc((size_t)n, sizeof(int));
  L->drain = calloc((size_t)n, sizeof(int));
  L->foreign_gpus = calloc((size_t)n, sizeof(int));
  L->foreign_cpus = calloc((size_t)n, sizeof(int));
  L->blocked = calloc((size_t)n, sizeof *L->blocked);
  if (!L->node || !L->node_state || !L->node_gpus || !L->node_cpus || !L->usable || !L->drain || !L->foreign_gpus ||
      !L->foreign_cpus || !L->blocked)
    return shoal__seterr(SHOAL_ERR_NOMEM, "live: out of memory");
  return 0;
}

static int by_rack(const void *a, const void *b) {
  const shoal_live_node_t *x = *(shoal_live_node_t *const *)a, *y = *(shoal_live_node_t *const *)b;
  if (x->rack != y->rack) return x->rack < y->rack ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* one group per rack (racks contiguous); more racks than groups fit: one group spread over them */
static int build_cluster(shoal_live_ctl_t *L, shoal_live_node_t **v, int n) {
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  cs.ngroups = 0;
  int nracks = 0;
  for (int i = 0; i < n; i++) nracks += i == 0 || v[i]->rack != v[i - 1]->rack;
  int max_groups = (int)(sizeof cs.group / sizeof cs.group[0]);
  for (int i = 0; i < n;) {
    int k = i;
    while (k < n && (nracks > max_groups || v[k]->rack == v[i]->rack)) k++;
    shoal_cluster_group_t *g = &cs.group[cs.ngroups++];
    memset(g, 0, sizeof *g);
    g->machines = k - i;
    g->racks = nracks > max_groups ? nracks : 1;
    g->per_machine.gpus = L->model_gpus;
    g->per_machine.cpus = 1e6;
    g->per_machine.mem_gb = 1e6;
    g->nic_gbps = 1;
    i = k;
  }
  if (L->cfg.oversub >= 1) cs.net.oversub = L->cfg.oversub;
  int rc = shoal__cluster_create(&cs, &L->c);
  if (rc) return shoal__seterr(rc, "live: the cluster of %d nodes: %s", n, shoal_last_error());
  /* Slurm gives every node of a job the same GPUs: a node holding only a job's servers would hold GPUs the
   * policy thinks free. So servers go beside the job's workers (docs/design.md, "Parameter-server jobs live"). */
  L->c->ps_with_workers = 1;
  return 0;
}

int live_nodes_first(shoal_live_ctl_t *L, const shoal_live_nodes_t *nodes) {
  shoal_live_node_t **v = calloc((size_t)(nodes->n ? nodes->n : 1), sizeof *v);
  if (!v) return shoal__seterr(SHOAL_ERR_NOMEM, "live: out of memory");
  int n = 0;
  L->model_gpus = 0;
  for (int i = 0; i < nodes->n; i++)
    if (in_partition(L, &nodes->node[i]) && nodes->node[i].gpus > 0) {
      v[n++] = &nodes->node[i];
      if (nodes->node[i].gpus > L->model_gpus) L->model_gpus = nodes->node[i].gpus;
    }
  int rc = 0;
  if (n == 0) {
    rc = shoal__seterr(SHOAL_ERR_NOT_FOUND, "the manager lists no node with GPUs%s%s%s", L->cfg.partition ? " in partition '" : "",
                       L->cfg.partition ? L->cfg.partition : "", L->cfg.partition ? "'" : "");
  } else if (L->model_gpus > SHOAL_MAX_GPUS_PER_MACHINE) {
    rc = shoal__seterr(SHOAL_ERR_UNSUPPORTED, "a node has %d GPUs (at most %d)", L->model_gpus, SHOAL_MAX_GPUS_PER_MACHINE);
  }
  if (!rc) {
    qsort(v, (size_t)n, sizeof *v, by_rack);
    rc = alloc_nodes(L, n);
  }
  for (int i = 0; !rc && i < n; i++) {
    memcpy(L->node[i], v[i]->name, SHOAL_LIVE_NAME);
    snprintf(L->node_state[i], sizeof L->node_state[i], "%s", v[i]->state);
    L->node_gpus[i] = v[i]->gpus, L->node_cpus[i] = v[i]->cpus;
    L->usable[i] = v[i]->usable, L->drain[i] = v[i]->drain;
    L->capacity_gpus += v[i]->gpus;
    if (!v[i]->usable) live_log(L, "node %s is %s (%s): no new work there", v[i]->name, node_word(v[i]->state), v[i]->state);
  }
  L->nnodes = rc ? 0 : n;
  if (!rc) rc = build_cluster(L, v, n);
  free(v);
  return rc;
}

void live_nodes_update(shoal_live_ctl_t *L, const shoal_live_nodes_t *nodes) {
  for (int i = 0; i < nodes->n; i++) {
    const shoal_live_node_t *nd = &nodes->node[i];
    int m = live_node_index(L, nd->name);
    if (m < 0) continue;
    if (!nd->usable && (L->usable[m] || strcmp(node_word(nd->state), node_word(L->node_state[m]))))
      live_log(L, "node %s is %s (%s): no new work there", nd->name, node_word(nd->state), nd->state);
    if (nd->usable && !L->usable[m]) live_log(L, "node %s is back (%s)", nd->name, nd->state);
    L->usable[m] = nd->usable;
    L->drain[m] = nd->drain;
    snprintf(L->node_state[m], sizeof L->node_state[m], "%s", nd->state);
  }
}

/* 1 if the manager's job is one the controller runs (its own, in the policy's hands) */
static int is_ours(const shoal_live_ctl_t *L, long sid) {
  const lj_t *x = live_find(L, sid);
  return x && !x->ignored;
}

void live_nodes_foreign(shoal_live_ctl_t *L) {
  memset(L->foreign_gpus, 0, (size_t)L->nnodes * sizeof(int));
  memset(L->foreign_cpus, 0, (size_t)L->nnodes * sizeof(int));
  for (int i = 0; i < L->view.n; i++) {
    const shoal_live_job_t *mj = &L->view.job[i];
    if (mj->nuse == 0 || is_ours(L, mj->id)) continue;
    for (int k = 0; k < mj->nuse; k++) {
      int m = live_node_index(L, mj->use[k].node);
      if (m >= 0) L->foreign_gpus[m] += mj->use[k].gpus, L->foreign_cpus[m] += mj->use[k].cpus;
    }
  }
}

/* GPUs of node m the policy must not have */
static int block_target(const shoal_live_ctl_t *L, int m) {
  if (!L->usable[m]) return L->model_gpus;
  /* the controller's jobs take one CPU per node: a node whose CPUs others hold is full */
  if (L->node_cpus[m] > 0 && L->foreign_cpus[m] >= L->node_cpus[m]) return L->model_gpus;
  int t = L->model_gpus - L->node_gpus[m] + L->foreign_gpus[m];
  return t > L->model_gpus ? L->model_gpus : t;
}

void live_nodes_block(shoal_live_ctl_t *L) {
  L->usable_gpus = 0;
  for (int m = 0; m < L->nnodes; m++) {
    int want = block_target(L, m), have = L->blocked[m].gpus;
    if (want < have) {
      shoal_res_t r = {have - want, 0, 0};
      shoal__cluster_give(L->c, m, &r);
      L->blocked[m].gpus = want;
      L->s.events |= SHOAL_EV_FINISH; /* GPUs freed up: for the policy, as when a job leaves */
    } else if (want > have) {
      int f = L->c->m[m].free.gpus, take = want - have < f ? want - have : f;
      shoal_res_t r = {take, 0, 0};
      if (take > 0 && shoal__cluster_take(L->c, m, &r) == 0) L->blocked[m].gpus += take;
    }
    L->usable_gpus += L->model_gpus - block_target(L, m);
  }
}

int live_nodes_taken(const shoal_live_ctl_t *L, const shoal_job_t *j) {
  for (int k = 0; k < j->alloc.n; k++) {
    int m = j->alloc.p[k].machine;
    if (L->foreign_gpus[m] + j->alloc.p[k].workers > L->node_gpus[m]) return 1;
    if (L->node_cpus[m] > 0 && L->foreign_cpus[m] + 1 > L->node_cpus[m]) return 1;
  }
  return 0;
}
