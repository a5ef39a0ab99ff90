/* The controller's set-up, round and summary (ctl.c in ctl.h; live.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "core/clock.h"
#include "core/error.h"
#include "live/board.h"
#include "live/ctl.h"

void shoal__live_config_default(shoal_live_config_t *c) {
  memset(c, 0, sizeof *c);
  c->policy = "fifo";
  c->journal = "shoal-live.journal";
  c->gpu = "v100";
  c->tick = 0.5;
  c->grace = 5;
  c->restart_cost = 10;
  c->retries = 1;
  c->oversub = 1;
  c->nodes_every = 2;
  c->lease_ttl = 60;
  c->shares_every = 30;
  c->tenants = "account";
}

/* ---- the engine's hooks (policy.h) ---- */

static void hook_touch(void *arg, shoal_job_t *j) {
  shoal_live_ctl_t *L = arg;
  if (j->touched) return;
  shoal_alloc_t *pv = &L->prev[L->ntouched];
  *pv = j->alloc;
  pv->p = NULL;
  if (j->alloc.n) {
    pv->p = malloc((size_t)j->alloc.n * sizeof *pv->p);
    if (!pv->p) abort(); /* (the policy's change cannot be undone half-way) */
    memcpy(pv->p, j->alloc.p, (size_t)j->alloc.n * sizeof *pv->p);
  }
  L->touched[L->ntouched++] = j;
  j->touched = L->ntouched;
}

static int hook_timer(void *arg, double at, int64_t tag) {
  shoal_live_ctl_t *L = arg;
  if (L->ntimers == (int)(sizeof L->timers / sizeof L->timers[0]))
    return shoal__seterr(SHOAL_ERR_NOMEM, "live: too many pending timers");
  L->timers[L->ntimers].at = at;
  L->timers[L->ntimers].tag = tag;
  L->ntimers++;
  return 0;
}

/* ---- set-up ---- */

static void copy_config(shoal_live_ctl_t *L, const shoal_live_config_t *cfg) {
  L->cfg = *cfg;
  snprintf(L->policy_s, sizeof L->policy_s, "%s", cfg->policy ? cfg->policy : "fifo");
  snprintf(L->journal_s, sizeof L->journal_s, "%s", cfg->journal ? cfg->journal : "shoal-live.journal");
  snprintf(L->partition_s, sizeof L->partition_s, "%s", cfg->partition ? cfg->partition : "");
  snprintf(L->accounts_s, sizeof L->accounts_s, "%s", cfg->accounts ? cfg->accounts : "");
  snprintf(L->tenants_s, sizeof L->tenants_s, "%s", cfg->tenants ? cfg->tenants : "account");
  L->cfg.policy = L->policy_s, L->cfg.journal = L->journal_s;
  L->cfg.partition = L->partition_s, L->cfg.accounts = L->accounts_s, L->cfg.tenants = L->tenants_s;
  if (!(L->cfg.tick > 0)) L->cfg.tick = 0.5;
  if (!(L->cfg.lease_ttl > 0)) L->cfg.lease_ttl = 60;
  if (!(L->cfg.nodes_every > 0)) L->cfg.nodes_every = 2;
  L->log = cfg->log ? cfg->log : stdout;
}

/* The controller's identity: given, or the journal's, or from the host and the journal's path (a restart on the
 * same journal is the same controller, even when the journal is damaged). */
static void make_identity(shoal_live_ctl_t *L) {
  char host[256] = "?", path[4096];
  gethostname(host, sizeof host - 1);
  if (!realpath(L->journal_s, path)) snprintf(path, sizeof path, "%s", L->journal_s);
  if (L->cfg.id && L->cfg.id[0]) snprintf(L->id, sizeof L->id, "%s", L->cfg.id);
  else if (L->replay.id[0]) snprintf(L->id, sizeof L->id, "%s", L->replay.id);
  else {
    char both[4400];
    snprintf(both, sizeof both, "%s:%s", host, path);
    snprintf(L->id, sizeof L->id, "ctl-%08lx", crc32(crc32(0L, Z_NULL, 0), (const Bytef *)both, (uInt)strlen(both)));
  }
  snprintf(L->scope, sizeof L->scope, "%s", L->partition_s[0] ? L->partition_s : "all");
  snprintf(L->claim, sizeof L->claim, "shoal-ctl=%s;scope=%s", L->id, L->scope);
  snprintf(L->where, sizeof L->where, "host %s pid %d journal %.160s", host, (int)getpid(), path);
}

/* The policy and the speed model, checked on a one-machine cluster before anything is read or written: a wrong
 * name or parameter leaves no journal behind. */
static int check_policy(shoal_live_ctl_t *L, char *pname, size_t cap, const char **params) {
  snprintf(pname, cap, "%s", L->policy_s);
  char *colon = strchr(pname, ':');
  *params = "";
  if (colon) *colon = 0, *params = strchr(L->policy_s, ':') + 1;
  L->ops = shoal__policy_find(pname);
  if (!L->ops) return shoal__seterr(SHOAL_ERR_CONFIG, "policy '%s': no such policy (see shoal sim --help)", pname);
  int rc = L->cfg.throughputs ? shoal__speed_table_create(L->cfg.throughputs, L->cfg.gpu ? L->cfg.gpu : "v100",
                                                          !L->cfg.raw_spread, &L->speed)
                              : shoal__speed_analytic_create(&L->speed);
  if (rc) return rc;
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  cs.ngroups = 1, cs.group[0].machines = 1, cs.group[0].racks = 1;
  shoal_cluster_t *c = NULL;
  shoal_sched_t s;
  memset(&s, 0, sizeof s);
  void *st = NULL;
  if (!(rc = shoal__cluster_create(&cs, &c)) && !(rc = shoal__sched_init(&s, c, L->speed, 4)))
    rc = L->ops->create(&s, *params, &st); /* (its message names the policy) */
  if (st) L->ops->destroy(st);
  if (s.cluster) shoal__sched_fini(&s);
  shoal__cluster_destroy(c);
  return rc;
}

/* "job 12 (user ann, running on h1,h2); ..." of the jobs the manager shows started in this controller's scope */
static void running_jobs(shoal_live_ctl_t *L, const shoal_live_jobs_t *jobs, char *buf, size_t cap, int *n) {
  size_t k = 0;
  *n = 0;
  buf[0] = 0;
  for (int i = 0; i < jobs->n && k < cap; i++) {
    const shoal_live_job_t *mj = &jobs->job[i];
    if (!shoal__live_params_tagged(mj->comment) || mj->run == SHOAL_LIVE_ENDED || mj->held) continue;
    if (L->partition_s[0] && strcmp(mj->partition, L->partition_s)) continue;
    char where[256] = "released, not started";
    size_t w = 0;
    for (int u = 0; u < mj->nuse && w < sizeof where; u++)
      w += (size_t)snprintf(where + w, sizeof where - w, "%s%s", u ? "," : "running on ", mj->use[u].node);
    k += (size_t)snprintf(buf + k, cap - k, "%sjob %ld (user %s, %s)", *n ? "; " : "", mj->id, mj->user, where);
    (*n)++;
  }
}

/* Damage in the journal: said with file, line and the running jobs the controller can no longer vouch for;
 * refused unless recovering. */
static int journal_damage(shoal_live_ctl_t *L, const shoal_live_journal_scan_t *sc) {
  char first[512] = "", jobs[2048] = "";
  int nrun = 0;
  for (int i = 0; i < sc->ndamage && i < 3; i++) {
    size_t k = strlen(first);
    snprintf(first + k, sizeof first - k, "%sjournal %s:%d: %s", i ? "; " : "", L->journal_s, sc->damage[i].line,
             sc->damage[i].what);
  }
  shoal_live_jobs_t view = {0, NULL};
  if (L->mgr.ops->jobs(L->mgr.impl, &view) == 0) running_jobs(L, &view, jobs, sizeof jobs, &nrun);
  else snprintf(jobs, sizeof jobs, "unknown: the manager does not answer (%s)", shoal_last_error()), nrun = -1;
  shoal__live_jobs_free(&view);
  char msg[3000];
  snprintf(msg, sizeof msg, "%s%s (%d damaged record%s); the running jobs it can no longer vouch for: %s", first,
           sc->ndamage > 3 ? "; ..." : "", sc->ndamage, sc->ndamage == 1 ? "" : "s", nrun ? jobs : "none");
  /* (nrun -1: the manager's answer is missing, said in jobs) */
  if (!L->cfg.recover)
    return shoal__seterr(SHOAL_ERR_PARSE, "%s. Refusing to act on a partial state: start with --recover to keep the "
                         "valid records and adopt those jobs from the manager's records", msg);
  live_log(L, "%s; recovering (--recover): the valid records are kept, those jobs are adopted from the manager", msg);
  return 0;
}

/* the journal read (not yet opened): identity, epoch, and its damage said or refused */
static int read_journal(shoal_live_ctl_t *L, shoal_live_journal_scan_t *sc) {
  int rc = shoal__live_replay(L->journal_s, &L->replay, sc);
  if (rc) return rc;
  make_identity(L);
  if (L->replay.epoch > 0) L->epoch = L->replay.epoch;
  if (sc->ndamage && (rc = journal_damage(L, sc))) return rc;
  if (sc->torn_line)
    live_log(L, "journal %s:%d: its last record was cut (a crash while it was written): dropped; its action was "
             "never taken", L->journal_s, sc->torn_line);
  return 0;
}

/* the journal locked (nothing written yet: a refused start leaves no journal behind; nothing in a dry run) */
static int lock_journal(shoal_live_ctl_t *L) {
  if (L->cfg.dry_run) return 0;
  return shoal__live_journal_open(L->journal_s, &L->journal_created, &L->journal);
}

/* ready to append: torn tail cut, damage rewritten, identity recorded */
static int prepare_journal(shoal_live_ctl_t *L, const shoal_live_journal_scan_t *sc) {
  if (!L->journal) return 0;
  int rc = sc->torn_line && !sc->ndamage ? shoal__live_journal_truncate(L->journal, sc->valid_end) : 0;
  if (rc) return rc;
  if (sc->ndamage) {
    char saved[4200];
    rc = shoal__live_journal_rewrite(L->journal, (const char *const *)L->replay.payload, L->replay.npayload, saved,
                                     sizeof saved);
    if (rc) return rc;
    live_log(L, "journal %s: rewritten with its %d valid records; the damaged one kept as %s", L->journal_s,
             L->replay.npayload, saved);
  }
  if (!L->replay.id[0]) rc = shoal__live_journal_append(L->journal, "ctl %s epoch %.3f", L->id, L->epoch);
  L->journal_created = 0;
  return rc;
}

static int take_lease(shoal_live_ctl_t *L) {
  if (L->cfg.dry_run) return 0;
  shoal_live_lease_t h;
  memset(&h, 0, sizeof h);
  int rc = L->mgr.ops->lease(L->mgr.impl, L->scope, L->id, L->where, L->cfg.lease_ttl, SHOAL_LIVE_LEASE_TAKE, &h);
  if (rc == SHOAL_ERR_UNSUPPORTED) return 0;
  if (rc == SHOAL_ERR_ADDR_IN_USE)
    return shoal__seterr(rc, "%s%s is served by controller %s (%s; its lease renewed %.0f s ago, good for %.0f s): "
                         "one controller per partition; stop it first, or wait for its lease to run out",
                         L->partition_s[0] ? "partition " : "the cluster", L->partition_s,
                         h.holder, h.where, live_wall(L) - h.renewed, h.ttl);
  if (rc) return shoal__seterr(rc, "the lease of %s cannot be taken: %s", L->scope, shoal_last_error());
  L->lease_held = 1;
  L->lease_next = live_wall(L) + L->cfg.lease_ttl / 4;
  return 0;
}

static int setup_policy(shoal_live_ctl_t *L, const char *params) {
  int rc = shoal__sched_init(&L->s, L->c, L->speed, 256);
  if (rc) return rc;
  L->s.hooks.touch = hook_touch;
  L->s.hooks.timer = hook_timer;
  L->s.engine = L;
  L->s.nvcs = L->tenant_room;
  L->s.vc_weight = L->tenant_w;
  L->s.restart_cost = L->cfg.restart_cost;
  if ((rc = L->ops->create(&L->s, params, &L->pstate))) return rc;
  L->s.events = SHOAL_EV_START;
  return 0;
}

int shoal__live_ctl_create(const shoal_live_config_t *cfg, shoal_live_manager_t mgr, shoal_live_ctl_t **out) {
  shoal_live_ctl_t *L = calloc(1, sizeof *L);
  if (!L) return shoal__seterr(SHOAL_ERR_NOMEM, "live: out of memory");
  copy_config(L, cfg);
  L->mgr = mgr;
  L->epoch = floor(live_wall(L));
  char pname[128];
  const char *params;
  shoal_live_journal_scan_t sc;
  shoal_live_nodes_t nodes = {0, NULL};
  int rc = check_policy(L, pname, sizeof pname, &params);
  if (!rc) rc = read_journal(L, &sc);
  if (!rc) rc = lock_journal(L);
  if (!rc) rc = take_lease(L);
  if (!rc && (rc = L->mgr.ops->nodes(L->mgr.impl, &nodes)))
    rc = shoal__seterr(rc, "the manager's nodes cannot be read: %s", shoal_last_error());
  if (!rc) rc = live_nodes_first(L, &nodes);
  shoal__live_nodes_free(&nodes);
  if (!rc) rc = live_tenants_read(L);
  if (!rc) rc = setup_policy(L, params);
  if (!rc) rc = live_lend_setup(L);
  if (!rc) rc = prepare_journal(L, &sc);
  if (rc) {
    shoal__live_ctl_destroy(L);
    return rc;
  }
  char cdesc[256];
  shoal__cluster_describe(L->c, cdesc, sizeof cdesc);
  live_log(L, "serving with policy %s on %d %s nodes (%s)%s%s; controller %s; journal %s", L->ops->name, L->nnodes,
           L->mgr.ops->name, cdesc, L->partition_s[0] ? ", partition " : "", L->partition_s, L->id, L->journal_s);
  *out = L;
  return 0;
}

/* ---- the round ---- */

static void utc(double t, char *buf, size_t cap) {
  time_t tt = (time_t)t;
  struct tm tm;
  gmtime_r(&tt, &tm);
  strftime(buf, cap, "%H:%M:%S UTC", &tm);
}

/* A read of the jobs slower than this: the manager is slow or restarting. squeue answers in about 0.1 s; an outage
 * shorter than Slurm's client retries (MessageTimeout, 10 s by default) makes it slow rather than failing. */
#define LIVE_SLOW_READ_S 3.0

/* a read of the manager's jobs that took from t0 to t1: a slow one is said (at most once a minute, with how many
 * there were), since nothing else marks an outage that the manager's clients retried through */
static void slow_read(shoal_live_ctl_t *L, double t0, double t1) {
  if (t1 - t0 < LIVE_SLOW_READ_S) return;
  L->slow_reads++;
  if (L->slow_said > 0 && t1 < L->slow_said + 60) return;
  char from[32], to[32], who[64];
  utc(t0, from, sizeof from);
  utc(t1, to, sizeof to);
  if (L->mgr.ops->server) snprintf(who, sizeof who, "%s", L->mgr.ops->server);
  else snprintf(who, sizeof who, "the %s manager", L->mgr.ops->name);
  live_log(L, "reading the %s manager's jobs took %.1f s (%s to %s): %s slow or restarting; no decision was taken "
           "meanwhile; slow reads since the last such line: %d", L->mgr.ops->name, t1 - t0, from, to, who,
           L->slow_reads);
  L->slow_said = t1;
  L->slow_reads = 0;
}

/* the manager's jobs; 1 if it does not answer: said at once (with the actions that had just failed), then once a
 * minute, and when it answers again (how long, how many reads were retried, the failed actions retried now) */
static int look(shoal_live_ctl_t *L) {
  shoal__live_jobs_free(&L->view);
  double now = live_wall(L);
  char since[32];
  if (L->mgr.ops->jobs(L->mgr.impl, &L->view)) {
    const char *name = L->mgr.ops->name;
    if (L->down_since == 0) {
      L->down_since = L->down_said = now;
      L->down_reads = 0;
      utc(now, since, sizeof since);
      live_log(L, "the %s manager does not answer (%s) since %s; its jobs are read again every tick, no decision is "
               "taken until it answers; %d of its actions failed since the last good read", name, shoal_last_error(),
               since, L->act_failed - L->act_failed_ok);
    } else if (now >= L->down_said + 60) {
      L->down_said = now;
      live_log(L, "the %s manager still does not answer (%s) after %.0f s; %d reads of its jobs retried", name,
               shoal_last_error(), now - L->down_since, L->down_reads);
    }
    L->down_reads++;
    return 1;
  }
  slow_read(L, now, live_wall(L));
  if (L->down_since > 0) {
    char until[32];
    utc(L->down_since, since, sizeof since);
    utc(now, until, sizeof until);
    live_log(L, "the %s manager answers again after %.1f s (%s to %s): %d reads of its jobs retried; %d failed actions "
             "are retried now; no decision was taken meanwhile", L->mgr.ops->name, now - L->down_since, since, until,
             L->down_reads, L->act_failed - L->act_failed_ok);
  }
  L->down_since = 0;
  L->act_failed_ok = L->act_failed;
  return 0;
}

/* nodes every few seconds (they change rarely), the lease renewed every quarter of its life, the fair shares
 * every --shares-every s */
static int periodic(shoal_live_ctl_t *L) {
  double w = live_wall(L);
  if (w >= L->nodes_next) {
    shoal_live_nodes_t nodes = {0, NULL};
    if (L->mgr.ops->nodes(L->mgr.impl, &nodes) == 0) {
      live_nodes_update(L, &nodes);
      L->nodes_next = w + L->cfg.nodes_every;
    }
    shoal__live_nodes_free(&nodes);
  }
  if (L->lease_held && w >= L->lease_next) {
    shoal_live_lease_t h;
    memset(&h, 0, sizeof h);
    int rc = L->mgr.ops->lease(L->mgr.impl, L->scope, L->id, L->where, L->cfg.lease_ttl, SHOAL_LIVE_LEASE_TAKE, &h);
    if (rc == SHOAL_ERR_ADDR_IN_USE) {
      live_log(L, "lost the lease of %s to controller %s (%s): this controller stops acting", L->scope, h.holder, h.where);
      L->lease_held = 0;
      return shoal__seterr(rc, "lost the lease of %s to controller %s", L->scope, h.holder);
    }
    if (rc == 0) L->lease_next = w + L->cfg.lease_ttl / 4;
  }
  live_tenants_refresh(L);
  return 0;
}

/* jobs on nodes that went down, drained or stopped responding: stopped, placed elsewhere */
static void leave_bad_nodes(shoal_live_ctl_t *L) {
  for (int i = 0; i < L->s.nactive; i++) {
    shoal_job_t *j = L->s.active[i];
    for (int k = 0; k < j->alloc.n; k++)
      if (!L->usable[j->alloc.p[k].machine]) {
        lj_t *x = L->jobs[j->id];
        live_log(L, "job %ld runs on node %s, which is %s: requeued", x->sid, L->node[j->alloc.p[k].machine],
                 L->drain[j->alloc.p[k].machine] ? "drained" : "unusable");
        if (x->phase == PH_RELEASED) live_stop(L, x, "drain");
        live_forced_off(L, x, 1);
        i--; /* forced_off moved j to the end of the active set */
        break;
      }
  }
}

void shoal__live_ctl_publish(shoal_live_ctl_t *L, struct shoal_live_board *board) { L->board = board; }
const char *shoal__live_ctl_id(const shoal_live_ctl_t *L) { return L->id; }

static void publish(shoal_live_ctl_t *L) {
  if (!L->board) return;
  size_t cap = 1 << 18;
  char *st = malloc(cap), *me = malloc(cap);
  if (st && me) {
    if (shoal__live_ctl_status(L, st, cap)) snprintf(st + cap - 32, 32, "\n... (cut)\n");
    if (shoal__live_ctl_metrics(L, me, cap)) me[0] = 0;
    shoal__live_board_set(L->board, st, me);
  }
  free(st);
  free(me);
}

static int round_(shoal_live_ctl_t *L);

int shoal__live_ctl_tick(shoal_live_ctl_t *L) {
  int rc = round_(L);
  publish(L);
  return rc;
}

static int round_(shoal_live_ctl_t *L) {
  L->ticks++;
  if (look(L)) return 0;
  int rc = periodic(L);
  if (rc) return rc;
  L->s.now = live_wall(L) - L->epoch;
  for (int i = 0; i < L->s.nactive; i++) live_advance(L, L->s.active[i]);
  if ((rc = live_arrivals(L))) return rc;
  live_nodes_foreign(L);
  live_nodes_block(L);
  live_observe(L);
  leave_bad_nodes(L);
  live_nodes_block(L);
  if (!L->fatal && (rc = live_decide(L))) return rc;
  if (L->fatal) return shoal__seterr(SHOAL_ERR_IO, "the controller stopped acting (see its log)");
  live_lend(L);
  return 0;
}

void shoal__live_ctl_counts(const shoal_live_ctl_t *L, int *seen, int *ended) {
  *seen = *ended = 0;
  for (int i = 0; i < L->njobs; i++) {
    if (L->jobs[i]->ignored) continue;
    (*seen)++;
    *ended += L->jobs[i]->phase == PH_DONE;
  }
}

int shoal__live_ctl_serve(shoal_live_ctl_t *L, int until_done, double max_time, volatile sig_atomic_t *stop) {
  double t_end = max_time > 0 ? shoal__now_s() + max_time : 0;
  while (!stop || !*stop) {
    int rc = shoal__live_ctl_tick(L);
    if (rc) return rc;
    int seen, ended;
    shoal__live_ctl_counts(L, &seen, &ended);
    if (until_done > 0 && ended >= until_done) return 0;
    if (t_end > 0 && shoal__now_s() > t_end) {
      live_log(L, "--max-time reached with %d of %d jobs ended", ended, seen);
      return shoal__seterr(SHOAL_ERR_TIMEOUT, "--max-time reached with %d of %d jobs ended", ended, seen);
    }
    shoal__sleep_s(L->cfg.tick);
  }
  return 0;
}

void shoal__live_ctl_destroy(shoal_live_ctl_t *L) {
  if (L && L->lease_held) L->mgr.ops->lease(L->mgr.impl, L->scope, L->id, L->where, 0, SHOAL_LIVE_LEASE_GIVE, NULL);
  shoal__live_ctl_abandon(L);
}

void shoal__live_ctl_abandon(shoal_live_ctl_t *L) {
  if (!L) return;
  if (L->pstate) L->ops->destroy(L->pstate);
  live_lend_free(L);
  shoal__live_journal_close_unused(L->journal, L->journal_created);
  for (int i = 0; i < L->njobs; i++) {
    free(L->jobs[i]->j.alloc.p);
    free(L->jobs[i]->want);
    free(L->jobs[i]->loan_node);
    free(L->jobs[i]->loan_gpus);
    free(L->jobs[i]);
  }
  free(L->jobs);
  free(L->touched);
  free(L->prev);
  shoal__live_jobs_free(&L->view);
  shoal__live_replay_free(&L->replay);
  if (L->s.active) shoal__sched_fini(&L->s);
  if (L->speed) shoal__speed_destroy(L->speed);
  if (L->c) shoal__cluster_destroy(L->c);
  free(L->node), free(L->node_state), free(L->node_gpus), free(L->node_cpus), free(L->usable), free(L->drain);
  free(L->foreign_gpus), free(L->foreign_cpus), free(L->blocked), free(L->tenant), free(L->tenant_w);
  free(L);
}
