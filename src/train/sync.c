/* include/shoal/sync.h: the table of strategies and what they share —
 * bucket registration, the key=value config, the per-step protocol checks,
 * timing, and one communication thread that runs the strategies' jobs
 * (bucket allreduces, overlapped group averages) in the order posted. Only
 * that thread touches the communicator while a step is in flight; the mutex
 * hand-off orders its use against the caller's between steps. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/siphash.h"
#include "train/sync.h"

/* One line per strategy. */
static const shoal__strategy_t *const table[] = {
    &shoal__strategy_bsp,
    &shoal__strategy_dssync,
    &shoal__strategy_localsgd,
    &shoal__strategy_ps,
    &shoal__strategy_partial,
};
#define NSTRATEGIES ((int)(sizeof table / sizeof table[0]))

const char *shoal_sync_strategy_name(int i) { return i >= 0 && i < NSTRATEGIES ? table[i]->name : NULL; }

/* ---- config ---- */

#define CFG_MAX 32
struct shoal__cfg {
  const char *strategy;
  int n;
  struct {
    char key[32];
    char val[480];
    int used;
  } kv[CFG_MAX];
};

static int cfg_parse(const char *text, shoal__cfg_t *c) {
  const char *p = text ? text : "";
  while (*p) {
    while (*p == ' ' || *p == ';' || *p == '\t' || *p == '\n') p++;
    if (!*p) break;
    const char *e = p;
    while (*e && *e != ' ' && *e != ';' && *e != '\t' && *e != '\n') e++;
    const char *eq = memchr(p, '=', (size_t)(e - p));
    if (!eq || eq == p)
      return shoal__seterr(SHOAL_ERR_INVALID, "sync config '%.*s': expected key=value", (int)(e - p), p);
    if (c->n == CFG_MAX) return shoal__seterr(SHOAL_ERR_INVALID, "sync config: more than %d settings", CFG_MAX);
    size_t kl = (size_t)(eq - p), vl = (size_t)(e - eq - 1);
    if (kl >= sizeof c->kv[0].key || vl >= sizeof c->kv[0].val)
      return shoal__seterr(SHOAL_ERR_INVALID, "sync config '%.*s': key or value too long", (int)(e - p), p);
    for (int i = 0; i < c->n; i++)
      if (strlen(c->kv[i].key) == kl && !memcmp(c->kv[i].key, p, kl))
        return shoal__seterr(SHOAL_ERR_INVALID, "sync config: key '%.*s' given twice", (int)kl, p);
    memcpy(c->kv[c->n].key, p, kl);
    c->kv[c->n].key[kl] = 0;
    memcpy(c->kv[c->n].val, eq + 1, vl);
    c->kv[c->n].val[vl] = 0;
    c->n++;
    p = e;
  }
  return 0;
}

const char *shoal__cfg_str(shoal__cfg_t *c, const char *key) {
  for (int i = 0; i < c->n; i++)
    if (!strcmp(c->kv[i].key, key)) {
      c->kv[i].used = 1;
      return c->kv[i].val;
    }
  return NULL;
}

int shoal__cfg_double(shoal__cfg_t *c, const char *key, double def, double lo, double hi, double *out) {
  const char *v = shoal__cfg_str(c, key);
  if (!v) {
    *out = def;
    return 0;
  }
  char *end;
  double d = strtod(v, &end);
  if (end == v || *end || !(d >= lo && d <= hi))
    return shoal__seterr(SHOAL_ERR_INVALID, "sync config %s: %s=%s: expected a number in [%g, %g]", c->strategy, key,
                         v, lo, hi);
  *out = d;
  return 0;
}

int shoal__cfg_int(shoal__cfg_t *c, const char *key, long def, long lo, long hi, long *out) {
  const char *v = shoal__cfg_str(c, key);
  if (!v) {
    *out = def;
    return 0;
  }
  char *end;
  long d = strtol(v, &end, 10);
  if (end == v || *end || d < lo || d > hi)
    return shoal__seterr(SHOAL_ERR_INVALID, "sync config %s: %s=%s: expected an integer in [%ld, %ld]", c->strategy,
                         key, v, lo, hi);
  *out = d;
  return 0;
}

/* ---- errors ---- */

static int fail(shoal_sync_t *s, int rc) {
  if (!s->failed) snprintf(s->err, sizeof s->err, "%s", shoal_last_error());
  s->failed = rc;
  return rc;
}

static int fail_msg(shoal_sync_t *s, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail_msg(shoal_sync_t *s, int rc, const char *fmt, ...) {
  char m[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  shoal__seterr(rc, "%s", m);
  return fail(s, rc);
}

/* Every call after the context failed: SHOAL_ERR_ABORTED with the first error. */
static int failed_earlier(const shoal_sync_t *s, const char *call) {
  return shoal__seterr(SHOAL_ERR_ABORTED, "%s: the context failed earlier: %s", call, s->err);
}

const char *shoal_sync_errmsg(const shoal_sync_t *s) { return s ? s->err : "shoal_sync: NULL context"; }

/* ---- communication thread ---- */

static void *comm_thread(void *arg) {
  shoal_sync_t *s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->stop && s->done == s->posted) pthread_cond_wait(&s->cv, &s->mu);
    if (s->stop) break;
    int slot = s->done % 64;
    shoal__job_fn fn = s->q[slot].fn;
    int a = s->q[slot].arg, skip = s->job_err != 0;
    pthread_mutex_unlock(&s->mu);
    int rc = skip ? 0 : fn(s, a);
    const char *m = rc ? shoal_last_error() : NULL; /* this thread's message */
    pthread_mutex_lock(&s->mu);
    if (rc && !s->job_err) {
      s->job_err = rc;
      snprintf(s->job_msg, sizeof s->job_msg, "%s", m);
    }
    s->done++;
    pthread_cond_broadcast(&s->cv);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

int shoal__sync_post(shoal_sync_t *s, shoal__job_fn fn, int arg, int threaded) {
  if (!threaded) return fn(s, arg);
  if (!s->th_started) {
    if (pthread_create(&s->th, NULL, comm_thread, s))
      return shoal__seterr(SHOAL_ERR_SYSTEM, "sync %s: cannot start the communication thread", s->st->name);
    s->th_started = 1;
  }
  pthread_mutex_lock(&s->mu);
  while (s->posted - s->done >= 64) pthread_cond_wait(&s->cv, &s->mu);
  s->q[s->posted % 64].fn = fn;
  s->q[s->posted % 64].arg = arg;
  s->posted++;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  return 0;
}

int shoal__sync_drain(shoal_sync_t *s) {
  if (!s->th_started) return 0;
  pthread_mutex_lock(&s->mu);
  while (s->done < s->posted) pthread_cond_wait(&s->cv, &s->mu);
  int rc = s->job_err;
  if (rc) shoal__seterr(rc, "%s", s->job_msg);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

/* ---- buckets ---- */

void shoal__sync_gather(const shoal_sync_t *s, int grads, float *flat) {
  for (int i = 0; i < s->nb; i++) memcpy(flat + s->b[i].off, grads ? s->b[i].g : s->b[i].p, s->b[i].n * sizeof(float));
}

void shoal__sync_scatter(shoal_sync_t *s, int grads, const float *flat) {
  for (int i = 0; i < s->nb; i++) memcpy(grads ? s->b[i].g : s->b[i].p, flat + s->b[i].off, s->b[i].n * sizeof(float));
}

/* Every bucket's parameters through one collective over the workers:
 * averaged (allreduce AVG) or worker 0's (broadcast). */
static int params_collective(shoal_sync_t *s, const char *what, int average) {
  for (int i = 0; i < s->nb; i++) {
    int rc = average ? shoal_allreduce(s->workers, SHOAL_IN_PLACE, s->b[i].p, s->b[i].n, SHOAL_FLOAT32, SHOAL_AVG)
                     : shoal_broadcast(s->workers, s->b[i].p, s->b[i].n, SHOAL_FLOAT32, 0);
    if (rc)
      return shoal__seterr(rc, "sync %s: %s of bucket %d (%zu floats): %s", s->st->name, what, i, s->b[i].n,
                           shoal_comm_errmsg(s->workers));
    s->payload += (double)s->b[i].n * sizeof(float);
  }
  return 0;
}

int shoal__sync_average_params(shoal_sync_t *s, const char *what) { return params_collective(s, what, 1); }

int shoal__sync_broadcast_params(shoal_sync_t *s, const char *what) { return params_collective(s, what, 0); }

int shoal__sync_config_has(const char *cfg, const char *key) {
  size_t kl = strlen(key);
  for (const char *p = cfg ? cfg : ""; *p;) {
    size_t n = strcspn(p, " ;\t\n");
    if (n > kl && p[kl] == '=' && !strncmp(p, key, kl)) return 1;
    p += n;
    p += strspn(p, " ;\t\n");
  }
  return 0;
}

/* ---- the same strategy and settings on every rank ---- */

static int key_cmp(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* "dssync: k=3 pattern=random": the strategy and its settings sorted by key (the order given does not
 * matter), malloc'd, or NULL. */
static char *conf_text(const shoal__cfg_t *c) {
  size_t cap = strlen(c->strategy) + 2;
  const char *keys[CFG_MAX];
  for (int i = 0; i < c->n; i++) {
    keys[i] = c->kv[i].key;
    cap += strlen(c->kv[i].key) + strlen(c->kv[i].val) + 2;
  }
  qsort(keys, (size_t)c->n, sizeof *keys, key_cmp);
  char *out = malloc(cap);
  if (!out) return NULL;
  size_t n = (size_t)snprintf(out, cap, "%s:", c->strategy);
  for (int i = 0; i < c->n; i++)
    for (int j = 0; j < c->n; j++)
      if (c->kv[j].key == keys[i]) n += (size_t)snprintf(out + n, cap - n, " %s=%s", keys[i], c->kv[j].val);
  return out;
}

/* Ranks given different strategies or settings (dssync k=2 on some, k=3 on others) would run different
 * protocols: a mismatch much later, a wait until the deadline, or another computation, unseen. Compared
 * at the first step (every rank of the communicator, servers too, reaches it at the same point of its
 * calls: a collective in shoal_sync_create would come between a shrink's and the runtime's own), as a hash
 * (an allgather of 8 bytes), then rank 0's text to name it. 0, or SHOAL_ERR_MISMATCH on every rank. */
static int agree_conf(shoal_sync_t *s) {
  int n = shoal_comm_size(s->comm), me = shoal_comm_rank(s->comm);
  if (n < 2) return 0;
  static const uint8_t key[16] = "shoal-sync-conf";
  int64_t *all = calloc((size_t)n, sizeof *all);
  if (!all) return shoal__seterr(SHOAL_ERR_NOMEM, "sync %s: out of memory", s->st->name);
  all[me] = (int64_t)shoal__siphash24(key, s->conf, strlen(s->conf));
  int rc = shoal_allgather(s->comm, SHOAL_IN_PLACE, all, 1, SHOAL_INT64);
  char differ[200] = "";
  size_t used = 0;
  for (int r = 1; !rc && r < n; r++)
    if (all[r] != all[0] && used < sizeof differ - 16)
      used += (size_t)snprintf(differ + used, sizeof differ - used, "%s%d", used ? ", " : "", r);
  free(all);
  if (rc)
    return shoal__seterr(rc, "sync %s: comparing the ranks' settings: %s", s->st->name, shoal_comm_errmsg(s->comm));
  if (!used) return 0;
  char first[512];
  snprintf(first, sizeof first, "%s", s->conf);
  if ((rc = shoal_broadcast(s->comm, first, sizeof first, SHOAL_UINT8, 0)))
    return shoal__seterr(rc, "sync %s: comparing the ranks' settings: %s", s->st->name, shoal_comm_errmsg(s->comm));
  first[sizeof first - 1] = '\0';
  return shoal__seterr(SHOAL_ERR_MISMATCH, "shoal_sync: the ranks were given different strategies or settings: "
                       "rank 0 '%s', rank(s) %s others%s%s%s (every rank must pass the same to shoal_sync_create)",
                       first, differ, me ? "; this rank '" : "", me ? s->conf : "", me ? "'" : "");
}

/* ---- public API ---- */

int shoal_sync_create(shoal_comm_t *comm, const char *strategy, const char *config, shoal_sync_t **out) {
  if (!comm || !strategy || !out) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_sync_create: NULL argument");
  const shoal__strategy_t *st = NULL;
  for (int i = 0; i < NSTRATEGIES; i++)
    if (!strcmp(table[i]->name, strategy)) st = table[i];
  if (!st) {
    char names[128] = "";
    for (int i = 0; i < NSTRATEGIES; i++)
      snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", table[i]->name);
    return shoal__seterr(SHOAL_ERR_INVALID, "sync strategy '%s': expected one of %s", strategy, names);
  }
  shoal__cfg_t *cfg = calloc(1, sizeof *cfg);
  shoal_sync_t *s = calloc(1, sizeof *s);
  if (!cfg || !s) {
    free(cfg);
    free(s);
    return shoal__seterr(SHOAL_ERR_NOMEM, "shoal_sync_create: out of memory");
  }
  cfg->strategy = st->name;
  s->st = st;
  s->comm = s->workers = comm;
  s->step = -1;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  int rc = cfg_parse(config, cfg);
  if (!rc && !(s->conf = conf_text(cfg))) rc = shoal__seterr(SHOAL_ERR_NOMEM, "shoal_sync_create: out of memory");
  if (!rc) rc = st->create(s, cfg);
  for (int i = 0; i < cfg->n && !rc; i++)
    if (!cfg->kv[i].used)
      rc = shoal__seterr(SHOAL_ERR_INVALID, "sync config: '%s' is not a setting of %s (its settings: %s)",
                         cfg->kv[i].key, st->name, st->keys);
  free(cfg);
  if (rc) {
    shoal_sync_destroy(s);
    return rc;
  }
  *out = s;
  return 0;
}

void shoal_sync_destroy(shoal_sync_t *s) {
  if (!s) return;
  if (s->th_started) {
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
  }
  if (s->impl && s->st->destroy) s->st->destroy(s);
  if (s->owns_workers && s->workers) shoal_comm_destroy(s->workers);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s->b);
  free(s->conf);
  free(s);
}

int shoal_sync_add_bucket(shoal_sync_t *s, float *params, float *grads, size_t count) {
  if (!s) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_sync_add_bucket: NULL context");
  if (s->failed) return failed_earlier(s, "shoal_sync_add_bucket");
  if (s->set_up) return fail_msg(s, SHOAL_ERR_INVALID, "sync %s: buckets must be added before the first step", s->st->name);
  if (!params || !grads || !count)
    return fail_msg(s, SHOAL_ERR_INVALID, "sync %s: bucket %d: NULL buffer or zero count", s->st->name, s->nb);
  if (s->nb == s->capb) {
    int cap = s->capb ? 2 * s->capb : 8;
    shoal__bucket_t *nb = realloc(s->b, (size_t)cap * sizeof *nb);
    if (!nb) return fail_msg(s, SHOAL_ERR_NOMEM, "sync: out of memory");
    s->b = nb;
    s->capb = cap;
  }
  s->b[s->nb] = (shoal__bucket_t){params, grads, count, s->total};
  s->total += count;
  return s->nb++;
}

int shoal_sync_flags(const shoal_sync_t *s) { return s ? s->flags : 0; }

int shoal_sync_set_lr(shoal_sync_t *s, double lr) {
  if (!s) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_sync_set_lr: NULL context");
  if (s->failed) return failed_earlier(s, "shoal_sync_set_lr");
  if (!(lr >= 0 && lr < 1e6)) return fail_msg(s, SHOAL_ERR_INVALID, "sync %s: learning rate %g", s->st->name, lr);
  s->lr = lr;
  return 0;
}

static int setup(shoal_sync_t *s) {
  if (s->set_up) return 0;
  if (!s->nb) return fail_msg(s, SHOAL_ERR_INVALID, "sync %s: no bucket registered (shoal_sync_add_bucket)", s->st->name);
  int rc = agree_conf(s);
  if (!rc && s->st->setup) rc = s->st->setup(s);
  if (rc) return fail(s, rc);
  s->set_up = 1;
  return 0;
}

static int check(shoal_sync_t *s, const char *call, int want_state) {
  if (!s) return shoal__seterr(SHOAL_ERR_INVALID, "%s: NULL context", call);
  if (s->failed) return failed_earlier(s, call);
  if (s->flags & SHOAL_SYNC_F_SERVER)
    return fail_msg(s, SHOAL_ERR_INVALID, "%s: this rank is a parameter server (call shoal_sync_serve)", call);
  if (want_state >= 0 && s->in_step != want_state) {
    static const char *const st[] = {"between steps", "after begin", "after finish"};
    return fail_msg(s, SHOAL_ERR_INVALID, "%s: called %s (step %ld)", call, st[s->in_step], s->step);
  }
  return 0;
}

int shoal_sync_begin(shoal_sync_t *s, long step) {
  int rc = check(s, "shoal_sync_begin", 0);
  if (rc) return rc;
  if (step < 0) return fail_msg(s, SHOAL_ERR_INVALID, "shoal_sync_begin: step %ld", step);
  if ((rc = setup(s))) return rc;
  s->step = step;
  s->wait_s = 0;
  s->payload = 0;
  s->gsize = shoal_comm_size(s->workers);
  s->in_step = 1;
  if (s->workers) shoal_comm_mark_iteration(s->workers, step); /* for the host's flow agent (docs/flow.md) */
  if (s->st->begin && (rc = s->st->begin(s))) return fail(s, rc);
  return 0;
}

int shoal_sync_bucket_ready(shoal_sync_t *s, int bucket) {
  int rc = check(s, "shoal_sync_bucket_ready", 1);
  if (rc) return rc;
  if (bucket < 0 || bucket >= s->nb)
    return fail_msg(s, SHOAL_ERR_INVALID, "shoal_sync_bucket_ready: bucket %d of %d", bucket, s->nb);
  if (s->st->bucket_ready && (rc = s->st->bucket_ready(s, bucket))) return fail(s, rc);
  return 0;
}

int shoal_sync_finish(shoal_sync_t *s) {
  int rc = check(s, "shoal_sync_finish", 1);
  if (rc) return rc;
  double t0 = shoal__now_s();
  if (s->st->finish && (rc = s->st->finish(s))) return fail(s, rc);
  s->wait_s += shoal__now_s() - t0;
  s->in_step = 2;
  return 0;
}

int shoal_sync_end(shoal_sync_t *s) {
  int rc = check(s, "shoal_sync_end", 2);
  if (rc) return rc;
  double t0 = shoal__now_s();
  if (s->st->end && (rc = s->st->end(s))) return fail(s, rc);
  s->wait_s += shoal__now_s() - t0;
  s->in_step = 0;
  return 0;
}

int shoal_sync_final(shoal_sync_t *s) {
  int rc = check(s, "shoal_sync_final", 0);
  if (rc) return rc;
  if ((rc = setup(s))) return rc;
  if (s->st->final && (rc = s->st->final(s))) return fail(s, rc);
  return 0;
}

int shoal_sync_serve(shoal_sync_t *s) {
  if (!s) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_sync_serve: NULL context");
  if (s->failed) return failed_earlier(s, "shoal_sync_serve");
  if (!(s->flags & SHOAL_SYNC_F_SERVER) || !s->st->serve)
    return fail_msg(s, SHOAL_ERR_INVALID, "shoal_sync_serve: this rank is not a server of strategy %s", s->st->name);
  int rc = setup(s);
  if (rc) return rc;
  if ((rc = s->st->serve(s))) return fail(s, rc);
  return 0;
}

int shoal_sync_checkpoint(shoal_sync_t *s) {
  int rc = check(s, "shoal_sync_checkpoint", 0);
  if (rc) return rc;
  if ((rc = setup(s))) return rc;
  if (s->st->checkpoint && (rc = s->st->checkpoint(s))) return fail(s, rc);
  return 0;
}

int shoal_sync_pause(shoal_sync_t *s) {
  int rc = check(s, "shoal_sync_pause", 0);
  if (rc) return rc;
  if (s->set_up && s->st->pause && (rc = s->st->pause(s))) return fail(s, rc);
  return 0;
}

shoal_comm_t *shoal_sync_workers(shoal_sync_t *s) {
  return s && !(s->flags & SHOAL_SYNC_F_SERVER) ? s->workers : NULL;
}

int shoal_sync_last_step(const shoal_sync_t *s, double *wait_s, int *group_size, double *payload_bytes) {
  if (!s) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_sync_last_step: NULL context");
  if (wait_s) *wait_s = s->wait_s;
  if (group_size) *group_size = s->gsize;
  if (payload_bytes) *payload_bytes = s->payload;
  return 0;
}

int shoal_sync_max_staleness(const shoal_sync_t *s) { return s ? s->max_stale : 0; }
