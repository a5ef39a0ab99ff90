/* Copy bandwidth of this machine for bench/shm-anchors.sh (the memory
 * bound of the shared-memory allreduce, docs/performance.md): memcpy of a
 * 256 MiB array (far beyond L3), read + write bytes counted as in the
 * anchors spec, best of 5. With -j J, J processes copy at once and the sum
 * of their rates is printed (the machine's aggregate, J = cores).
 * Build: cc -O3 bench/memcpy_bw.c -o memcpy_bw   Run: memcpy_bw [-j J] [-m MiB] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static double one(size_t bytes) {
  char *a = malloc(bytes), *b = malloc(bytes);
  if (!a || !b) return 0;
  memset(a, 1, bytes);
  memset(b, 2, bytes);
  double best = 1e30;
  for (int i = 0; i < 5; i++) {
    double t0 = now();
    memcpy(b, a, bytes);
    double dt = now() - t0;
    if (dt < best) best = dt;
    a[i] = b[bytes - 1 - (size_t)i]; /* keep the copies observable */
  }
  free(a), free(b);
  return 2.0 * (double)bytes / best / 1e9;
}

int main(int argc, char **argv) {
  int j = 1;
  size_t mib = 256;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-j")) j = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-m")) mib = (size_t)atol(argv[i + 1]);
  }
  if (j < 1 || j > 64 || !mib) return 2;
  double *rates = mmap(NULL, sizeof(double) * (size_t)j, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (rates == MAP_FAILED) return 1;
  for (int k = 0; k < j; k++)
    if (fork() == 0) {
      rates[k] = one(mib << 20);
      _exit(0);
    }
  while (wait(NULL) > 0) {
  }
  double sum = 0;
  for (int k = 0; k < j; k++) sum += rates[k];
  printf("%.2f\n", sum);
  return 0;
}
