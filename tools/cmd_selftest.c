/* shoal selftest: run under `shoal launch -n N -- shoal selftest`. Every
 * collective once per dtype/op (and, for allreduce, per algorithm of the
 * table that applies to the communicator) with a bit-exact
 * check; rank 0 prints one PASS/FAIL line per collective with the number of
 * wrong elements summed over all ranks. Exit 1 on any failure. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_check.h"
#include "comm/coll/algo.h"
#include "core/error.h"
#include "core/config.h"
#include "options.h"
#include "shoal/comm.h"

typedef struct st {
  shoal_comm_t *c;
  int rank, size;
  size_t count;
  char *a, *b, *w; /* buffers of count * size * 8 bytes */
} st_t;

static const shoal_dtype_t red_dtypes[] = {SHOAL_FLOAT32, SHOAL_FLOAT64, SHOAL_INT32, SHOAL_INT64, SHOAL_BFLOAT16,
                                           SHOAL_FLOAT16};

/* The allreduce algorithms of the table that apply to c, and their names. */
static int applicable_algos(shoal_comm_t *c, shoal_algo_t *out, char *names, size_t cap) {
  shoal__coll_ctx_t x;
  shoal__coll_ctx(c, &x);
  int n = 0;
  size_t used = 0;
  names[0] = '\0';
  for (int a = 1; a < shoal__algo_count(); a++) {
    const shoal__coll_algo_t *alg = shoal__algo((shoal_algo_t)a);
    if (alg->applies && alg->applies(&x)) continue; /* shm on several hosts, hier without shared memory... */
    out[n++] = (shoal_algo_t)a;
    if (used < cap) used += (size_t)snprintf(names + used, cap - used, "%s%s", used ? ", " : "", alg->name);
  }
  shoal__clearerr();
  return n;
}

static shoal_algo_t g_algos[SHOAL__ALGO_MAX];
static int g_nalgos;
static char g_allreduce_what[160];

/* Each returns the number of wrong elements on this rank, or a negative status. */
static long t_allreduce(st_t *s, int *checks) {
  long wrong = 0;
  const shoal_algo_t *algos = g_algos;
  for (int a = 0; a < g_nalgos; a++)
    for (int d = 0; d < 6; d++)
      for (int op = 0; op < SHOAL_REDOP__COUNT; op++) {
        shoal_dtype_t dt = red_dtypes[d];
        if (shoal_redop_supported(dt, op)) continue; /* bitwise ops on floating point */
        size_t es = shoal_dtype_size(dt);
        int inplace = (d + op + a) % 2;
        shoal_tool_fill(inplace ? s->b : s->a, s->count, dt, s->rank, op, 0);
        int rc = shoal_allreduce_algo(s->c, inplace ? SHOAL_IN_PLACE : s->a, s->b, s->count, dt, op, algos[a]);
        if (rc) return rc;
        shoal_tool_expect(s->w, s->count, dt, op, s->size, 0);
        wrong += (long)shoal_tool_count_wrong(s->b, s->w, s->count, es);
        (*checks)++;
      }
  return wrong;
}

static long t_broadcast(st_t *s, int *checks) {
  long wrong = 0;
  for (int d = 0; d < SHOAL_DTYPE__COUNT; d++)
    for (int k = 0; k < 2; k++) {
      int root = k ? s->size - 1 : 0;
      size_t es = shoal_dtype_size(d);
      shoal_tool_fill(s->w, s->count, d, root, SHOAL_SUM, 0);
      if (s->rank == root) memcpy(s->b, s->w, s->count * es);
      else memset(s->b, 0x5a, s->count * es);
      int rc = shoal_broadcast(s->c, s->b, s->count, d, root);
      if (rc) return rc;
      wrong += (long)shoal_tool_count_wrong(s->b, s->w, s->count, es);
      (*checks)++;
    }
  return wrong;
}

static long t_reduce(st_t *s, int *checks) {
  long wrong = 0;
  for (int d = 0; d < 6; d++)
    for (int op = 0; op < SHOAL_REDOP__COUNT; op++) {
      shoal_dtype_t dt = red_dtypes[d];
      if (shoal_redop_supported(dt, op)) continue;
      int root = (d + op) % s->size;
      shoal_tool_fill(s->a, s->count, dt, s->rank, op, 0);
      int rc = shoal_reduce(s->c, s->a, s->rank == root ? s->b : NULL, s->count, dt, op, root);
      if (rc) return rc;
      if (s->rank == root) {
        shoal_tool_expect(s->w, s->count, dt, op, s->size, 0);
        wrong += (long)shoal_tool_count_wrong(s->b, s->w, s->count, shoal_dtype_size(dt));
      }
      (*checks)++;
    }
  return wrong;
}

static long t_reduce_scatter(st_t *s, int *checks) {
  long wrong = 0;
  for (int d = 0; d < 6; d++)
    for (int op = 0; op < SHOAL_REDOP__COUNT; op++) {
      shoal_dtype_t dt = red_dtypes[d];
      if (shoal_redop_supported(dt, op)) continue;
      size_t es = shoal_dtype_size(dt);
      shoal_tool_fill(s->a, s->count * (size_t)s->size, dt, s->rank, op, 0);
      int rc = shoal_reduce_scatter(s->c, s->a, s->b, s->count, dt, op);
      if (rc) return rc;
      shoal_tool_expect(s->w, s->count, dt, op, s->size, (size_t)s->rank * s->count);
      wrong += (long)shoal_tool_count_wrong(s->b, s->w, s->count, es);
      (*checks)++;
    }
  return wrong;
}

static long t_allgather(st_t *s, int *checks) {
  long wrong = 0;
  for (int d = 0; d < SHOAL_DTYPE__COUNT; d++) {
    size_t es = shoal_dtype_size(d);
    shoal_tool_fill(s->a, s->count, d, s->rank, SHOAL_SUM, 0);
    int rc = shoal_allgather(s->c, s->a, s->b, s->count, d);
    if (rc) return rc;
    for (int q = 0; q < s->size; q++) {
      shoal_tool_fill(s->w, s->count, d, q, SHOAL_SUM, 0);
      wrong += (long)shoal_tool_count_wrong(s->b + (size_t)q * s->count * es, s->w, s->count, es);
    }
    (*checks)++;
  }
  return wrong;
}

static long t_barrier(st_t *s, int *checks) {
  for (int i = 0; i < 3; i++) {
    int rc = shoal_barrier(s->c);
    if (rc) return rc;
    (*checks)++;
  }
  return 0;
}

static long t_sendrecv(st_t *s, int *checks) {
  int right = (s->rank + 1) % s->size, left = (s->rank + s->size - 1) % s->size;
  shoal_tool_fill(s->a, s->count, SHOAL_FLOAT32, s->rank, SHOAL_SUM, 0);
  int rc = shoal_sendrecv(s->c, s->a, s->count, right, s->b, s->count, left, SHOAL_FLOAT32, 7);
  if (rc) return rc;
  shoal_tool_fill(s->w, s->count, SHOAL_FLOAT32, left, SHOAL_SUM, 0);
  long wrong = (long)shoal_tool_count_wrong(s->b, s->w, s->count, 4);
  (*checks)++;
  if (s->size >= 2 && s->rank < 2) { /* plain send/recv between ranks 0 and 1 */
    if (s->rank == 0) rc = shoal_send(s->c, s->a, s->count, SHOAL_FLOAT32, 1, 9);
    else rc = shoal_recv(s->c, s->b, s->count, SHOAL_FLOAT32, 0, 9);
    if (rc) return rc;
    if (s->rank == 1) {
      shoal_tool_fill(s->w, s->count, SHOAL_FLOAT32, 0, SHOAL_SUM, 0);
      wrong += (long)shoal_tool_count_wrong(s->b, s->w, s->count, 4);
    }
    (*checks)++;
  }
  return wrong;
}

static struct {
  const char *name;
  long (*fn)(st_t *, int *);
  const char *what;
} tests[] = {
  {"allreduce", t_allreduce, g_allreduce_what}, /* the table's algorithms that apply x 6 dtypes x 5 ops */
  {"broadcast", t_broadcast, "7 dtypes x root first/last"},
  {"reduce", t_reduce, "6 dtypes x 5 ops, rotating root"},
  {"reduce_scatter", t_reduce_scatter, "6 dtypes x 5 ops"},
  {"allgather", t_allgather, "7 dtypes"},
  {"barrier", t_barrier, "3 barriers"},
  {"sendrecv", t_sendrecv, "ring exchange + send/recv 0->1"},
};

typedef struct selftest_cli {
  long count;
} selftest_cli_t;

#define SHOAL_OPTS_STRUCT selftest_cli_t
static const shoal_opt_t selftest_opts[] = {
    OPT_LONG("-c|--count", "ELEMENTS", count, 1, 1L << 26, "elements per call"),
    OPT_END,
};

static const shoal_opts_spec_t selftest_spec = {
    .name = "shoal selftest",
    .usage = "usage: shoal launch -n N -- shoal selftest [--count ELEMENTS]\n"
             "Run every collective once per dtype/op with a bit-exact check; one PASS/FAIL line each.\n",
    .opts = selftest_opts,
};

int shoal_cmd_selftest(int argc, char **argv) {
  selftest_cli_t c = {.count = 1009};
  int st = shoal_opts_parse(&selftest_spec, argc, argv, &c, NULL);
  if (st != SHOAL_OPTS_GO) return st;
  long count = c.count;
  st_t s = {.count = (size_t)count};
  if (shoal_comm_init_env(&s.c)) {
    fprintf(stderr, "shoal selftest: %s\n", shoal_last_error());
    return 1;
  }
  s.rank = shoal_comm_rank(s.c);
  s.size = shoal_comm_size(s.c);
  char names[128];
  g_nalgos = applicable_algos(s.c, g_algos, names, sizeof names);
  snprintf(g_allreduce_what, sizeof g_allreduce_what, "%s x 6 dtypes x sum/avg/min/max/prod", names);
  size_t cap = s.count * (size_t)s.size * 8;
  s.a = malloc(cap), s.b = malloc(cap), s.w = malloc(cap);
  int failed = 0;
  if (!s.a || !s.b || !s.w) {
    fprintf(stderr, "shoal selftest: out of memory for %zu B buffers\n", cap);
    failed = 1;
  }
  if (s.rank == 0 && !failed)
    printf("# shoal selftest: %d ranks, %zu elements per call, bit-exact checks\n", s.size, s.count);
  for (size_t t = 0; !failed && t < sizeof tests / sizeof tests[0]; t++) {
    int checks = 0;
    long local = tests[t].fn(&s, &checks);
    if (local < 0) {
      /* the communicator is aborted now: every rank reports its own error */
      printf("%-15s %-50s FAIL: %s\n", tests[t].name, tests[t].what, shoal_comm_errmsg(s.c));
      failed = 1;
      break;
    }
    int64_t wrong = local;
    int rc = shoal_allreduce(s.c, SHOAL_IN_PLACE, &wrong, 1, SHOAL_INT64, SHOAL_SUM);
    if (rc) {
      printf("%-15s %-50s FAIL: %s\n", tests[t].name, tests[t].what, shoal_comm_errmsg(s.c));
      failed = 1;
      break;
    }
    if (wrong) failed = 1;
    if (s.rank == 0) {
      if (wrong) printf("%-15s %-50s FAIL (%lld wrong elements over all ranks)\n", tests[t].name, tests[t].what, (long long)wrong);
      else printf("%-15s %-50s PASS (%d checks)\n", tests[t].name, tests[t].what, checks);
      fflush(stdout);
    }
  }
  /* the launcher stops every rank once one exits non-zero: let rank 0 print first */
  fflush(stdout);
  if (!failed || !shoal_comm_errmsg(s.c)[0]) shoal_barrier(s.c);
  free(s.a), free(s.b), free(s.w);
  shoal_comm_destroy(s.c);
  return failed ? 1 : 0;
}
