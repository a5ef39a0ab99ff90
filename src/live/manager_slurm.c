/* The Slurm cluster manager (manager_slurm.h). */
#include "live/manager_slurm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/command.h"
#include "core/error.h"
#include "live/params.h"
#include "live/slurm_read.h"

#define LEASE_NAME "shoal-lease"
#define LEASE_TAG "shoal-lease:"

typedef struct slurm {
  int topo_read;           /* racks read (once: topology changes need a restart of slurmctld anyway) */
  int ntopo;
  struct topo {
    char node[SHOAL_LIVE_NAME];
    int rack;
  } *topo;
} slurm_t;

/* run a Slurm command; its standard output in *out (if out), the command and its error in the message */
static int run(char **out, const char *input, const char *const *argv) {
  shoal_command_result_t r;
  int rc = shoal__command_run(argv, input, SHOAL_LIVE_SLURM_DEADLINE_S, 0, &r);
  if (rc) return rc;
  if (!shoal__command_ok(&r)) {
    char d[48], cmd[256];
    size_t k = 0;
    for (int i = 0; argv[i] && k < sizeof cmd; i++) k += (size_t)snprintf(cmd + k, sizeof cmd - k, "%s%s", i ? " " : "", argv[i]);
    shoal__command_describe_status(r.status, d, sizeof d);
    rc = shoal__seterr(SHOAL_ERR_IO, "%s: %s%s%s", cmd, d, r.err[0] ? ": " : "", r.err);
    shoal__command_result_free(&r);
    return rc;
  }
  if (out) *out = r.out, r.out = NULL;
  shoal__command_result_free(&r);
  return 0;
}

/* ---- racks ---- */

static void add_rack(void *arg, int rack, const char *expr) {
  slurm_t *s = arg;
  char *names = NULL;
  const char *argv[] = {"scontrol", "show", "hostnames", expr, NULL};
  if (run(&names, NULL, argv)) return;
  for (char *sv = NULL, *t = strtok_r(names, "\n", &sv); t; t = strtok_r(NULL, "\n", &sv)) {
    struct topo *nt = realloc(s->topo, (size_t)(s->ntopo + 1) * sizeof *nt);
    if (!nt) break;
    s->topo = nt;
    snprintf(s->topo[s->ntopo].node, SHOAL_LIVE_NAME, "%s", t);
    s->topo[s->ntopo++].rack = rack;
  }
  free(names);
}

/* racks from the topology plugin's switches (none configured: every node in rack 0) */
static void read_racks(slurm_t *s) {
  if (s->topo_read) return;
  char *text = NULL;
  const char *argv[] = {"scontrol", "show", "topology", NULL};
  if (run(&text, NULL, argv) == 0) shoal__slurm_parse_topology(text, add_rack, s);
  free(text);
  s->topo_read = 1;
}

static int sl_nodes(void *impl, shoal_live_nodes_t *out) {
  slurm_t *s = impl;
  char *json = NULL;
  const char *argv[] = {"sinfo", "--json", NULL};
  int rc = run(&json, NULL, argv);
  if (!rc) rc = shoal__slurm_parse_nodes(json, out);
  free(json);
  if (rc) return rc;
  read_racks(s);
  for (int i = 0; i < out->n; i++) {
    out->node[i].rack = 0;
    for (int k = 0; k < s->ntopo; k++)
      if (!strcmp(s->topo[k].node, out->node[i].name)) out->node[i].rack = s->topo[k].rack;
  }
  return 0;
}

static int sl_jobs(void *impl, shoal_live_jobs_t *out) {
  (void)impl;
  char *json = NULL;
  const char *argv[] = {"squeue", "--json", "-t", "all", NULL};
  int rc = run(&json, NULL, argv);
  if (!rc) rc = shoal__slurm_parse_jobs(json, out);
  free(json);
  return rc;
}

/* ---- actions ---- */

static int update_field(long id, const char *field, const char *value) {
  char job[48], arg[1024];
  snprintf(job, sizeof job, "JobId=%ld", id);
  snprintf(arg, sizeof arg, "%s=%s", field, value);
  const char *argv[] = {"scontrol", "update", job, arg, NULL};
  return run(NULL, NULL, argv);
}

/* the partition that holds every node of p, `own` first ("" none: Slurm runs a job inside one partition) */
static int common_partition(void *impl, const shoal_live_place_t *p, const char *own, char *out, size_t cap) {
  shoal_live_nodes_t nodes = {0, NULL};
  int rc = sl_nodes(impl, &nodes);
  if (rc) return rc;
  out[0] = 0;
  const shoal_live_node_t *first = NULL;
  for (int i = 0; i < nodes.n; i++)
    if (!strcmp(nodes.node[i].name, p->node[0])) first = &nodes.node[i];
  char cands[320], *save = NULL;
  snprintf(cands, sizeof cands, "%s,%s", own, first ? first->partitions : "");
  for (char *c = strtok_r(cands, ",", &save); c && !out[0]; c = strtok_r(NULL, ",", &save)) {
    int all = *c != 0;
    for (int k = 0; all && k < p->n; k++) {
      int has = 0;
      for (int i = 0; i < nodes.n; i++) has |= !strcmp(nodes.node[i].name, p->node[k]) && shoal__live_list_has(nodes.node[i].partitions, c);
      all = has;
    }
    if (all) snprintf(out, cap, "%s", c);
  }
  shoal__live_nodes_free(&nodes);
  return 0;
}

/* The partition job id runs in on p's nodes: its own (`own`; "" read from Slurm) when that holds them all, else
 * one that does (Slurm runs a job inside one partition: a borrower started on hosts lent from another partition).
 * An error when none does; nothing is changed either way. */
static int partition_for(void *impl, long id, const char *own, const shoal_live_place_t *p, char *part, size_t cap) {
  char mine[SHOAL_LIVE_NAME], nodes[8192];
  snprintf(mine, sizeof mine, "%s", own);
  if (!mine[0]) {
    shoal_live_jobs_t jobs = {0, NULL};
    int rc = sl_jobs(impl, &jobs);
    const shoal_live_job_t *j = rc ? NULL : shoal__live_jobs_find(&jobs, id);
    if (j) snprintf(mine, sizeof mine, "%s", j->partition);
    shoal__live_jobs_free(&jobs);
    if (rc) return rc;
    if (!j) return shoal__seterr(SHOAL_ERR_NOT_FOUND, "slurm: no job %ld", id);
  }
  if (p->n <= 1) return snprintf(part, cap, "%s", mine), 0; /* (one node: its own partition holds it) */
  int rc = common_partition(impl, p, mine, part, cap);
  if (rc) return rc;
  shoal__live_place_str(p, nodes, sizeof nodes);
  if (!part[0])
    return shoal__seterr(SHOAL_ERR_UNSUPPORTED, "slurm: job %ld: no partition holds all of %s (a job runs inside one "
                         "partition: give the lent hosts a partition with the borrower's)", id, nodes);
  return 0;
}

/* "NODE/WORKERS/SERVERS,..." of a ps placement into the job's comment (its layout= field replaced): the batch
 * script reads it at the start and runs the tasks there (batch_script). 0, or an error if it does not fit. */
static int comment_with_layout(const char *comment, const shoal_live_place_t *p, char *out, size_t cap) {
  const char *old = strstr(comment, ":layout=");
  size_t keep = old ? (size_t)(old - comment) : strlen(comment), k;
  const char *rest = old ? strchr(old + 1, ':') : NULL;
  int n = snprintf(out, cap, "%.*s%s:layout=", (int)keep, comment, rest ? rest : "");
  k = n < 0 ? cap : (size_t)n;
  for (int i = 0; i < p->n && k < cap; i++)
    k += (size_t)snprintf(out + k, cap - k, "%s%s/%d/%d", i ? "," : "", p->node[i], p->gpus[i], p->servers[i]);
  if (k >= cap || strchr(out, ' ') || strchr(out, '\n'))
    return shoal__seterr(SHOAL_ERR_INVALID, "slurm: the layout of %d nodes does not fit the job's comment", p->n);
  return 0;
}

/* Slurm revokes a job's credential when a run ends, and slurmd refuses a later run's credential created within
 * the same whole second ("Killing non-startable batch JobId=N: Job credential revoked": the run fails with status
 * 1). Slurm's own guard is to keep a requeued job ineligible for 121 s, which StartTime=now (start_in) lifts. A run
 * that ended before this call ended within the current second at the latest, so a requeued job is released from
 * the next whole second on (at most 1 s later). */
static void past_the_revocation_second(void) {
  struct timespec now, ts;
  clock_gettime(CLOCK_REALTIME, &now);
  ts.tv_sec = 0;
  ts.tv_nsec = 1000000000L - now.tv_nsec + 2000000L; /* past the boundary by 2 ms */
  if (ts.tv_nsec >= 1000000000L) ts.tv_sec = 1, ts.tv_nsec -= 1000000000L;
  while (nanosleep(&ts, &ts) && errno == EINTR) {
  }
}

/* Start held job id on p in partition `part` (moved there first unless it is `own`), one scontrol process for
 * every command (it fails if any does). NumCPUs too: a requeued job keeps the CPU count of its last run, and k
 * nodes with fewer CPUs than that never run it (BadConstraints). Gres is per node: the most workers any node has.
 * StartTime=now: Slurm keeps a requeued job ineligible for 121 s otherwise. A ps job (p->servers) also gets its
 * layout in its comment (`comment` is its current one). */
static int start_in(long id, const char *own, const char *part, const char *comment, const shoal_live_place_t *p) {
  char nodes[8192], move[SHOAL_LIVE_NAME + 64] = "", layout[600] = "";
  int maxw = 1;
  shoal__live_place_str(p, nodes, sizeof nodes);
  for (int i = 0; i < p->n; i++)
    if (p->gpus[i] > maxw) maxw = p->gpus[i];
  if (part[0] && strcmp(part, own)) snprintf(move, sizeof move, "update JobId=%ld Partition=%s\n", id, part);
  if (p->servers) {
    char c[512];
    int rc = comment_with_layout(comment ? comment : "", p, c, sizeof c);
    if (rc) return rc;
    snprintf(layout, sizeof layout, "update JobId=%ld Comment=%s\n", id, c);
  }
  size_t cap = strlen(nodes) + strlen(move) + strlen(layout) + 256;
  char *in = malloc(cap);
  if (!in) return shoal__seterr(SHOAL_ERR_NOMEM, "scontrol: out of memory");
  snprintf(in, cap, "%s%supdate JobId=%ld NumNodes=%d-%d NumTasks=%d NumCPUs=%d ReqNodeList=%s Gres=gpu:%d "
           "StartTime=now\nrelease %ld\n", move, layout, id, p->n, p->n, p->n, p->n, nodes, maxw, id);
  const char *argv[] = {"scontrol", "-Q", NULL};
  int rc = run(NULL, in, argv);
  free(in);
  return rc;
}

static int sl_start(void *impl, long id, const shoal_live_place_t *p) {
  char part[SHOAL_LIVE_NAME] = "", comment[512] = "";
  int rc = 0, restarted = 0;
  { /* its comment (a ps job's layout goes into it) and whether it ran before */
    shoal_live_jobs_t jobs = {0, NULL};
    const shoal_live_job_t *j = (rc = sl_jobs(impl, &jobs)) ? NULL : shoal__live_jobs_find(&jobs, id);
    if (j) snprintf(comment, sizeof comment, "%s", j->comment), restarted = j->restarts > 0;
    shoal__live_jobs_free(&jobs);
    if (!rc && !j) rc = shoal__seterr(SHOAL_ERR_NOT_FOUND, "slurm: no job %ld", id);
  }
  if (!rc && p->n > 1) rc = partition_for(impl, id, "", p, part, sizeof part);
  if (!rc && restarted) past_the_revocation_second();
  return rc ? rc : start_in(id, "", part, comment, p);
}

static int sl_stop(void *impl, long id, shoal_live_stop_t how) {
  (void)impl;
  char job[48];
  snprintf(job, sizeof job, how == SHOAL_LIVE_STOP_KILL_TASKS ? "%ld.0" : "%ld", id);
  const char *ck[] = {"scancel", "--signal=USR1", "--batch", job, NULL}, *kill[] = {"scancel", "--signal=KILL", job, NULL};
  return run(NULL, NULL, how == SHOAL_LIVE_STOP_CHECKPOINT ? ck : kill);
}

static int scontrol_job(const char *verb, long id) {
  char job[32];
  snprintf(job, sizeof job, "%ld", id);
  const char *argv[] = {"scontrol", verb, job, NULL};
  return run(NULL, NULL, argv);
}

static int sl_requeue(void *impl, long id) { return (void)impl, scontrol_job("requeuehold", id); }
static int sl_hold(void *impl, long id) { return (void)impl, scontrol_job("hold", id); }
static int sl_release(void *impl, long id) { return (void)impl, scontrol_job("release", id); }


/* the job pending and held again after its requeue (its run ended: Slurm signalled it, waited KillWait, cleaned
 * up), at most SHOAL_LIVE_SLURM_GROW_WAIT_S */
static int wait_requeued(void *impl, long id) {
  char last[32] = "?";
  for (double waited = 0; waited < SHOAL_LIVE_SLURM_GROW_WAIT_S; waited += 0.2) {
    shoal_live_jobs_t jobs = {0, NULL};
    int rc = sl_jobs(impl, &jobs);
    const shoal_live_job_t *j = rc ? NULL : shoal__live_jobs_find(&jobs, id);
    /* (PENDING itself: REQUEUE_HOLD is said while the old run still ends, and a release then races its end) */
    int done = j && j->run == SHOAL_LIVE_PENDING && !strcmp(j->state, "PENDING") && j->held && j->nuse == 0;
    if (j) snprintf(last, sizeof last, "%s", j->state);
    shoal__live_jobs_free(&jobs);
    if (done) return 0;
    if (!j && !rc) return shoal__seterr(SHOAL_ERR_NOT_FOUND, "slurm: job %ld vanished during its grow", id);
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return shoal__seterr(SHOAL_ERR_TIMEOUT, "slurm: job %ld still %s %d s after its requeue for a grow", id, last,
                       SHOAL_LIVE_SLURM_GROW_WAIT_S);
}

/* Grow: Slurm adds no node to a running job's tasks (its own expansion, permit_job_expansion, only merges
 * allocations: the tasks must be restarted anyway). So the partition that holds all the new nodes is found first
 * (none: the job is left running, an error), then the job is requeued held (Slurm sends SIGTERM: `shoal train
 * --preemptible` checkpoints and exits 75 within KillWait) and started on them in that partition: it resumes
 * from its checkpoint at the new size. */
static int grow(void *impl, const shoal_live_job_t *j, const shoal_live_place_t *p) {
  char part[SHOAL_LIVE_NAME];
  int rc = partition_for(impl, j->id, j->partition, p, part, sizeof part);
  if (!rc) rc = scontrol_job("requeuehold", j->id);
  if (!rc) rc = wait_requeued(impl, j->id);
  if (!rc) past_the_revocation_second();
  return rc ? rc : start_in(j->id, j->partition, part, j->comment, p);
}

/* Run on each node of `drop` (a step of job id beside its running one, srun --overlap): every process of the
 * job's step 0 there gets USR2 (`shoal train --leavable` leaves after its current iteration; trainjob.sh's shell
 * ignores it), then the step waits until they are all gone, at most 15 s. */
#define LEAVE_SCRIPT                                                                                               \
  "p=$(scontrol listpids $SLURM_JOB_ID.0 | awk 'NR > 1 { print $1 }'); [ -n \"$p\" ] || exit 0; "               \
  "kill -USR2 $p 2>/dev/null; i=0; while [ $i -lt 1500 ]; do a=; for q in $p; do kill -0 $q 2>/dev/null && a=1; " \
  "done; [ -z \"$a\" ] && exit 0; sleep 0.01; i=$((i+1)); done; "                                                 \
  "echo \"$SLURMD_NODENAME: the task did not leave within 15 s (not shoal train --leavable?)\" >&2; exit 1"

/* Shrink in place at an iteration boundary: the job keeps the nodes of p (a subset of its own). Only a job whose
 * tasks leave on request (leave=1 in its comment; its step runs with --no-kill, batch_script): its tasks on the
 * other nodes are asked to leave and waited for (the others shrink and go on in the same processes), then the
 * job gives those nodes back (NodeList). Another job, or one that would lose its first node (rank 0: the
 * rendezvous), is SHOAL_ERR_UNSUPPORTED, nothing done (the controller shrinks it by a checkpoint and a restart):
 * Slurm would kill the tasks of a step that fails whole (--kill-on-bad-exit), losing the work since the job's
 * last checkpoint. */
static int shrink(long id, const shoal_live_job_t *j, const shoal_live_place_t *p) {
  char drop[8192] = "", keep[8192];
  int ndrop = 0, first_kept = 0;
  for (int k = 0; k < j->nuse; k++) {
    int kept = 0;
    for (int i = 0; i < p->n; i++) kept |= !strcmp(j->use[k].node, p->node[i]);
    if (k == 0) first_kept = kept;
    if (!kept) snprintf(drop + strlen(drop), sizeof drop - strlen(drop), "%s%s", ndrop++ ? "," : "", j->use[k].node);
  }
  if (!shoal__live_params_leaves(j->comment))
    return shoal__seterr(SHOAL_ERR_UNSUPPORTED, "slurm: job %ld: its tasks do not leave on request (shoal submit "
                         "--leavable): no shrink in place", id);
  if (!first_kept)
    return shoal__seterr(SHOAL_ERR_UNSUPPORTED, "slurm: job %ld: a shrink in place keeps its first node %s (rank 0, "
                         "the rendezvous)", id, j->nuse ? j->use[0].node : "?");
  shoal__live_place_str(p, keep, sizeof keep);
  if (ndrop == 0) return 0;
  char job[32], n[16];
  snprintf(job, sizeof job, "--jobid=%ld", id);
  snprintf(n, sizeof n, "%d", ndrop);
  const char *argv[] = {"srun", job, "--overlap", "--quiet", "--kill-on-bad-exit=0", "-N", n, "-n", n,
                        "--ntasks-per-node=1", "-w", drop, "sh", "-c", LEAVE_SCRIPT, NULL};
  int rc = run(NULL, NULL, argv);
  return rc ? rc : update_field(id, "NodeList", keep);
}

/* A subset of the job's nodes is a shrink in place (above); anything else a grow (by a restart, above). */
static int sl_resize(void *impl, long id, const shoal_live_place_t *p) {
  shoal_live_jobs_t jobs = {0, NULL};
  int rc = sl_jobs(impl, &jobs);
  if (rc) return rc;
  const shoal_live_job_t *j = shoal__live_jobs_find(&jobs, id);
  int running = j && j->run == SHOAL_LIVE_RUNNING && p->n > 0, subset = running && p->n <= j->nuse;
  for (int i = 0; subset && i < p->n; i++) {
    int found = 0;
    for (int k = 0; k < j->nuse; k++) found |= !strcmp(j->use[k].node, p->node[i]);
    subset = found;
  }
  if (!running) rc = shoal__seterr(SHOAL_ERR_INVALID, "slurm: job %ld: not running: nothing to resize", id);
  else rc = subset ? shrink(id, j, p) : grow(impl, j, p);
  shoal__live_jobs_free(&jobs);
  return rc;
}

static int sl_claim(void *impl, long id, const char *claim) {
  (void)impl;
  return update_field(id, "AdminComment", claim);
}

/* ---- the lease: beacon jobs ---- */

typedef struct beacon {
  long id;
  char holder[128], where[256];
  double renewed, ttl;
} beacon_t;

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* "renewed=T;ttl=S;where=..." of a beacon's AdminComment */
static void read_renewal(const shoal_live_job_t *j, beacon_t *b) {
  b->renewed = j->submit_time;
  b->ttl = 60;
  const char *r = strstr(j->claim, "renewed="), *t = strstr(j->claim, ";ttl="), *w = strstr(j->claim, ";where=");
  if (r) b->renewed = atof(r + 8);
  if (t) b->ttl = atof(t + 5);
  if (w) snprintf(b->where, sizeof b->where, "%s", w + 7);
}

/* the live beacons of a scope, in job id order */
static int beacons(void *impl, const char *scope, beacon_t **out, int *n) {
  shoal_live_jobs_t jobs = {0, NULL};
  int rc = sl_jobs(impl, &jobs);
  if (rc) return rc;
  char tag[160];
  snprintf(tag, sizeof tag, LEASE_TAG "%s:", scope);
  *n = 0;
  *out = calloc((size_t)(jobs.n ? jobs.n : 1), sizeof **out);
  if (!*out) rc = shoal__seterr(SHOAL_ERR_NOMEM, "lease: out of memory");
  for (int i = 0; !rc && i < jobs.n; i++) {
    const shoal_live_job_t *j = &jobs.job[i];
    if (strcmp(j->name, LEASE_NAME) || strncmp(j->comment, tag, strlen(tag)) || j->run == SHOAL_LIVE_ENDED) continue;
    beacon_t *b = &(*out)[(*n)++];
    b->id = j->id;
    snprintf(b->holder, sizeof b->holder, "%s", j->comment + strlen(tag));
    read_renewal(j, b);
  }
  shoal__live_jobs_free(&jobs);
  for (int a = 1; !rc && a < *n; a++) /* (squeue's order is not promised) */
    for (int b = a; b > 0 && (*out)[b - 1].id > (*out)[b].id; b--) {
      beacon_t t = (*out)[b];
      (*out)[b] = (*out)[b - 1], (*out)[b - 1] = t;
    }
  return rc;
}

static int renew(long id, const char *where, double ttl) {
  char v[512];
  snprintf(v, sizeof v, "renewed=%.3f;ttl=%.0f;where=%.300s", wall_now(), ttl, where);
  return update_field(id, "AdminComment", v);
}

static int submit_beacon(const char *scope, const char *me, long *id) {
  char comment[256], *out = NULL;
  snprintf(comment, sizeof comment, LEASE_TAG "%s:%s", scope, me);
  const char *argv[] = {"sbatch", "--hold", "--parsable", "--job-name", LEASE_NAME, "--comment", comment, "--output",
                        "/dev/null", "--wrap", "true", NULL, NULL, NULL};
  char part[96];
  if (strcmp(scope, "all")) snprintf(part, sizeof part, "--partition=%s", scope), argv[11] = part;
  int rc = run(&out, NULL, argv);
  if (!rc) *id = atol(out);
  free(out);
  return rc ? rc : *id > 0 ? 0 : shoal__seterr(SHOAL_ERR_IO, "sbatch gave no job id for the lease beacon");
}

static void cancel(long id) {
  char job[32];
  snprintf(job, sizeof job, "%ld", id);
  const char *argv[] = {"scancel", job, NULL};
  run(NULL, NULL, argv);
}

static int busy(const beacon_t *b, shoal_live_lease_t *holder, const char *scope) {
  if (holder) {
    snprintf(holder->holder, sizeof holder->holder, "%s", b->holder);
    snprintf(holder->where, sizeof holder->where, "%s", b->where);
    holder->renewed = b->renewed, holder->ttl = b->ttl;
  }
  return shoal__seterr(SHOAL_ERR_ADDR_IN_USE, "lease %s is held by %s", scope, b->holder);
}

/* the lowest-id live beacon of a holder other than `me` (NULL: none) and `me`'s own lowest (NULL: none) */
static void pick(beacon_t *b, int n, const char *me, double now, const beacon_t **other, const beacon_t **mine) {
  *other = *mine = NULL;
  for (int i = 0; i < n; i++) {
    if (!strcmp(b[i].holder, me)) {
      if (!*mine) *mine = &b[i];
    } else if (!*other && now - b[i].renewed < b[i].ttl) *other = &b[i];
  }
}

static int lease_take(void *impl, const char *scope, const char *me, const char *where, double ttl,
                      shoal_live_lease_t *holder) {
  beacon_t *b = NULL;
  int n = 0, rc = beacons(impl, scope, &b, &n);
  const beacon_t *other, *mine;
  double now = wall_now();
  if (!rc) pick(b, n, me, now, &other, &mine);
  if (!rc && mine && other && (now - mine->renewed >= mine->ttl || other->id < mine->id)) rc = busy(other, holder, scope);
  else if (!rc && !mine && other) rc = busy(other, holder, scope);
  else if (!rc && mine) rc = renew(mine->id, where, ttl);
  else if (!rc) {
    long id = 0;
    if (!(rc = submit_beacon(scope, me, &id)) && !(rc = renew(id, where, ttl))) {
      free(b), b = NULL;
      /* another controller's beacon that came first wins */
      if (!(rc = beacons(impl, scope, &b, &n))) pick(b, n, me, wall_now(), &other, &mine);
      if (!rc && other && other->id < id) {
        cancel(id);
        rc = busy(other, holder, scope);
      }
    }
  }
  for (int i = 0; !rc && i < n; i++) /* the lease holds: beacons that ran out, and extra ones of ours, go */
    if ((strcmp(b[i].holder, me) && now - b[i].renewed >= b[i].ttl) || (!strcmp(b[i].holder, me) && mine && b[i].id != mine->id))
      cancel(b[i].id);
  free(b);
  return rc;
}

static int sl_lease(void *impl, const char *scope, const char *me, const char *where, double ttl_s, int mode,
                    shoal_live_lease_t *holder) {
  if (mode == SHOAL_LIVE_LEASE_TAKE) return lease_take(impl, scope, me, where, ttl_s, holder);
  beacon_t *b = NULL;
  int n = 0, rc = beacons(impl, scope, &b, &n);
  if (rc) return rc;
  if (holder) memset(holder, 0, sizeof *holder);
  double now = wall_now();
  for (int i = 0; i < n; i++) {
    if (mode == SHOAL_LIVE_LEASE_GIVE && !strcmp(b[i].holder, me)) cancel(b[i].id);
    if (mode == SHOAL_LIVE_LEASE_PEEK && now - b[i].renewed < b[i].ttl && holder && !holder->holder[0]) busy(&b[i], holder, scope);
  }
  free(b);
  return 0;
}

/* ---- accounting ---- */

static int sl_shares(void *impl, shoal_live_shares_t *out) {
  (void)impl;
  char *text = NULL;
  const char *argv[] = {"sshare", "-a", "-n", "-P", "-o", "Account,User,RawShares,NormShares,EffectvUsage,FairShare", NULL};
  int rc = run(&text, NULL, argv);
  if (rc) {
    free(text);
    return shoal__seterr(SHOAL_ERR_UNSUPPORTED, "no fair shares from Slurm (%s)", shoal_last_error());
  }
  rc = shoal__slurm_parse_shares(text, out);
  free(text);
  if (!rc && out->n == 0) {
    shoal__live_shares_free(out);
    return shoal__seterr(SHOAL_ERR_UNSUPPORTED, "sshare lists no associations (is accounting on?)");
  }
  return rc;
}

/* ---- submitting ---- */

/* single-quoted for sh; -1 if it does not fit */
static int shq(char *dst, size_t cap, const char *s) {
  size_t n = 0;
  if (cap < 3) return -1;
  dst[n++] = '\'';
  for (; *s; s++) {
    if (n + 6 >= cap) return -1;
    if (*s == '\'') memcpy(dst + n, "'\\''", 4), n += 4;
    else dst[n++] = *s;
  }
  dst[n++] = '\'';
  dst[n] = 0;
  return 0;
}

/* The batch script: srun runs the command once per node of the allocation; it forwards USR1 (the checkpoint
 * request) to the tasks and gives them the rendezvous: the allocation's first node, a port from the job id, and a
 * job identity per run (a rank left over from an earlier run of a requeued job cannot join the next one). A ps
 * job's comment has a layout= (start_in): one task per worker and per server instead, on the nodes it names (srun's
 * arbitrary distribution, a host file of one line per rank: the workers first, then the servers), with
 * SHOAL_PS_SERVERS set to the server count and the rendezvous on rank 0's node. A ps job started by Slurm itself
 * (no layout= in its comment, ps=S) runs one worker per node of its allocation and the servers round robin over
 * them, in node order. srun's status reaches the script through a file written by the subshell that runs it: the
 * USR1 trap ends the script's `wait` early, and when srun ends in that instant bash loses its status (the job
 * would end 138, taken for a failure, instead of the tasks' 75 or 0). A job whose comment has leave=1 (its tasks
 * leave on request: sl_resize's in-place shrink) runs its step with --no-kill and without --kill-on-bad-exit, so
 * the step goes on when the job gives back the nodes of the tasks that left. */
static int batch_script(const shoal_live_submit_t *req, char *script, size_t cap) {
  char cmd[8192], q[2048];
  size_t n = 0;
  cmd[0] = 0;
  for (int k = 0; k < req->argc; k++) {
    if (shq(q, sizeof q, req->argv[k])) return shoal__seterr(SHOAL_ERR_INVALID, "submit: argument %d too long", k + 1);
    n += (size_t)snprintf(cmd + n, n < sizeof cmd ? sizeof cmd - n : 0, " %s", q);
  }
  if (n >= sizeof cmd - 1) return shoal__seterr(SHOAL_ERR_INVALID, "submit: command too long");
  char env[2048] = "";
  for (size_t k = 0, e = 0; k < (size_t)req->envc; k++) {
    if (!strchr(req->env[k], '=') || shq(q, sizeof q, req->env[k]))
      return shoal__seterr(SHOAL_ERR_INVALID, "submit: environment word %zu is not NAME=VALUE or too long", k + 1);
    e += (size_t)snprintf(env + e, e < sizeof env ? sizeof env - e : 0, "export %s; ", q);
    if (e >= sizeof env) return shoal__seterr(SHOAL_ERR_INVALID, "submit: environment too long");
  }
  int k = snprintf(script, cap,
                   "%strap 'scancel --signal=USR1 $SLURM_JOB_ID.0 2>/dev/null' USR1; "
                   "export SHOAL_MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1) "
                   "SHOAL_MASTER_PORT=$((20000 + SLURM_JOB_ID %% 20000)) SHOAL_JOB_ID=slurm:$SLURM_JOB_ID.r${SLURM_RESTART_COUNT:-0}; "
                   "o=\"-N $SLURM_JOB_NUM_NODES -n $SLURM_JOB_NUM_NODES --ntasks-per-node=1\" hf=; "
                   "c=$(squeue -h -j $SLURM_JOB_ID -o %%k) l= s=0; "
                   "case $c in *:layout=*) l=${c##*:layout=}; l=${l%%%%:*};; esac; case $c in *:ps=*) s=${c##*:ps=}; s=${s%%%%:*};; esac; "
                   "if [ -n \"$l\" ]; then hf=${TMPDIR:-/tmp}/shoal-hosts.$SLURM_JOB_ID; : > $hf; s=0; "
                   "for e in $(echo $l | tr , ' '); do r=${e#*/}; i=0; while [ $i -lt ${r%%%%/*} ]; do echo ${e%%%%/*} >> $hf; i=$((i+1)); done; done; "
                   "for e in $(echo $l | tr , ' '); do i=0; while [ $i -lt ${e##*/} ]; do echo ${e%%%%/*} >> $hf; i=$((i+1)); done; s=$((s+${e##*/})); done; "
                   "elif [ \"$s\" -gt 0 ]; then hf=${TMPDIR:-/tmp}/shoal-hosts.$SLURM_JOB_ID; "
                   "scontrol show hostnames \"$SLURM_JOB_NODELIST\" > $hf; k=$(wc -l < $hf) i=0; "
                   "while [ $i -lt $s ]; do head -n $((i %% k + 1)) $hf | tail -n 1 >> $hf; i=$((i+1)); done; fi; "
                   "if [ -n \"$hf\" ]; then export SLURM_HOSTFILE=$hf SHOAL_PS_SERVERS=$s SHOAL_MASTER_ADDR=$(head -n 1 $hf); "
                   "o=\"-O -m arbitrary -n $(wc -l < $hf)\"; fi; "
                   "export MASTER_ADDR=$SHOAL_MASTER_ADDR MASTER_PORT=$SHOAL_MASTER_PORT; "
                   "st=${TMPDIR:-/tmp}/shoal-rc.$SLURM_JOB_ID; rm -f $st; "
                   "k=--kill-on-bad-exit=1; case $c in *:leave=1|*:leave=1:*) k='--no-kill --kill-on-bad-exit=0';; esac; "
                   "(trap '' USR1; srun $k $o%s; echo $? > $st) & p=$!; "
                   "while kill -0 $p 2>/dev/null; do wait $p; done; rc=$(cat $st 2>/dev/null); rm -f $st; "
                   "[ -n \"$hf\" ] && rm -f $hf; exit ${rc:-1}",
                   env, cmd);
  return k < 0 || (size_t)k >= cap ? shoal__seterr(SHOAL_ERR_INVALID, "submit: command too long") : 0;
}

static int sl_submit(void *impl, const shoal_live_submit_t *req, long *id) {
  (void)impl;
  char *script = malloc(12000), *out = NULL;
  if (!script) return shoal__seterr(SHOAL_ERR_NOMEM, "submit: out of memory");
  int rc = batch_script(req, script, 12000);
  char part[96], acct[96], outp[1100];
  const char *argv[24];
  int a = 0;
  argv[a++] = "sbatch", argv[a++] = "--parsable", argv[a++] = "--job-name", argv[a++] = req->name ? req->name : "shoal-job";
  if (req->hold) argv[a++] = "--hold";
  if (req->partition && req->partition[0]) snprintf(part, sizeof part, "--partition=%s", req->partition), argv[a++] = part;
  if (req->account && req->account[0]) snprintf(acct, sizeof acct, "--account=%s", req->account), argv[a++] = acct;
  if (req->output) snprintf(outp, sizeof outp, "--output=%s", req->output), argv[a++] = outp, argv[a++] = "--open-mode=append";
  argv[a++] = "--comment", argv[a++] = req->comment, argv[a++] = "--gres=gpu:1", argv[a++] = "--ntasks-per-node=1";
  argv[a++] = "--wrap", argv[a++] = script, argv[a] = NULL;
  if (!rc) rc = run(&out, NULL, argv);
  if (!rc && (*id = atol(out)) <= 0) rc = shoal__seterr(SHOAL_ERR_IO, "sbatch gave no job id (%s)", out);
  free(out);
  free(script);
  return rc;
}

static void sl_destroy(void *impl) {
  slurm_t *s = impl;
  if (!s) return;
  free(s->topo);
  free(s);
}

static const shoal_live_manager_ops_t slurm_ops = {
    .name = "slurm",
    .server = "slurmctld",
    .nodes = sl_nodes,
    .jobs = sl_jobs,
    .start = sl_start,
    .stop = sl_stop,
    .requeue = sl_requeue,
    .hold = sl_hold,
    .release = sl_release,
    .resize = sl_resize,
    .claim = sl_claim,
    .lease = sl_lease,
    .shares = sl_shares,
    .submit = sl_submit,
    .destroy = sl_destroy,
    .caps = SHOAL_LIVE_CAP_SHRINK | SHOAL_LIVE_CAP_GROW_RESTART | SHOAL_LIVE_CAP_SHARES,
};

int shoal__live_slurm_create(shoal_live_manager_t *out) {
  slurm_t *s = calloc(1, sizeof *s);
  if (!s) return shoal__seterr(SHOAL_ERR_NOMEM, "slurm: out of memory");
  out->ops = &slurm_ops;
  out->impl = s;
  return 0;
}
