/* `shoal serve`: an inference server for a model trained by `shoal train` (the Open Inference Protocol
 * over HTTP/1.1), or with --router the router in front of such replicas (docs/serving.md). Runs until
 * SIGINT or SIGTERM, then drains: what was accepted is answered. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/config.h"
#include "serve/serve.h"
#include "shoal/shoal.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: shoal serve --model mlp|cnn --params FILE [options]     a replica\n"
          "       shoal serve --router [--replica URL]... [options]       the router in front of replicas\n\n"
          "both:\n"
          "  --addr A             IPv4 address to listen on                         [0.0.0.0]\n"
          "  --port P             0: any free port (printed, and written to --port-file)  [8000]\n"
          "  --port-file FILE     write the port listened on to FILE\n"
          "  --max-body BYTES     larger request bodies get 413                    [1048576]\n"
          "  --request-timeout S  a request not received whole within S gets 408 and is closed  [10]\n"
          "  --max-conns N        open connections at most           [256; router 1024]\n"
          "  --stats-every S      print a line of counters and latency every S seconds  [0: never]\n"
          "replica:\n"
          "  --model mlp|cnn|softmax   the model the parameters are for                [mlp]\n"
          "  --params FILE        `shoal train --params-out` file (raw float32 parameters)\n"
          "  --name NAME          the model's name in URLs (/v2/models/NAME/infer)    [the model kind]\n"
          "  --max-batch N        rows per forward pass (dynamic batching)          [32]\n"
          "  --batch-timeout-ms T the oldest waiting request waits at most T ms for a batch  [2]\n"
          "  --max-rows N         rows per request                                  [64]\n"
          "  --max-queue N        requests waiting for the model; more get 503      [1024]\n"
          "  --threads N          OpenBLAS threads                                  [1]\n"
          "router (--router):\n"
          "  --replica URL        a replica, http://HOST:PORT (repeatable; more through POST /router/replicas)\n"
          "  --try-timeout S      one try on one replica                            [5]\n"
          "  --timeout S          a request's whole time in the router: tries and waiting for a replica  [30]\n"
          "  --tries N            replicas tried per request                        [3]\n"
          "  --health-every S     readiness check of each replica                   [0.25]\n"
          "  --window S           P50/P99 and the request rate over the last S seconds  [10]\n");
}

typedef struct {
  const char *name;
  char kind;      /* d: double, i: int, s: string, f: flag */
  void *p;
  double lo, hi;  /* range of d and i */
  double scale;   /* d: stored as value x scale (ms -> s) */
} opt_t;

/* One option from argv at *i: 0, 1 (not in the table), -1 (bad value: said) */
static int take(const opt_t *t, size_t n, int argc, char **argv, int *i) {
  for (size_t k = 0; k < n; k++) {
    if (strcmp(argv[*i], t[k].name)) continue;
    if (t[k].kind == 'f') {
      *(int *)t[k].p = 1;
      return 0;
    }
    if (*i + 1 >= argc) {
      fprintf(stderr, "shoal serve: %s needs a value\n", t[k].name);
      return -1;
    }
    const char *v = argv[++*i];
    double d = 0;
    long l = 0;
    if (t[k].kind == 's') {
      *(const char **)t[k].p = v;
      return 0;
    }
    if (t[k].kind == 'i' ? shoal__parse_long(t[k].name, v, (long)t[k].lo, (long)t[k].hi, &l)
                         : shoal__parse_double(t[k].name, v, t[k].lo, t[k].hi, &d)) {
      fprintf(stderr, "shoal serve: %s\n", shoal_last_error());
      return -1;
    }
    if (t[k].kind == 'i') *(int *)t[k].p = (int)l;
    else *(double *)t[k].p = d * t[k].scale;
    return 0;
  }
  return 1;
}

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) {
  (void)sig;
  stop_requested = 1;
}

static int write_port(const char *path, int port) {
  if (!path) return 0;
  FILE *f = fopen(path, "w");
  if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f)) {
    fprintf(stderr, "shoal serve: --port-file %s: cannot write\n", path);
    return -1;
  }
  return 0;
}

static void wait_for_signal(double every, void (*print)(void *), void *arg) {
  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  double next = shoal__now_s() + every;
  while (!stop_requested) {
    usleep(50 * 1000);
    if (every > 0 && shoal__now_s() >= next) {
      print(arg);
      next += every;
    }
  }
}

static void print_server(void *arg) {
  shoal__server_stats_t *st = malloc(sizeof *st);
  if (!st) return;
  shoal__server_stats(arg, st);
  printf("ok %llu  refused %llu  overloaded %llu  batches %llu (%.2f rows)  latency p50 %.2f ms  p99 %.2f ms\n",
         (unsigned long long)st->ok, (unsigned long long)st->refused, (unsigned long long)st->overloaded,
         (unsigned long long)st->batches, st->batches ? (double)st->rows / (double)st->batches : 0.0,
         1e3 * shoal__histo_quantile(&st->latency, 0.5), 1e3 * shoal__histo_quantile(&st->latency, 0.99));
  fflush(stdout);
  free(st);
}

static void print_router(void *arg) {
  shoal__router_stats_t st;
  shoal__router_stats(arg, &st);
  printf("live %d  ok %llu  failed %llu  retries %llu  in flight %d  rate %.1f/s  p50 %.2f ms  p99 %.2f ms\n",
         st.c.live, (unsigned long long)st.c.ok, (unsigned long long)st.c.failed, (unsigned long long)st.c.retries,
         st.c.in_flight, st.rate, 1e3 * st.p50_s, 1e3 * st.p99_s);
  fflush(stdout);
}

static int run_router(shoal__router_opts_t *ro, const char **replicas, int nrep, const char *port_file, double every) {
  shoal__router_t *r;
  if (shoal__router_start(ro, &r)) {
    fprintf(stderr, "shoal serve --router: %s\n", shoal_last_error());
    return 1;
  }
  for (int i = 0; i < nrep; i++)
    if (shoal__pool_add(shoal__router_pool(r), replicas[i])) {
      fprintf(stderr, "shoal serve --router: --replica: %s\n", shoal_last_error());
      shoal__router_stop(r, 0);
      return 2;
    }
  printf("shoal serve --router: on http://%s:%d, %d replica%s\n", ro->http.addr ? ro->http.addr : "0.0.0.0",
         shoal__router_port(r), nrep, nrep == 1 ? "" : "s");
  fflush(stdout);
  if (write_port(port_file, shoal__router_port(r))) {
    shoal__router_stop(r, 0);
    return 1;
  }
  wait_for_signal(every, print_router, r);
  print_router(r);
  shoal__router_stop(r, ro->pool.request_timeout_s);
  return 0;
}

static int run_server(shoal__server_opts_t *so, const char *model, const char *port_file, double every) {
  if (model && shoal_model_kind_parse(model, &so->kind)) {
    fprintf(stderr, "shoal serve: %s\n", shoal_last_error());
    return 2;
  }
  if (!so->params_path) {
    fprintf(stderr, "shoal serve: --params FILE is needed (a `shoal train --params-out` file), or --router\n");
    return 2;
  }
  shoal__server_t *s;
  if (shoal__server_start(so, &s)) {
    fprintf(stderr, "shoal serve: %s\n", shoal_last_error());
    return 1;
  }
  printf("shoal serve: model %s (%s) from %s on http://%s:%d; batches up to %d rows, %.3g ms\n",
         shoal__server_model_name(s), shoal_model_kind_name(so->kind), so->params_path,
         so->http.addr ? so->http.addr : "0.0.0.0", shoal__server_port(s), so->max_batch, 1e3 * so->batch_timeout_s);
  fflush(stdout);
  if (write_port(port_file, shoal__server_port(s))) {
    shoal__server_stop(s);
    return 1;
  }
  wait_for_signal(every, print_server, s);
  int rc = shoal__server_drain(s, 10);
  if (rc) fprintf(stderr, "shoal serve: %s\n", shoal_last_error());
  print_server(s);
  shoal__server_stop(s);
  return rc ? 1 : 0;
}

int shoal_cmd_serve(int argc, char **argv) {
  shoal__server_opts_t so;
  shoal__router_opts_t ro;
  shoal__server_opts_init(&so);
  shoal__router_opts_init(&ro);
  int router = 0, port = 8000, max_conns = 0, threads = 1;
  double max_body = (double)(1 << 20), req_timeout = 10, every = 0, window = 10;
  const char *addr = NULL, *model = NULL, *port_file = NULL;
  const char **replicas = calloc((size_t)argc, sizeof *replicas);
  int nrep = 0;
  const opt_t t[] = {
      {"--router", 'f', &router, 0, 0, 0},       {"--addr", 's', &addr, 0, 0, 0},
      {"--port", 'i', &port, 0, 65535, 0},        {"--port-file", 's', &port_file, 0, 0, 0},
      {"--max-body", 'd', &max_body, 1, 1 << 30, 1}, {"--request-timeout", 'd', &req_timeout, 0.01, 3600, 1},
      {"--max-conns", 'i', &max_conns, 1, 65536, 0}, {"--stats-every", 'd', &every, 0, 86400, 1},
      {"--model", 's', &model, 0, 0, 0},          {"--params", 's', &so.params_path, 0, 0, 0},
      {"--name", 's', &so.name, 0, 0, 0},         {"--max-batch", 'i', &so.max_batch, 1, SHOAL__SERVE_MAX_BATCH, 0},
      {"--batch-timeout-ms", 'd', &so.batch_timeout_s, 0, 60000, 1e-3}, {"--max-rows", 'i', &so.max_rows, 1, 65536, 0},
      {"--max-queue", 'i', &so.max_queue, 1, 1 << 20, 0}, {"--threads", 'i', &threads, 1, 64, 0},
      {"--try-timeout", 'd', &ro.pool.try_timeout_s, 0.01, 3600, 1}, {"--timeout", 'd', &ro.pool.request_timeout_s, 0.01, 86400, 1},
      {"--tries", 'i', &ro.pool.max_tries, 1, 100, 0}, {"--health-every", 'd', &ro.pool.health_every_s, 0.01, 3600, 1},
      {"--window", 'd', &window, 1, SHOAL__WINDOW_SLOTS - 1, 1},
  };
  int rc = 0;
  for (int i = 1; i < argc && !rc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      free(replicas);
      return 0;
    }
    if (!strcmp(argv[i], "--replica") && i + 1 < argc) {
      replicas[nrep++] = argv[++i];
      continue;
    }
    int k = take(t, sizeof t / sizeof t[0], argc, argv, &i);
    if (k == 1) fprintf(stderr, "shoal serve: unknown option '%s' (shoal serve --help)\n", argv[i]);
    rc = k ? 2 : 0;
  }
  /* options of the other role are errors, not silently ignored */
  static const char *const replica_only[] = {"--model", "--params", "--name", "--max-batch", "--batch-timeout-ms",
                                             "--max-rows", "--max-queue", "--threads"};
  static const char *const router_only[] = {"--replica", "--try-timeout", "--timeout", "--tries", "--health-every", "--window"};
  for (int i = 1; i < argc && !rc; i++)
    for (size_t k = 0; k < (router ? sizeof replica_only : sizeof router_only) / sizeof(char *); k++)
      if (!strcmp(argv[i], router ? replica_only[k] : router_only[k])) {
        fprintf(stderr, "shoal serve: %s is an option of %s\n", argv[i], router ? "a replica (without --router)" : "--router");
        rc = 2;
      }
  if (!rc) {
    so.http.addr = ro.http.addr = addr;
    so.http.port = ro.http.port = port;
    so.http.max_body = ro.http.max_body = (size_t)max_body;
    so.http.request_timeout_s = ro.http.request_timeout_s = req_timeout;
    if (max_conns) so.http.max_conns = ro.http.max_conns = max_conns;
    so.blas_threads = threads;
    ro.window_s = (int)window;
    rc = router ? run_router(&ro, replicas, nrep, port_file, every) : run_server(&so, model, port_file, every);
  }
  free(replicas);
  return rc;
}
