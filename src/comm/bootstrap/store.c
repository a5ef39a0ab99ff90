/* Rendezvous store: a poll()-driven server thread in rank 0, and a blocking
 * client with deadlines. Each client is a small state machine over its input
 * buffer, so a slow or hostile client never stalls the others. */
#include "comm/bootstrap/store.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/bootstrap/sock.h"
#include "core/error.h"
#include "core/log.h"

#define HDR 8

typedef struct store_client {
  int fd;
  char addr[64];
  uint8_t nonce[SHOAL__NONCE_BYTES];
  int authed;
  unsigned char *in;
  size_t in_len, in_cap;
  char *wait_key; /* a GET with wait pending on this key */
} store_client_t;

typedef struct kv {
  char *key;
  void *val;
  size_t len;
} kv_t;

struct shoal__store_server {
  int lfd;
  int wake[2];
  shoal__authkey_t key;
  pthread_t thread;
  store_client_t *cl;
  int ncl, capcl;
  kv_t *kv;
  int nkv, capkv;
  int reserve;                    /* /dev/null, given up to take one connection in when out of descriptors */
  char door_closed[200];          /* why the store turns every new connection away ("" while it takes them) */
  int size;                       /* rank 0's world size */
  char job[SHOAL__JOB_ID_MAX + 1]; /* rank 0's SHOAL_JOB_ID ("" if unset) */
};

static void put_hdr(unsigned char *h, uint32_t len, int type) {
  memset(h, 0, HDR);
  shoal__put_u32(h, len);
  h[4] = (unsigned char)type;
}

/* Small replies to a client that is blocked reading: bounded by 2 s. */
static int reply(store_client_t *c, int type, const void *p1, size_t n1, const void *p2, size_t n2) {
  unsigned char h[HDR];
  put_hdr(h, (uint32_t)(n1 + n2), type);
  shoal__deadline_t dl = shoal__deadline_in(2.0);
  int rc = shoal__sock_write_all(c->fd, h, HDR, dl, "store reply");
  if (!rc && n1) rc = shoal__sock_write_all(c->fd, p1, n1, dl, "store reply");
  if (!rc && n2) rc = shoal__sock_write_all(c->fd, p2, n2, dl, "store reply");
  return rc;
}

static void drop(struct shoal__store_server *s, int i, const char *why) {
  store_client_t *c = &s->cl[i];
  if (why) SHOAL_WARN("INIT", "store: closing connection from %s: %s", c->addr, why);
  close(c->fd);
  free(c->in);
  free(c->wait_key);
  s->cl[i] = s->cl[--s->ncl];
}

static kv_t *find(struct shoal__store_server *s, const char *key) {
  for (int i = 0; i < s->nkv; i++)
    if (!strcmp(s->kv[i].key, key)) return &s->kv[i];
  return NULL;
}

/* Set key = val (copied), then wake the waiters on it, or every waiter
 * when the key is the abort key (the rendezvous is abandoned). NULL or the
 * reason to drop the client. */
static const char *put(struct shoal__store_server *s, const char *who, const char *k, size_t kl, const void *v,
                       size_t vl) {
  char *key = strndup(k, kl);
  void *val = malloc(vl ? vl : 1);
  if (!key || !val) {
    free(key);
    free(val);
    return "out of memory";
  }
  memcpy(val, v, vl);
  kv_t *e = find(s, key);
  if (e) {
    SHOAL_WARN("INIT", "store: key '%s' set again by %s", key, who);
    free(e->val);
    free(key);
  } else {
    if (s->nkv == s->capkv) {
      int cap = s->capkv ? 2 * s->capkv : 64;
      kv_t *nk = realloc(s->kv, (size_t)cap * sizeof *nk);
      if (!nk) {
        free(key);
        free(val);
        return "out of memory";
      }
      s->kv = nk;
      s->capkv = cap;
    }
    e = &s->kv[s->nkv++];
    e->key = key;
  }
  e->val = val;
  e->len = vl;
  int is_abort = !strcmp(e->key, SHOAL__STORE_ABORT_KEY);
  for (int i = 0; i < s->ncl; i++) {
    store_client_t *w = &s->cl[i];
    if (w->wait_key && is_abort) {
      free(w->wait_key);
      w->wait_key = NULL;
      if (reply(w, SHOAL__STORE_ERROR, e->val, e->len, NULL, 0)) SHOAL_DEBUG("INIT", "store: %s is gone", w->addr);
    } else if (w->wait_key && !strcmp(w->wait_key, e->key)) {
      free(w->wait_key);
      w->wait_key = NULL;
      if (reply(w, SHOAL__STORE_VALUE, e->val, e->len, NULL, 0)) SHOAL_DEBUG("INIT", "store: %s is gone", w->addr);
    }
  }
  return NULL;
}

/* The rendezvous is abandoned: every rank waiting on a key is told (status, reason) through the abort key,
 * and with tell_joining also those still joining (not waiting on a key). NULL or the reason to drop. */
static const char *abandon(struct shoal__store_server *s, const char *who, int status, const char *why,
                           int tell_joining) {
  char ab[4 + 1024]; /* (join's reasons are up to 900 bytes) */
  shoal__put_u32((unsigned char *)ab, (uint32_t)-status);
  size_t wl = strlen(why) < sizeof ab - 4 ? strlen(why) : sizeof ab - 4;
  memcpy(ab + 4, why, wl);
  for (int i = 0; tell_joining && i < s->ncl; i++)
    if (!s->cl[i].wait_key) reply(&s->cl[i], SHOAL__STORE_ERROR, ab, 4 + wl, NULL, 0);
  return put(s, who, SHOAL__STORE_ABORT_KEY, strlen(SHOAL__STORE_ABORT_KEY), ab, 4 + wl);
}

/* A rank registers: same job, same world size, a rank nobody took yet. */
static const char *join(struct shoal__store_server *s, store_client_t *c, const unsigned char *p, size_t n) {
  if (n < 8 || n > 8 + SHOAL__JOB_ID_MAX) return "bad JOIN frame";
  int r = (int)shoal__get_u32(p), size = (int)shoal__get_u32(p + 4);
  char job[SHOAL__JOB_ID_MAX + 1];
  memcpy(job, p + 8, n - 8);
  job[n - 8] = '\0';
  char why[900], key[32];
  int poison = 0;
  kv_t *e = NULL;
  snprintf(key, sizeof key, "join/%d", r);
  if (strcmp(job, s->job))
    snprintf(why, sizeof why, "rank %d from %s belongs to another job (SHOAL_JOB_ID '%s'; this store serves job "
             "'%s'): two jobs on one store port? give each its own SHOAL_MASTER_PORT", r, c->addr, job, s->job);
  else if (size != s->size)
    poison = 1, snprintf(why, sizeof why, "rank %d (%s) was started with world size %d but rank 0 with %d: every "
                         "rank must get the same world size", r, c->addr, size, s->size);
  else if (r < 0 || r >= size)
    snprintf(why, sizeof why, "rank %d from %s is out of range for a world of %d", r, c->addr, size);
  else if ((e = find(s, key)))
    poison = 1, snprintf(why, sizeof why, "rank %d joined twice, from %.*s and from %s: two ranks were given the "
                         "same rank number, or two jobs share the store port %s (give each job its own port, or "
                         "start them with `shoal launch`, which sets SHOAL_JOB_ID)", r, (int)e->len,
                         (const char *)e->val, c->addr, job[0] ? "" : "without a job id");
  else
    why[0] = '\0';
  if (!why[0]) {
    if (reply(c, SHOAL__STORE_VALUE, NULL, 0, NULL, 0)) return "write failed";
    return put(s, c->addr, key, strlen(key), c->addr, strlen(c->addr));
  }
  unsigned char st[4];
  shoal__put_u32(st, (uint32_t)-SHOAL_ERR_CONFIG);
  reply(c, SHOAL__STORE_ERROR, st, 4, why, strlen(why));
  SHOAL_WARN("INIT", "store: refused: %s%s", why, poison ? "; the rendezvous is abandoned" : "");
  if (poison) {
    const char *err = abandon(s, c->addr, SHOAL_ERR_CONFIG, why, 0);
    if (err) return err;
  }
  return "refused";
}

/* Handle one complete frame; returns NULL or the reason to drop the client. */
static const char *handle(struct shoal__store_server *s, store_client_t *c, int type, unsigned char *p, size_t n) {
  if (!c->authed) {
    if (type != SHOAL__STORE_AUTH || n != SHOAL__NONCE_BYTES + 8)
      return "first frame is not an authentication answer (not a shoal rank, or another version)";
    uint64_t mac = shoal__get_u64(p + SHOAL__NONCE_BYTES);
    if (mac != shoal__auth_mac(&s->key, 'C', c->nonce, p, NULL, 0)) {
      static const char why[] = "wrong SHOAL_TOKEN (the store and this rank were given different tokens)";
      reply(c, SHOAL__STORE_AUTH_FAIL, why, sizeof why - 1, NULL, 0);
      return "wrong token: refused";
    }
    unsigned char out[8];
    shoal__put_u64(out, shoal__auth_mac(&s->key, 'A', p, c->nonce, NULL, 0));
    c->authed = 1;
    return reply(c, SHOAL__STORE_AUTH_OK, out, 8, NULL, 0) ? "write failed" : NULL;
  }
  if (type == SHOAL__STORE_JOIN) return join(s, c, p, n);
  if (type == SHOAL__STORE_SET) {
    if (n < 4) return "short SET frame";
    uint32_t kl = shoal__get_u32(p);
    if (kl == 0 || kl > n - 4 || kl > 1024) return "bad key length in SET frame";
    if (reply(c, SHOAL__STORE_VALUE, NULL, 0, NULL, 0)) return "write failed";
    return put(s, c->addr, (char *)p + 4, kl, p + 4 + kl, n - 4 - kl);
  }
  if (type == SHOAL__STORE_GET) {
    if (n < 2 || n > 1025) return "bad GET frame";
    if (c->wait_key) return "GET while another GET is pending";
    char *key = strndup((char *)p + 1, n - 1);
    if (!key) return "out of memory";
    kv_t *e = find(s, key);
    if (e) {
      free(key);
      return reply(c, SHOAL__STORE_VALUE, e->val, e->len, NULL, 0) ? "write failed" : NULL;
    }
    if (!p[0]) {
      free(key);
      return reply(c, SHOAL__STORE_NOT_FOUND, NULL, 0, NULL, 0) ? "write failed" : NULL;
    }
    kv_t *ab = find(s, SHOAL__STORE_ABORT_KEY);
    if (ab) { /* the rendezvous was abandoned: nothing more will arrive */
      free(key);
      return reply(c, SHOAL__STORE_ERROR, ab->val, ab->len, NULL, 0) ? "write failed" : NULL;
    }
    c->wait_key = key;
    return NULL;
  }
  return "unknown frame type";
}

static void on_readable(struct shoal__store_server *s, int i) {
  store_client_t *c = &s->cl[i];
  if (c->in_cap - c->in_len < 4096) {
    size_t cap = c->in_cap ? 2 * c->in_cap : 8192;
    if (cap > SHOAL__STORE_MAX_FRAME + 2 * HDR + 8192) cap = SHOAL__STORE_MAX_FRAME + 2 * HDR + 8192;
    if (cap <= c->in_len) {
      drop(s, i, "input buffer overflow");
      return;
    }
    unsigned char *nb = realloc(c->in, cap);
    if (!nb) {
      drop(s, i, "out of memory");
      return;
    }
    c->in = nb;
    c->in_cap = cap;
  }
  ssize_t r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
  if (r == 0) {
    drop(s, i, NULL); /* a client that is done */
    return;
  }
  if (r < 0) {
    if (errno != EAGAIN && errno != EINTR) { /* a client that gave up and vanished: not a protocol problem */
      SHOAL_DEBUG("INIT", "store: %s: %s", c->addr, strerror(errno));
      drop(s, i, NULL);
    }
    return;
  }
  c->in_len += (size_t)r;
  size_t off = 0;
  while (c->in_len - off >= HDR) {
    uint32_t len = shoal__get_u32(c->in + off);
    int type = c->in[off + 4];
    if (len > SHOAL__STORE_MAX_FRAME || c->in[off + 5] || c->in[off + 6] || c->in[off + 7]) {
      drop(s, i, "malformed frame header (not a shoal rank?)");
      return;
    }
    if (c->in_len - off < HDR + len) break;
    const char *why = handle(s, c, type, c->in + off + HDR, len);
    if (why) {
      drop(s, i, why);
      return;
    }
    c = &s->cl[i]; /* handle() does not reorder, but keep it obvious */
    off += HDR + len;
  }
  memmove(c->in, c->in + off, c->in_len - off);
  c->in_len -= off;
}

/* A connection the store will not serve: told why (the ERROR frame, as its first frame) and closed. */
static void turn_away(struct shoal__store_server *s, int fd) {
  store_client_t c = {.fd = fd};
  unsigned char st[4];
  shoal__put_u32(st, (uint32_t)-SHOAL_ERR_SYSTEM);
  reply(&c, SHOAL__STORE_ERROR, st, sizeof st, s->door_closed, strlen(s->door_closed));
  close(fd);
}

static void on_accept(struct shoal__store_server *s) {
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  int fd = accept4(s->lfd, (struct sockaddr *)&a, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
    /* a rank that cannot be taken in: the rendezvous is abandoned with the reason (waiting for the
     * connect deadline while the still-readable listener kept this thread spinning said only "timed out") */
    if (!s->door_closed[0]) {
      snprintf(s->door_closed, sizeof s->door_closed, "rank 0's store cannot accept a rank's connection: %s "
               "(raise the open-file limit, ulimit -n)", strerror(errno));
      SHOAL_WARN("INIT", "store: %s; the rendezvous is abandoned", s->door_closed);
      abandon(s, "the store", SHOAL_ERR_SYSTEM, s->door_closed, 1);
    }
    /* every connection, queued or still to come (rank 0's own too), is told why: the reserve descriptor is
     * given up to take one in, then taken back */
    if (s->reserve >= 0) {
      close(s->reserve);
      s->reserve = -1;
      fd = accept4(s->lfd, (struct sockaddr *)&a, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
      int e = errno;
      if (fd >= 0) turn_away(s, fd);
      s->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd >= 0 || e == EAGAIN || e == EINTR) return;
    }
    /* no descriptor to spare: the connections still queued are reset at once rather than left to their
     * deadline (shutdown, not only close: `shoal launch` holds the listening socket too) */
    shutdown(s->lfd, SHUT_RDWR);
    close(s->lfd);
    s->lfd = -1;
    return;
  }
  if (fd >= 0 && s->door_closed[0]) {
    turn_away(s, fd);
    return;
  }
  if (fd < 0) return;
  if (s->ncl == s->capcl) {
    int cap = s->capcl ? 2 * s->capcl : 64;
    store_client_t *nc = realloc(s->cl, (size_t)cap * sizeof *nc);
    if (!nc) {
      close(fd);
      return;
    }
    s->cl = nc;
    s->capcl = cap;
  }
  store_client_t *c = &s->cl[s->ncl++];
  memset(c, 0, sizeof *c);
  c->fd = fd;
  shoal__sock_tune(fd, 0);
  shoal__sock_addr_str(&a, c->addr, sizeof c->addr);
  shoal__auth_random(c->nonce, sizeof c->nonce);
  unsigned char ch[4 + SHOAL__NONCE_BYTES];
  shoal__put_u32(ch, SHOAL__STORE_MAGIC);
  memcpy(ch + 4, c->nonce, SHOAL__NONCE_BYTES);
  if (reply(c, SHOAL__STORE_CHALLENGE, ch, sizeof ch, NULL, 0)) drop(s, s->ncl - 1, "cannot send challenge");
}

static void *serve(void *arg) {
  struct shoal__store_server *s = arg;
  struct pollfd *pf = NULL;
  int cap = 0;
  for (;;) {
    int n = 2 + s->ncl;
    if (n > cap) {
      struct pollfd *np = realloc(pf, (size_t)n * 2 * sizeof *np);
      if (!np) {
        shoal__sleep_s(0.01);
        continue;
      }
      pf = np;
      cap = n * 2;
    }
    pf[0] = (struct pollfd){s->wake[0], POLLIN, 0};
    pf[1] = (struct pollfd){s->lfd, POLLIN, 0}; /* (-1 once closed: poll skips it) */
    for (int i = 0; i < s->ncl; i++) pf[2 + i] = (struct pollfd){s->cl[i].fd, POLLIN, 0};
    int pr = poll(pf, (nfds_t)n, -1);
    if (pr < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pf[0].revents) break;
    /* clients from the back so drop() (swap with last) keeps indices valid */
    for (int i = n - 3; i >= 0; i--)
      if (pf[2 + i].revents && i < s->ncl && s->cl[i].fd == pf[2 + i].fd) on_readable(s, i);
    if (pf[1].revents & POLLIN) on_accept(s);
  }
  free(pf);
  return NULL;
}

int shoal__store_server_start(int listen_fd, const shoal__authkey_t *key, int size, const char *job,
                              shoal__store_server_t **out) {
  struct shoal__store_server *s = calloc(1, sizeof *s);
  if (!s) return shoal__seterr(SHOAL_ERR_NOMEM, "store: out of memory");
  s->size = size;
  snprintf(s->job, sizeof s->job, "%s", job ? job : "");
  s->lfd = listen_fd;
  s->key = *key;
  s->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC); /* (-1: the door is reset instead of answered) */
  if (pipe2(s->wake, O_CLOEXEC) < 0) {
    if (s->reserve >= 0) close(s->reserve);
    free(s);
    return shoal__seterr(SHOAL_ERR_SYSTEM, "store: pipe: %s", strerror(errno));
  }
  shoal__sock_set_nonblock(listen_fd);
  int rc = pthread_create(&s->thread, NULL, serve, s);
  if (rc) {
    close(s->wake[0]);
    close(s->wake[1]);
    if (s->reserve >= 0) close(s->reserve);
    free(s);
    return shoal__seterr(SHOAL_ERR_SYSTEM, "store: pthread_create: %s", strerror(rc));
  }
  *out = s;
  return 0;
}

void shoal__store_server_stop(shoal__store_server_t *s) {
  if (!s) return;
  char b = 1;
  while (write(s->wake[1], &b, 1) < 0 && errno == EINTR) {
  }
  pthread_join(s->thread, NULL);
  for (int i = s->ncl - 1; i >= 0; i--) drop(s, i, NULL);
  for (int i = 0; i < s->nkv; i++) {
    free(s->kv[i].key);
    free(s->kv[i].val);
  }
  free(s->kv);
  free(s->cl);
  if (s->lfd >= 0) close(s->lfd);
  if (s->reserve >= 0) close(s->reserve);
  close(s->wake[0]);
  close(s->wake[1]);
  free(s);
}

/* ---- client ---- */

int shoal__store_frame_read(int fd, int *type, void *buf, size_t cap, size_t *len, shoal__deadline_t dl,
                            const char *what) {
  unsigned char h[HDR];
  int rc = shoal__sock_read_all(fd, h, HDR, dl, what);
  if (rc) return rc;
  uint32_t n = shoal__get_u32(h);
  if (n > SHOAL__STORE_MAX_FRAME)
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "%s: frame of %u bytes: not a shoal store?", what, n);
  *type = h[4];
  size_t keep = n < cap ? n : cap;
  if (keep && (rc = shoal__sock_read_all(fd, buf, keep, dl, what))) return rc;
  for (size_t left = n - keep; left > 0;) { /* discard what does not fit */
    char tmp[256];
    size_t k = left < sizeof tmp ? left : sizeof tmp;
    if ((rc = shoal__sock_read_all(fd, tmp, k, dl, what))) return rc;
    left -= k;
  }
  *len = n;
  return 0;
}

int shoal__store_frame_write(int fd, int type, const void *p1, size_t n1, const void *p2, size_t n2,
                             shoal__deadline_t dl, const char *what) {
  unsigned char h[HDR];
  put_hdr(h, (uint32_t)(n1 + n2), type);
  int rc = shoal__sock_write_all(fd, h, HDR, dl, what);
  if (!rc && n1) rc = shoal__sock_write_all(fd, p1, n1, dl, what);
  if (!rc && n2) rc = shoal__sock_write_all(fd, p2, n2, dl, what);
  return rc;
}

static int read_frame(shoal__store_client_t *c, int *type, void *buf, size_t cap, size_t *len, shoal__deadline_t dl) {
  char what[96];
  snprintf(what, sizeof what, "store at %s", c->addr);
  return shoal__store_frame_read(c->fd, type, buf, cap, len, dl, what);
}

static int write_frame(shoal__store_client_t *c, int type, const void *p1, size_t n1, const void *p2, size_t n2,
                       shoal__deadline_t dl) {
  char what[96];
  snprintf(what, sizeof what, "store at %s", c->addr);
  return shoal__store_frame_write(c->fd, type, p1, n1, p2, n2, dl, what);
}

int shoal__store_connect(const char *host, struct in_addr ip, int port, const shoal__authkey_t *key,
                         shoal__deadline_t dl, shoal__store_client_t *out) {
  int rc;
  shoal__store_client_t c = {.fd = -1};
  snprintf(c.addr, sizeof c.addr, "%s:%d", host, port);
  char what[96];
  snprintf(what, sizeof what, "the rendezvous store (rank 0)");
  unsigned char buf[256];
  size_t len = 0;
  int type = 0;
  /* A connection closed or reset before the store's greeting reached a listener that was not the store: the
   * port's previous owner closing with this connection in its queue (a finished job's, or another process's
   * ephemeral listener) before rank 0 bound it. That is a store not up yet, like a refused connection:
   * connect again until the deadline. A store always greets first, so nothing of it is lost. */
  int early_closes = 0;
  double backoff = 0.01;
  for (;;) {
    rc = shoal__sock_connect(ip, port, dl, what, &c.fd);
    if (rc) break;
    rc = read_frame(&c, &type, buf, sizeof buf, &len, dl);
    if (rc != SHOAL_ERR_PEER_CLOSED) break;
    close(c.fd);
    c.fd = -1;
    early_closes++;
    int ms = shoal__deadline_ms_left(dl);
    if (ms == 0) break;
    shoal__sleep_s(backoff < ms / 1000.0 ? backoff : ms / 1000.0);
    backoff = backoff * 2 > 0.5 ? 0.5 : backoff * 2;
  }
  if (rc && early_closes) {
    char last[160];
    snprintf(last, sizeof last, "%s", shoal_last_error());
    rc = shoal__seterr(rc, "%s: %d connection(s) were closed before any store greeted them (the last attempt: %s); "
                       "is rank 0's shoal store at this port?", c.addr, early_closes, last);
  }
  if (rc) goto close_fd;
  if (type == SHOAL__STORE_ERROR && len >= 4) { /* the store turns connections away (rank 0 out of descriptors) */
    buf[len < sizeof buf - 1 ? len : sizeof buf - 1] = '\0';
    rc = shoal__seterr(SHOAL_ERR_ABORTED, "the rendezvous was abandoned by rank 0: %s", (char *)buf + 4);
    goto close_fd;
  }
  if (type != SHOAL__STORE_CHALLENGE || len != 4 + SHOAL__NONCE_BYTES || shoal__get_u32(buf) != SHOAL__STORE_MAGIC) {
    rc = shoal__seterr(SHOAL_ERR_PROTOCOL, "%s is not a shoal rendezvous store (bad greeting)", c.addr);
    goto close_fd;
  }
  uint8_t ns[SHOAL__NONCE_BYTES], nc[SHOAL__NONCE_BYTES];
  memcpy(ns, buf + 4, sizeof ns);
  shoal__auth_random(nc, sizeof nc);
  unsigned char ans[SHOAL__NONCE_BYTES + 8];
  memcpy(ans, nc, sizeof nc);
  shoal__put_u64(ans + SHOAL__NONCE_BYTES, shoal__auth_mac(key, 'C', ns, nc, NULL, 0));
  if ((rc = write_frame(&c, SHOAL__STORE_AUTH, ans, sizeof ans, NULL, 0, dl))) goto close_fd;
  rc = read_frame(&c, &type, buf, sizeof buf - 1, &len, dl);
  if (rc == SHOAL_ERR_PEER_CLOSED) {
    /* a shoal store answers a wrong token with AUTH_FAIL: a silent close is a store that ended (a job's
     * rendezvous done while a new rank waited at its port) or not one of this version; PEER_CLOSED lets a
     * joining rank try again */
    rc = shoal__seterr(SHOAL_ERR_PEER_CLOSED, "the store at %s closed the connection during authentication "
                       "(it ended, or it is not a shoal store of this version)", c.addr);
    goto close_fd;
  }
  if (rc) goto close_fd;
  if (type == SHOAL__STORE_AUTH_FAIL) {
    buf[len < sizeof buf - 1 ? len : sizeof buf - 1] = '\0';
    rc = shoal__seterr(SHOAL_ERR_AUTH, "the store at %s refused this rank: %s", c.addr, (char *)buf);
    goto close_fd;
  }
  if (type == SHOAL__STORE_ERROR && len >= 4) { /* the rendezvous was abandoned while this rank authenticated */
    buf[len < sizeof buf - 1 ? len : sizeof buf - 1] = '\0';
    rc = shoal__seterr(SHOAL_ERR_ABORTED, "the rendezvous was abandoned by rank 0: %s", (char *)buf + 4);
    goto close_fd;
  }
  if (type != SHOAL__STORE_AUTH_OK || len != 8 || shoal__get_u64(buf) != shoal__auth_mac(key, 'A', nc, ns, NULL, 0)) {
    rc = shoal__seterr(SHOAL_ERR_AUTH, "the store at %s failed to prove it knows SHOAL_TOKEN "
                       "(wrong token on rank 0, or not a shoal store)", c.addr);
    goto close_fd;
  }
  *out = c;
  return 0;
close_fd:
  if (c.fd >= 0) close(c.fd);
  return rc;
}

int shoal__store_set(shoal__store_client_t *c, const char *key, const void *val, size_t len, shoal__deadline_t dl) {
  size_t kl = strlen(key);
  unsigned char kh[4 + 1024];
  if (kl == 0 || kl > 1024 || len + kl + 4 > SHOAL__STORE_MAX_FRAME)
    return shoal__seterr(SHOAL_ERR_INVALID, "store: key or value too long");
  shoal__put_u32(kh, (uint32_t)kl);
  memcpy(kh + 4, key, kl);
  int rc = write_frame(c, SHOAL__STORE_SET, kh, 4 + kl, val, len, dl);
  if (rc) return rc;
  int type;
  size_t n;
  char tmp[8];
  rc = read_frame(c, &type, tmp, sizeof tmp, &n, dl);
  if (rc) return rc;
  if (type != SHOAL__STORE_VALUE) return shoal__seterr(SHOAL_ERR_PROTOCOL, "store at %s: bad reply to SET", c->addr);
  return 0;
}

int shoal__store_get(shoal__store_client_t *c, const char *key, int wait, void *buf, size_t cap, size_t *len,
                     shoal__deadline_t dl) {
  size_t kl = strlen(key);
  if (kl == 0 || kl > 1024) return shoal__seterr(SHOAL_ERR_INVALID, "store: bad key length");
  unsigned char w = wait ? 1 : 0;
  int rc = write_frame(c, SHOAL__STORE_GET, &w, 1, key, kl, dl);
  if (rc) return rc;
  int type;
  size_t n;
  /* (into a buffer that holds an abandoned rendezvous's reason whole, also when the caller's is small) */
  unsigned char small[512];
  unsigned char *into = cap < sizeof small ? small : buf;
  size_t icap = cap < sizeof small ? sizeof small : cap;
  rc = read_frame(c, &type, into, icap, &n, dl);
  if (rc == SHOAL_ERR_TIMEOUT)
    return shoal__seterr(SHOAL_ERR_TIMEOUT, "store at %s: key '%s' did not appear before the deadline", c->addr, key);
  if (rc) return rc;
  if (type == SHOAL__STORE_NOT_FOUND) return shoal__seterr(SHOAL_ERR_NOT_FOUND, "store: no key '%s'", key);
  if (type == SHOAL__STORE_ERROR && n >= 4) { /* u32 status (negated), the reason */
    int st = -(int)shoal__get_u32(into);
    into[n < icap ? n : icap - 1] = '\0';
    if (st >= 0 || st <= SHOAL_ERR__LAST) st = SHOAL_ERR_ABORTED;
    return shoal__seterr(st, "the rendezvous was abandoned by rank 0: %s", (char *)into + 4);
  }
  if (type != SHOAL__STORE_VALUE) return shoal__seterr(SHOAL_ERR_PROTOCOL, "store at %s: bad reply to GET", c->addr);
  if (into != buf) memcpy(buf, into, n < cap ? n : cap);
  if (n < cap) ((char *)buf)[n] = '\0';
  if (len) *len = n;
  return 0;
}

void shoal__store_close(shoal__store_client_t *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
}

int shoal__store_join(shoal__store_client_t *c, int rank, int size, const char *job, shoal__deadline_t dl) {
  unsigned char h[8];
  shoal__put_u32(h, (uint32_t)rank);
  shoal__put_u32(h + 4, (uint32_t)size);
  size_t jl = job ? strlen(job) : 0;
  if (jl > SHOAL__JOB_ID_MAX) return shoal__seterr(SHOAL_ERR_CONFIG, "SHOAL_JOB_ID: longer than %d bytes", SHOAL__JOB_ID_MAX);
  int rc = write_frame(c, SHOAL__STORE_JOIN, h, 8, job, jl, dl);
  if (rc) return rc;
  int type;
  size_t n;
  char buf[1024];
  if ((rc = read_frame(c, &type, buf, sizeof buf - 1, &n, dl))) return rc;
  if (type == SHOAL__STORE_VALUE) return 0;
  if (type == SHOAL__STORE_ERROR && n >= 4 && n < sizeof buf) {
    buf[n] = '\0';
    return shoal__seterr(SHOAL_ERR_CONFIG, "the store at %s refused this rank: %s", c->addr, buf + 4);
  }
  return shoal__seterr(SHOAL_ERR_PROTOCOL, "store at %s: bad reply to JOIN", c->addr);
}
