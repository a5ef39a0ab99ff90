/* One rank of bench/fault-drill.sh's elastic drills, on the public API (built by the script). Under
 * `shoal launch`; every line it prints starts with "drill:" so the script can read the outcome.
 *
 *   elastic_rank early             init, then shrink at once with every rank alive: the same ranks must
 *                                  come out (prints "drill: split" otherwise), then an allreduce on them
 *   elastic_rank fault SECONDS     allreduces for up to SECONDS; the drill kills (-9) or stops one rank
 *                                  from outside; the others shrink: "drill: shrunk K of N" or
 *                                  "drill: shrink failed: <error>" (a stopped rank is alive: named at
 *                                  the deadline), or "drill: no fault" when nothing happened
 *   elastic_rank grow SECONDS      members grow every 50 ms for up to SECONDS; with SHOAL_JOIN=1 a new
 *                                  process: waits at the door to be admitted. Members print each grow's
 *                                  time ("drill: grow-ms MAX ADMIT") once one admitted the newcomer
 *   elastic_rank strangers SILENT FLOOD SECONDS   not a rank: SILENT connections that never speak and
 *                                  up to FLOOD connections opened and closed at the job's door
 *                                  (SHOAL_MASTER_ADDR/PORT) within SECONDS
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "shoal/comm.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int early(void) {
  shoal_comm_t *c = NULL, *nc = NULL;
  if (shoal_comm_init_env(&c)) {
    printf("drill: init failed: %s\n", shoal_last_error());
    return 2;
  }
  int n = shoal_comm_size(c), r = shoal_comm_rank(c);
  if (shoal_comm_shrink(c, &nc)) {
    printf("drill: shrink failed: %s\n", shoal_last_error());
    return 3;
  }
  if (shoal_comm_size(nc) != n || shoal_comm_rank(nc) != r) {
    printf("drill: split: rank %d of %d became rank %d of %d\n", r, n, shoal_comm_rank(nc), shoal_comm_size(nc));
    return 4;
  }
  int32_t v = 1;
  if (shoal_allreduce(nc, SHOAL_IN_PLACE, &v, 1, SHOAL_INT32, SHOAL_SUM) || v != n) {
    printf("drill: allreduce after the shrink: %s (%d)\n", shoal_comm_errmsg(nc), v);
    return 5;
  }
  printf("drill: ok %d of %d\n", r, n);
  shoal_comm_destroy(nc);
  shoal_comm_destroy(c);
  return 0;
}

static int fault(double seconds) {
  shoal_comm_t *c = NULL, *nc = NULL;
  if (shoal_comm_init_env(&c)) {
    printf("drill: init failed: %s\n", shoal_last_error());
    return 2;
  }
  int n = shoal_comm_size(c);
  float v[4096] = {0};
  int rc = 0;
  double end = now_s() + seconds;
  while (!rc && now_s() < end) rc = shoal_allreduce(c, SHOAL_IN_PLACE, v, 4096, SHOAL_FLOAT32, SHOAL_SUM);
  if (!rc) {
    printf("drill: no fault\n");
    shoal_comm_destroy(c);
    return 0;
  }
  printf("drill: noticed: %s\n", shoal_comm_errmsg(c));
  if (shoal_comm_shrink(c, &nc)) {
    printf("drill: shrink failed: %s\n", shoal_last_error());
    return 3;
  }
  int32_t k = 1;
  if (shoal_allreduce(nc, SHOAL_IN_PLACE, &k, 1, SHOAL_INT32, SHOAL_SUM) || k != shoal_comm_size(nc)) {
    printf("drill: allreduce after the shrink: %s\n", shoal_comm_errmsg(nc));
    return 5;
  }
  printf("drill: shrunk %d of %d\n", shoal_comm_size(nc), n);
  shoal_comm_destroy(nc);
  shoal_comm_destroy(c);
  return 0;
}

static int grow(double seconds) {
  shoal_comm_t *c = NULL;
  if (shoal_comm_init_env(&c)) {
    printf("drill: init failed: %s\n", shoal_last_error());
    return 2;
  }
  int32_t v = 1;
  if (shoal_comm_joined(c)) { /* the newcomer */
    if (shoal_allreduce(c, SHOAL_IN_PLACE, &v, 1, SHOAL_INT32, SHOAL_SUM)) return 5;
    printf("drill: admitted as rank %d of %d\n", shoal_comm_rank(c), shoal_comm_size(c));
    shoal_comm_destroy(c);
    return 0;
  }
  double end = now_s() + seconds, worst = 0;
  while (now_s() < end) {
    shoal_comm_t *gc = NULL;
    double t0 = now_s();
    if (shoal_comm_grow(c, &gc)) {
      printf("drill: grow failed: %s\n", shoal_last_error());
      return 3;
    }
    double took = now_s() - t0;
    if (took > worst) worst = took;
    if (gc) {
      if (shoal_allreduce(gc, SHOAL_IN_PLACE, &v, 1, SHOAL_INT32, SHOAL_SUM)) return 5;
      printf("drill: grow-ms %.1f %.1f\n", worst * 1e3, took * 1e3);
      shoal_comm_destroy(gc);
      shoal_comm_destroy(c);
      return 0;
    }
    usleep(50000);
  }
  printf("drill: nobody admitted within %.0f s\n", seconds);
  return 4;
}

static int door_connect(const char *addr, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  if (fd < 0 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1 || connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

static int strangers(int silent, int flood, double seconds) {
  const char *addr = getenv("SHOAL_MASTER_ADDR"), *port = getenv("SHOAL_MASTER_PORT");
  if (!addr || !port) return 2;
  int fds[256], k = 0, opened = 0;
  double end = now_s() + seconds;
  while (k < silent && k < 256 && now_s() < end) { /* the door opens at the members' first grow */
    int fd = door_connect(addr, atoi(port));
    if (fd >= 0) fds[k++] = fd;
    else usleep(20000);
  }
  for (int i = 0; i < flood && now_s() < end; i++) {
    int fd = door_connect(addr, atoi(port));
    if (fd >= 0) {
      opened++;
      close(fd);
    }
    usleep(1000);
  }
  while (now_s() < end) usleep(50000);
  for (int i = 0; i < k; i++) close(fds[i]);
  printf("drill: strangers %d silent, %d flood\n", k, opened);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc >= 2 && !strcmp(argv[1], "early")) return early();
  if (argc >= 3 && !strcmp(argv[1], "fault")) return fault(atof(argv[2]));
  if (argc >= 3 && !strcmp(argv[1], "grow")) return grow(atof(argv[2]));
  if (argc >= 5 && !strcmp(argv[1], "strangers")) return strangers(atoi(argv[2]), atoi(argv[3]), atof(argv[4]));
  fprintf(stderr, "usage: elastic_rank early | fault SECONDS | grow SECONDS | strangers SILENT FLOOD SECONDS\n");
  return 2;
}
