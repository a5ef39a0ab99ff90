/* shoal_comm_split: membership and order like MPI_Comm_split, traffic kept
 * apart by the comm id, no new sockets, cheap enough to do every iteration. */
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm_impl.h"
#include "comm/p2p/p2p.h"
#include "test_p2p_util.h"

#define FAILR(...)                \
  do {                            \
    fprintf(stderr, __VA_ARGS__); \
    fprintf(stderr, "\n");        \
    return 1;                     \
  } while (0)

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  if (!d) return -1;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

/* ring exchange inside c; returns 0 when the neighbours' world ranks arrive */
static int ring_check(shoal_comm_t *c, int tag) {
  int r = shoal_comm_rank(c), n = shoal_comm_size(c);
  int me = shoal_comm_world_rank(c), got = -1;
  if (n == 1) return 0;
  if (shoal_sendrecv(c, &me, 1, (r + 1) % n, &got, 1, (r + n - 1) % n, SHOAL_INT32, tag)) return -1;
  return got < 0 ? -1 : got;
}

static int rank_split(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *w = p2p_join(rank, a);
  if (!w) return 2;
  int n = a->n;
  /* even/odd, reversed order by key */
  shoal_comm_t *s = NULL;
  if (shoal_comm_split(w, rank % 2, -rank, &s)) FAILR("split: %s", shoal_last_error());
  int members = (n - rank % 2 + 1) / 2;
  if (!s || shoal_comm_size(s) != members) FAILR("size %d, want %d", s ? shoal_comm_size(s) : -1, members);
  /* reversed: the highest world rank of the color is rank 0 */
  int hi = (n - 1) - ((n - 1 - rank % 2) % 2);
  if (shoal_comm_rank(s) != (hi - rank) / 2) FAILR("world %d got sub rank %d", rank, shoal_comm_rank(s));
  if (shoal_comm_world_rank(s) != rank) FAILR("world_rank");
  /* interleave traffic on the sub-communicator and the world */
  for (int it = 0; it < 5; it++) {
    int prev = ring_check(s, it);
    int ns = shoal_comm_size(s), rs = shoal_comm_rank(s);
    int want = ns == 1 ? 0 : hi - 2 * ((rs + ns - 1) % ns);
    if (prev != want) FAILR("rank %d: sub ring got %d want %d: %s", rank, prev, want, shoal_comm_errmsg(s));
    int wp = ring_check(w, 100 + it);
    if (wp != (rank + n - 1) % n) FAILR("world ring got %d: %s", wp, shoal_comm_errmsg(w));
  }
  /* nested split and SHOAL_UNDEFINED */
  shoal_comm_t *t = NULL;
  int color = shoal_comm_rank(s) == 0 ? SHOAL_UNDEFINED : 7;
  if (shoal_comm_split(s, color, 0, &t)) FAILR("nested split: %s", shoal_last_error());
  if (color == SHOAL_UNDEFINED ? t != NULL : (t == NULL || shoal_comm_size(t) != shoal_comm_size(s) - 1))
    FAILR("nested split membership");
  if (t && ring_check(t, 9) < 0) FAILR("nested ring: %s", shoal_comm_errmsg(t));
  shoal_comm_destroy(t);
  shoal_comm_destroy(s);
  /* the world still works after its children are gone */
  if (ring_check(w, 55) != (rank + n - 1) % n) FAILR("world after destroy: %s", shoal_comm_errmsg(w));
  shoal_comm_destroy(w);
  return 0;
}

TEST_T(split_membership_order_and_traffic, 60) {
  p2p_world_arg_t a = {.timeout_s = 20};
  P2P_RUN(6, rank_split, &a, 50);
  P2P_RUN(5, rank_split, &a, 50);
}

/* Splitting every iteration: no sockets opened, results stay right.
 * Prints the time per split (a figure for docs/comm.md; not asserted). */
static int rank_split_many(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *w = p2p_join(rank, a);
  if (!w) return 2;
  int fds = count_fds();
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int it = 0; it < a->iters; it++) {
    shoal_comm_t *s = NULL;
    int group = (rank + it) % 3; /* membership changes every iteration */
    if (shoal_comm_split(w, group, rank, &s)) FAILR("split %d: %s", it, shoal_last_error());
    if (!s) FAILR("NULL comm");
    shoal_comm_destroy(s);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3) / a->iters;
  if (count_fds() != fds) FAILR("splits opened descriptors: %d -> %d", fds, count_fds());
  if (rank == 0) fprintf(stderr, "%d splits with %d ranks: %.1f us per split\n", a->iters, a->n, us);
  /* one last check that traffic still matches after so many comm ids */
  shoal_comm_t *s = NULL;
  if (shoal_comm_split(w, 0, rank, &s) || ring_check(s, 1) != (rank + a->n - 1) % a->n) FAILR("final");
  shoal_comm_destroy(s);
  shoal_comm_destroy(w);
  return 0;
}

TEST_T(split_1000_times_8_ranks, 60) {
  p2p_world_arg_t a = {.timeout_s = 20, .iters = 1000};
  P2P_RUN(8, rank_split_many, &a, 55);
}

/* Two ranks that use different communicators in the same slot get a
 * mismatch naming the communicators, not a silent mix-up. */
static int rank_wrong_comm(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *w = p2p_join(rank, a);
  if (!w) return 2;
  shoal_comm_t *s = NULL;
  if (shoal_comm_split(w, 0, rank, &s)) FAILR("split");
  int v = 1;
  if (rank == 0) {
    shoal_send(s, &v, 1, SHOAL_INT32, 1, 0); /* on the child */
  } else {
    int rc = shoal_recv(w, &v, 1, SHOAL_INT32, 0, 0); /* on the parent */
    if (rc != SHOAL_ERR_MISMATCH || !strstr(shoal_comm_errmsg(w), "communicators in different orders"))
      FAILR("got %d: %s", rc, shoal_comm_errmsg(w));
  }
  shoal_comm_destroy(s);
  shoal_comm_destroy(w);
  return 0;
}

TEST_T(split_wrong_communicator_is_a_mismatch, 30) {
  p2p_world_arg_t a = {.timeout_s = 5};
  P2P_RUN(2, rank_wrong_comm, &a, 25);
}

/* A grow on a split is refused on every rank alike and aborts nothing (comm.h); an error on a split that
 * aborts the world shows in the world's shoal_comm_errmsg too. */
static int rank_split_errors(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *w = p2p_join(rank, a);
  if (!w) return 2;
  shoal_comm_t *s = NULL, *g = (shoal_comm_t *)&rank;
  if (shoal_comm_split(w, 0, rank, &s)) FAILR("split");
  int rc = shoal_comm_grow(s, &g);
  if (rc != SHOAL_ERR_UNSUPPORTED || g != (shoal_comm_t *)&rank) FAILR("grow on a split: %d", rc);
  int x = 1;
  if ((rc = shoal_allreduce(w, SHOAL_IN_PLACE, &x, 1, SHOAL_INT32, SHOAL_SUM)) || x != 2)
    FAILR("world after the refused grow: %d %s", rc, shoal_comm_errmsg(w));
  x = 1;
  if ((rc = shoal_allreduce(s, SHOAL_IN_PLACE, &x, 1, SHOAL_INT32, SHOAL_SUM)) || x != 2)
    FAILR("split after the refused grow: %d %s", rc, shoal_comm_errmsg(s));
  if (rank == 0) {
    rc = shoal_allreduce(s, NULL, &x, 1, SHOAL_INT32, SHOAL_SUM); /* an argument error: aborts the world */
    if (rc != SHOAL_ERR_INVALID) FAILR("NULL sendbuf on the split: %d", rc);
    rc = shoal_barrier(w);
    if (rc != SHOAL_ERR_ABORTED || !strstr(shoal_comm_errmsg(w), "sendbuf is NULL"))
      FAILR("the world after the split's error: %d, errmsg \"%s\"", rc, shoal_comm_errmsg(w));
  } else {
    rc = shoal_barrier(w); /* fails: rank 0 aborted */
    if (rc == 0) FAILR("barrier succeeded after rank 0 aborted");
  }
  shoal_comm_destroy(s);
  shoal_comm_destroy(w);
  return 0;
}

TEST_T(split_grow_refused_and_errors_named_on_the_world, 30) {
  p2p_world_arg_t a = {.timeout_s = 5};
  P2P_RUN(2, rank_split_errors, &a, 25);
}

/* DS-Sync's butterfly: pairs {0,1},{2,3} then {0,2},{1,3}, each on its own split, alternating, four
 * emulated hosts over TCP. A rank done with its pair goes on with the next pair at once, so the next
 * partner's data arrives on a connection while that partner still serves the other communicator; every
 * result must stay exact. Also checks the socket sizes: peers on other hosts get the receive buffer of
 * SHOAL_SOCKET_RCVBUF_REMOTE (the brake on such early data, docs/comm.md), peers on the same host keep
 * SHOAL_SOCKET_BUFFER. */
#define ROT_COUNT 535818 /* the MLP's parameters: a multi-chunk ring per pair */
#define ROT_ROUNDS 12

static int rcvbuf_of(int fd) {
  int v = -1;
  socklen_t l = sizeof v;
  return getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &l) == 0 ? v : -1;
}

static int rank_rotating_pairs(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  static const char *const hosts[4] = {"rotA", "rotA", "rotB", "rotC"}; /* 0,1 share a host */
  setenv("SHOAL_HOSTNAME", hosts[rank], 1);
  unsetenv("SHOAL_SOCKET_BUFFER");
  unsetenv("SHOAL_SOCKET_RCVBUF_REMOTE");
  shoal_comm_t *w = p2p_join(rank, a);
  if (!w) return 2;
  /* what the kernel reports for the two settings on a fresh socket (it doubles and caps them) */
  int probe = socket(AF_INET, SOCK_STREAM, 0), remote_want, local_want;
  int bi = 131072;
  setsockopt(probe, SOL_SOCKET, SO_RCVBUF, &bi, sizeof bi);
  remote_want = rcvbuf_of(probe);
  bi = 4194304;
  setsockopt(probe, SOL_SOCKET, SO_RCVBUF, &bi, sizeof bi);
  local_want = rcvbuf_of(probe);
  close(probe);
  shoal__world_t *wd = w->w;
  for (int j = 0; j < 4; j++) {
    if (j == rank) continue;
    int got = rcvbuf_of(wd->conns[j].fd), same = !strcmp(hosts[j], hosts[rank]);
    if (got != (same ? local_want : remote_want))
      FAILR("rank %d: socket to %d (%s host) has SO_RCVBUF %d, want %d", rank, j, same ? "same" : "other", got,
            same ? local_want : remote_want);
    /* the window may not start above the buffer: a peer could then overrun it (a socket accepted from a
     * listener at SHOAL_SOCKET_BUFFER kept a threshold of ~4 MB over a 128 KiB buffer) */
    struct tcp_info ti;
    socklen_t tl = sizeof ti;
    if (getsockopt(wd->conns[j].fd, IPPROTO_TCP, TCP_INFO, &ti, &tl)) FAILR("TCP_INFO: %s", strerror(errno));
    if (!same && ti.tcpi_rcv_ssthresh > (unsigned)got)
      FAILR("rank %d: socket to %d (other host, %s) may advertise a window of %u B over its buffer of %d B", rank, j,
            j < rank ? "connected" : "accepted", ti.tcpi_rcv_ssthresh, got);
  }
  shoal_comm_t *pa = NULL, *pb = NULL;
  if (shoal_comm_split(w, rank / 2, rank, &pa) || shoal_comm_split(w, rank % 2, rank, &pb)) FAILR("split");
  int32_t *x = malloc(ROT_COUNT * sizeof *x), *y = malloc(ROT_COUNT * sizeof *y);
  if (!x || !y) FAILR("no memory");
  for (int it = 0; it < ROT_ROUNDS; it++) {
    shoal_comm_t *g = it % 2 ? pb : pa;
    int partner = it % 2 ? rank ^ 2 : rank ^ 1;
    for (size_t i = 0; i < ROT_COUNT; i++) x[i] = (int32_t)((size_t)rank * 7919u + i * 31u + (size_t)it);
    if (shoal_allreduce(g, x, y, ROT_COUNT, SHOAL_INT32, SHOAL_SUM))
      FAILR("rank %d round %d: %s", rank, it, shoal_comm_errmsg(g));
    for (size_t i = 0; i < ROT_COUNT; i++) {
      int32_t want = (int32_t)((size_t)(rank + partner) * 7919u + 2 * (i * 31u + (size_t)it));
      if (y[i] != want) FAILR("rank %d round %d: element %zu is %d, want %d", rank, it, i, y[i], want);
    }
  }
  free(x);
  free(y);
  shoal_comm_destroy(pa);
  shoal_comm_destroy(pb);
  shoal_comm_destroy(w);
  return 0;
}

TEST_T(split_rotating_pairs_across_hosts, 60) {
  p2p_world_arg_t a = {.timeout_s = 30};
  P2P_RUN(4, rank_rotating_pairs, &a, 55);
}
