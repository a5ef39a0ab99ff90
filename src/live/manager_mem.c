/* The in-memory cluster manager (manager_mem.h). Slurm's behaviours it keeps:
 * a requeued job is held and its restart count grows; the state of a run that
 * exited is COMPLETING for a while, then COMPLETED (exit 0), FAILED (other
 * exits), CANCELLED (scancel) or NODE_FAIL; a released job waits (Resources)
 * until every node it asks for has room; a signal or hold to a job in the
 * wrong state is an error, as scancel/scontrol answer. */
#include "live/manager_mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "live/params.h"

#define MEM_MAX_NODES 256
#define MEM_EXIT(code) ((code) << 8)

typedef struct mnode {
  shoal_live_node_t v;
  int down;
} mnode_t;

typedef struct mjob {
  shoal_live_job_t v;          /* what jobs() lists (v.use points into use) */
  shoal_live_mem_behaviour_t b;
  char nodelist[256];
  char env[512];               /* the environment words it was submitted with, separated by spaces */
  int nreq;                    /* placement given by start(): nodes and GPUs */
  char req[MEM_MAX_NODES][SHOAL_LIVE_NAME];
  int req_gpus[MEM_MAX_NODES];
  int eligible;                /* released: starts when it fits */
  shoal_live_use_t use[MEM_MAX_NODES];
  int workers;
  double progress, last_t;
  double saved;                /* progress at its last checkpoint */
  double exit_at;              /* a requested exit (checkpoint) comes at this time; 0: none */
  int exit_code;
  double completing_until;
  char end_state[32];
  int end_status;
  shoal_live_mem_stats_t st;
} mjob_t;

typedef struct fault {
  char op[16];
  int count;               /* calls that fail */
  int slow;                /* calls that take slow_s before they answer */
  double slow_s;
} fault_t;

struct shoal_live_mem {
  double now, completing_s, forget_s;
  int down;
  int slurm_resize;        /* resize() as Slurm's (shoal__live_mem_set_slurm_resize) */
  shoal_live_manager_ops_t ops; /* the manager's operations, with the capabilities of the resize chosen */
  mnode_t node[MEM_MAX_NODES];
  int nnodes;
  mjob_t **job;
  int njobs, cap;
  long next_id;
  fault_t fault[16];
  int nfaults;
  struct {
    char op[16];
    int n;
  } calls[16];
  int ncalls;
  struct {
    char scope[64], holder[128], where[256];
    double renewed, ttl;
  } lease[8];
  int nleases;
  shoal_live_share_t share[64];
  int nshares;
};

/* ---- bookkeeping ---- */

static void count_call(shoal_live_mem_t *m, const char *op) {
  for (int i = 0; i < m->ncalls; i++)
    if (!strcmp(m->calls[i].op, op)) {
      m->calls[i].n++;
      return;
    }
  if (m->ncalls < 16) {
    snprintf(m->calls[m->ncalls].op, sizeof m->calls[0].op, "%s", op);
    m->calls[m->ncalls++].n = 1;
  }
}

int shoal__live_mem_calls(const shoal_live_mem_t *m, const char *op) {
  for (int i = 0; i < m->ncalls; i++)
    if (!strcmp(m->calls[i].op, op)) return m->calls[i].n;
  return 0;
}

/* every call starts here: the manager down, an injected failure of this op, or an injected delay */
static int enter(shoal_live_mem_t *m, const char *op) {
  count_call(m, op);
  if (m->down) return shoal__seterr(SHOAL_ERR_CONNECT, "memory manager: %s: the manager does not answer (down)", op);
  for (int i = 0; i < m->nfaults; i++) {
    fault_t *f = &m->fault[i];
    if (strcmp(f->op, op)) continue;
    if (f->count > 0) {
      f->count--;
      return shoal__seterr(SHOAL_ERR_IO, "memory manager: %s: injected failure", op);
    }
    if (f->slow > 0) {
      f->slow--;
      shoal__live_mem_advance(m, m->now + f->slow_s);
    }
  }
  return 0;
}

static mjob_t *find(const shoal_live_mem_t *m, long id) {
  for (int i = 0; i < m->njobs; i++)
    if (m->job[i]->v.id == id) return m->job[i];
  return NULL;
}

static mnode_t *node_named(shoal_live_mem_t *m, const char *name) {
  for (int i = 0; i < m->nnodes; i++)
    if (!strcmp(m->node[i].v.name, name)) return &m->node[i];
  return NULL;
}

/* GPUs and CPUs of node n held by running or completing jobs */
static void node_used(const shoal_live_mem_t *m, const char *name, int *gpus, int *cpus) {
  *gpus = *cpus = 0;
  for (int i = 0; i < m->njobs; i++) {
    const mjob_t *j = m->job[i];
    for (int k = 0; k < j->v.nuse; k++)
      if (!strcmp(j->use[k].node, name)) *gpus += j->use[k].gpus, *cpus += j->use[k].cpus;
  }
}

static void set_state(mjob_t *j, int run, const char *state, const char *reason) {
  j->v.run = run;
  snprintf(j->v.state, sizeof j->v.state, "%s", state);
  if (reason != j->v.reason) snprintf(j->v.reason, sizeof j->v.reason, "%s", reason);
}

/* ---- runs ---- */

static void progress(mjob_t *j, double now) {
  if (j->v.run == SHOAL_LIVE_RUNNING && now > j->last_t) j->progress += (now - j->last_t) * j->workers;
  j->last_t = now;
}

/* the run ends: COMPLETING for a while, then its final state */
static void end_run(shoal_live_mem_t *m, mjob_t *j, const char *state, int status) {
  progress(j, m->now);
  snprintf(j->end_state, sizeof j->end_state, "%s", state);
  j->end_status = status;
  j->v.exit_status = status;
  j->v.end_time = m->now;
  j->exit_at = 0;
  j->eligible = 0;
  j->completing_until = m->now + m->completing_s;
  if (!strcmp(state, "COMPLETED")) j->st.completions++;
  if (m->completing_s > 0 && j->v.nuse > 0) set_state(j, SHOAL_LIVE_COMPLETING, "COMPLETING", "None");
  else {
    j->v.nuse = 0;
    set_state(j, SHOAL_LIVE_ENDED, state, "None");
  }
}

/* the nodes a released job would run on, with GPUs per node; 0 if it has none (a foreign job picks free ones) */
static int wanted_nodes(shoal_live_mem_t *m, mjob_t *j, char (*names)[SHOAL_LIVE_NAME], int *gpus) {
  if (j->nreq > 0) {
    for (int i = 0; i < j->nreq; i++) memcpy(names[i], j->req[i], SHOAL_LIVE_NAME), gpus[i] = j->req_gpus[i];
    return j->nreq;
  }
  int n = 0, want = j->b.nodes > 0 ? j->b.nodes : 1, g = j->b.gpus_per_node;
  for (int i = 0; i < m->nnodes && n < want; i++) {
    mnode_t *nd = &m->node[i];
    if (j->nodelist[0] && !shoal__live_list_has(j->nodelist, nd->v.name)) continue;
    int ug, uc;
    node_used(m, nd->v.name, &ug, &uc);
    if (!nd->v.usable || ug + g > nd->v.gpus || uc + 1 > nd->v.cpus) continue;
    memcpy(names[n], nd->v.name, SHOAL_LIVE_NAME), gpus[n++] = g;
  }
  return n == want ? n : 0;
}

static void try_start(shoal_live_mem_t *m, mjob_t *j) {
  char names[MEM_MAX_NODES][SHOAL_LIVE_NAME];
  int gpus[MEM_MAX_NODES];
  int n = wanted_nodes(m, j, names, gpus);
  if (n == 0) return set_state(j, SHOAL_LIVE_PENDING, "PENDING", "Resources");
  for (int i = 0; i < n; i++) {
    mnode_t *nd = node_named(m, names[i]);
    int ug, uc;
    if (!nd || !nd->v.usable) return set_state(j, SHOAL_LIVE_PENDING, "PENDING", "ReqNodeNotAvail");
    node_used(m, names[i], &ug, &uc);
    if (ug + gpus[i] > nd->v.gpus || uc + 1 > nd->v.cpus) return set_state(j, SHOAL_LIVE_PENDING, "PENDING", "Resources");
  }
  j->workers = 0;
  j->st.nodes[0] = 0;
  size_t k = 0;
  for (int i = 0; i < n; i++) {
    memcpy(j->use[i].node, names[i], SHOAL_LIVE_NAME);
    j->use[i].gpus = gpus[i];
    j->use[i].cpus = 1;
    j->workers += gpus[i] > 0 ? gpus[i] : 1;
    k += (size_t)snprintf(j->st.nodes + k, k < sizeof j->st.nodes ? sizeof j->st.nodes - k : 0, "%s%s", i ? "," : "",
                          names[i]);
  }
  j->v.nuse = n;
  j->st.gpus = j->workers;
  j->st.runs++;
  j->eligible = 0;
  j->last_t = m->now;
  j->v.start_time = m->now;
  if (!j->b.checkpoints) j->progress = 0; /* no checkpoint: each run starts from scratch */
  set_state(j, SHOAL_LIVE_RUNNING, "RUNNING", "None");
}

static void step_job(shoal_live_mem_t *m, mjob_t *j) {
  if (j->v.run == SHOAL_LIVE_RUNNING) {
    progress(j, m->now);
    if (j->exit_at > 0 && m->now >= j->exit_at) {
      end_run(m, j, "FAILED", MEM_EXIT(j->exit_code));
      if (j->exit_code == 75) j->saved = j->progress;
    }
    else if (j->b.work > 0 && j->progress >= j->b.work)
      end_run(m, j, j->b.fail_exit ? "FAILED" : "COMPLETED", MEM_EXIT(j->b.fail_exit));
  }
  if (j->v.run == SHOAL_LIVE_COMPLETING && m->now >= j->completing_until) {
    j->v.nuse = 0;
    set_state(j, SHOAL_LIVE_ENDED, j->end_state, "None");
  }
}

void shoal__live_mem_advance(shoal_live_mem_t *m, double now) {
  if (now > m->now) m->now = now;
  for (int i = 0; i < m->njobs; i++) step_job(m, m->job[i]);
  for (int pass = 1; pass >= 0; pass--) /* urgent ones first, then in submit order (Slurm's FIFO priority) */
    for (int i = 0; i < m->njobs; i++)
      if (m->job[i]->b.urgent == pass && m->job[i]->eligible && !m->job[i]->v.held && m->job[i]->v.run == SHOAL_LIVE_PENDING)
        try_start(m, m->job[i]);
}

double shoal__live_mem_now(const shoal_live_mem_t *m) { return m->now; }
void shoal__live_mem_set_completing(shoal_live_mem_t *m, double s) { m->completing_s = s; }
void shoal__live_mem_set_forget(shoal_live_mem_t *m, double s) { m->forget_s = s; }
void shoal__live_mem_set_down(shoal_live_mem_t *m, int down) { m->down = down; }

/* the faults of op, made if new (NULL when the table is full) */
static fault_t *fault_of(shoal_live_mem_t *m, const char *op) {
  for (int i = 0; i < m->nfaults; i++)
    if (!strcmp(m->fault[i].op, op)) return &m->fault[i];
  if (m->nfaults == (int)(sizeof m->fault / sizeof m->fault[0])) return NULL;
  fault_t *f = &m->fault[m->nfaults++];
  memset(f, 0, sizeof *f);
  snprintf(f->op, sizeof f->op, "%s", op);
  return f;
}

void shoal__live_mem_fail_next(shoal_live_mem_t *m, const char *op, int count) {
  fault_t *f = fault_of(m, op);
  if (f) f->count = count;
}

void shoal__live_mem_slow_next(shoal_live_mem_t *m, const char *op, int count, double seconds) {
  fault_t *f = fault_of(m, op);
  if (f) f->slow = count, f->slow_s = seconds;
}

/* ---- building the world ---- */

int shoal__live_mem_create(double now, shoal_live_mem_t **out) {
  shoal_live_mem_t *m = calloc(1, sizeof *m);
  if (!m) return shoal__seterr(SHOAL_ERR_NOMEM, "memory manager: out of memory");
  m->now = now;
  m->completing_s = 0.5;
  m->next_id = 100;
  *out = m;
  return 0;
}

void shoal__live_mem_destroy(shoal_live_mem_t *m) {
  if (!m) return;
  for (int i = 0; i < m->njobs; i++) free(m->job[i]);
  free(m->job);
  free(m);
}

int shoal__live_mem_add_node(shoal_live_mem_t *m, const char *name, int gpus, int cpus, int rack, const char *partitions) {
  if (m->nnodes == MEM_MAX_NODES) return shoal__seterr(SHOAL_ERR_INVALID, "memory manager: too many nodes");
  mnode_t *n = &m->node[m->nnodes++];
  memset(n, 0, sizeof *n);
  snprintf(n->v.name, sizeof n->v.name, "%s", name);
  snprintf(n->v.state, sizeof n->v.state, "idle");
  snprintf(n->v.partitions, sizeof n->v.partitions, "%s", partitions ? partitions : "shoal");
  n->v.usable = 1;
  n->v.gpus = gpus;
  n->v.cpus = cpus;
  n->v.rack = rack;
  return 0;
}

long shoal__live_mem_submit(shoal_live_mem_t *m, const char *comment, const char *partition, const char *account,
                            const char *user, int held, const shoal_live_mem_behaviour_t *b) {
  if (m->njobs == m->cap) {
    int nc = m->cap ? m->cap * 2 : 32;
    mjob_t **nj = realloc(m->job, (size_t)nc * sizeof *nj);
    if (!nj) return -1;
    m->job = nj, m->cap = nc;
  }
  mjob_t *j = calloc(1, sizeof *j);
  if (!j) return -1;
  j->v.id = m->next_id++;
  snprintf(j->v.comment, sizeof j->v.comment, "%s", comment ? comment : "");
  snprintf(j->v.partition, sizeof j->v.partition, "%s", partition ? partition : "shoal");
  snprintf(j->v.account, sizeof j->v.account, "%s", account ? account : "");
  snprintf(j->v.user, sizeof j->v.user, "%s", user ? user : "root");
  snprintf(j->v.name, sizeof j->v.name, "job%ld", j->v.id);
  j->v.submit_time = m->now;
  j->v.held = held;
  j->eligible = !held;
  if (b) j->b = *b;
  if (b && b->nodelist) snprintf(j->nodelist, sizeof j->nodelist, "%s", b->nodelist);
  if (b && b->output) snprintf(j->v.output, sizeof j->v.output, "%s", b->output);
  j->b.nodelist = j->b.output = NULL;
  set_state(j, SHOAL_LIVE_PENDING, "PENDING", held ? "JobHeldUser" : "None");
  m->job[m->njobs++] = j;
  return j->v.id;
}

int shoal__live_mem_set_node(shoal_live_mem_t *m, const char *name, int usable, int down, const char *state) {
  mnode_t *n = node_named(m, name);
  if (!n) return shoal__seterr(SHOAL_ERR_NOT_FOUND, "memory manager: no node %s", name);
  n->v.usable = usable;
  n->v.drain = !usable && !down;
  n->down = down;
  snprintf(n->v.state, sizeof n->v.state, "%s", state ? state : usable ? "idle" : down ? "down" : "idle+DRAIN");
  for (int i = 0; down && i < m->njobs; i++) {
    mjob_t *j = m->job[i];
    for (int k = 0; j->v.run == SHOAL_LIVE_RUNNING && k < j->v.nuse; k++)
      if (!strcmp(j->use[k].node, name)) {
        end_run(m, j, "NODE_FAIL", 9);
        break;
      }
  }
  return 0;
}

int shoal__live_mem_set_share(shoal_live_mem_t *m, const char *account, const char *user, double shares, double usage) {
  int i = 0;
  while (i < m->nshares && (strcmp(m->share[i].account, account) || strcmp(m->share[i].user, user ? user : ""))) i++;
  if (i == 64) return shoal__seterr(SHOAL_ERR_INVALID, "memory manager: too many associations");
  if (i == m->nshares) m->nshares++;
  shoal_live_share_t *s = &m->share[i];
  snprintf(s->account, sizeof s->account, "%s", account);
  snprintf(s->user, sizeof s->user, "%s", user ? user : "");
  s->shares = shares;
  s->usage = usage;
  return 0;
}

/* ---- a user's actions ---- */

int shoal__live_mem_user_cancel(shoal_live_mem_t *m, long id) {
  mjob_t *j = find(m, id);
  if (!j || j->v.run >= SHOAL_LIVE_COMPLETING) return shoal__seterr(SHOAL_ERR_INVALID, "scancel: job %ld is not active", id);
  if (j->v.run == SHOAL_LIVE_RUNNING) end_run(m, j, "CANCELLED", 15);
  else {
    j->v.end_time = m->now;
    j->eligible = 0;
    j->v.exit_status = 0;
    set_state(j, SHOAL_LIVE_ENDED, "CANCELLED", j->v.reason);
  }
  return 0;
}

int shoal__live_mem_user_hold(shoal_live_mem_t *m, long id) {
  mjob_t *j = find(m, id);
  if (!j || j->v.run != SHOAL_LIVE_PENDING) return shoal__seterr(SHOAL_ERR_INVALID, "hold: job %ld is not pending", id);
  j->v.held = 1;
  snprintf(j->v.reason, sizeof j->v.reason, "JobHeldUser");
  return 0;
}

int shoal__live_mem_user_release(shoal_live_mem_t *m, long id) {
  mjob_t *j = find(m, id);
  if (!j || j->v.run != SHOAL_LIVE_PENDING) return shoal__seterr(SHOAL_ERR_INVALID, "release: job %ld is not pending", id);
  j->v.held = 0;
  j->eligible = 1;
  snprintf(j->v.reason, sizeof j->v.reason, "None");
  return 0;
}

int shoal__live_mem_user_set_partition(shoal_live_mem_t *m, long id, const char *partition) {
  mjob_t *j = find(m, id);
  if (!j) return shoal__seterr(SHOAL_ERR_NOT_FOUND, "update: no job %ld", id);
  snprintf(j->v.partition, sizeof j->v.partition, "%s", partition);
  return 0;
}

/* requeue-hold: an ended or running run goes back, held, one restart more */
static int requeue_hold(shoal_live_mem_t *m, mjob_t *j) {
  if (j->v.run == SHOAL_LIVE_PENDING) return shoal__seterr(SHOAL_ERR_INVALID, "requeuehold: job %ld is pending", j->v.id);
  if (j->v.run == SHOAL_LIVE_RUNNING) end_run(m, j, "REQUEUED", 0), j->saved = j->progress; /* (SIGTERM: saved) */
  j->v.nuse = 0;
  j->v.restarts++;
  j->v.held = 1;
  j->eligible = 0;
  j->exit_at = 0;
  set_state(j, SHOAL_LIVE_PENDING, "PENDING", "JobHeldAdmin");
  return 0;
}

int shoal__live_mem_user_requeuehold(shoal_live_mem_t *m, long id) {
  mjob_t *j = find(m, id);
  return j ? requeue_hold(m, j) : shoal__seterr(SHOAL_ERR_NOT_FOUND, "no job %ld", id);
}

int shoal__live_mem_kill_task(shoal_live_mem_t *m, long id, int status) {
  mjob_t *j = find(m, id);
  if (!j || j->v.run != SHOAL_LIVE_RUNNING) return shoal__seterr(SHOAL_ERR_INVALID, "job %ld is not running", id);
  end_run(m, j, "FAILED", status);
  return 0;
}

int shoal__live_mem_exit_now(shoal_live_mem_t *m, long id, int exit_code) {
  mjob_t *j = find(m, id);
  if (!j || j->v.run != SHOAL_LIVE_RUNNING) return shoal__seterr(SHOAL_ERR_INVALID, "job %ld is not running", id);
  end_run(m, j, exit_code ? "FAILED" : "COMPLETED", MEM_EXIT(exit_code));
  return 0;
}

/* ---- the manager interface ---- */

static int mem_nodes(void *impl, shoal_live_nodes_t *out) {
  shoal_live_mem_t *m = impl;
  int rc = enter(m, "nodes");
  if (rc) return rc;
  shoal_live_node_t *v = calloc((size_t)(m->nnodes ? m->nnodes : 1), sizeof *v);
  if (!v) return shoal__seterr(SHOAL_ERR_NOMEM, "memory manager: out of memory");
  for (int i = 0; i < m->nnodes; i++) v[i] = m->node[i].v;
  out->n = m->nnodes;
  out->node = v;
  return 0;
}

static int mem_jobs(void *impl, shoal_live_jobs_t *out) {
  shoal_live_mem_t *m = impl;
  int rc = enter(m, "jobs");
  if (rc) return rc;
  shoal_live_job_t *v = calloc((size_t)(m->njobs ? m->njobs : 1), sizeof *v);
  if (!v) return shoal__seterr(SHOAL_ERR_NOMEM, "memory manager: out of memory");
  int n = 0;
  for (int i = 0; i < m->njobs; i++) {
    const mjob_t *j = m->job[i];
    if (m->forget_s > 0 && j->v.run == SHOAL_LIVE_ENDED && m->now - j->v.end_time > m->forget_s) continue;
    v[n] = j->v;
    v[n].use = NULL;
    if (j->v.nuse > 0 && !(v[n].use = malloc((size_t)j->v.nuse * sizeof *v[n].use))) {
      out->n = n, out->job = v;
      shoal__live_jobs_free(out);
      return shoal__seterr(SHOAL_ERR_NOMEM, "memory manager: out of memory");
    }
    if (j->v.nuse > 0) memcpy(v[n].use, j->use, (size_t)j->v.nuse * sizeof *v[n].use);
    n++;
  }
  out->n = n;
  out->job = v;
  return 0;
}

static int mem_start(void *impl, long id, const shoal_live_place_t *p) {
  shoal_live_mem_t *m = impl;
  int rc = enter(m, "start");
  if (rc) return rc;
  mjob_t *j = find(m, id);
  if (j && j->v.run != SHOAL_LIVE_PENDING) j->st.refused_starts++;
  if (!j || j->v.run != SHOAL_LIVE_PENDING) return shoal__seterr(SHOAL_ERR_INVALID, "start: job %ld is not pending", id);
  if (p->n < 1 || p->n > MEM_MAX_NODES) return shoal__seterr(SHOAL_ERR_INVALID, "start: job %ld: %d nodes", id, p->n);
  for (int i = 0; i < p->n; i++) {
    if (!node_named(m, p->node[i])) return shoal__seterr(SHOAL_ERR_NOT_FOUND, "start: job %ld: no node %s", id, p->node[i]);
    memcpy(j->req[i], p->node[i], SHOAL_LIVE_NAME);
    j->req_gpus[i] = p->gpus[i];
  }
  j->nreq = p->n;
  j->v.held = 0;
  j->eligible = 1;
  snprintf(j->v.reason, sizeof j->v.reason, "None");
  return 0;
}

static int mem_stop(void *impl, long id, shoal_live_stop_t how) {
  shoal_live_mem_t *m = impl;
  int rc = enter(m, "stop");
  if (rc) return rc;
  mjob_t *j = find(m, id);
  if (!j || j->v.run != SHOAL_LIVE_RUNNING) return shoal__seterr(SHOAL_ERR_INVALID, "stop: job %ld is not running", id);
  if (how == SHOAL_LIVE_STOP_CHECKPOINT) {
    if (j->b.checkpoints && j->exit_at == 0) j->exit_at = m->now + j->b.ckpt_s, j->exit_code = 75;
  } else if (how == SHOAL_LIVE_STOP_KILL_TASKS) end_run(m, j, "FAILED", MEM_EXIT(137));
  else end_run(m, j, "CANCELLED", 9);
  return 0;
}

static int mem_requeue(void *impl, long id) {
  shoal_live_mem_t *m = impl;
  int rc = enter(m, "requeue");
  if (rc) return rc;
  mjob_t *j = find(m, id);
  return j ? requeue_hold(m, j) : shoal__seterr(SHOAL_ERR_NOT_FOUND, "requeue: no job %ld", id);
}

static int mem_hold(void *impl, long id) {
  shoal_live_mem_t *m = impl;
  int rc = enter(m, "hold");
  return rc ? rc : shoal__live_mem_user_hold(m, id);
}

static int mem_release(void *impl, long id) {
  shoal_live_mem_t *m = impl;
  int rc = enter(m, "release");
  return rc ? rc : shoal__live_mem_user_release(m, id);
}


/* Slurm's resize (manager_slurm.c): a shrink in place only of a job whose tasks leave on request (leave=1 in its
 * comment; 1 returned: the caller shrinks it as any manager does), another's is refused (SHOAL_ERR_UNSUPPORTED);
 * a grow requeues the job (a checkpointing one saves on the SIGTERM) and starts it on the new nodes. */
static int slurm_resize(shoal_live_mem_t *m, mjob_t *j, const shoal_live_place_t *p) {
  int subset = p->n <= j->v.nuse;
  for (int i = 0; subset && i < p->n; i++) {
    int found = 0;
    for (int k = 0; k < j->v.nuse; k++) found |= !strcmp(j->use[k].node, p->node[i]);
    subset = found;
  }
  if (subset && shoal__live_params_leaves(j->v.comment)) return 1;
  if (subset)
    return shoal__seterr(SHOAL_ERR_UNSUPPORTED, "resize: job %ld: its tasks do not leave on request: no shrink in "
                         "place", j->v.id);
  int rc = requeue_hold(m, j);
  return rc ? rc : mem_start(m, j->v.id, p);
}

static int mem_resize(void *impl, long id, const shoal_live_place_t *p) {
  shoal_live_mem_t *m = impl;
  int rc = enter(m, "resize");
  if (rc) return rc;
  mjob_t *j = find(m, id);
  if (!j || j->v.run != SHOAL_LIVE_RUNNING) return shoal__seterr(SHOAL_ERR_INVALID, "resize: job %ld is not running", id);
  progress(j, m->now);
  if (m->slurm_resize && (rc = slurm_resize(m, j, p)) <= 0) return rc;
  for (int i = 0; i < p->n; i++) {
    mnode_t *nd = node_named(m, p->node[i]);
    int ug, uc, mine = 0;
    if (!nd) return shoal__seterr(SHOAL_ERR_NOT_FOUND, "resize: no node %s", p->node[i]);
    node_used(m, p->node[i], &ug, &uc);
    for (int k = 0; k < j->v.nuse; k++)
      if (!strcmp(j->use[k].node, p->node[i])) mine = j->use[k].gpus;
    if (ug - mine + p->gpus[i] > nd->v.gpus) return shoal__seterr(SHOAL_ERR_INFEASIBLE, "resize: no room on %s", p->node[i]);
  }
  j->workers = 0;
  for (int i = 0; i < p->n; i++) {
    memcpy(j->use[i].node, p->node[i], SHOAL_LIVE_NAME);
    j->use[i].gpus = p->gpus[i];
    j->use[i].cpus = 1;
    j->workers += p->gpus[i];
  }
  j->v.nuse = p->n;
  return 0;
}

static int mem_claim(void *impl, long id, const char *claim) {
  shoal_live_mem_t *m = impl;
  int rc = enter(m, "claim");
  if (rc) return rc;
  mjob_t *j = find(m, id);
  if (!j) return shoal__seterr(SHOAL_ERR_NOT_FOUND, "claim: no job %ld", id);
  snprintf(j->v.claim, sizeof j->v.claim, "%s", claim);
  return 0;
}

static int mem_lease(void *impl, const char *scope, const char *me, const char *where, double ttl_s, int mode,
                     shoal_live_lease_t *holder) {
  shoal_live_mem_t *m = impl;
  int rc = enter(m, "lease");
  if (rc) return rc;
  int i = 0;
  while (i < m->nleases && strcmp(m->lease[i].scope, scope)) i++;
  if (i == 8) return shoal__seterr(SHOAL_ERR_INVALID, "lease: too many scopes");
  if (i == m->nleases) memset(&m->lease[m->nleases++], 0, sizeof m->lease[0]);
  int live = m->lease[i].holder[0] && m->now - m->lease[i].renewed < m->lease[i].ttl;
  if (mode == SHOAL_LIVE_LEASE_GIVE) {
    if (!strcmp(m->lease[i].holder, me)) m->lease[i].holder[0] = 0;
    return 0;
  }
  if (mode == SHOAL_LIVE_LEASE_PEEK || (live && strcmp(m->lease[i].holder, me))) {
    if (holder) memset(holder, 0, sizeof *holder);
    if (!live) return 0;
    if (holder) {
      snprintf(holder->holder, sizeof holder->holder, "%s", m->lease[i].holder);
      snprintf(holder->where, sizeof holder->where, "%s", m->lease[i].where);
      holder->renewed = m->lease[i].renewed;
      holder->ttl = m->lease[i].ttl;
    }
    if (mode == SHOAL_LIVE_LEASE_PEEK) return 0;
    return shoal__seterr(SHOAL_ERR_ADDR_IN_USE, "lease %s is held by %s", scope, m->lease[i].holder);
  }
  snprintf(m->lease[i].scope, sizeof m->lease[i].scope, "%s", scope);
  snprintf(m->lease[i].holder, sizeof m->lease[i].holder, "%s", me);
  snprintf(m->lease[i].where, sizeof m->lease[i].where, "%s", where ? where : "");
  m->lease[i].renewed = m->now;
  m->lease[i].ttl = ttl_s;
  return 0;
}

static int mem_shares(void *impl, shoal_live_shares_t *out) {
  shoal_live_mem_t *m = impl;
  int rc = enter(m, "shares");
  if (rc) return rc;
  if (m->nshares == 0) return shoal__seterr(SHOAL_ERR_UNSUPPORTED, "memory manager: no accounting configured");
  out->share = malloc((size_t)m->nshares * sizeof *out->share);
  if (!out->share) return shoal__seterr(SHOAL_ERR_NOMEM, "memory manager: out of memory");
  memcpy(out->share, m->share, (size_t)m->nshares * sizeof *out->share);
  out->n = m->nshares;
  return 0;
}

static int mem_submit(void *impl, const shoal_live_submit_t *req, long *id) {
  shoal_live_mem_t *m = impl;
  int rc = enter(m, "submit");
  if (rc) return rc;
  long v = shoal__live_mem_submit(m, req->comment, req->partition, req->account, "root", req->hold, NULL);
  if (v < 0) return shoal__seterr(SHOAL_ERR_NOMEM, "memory manager: out of memory");
  mjob_t *j = find(m, v);
  if (req->name) snprintf(j->v.name, sizeof j->v.name, "%s", req->name);
  for (int k = 0, n = 0; k < req->envc && n < (int)sizeof j->env; k++)
    n += snprintf(j->env + n, sizeof j->env - (size_t)n, "%s%s", k ? " " : "", req->env[k]);
  *id = v;
  return 0;
}

const char *shoal__live_mem_job_env(shoal_live_mem_t *m, long id) {
  mjob_t *j = find(m, id);
  return j ? j->env : NULL;
}

static void mem_destroy(void *impl) { (void)impl; /* the caller's */ }

static const shoal_live_manager_ops_t mem_ops = {
    .name = "memory",
    .nodes = mem_nodes,
    .jobs = mem_jobs,
    .start = mem_start,
    .stop = mem_stop,
    .requeue = mem_requeue,
    .hold = mem_hold,
    .release = mem_release,
    .resize = mem_resize,
    .claim = mem_claim,
    .lease = mem_lease,
    .shares = mem_shares,
    .submit = mem_submit,
    .destroy = mem_destroy,
    .caps = SHOAL_LIVE_CAP_SHRINK | SHOAL_LIVE_CAP_GROW | SHOAL_LIVE_CAP_SHARES,
};

shoal_live_manager_t shoal__live_mem_manager(shoal_live_mem_t *m) {
  /* with Slurm's resize, Slurm's capabilities: a shrink in place (of a job that leaves on request), a grow by a
   * restart */
  m->ops = mem_ops;
  if (m->slurm_resize) m->ops.caps = SHOAL_LIVE_CAP_SHRINK | SHOAL_LIVE_CAP_GROW_RESTART | SHOAL_LIVE_CAP_SHARES;
  shoal_live_manager_t mg = {&m->ops, m};
  return mg;
}

void shoal__live_mem_set_slurm_resize(shoal_live_mem_t *m, int on) { m->slurm_resize = on; }

/* ---- inspection ---- */

int shoal__live_mem_stats(const shoal_live_mem_t *m, long id, shoal_live_mem_stats_t *out) {
  const mjob_t *j = find(m, id);
  if (!j) return shoal__seterr(SHOAL_ERR_NOT_FOUND, "no job %ld", id);
  *out = j->st;
  out->progress = j->progress;
  return 0;
}

const shoal_live_job_t *shoal__live_mem_job(const shoal_live_mem_t *m, long id) {
  const mjob_t *j = find(m, id);
  return j ? &j->v : NULL;
}
