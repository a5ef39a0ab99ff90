/* Strategy "partial": each step's gradients are averaged over the workers
 * that were ready within the coordinator's window (include/shoal/partial.h);
 * the others relay and receive the same average, so every worker applies the
 * same update and the parameters stay identical (as with bsp).
 *
 * The communication thread serves the steps in order with
 * shoal_partial_allreduce; the caller's finish() hands over the step's
 * gradients (shoal_partial_arrive) and waits for its result. A worker whose
 * gradients miss the window does not hold the others up: its communication
 * thread relays while it computes. With ahead = A > 0 the thread also serves
 * up to A steps beyond the one the caller is computing, so one long step
 * (a spike) does not stall the others either; the results wait in a ring of
 * A + 1 buffers. When a step is already under way (the window is open or
 * closed, or open for less time than this worker's compute takes) as the
 * caller begins it, computing gradients for it would only produce late
 * ones: begin() sets SHOAL_SYNC_F_SKIP and the caller can skip
 * the forward and backward pass; finish() then still delivers the step's
 * result, so the caller's optimizer step keeps its parameters in line.
 *
 * With ahead > 0 the thread may be inside a later step when end() returns:
 * the caller calls shoal_sync_pause() before it uses the communicator
 * between steps (evaluation); every worker does, after the same step, and
 * the step in progress is withdrawn (cancelled and run again later). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "shoal/partial.h"
#include "train/sync.h"

#define MAX_AHEAD 8

typedef struct partial {
  shoal_partial_params_t prm;
  int ahead, skip_late;
  char log_path[400];
  char log_file[420]; /* this worker's: log_path, or log_path.rankR */
  FILE *log;
  shoal_partial_t *pa;
  float *flat;             /* the gradients as one vector when there are several buckets */
  float *res[MAX_AHEAD + 1];
  shoal_partial_info_t info[MAX_AHEAD + 1];
  pthread_mutex_t mu;
  pthread_cond_t cv;
  long main_step;          /* the step the caller began last (-1: none) */
  int main_in;             /* between its begin and end */
  long next_serve;         /* the next step the communication thread runs (-1: not known yet) */
  long served;             /* the last step whose result is in res[] */
  int serving;             /* a serve job is posted or running */
  int pause_req;           /* pause: one attempt of next_serve, withdrawn, on every worker */
  int err;
  char errmsg[512];
  int skipping;            /* this step: the caller was told to skip */
  double t_begin;
  double est_compute;      /* moving average of this worker's begin-to-finish time (0: none yet) */
  /* totals */
  long steps, skipped, mine;
  long contributions, fresh, carried;
} partial_t;

static int p_create(shoal_sync_t *s, shoal__cfg_t *cfg) {
  partial_t *P = calloc(1, sizeof *P);
  if (!P) return shoal__seterr(SHOAL_ERR_NOMEM, "sync partial: out of memory");
  s->impl = P;
  shoal_partial_params_init(&P->prm);
  long carry, ahead, skip, minr, excuse, trees, fanout;
  double tau_ms, carry_weight;
  const char *win = shoal__cfg_str(cfg, "window"), *log = shoal__cfg_str(cfg, "log");
  int rc = 0;
  if (win && (rc = shoal_partial_window_parse(win, &P->prm.window)))
    return shoal__seterr(rc, "sync config partial: window=%s: expected measured, faithful or fixed", win);
  if ((rc = shoal__cfg_int(cfg, "carry", 1, 0, 2, &carry)) || (rc = shoal__cfg_int(cfg, "ahead", 0, 0, MAX_AHEAD, &ahead)) ||
      (rc = shoal__cfg_int(cfg, "skip", 1, 0, 1, &skip)) || (rc = shoal__cfg_int(cfg, "min_ready", 1, 1, 1 << 20, &minr)) ||
      (rc = shoal__cfg_int(cfg, "excuse_late", 0, 0, 1, &excuse)) ||
      (rc = shoal__cfg_int(cfg, "trees", 0, 0, 1 << 20, &trees)) || (rc = shoal__cfg_int(cfg, "fanout", 0, 0, 8, &fanout)) ||
      (rc = shoal__cfg_double(cfg, "tau_ms", 0, 0, 1e9, &tau_ms)) ||
      (rc = shoal__cfg_double(cfg, "carry_weight", 1, 1e-6, 1, &carry_weight)))
    return rc;
  if (log && strlen(log) >= sizeof P->log_path)
    return shoal__seterr(SHOAL_ERR_INVALID, "sync config partial: log=%s: path too long", log);
  int W = shoal_comm_size(s->workers);
  if (minr > W)
    return shoal__seterr(SHOAL_ERR_INVALID, "sync config partial: min_ready=%ld: only %d workers", minr, W);
  if (trees > W) return shoal__seterr(SHOAL_ERR_INVALID, "sync config partial: trees=%ld: only %d workers", trees, W);
  P->prm.carry = (shoal_partial_carry_t)carry;
  P->prm.min_ready = (int)minr;
  P->prm.excuse_late = (int)excuse;
  P->prm.ntrees = (int)trees;
  P->prm.fanout = (int)fanout;
  P->prm.tau_s = tau_ms * 1e-3;
  P->prm.carry_weight = carry_weight;
  P->ahead = (int)ahead;
  P->skip_late = (int)skip;
  if (log) snprintf(P->log_path, sizeof P->log_path, "%s", log);
  P->main_step = P->next_serve = P->served = -1;
  pthread_mutex_init(&P->mu, NULL);
  pthread_cond_init(&P->cv, NULL);
  s->flags = SHOAL_SYNC_F_GRADS;
  return 0;
}

static void p_destroy(shoal_sync_t *s) {
  partial_t *P = s->impl;
  shoal_partial_destroy(P->pa);
  if (P->log) fclose(P->log);
  free(P->flat);
  for (int i = 0; i <= MAX_AHEAD; i++) free(P->res[i]);
  pthread_mutex_destroy(&P->mu);
  pthread_cond_destroy(&P->cv);
  free(P);
}

static int p_setup(shoal_sync_t *s) {
  partial_t *P = s->impl;
  int rc = shoal_partial_create(s->workers, s->total, SHOAL_FLOAT32, SHOAL_AVG, &P->prm, &P->pa);
  if (rc) return shoal__seterr(rc, "sync partial: %s", shoal_last_error());
  for (int i = 0; i <= P->ahead; i++)
    if (!(P->res[i] = malloc(s->total * sizeof(float)))) return shoal__seterr(SHOAL_ERR_NOMEM, "sync partial: out of memory");
  if (s->nb > 1 && !(P->flat = malloc(s->total * sizeof(float))))
    return shoal__seterr(SHOAL_ERR_NOMEM, "sync partial: out of memory");
  if (P->log_path[0]) {
    /* worker r > 0 writes PATH.rankR beside a regular file (or a new one); a device or a FIFO named by PATH
     * is written by every worker itself (/dev/stderr), never given .rankR siblings in its directory */
    struct stat st;
    int r = shoal_comm_rank(s->workers), special = stat(P->log_path, &st) == 0 && !S_ISREG(st.st_mode);
    if (r && !special) snprintf(P->log_file, sizeof P->log_file, "%s.rank%d", P->log_path, r);
    else snprintf(P->log_file, sizeof P->log_file, "%s", P->log_path);
    if (!(P->log = fopen(P->log_file, special ? "a" : "w")))
      return shoal__seterr(SHOAL_ERR_IO, "sync partial: log=%s: cannot open %s: %s", P->log_path, P->log_file,
                           strerror(errno));
    fprintf(P->log, "step,skipped,mine,contributions,fresh,carried,dropped,window_ms,comm_ms\n");
  }
  return 0;
}

/* May the communication thread run step j now? (P->mu held) */
static int may_serve(const partial_t *P, long j) {
  if (P->err || P->next_serve < 0) return 0;
  if (P->pause_req) return 1;
  return P->main_in && j <= P->main_step + P->ahead;
}

/* The communication thread: steps in order while allowed. */
static int serve_job(shoal_sync_t *s, int arg) {
  (void)arg;
  partial_t *P = s->impl;
  for (;;) {
    pthread_mutex_lock(&P->mu);
    long j = P->next_serve;
    if (!may_serve(P, j)) {
      P->serving = 0;
      pthread_cond_broadcast(&P->cv);
      pthread_mutex_unlock(&P->mu);
      return 0;
    }
    int slot = (int)(j % (P->ahead + 1));
    pthread_mutex_unlock(&P->mu);
    shoal_partial_info_t info;
    int rc = shoal_partial_allreduce(P->pa, j, P->res[slot], &info);
    pthread_mutex_lock(&P->mu);
    P->pause_req = 0; /* this attempt began before or after the request: either way it ends the pause */
    if (rc < 0) {
      P->err = rc;
      snprintf(P->errmsg, sizeof P->errmsg, "sync partial step %ld: %s", j, shoal_comm_errmsg(s->workers));
    } else if (rc == 0) {
      P->info[slot] = info;
      P->served = j;
      P->next_serve = j + 1;
    } /* rc == 1: cancelled (every worker paused): run it again when the caller begins it */
    if (rc) P->serving = 0;
    pthread_cond_broadcast(&P->cv);
    pthread_mutex_unlock(&P->mu);
    if (rc) return rc < 0 ? shoal__seterr(rc, "%s", P->errmsg) : 0;
  }
}

/* Post a serve job if none is running and one may run (P->mu held). */
static int kick(shoal_sync_t *s) {
  partial_t *P = s->impl;
  if (P->serving || !may_serve(P, P->next_serve)) return 0;
  P->serving = 1;
  int rc = shoal__sync_post(s, serve_job, 0, 1);
  if (rc) P->serving = 0;
  return rc;
}

static int p_begin(shoal_sync_t *s) {
  partial_t *P = s->impl;
  long m = s->step;
  pthread_mutex_lock(&P->mu);
  int rc = 0;
  if (P->err) rc = shoal__seterr(P->err, "%s", P->errmsg);
  else if (P->main_step >= 0 && m != P->main_step + 1)
    rc = shoal__seterr(SHOAL_ERR_INVALID, "sync partial: step %ld after step %ld (steps must be consecutive)", m,
                       P->main_step);
  if (rc) {
    pthread_mutex_unlock(&P->mu);
    return rc;
  }
  if (P->next_serve < 0) P->next_serve = m;
  P->main_step = m;
  P->main_in = 1;
  rc = kick(s);
  pthread_mutex_unlock(&P->mu);
  /* under way already, and the window cannot stay open long enough for this worker's gradients. The
   * window's end is known only with min_ready=1: a window that waits for min_ready workers stays open
   * past tau until they are in, so a worker predicted late could be one of them (its skip would leave
   * fewer); then only a closed window makes a worker skip. */
  int st = shoal_partial_state(P->pa, m);
  P->skipping = P->skip_late && (st >= SHOAL_PARTIAL_DECIDED ||
                                 (st == SHOAL_PARTIAL_OPEN && P->prm.min_ready <= 1 &&
                                  P->est_compute > shoal_partial_window_left(P->pa, m)));
  if (P->skipping) s->flags |= SHOAL_SYNC_F_SKIP;
  else s->flags &= ~SHOAL_SYNC_F_SKIP;
  P->t_begin = shoal__now_s();
  if (!rc && P->skipping) rc = shoal_partial_arrive(P->pa, m, NULL, 0);
  return rc;
}

static int p_finish(shoal_sync_t *s) {
  partial_t *P = s->impl;
  long m = s->step;
  int rc = 0;
  if (!P->skipping) {
    const float *g = s->b[0].g;
    if (s->nb > 1) {
      shoal__sync_gather(s, 1, P->flat);
      g = P->flat;
    }
    double took = shoal__now_s() - P->t_begin;
    P->est_compute = P->est_compute > 0 ? 0.8 * P->est_compute + 0.2 * took : took;
    rc = shoal_partial_arrive(P->pa, m, g, took);
    if (rc) return rc;
  }
  pthread_mutex_lock(&P->mu);
  while (!P->err && P->served < m) {
    if ((rc = kick(s))) break;
    pthread_cond_wait(&P->cv, &P->mu);
  }
  if (!rc && P->err) rc = shoal__seterr(P->err, "%s", P->errmsg);
  shoal_partial_info_t in = P->info[m % (P->ahead + 1)];
  pthread_mutex_unlock(&P->mu);
  if (rc) return rc;
  const float *res = P->res[m % (P->ahead + 1)];
  if (s->nb > 1) shoal__sync_scatter(s, 1, res);
  else memcpy(s->b[0].g, res, s->total * sizeof(float));
  s->gsize = in.contributions;
  s->payload = P->skipping ? 0 : (double)s->total * sizeof(float);
  P->steps++;
  P->skipped += P->skipping;
  P->mine += in.mine;
  P->contributions += in.contributions;
  P->fresh += in.fresh;
  P->carried += in.carried;
  if (P->log)
    fprintf(P->log, "%ld,%d,%d,%d,%d,%d,%d,%.3f,%.3f\n", m, P->skipping, in.mine, in.contributions, in.fresh,
            in.carried, in.dropped, in.window_s * 1e3, in.seconds * 1e3);
  return 0;
}

static int p_end(shoal_sync_t *s) {
  partial_t *P = s->impl;
  pthread_mutex_lock(&P->mu);
  P->main_in = 0;
  pthread_mutex_unlock(&P->mu);
  return 0;
}

/* Between steps, on every worker after the same step m. With ahead > 0 some
 * workers' threads may already be in step m + 1 and others not: every
 * worker makes exactly one attempt of it, withdrawn, so that all of them
 * cancel it together (nobody can have data for it yet). */
static int p_pause(shoal_sync_t *s) {
  partial_t *P = s->impl;
  if (!P->pa) return 0;
  pthread_mutex_lock(&P->mu);
  int rc = 0;
  if (P->ahead > 0 && !P->err && P->next_serve >= 0) {
    shoal_partial_withdraw(P->pa, P->next_serve);
    P->pause_req = 1;
    rc = kick(s);
    while (!rc && !P->err && (P->pause_req || P->serving)) pthread_cond_wait(&P->cv, &P->mu);
    P->pause_req = 0;
    shoal_partial_withdraw(P->pa, -1); /* the withdrawal ends with the pause */
  }
  while (P->serving) pthread_cond_wait(&P->cv, &P->mu);
  if (!rc && P->err) rc = shoal__seterr(P->err, "%s", P->errmsg);
  pthread_mutex_unlock(&P->mu);
  if (!rc) rc = shoal__sync_drain(s);
  return rc;
}

static int p_final(shoal_sync_t *s) {
  partial_t *P = s->impl;
  int rc = p_pause(s), lrc = 0;
  if (P->log && (fflush(P->log) || ferror(P->log))) /* a full disk: said, not an exit 0 with its rows lost */
    lrc = shoal__seterr(SHOAL_ERR_IO, "sync partial: log=%s: cannot write %s: %s", P->log_path, P->log_file,
                        strerror(errno ? errno : EIO));
  char lmsg[600];
  snprintf(lmsg, sizeof lmsg, "%s", lrc ? shoal_last_error() : "");
  if (P->steps && shoal_comm_rank(s->workers) == 0)
    SHOAL_INFO("TRAIN", "sync partial: %ld steps: %.1f%% of the workers' gradients in (%.1f%% fresh, %.1f%% carried); "
               "this worker skipped %ld steps; ahead=%d (steps its communication thread may serve beyond its own)", P->steps,
               100.0 * (double)P->contributions / ((double)P->steps * shoal_comm_size(s->workers)),
               100.0 * (double)P->fresh / ((double)P->steps * shoal_comm_size(s->workers)),
               100.0 * (double)P->carried / ((double)P->steps * shoal_comm_size(s->workers)), P->skipped, P->ahead);
  /* every worker applied the same (partial) sums: worker 0's model is the final one (sent even when this
   * worker's log failed: the others wait for it) */
  if (!rc) rc = shoal__sync_broadcast_params(s, "final model");
  return rc ? rc : lrc ? shoal__seterr(lrc, "%s", lmsg) : 0;
}

const shoal__strategy_t shoal__strategy_partial = {
    .name = "partial",
    .keys = "window, tau_ms, min_ready, excuse_late, carry, carry_weight, ahead, skip, trees, fanout, log",
    .create = p_create,
    .destroy = p_destroy,
    .setup = p_setup,
    .begin = p_begin,
    .finish = p_finish,
    .end = p_end,
    .final = p_final,
    .pause = p_pause,
};
