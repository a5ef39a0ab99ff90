/* The controller's HTTP board (board.h): libmicrohttpd serves, libcurl asks. */
#include "live/board.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/error.h"
#include "live/http_get.h"

struct shoal_live_board {
  pthread_mutex_t mu;
  char *status, *metrics;
  struct MHD_Daemon *unix_d, *tcp_d;
};

void shoal__live_board_socket(const char *id, char *buf, size_t cap) { snprintf(buf, cap, "shoal-live/%s", id); }

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *data, size_t *size, void **state) {
  (void)version, (void)data, (void)size, (void)state;
  shoal_live_board_t *b = cls;
  const char *text = NULL, *type = "text/plain; charset=utf-8";
  unsigned code = MHD_HTTP_OK;
  pthread_mutex_lock(&b->mu);
  if (strcmp(method, "GET")) code = MHD_HTTP_METHOD_NOT_ALLOWED, text = "only GET\n";
  else if (!strcmp(url, "/status")) text = b->status ? b->status : "the controller has not finished a round yet\n";
  else if (!strcmp(url, "/metrics")) text = b->metrics ? b->metrics : "", type = "text/plain; version=0.0.4";
  else code = MHD_HTTP_NOT_FOUND, text = "no such page: /status and /metrics are\n";
  struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
  pthread_mutex_unlock(&b->mu);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, "Content-Type", type);
  enum MHD_Result ok = MHD_queue_response(c, code, r);
  MHD_destroy_response(r);
  return ok;
}

static int serve_unix(shoal_live_board_t *b, const char *id) {
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  char name[100];
  shoal__live_board_socket(id, name, sizeof name);
  memcpy(sa.sun_path + 1, name, strlen(name)); /* abstract: a leading NUL */
  socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, len) || listen(fd, 16)) {
    int e = errno;
    if (fd >= 0) close(fd);
    return shoal__seterr(e == EADDRINUSE ? SHOAL_ERR_ADDR_IN_USE : SHOAL_ERR_SYSTEM,
                         "status socket @%s: %s (another controller with this identity runs here)", name, strerror(e));
  }
  b->unix_d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, answer, b, MHD_OPTION_LISTEN_SOCKET, fd,
                               MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_END);
  if (!b->unix_d) {
    close(fd);
    return shoal__seterr(SHOAL_ERR_SYSTEM, "status socket @%s: the HTTP server did not start", name);
  }
  return 0;
}

static int serve_tcp(shoal_live_board_t *b, const char *tcp) {
  char host[64];
  const char *colon = strrchr(tcp, ':');
  char *end = NULL;
  long port = colon ? strtol(colon + 1, &end, 10) : -1;
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  if (!colon || (size_t)(colon - tcp) >= sizeof host || !*(colon + 1) || *end || port < 0 || port > 65535)
    return shoal__seterr(SHOAL_ERR_CONFIG, "--metrics '%s': expected ADDR:PORT (e.g. 127.0.0.1:9464)", tcp);
  snprintf(host, sizeof host, "%.*s", (int)(colon - tcp), tcp);
  if (inet_pton(AF_INET, host[0] ? host : "0.0.0.0", &sa.sin_addr) != 1)
    return shoal__seterr(SHOAL_ERR_CONFIG, "--metrics '%s': '%s' is not an IPv4 address", tcp, host);
  sa.sin_port = htons((uint16_t)port);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, 16)) {
    int e = errno;
    if (fd >= 0) close(fd);
    return shoal__seterr(e == EADDRINUSE ? SHOAL_ERR_ADDR_IN_USE : SHOAL_ERR_SYSTEM, "--metrics %s: %s", tcp, strerror(e));
  }
  b->tcp_d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, answer, b, MHD_OPTION_LISTEN_SOCKET, fd,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
                              MHD_OPTION_END);
  if (!b->tcp_d) {
    close(fd);
    return shoal__seterr(SHOAL_ERR_SYSTEM, "--metrics %s: the HTTP server did not start", tcp);
  }
  return 0;
}

int shoal__live_board_listen_id(shoal_live_board_t *b, const char *id) { return serve_unix(b, id); }

int shoal__live_board_create(const char *tcp, shoal_live_board_t **out) {
  shoal_live_board_t *b = calloc(1, sizeof *b);
  if (!b) return shoal__seterr(SHOAL_ERR_NOMEM, "board: out of memory");
  pthread_mutex_init(&b->mu, NULL);
  int rc = tcp ? serve_tcp(b, tcp) : 0;
  if (rc) {
    shoal__live_board_destroy(b);
    return rc;
  }
  *out = b;
  return 0;
}

void shoal__live_board_set(shoal_live_board_t *b, const char *status, const char *metrics) {
  char *s = strdup(status), *m = strdup(metrics);
  pthread_mutex_lock(&b->mu);
  if (s) free(b->status), b->status = s;
  if (m) free(b->metrics), b->metrics = m;
  pthread_mutex_unlock(&b->mu);
  if (!s) free(m);
  if (!m) free(s);
}

void shoal__live_board_destroy(shoal_live_board_t *b) {
  if (!b) return;
  if (b->unix_d) MHD_stop_daemon(b->unix_d);
  if (b->tcp_d) MHD_stop_daemon(b->tcp_d);
  pthread_mutex_destroy(&b->mu);
  free(b->status);
  free(b->metrics);
  free(b);
}

int shoal__live_board_fetch(const char *id, const char *path, double deadline_s, char **body) {
  char name[100], url[128];
  shoal__live_board_socket(id, name, sizeof name);
  snprintf(url, sizeof url, "http://localhost%s", path);
  shoal__live_get_fail_t f;
  if (!shoal__live_http_get(url, name, deadline_s, (size_t)16 << 20, body, &f)) return 0; /* (a status is kilobytes) */
  if (f.curl == CURLE_COULDNT_CONNECT)
    return shoal__seterr(SHOAL_ERR_CONNECT, "no controller %s answers here (socket @%s: is it running, in this "
                         "network namespace?)", id, name);
  if (f.curl < 0) return shoal__seterr(SHOAL_ERR_NOMEM, "status: %s", f.err);
  return shoal__seterr(SHOAL_ERR_IO, "controller %s: %s", id,
                       f.curl != CURLE_OK ? curl_easy_strerror((CURLcode)f.curl) : "HTTP error");
}
