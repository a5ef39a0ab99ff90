/* Bootstrap socket helpers: deadlines everywhere, errors that name the target. */
#include "comm/bootstrap/sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/error.h"

void shoal__sock_addr_str(const struct sockaddr_in *a, char *out, size_t cap) {
  char ip[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
  snprintf(out, cap, "%s:%d", ip, ntohs(a->sin_port));
}

int shoal__err_prefix(int status, const char *fmt, ...) {
  char prev[1024], pre[512];
  snprintf(prev, sizeof prev, "%s", shoal_last_error());
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pre, sizeof pre, fmt, ap);
  va_end(ap);
  return shoal__seterr(status, "%s%s", pre, prev);
}

int shoal__sock_resolve(const char *host, struct in_addr *out) {
  struct in_addr a;
  if (inet_pton(AF_INET, host, &a) == 1) {
    *out = a;
    return 0;
  }
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host, NULL, &hints, &res);
  if (rc != 0 || !res)
    return shoal__seterr(SHOAL_ERR_NOT_FOUND, "cannot resolve host '%s': %s", host, gai_strerror(rc));
  *out = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return 0;
}

int shoal__sock_set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
    return shoal__seterr(SHOAL_ERR_SYSTEM, "fcntl(O_NONBLOCK): %s", strerror(errno));
  return 0;
}

void shoal__sock_tune(int fd, long bufsize) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (bufsize > 0) {
    int b = bufsize > 1 << 30 ? 1 << 30 : (int)bufsize;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &b, sizeof b);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof b);
  }
}

void shoal__sock_set_rcvbuf(int fd, long bytes) {
  int b = bytes > 1 << 30 ? 1 << 30 : (int)bytes;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof b);
}

static void current_cc(int fd, char *used, size_t cap) {
  char cur[32] = "";
  socklen_t len = sizeof cur - 1;
  if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cur, &len) != 0) snprintf(cur, sizeof cur, "?");
  cur[sizeof cur - 1] = '\0';
  snprintf(used, cap, "%s", cur);
}

int shoal__sock_congestion(int fd, const char *mode, char *used, size_t cap) {
  current_cc(fd, used, cap);
  if (!strcmp(mode, "system")) return 0;
  if (!strcmp(mode, "auto")) {
    if (strcmp(used, "bbr")) return 0;
    static const char *const prefer[] = {"cubic", "reno"}; /* reno is always allowed unprivileged */
    for (int i = 0; i < 2; i++)
      if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, prefer[i], (socklen_t)strlen(prefer[i])) == 0) {
        snprintf(used, cap, "%s", prefer[i]);
        return 0;
      }
    return 0; /* keep bbr: nothing else allowed */
  }
  if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, mode, (socklen_t)strlen(mode)) != 0)
    return shoal__seterr(SHOAL_ERR_CONFIG, "SHOAL_TCP_CONGESTION='%s': %s (available: "
                         "/proc/sys/net/ipv4/tcp_available_congestion_control; allowed without privileges: "
                         "tcp_allowed_congestion_control)", mode, strerror(errno));
  snprintf(used, cap, "%s", mode);
  return 0;
}

int shoal__sock_listen(struct in_addr ip, int port, int *fd_out, int *port_out) {
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr = ip;
  a.sin_port = htons((uint16_t)port);
  char where[64];
  shoal__sock_addr_str(&a, where, sizeof where);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return shoal__seterr(SHOAL_ERR_SYSTEM, "socket: %s", strerror(errno));
  int one = 1;
  /* SO_REUSEADDR only lets us reuse ports in TIME_WAIT; a live listener still gives EADDRINUSE. */
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) {
    int e = errno;
    close(fd);
    if (e == EADDRINUSE)
      return shoal__seterr(SHOAL_ERR_ADDR_IN_USE,
                           "bind %s: address already in use (another job or a stale rank holds the port; "
                           "pick another with SHOAL_MASTER_PORT; under shoal launch, 0 lets rank 0 choose)", where);
    return shoal__seterr(SHOAL_ERR_SYSTEM, "bind %s: %s", where, strerror(e));
  }
  if (listen(fd, 1024) < 0) {
    int e = errno;
    close(fd);
    return shoal__seterr(SHOAL_ERR_SYSTEM, "listen %s: %s", where, strerror(e));
  }
  socklen_t len = sizeof a;
  getsockname(fd, (struct sockaddr *)&a, &len);
  *fd_out = fd;
  if (port_out) *port_out = ntohs(a.sin_port);
  return 0;
}

/* One nonblocking connect attempt bounded by the deadline: 0, or errno. */
static int connect_once(struct sockaddr_in *a, shoal__deadline_t dl, int *fd_out) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return errno;
  if (connect(fd, (struct sockaddr *)a, sizeof *a) < 0) {
    if (errno != EINPROGRESS) {
      int e = errno;
      close(fd);
      return e;
    }
    struct pollfd p = {fd, POLLOUT, 0};
    int ms = shoal__deadline_ms_left(dl);
    int pr = poll(&p, 1, ms > 1000 ? 1000 : ms);
    if (pr <= 0) {
      close(fd);
      return pr == 0 ? ETIMEDOUT : errno;
    }
    int err = 0;
    socklen_t el = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err) {
      close(fd);
      return err;
    }
  }
  shoal__sock_tune(fd, 0); /* small request/reply frames: Nagle + delayed ACK would add 40 ms each */
  *fd_out = fd;
  return 0;
}

int shoal__sock_try_connect(struct in_addr ip, int port, shoal__deadline_t dl, int *fd_out) {
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr = ip;
  a.sin_port = htons((uint16_t)port);
  for (;;) { /* connect_once polls at most 1 s at a time */
    int e = connect_once(&a, dl, fd_out);
    if (e != ETIMEDOUT || shoal__deadline_ms_left(dl) == 0) return e;
  }
}

int shoal__sock_parse_addr(const char *s, struct in_addr *ip, int *port) {
  char host[64];
  snprintf(host, sizeof host, "%s", s);
  char *colon = strrchr(host, ':');
  if (!colon) return shoal__seterr(SHOAL_ERR_PROTOCOL, "'%s' is not an address (ip:port)", s);
  *colon = '\0';
  char *end;
  long p = strtol(colon + 1, &end, 10);
  if (*end || p <= 0 || p > 65535 || inet_pton(AF_INET, host, ip) != 1)
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "'%s' is not an address (ip:port)", s);
  *port = (int)p;
  return 0;
}

int shoal__sock_connect(struct in_addr ip, int port, shoal__deadline_t dl, const char *what, int *fd_out) {
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr = ip;
  a.sin_port = htons((uint16_t)port);
  char where[64];
  shoal__sock_addr_str(&a, where, sizeof where);
  double backoff = 0.01;
  int attempts = 0, last = 0;
  double t0 = shoal__now_s();
  for (;;) {
    attempts++;
    last = connect_once(&a, dl, fd_out);
    if (last == 0) return 0;
    if (last != ECONNREFUSED && last != ETIMEDOUT && last != EHOSTUNREACH && last != ENETUNREACH &&
        last != ECONNRESET && last != EAGAIN && last != EINTR)
      return shoal__seterr(SHOAL_ERR_CONNECT, "cannot connect to %s at %s: %s", what, where, strerror(last));
    int ms = shoal__deadline_ms_left(dl);
    if (ms == 0) break;
    double s = backoff < ms / 1000.0 ? backoff : ms / 1000.0;
    shoal__sleep_s(s);
    backoff = backoff * 2 > 1.0 ? 1.0 : backoff * 2;
  }
  return shoal__seterr(SHOAL_ERR_CONNECT,
                       "cannot connect to %s at %s within %.1f s (%d attempts, last error: %s); is it running, "
                       "and are the address and port right?",
                       what, where, shoal__now_s() - t0, attempts, strerror(last));
}

int shoal__sock_accept(int lfd, shoal__deadline_t dl, int *fd_out, struct sockaddr_in *peer) {
  for (;;) {
    struct pollfd p = {lfd, POLLIN, 0};
    int pr = poll(&p, 1, shoal__deadline_ms_left(dl));
    if (pr < 0 && errno == EINTR) continue;
    if (pr < 0) return shoal__seterr(SHOAL_ERR_SYSTEM, "poll: %s", strerror(errno));
    if (pr == 0) return shoal__seterr(SHOAL_ERR_TIMEOUT, "accept: deadline passed");
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = accept4(lfd, (struct sockaddr *)&a, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) continue;
      return shoal__seterr(SHOAL_ERR_SYSTEM, "accept: %s", strerror(errno));
    }
    if (peer) *peer = a;
    shoal__sock_tune(fd, 0);
    *fd_out = fd;
    return 0;
  }
}

int shoal__sock_write_all(int fd, const void *buf, size_t n, shoal__deadline_t dl, const char *what) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno != EAGAIN) {
      if (errno == EPIPE || errno == ECONNRESET)
        return shoal__seterr(SHOAL_ERR_PEER_CLOSED, "%s: connection closed by the other side (%s)", what, strerror(errno));
      return shoal__seterr(SHOAL_ERR_IO, "%s: send: %s", what, strerror(errno));
    }
    struct pollfd pf = {fd, POLLOUT, 0};
    int pr = poll(&pf, 1, shoal__deadline_ms_left(dl));
    if (pr == 0) return shoal__seterr(SHOAL_ERR_TIMEOUT, "%s: timed out sending", what);
    if (pr < 0 && errno != EINTR) return shoal__seterr(SHOAL_ERR_SYSTEM, "%s: poll: %s", what, strerror(errno));
  }
  return 0;
}

int shoal__sock_read_all(int fd, void *buf, size_t n, shoal__deadline_t dl, const char *what) {
  char *p = buf;
  while (n > 0) {
    ssize_t r = recv(fd, p, n, 0);
    if (r > 0) {
      p += r;
      n -= (size_t)r;
      continue;
    }
    if (r == 0) return shoal__seterr(SHOAL_ERR_PEER_CLOSED, "%s: connection closed by the other side", what);
    if (errno == EINTR) continue;
    if (errno != EAGAIN) {
      if (errno == ECONNRESET)
        return shoal__seterr(SHOAL_ERR_PEER_CLOSED, "%s: connection reset by the other side", what);
      return shoal__seterr(SHOAL_ERR_IO, "%s: recv: %s", what, strerror(errno));
    }
    struct pollfd pf = {fd, POLLIN, 0};
    int pr = poll(&pf, 1, shoal__deadline_ms_left(dl));
    if (pr == 0) return shoal__seterr(SHOAL_ERR_TIMEOUT, "%s: timed out waiting for data", what);
    if (pr < 0 && errno != EINTR) return shoal__seterr(SHOAL_ERR_SYSTEM, "%s: poll: %s", what, strerror(errno));
  }
  return 0;
}
