/* Replay of the journal's records (replay.h). */
#include "live/replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

typedef struct ctx {
  shoal_live_replay_t *r;
  shoal_live_journal_scan_t *scan;
  int oom;
} ctx_t;

shoal_live_jjob_t *shoal__live_replay_find(const shoal_live_replay_t *r, long sid) {
  for (int i = 0; i < r->n; i++)
    if (r->job[i].sid == sid) return &r->job[i];
  return NULL;
}

static shoal_live_jjob_t *job_for(shoal_live_replay_t *r, long sid) {
  shoal_live_jjob_t *e = shoal__live_replay_find(r, sid);
  if (e) return e;
  if (r->n == r->cap) {
    int nc = r->cap ? r->cap * 2 : 64;
    shoal_live_jjob_t *nj = realloc(r->job, (size_t)nc * sizeof *nj);
    if (!nj) return NULL;
    r->job = nj, r->cap = nc;
  }
  e = &r->job[r->n++];
  memset(e, 0, sizeof *e);
  e->sid = sid;
  return e;
}

/* NODE:W,NODE:W into e's placement; -1 if malformed or out of memory */
static int read_place(shoal_live_jjob_t *e, const char *s) {
  int n = 1;
  for (const char *c = s; *c; c++) n += *c == ',';
  char(*node)[SHOAL_LIVE_NAME] = calloc((size_t)n, sizeof *node);
  int *w = calloc((size_t)n, sizeof *w);
  char buf[SHOAL_LIVE_RECORD_MAX];
  snprintf(buf, sizeof buf, "%s", s);
  int k = 0, bad = !node || !w;
  for (char *sv = NULL, *t = strtok_r(buf, ",", &sv); t && !bad; t = strtok_r(NULL, ",", &sv)) {
    char *colon = strrchr(t, ':');
    char *end = NULL;
    long x = colon ? strtol(colon + 1, &end, 10) : 0;
    if (!colon || colon == t || !*(colon + 1) || *end || x < 1 || x > 4096 || colon - t >= SHOAL_LIVE_NAME) bad = 1;
    else memcpy(node[k], t, (size_t)(colon - t)), w[k++] = (int)x;
  }
  if (bad || k == 0) {
    free(node), free(w);
    return -1;
  }
  free(e->node), free(e->workers);
  e->node = node, e->workers = w, e->n = k;
  return 0;
}

/* a stop or a retry closes the open start */
static void close_start(shoal_live_jjob_t *e, double t, const char *why) {
  if (e->open) e->held_s += t - e->last_start;
  e->open = 0;
  snprintf(e->last_stop, sizeof e->last_stop, "%s", why);
  if (!strcmp(why, "preempt") || !strcmp(why, "drain")) e->preempts++;
  else if (!strcmp(why, "resize")) e->resizes++;
}

static int is_why(const char *w) {
  static const char *const ok[] = {"preempt", "resize", "drain", "foreign", "outside", "own", "unstarted", "loan", NULL};
  for (int i = 0; ok[i]; i++)
    if (!strcmp(w, ok[i])) return 1;
  return 0;
}

/* one job record; 0, or -1 when it does not read */
static int apply_job(shoal_live_replay_t *r, const char *word, const char *rest, int *oom) {
  long sid;
  double t;
  int used = 0;
  if (sscanf(rest, "%ld %lf %n", &sid, &t, &used) < 2 || sid < 0) return -1;
  const char *tail = rest + used;
  shoal_live_jjob_t *e = job_for(r, sid);
  if (!e) return *oom = 1, -1;
  if (!strcmp(word, "arrive") && !*tail) e->arrived = 1, e->arrival = t;
  else if (!strcmp(word, "start")) {
    if (read_place(e, tail)) return -1;
    if (!e->started) e->first_start = t;
    e->started = 1, e->open = 1, e->last_start = t, e->starts++;
  } else if (!strcmp(word, "run") && !*tail) {
    if (!e->ran) e->first_run = t;
    e->ran = 1, e->runs++;
  } else if (!strcmp(word, "stop") && is_why(tail)) close_start(e, t, tail);
  else if (!strcmp(word, "retry") && !*tail) close_start(e, t, "retry"), e->retries++;
  else if (!strcmp(word, "end") && *tail) {
    close_start(e, t, "end");
    e->ended = 1, e->end = t;
    snprintf(e->final, sizeof e->final, "%s", tail);
  } else return -1;
  return 0;
}

static int keep_payload(shoal_live_replay_t *r, const char *p) {
  if (r->npayload == r->cappayload) {
    int nc = r->cappayload ? r->cappayload * 2 : 256;
    char **np = realloc(r->payload, (size_t)nc * sizeof *np);
    if (!np) return -1;
    r->payload = np, r->cappayload = nc;
  }
  if (!(r->payload[r->npayload] = strdup(p))) return -1;
  r->npayload++;
  return 0;
}

static int on_record(void *arg, int line, const char *payload) {
  ctx_t *c = arg;
  char word[16];
  int used = 0;
  int ok = sscanf(payload, "%15s %n", word, &used) == 1;
  if (ok && !strcmp(word, "ctl")) {
    char id[64];
    double epoch;
    ok = c->r->id[0] == 0 && sscanf(payload + used, "%63s epoch %lf", id, &epoch) == 2 && epoch > 0;
    if (ok) snprintf(c->r->id, sizeof c->r->id, "%s", id), c->r->epoch = epoch;
  } else if (ok) ok = apply_job(c->r, word, payload + used, &c->oom) == 0;
  if (c->oom) return shoal__seterr(SHOAL_ERR_NOMEM, "journal: out of memory");
  if (!ok) {
    shoal_live_journal_scan_t *s = c->scan;
    if (s->ndamage < (int)(sizeof s->damage / sizeof s->damage[0])) {
      s->damage[s->ndamage].line = line;
      snprintf(s->damage[s->ndamage].what, sizeof s->damage[0].what, "a record this controller cannot read: '%.60s'",
               payload);
    }
    s->ndamage++;
    return 0;
  }
  return keep_payload(c->r, payload) ? shoal__seterr(SHOAL_ERR_NOMEM, "journal: out of memory") : 0;
}

int shoal__live_replay(const char *path, shoal_live_replay_t *r, shoal_live_journal_scan_t *scan) {
  memset(r, 0, sizeof *r);
  ctx_t c = {r, scan, 0};
  int rc = shoal__live_journal_scan(path, on_record, &c, scan);
  if (rc) shoal__live_replay_free(r);
  return rc;
}

void shoal__live_replay_free(shoal_live_replay_t *r) {
  for (int i = 0; i < r->n; i++) free(r->job[i].node), free(r->job[i].workers);
  for (int i = 0; i < r->npayload; i++) free(r->payload[i]);
  free(r->job);
  free(r->payload);
  memset(r, 0, sizeof *r);
}

int shoal__live_jjob_preemptions(const shoal_live_jjob_t *e) { return e->preempts; }
