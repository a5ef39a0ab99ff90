/* Partial allreduce (include/shoal/partial.h): the coordinator's window,
 * the control messages, carry, and the data plane (the chooser's allreduce
 * algorithm; the relay trees of relay.c for min/max/prod with a rank out).
 *
 * One step is one op (opcode partial-allreduce, its own sequence number and
 * deadline) in two parts:
 *
 * Control. Every rank other than the coordinator (rank 0) sends it, in this
 * order: at most one CARRY (the rank was late in the previous step and its
 * late data has now arrived, or not: whether it carries data into this
 * step), then exactly one final report: READY (its data of this step is
 * here), SKIP (it has none), PAUSE (it withdrew) or LATE (the decision came
 * before any of those). The coordinator sends OPEN when the first rank is
 * ready (so that ranks about to start the step know it is under way), then
 * DECIDE with one byte per rank (bit 0: its fresh data is in, bit 1: its
 * carried data is in), or CANCEL when every rank withdrew or skipped before
 * any was ready. The coordinator reads each rank's messages up to its final
 * report before it starts the data plane, so the two kinds never mix on a
 * link.
 *
 * Data. Every rank takes part, in or not (data_plane below): a sum or an
 * average runs the chooser's allreduce algorithm, as for shoal_allreduce,
 * a rank that is out adding SUM's identity; min, max and prod with a rank
 * out take the relay trees, which route around it. Every rank reads the
 * same decision bytes, so all take the same branch.
 *
 * Waiting. The communication thread blocks until a message, the window's
 * next deadline or the op's deadline; the compute thread's arrive and
 * withdraw end that wait at once through the world's wake eventfd, polled
 * with the sockets. Where a transport waits its own way (shared memory)
 * and would not see the eventfd, it polls with a 1 ms timeout while a local
 * event (arrive, withdraw, late data) can still matter. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "comm/coll/relay.h"
#include "comm/comm_impl.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "shoal/partial.h"

#define NSLOT 16        /* arrivals a rank may post ahead of its communication thread */
#define CTL_BYTES 32    /* rank -> coordinator */
#define DEC_HEAD 32     /* coordinator -> rank: header, then one byte per rank */
#define TAG_DATA 0x5041 /* 'PA' */
#define TAG_CTL 0x5043  /* 'PC' */
#define LOCAL_POLL_MS 1
#define FAITHFUL_TICK_S 0.005

enum { ARR_NONE = 0, ARR_DATA = 1, ARR_SKIP = 2 };
enum { M_READY = 1, M_SKIP = 2, M_LATE = 3, M_PAUSE = 4, M_CARRY = 5, M_OPEN = 16, M_DECIDE = 17, M_CANCEL = 18 };
enum { CS_NONE = 0, CS_EXPECTED = 1, CS_DATA = 2, CS_EMPTY = 3 };

typedef struct arrival {
  long step;
  int state;
  const void *data;
  double compute_s;
} arrival_t;

struct shoal_partial {
  shoal_comm_t *c;
  int p, rank;
  size_t count, es, bytes;
  shoal_dtype_t dtype;
  shoal_redop_t redop;
  shoal_partial_params_t prm;
  shoal__relay_shape_t shape;
  size_t chunk;
  double s_over_b; /* S/B of the buy rule, seconds */
  pthread_mutex_t mu;
  /* ---- shared with the compute thread (under mu) ---- */
  arrival_t arr[NSLOT];
  long next_arrive;   /* the step the next arrive is for (-1: not known yet) */
  long first_arrive;  /* the step of the first arrive (-1: none yet) */
  long withdraw_step; /* -1: none */
  long open_step, decided_step, done_step;
  uint64_t open_ns;   /* when open_step opened (as this rank learned it) */
  double open_tau;    /* the coordinator's tau then */
  void *carry[2];     /* the late data carried into step s is in carry[s % 2] */
  int carry_has[2];
  long carry_for[2];
  long late_step;     /* this rank's data of late_step missed its window (-1: none) */
  int late_arrived;   /* ... and has arrived since (carried or dropped) */
  int late_has;       /* ... carrying data into late_step + 1 */
  int dropped;
  /* ---- communication thread only ---- */
  long last_step;         /* last completed step (-1: none yet) */
  long carry_sent_step;   /* step whose CARRY report this rank sent (kept across a cancelled attempt) */
  unsigned char *dec;     /* [p] the decision of the current step */
  unsigned char *cov;     /* [p] the decision of the last completed step (info.ranks) */
  unsigned char *has;     /* [p] contributors, for the data plane */
  /* coordinator */
  int *final_kind;        /* [p] M_READY ... or 0 */
  int *carry_state;       /* [p] CS_* for carry_state_step */
  long carry_state_step;
  unsigned char *late;    /* [p] late at the last completed step: a CARRY report is due next step */
  uint64_t *carry_ns;     /* [p] when a late rank's CARRY report came in this step (0: not yet) */
  uint64_t closed_ns;     /* when the last completed step's window closed */
  double comp[64];        /* compute times the ranks reported (MEASURED window) */
  int ncomp;
  shoal__req_t *rreq, *oreq, *dreq; /* [p] control receive, OPEN send, DECIDE send per rank */
  char *rposted, *oposted, *dposted;
  unsigned char *rbuf;    /* [p * CTL_BYTES] */
  unsigned char *obuf, *dbuf; /* OPEN and DECIDE messages (DEC_HEAD + p) */
};

/* ---- names, params ---- */

static const char *const window_names[SHOAL_PARTIAL_WINDOW__COUNT] = {"measured", "faithful", "fixed"};

const char *shoal_partial_window_name(shoal_partial_window_t w) {
  return (unsigned)w < SHOAL_PARTIAL_WINDOW__COUNT ? window_names[w] : "?";
}

int shoal_partial_window_parse(const char *s, shoal_partial_window_t *out) {
  if (!out) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_partial_window_parse: NULL output pointer");
  for (int i = 0; s && i < SHOAL_PARTIAL_WINDOW__COUNT; i++)
    if (!strcasecmp(s, window_names[i])) {
      *out = (shoal_partial_window_t)i;
      return 0;
    }
  return shoal__seterr(SHOAL_ERR_INVALID, "partial window '%s': expected measured, faithful or fixed", s ? s : "");
}

void shoal_partial_params_init(shoal_partial_params_t *p) {
  memset(p, 0, sizeof *p);
  p->window = SHOAL_PARTIAL_MEASURED;
  p->min_ready = 1;
  p->carry = SHOAL_PARTIAL_DROP;
}

/* ---- little-endian message fields ---- */

static void put32(unsigned char *b, uint32_t v) { for (int i = 0; i < 4; i++) b[i] = (unsigned char)(v >> (8 * i)); }
static void put64(unsigned char *b, uint64_t v) { for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i)); }
static uint32_t get32(const unsigned char *b) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)b[i] << (8 * i);
  return v;
}
static uint64_t get64(const unsigned char *b) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)b[i] << (8 * i);
  return v;
}
static void putd(unsigned char *b, double d) {
  uint64_t v;
  memcpy(&v, &d, 8);
  put64(b, v);
}
static double getd(const unsigned char *b) {
  uint64_t v = get64(b);
  double d;
  memcpy(&d, &v, 8);
  return d;
}

static const char *kind_name(int k) {
  switch (k) {
  case M_READY: return "ready";
  case M_SKIP: return "skip";
  case M_LATE: return "late";
  case M_PAUSE: return "withdraw";
  case M_CARRY: return "carry";
  case M_OPEN: return "open";
  case M_DECIDE: return "decision";
  case M_CANCEL: return "cancel";
  default: return "unknown";
  }
}

/* ---- create / destroy ---- */

int shoal_partial_create(shoal_comm_t *c, size_t count, shoal_dtype_t dtype, shoal_redop_t op,
                         const shoal_partial_params_t *params, shoal_partial_t **out) {
  if (!c || !out) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_partial_create: NULL communicator or output");
  shoal_partial_params_t prm;
  if (params) prm = *params;
  else shoal_partial_params_init(&prm);
  int rc = shoal__reduce_check(dtype, op);
  if (rc) return rc;
  size_t es = shoal_dtype_size(dtype);
  if (count > SIZE_MAX / es) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_partial_create: count %zu overflows", count);
  int p = shoal_comm_size(c);
  if ((unsigned)prm.window >= SHOAL_PARTIAL_WINDOW__COUNT)
    return shoal__seterr(SHOAL_ERR_INVALID, "shoal_partial_create: window %d", (int)prm.window);
  if ((unsigned)prm.carry >= SHOAL_PARTIAL_CARRY__COUNT)
    return shoal__seterr(SHOAL_ERR_INVALID, "shoal_partial_create: carry %d", (int)prm.carry);
  if (prm.carry != SHOAL_PARTIAL_DROP && op != SHOAL_SUM && op != SHOAL_AVG)
    return shoal__seterr(SHOAL_ERR_INVALID, "shoal_partial_create: carry needs sum or avg, not %s", shoal_redop_name(op));
  if (!(prm.tau_s >= 0))
    return shoal__seterr(SHOAL_ERR_INVALID, "shoal_partial_create: tau_s %g (expected >= 0 seconds)", prm.tau_s);
  if (prm.tau_s > 1e9) prm.tau_s = 1e9; /* "a huge tau_s", INFINITY too: longer than any op's deadline */
  if (prm.min_ready < 0 || prm.min_ready > p)
    return shoal__seterr(SHOAL_ERR_INVALID, "shoal_partial_create: min_ready %d on %d ranks", prm.min_ready, p);
  if (prm.min_ready == 0) prm.min_ready = 1;
  if (prm.excuse_late != 0 && prm.excuse_late != 1)
    return shoal__seterr(SHOAL_ERR_INVALID, "shoal_partial_create: excuse_late %d (expected 0 or 1)", prm.excuse_late);
  if (prm.carry_weight == 0) prm.carry_weight = 1;
  if (!(prm.carry_weight > 0 && prm.carry_weight <= 1))
    return shoal__seterr(SHOAL_ERR_INVALID, "shoal_partial_create: carry_weight %g (expected 0 < w <= 1)",
                         prm.carry_weight);
  int floating = dtype == SHOAL_FLOAT32 || dtype == SHOAL_FLOAT64 || dtype == SHOAL_BFLOAT16 || dtype == SHOAL_FLOAT16;
  if (prm.carry_weight < 1 && !floating)
    return shoal__seterr(SHOAL_ERR_INVALID, "shoal_partial_create: carry_weight %g needs a floating dtype, not %s",
                         prm.carry_weight, shoal_dtype_name(dtype));
  shoal__coll_ctx_t x;
  shoal__coll_ctx(c, &x);
  shoal__relay_shape_t shape;
  size_t chunk;
  if ((rc = shoal__relay_pick(&x, count * es, prm.ntrees, prm.fanout, &shape, &chunk))) return rc;
  if ((rc = shoal__wake_open(c->w))) return rc;
  shoal_partial_t *pa = calloc(1, sizeof *pa);
  if (!pa) return shoal__seterr(SHOAL_ERR_NOMEM, "shoal_partial_create: out of memory");
  pa->c = c;
  pa->p = p;
  pa->rank = shoal_comm_rank(c);
  pa->count = count;
  pa->es = es;
  pa->bytes = count * es;
  pa->dtype = dtype;
  pa->redop = op;
  pa->prm = prm;
  pa->shape = shape;
  pa->chunk = chunk;
  /* S/B: measured, S = the call's bytes and B = p x the slowest link class of the profile; faithful,
   * AdapCC's constants, 100 MB as bits over 50 Gbit/s per rank */
  pa->s_over_b = prm.window == SHOAL_PARTIAL_FAITHFUL ? 100e6 * 8 / (50e9 * p) : (double)pa->bytes * x.flat.beta_s / p;
  pthread_mutex_init(&pa->mu, NULL);
  pa->next_arrive = pa->first_arrive = -1;
  pa->withdraw_step = pa->open_step = pa->decided_step = pa->done_step = -1;
  pa->late_step = pa->last_step = pa->carry_sent_step = pa->carry_state_step = -1;
  pa->carry_for[0] = pa->carry_for[1] = -1;
  for (int i = 0; i < NSLOT; i++) pa->arr[i].step = -1;
  size_t P = (size_t)p;
  pa->dec = calloc(P, 1);
  pa->cov = calloc(P, 1);
  pa->has = calloc(P, 1);
  pa->late = calloc(P, 1);
  pa->carry_ns = calloc(P, sizeof *pa->carry_ns);
  pa->final_kind = calloc(P, sizeof *pa->final_kind);
  pa->carry_state = calloc(P, sizeof *pa->carry_state);
  pa->rreq = calloc(P, sizeof *pa->rreq);
  pa->oreq = calloc(P, sizeof *pa->oreq);
  pa->dreq = calloc(P, sizeof *pa->dreq);
  pa->rposted = calloc(P, 1);
  pa->oposted = calloc(P, 1);
  pa->dposted = calloc(P, 1);
  pa->rbuf = calloc(P, CTL_BYTES);
  pa->obuf = calloc(DEC_HEAD + P, 1);
  pa->dbuf = calloc(DEC_HEAD + P, 1);
  int ok = pa->dec && pa->cov && pa->has && pa->late && pa->carry_ns && pa->final_kind && pa->carry_state && pa->rreq && pa->oreq &&
           pa->dreq && pa->rposted && pa->oposted && pa->dposted && pa->rbuf && pa->obuf && pa->dbuf;
  if (ok && prm.carry != SHOAL_PARTIAL_DROP) {
    pa->carry[0] = calloc(pa->bytes ? pa->bytes : 1, 1);
    pa->carry[1] = calloc(pa->bytes ? pa->bytes : 1, 1);
    ok = pa->carry[0] && pa->carry[1];
  }
  if (!ok) {
    size_t bytes = pa->bytes;
    shoal_partial_destroy(pa);
    return shoal__seterr(SHOAL_ERR_NOMEM, "shoal_partial_create: out of memory for %d ranks, %zu B", p, bytes);
  }
  SHOAL_INFO("COLL", "partial allreduce: %zu x %s %s on %d ranks: window %s (S/B %.3f ms), carry %d, %d tree%s of "
             "fanout %d, chunk %zu B", count, shoal_dtype_name(dtype), shoal_redop_name(op), p,
             shoal_partial_window_name(prm.window), pa->s_over_b * 1e3, (int)prm.carry, shape.ntrees,
             shape.ntrees == 1 ? "" : "s", shape.fanout, chunk);
  *out = pa;
  return 0;
}

void shoal_partial_destroy(shoal_partial_t *pa) {
  if (!pa) return;
  pthread_mutex_destroy(&pa->mu);
  free(pa->carry[0]);
  free(pa->carry[1]);
  free(pa->dec);
  free(pa->cov);
  free(pa->has);
  free(pa->late);
  free(pa->carry_ns);
  free(pa->final_kind);
  free(pa->carry_state);
  free(pa->rreq);
  free(pa->oreq);
  free(pa->dreq);
  free(pa->rposted);
  free(pa->oposted);
  free(pa->dposted);
  free(pa->rbuf);
  free(pa->obuf);
  free(pa->dbuf);
  free(pa);
}

/* ---- the compute thread's calls ---- */

int shoal_partial_arrive(shoal_partial_t *pa, long step, const void *data, double compute_s) {
  if (!pa) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_partial_arrive: NULL");
  if (step < 0) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_partial_arrive: step %ld", step);
  pthread_mutex_lock(&pa->mu);
  int rc = 0;
  if (pa->next_arrive >= 0 && step != pa->next_arrive)
    rc = shoal__seterr(SHOAL_ERR_INVALID, "shoal_partial_arrive: step %ld, expected %ld (each step once, in order)",
                       step, pa->next_arrive);
  else if (step - pa->done_step > NSLOT && pa->done_step >= 0)
    rc = shoal__seterr(SHOAL_ERR_INVALID, "shoal_partial_arrive: step %ld is more than %d steps ahead of the last "
                       "completed step %ld", step, NSLOT, pa->done_step);
  else if (pa->done_step < 0 && pa->first_arrive >= 0 && step - pa->first_arrive >= NSLOT) /* before any step */
    rc = shoal__seterr(SHOAL_ERR_INVALID, "shoal_partial_arrive: step %ld is more than %d steps ahead of the first "
                       "step (%ld), and no step has completed yet", step, NSLOT, pa->first_arrive);
  if (rc) {
    pthread_mutex_unlock(&pa->mu);
    return rc;
  }
  arrival_t *a = &pa->arr[step % NSLOT];
  *a = (arrival_t){step, data ? ARR_DATA : ARR_SKIP, data, compute_s};
  pa->next_arrive = step + 1;
  if (pa->first_arrive < 0) pa->first_arrive = step;
  if (pa->decided_step >= step) { /* decided without this rank: it never reported ready */
    if (pa->late_step == step && !pa->late_arrived) {
      /* carry into step + 1 unless that one is decided too */
      int slot = (int)((step + 1) % 2);
      pa->late_has = 0;
      if (data && pa->decided_step < step + 1) {
        memcpy(pa->carry[slot], data, pa->bytes);
        pa->carry_has[slot] = 1;
        pa->carry_for[slot] = step + 1;
        pa->late_has = 1;
      } else if (data) {
        pa->dropped++;
      }
      pa->late_arrived = 1;
    } else if (data) {
      pa->dropped++;
    }
  }
  pthread_mutex_unlock(&pa->mu);
  shoal__wake(pa->c->w);
  return 0;
}

int shoal_partial_withdraw(shoal_partial_t *pa, long step) {
  if (!pa) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_partial_withdraw: NULL");
  pthread_mutex_lock(&pa->mu);
  pa->withdraw_step = step;
  pthread_mutex_unlock(&pa->mu);
  shoal__wake(pa->c->w);
  return 0;
}

double shoal_partial_window_left(const shoal_partial_t *pa, long step) {
  if (!pa) return -1;
  pthread_mutex_t *mu = (pthread_mutex_t *)&pa->mu;
  pthread_mutex_lock(mu);
  double left = -1;
  if (pa->decided_step >= step) {
    left = 0;
  } else if (pa->open_step >= step) {
    left = pa->open_tau - (double)(shoal__now_ns() - pa->open_ns) * 1e-9;
    if (left < 0) left = 0;
  }
  pthread_mutex_unlock(mu);
  return left;
}

int shoal_partial_state(const shoal_partial_t *pa, long step) {
  if (!pa) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_partial_state: NULL");
  pthread_mutex_t *mu = (pthread_mutex_t *)&pa->mu;
  pthread_mutex_lock(mu);
  int st = pa->done_step >= step      ? SHOAL_PARTIAL_DONE
           : pa->decided_step >= step ? SHOAL_PARTIAL_DECIDED
           : pa->open_step >= step    ? SHOAL_PARTIAL_OPEN
                                      : SHOAL_PARTIAL_PENDING;
  pthread_mutex_unlock(mu);
  return st;
}

/* ---- the communication thread ---- */

/* This rank's view of step k: its arrival, whether it withdrew, and its late
 * data of k - 1 (for the CARRY report). */
typedef struct local {
  int arr;           /* ARR_* */
  double compute_s;
  int withdrawn;
  int carry_due;     /* a CARRY report is due (late at k - 1, carry on) */
  int carry_ready;   /* ... and the late data's fate is known */
  int carry_has;
} local_t;

static void read_local(shoal_partial_t *pa, long k, local_t *l) {
  pthread_mutex_lock(&pa->mu);
  const arrival_t *a = &pa->arr[k % NSLOT];
  l->arr = a->step == k ? a->state : ARR_NONE;
  l->compute_s = a->step == k ? a->compute_s : 0;
  l->withdrawn = pa->withdraw_step == k;
  l->carry_due = pa->prm.carry != SHOAL_PARTIAL_DROP && pa->late_step == k - 1 && k >= 1;
  l->carry_ready = l->carry_due && pa->late_arrived;
  l->carry_has = l->carry_ready && pa->late_has;
  pthread_mutex_unlock(&pa->mu);
}

static int ctl_send(shoal_partial_t *pa, const shoal__op_t *op, shoal__req_t *req, unsigned char *buf, int kind,
                    int flags, long k, double compute_s) {
  memset(buf, 0, CTL_BYTES);
  put32(buf, (uint32_t)kind);
  put32(buf + 4, (uint32_t)flags);
  put64(buf + 8, (uint64_t)k);
  putd(buf + 16, compute_s);
  return shoal__isend(pa->c, op, 0, buf, CTL_BYTES, req);
}

/* Wait for network activity, a local event (polled) or `until_ns`, within `deadline_ns`. */
static int pause_for(shoal_partial_t *pa, const shoal__op_t *op, int local_events, uint64_t until_ns,
                     uint64_t deadline_ns) {
  uint64_t now = shoal__now_ns();
  uint64_t until = deadline_ns;
  if (until_ns && until_ns < until) until = until_ns;
  if (local_events && !shoal__wake_ends_wait(pa->c->w) && now + LOCAL_POLL_MS * 1000000ull < until) until = now + LOCAL_POLL_MS * 1000000ull;
  int ms = until > now ? (int)((until - now + 999999) / 1000000) : 0;
  if (ms > 1000) ms = 1000;
  return shoal__progress(pa->c, op, ms);
}

static int req_state(const shoal__req_t *r) { return r->state; }

/* After the decision: this rank's own late data, and the carry it uses. */
static void settle_own(shoal_partial_t *pa, long k, int sent_final, const void **fresh, void **carried) {
  unsigned char mine = pa->dec[pa->rank];
  pthread_mutex_lock(&pa->mu);
  pa->decided_step = k;
  const arrival_t *a = &pa->arr[k % NSLOT];
  int arr = a->step == k ? a->state : ARR_NONE;
  *fresh = (mine & 1) && arr == ARR_DATA ? a->data : NULL;
  /* late: the coordinator's rule exactly (it expects a CARRY report from these next step): reported LATE, or
   * READY after the window closed. Its data of k, here already or still to come, goes to step k + 1 (carry)
   * or is dropped */
  if (sent_final == M_LATE || (sent_final == M_READY && !(mine & 1))) {
    if (pa->prm.carry != SHOAL_PARTIAL_DROP) {
      pa->late_step = k;
      pa->late_arrived = arr != ARR_NONE;
      pa->late_has = 0;
      if (arr == ARR_DATA) {
        int slot = (int)((k + 1) % 2);
        memcpy(pa->carry[slot], a->data, pa->bytes);
        pa->carry_has[slot] = 1;
        pa->carry_for[slot] = k + 1;
        pa->late_has = 1;
      }
    } else if (arr == ARR_DATA) {
      pa->dropped++;
    }
  }
  int slot = (int)(k % 2);
  *carried = NULL;
  if (pa->carry_has[slot] && pa->carry_for[slot] == k) {
    if (mine & 2) *carried = pa->carry[slot];
    else pa->dropped++; /* carried data that missed this window too */
  }
  pthread_mutex_unlock(&pa->mu);
}

/* A member waits a little past the deadline, in the decision and in the data alike: the coordinator,
 * which knows which rank is missing, times out first and its abort notice names that rank. */
static uint64_t member_grace_ns(const shoal_partial_t *pa) {
  double grace = 0.2 * pa->c->timeout_s < 2 ? 0.2 * pa->c->timeout_s : 2;
  return (uint64_t)(grace * 1e9);
}

static int member_step(shoal_partial_t *pa, const shoal__op_t *op, long k, int *cancelled) {
  shoal_comm_t *c = pa->c;
  size_t dbytes = DEC_HEAD + (size_t)pa->p;
  unsigned char ctl[2][CTL_BYTES], *in = pa->dbuf;
  shoal__req_t sreq[2], rreq;
  char sposted[2] = {0, 0}, rposted = 0;
  int sent_final = 0, rc = 0, decided = 0;
  double t0 = shoal__now_s();
  uint64_t deadline = op->deadline_ns + member_grace_ns(pa);
  if ((rc = shoal__post_recv(c, op, 0, in, dbytes, &rreq, &rposted))) return rc;
  while (!decided) {
    local_t l;
    read_local(pa, k, &l);
    if (l.carry_ready && pa->carry_sent_step != k) {
      if ((rc = ctl_send(pa, op, &sreq[0], ctl[0], M_CARRY, l.carry_has, k, 0))) return rc;
      sposted[0] = 1;
      pa->carry_sent_step = k;
    }
    if (!sent_final && (l.arr != ARR_NONE || l.withdrawn) && (!l.carry_due || pa->carry_sent_step == k)) {
      sent_final = l.arr == ARR_DATA ? M_READY : l.arr == ARR_SKIP ? M_SKIP : M_PAUSE;
      if ((rc = ctl_send(pa, op, &sreq[1], ctl[1], sent_final, 0, k, l.compute_s))) return rc;
      sposted[1] = 1;
    }
    if ((rc = shoal__progress(c, op, 0))) return rc;
    if (req_state(&rreq) < 0) return req_state(&rreq);
    if (req_state(&rreq) == 1) {
      rposted = 0;
      int kind = (int)get32(in);
      long step = (long)get64(in + 8);
      if (step != k || (kind != M_OPEN && kind != M_DECIDE && kind != M_CANCEL))
        return shoal__comm_fail(c, SHOAL_ERR_PROTOCOL, op, 0, "expected the coordinator's open, decision or cancel of "
                                "step %ld, got %s of step %ld", k, kind_name(kind), step);
      if (kind == M_OPEN) {
        pthread_mutex_lock(&pa->mu);
        if (pa->open_step < k) pa->open_step = k;
        pa->open_ns = shoal__now_ns();
        pa->open_tau = getd(in + 16);
        pthread_mutex_unlock(&pa->mu);
        if ((rc = shoal__post_recv(c, op, 0, in, dbytes, &rreq, &rposted))) return rc;
        continue;
      }
      if (kind == M_CANCEL) {
        if (sent_final != M_PAUSE && sent_final != M_SKIP)
          return shoal__comm_fail(c, SHOAL_ERR_PROTOCOL, op, 0, "the coordinator cancelled the step but this rank "
                                  "reported %s", sent_final ? kind_name(sent_final) : "nothing");
        *cancelled = 1;
        break;
      }
      memcpy(pa->dec, in + DEC_HEAD, (size_t)pa->p);
      decided = 1;
      break;
    }
    uint64_t now = shoal__now_ns();
    if (now >= deadline)
      return shoal__comm_fail(c, SHOAL_ERR_TIMEOUT, op, 0, "timed out after %.1f s (SHOAL_TIMEOUT) waiting for the "
                              "coordinator's decision (this rank reported %s)", shoal__now_s() - t0,
                              sent_final ? kind_name(sent_final) : "nothing yet");
    int local_events = !sent_final || (l.carry_due && pa->carry_sent_step != k);
    if ((rc = pause_for(pa, op, local_events, 0, deadline))) return rc;
  }
  if (decided && !sent_final) {
    sent_final = M_LATE;
    if ((rc = ctl_send(pa, op, &sreq[1], ctl[1], M_LATE, 0, k, 0))) return rc;
    sposted[1] = 1;
  }
  for (int i = 0; i < 2 && !rc; i++) rc = shoal__wait_posted(c, op, &sreq[i], &sposted[i]);
  if (rc || *cancelled) return rc;
  return sent_final; /* > 0: decided */
}

static double median(double *v, int n) {
  double t[64];
  memcpy(t, v, (size_t)n * sizeof *t);
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
      double x = t[j];
      t[j] = t[j - 1];
      t[j - 1] = x;
    }
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static double tau_of(const shoal_partial_t *pa) {
  if (pa->prm.tau_s > 0) return pa->prm.tau_s;
  if (pa->prm.window == SHOAL_PARTIAL_MEASURED && pa->ncomp > 0) {
    double t = 0.1 * median((double *)pa->comp, pa->ncomp < 64 ? pa->ncomp : 64);
    return t < 0.1 ? t : 0.1;
  }
  return 0.1;
}

/* Seconds after the first ready rank at which the window closes with m ready. */
static double window_of(const shoal_partial_t *pa, int m) {
  double tau = tau_of(pa), w = tau;
  if (pa->prm.window != SHOAL_PARTIAL_FIXED && m >= 2) {
    double N = pa->p, buy = pa->s_over_b * (N + 2 - 2 * N / m);
    if (buy < w) w = buy;
  }
  if (pa->prm.window == SHOAL_PARTIAL_FAITHFUL) w = ceil(w / FAITHFUL_TICK_S - 1e-9) * FAITHFUL_TICK_S;
  return w;
}

static void fill_dec(unsigned char *b, int kind, long k, int ncontrib, double window_s, const unsigned char *flags,
                     int p) {
  memset(b, 0, DEC_HEAD);
  put32(b, (uint32_t)kind);
  put32(b + 4, (uint32_t)ncontrib);
  put64(b + 8, (uint64_t)k);
  putd(b + 16, window_s);
  if (flags) memcpy(b + DEC_HEAD, flags, (size_t)p);
  else memset(b + DEC_HEAD, 0, (size_t)p);
}

/* The coordinator's count of one step's reports. */
typedef struct tally {
  int m, nskip, npause; /* ranks ready, skipping, paused (before the decision) */
  int nfinal;           /* ranks whose final report is in (any time) */
  int decided, opened;  /* the decision is sent; the others were told the step is under way */
  uint64_t t_first;     /* when the first rank was ready (0: none yet) */
} tally_t;

static void tally_add(shoal_partial_t *pa, tally_t *t, int kind, double compute_s) {
  if (kind == M_READY) {
    t->m++;
    if (!t->t_first) t->t_first = shoal__now_ns();
    if (compute_s > 0) pa->comp[pa->ncomp++ % 64] = compute_s;
  }
  t->nskip += kind == M_SKIP;
  t->npause += kind == M_PAUSE;
}

static int post_report_recv(shoal_partial_t *pa, const shoal__op_t *op, int i) {
  return shoal__post_recv(pa->c, op, i, pa->rbuf + (size_t)i * CTL_BYTES, CTL_BYTES, &pa->rreq[i], &pa->rposted[i]);
}

/* The step's start: which late ranks owe a CARRY report, a receive posted for every other rank's report. */
static int coord_begin(shoal_partial_t *pa, const shoal__op_t *op, long k) {
  int p = pa->p, rc;
  if (pa->carry_state_step != k) { /* a new step (not a retry after a cancel): late ranks owe a CARRY report */
    for (int i = 0; i < p; i++) {
      pa->carry_state[i] = pa->prm.carry != SHOAL_PARTIAL_DROP && pa->late[i] ? CS_EXPECTED : CS_NONE;
      pa->carry_ns[i] = 0;
    }
    pa->carry_state_step = k;
  }
  for (int i = 0; i < p; i++) {
    pa->final_kind[i] = 0;
    pa->oposted[i] = pa->dposted[i] = 0;
    pa->rposted[i] = 0;
    if (i != pa->rank && (rc = post_report_recv(pa, op, i))) return rc;
  }
  return 0;
}

/* This rank's own report, once its data (or its skip, pause or withdrawal) and its carry are known. */
static void coord_own(shoal_partial_t *pa, long k, tally_t *t) {
  local_t l;
  read_local(pa, k, &l);
  if (l.carry_ready && pa->carry_state[pa->rank] == CS_EXPECTED) {
    pa->carry_state[pa->rank] = l.carry_has ? CS_DATA : CS_EMPTY;
    pa->carry_ns[pa->rank] = shoal__now_ns();
  }
  if (!pa->final_kind[pa->rank] && !t->decided && (l.arr != ARR_NONE || l.withdrawn) &&
      pa->carry_state[pa->rank] != CS_EXPECTED) {
    int kind = l.arr == ARR_DATA ? M_READY : l.arr == ARR_SKIP ? M_SKIP : M_PAUSE;
    pa->final_kind[pa->rank] = kind;
    t->nfinal++;
    tally_add(pa, t, kind, l.compute_s);
  }
}

/* The others' reports that arrived. */
static int coord_reports(shoal_partial_t *pa, const shoal__op_t *op, long k, tally_t *t) {
  shoal_comm_t *c = pa->c;
  int rc;
  for (int i = 0; i < pa->p; i++) {
    if (!pa->rposted[i]) continue;
    if (req_state(&pa->rreq[i]) < 0) return req_state(&pa->rreq[i]);
    if (req_state(&pa->rreq[i]) != 1) continue;
    pa->rposted[i] = 0;
    const unsigned char *b = pa->rbuf + (size_t)i * CTL_BYTES;
    int kind = (int)get32(b), flags = (int)get32(b + 4);
    long step = (long)get64(b + 8);
    double comp = getd(b + 16);
    if (step != k || kind < M_READY || kind > M_CARRY || (kind == M_LATE && !t->decided))
      return shoal__comm_fail(c, SHOAL_ERR_PROTOCOL, op, i, "unexpected report %s of step %ld%s", kind_name(kind),
                              step, kind == M_LATE ? " before the decision" : "");
    if (kind == M_CARRY) {
      if (!t->decided) pa->carry_state[i] = flags & 1 ? CS_DATA : CS_EMPTY;
      if (!pa->carry_ns[i]) pa->carry_ns[i] = shoal__now_ns();
      if ((rc = post_report_recv(pa, op, i))) return rc;
      continue;
    }
    pa->final_kind[i] = kind;
    t->nfinal++;
    if (t->decided) continue;
    if (pa->carry_state[i] == CS_EXPECTED) pa->carry_state[i] = CS_EMPTY; /* reported without its CARRY: none */
    tally_add(pa, t, kind, comp);
  }
  return 0;
}

/* buf (an OPEN, CANCEL or DECIDE) to every other rank, on reqs / posted. */
static int send_to_others(shoal_partial_t *pa, const shoal__op_t *op, unsigned char *buf, shoal__req_t *reqs,
                          char *posted) {
  int rc;
  size_t dbytes = DEC_HEAD + (size_t)pa->p;
  for (int i = 0; i < pa->p; i++)
    if (i != pa->rank && (rc = shoal__post_send(pa->c, op, i, buf, dbytes, &reqs[i], &posted[i]))) return rc;
  return 0;
}

/* Ranks late in the step before that have reported nothing in this one: still busy with the step they were
 * late for (their CARRY report comes when that step's data arrives), so they could only skip this one. */
static int ranks_still_out(const shoal_partial_t *pa) {
  int n = 0;
  for (int i = 0; i < pa->p; i++)
    n += pa->late[i] && !pa->final_kind[i] &&
         (pa->carry_state[i] == CS_EXPECTED || pa->prm.carry == SHOAL_PARTIAL_DROP);
  return n;
}

/* With excuse_late, once min_ready ranks are ready: is every rank not reported yet one whose late data of
 * the last step came (or has not yet come) more than a window after that step's window closed? Such a rank
 * started this step at least that much behind the others, so the window would wait its full length and
 * most likely close without it anyway (a persistently slow worker: every step). */
static int only_far_behind_missing(const shoal_partial_t *pa, uint64_t now, double win) {
  for (int i = 0; i < pa->p; i++) {
    if (pa->final_kind[i]) continue;
    uint64_t came = pa->carry_ns[i] ? pa->carry_ns[i] : now;
    if (!pa->late[i] || (double)(came - pa->closed_ns) * 1e-9 <= win) return 0;
  }
  return 1;
}

/* Before the decision: tell the others the step is under way, cancel it (every rank paused, none ready),
 * or close the window and send the decision. *wake: when the window closes (0: no timer). */
static int coord_decide(shoal_partial_t *pa, const shoal__op_t *op, long k, tally_t *t, uint64_t now, uint64_t *wake,
                        int *cancelled, double *window_s) {
  int p = pa->p, rc;
  int carry_wait = 0;
  if (pa->prm.carry == SHOAL_PARTIAL_CARRY_WAIT)
    for (int i = 0; i < p; i++) carry_wait |= pa->carry_state[i] == CS_EXPECTED;
  int cancel = t->m == 0 && t->npause > 0 && t->nfinal == p;
  int close = 0;
  double w = t->t_first ? (double)(now - t->t_first) * 1e-9 : 0;
  if (!cancel && t->nfinal == p) {
    close = 1;
  } else if (!cancel && t->m >= 1) {
    int need = pa->prm.min_ready < p - t->nskip - t->npause ? pa->prm.min_ready : p - t->nskip - t->npause;
    double win = window_of(pa, t->m);
    if (pa->prm.excuse_late && need > 1 && t->m < need) {
      /* a second straggler while one is still out: past tau, the one still out is not waited for twice */
      double tau = tau_of(pa);
      if (w >= tau) {
        need -= ranks_still_out(pa);
        if (need < 1) need = 1;
      } else {
        *wake = t->t_first + (uint64_t)(tau * 1e9) + 1;
      }
    }
    if (t->m >= need && (w >= win || (pa->prm.excuse_late && only_far_behind_missing(pa, now, win)))) close = 1;
    else if (t->m >= need) *wake = t->t_first + (uint64_t)(win * 1e9) + 1;
  }
  if (t->m >= 1 && !t->opened && !close) { /* tell the others the step is under way */
    double tau = tau_of(pa);
    pthread_mutex_lock(&pa->mu);
    if (pa->open_step < k) pa->open_step = k;
    pa->open_ns = t->t_first;
    pa->open_tau = tau;
    pthread_mutex_unlock(&pa->mu);
    fill_dec(pa->obuf, M_OPEN, k, 0, tau, NULL, p); /* the window's longest wait rides in window_s */
    if ((rc = send_to_others(pa, op, pa->obuf, pa->oreq, pa->oposted))) return rc;
    t->opened = 1;
  }
  if (cancel) {
    fill_dec(pa->dbuf, M_CANCEL, k, 0, 0, NULL, p);
    if ((rc = send_to_others(pa, op, pa->dbuf, pa->dreq, pa->dposted))) return rc;
    *cancelled = 1;
    return 0;
  }
  if (close && !carry_wait) {
    int n = 0;
    for (int i = 0; i < p; i++) {
      pa->dec[i] = (unsigned char)((pa->final_kind[i] == M_READY ? 1 : 0) | (pa->carry_state[i] == CS_DATA ? 2 : 0));
      n += (pa->dec[i] & 1) + ((pa->dec[i] >> 1) & 1);
    }
    *window_s = w;
    fill_dec(pa->dbuf, M_DECIDE, k, n, w, pa->dec, p);
    if ((rc = send_to_others(pa, op, pa->dbuf, pa->dreq, pa->dposted))) return rc;
    t->decided = 1;
    pa->closed_ns = now;
    if (!pa->final_kind[pa->rank]) { /* this rank itself was late */
      pa->final_kind[pa->rank] = M_LATE;
      t->nfinal++;
    }
  }
  return 0;
}

/* The step's deadline passed: fail naming the first rank whose report (or late data) is missing. */
static int coord_timeout(shoal_partial_t *pa, const shoal__op_t *op, const tally_t *t, uint64_t now, uint64_t t0) {
  int p = pa->p, who = -1;
  for (int i = 0; i < p && who < 0; i++)
    if (i != pa->rank && (!pa->final_kind[i] || pa->carry_state[i] == CS_EXPECTED)) who = i;
  return shoal__comm_fail(pa->c, SHOAL_ERR_TIMEOUT, op, who, "timed out after %.1f s (SHOAL_TIMEOUT) as coordinator: "
                          "%d of %d ranks ready, %d reported; waiting for rank %d's %s", (double)(now - t0) * 1e-9,
                          t->m, p, t->nfinal, who, who >= 0 && pa->final_kind[who] ? "late data (carry)" : "report");
}

static int coord_step(shoal_partial_t *pa, const shoal__op_t *op, long k, int *cancelled, double *window_s) {
  shoal_comm_t *c = pa->c;
  int p = pa->p, rc = 0;
  if ((rc = coord_begin(pa, op, k))) return rc;
  tally_t t = {0};
  uint64_t t0 = shoal__now_ns();
  for (;;) {
    coord_own(pa, k, &t);
    if ((rc = shoal__progress(c, op, 0)) || (rc = coord_reports(pa, op, k, &t))) return rc;
    uint64_t now = shoal__now_ns();
    uint64_t wake = 0;
    if (!t.decided) {
      if ((rc = coord_decide(pa, op, k, &t, now, &wake, cancelled, window_s))) return rc;
      if (*cancelled) break;
    }
    if (t.decided && t.nfinal == p) break;
    if (now >= op->deadline_ns) return coord_timeout(pa, op, &t, now, t0);
    int local_events = !pa->final_kind[pa->rank] || pa->carry_state[pa->rank] == CS_EXPECTED;
    if ((rc = pause_for(pa, op, local_events && !t.decided, wake, op->deadline_ns))) return rc;
  }
  for (int i = 0; i < p && !rc; i++) {
    rc = shoal__wait_posted(c, op, &pa->oreq[i], &pa->oposted[i]);
    if (!rc) rc = shoal__wait_posted(c, op, &pa->dreq[i], &pa->dposted[i]);
  }
  if (rc || *cancelled) return rc;
  /* ranks whose data of k missed the window owe a CARRY report in k + 1 */
  for (int i = 0; i < p; i++)
    pa->late[i] = pa->final_kind[i] == M_LATE || (pa->final_kind[i] == M_READY && !(pa->dec[i] & 1));
  return pa->final_kind[pa->rank];
}

/* The data of a decided step. Every rank takes part, in or not, and every rank sees the same decision
 * bytes, so all take the same branch:
 * - no data set in at all: zeros, nothing sent;
 * - a sum or an average: the chooser's algorithm (the one shoal_allreduce takes for this size: ring or
 *   trees across hosts, shared memory on one), each rank's input being its fresh and carried data added,
 *   or SUM's identity when it has neither (a late rank), reduced as a sum and divided by the n data sets
 *   for an average. A rank that is out costs the step nothing more than a rank that is in;
 * - min, max, prod with a rank out: the relay trees, which route around it (these ops never carry).
 * Fresh + carried is added here only, into dst, which the algorithm then reduces in place. */
static int data_plane(shoal_partial_t *pa, const shoal__op_t *dop, const void *fresh, void *carried, void *dst,
                      double n) {
  shoal_comm_t *c = pa->c;
  if (n == 0 || pa->count == 0) {
    if (pa->bytes) memset(dst, 0, pa->bytes);
    return 0;
  }
  if (carried && pa->prm.carry_weight != 1) /* this rank's own buffer of carried data, used once */
    shoal__reduce_scale(carried, pa->count, pa->dtype, pa->prm.carry_weight);
  const void *src = fresh ? fresh : carried;
  if (fresh && carried) {
    shoal__reduce3(dst, fresh, carried, pa->count, pa->dtype, pa->redop);
    src = dst;
  }
  int summed = pa->redop == SHOAL_SUM || pa->redop == SHOAL_AVG, full = 1;
  for (int i = 0; i < pa->p && full; i++) full = pa->has[i];
  shoal__choice_t ch;
  if (pa->p > 1 && (summed || full) &&
      shoal__coll_choose(c, pa->bytes, SHOAL_ALGO_AUTO, SHOAL__CHOOSE_QUIET, &ch) == 0 && ch.algo != SHOAL_ALGO_RELAY) {
    if (!src) {
      shoal__reduce_sum_identity(dst, pa->count, pa->dtype);
      src = dst;
    }
    shoal__op_t aop = *dop;
    aop.algo = (uint8_t)ch.algo;
    aop.tag = TAG_DATA + (int32_t)ch.algo; /* ranks that chose differently fail on a mismatch, never mix */
    /* an average over p data sets is the algorithm's own (divided where each block is final, a p-th of the
     * vector per rank); over another number, a sum divided here */
    int divide = pa->redop == SHOAL_AVG && n != pa->p;
    if (divide) aop.redop = (uint8_t)SHOAL_SUM;
    int rc = shoal__algo(ch.algo)->run(c, &aop, src, dst, pa->count, &ch.plan);
    if (!rc && divide) shoal__reduce_avg_finish_w(dst, pa->count, pa->dtype, n);
    return rc;
  }
  if (pa->p == 1) { /* this rank's data is the result */
    if (src != dst) memcpy(dst, src, pa->bytes);
    if (pa->redop == SHOAL_AVG) shoal__reduce_avg_finish_w(dst, pa->count, pa->dtype, n);
    return 0;
  }
  if (src == dst) { /* the relay trees write dst while they read the input (SHOAL_ALGO=relay forced) */
    void *in = shoal__coll_scratch(1, pa->bytes);
    if (!in) return shoal__comm_fail(c, SHOAL_ERR_NOMEM, dop, -1, "no memory for the relay trees' input");
    memcpy(in, dst, pa->bytes);
    src = in;
  }
  shoal__relay_job_t job = {.contrib = src, .dst = dst, .count = pa->count, .dtype = pa->dtype,
                            .redop = pa->redop, .has_local = pa->has, .divisor = n, .shape = pa->shape,
                            .chunk_bytes = pa->chunk};
  return shoal__relay_run(c, dop, &job);
}

int shoal_partial_allreduce(shoal_partial_t *pa, long step, void *recvbuf, shoal_partial_info_t *info) {
  if (!pa) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_partial_allreduce: NULL");
  shoal_comm_t *c = pa->c;
  if (!recvbuf && pa->count)
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "shoal_partial_allreduce: recvbuf is NULL"));
  if (step < 0 || (pa->last_step >= 0 && step != pa->last_step + 1))
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "shoal_partial_allreduce: step %ld, expected %ld "
                                               "(consecutive steps, the same on every rank)", step, pa->last_step + 1));
  double t0 = shoal__now_s();
  shoal__op_t op = {.opcode = SHOAL__OP_PARTIAL, .dtype = (uint8_t)pa->dtype, .redop = (uint8_t)pa->redop,
                    .root = -1, .count = pa->count, .tag = TAG_CTL, .step1 = step + 1};
  int rc = shoal__op_begin(c, &op);
  if (rc) return rc;
  int cancelled = 0, final;
  double window_s = 0;
  if (pa->rank == 0) final = coord_step(pa, &op, step, &cancelled, &window_s);
  else final = member_step(pa, &op, step, &cancelled);
  double t_decided = shoal__now_s();
  rc = final < 0 ? final : 0;
  if (!rc && cancelled) {
    pthread_mutex_lock(&pa->mu);
    if (pa->withdraw_step == step) pa->withdraw_step = -1;
    pthread_mutex_unlock(&pa->mu);
    SHOAL_DEBUG("COLL", "partial-allreduce step %ld: cancelled (every rank withdrew)", step);
    rc = shoal__op_end(c, &op, 0);
    return rc ? rc : 1;
  }
  const void *fresh = NULL;
  void *carried = NULL;
  int n = 0, nfresh = 0, ncarried = 0;
  if (!rc) {
    if (pa->rank != 0) window_s = getd(pa->dbuf + 16);
    settle_own(pa, step, final, &fresh, &carried);
    for (int i = 0; i < pa->p; i++) {
      pa->has[i] = (pa->dec[i] & 3) != 0;
      nfresh += pa->dec[i] & 1;
      ncarried += (pa->dec[i] >> 1) & 1;
    }
    n = nfresh + ncarried;
    shoal__op_t dop = op;
    dop.tag = TAG_DATA;
    if (pa->rank != 0) dop.deadline_ns += member_grace_ns(pa);
    rc = data_plane(pa, &dop, fresh, carried, recvbuf, nfresh + pa->prm.carry_weight * ncarried);
  }
  rc = shoal__op_end(c, &op, rc);
  if (rc) return rc;
  memcpy(pa->cov, pa->dec, (size_t)pa->p);
  pthread_mutex_lock(&pa->mu);
  pa->done_step = step;
  pa->carry_has[step % 2] = 0;
  if (pa->withdraw_step == step) pa->withdraw_step = -1;
  int dropped = pa->dropped;
  pthread_mutex_unlock(&pa->mu);
  pa->last_step = step;
  SHOAL_DEBUG("COLL", "partial-allreduce seq %u step %ld: %d fresh + %d carried of %d ranks after a %.2f ms window "
              "(control %.2f ms, data %.2f ms)%s", op.seq, step, nfresh, ncarried, pa->p, window_s * 1e3,
              (t_decided - t0) * 1e3, (shoal__now_s() - t_decided) * 1e3,
              pa->dec[pa->rank] & 1 ? "" : " (this rank not in)");
  if (info)
    *info = (shoal_partial_info_t){.step = step, .contributions = n, .fresh = nfresh, .carried = ncarried,
                                   .mine = pa->dec[pa->rank] & 1, .dropped = dropped, .window_s = window_s,
                                   .seconds = shoal__now_s() - t0, .control_s = t_decided - t0,
                                   .ranks = pa->cov};
  return 0;
}
