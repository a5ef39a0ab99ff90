/* Helpers shared by the train layer's tests. */
#ifndef SHOAL_TESTS_TRAIN_TESTUTIL_H
#define SHOAL_TESTS_TRAIN_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "shoal/comm.h"

/* In a forked child: join a world of n ranks on 127.0.0.1:port through the
 * environment (SHOAL_RANK, SHOAL_WORLD_SIZE, SHOAL_MASTER_*), as a launched
 * rank would; 60 s deadline. NULL (with the reason on stderr) on failure. */
static inline shoal_comm_t *train_test_join(int rank, int n, int port) {
  char v[32];
  snprintf(v, sizeof v, "%d", rank);
  setenv("SHOAL_RANK", v, 1);
  snprintf(v, sizeof v, "%d", n);
  setenv("SHOAL_WORLD_SIZE", v, 1);
  snprintf(v, sizeof v, "%d", port);
  setenv("SHOAL_MASTER_PORT", v, 1);
  setenv("SHOAL_MASTER_ADDR", "127.0.0.1", 1);
  setenv("SHOAL_TIMEOUT", "60", 1);
  shoal_comm_t *c = NULL;
  if (shoal_comm_init_env(&c)) {
    fprintf(stderr, "rank %d: init: %s\n", rank, shoal_last_error());
    return NULL;
  }
  return c;
}

#endif
