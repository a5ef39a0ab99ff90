/* Helpers for the multi-rank tests of the transport (test_p2p*, test_fault*,
 * test_bootstrap*): join a world of forked ranks on a given store port. */
#ifndef SHOAL_TESTS_COMM_P2P_UTIL_H
#define SHOAL_TESTS_COMM_P2P_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../runner.h"
#include "shoal/comm.h"

typedef struct p2p_world_arg {
  int n;
  int port;
  double timeout_s;
  double connect_timeout_s;
  const char *token;
  size_t bytes;
  int iters;
  int victim;
  int shm; /* 0: TCP between all ranks (SHOAL_SHM=0); 1: same-host ranks use shared memory */
} p2p_world_arg_t;

/* Join as `rank` of a->n on 127.0.0.1:a->port; prints the error and returns
 * NULL on failure. */
static inline shoal_comm_t *p2p_join(int rank, const p2p_world_arg_t *a) {
  shoal_comm_params_t p;
  shoal_comm_params_init(&p);
  setenv("SHOAL_SHM", a->shm ? "1" : "0", 1); /* forked rank: its own environment */
  p.rank = rank;
  p.world_size = a->n;
  p.master_addr = "127.0.0.1";
  p.master_port = a->port;
  p.timeout_s = a->timeout_s > 0 ? a->timeout_s : 20;
  p.connect_timeout_s = a->connect_timeout_s > 0 ? a->connect_timeout_s : 20;
  p.token = a->token;
  shoal_comm_t *c = NULL;
  int rc = shoal_comm_init(&p, &c);
  if (rc) {
    fprintf(stderr, "rank %d: shoal_comm_init: %s: %s\n", rank, shoal_status_string(rc), shoal_last_error());
    return NULL;
  }
  return c;
}

/* Deterministic test pattern: byte i of the message from src to dst. */
static inline uint8_t p2p_pattern(int src, int dst, size_t i) {
  uint64_t x = (uint64_t)src * 0x9E3779B97F4A7C15ull ^ (uint64_t)dst * 0xC2B2AE3D27D4EB4Full ^ (uint64_t)i * 0x165667B19E3779F9ull;
  x ^= x >> 29;
  return (uint8_t)(x ^ (x >> 17));
}

/* Run fn on n forked ranks with a fresh port; check all exited 0. */
#define P2P_RUN(n_, fn_, arg_, timeout_)                                                   \
  do {                                                                                    \
    (arg_)->n = (n_);                                                                     \
    (arg_)->port = shoal_test_free_port();                                                \
    int _st[64];                                                                          \
    int _ok = shoal_test_fork_ranks((n_), (fn_), (arg_), (timeout_), _st);                 \
    for (int _r = 0; _r < (n_); _r++)                                                     \
      CHECK_MSG(_st[_r] != -1 && WIFEXITED(_st[_r]) && WEXITSTATUS(_st[_r]) == 0,          \
                "rank %d: status %d (exit %d)", _r, _st[_r], WIFEXITED(_st[_r]) ? WEXITSTATUS(_st[_r]) : -1); \
    CHECK_EQ(_ok, (n_));                                                                  \
  } while (0)

#endif
