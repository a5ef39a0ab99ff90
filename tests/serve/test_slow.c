/* Slow clients (slowloris): a request that does not arrive whole within the request timeout gets 408 and
 * its connection is closed, so that a few slow clients cannot hold every connection; the server serves
 * others afterwards. No timing is asserted: only that it happens before the test's deadline. */
#include <poll.h>

#include "core/clock.h"
#include "serve_testutil.h"

/* An MLP server on loopback whose requests must arrive whole within timeout_s (max_conns 0: the default),
 * its params written to `params` (a mkstemp template). */
static shoal__server_t *start_timed_server(char *params, double timeout_s, int max_conns) {
  CHECK(mkstemp(params) >= 0);
  shoal_model_destroy(write_params(SHOAL_MODEL_MLP, 7, params));
  shoal__server_opts_t o;
  shoal__server_opts_init(&o);
  o.params_path = params;
  o.http.addr = "127.0.0.1";
  o.http.request_timeout_s = timeout_s;
  if (max_conns > 0) o.http.max_conns = max_conns;
  shoal__server_t *s = NULL;
  CHECK_OK(shoal__server_start(&o, &s));
  return s;
}

TEST(slow_clients_get_408_and_free_their_connections) {
  char params[] = "/tmp/shoal-serve-XXXXXX";
  shoal__server_t *s = start_timed_server(params, 0.5, 4);
  int port = shoal__server_port(s);
  /* four clients take every connection and send their headers a byte at a time */
  int fd[4];
  const char *hdr = "POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n";
  for (int i = 0; i < 4; i++) CHECK((fd[i] = tcp_connect(port)) >= 0);
  int closed[4] = {0}, nclosed = 0;
  char resp[4][512] = {{0}};
  for (size_t b = 0; nclosed < 4; b++) {
    for (int i = 0; i < 4; i++) {
      if (closed[i]) continue;
      if (b < strlen(hdr)) send(fd[i], hdr + b, 1, MSG_NOSIGNAL);
      struct pollfd p = {fd[i], POLLIN, 0};
      if (poll(&p, 1, 0) > 0) {
        ssize_t k = recv(fd[i], resp[i], sizeof resp[i] - 1, 0);
        if (k <= 0 || strstr(resp[i], "\r\n\r\n")) {
          closed[i] = 1;
          nclosed++;
        }
      }
    }
    shoal__sleep_s(0.05);
  }
  for (int i = 0; i < 4; i++) {
    CHECK_CONTAINS(resp[i], "408 Request Timeout");
    CHECK_CONTAINS(resp[i], "did not arrive whole within 0.5 s");
    close(fd[i]);
  }
  /* the connections are free again: a normal request is served */
  char url[128], *body = infer_body(1);
  snprintf(url, sizeof url, "http://127.0.0.1:%d/v2/models/mlp/infer", port);
  int st = 0;
  for (int tries = 0; tries < 100 && st != 200; tries++) {
    st = http_do("POST", url, body, NULL);
    if (st != 200) shoal__sleep_s(0.05);
  }
  CHECK_EQ(st, 200);
  shoal__http_counts_t *c = NULL;
  (void)c;
  free(body);
  shoal__server_stop(s);
  unlink(params);
}

/* A kept-alive connection left idle after an answered request is closed without a 408: a client sending its next
 * request on it just then would read the 408 as that request's answer. */
TEST(idle_kept_alive_connection_is_closed_without_408) {
  char params[] = "/tmp/shoal-serve-XXXXXX";
  shoal__server_t *s = start_timed_server(params, 0.3, 0);
  int fd = tcp_connect(shoal__server_port(s));
  CHECK(fd >= 0);
  const char *req = "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n";
  CHECK_EQ((long)send(fd, req, strlen(req), MSG_NOSIGNAL), (long)strlen(req));
  /* the answer, then whatever comes until the server closes (at most 20 s) */
  char buf[4096] = {0};
  size_t n = 0;
  int eof = 0;
  double until = shoal__now_s() + 20;
  while (!eof && n < sizeof buf - 1 && shoal__now_s() < until) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t k = recv(fd, buf + n, sizeof buf - 1 - n, 0);
    if (k <= 0) eof = 1;
    else n += (size_t)k;
  }
  CHECK_MSG(eof, "the idle connection was not closed: %s", buf);
  CHECK_CONTAINS(buf, "200 OK");
  CHECK_CONTAINS(buf, "\"live\":true");
  CHECK_MSG(strstr(buf, "408") == NULL, "an idle kept-alive connection got a 408: %s", buf);
  close(fd);
  shoal__server_stop(s);
  unlink(params);
}
