/* shoal bench allreduce|allgather|reducescatter|broadcast: a size sweep with
 * nccl-tests columns, run as every rank under `shoal launch`:
 *   shoal launch -n 4 -- shoal bench allreduce -b 8 -e 256M -f 2
 * Per size and mode (out-of-place, then in-place): warm-up, then rank 0 picks
 * the iteration count from its warm-up median and broadcasts it so all ranks
 * agree; each iteration starts after a barrier and its time is the maximum
 * over ranks (IMB's slowest-rank view); p50/p99/max over iterations. algbw =
 * S / p50 and busbw = algbw x factor as nccl-tests (GB = 1e9 B):
 * allreduce 2(n-1)/n, reducescatter and allgather (n-1)/n with S the whole
 * array, broadcast 1. SHOAL_BENCH_MIN_BW fails the run when the average
 * busbw is below it. --explain prints the cost model's decision per size. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll_check.h"
#include "comm/coll/algo.h"
#include "comm/comm_impl.h"
#include "comm/tune/tune.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "options.h"

enum { B_ALLREDUCE, B_ALLGATHER, B_REDUCESCATTER, B_BROADCAST };
static const char *const coll_names[] = {"allreduce", "allgather", "reducescatter", "broadcast"};

typedef struct bopts {
  int coll;
  size_t minb, maxb;
  double factor;
  long iters, warmup;
  double warm_s; /* extra warm-up, in seconds (-W) */
  shoal_dtype_t dtype;
  shoal_redop_t op;
  shoal_algo_t algo;
  int root, check, explain, explain_ranks;
  long steps;     /* --steps: a training-like loop of one size (allreduce) */
  double step_ms; /* --step-ms: compute time emulated between steps */
  double step_s;  /* --seconds: with --steps, stop once this much time has passed (all ranks agree) */
  double target_s;
} bopts_t;

/* What each option applies to (the bits of bench_opts' .when) */
enum { M_ALLREDUCE, M_REDUCTION, M_BROADCAST, M_STEPS, M_EXPLAIN };
static int on_allreduce(const void *c) { return ((const bopts_t *)c)->coll == B_ALLREDUCE; }
static int on_reduction(const void *c) {
  int coll = ((const bopts_t *)c)->coll;
  return coll == B_ALLREDUCE || coll == B_REDUCESCATTER;
}
static int on_broadcast(const void *c) { return ((const bopts_t *)c)->coll == B_BROADCAST; }
static int on_steps(const void *c) { return ((const bopts_t *)c)->steps > 0; }
static int on_explain(const void *c) { return ((const bopts_t *)c)->explain; }
static void not_allreduce(const void *c, char *b, size_t cap) {
  snprintf(b, cap, "is for allreduce only (not %s)", coll_names[((const bopts_t *)c)->coll]);
}
static void not_reduction(const void *c, char *b, size_t cap) {
  snprintf(b, cap, "applies to allreduce and reducescatter only (not %s)", coll_names[((const bopts_t *)c)->coll]);
}
static void not_broadcast(const void *c, char *b, size_t cap) {
  snprintf(b, cap, "applies to broadcast only (not %s)", coll_names[((const bopts_t *)c)->coll]);
}
static const shoal_opt_mode_t bench_modes[] = {
    [M_ALLREDUCE] = {on_allreduce, NULL, not_allreduce},
    [M_REDUCTION] = {on_reduction, NULL, not_reduction},
    [M_BROADCAST] = {on_broadcast, NULL, not_broadcast},
    [M_STEPS] = {on_steps, "applies with --steps only", NULL},
    [M_EXPLAIN] = {on_explain, "applies with --explain only", NULL},
};

static int parse_dtype(const char *name, const char *v, void *f) { return shoal_dtype_parse(v, f); }
static int parse_redop(const char *name, const char *v, void *f) { return shoal_redop_parse(v, f); }
static int parse_algo(const char *name, const char *v, void *f) { return shoal_algo_parse(v, f); }

#define SHOAL_OPTS_STRUCT bopts_t
#define GIB64 (64.0 * 1024 * 1024 * 1024)
static const shoal_opt_t bench_opts[] = {
    OPT_GROUP("sweep:"),
    OPT_BYTES("-b", "SIZE", minb, 0, GIB64, "smallest message in bytes"),
    OPT_BYTES("-e", "SIZE", maxb, 0, GIB64, "largest message in bytes"),
    OPT_DOUBLE("-f", "FACTOR", factor, 1.01, 1024, "size multiplier"),
    OPT_LONG("-n", "ITERS", iters, 1, 10000000, "timed iterations per size, at least 5", .def = "auto from the warm-up"),
    OPT_LONG("-w", "WARMUP", warmup, 0, 1000000, "warm-up iterations"),
    OPT_DOUBLE("-W", "SEC", warm_s, 0, 60,
               "then more warm-up, about SEC seconds: steady state, as OSU's 200 skipped iterations;\n"
               "SEC / the warm-up's median calls (1 ms without warm-up), at most 10,000"),
    OPT_DOUBLE("-T", "SEC", target_s, 0.001, 3600, "target time per size for auto iterations"),
    OPT_CALL("-d", "DTYPE", dtype, shoal_dtype_t, parse_dtype,
             "float32|float64|int32|int64|bfloat16|float16 (uint8: allgather and broadcast only)", .def = "float32"),
    OPT_CALL("-o", "OP", op, shoal_redop_t, parse_redop, "sum|avg|min|max|prod", .def = "sum", .when = 1u << M_REDUCTION),
    OPT_CALL("-a", "ALGO", algo, shoal_algo_t, parse_algo, "allreduce algorithm, one of the list below", .def = "auto",
             .when = 1u << M_ALLREDUCE),
    OPT_INT("-r", "ROOT", root, 0, 1 << 20, "broadcast root", .when = 1u << M_BROADCAST),
    OPT_FLAG("--check", check, "count wrong elements (#wrong)"),
    OPT_GROUP("the cost model:"),
    OPT_FLAG("--explain", explain, "print the cost model's choice per size"),
    OPT_INT("-p", "RANKS", explain_ranks, 1, 1 << 20, "with --explain: rank count, without launching",
            .def = "", .when = 1u << M_EXPLAIN),
    OPT_GROUP("a training-like loop (allreduce):"),
    OPT_LONG("--steps", "N", steps, 1, 100000000,
             "N calls of size -b in a loop, as a training job makes them; one line per step\n"
             "(time, the algorithm, re-profiles of the link watch so far)",
             .def = "", .when = 1u << M_ALLREDUCE),
    OPT_DOUBLE("--step-ms", "MS", step_ms, 0, 3600e3, "emulated compute between steps (sleep)", .when = 1u << M_STEPS),
    OPT_DOUBLE("--seconds", "S", step_s, 0, 1e6, "stop after S seconds (rank 0's clock, agreed by all)",
               .def = "none", .when = 1u << M_STEPS),
    OPT_END,
};

static void bench_more_help(FILE *f) { fprintf(f, "\nallreduce algorithms (-a): %s\n", shoal__algo_list()); }

/* the collective: the one word */
static int bench_resolve(void *cli, const shoal_opts_res_t *r) {
  bopts_t *o = cli;
  if (r->nwords == 0) {
    shoal_opts_help(r->spec, cli, stderr);
    return 2;
  }
  for (int c = 0; c < 4; c++)
    if (!strcmp(r->words[0], coll_names[c])) o->coll = c;
  if (!strcmp(r->words[0], "reduce_scatter")) o->coll = B_REDUCESCATTER;
  if (o->coll < 0) {
    fprintf(stderr, "shoal bench: unknown collective '%s' (allreduce, allgather, reducescatter, broadcast)\n",
            r->words[0]);
    return 2;
  }
  return 0;
}

static const shoal_opts_spec_t bench_spec = {
    .name = "shoal bench",
    .usage = "usage: shoal launch -n N -- shoal bench allreduce|allgather|reducescatter|broadcast [options]\n"
             "A size sweep with nccl-tests columns, run as every rank (docs/performance.md).\n",
    .opts = bench_opts,
    .modes = bench_modes,
    .args = SHOAL_ARGS_WORDS,
    .max_words = 1,
    .col = 16,
    .resolve = bench_resolve,
    .more_help = bench_more_help,
};

/* SHOAL_OPTS_GO, or the exit status */
static int parse_opts(int argc, char **argv, bopts_t *o) {
  *o = (bopts_t){.coll = -1, .minb = 8, .maxb = 256u << 20, .factor = 2, .iters = 0, .warmup = 5, .warm_s = 0.02,
                 .dtype = SHOAL_FLOAT32, .op = SHOAL_SUM, .algo = SHOAL_ALGO_AUTO, .target_s = 0.2};
  int st = shoal_opts_parse(&bench_spec, argc, argv, o, NULL);
  if (st != SHOAL_OPTS_GO) return st;
  if (o->minb > o->maxb) {
    fprintf(stderr, "shoal bench: -b %zu is larger than -e %zu\n", o->minb, o->maxb);
    return 2;
  }
  if (o->coll != B_BROADCAST && o->coll != B_ALLGATHER && shoal__reduce_check(o->dtype, o->op)) {
    fprintf(stderr, "shoal bench: %s\n", shoal_last_error());
    return 2;
  }
  return SHOAL_OPTS_GO;
}

static size_t next_size(size_t b, double f) {
  size_t n = (size_t)((double)b * f);
  return n > b ? n : b + 1;
}

/* c: the launched world (NULL with -p): an explicit algorithm is judged on it, as the run would */
static int explain(const bopts_t *o, int p, shoal_comm_t *c) {
  shoal__coll_ctx_t x;
  shoal_algo_t forced;
  if (shoal__coll_ctx_model(p, &x) || shoal__algo_env(&forced)) {
    fprintf(stderr, "shoal bench: %s\n", shoal_last_error());
    return 1;
  }
  /* an explicit algorithm that does not apply is refused with its reason, as the run would refuse it: on
   * the launched world, else (-p) on the model's one rank per host over TCP */
  shoal_algo_t given = o->algo != SHOAL_ALGO_AUTO ? o->algo : forced;
  const shoal__coll_algo_t *ga = given != SHOAL_ALGO_AUTO ? shoal__algo(given) : NULL;
  shoal__coll_ctx_t real;
  if (c) shoal__coll_ctx(c, &real);
  if (ga && ga->applies && ga->applies(c ? &real : &x)) {
    fprintf(stderr, "shoal bench: --explain: %s%s does not apply %s: %s\n", o->algo != SHOAL_ALGO_AUTO ? "-a " : "SHOAL_ALGO=",
            ga->name, c ? "on this world" : "on the model's ranks, one per host over TCP (-p)", shoal_last_error());
    return 1;
  }
  printf("# allreduce cost model on %d ranks, one per host over TCP: alpha %.2f us, beta %.3f GB/s, gamma %.3f GB/s "
         "(SHOAL_ALPHA_US, SHOAL_BETA_GBPS, SHOAL_GAMMA_GBPS)\n",
         p, x.net.alpha_s * 1e6, 1e-9 / x.net.beta_s, 1e-9 / x.net.gamma_s);
  if (c && given == SHOAL_ALGO_AUTO) /* a launched world prices by its own profile: two tables whose picks differ must say which one runs */
    printf("# (the built-in model, as with -p; this world's run chooses by its tuning profile: the table after it, "
           "'model pick')\n");
  int n = shoal__algo_count();
  printf("# %12s", "size(B)");
  for (int i = 1; i < n; i++) {
    char col[32];
    snprintf(col, sizeof col, "%s(us)", shoal__algo((shoal_algo_t)i)->name);
    printf(" %10s", col);
  }
  printf("  %-6s %-26s %10s\n", "choice", "why", "chunk(B)");
  for (size_t b = o->minb; b <= o->maxb; b = next_size(b, o->factor)) {
    shoal__choice_t ch;
    if (shoal__coll_price(&x, b, SHOAL__CHOOSE_NOPLAN, &ch)) {
      fprintf(stderr, "shoal bench: %s\n", shoal_last_error());
      return 1;
    }
    shoal_algo_t a = o->algo != SHOAL_ALGO_AUTO ? o->algo : forced != SHOAL_ALGO_AUTO ? forced : ch.algo;
    const char *why = o->algo != SHOAL_ALGO_AUTO   ? "requested by the caller"
                      : forced != SHOAL_ALGO_AUTO ? "forced by SHOAL_ALGO"
                                                  : "cost model (cheapest)";
    for (int i = 1; i < n && a == SHOAL_ALGO_RING && o->algo == SHOAL_ALGO_AUTO && forced == SHOAL_ALGO_AUTO; i++)
      if (ch.t[i] < ch.t[SHOAL_ALGO_RING]) why = "ring within 5% of cheapest"; /* the chooser's ring margin */
    shoal__plan_t plan = {0};
    const shoal__coll_algo_t *alg = shoal__algo(a);
    if (alg && alg->plan && alg->plan(&x, b, &plan)) {
      fprintf(stderr, "shoal bench: %s\n", shoal_last_error());
      return 1;
    }
    printf("  %12zu", b);
    for (int i = 1; i < n; i++) {
      if (isinf(ch.t[i])) printf(" %10s", "-");
      else printf(" %10.1f", ch.t[i] * 1e6);
    }
    char chunk[24] = "-";
    if (plan.chunk_bytes) snprintf(chunk, sizeof chunk, "%zu", plan.chunk_bytes);
    printf("  %-6s %-26s %10s\n", shoal_algo_name(a), why, chunk);
  }
  return 0;
}

typedef struct run {
  shoal_comm_t *c;
  const bopts_t *o;
  int rank, size;
  char *send, *recv, *want;
  size_t es;
} run_t;

/* Element count per call for a sweep size, and the S that algbw uses. */
static size_t call_count(const run_t *R, size_t bytes, double *S) {
  size_t count = bytes / R->es;
  if (R->o->coll == B_ALLGATHER || R->o->coll == B_REDUCESCATTER) count /= (size_t)R->size;
  size_t total = count * (R->o->coll == B_ALLGATHER || R->o->coll == B_REDUCESCATTER ? (size_t)R->size : 1);
  *S = (double)(total * R->es);
  return count;
}

static double bus_factor(int coll, int n) {
  if (coll == B_ALLREDUCE) return 2.0 * (n - 1) / n;
  if (coll == B_BROADCAST) return 1.0;
  return (double)(n - 1) / n;
}

static void fill_inputs(run_t *R, size_t count, int inplace) {
  const bopts_t *o = R->o;
  int n = R->size, r = R->rank;
  shoal_redop_t op = o->coll == B_ALLREDUCE || o->coll == B_REDUCESCATTER ? o->op : SHOAL_SUM;
  switch (o->coll) {
  case B_ALLREDUCE: shoal_tool_fill(inplace ? R->recv : R->send, count, o->dtype, r, op, 0); break;
  case B_REDUCESCATTER: shoal_tool_fill(inplace ? R->recv : R->send, count * (size_t)n, o->dtype, r, op, 0); break;
  case B_ALLGATHER:
    shoal_tool_fill(inplace ? R->recv + (size_t)r * count * R->es : R->send, count, o->dtype, r, op, 0);
    break;
  default:
    if (r == o->root) shoal_tool_fill(R->recv, count, o->dtype, r, op, 0);
    break;
  }
}

static int call(run_t *R, size_t count, int inplace) {
  const bopts_t *o = R->o;
  const void *sb = inplace ? SHOAL_IN_PLACE : R->send;
  switch (o->coll) {
  case B_ALLREDUCE: return shoal_allreduce_algo(R->c, sb, R->recv, count, o->dtype, o->op, o->algo);
  case B_REDUCESCATTER: return shoal_reduce_scatter(R->c, sb, R->recv, count, o->dtype, o->op);
  case B_ALLGATHER: return shoal_allgather(R->c, sb, R->recv, count, o->dtype);
  default: return shoal_broadcast(R->c, R->recv, count, o->dtype, o->root);
  }
}

/* Wrong elements on this rank after one checked call. */
static long check_once(run_t *R, size_t count, int inplace, int *rc) {
  const bopts_t *o = R->o;
  int n = R->size, r = R->rank;
  fill_inputs(R, count, inplace);
  if ((*rc = call(R, count, inplace))) return 0;
  switch (o->coll) {
  case B_ALLREDUCE:
    shoal_tool_expect(R->want, count, o->dtype, o->op, n, 0);
    return (long)shoal_tool_count_wrong(R->recv, R->want, count, R->es);
  case B_REDUCESCATTER:
    shoal_tool_expect(R->want, count, o->dtype, o->op, n, (size_t)r * count);
    return (long)shoal_tool_count_wrong(inplace ? R->recv + (size_t)r * count * R->es : R->recv, R->want, count, R->es);
  case B_ALLGATHER: {
    long wrong = 0;
    for (int q = 0; q < n; q++) {
      shoal_tool_fill(R->want, count, o->dtype, q, SHOAL_SUM, 0);
      wrong += (long)shoal_tool_count_wrong(R->recv + (size_t)q * count * R->es, R->want, count, R->es);
    }
    return wrong;
  }
  default:
    shoal_tool_fill(R->want, count, o->dtype, o->root, SHOAL_SUM, 0);
    return (long)shoal_tool_count_wrong(R->recv, R->want, count, R->es);
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct result {
  double p50, p99, max, algbw, busbw;
  long wrong; /* -1: not checked */
} result_t;

static int measure(run_t *R, size_t count, double S, int inplace, result_t *res) {
  const bopts_t *o = R->o;
  int rc;
  fill_inputs(R, count, inplace);
  double *warm = calloc((size_t)o->warmup + 1, sizeof *warm);
  if (!warm) return SHOAL_ERR_NOMEM;
  for (long i = 0; i < o->warmup; i++) {
    uint64_t t0 = shoal__now_ns();
    if ((rc = call(R, count, inplace))) {
      free(warm);
      return rc;
    }
    warm[i] = (double)(shoal__now_ns() - t0) * 1e-9;
  }
  /* rank 0 decides the timed iterations (unless -n) and the extra warm-up
   * iterations (-W) from the warm-up's median; everyone follows */
  double med = 1e-3;
  if (o->warmup > 0) {
    qsort(warm, (size_t)o->warmup, sizeof *warm, cmp_double);
    med = warm[o->warmup / 2];
  }
  if (med < 1e-7) med = 1e-7;
  int64_t plan[2] = {o->iters, (int64_t)(o->warm_s / med)};
  if (plan[0] <= 0) plan[0] = (int64_t)(o->target_s / med);
  if (plan[0] < 5) plan[0] = 5;
  if (plan[0] > 2000 && o->iters <= 0) plan[0] = 2000;
  if (plan[1] > 10000) plan[1] = 10000;
  free(warm);
  if ((rc = shoal_broadcast(R->c, plan, 2, SHOAL_INT64, 0))) return rc;
  for (int64_t i = 0; i < plan[1]; i++)
    if ((rc = call(R, count, inplace))) return rc;
  int64_t iters = plan[0];
  double *t = calloc((size_t)iters, sizeof *t);
  if (!t) return SHOAL_ERR_NOMEM;
  for (int64_t i = 0; i < iters; i++) {
    if ((rc = shoal_barrier(R->c))) goto out_free;
    uint64_t t0 = shoal__now_ns();
    if ((rc = call(R, count, inplace))) goto out_free;
    t[i] = (double)(shoal__now_ns() - t0) * 1e-9;
  }
  /* per-iteration time = the slowest rank's */
  if ((rc = shoal_allreduce(R->c, SHOAL_IN_PLACE, t, (size_t)iters, SHOAL_FLOAT64, SHOAL_MAX))) goto out_free;
  qsort(t, (size_t)iters, sizeof *t, cmp_double);
  /* nearest-rank percentiles: the ceil(q*N)-th smallest */
  res->p50 = t[(size_t)ceil(0.50 * (double)iters) - 1];
  res->p99 = t[(size_t)ceil(0.99 * (double)iters) - 1];
  res->max = t[iters - 1];
  res->algbw = S / res->p50 * 1e-9;
  res->busbw = res->algbw * bus_factor(o->coll, R->size);
  res->wrong = -1;
  if (o->check) {
    int64_t w = check_once(R, count, inplace, &rc);
    if (rc || (rc = shoal_allreduce(R->c, SHOAL_IN_PLACE, &w, 1, SHOAL_INT64, SHOAL_SUM))) goto out_free;
    res->wrong = (long)w;
  }
out_free:
  free(t);
  return rc;
}

static void print_group(const result_t *r) {
  char w[24];
  if (r->wrong < 0) snprintf(w, sizeof w, "n/a");
  else snprintf(w, sizeof w, "%ld", r->wrong);
  printf(" | %9.2f %9.1f %9.1f %7.3f %7.3f %6s", r->p50 * 1e6, r->p99 * 1e6, r->max * 1e6, r->algbw, r->busbw, w);
}

static const char *algo_label(const run_t *R, size_t S) {
  switch (R->o->coll) {
  case B_ALLREDUCE:
    return shoal_algo_name(R->o->algo != SHOAL_ALGO_AUTO ? R->o->algo : shoal_allreduce_choose(R->c, S));
  case B_BROADCAST: return S <= (32u << 10) || R->size <= 2 ? "tree" : "chain";
  default: return "ring";
  }
}

/* --steps: one allreduce size in a loop, as a training job calls it (same buffer, automatic choice
 * unless -a), each step timed as the slowest rank's, with what the chooser and the link watch did. */
static int steps_loop(run_t *R) {
  const bopts_t *o = R->o;
  size_t count = o->minb / R->es ? o->minb / R->es : 1;
  char *buf = malloc(count * R->es);
  double *t = malloc(sizeof *t * (size_t)o->steps);
  if (!buf || !t) {
    free(buf), free(t);
    fprintf(stderr, "shoal bench: rank %d: out of memory\n", R->rank);
    return 1;
  }
  shoal_tool_fill(buf, count, o->dtype, R->rank, o->op, 0);
  if (R->rank == 0)
    printf("# shoal bench allreduce --steps %ld: %d ranks, %zu B, %s, step compute %.1f ms\n"
           "# %6s %10s %12s %-6s %9s %s\n", o->steps, R->size, count * R->es, shoal_algo_name(o->algo), o->step_ms,
           "step", "time(ms)", "re-profiles", "algo", "t(s)", "plan");
  int rc = 0;
  double total = 0;
  long done = 0;
  uint64_t start = shoal__now_ns();
  for (long k = 0; k < o->steps && !rc; k++) {
    if (o->step_ms > 0) {
      struct timespec ts = {(time_t)(o->step_ms / 1e3), (long)(fmod(o->step_ms, 1e3) * 1e6)};
      nanosleep(&ts, NULL);
    }
    shoal__choice_t ch; /* what this call will run (the chooser's answer for it) */
    shoal__coll_ctx_t x;
    char plan[160] = "";
    shoal_algo_t a = o->algo;
    if (!shoal__coll_choose(R->c, count * R->es, o->algo, SHOAL__CHOOSE_QUIET, &ch)) {
      a = ch.algo;
      shoal__coll_ctx(R->c, &x);
      shoal__plan_describe(a, &x, &ch.plan, plan, sizeof plan);
    }
    uint64_t t0 = shoal__now_ns();
    rc = shoal_allreduce_algo(R->c, SHOAL_IN_PLACE, buf, count, o->dtype, o->op, o->algo);
    /* the slowest rank's time, and rank 0's clock since the start (for --seconds) */
    double tv[2] = {(double)(shoal__now_ns() - t0) * 1e-9, R->rank == 0 ? (double)(shoal__now_ns() - start) * 1e-9 : 0};
    if (!rc) rc = shoal_allreduce(R->c, SHOAL_IN_PLACE, tv, 2, SHOAL_FLOAT64, SHOAL_MAX);
    double dt = tv[0];
    shoal__watch_stats_t ws;
    shoal__tune_watch_stats(R->c->w, &ws);
    if (!rc && R->rank == 0) {
      printf("  %6ld %10.2f %12u %-6s %9.3f %s\n", k, dt * 1e3, ws.reprofiles, shoal_algo_name(a), tv[1], plan);
      fflush(stdout);
    }
    t[k] = dt, total += dt, done++;
    if (o->step_s > 0 && tv[1] >= o->step_s) break;
  }
  if (rc) fprintf(stderr, "shoal bench: rank %d: %s\n", R->rank, shoal_comm_errmsg(R->c));
  else if (R->rank == 0) {
    shoal__watch_stats_t ws;
    shoal__tune_watch_stats(R->c->w, &ws);
    printf("# steps %ld, allreduce time %.3f s in all, mean %.2f ms, wall %.3f s; link watch: %u checks, %u "
           "re-profiles (%.2f s), %u new plans dropped, %u other plans tried (%u kept), %u probations or tries "
           "ended by other sizes\n", done, total, done ? total / (double)done * 1e3 : 0,
           (double)(shoal__now_ns() - start) * 1e-9, ws.checks, ws.reprofiles, ws.reprofile_s, ws.reverts, ws.tries,
           ws.tries_kept, ws.ended_away);
  }
  fflush(stdout);
  if (!rc) rc = shoal_barrier(R->c);
  free(buf), free(t);
  return rc ? 1 : 0;
}

static void print_header(const run_t *R) {
  const bopts_t *o = R->o;
  printf("# shoal bench %s: %d ranks, %s %s, algo %s, warm-up %ld, iterations %s, check %s\n", coll_names[o->coll],
         R->size, shoal_dtype_name(o->dtype), shoal_redop_name(o->op), shoal_algo_name(o->algo), o->warmup,
         o->iters > 0 ? "fixed" : "auto (rank 0 picks from warm-up, broadcast)", o->check ? "on" : "off");
  printf("# time = slowest rank per iteration; p50/p99/max over iterations; algbw = S/p50, GB = 1e9 B; "
         "busbw factor %s\n",
         o->coll == B_ALLREDUCE ? "2(n-1)/n" : o->coll == B_BROADCAST ? "1" : "(n-1)/n");
  printf("#%51s %-52s %s\n", "", "out-of-place", "in-place");
  printf("# %10s %11s %8s %5s %5s | %9s %9s %9s %7s %7s %6s | %9s %9s %9s %7s %7s %6s\n", "size(B)", "count", "type",
         "redop", "algo", "p50(us)", "p99(us)", "max(us)", "algbw", "busbw", "#wrong", "p50(us)", "p99(us)", "max(us)",
         "algbw", "busbw", "#wrong");
  fflush(stdout);
}

/* The size sweep: one row per size (rank 0), the average busbw and the wrong elements; 0 or 1. */
static int sweep(run_t *R, double min_bw) {
  const bopts_t *o = R->o;
  if (R->rank == 0) print_header(R);
  double bw_sum = 0;
  int bw_n = 0, status = 0;
  long wrong_total = 0;
  for (size_t b = o->minb; b <= o->maxb; b = next_size(b, o->factor)) {
    double S;
    size_t count = call_count(R, b, &S);
    if (count == 0) continue;
    result_t res[2];
    for (int inplace = 0; inplace < 2; inplace++) {
      if (o->coll == B_BROADCAST && !inplace) { /* broadcast is in place by API */
        res[0] = (result_t){.wrong = -2};
        continue;
      }
      int rc = measure(R, count, S, inplace, &res[inplace]);
      if (rc) {
        fprintf(stderr, "shoal bench: rank %d: %s %zu B: %s\n", R->rank, coll_names[o->coll], (size_t)S,
                shoal_comm_errmsg(R->c)[0] ? shoal_comm_errmsg(R->c)
                : shoal_last_error()[0] ? shoal_last_error() : shoal_status_string(rc));
        return 1;
      }
      bw_sum += res[inplace].busbw;
      bw_n++;
      if (res[inplace].wrong > 0) wrong_total += res[inplace].wrong;
    }
    if (R->rank == 0) {
      printf("  %10zu %11zu %8s %5s %5s", (size_t)S, count, shoal_dtype_name(o->dtype),
             o->coll == B_ALLREDUCE || o->coll == B_REDUCESCATTER ? shoal_redop_name(o->op) : "-", algo_label(R, (size_t)S));
      if (res[0].wrong == -2) printf(" | %9s %9s %9s %7s %7s %6s", "-", "-", "-", "-", "-", "-");
      else print_group(&res[0]);
      print_group(&res[1]);
      printf("\n");
      fflush(stdout);
    }
  }
  double avg = bw_n ? bw_sum / bw_n : 0;
  if (R->rank == 0) {
    if (o->check) printf("# Out of bounds values : %ld %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %.4f GB/s\n", avg);
  }
  if (wrong_total) status = 1;
  if (min_bw > 0 && avg < min_bw) {
    if (R->rank == 0) printf("# FAILED: average busbw %.4f GB/s < SHOAL_BENCH_MIN_BW=%g\n", avg, min_bw);
    status = 1;
  }
  /* the launcher stops every rank once one exits non-zero: let rank 0 print first */
  fflush(stdout);
  if (shoal_barrier(R->c) && !status) status = 1;
  return status;
}

int shoal_cmd_bench(int argc, char **argv) {
  bopts_t o;
  int st = parse_opts(argc, argv, &o);
  if (st != SHOAL_OPTS_GO) return st;
  if (o.explain && o.explain_ranks > 0) return explain(&o, o.explain_ranks, NULL);
  double min_bw; /* read before the run: a bad value is said at once, not after the whole sweep */
  if (shoal__config_double("SHOAL_BENCH_MIN_BW", 0, 0, 1e9, &min_bw)) {
    fprintf(stderr, "shoal bench: %s\n", shoal_last_error());
    return 2;
  }
  run_t R = {.o = &o, .es = shoal_dtype_size(o.dtype)};
  if (shoal_comm_init_env(&R.c)) {
    fprintf(stderr, "shoal bench: %s\n", shoal_last_error());
    return 1;
  }
  R.rank = shoal_comm_rank(R.c);
  R.size = shoal_comm_size(R.c);
  int status = 0;
  if (o.explain) {
    if (R.rank == 0) status = explain(&o, R.size, R.c);
    if (R.rank == 0 && !status) shoal__tune_explain(R.c, stdout); /* fitted model, shm/hier (tune.c) */
  } else if (o.steps > 0) {
    status = steps_loop(&R);
  } else if (o.root >= R.size) {
    fprintf(stderr, "shoal bench: -r %d: only %d ranks\n", o.root, R.size);
    status = 2;
  } else {
    size_t cap = o.maxb + R.es * (size_t)R.size; /* counts round down, so this always fits */
    R.send = malloc(cap);
    R.recv = malloc(cap);
    R.want = o.check ? malloc(cap) : NULL;
    if (!R.send || !R.recv || (o.check && !R.want)) {
      fprintf(stderr, "shoal bench: rank %d: no memory for %zu B buffers\n", R.rank, cap);
      status = 1;
    } else {
      memset(R.send, 0, cap); /* fault the pages in before timing */
      memset(R.recv, 0, cap);
      status = sweep(&R, min_bw);
    }
    free(R.send);
    free(R.recv);
    free(R.want);
  }
  shoal_comm_destroy(R.c);
  return status;
}
