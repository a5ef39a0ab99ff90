/* The router: a replica killed while it holds requests (they are retried on another, each answered once),
 * replicas added and dropped under load without a request lost, requests held while no replica is live, the
 * requests beyond one per live replica counted as waiting. */
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "core/clock.h"
#include "serve/loadgen.h"
#include "serve_testutil.h"

/* A replica in a child process (so that it can be killed): its port, or -1. */
static int fork_replica(const char *params, double batch_timeout_s, pid_t *pid) {
  int p[2];
  CHECK(pipe(p) == 0);
  fflush(NULL);
  *pid = fork();
  CHECK(*pid >= 0);
  if (*pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(p[0]);
    shoal__server_opts_t o;
    shoal__server_opts_init(&o);
    o.params_path = params;
    o.http.addr = "127.0.0.1";
    o.max_batch = 64;
    o.batch_timeout_s = batch_timeout_s;
    shoal__server_t *s = NULL;
    int port = shoal__server_start(&o, &s) ? -1 : shoal__server_port(s);
    (void)!write(p[1], &port, sizeof port);
    for (;;) pause();
  }
  close(p[1]);
  int port = -1;
  CHECK(read(p[0], &port, sizeof port) == sizeof port);
  close(p[0]);
  return port;
}

static shoal__router_t *start_router(void) {
  shoal__router_opts_t o;
  shoal__router_opts_init(&o);
  o.http.addr = "127.0.0.1";
  o.pool.health_every_s = 0.05;
  o.pool.try_timeout_s = 60; /* a try ends by the replica's death here, not by a timeout */
  o.pool.request_timeout_s = 100;
  shoal__router_t *r = NULL;
  CHECK_OK(shoal__router_start(&o, &r));
  return r;
}

static void add(shoal__router_t *r, int port) {
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
  CHECK_OK(shoal__pool_add(shoal__router_pool(r), url));
}

static void wait_live(shoal__router_t *r, int n) {
  shoal__router_stats_t st;
  do {
    shoal__sleep_s(0.01);
    shoal__router_stats(r, &st);
  } while (st.c.live != n);
}

typedef struct {
  int port, status;
  char *body, *ans;
} req_arg_t;

static void *post_thread(void *arg) {
  req_arg_t *a = arg;
  char url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/v2/models/mlp/infer", a->port);
  a->status = http_do("POST", url, a->body, &a->ans);
  return NULL;
}

/* n requests posted at once, each from its own thread (a[i] holds its answer once t[i] is joined) */
static void post_all(shoal__router_t *r, char *body, req_arg_t *a, pthread_t *t, int n) {
  for (int i = 0; i < n; i++) {
    a[i] = (req_arg_t){shoal__router_port(r), 0, body, NULL};
    pthread_create(&t[i], NULL, post_thread, &a[i]);
  }
}

TEST(a_replica_killed_mid_request_is_retried_on_another) {
  char params[] = "/tmp/shoal-serve-XXXXXX";
  CHECK(mkstemp(params) >= 0);
  shoal_model_destroy(write_params(SHOAL_MODEL_MLP, 7, params));
  pid_t pid;
  int dying = fork_replica(params, 600, &pid); /* holds every request: its batches never fill */
  CHECK(dying > 0);
  shoal__server_t *other = start_server(params, 32, 0.001, 64);
  shoal__router_t *r = start_router();
  add(r, dying);
  wait_live(r, 1);
  enum { N = 6 };
  pthread_t t[N];
  req_arg_t a[N];
  char *body = infer_body(1);
  post_all(r, body, a, t, N);
  shoal__router_stats_t st;
  do { /* all N sit in the dying replica's queue */
    shoal__sleep_s(0.01);
    shoal__router_stats(r, &st);
  } while (st.c.in_flight < N);
  add(r, shoal__server_port(other));
  wait_live(r, 2);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  for (int i = 0; i < N; i++) {
    pthread_join(t[i], NULL);
    CHECK_EQ(a[i].status, 200);
    CHECK_CONTAINS(a[i].ans, "\"id\":\"t1\"");
    free(a[i].ans);
  }
  shoal__router_stats(r, &st);
  CHECK_EQ(st.c.accepted, N);
  CHECK_EQ(st.c.answered, N); /* each once */
  CHECK_EQ(st.c.ok, N);
  CHECK_EQ(st.c.retries, N);
  shoal__server_stats_t *ss = malloc(sizeof *ss);
  shoal__server_stats(other, ss);
  CHECK_EQ(ss->ok, N);
  free(ss);
  free(body);
  shoal__router_stop(r, 5);
  shoal__server_stop(other);
  unlink(params);
}

/* "waiting", the loaning controller's on-demand signal: the requests held beyond one per live replica holding any
 * (each replica serves one at a time in the policy's model), not only those no replica has taken: a burst handed
 * to too few replicas at once is demand. */
TEST(requests_beyond_one_per_live_replica_count_as_waiting) {
  char params[] = "/tmp/shoal-serve-XXXXXX";
  CHECK(mkstemp(params) >= 0);
  shoal_model_destroy(write_params(SHOAL_MODEL_MLP, 7, params));
  pid_t pid[2];
  int holder[2];
  for (int k = 0; k < 2; k++) CHECK((holder[k] = fork_replica(params, 600, &pid[k])) > 0); /* batches never fill */
  shoal__server_t *other = start_server(params, 32, 0.001, 64);
  shoal__router_t *r = start_router();
  add(r, holder[0]);
  add(r, holder[1]);
  wait_live(r, 2);
  shoal__router_stats_t st;
  shoal__router_stats(r, &st);
  CHECK_EQ(st.c.waiting, 0);
  enum { N = 6 };
  pthread_t t[N];
  req_arg_t a[N];
  char *body = infer_body(1);
  post_all(r, body, a, t, N);
  do { /* all N on the two replicas (the fewest outstanding first: 3 each), none answered */
    shoal__sleep_s(0.01);
    shoal__router_stats(r, &st);
  } while (st.c.in_flight < N);
  CHECK_EQ(st.c.in_line, 0);
  CHECK_EQ(st.c.live, 2);
  CHECK_EQ(st.c.waiting, N - 2); /* each replica serves one, the other four wait behind them */
  char url[128], *ans = NULL;
  snprintf(url, sizeof url, "http://127.0.0.1:%d/router/stats", shoal__router_port(r));
  CHECK_EQ(http_do("GET", url, NULL, &ans), 200); /* what the controller reads */
  CHECK_CONTAINS(ans, "\"waiting\":4");
  CHECK_CONTAINS(ans, "\"in_line\":0");
  free(ans);
  snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", shoal__router_port(r));
  CHECK_EQ(http_do("GET", url, NULL, &ans), 200);
  CHECK_CONTAINS(ans, "shoal_router_waiting 4\n");
  free(ans);
  add(r, shoal__server_port(other)); /* live but idle: the four still wait where they are */
  wait_live(r, 3);
  shoal__router_stats(r, &st);
  CHECK_EQ(st.c.waiting, N - 2);
  for (int k = 0; k < 2; k++) {
    kill(pid[k], SIGKILL);
    waitpid(pid[k], NULL, 0);
  }
  for (int i = 0; i < N; i++) { /* retried on the third */
    pthread_join(t[i], NULL);
    CHECK_EQ(a[i].status, 200);
    free(a[i].ans);
  }
  shoal__router_stats(r, &st);
  CHECK_EQ(st.c.answered, N);
  CHECK_EQ(st.c.waiting, 0);
  CHECK_EQ(st.c.in_line, 0);
  free(body);
  shoal__router_stop(r, 5);
  shoal__server_stop(other);
  unlink(params);
}

TEST(a_request_waits_while_no_replica_is_live) {
  char params[] = "/tmp/shoal-serve-XXXXXX";
  CHECK(mkstemp(params) >= 0);
  shoal_model_destroy(write_params(SHOAL_MODEL_MLP, 7, params));
  shoal__router_t *r = start_router();
  char url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/v2/health/ready", shoal__router_port(r));
  CHECK_EQ(http_do("GET", url, NULL, NULL), 503);
  req_arg_t a = {shoal__router_port(r), 0, infer_body(1), NULL};
  pthread_t t;
  pthread_create(&t, NULL, post_thread, &a);
  shoal__router_stats_t st;
  do {
    shoal__sleep_s(0.01);
    shoal__router_stats(r, &st);
  } while (st.c.accepted < 1);
  CHECK_EQ(st.c.waiting, 1); /* no replica serves it */
  CHECK_EQ(st.c.in_line, 1);
  shoal__server_t *s = start_server(params, 32, 0.001, 64);
  add(r, shoal__server_port(s));
  pthread_join(t, NULL);
  CHECK_EQ(a.status, 200);
  CHECK_EQ(http_do("GET", url, NULL, NULL), 200);
  free(a.ans);
  free(a.body);
  shoal__router_stop(r, 5);
  shoal__server_stop(s);
  unlink(params);
}

TEST(bad_replica_changes_are_refused) {
  shoal__router_t *r = start_router();
  shoal__pool_t *p = shoal__router_pool(r);
  CHECK_EQ(shoal__pool_add(p, "127.0.0.1:80"), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "expected http://HOST:PORT");
  CHECK_EQ(shoal__pool_add(p, "http://127.0.0.1:99999"), SHOAL_ERR_INVALID);
  CHECK_OK(shoal__pool_add(p, "http://127.0.0.1:9"));
  CHECK_EQ(shoal__pool_add(p, "http://127.0.0.1:9"), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "in the pool already");
  CHECK_EQ(shoal__pool_drop(p, "http://127.0.0.1:10"), SHOAL_ERR_NOT_FOUND);
  char url[128], *ans = NULL;
  snprintf(url, sizeof url, "http://127.0.0.1:%d/router/replicas", shoal__router_port(r));
  CHECK_EQ(http_do("POST", url, "{\"add\":\"nonsense\"}", &ans), 400);
  CHECK_CONTAINS(ans, "expected http://HOST:PORT");
  free(ans);
  CHECK_EQ(http_do("POST", url, "{\"drop\":\"http://127.0.0.1:9\"}", NULL), 200);
  CHECK_EQ(http_do("POST", url, "{\"drop\":\"http://127.0.0.1:9\"}", &ans), 404);
  free(ans);
  CHECK_EQ(http_do("POST", url, "[", &ans), 400);
  CHECK_CONTAINS(ans, "not JSON");
  free(ans);
  CHECK_EQ(http_do("POST", url, "{\"add\":\"http://127.0.0.1:9\",\"service_s\":-1}", &ans), 400);
  CHECK_CONTAINS(ans, "service_s");
  free(ans);
  CHECK_EQ(http_do("POST", url, "{\"add\":\"http://127.0.0.1:9\",\"service_s\":\"fast\"}", &ans), 400);
  free(ans);
  shoal__router_stop(r, 1);
}

TEST(replicas_come_and_go_under_load_without_a_request_lost) {
  if (access(SHOAL_FASHION_MNIST_DIR "/t10k-images-idx3-ubyte.gz", R_OK))
    shoal_test_skip("dataset-fashion-mnist is not installed");
  char params[] = "/tmp/shoal-serve-XXXXXX";
  CHECK(mkstemp(params) >= 0);
  shoal_model_destroy(write_params(SHOAL_MODEL_MLP, 7, params));
  shoal__server_t *s[3];
  for (int i = 0; i < 3; i++) s[i] = start_server(params, 32, 0.001, 1024);
  shoal__router_t *r = start_router();
  add(r, shoal__server_port(s[0]));
  add(r, shoal__server_port(s[1]));
  wait_live(r, 2);
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", shoal__router_port(r));
  shoal__reqtimes_t times;
  lg_arg_t a;
  pthread_t t;
  load_start(&a, &times, url, &t);
  /* while it runs: drop the first, add the third, drop the second (each drop waits for its requests) */
  char u[3][64];
  for (int i = 0; i < 3; i++) snprintf(u[i], sizeof u[i], "http://127.0.0.1:%d", shoal__server_port(s[i]));
  shoal__sleep_s(0.5);
  CHECK_OK(shoal__pool_drop(shoal__router_pool(r), u[0]));
  shoal__sleep_s(0.5);
  CHECK_OK(shoal__pool_add(shoal__router_pool(r), u[2]));
  wait_live(r, 2);
  CHECK_OK(shoal__pool_drop(shoal__router_pool(r), u[1]));
  pthread_join(t, NULL);
  CHECK_OK(a.rc);
  CHECK_EQ(a.res.ok, times.n);
  CHECK_EQ(a.res.failed, 0);
  shoal__router_stats_t st;
  shoal__router_stats(r, &st);
  CHECK_EQ(st.c.answered, times.n);
  CHECK_EQ(st.c.ok, times.n);
  shoal__server_stats_t *ss = malloc(sizeof *ss);
  uint64_t sum = 0;
  for (int i = 0; i < 3; i++) {
    shoal__server_stats(s[i], ss);
    sum += ss->ok;
  }
  CHECK_EQ(sum, times.n);
  free(ss);
  shoal__replica_info_t ri[4];
  CHECK_EQ(shoal__pool_replicas(shoal__router_pool(r), ri, 4), 1); /* the dropped ones are gone */
  CHECK(!strcmp(ri[0].url, u[2]));
  shoal__reqtimes_free(&times);
  shoal__router_stop(r, 5);
  for (int i = 0; i < 3; i++) shoal__server_stop(s[i]);
  unlink(params);
}
