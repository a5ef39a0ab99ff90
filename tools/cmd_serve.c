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
#include "options.h"
#include "serve/serve.h"
#include "shoal/shoal.h"

typedef struct serve_cli {
  shoal__server_opts_t so;
  shoal__router_opts_t ro;
  int router, port, max_conns, threads;
  size_t max_body;
  double req_timeout, every, window, batch_ms, rejoin_every;
  const char *addr, *port_file, *register_url, *advertise;
  shoal_opts_list_t replicas;
} serve_cli_t;

/* options of the other role are errors, not silently ignored (the bits of serve_opts' .when) */
enum { M_REPLICA, M_ROUTER };
static int on_replica(const void *c) { return !((const serve_cli_t *)c)->router; }
static int on_router(const void *c) { return ((const serve_cli_t *)c)->router; }
static const shoal_opt_mode_t serve_modes[] = {
    [M_REPLICA] = {on_replica, "is an option of a replica (without --router)", NULL},
    [M_ROUTER] = {on_router, "is an option of --router", NULL},
};

static int parse_model(const char *n, const char *v, void *f) { return shoal_model_kind_parse(v, f); }
static void show_model(const void *f, char *b, size_t cap) { snprintf(b, cap, "%s", shoal_model_kind_name(*(const shoal_model_kind_t *)f)); }

#define SHOAL_OPTS_STRUCT serve_cli_t
#define REPLICA .when = 1u << M_REPLICA
#define ROUTER .when = 1u << M_ROUTER
static const shoal_opt_t serve_opts[] = {
    OPT_GROUP("both:"),
    OPT_FLAG("--router", router, "be the router in front of replicas, not a replica"),
    OPT_STRING("--addr", "A", addr, "IPv4 address to listen on", .def = "0.0.0.0", .expect = "an IPv4 address"),
    OPT_INT("--port", "P", port, 0, 65535, "0: any free port (printed, and written to --port-file)"),
    OPT_STRING("--port-file", "FILE", port_file, "write the port listened on to FILE", .expect = "a file"),
    OPT_BYTES("--max-body", "BYTES", max_body, 1, 1 << 30, "larger request bodies get 413"),
    OPT_DOUBLE("--request-timeout", "S", req_timeout, 0.01, 3600, "a request not received whole within S gets 408 and is closed"),
    OPT_INT("--max-conns", "N", max_conns, 1, 65536, "open connections at most", .def = "256; router 1024"),
    OPT_DOUBLE("--stats-every", "S", every, 0, 86400, "print a line of counters and latency every S seconds", .def = "0: never"),
    OPT_GROUP("replica:"),
    OPT_CALL("--model", "mlp|cnn|softmax", so.kind, shoal_model_kind_t, parse_model, "the model the parameters are for",
             .show = show_model, REPLICA),
    OPT_STRING("--params", "FILE", so.params_path, "`shoal train --params-out` file (raw float32 parameters)",
               .expect = "a file", REPLICA),
    OPT_STRING("--name", "NAME", so.name, "the model's name in URLs (/v2/models/NAME/infer)", .def = "the model kind",
               REPLICA),
    OPT_INT("--max-batch", "N", so.max_batch, 1, SHOAL__SERVE_MAX_BATCH, "rows per forward pass (dynamic batching)", REPLICA),
    OPT_DOUBLE("--batch-timeout-ms", "T", batch_ms, 0, 60000, "the oldest waiting request waits at most T ms for a batch",
               REPLICA),
    OPT_INT("--max-rows", "N", so.max_rows, 1, 65536, "rows per request", REPLICA),
    OPT_INT("--max-queue", "N", so.max_queue, 1, 1 << 20, "requests waiting for the model; more get 503", REPLICA),
    OPT_INT("--threads", "N", threads, 1, 64, "OpenBLAS threads", REPLICA),
    OPT_STRING("--register", "URL", register_url, "the router (http://HOST:PORT) to join once ready and to leave\n"
               "before draining", .def = "$SHOAL_SERVE_ROUTER, else none", .expect = "http://HOST:PORT", REPLICA),
    OPT_DOUBLE("--rejoin-every", "S", rejoin_every, 0, 3600, "repeat the join every S seconds (the router ignores a\n"
               "replica it holds; one it removed takes it back); 0: join once", REPLICA),
    OPT_STRING("--advertise", "URL", advertise, "the URL the router reaches this replica at (with --register)",
               .def = "http://ADDR:PORT, ADDR --addr or, for 0.0.0.0, this host's first non-loopback IPv4 address",
               .expect = "http://HOST:PORT", REPLICA),
    OPT_GROUP("router (--router):"),
    OPT_LIST("--replica", "URL", replicas, "a replica, http://HOST:PORT (repeatable; more through POST /router/replicas)",
             ROUTER),
    OPT_DOUBLE("--try-timeout", "S", ro.pool.try_timeout_s, 0.01, 3600, "one try on one replica", ROUTER),
    OPT_DOUBLE("--timeout", "S", ro.pool.request_timeout_s, 0.01, 86400,
               "a request's whole time in the router: tries and waiting for a replica", ROUTER),
    OPT_INT("--tries", "N", ro.pool.max_tries, 1, 100, "replicas tried per request", ROUTER),
    OPT_DOUBLE("--health-every", "S", ro.pool.health_every_s, 0.01, 3600, "readiness check of each replica", ROUTER),
    OPT_INT("--drop-after", "N", ro.pool.drop_after, 0, 1000000, "remove a replica after N health checks in a row\n"
            "without an answer (a replica killed with SIGKILL never leaves itself); 0: never",
            .def = "$SHOAL_SERVE_DROP_AFTER, else 20", ROUTER),
    OPT_DOUBLE("--window", "S", window, 1, SHOAL__WINDOW_SLOTS - 1, "P50/P99 and the request rate over the last S seconds",
               ROUTER),
    OPT_END,
};
#undef REPLICA
#undef ROUTER

static const shoal_opts_spec_t serve_spec = {
    .name = "shoal serve",
    .usage = "usage: shoal serve --model mlp|cnn --params FILE [options]     a replica\n"
             "       shoal serve --router [--replica URL]... [options]       the router in front of replicas\n"
             "An inference server for a model trained by shoal train (the Open Inference Protocol over HTTP/1.1),\n"
             "or the router in front of such replicas (docs/serving.md).\n",
    .opts = serve_opts,
    .modes = serve_modes,
};

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

/* tick (when not NULL) runs every 50 ms until it returns 0 */
static void wait_for_signal(double every, void (*print)(void *), void *arg, int (*tick)(void *), void *targ) {
  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  double next = shoal__now_s() + every;
  while (!stop_requested) {
    if (tick && !tick(targ)) tick = NULL;
    usleep(50 * 1000);
    if (every > 0 && shoal__now_s() >= next) {
      print(arg);
      next += every;
    }
  }
}

/* A replica joining its router: tried at once and then every second until the router takes it (a router
 * started after its replicas, or restarting, is joined when it answers); each new reason it fails is printed.
 * Once in, the join is repeated every `every` seconds (a no-op for a router that holds it), so a router that
 * removed it (its health checks went unanswered while it was cut off) takes it back once it answers again; each
 * join carries the replica's measured seconds a request (the loaning controller sizes the replicas by it). */
typedef struct joining {
  const char *router;
  shoal__server_t *server; /* whose measured service time each join reports */
  char self[256], last_err[256];
  double next, every;
  int joined;
} joining_t;

static int join_tick(void *arg) {
  joining_t *j = arg;
  double now = shoal__now_s();
  if (now < j->next) return 1;
  double service = 0;
  shoal__server_stats_t *st = j->server ? malloc(sizeof *st) : NULL;
  if (st) shoal__server_stats(j->server, st), service = st->service_per_request_s;
  free(st);
  if (shoal__serve_announce(j->router, j->self, 1, service, 2) == 0) {
    if (!j->joined || j->last_err[0]) {
      printf("shoal serve: joined the router %s as %s%s\n", j->router, j->self, j->joined ? " (again)" : "");
      fflush(stdout);
    }
    j->joined = 1, j->last_err[0] = 0;
    j->next = now + j->every;
    return j->every > 0;
  }
  j->next = now + (j->joined && j->every < 1 ? j->every : 1);
  if (strcmp(j->last_err, shoal_last_error())) {
    snprintf(j->last_err, sizeof j->last_err, "%s", shoal_last_error());
    fprintf(stderr, "shoal serve: --register: %s (trying again every %.3g s)\n", j->last_err,
            j->joined && j->every < 1 ? j->every : 1.0);
  }
  return 1;
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

static int run_router(shoal__router_opts_t *ro, const char *const *replicas, int nrep, const char *port_file, double every) {
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
  wait_for_signal(every, print_router, r, NULL, NULL);
  print_router(r);
  shoal__router_stop(r, ro->pool.request_timeout_s);
  return 0;
}

static int run_server(shoal__server_opts_t *so, const char *port_file, double every, joining_t *j) {
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
  if (j->router && !j->self[0] && shoal__serve_self_url(so->http.addr, shoal__server_port(s), j->self, sizeof j->self)) {
    fprintf(stderr, "shoal serve: --advertise: %s\n", shoal_last_error());
    shoal__server_stop(s);
    return 1;
  }
  j->server = s;
  wait_for_signal(every, print_server, s, j->router ? join_tick : NULL, j);
  /* leave the router before draining: it sends nothing new here, and a request it sent just before is still
   * answered by the drain (or, if it arrives after, refused with 503 and retried by the router elsewhere) */
  if (j->joined && shoal__serve_announce(j->router, j->self, 0, 0, 5))
    fprintf(stderr, "shoal serve: leaving the router: %s\n", shoal_last_error());
  int rc = shoal__server_drain(s, 10);
  if (rc) fprintf(stderr, "shoal serve: %s\n", shoal_last_error());
  print_server(s);
  shoal__server_stop(s);
  return rc ? 1 : 0;
}

int shoal_cmd_serve(int argc, char **argv) {
  serve_cli_t c = {.port = 8000, .threads = 1, .max_body = 1 << 20, .req_timeout = 10, .window = 10, .rejoin_every = 2};
  shoal__server_opts_init(&c.so);
  shoal__router_opts_init(&c.ro);
  c.batch_ms = 1e3 * c.so.batch_timeout_s;
  int drop_after_def = c.ro.pool.drop_after;
  c.ro.pool.drop_after = -1; /* not given */
  int st = shoal_opts_parse(&serve_spec, argc, argv, &c, NULL);
  if (st != SHOAL_OPTS_GO) return st;
  shoal__server_opts_t *so = &c.so;
  shoal__router_opts_t *ro = &c.ro;
  so->http.addr = ro->http.addr = c.addr;
  so->http.port = ro->http.port = c.port;
  so->http.max_body = ro->http.max_body = c.max_body;
  so->http.request_timeout_s = ro->http.request_timeout_s = c.req_timeout;
  if (c.max_conns) so->http.max_conns = ro->http.max_conns = c.max_conns;
  so->blas_threads = c.threads;
  so->batch_timeout_s = c.batch_ms * 1e-3;
  ro->window_s = (int)c.window;
  long drop_after = c.ro.pool.drop_after;
  if (c.router && drop_after < 0 &&
      shoal__config_long("SHOAL_SERVE_DROP_AFTER", drop_after_def, 0, 1000000, &drop_after)) {
    fprintf(stderr, "shoal serve --router: %s\n", shoal_last_error());
    return 2;
  }
  ro->pool.drop_after = (int)drop_after;
  if (c.router) return run_router(ro, c.replicas.v, c.replicas.n, c.port_file, c.every);
  joining_t j = {.router = c.register_url ? c.register_url : shoal__config_str("SHOAL_SERVE_ROUTER", NULL),
                 .every = c.rejoin_every};
  if (j.router && !j.router[0]) j.router = NULL;
  if (c.advertise && !j.router) {
    fprintf(stderr, "shoal serve: --advertise %s: the URL a router reaches this replica at, but no router to join "
            "is given (--register URL or SHOAL_SERVE_ROUTER)\n", c.advertise);
    return 2;
  }
  if (j.router && (strncmp(j.router, "http://", 7) || strlen(j.router) < 8 || strlen(j.router) > 400)) {
    fprintf(stderr, "shoal serve: %s %s: expected http://HOST:PORT\n", c.register_url ? "--register" : "SHOAL_SERVE_ROUTER",
            j.router);
    return 2;
  }
  if (c.advertise) {
    if (!shoal__pool_url_ok(c.advertise)) { /* what the router takes, or it would refuse every join */
      fprintf(stderr, "shoal serve: --advertise %s: expected http://HOST:PORT\n", c.advertise);
      return 2;
    }
    snprintf(j.self, sizeof j.self, "%s", c.advertise);
  }
  return run_server(so, c.port_file, c.every, &j);
}
