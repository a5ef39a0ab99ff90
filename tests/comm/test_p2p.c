/* Point-to-point over real forked ranks and real TCP on 127.0.0.1. */
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

#include "comm/p2p/p2p.h"
#include "test_p2p_util.h"

#define FAILR(...)                      \
  do {                                  \
    fprintf(stderr, __VA_ARGS__);       \
    fprintf(stderr, "\n");              \
    return 1;                           \
  } while (0)

/* Each rank sends a patterned buffer to every other rank with isend/irecv at
 * once (all-to-all), then a ring with shoal_sendrecv. */
static int rank_all_to_all(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  int n = a->n;
  if (shoal_comm_rank(c) != rank || shoal_comm_size(c) != n || shoal_comm_world_rank(c) != rank) FAILR("accessors");
  size_t B = a->bytes;
  uint8_t *sb = malloc(B * (size_t)n), *rb = malloc(B * (size_t)n);
  for (int it = 0; it < a->iters; it++) {
    for (int p = 0; p < n; p++)
      for (size_t i = 0; i < B; i++) sb[(size_t)p * B + i] = p2p_pattern(rank, p, i + (size_t)it);
    memset(rb, 0, B * (size_t)n);
    shoal__op_t op = {.opcode = SHOAL__OP_INTERNAL, .dtype = SHOAL_UINT8, .count = B};
    if (shoal__op_begin(c, &op)) FAILR("op_begin: %s", shoal_last_error());
    shoal__req_t reqs[128];
    int nr = 0;
    for (int p = 0; p < n; p++) {
      if (p == rank) continue;
      if (shoal__irecv(c, &op, p, rb + (size_t)p * B, B, &reqs[nr++])) FAILR("irecv: %s", shoal_last_error());
      if (shoal__isend(c, &op, p, sb + (size_t)p * B, B, &reqs[nr++])) FAILR("isend: %s", shoal_last_error());
    }
    int rc = shoal__waitall(c, &op, reqs, nr);
    if (shoal__op_end(c, &op, rc)) FAILR("rank %d waitall: %s", rank, shoal_comm_errmsg(c));
    for (int p = 0; p < n; p++) {
      if (p == rank) continue;
      for (size_t i = 0; i < B; i++)
        if (rb[(size_t)p * B + i] != p2p_pattern(p, rank, i + (size_t)it))
          FAILR("rank %d: byte %zu from %d wrong", rank, i, p);
    }
  }
  /* ring with the public sendrecv */
  int dst = (rank + 1) % n, src = (rank + n - 1) % n;
  size_t cnt = B / 4;
  float *s = malloc(cnt * sizeof *s + 4), *r = malloc(cnt * sizeof *r + 4);
  for (size_t i = 0; i < cnt; i++) s[i] = (float)(rank * 1000003 + (int)i);
  if (shoal_sendrecv(c, s, cnt, dst, r, cnt, src, SHOAL_FLOAT32, 7)) FAILR("sendrecv: %s", shoal_comm_errmsg(c));
  for (size_t i = 0; i < cnt; i++)
    if (r[i] != (float)(src * 1000003 + (int)i)) FAILR("sendrecv element %zu", i);
  shoal_comm_destroy(c);
  free(sb);
  free(rb);
  free(s);
  free(r);
  return 0;
}

TEST_T(p2p_all_to_all_small, 60) {
  p2p_world_arg_t a = {.bytes = 1000, .iters = 20};
  P2P_RUN(4, rank_all_to_all, &a, 50);
}

TEST_T(p2p_world_sizes_1_to_5, 90) {
  for (int n = 1; n <= 5; n++) {
    p2p_world_arg_t a = {.bytes = 333, .iters = 3};
    P2P_RUN(n, rank_all_to_all, &a, 40);
  }
}

/* Several MiB both directions at once between every pair: no deadlock even
 * though each message is larger than the socket buffers. */
TEST_T(p2p_large_both_directions, 90) {
  p2p_world_arg_t a = {.bytes = 6u << 20, .iters = 2};
  P2P_RUN(3, rank_all_to_all, &a, 80);
}

/* The same traffic with same-host ranks on the shared-memory transport. */
TEST_T(p2p_all_to_all_shm, 90) {
  p2p_world_arg_t a = {.bytes = 1000, .iters = 20, .shm = 1};
  P2P_RUN(4, rank_all_to_all, &a, 50);
  p2p_world_arg_t b = {.bytes = 6u << 20, .iters = 2, .shm = 1};
  P2P_RUN(3, rank_all_to_all, &b, 80);
}

/* Many messages of varying sizes to one peer: delivered in order. */
static int rank_in_order(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  enum { N = 300 };
  static uint32_t bufs[N][64];
  if (rank == 0) {
    for (int m = 0; m < N; m++) {
      size_t cnt = (size_t)(m % 64) + 1;
      for (size_t i = 0; i < cnt; i++) bufs[m][i] = (uint32_t)(m * 100 + (int)i);
      if (shoal_send(c, bufs[m], cnt, SHOAL_INT32, 1, m % 5)) FAILR("send %d: %s", m, shoal_comm_errmsg(c));
    }
    int ack;
    if (shoal_recv(c, &ack, 1, SHOAL_INT32, 1, 99) || ack != N) FAILR("ack: %s", shoal_comm_errmsg(c));
  } else {
    for (int m = 0; m < N; m++) {
      size_t cnt = (size_t)(m % 64) + 1;
      if (shoal_recv(c, bufs[m], cnt, SHOAL_INT32, 0, m % 5)) FAILR("recv %d: %s", m, shoal_comm_errmsg(c));
      for (size_t i = 0; i < cnt; i++)
        if (bufs[m][i] != (uint32_t)(m * 100 + (int)i)) FAILR("message %d element %zu", m, i);
    }
    int ack = N;
    if (shoal_send(c, &ack, 1, SHOAL_INT32, 0, 99)) FAILR("send ack: %s", shoal_comm_errmsg(c));
  }
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(p2p_many_messages_in_order, 40) {
  p2p_world_arg_t a = {0};
  P2P_RUN(2, rank_in_order, &a, 30);
}

/* recv_any: rank 0 serves the others like a parameter server. */
static int rank_recv_any(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  int n = a->n;
  if (rank == 0) {
    int seen[16] = {0};
    for (int k = 0; k < 3 * (n - 1); k++) {
      int v[2], src = -1;
      if (shoal_recv_any(c, v, 2, SHOAL_INT32, 5, &src)) FAILR("recv_any: %s", shoal_comm_errmsg(c));
      if (src < 1 || src >= n || v[0] != src || v[1] != seen[src]) FAILR("recv_any got %d,%d from %d", v[0], v[1], src);
      seen[src]++;
      v[0] = -src;
      if (shoal_send(c, v, 2, SHOAL_INT32, src, 6)) FAILR("reply: %s", shoal_comm_errmsg(c));
    }
  } else {
    for (int k = 0; k < 3; k++) {
      int v[2] = {rank, k};
      if (shoal_send(c, v, 2, SHOAL_INT32, 0, 5)) FAILR("send: %s", shoal_comm_errmsg(c));
      if (shoal_recv(c, v, 2, SHOAL_INT32, 0, 6) || v[0] != -rank || v[1] != k) FAILR("reply: %s", shoal_comm_errmsg(c));
    }
  }
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(p2p_recv_any, 40) {
  p2p_world_arg_t a = {0};
  P2P_RUN(4, rank_recv_any, &a, 30);
}

/* SHOAL_EMU_DELAY_US holds every outgoing message: a round trip can never
 * take less than twice the delay, and data and order stay right. (A lower
 * bound that follows from the emulation, not a performance assertion.) */
static int rank_emu_delay(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  setenv("SHOAL_EMU_DELAY_US", "3000", 1);
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < 10; i++) {
    int v[3] = {i, i + 1, i + 2}, w[3] = {-1, -1, -1};
    if (rank == 0) {
      if (shoal_send(c, v, 3, SHOAL_INT32, 1, i) || shoal_send(c, v, 1, SHOAL_INT32, 1, 100 + i) ||
          shoal_recv(c, w, 3, SHOAL_INT32, 1, i))
        FAILR("rank 0: %s", shoal_comm_errmsg(c));
    } else {
      if (shoal_recv(c, w, 3, SHOAL_INT32, 0, i) || shoal_recv(c, w + 1, 1, SHOAL_INT32, 0, 100 + i) ||
          shoal_send(c, w, 3, SHOAL_INT32, 0, i))
        FAILR("rank 1: %s", shoal_comm_errmsg(c));
      if (w[0] != i || w[1] != i || w[2] != i + 2) FAILR("data %d %d %d", w[0], w[1], w[2]);
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  if (rank == 0 && s < 10 * 2 * 0.003) FAILR("10 round trips in %.4f s: messages were not held 3 ms", s);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(p2p_emulated_delay, 30) {
  p2p_world_arg_t a = {.timeout_s = 10};
  P2P_RUN(2, rank_emu_delay, &a, 25);
}
