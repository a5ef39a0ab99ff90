/* A user's program built against the installed shoal only (pkg-config shoal):
 * joins the world from the launcher's environment, overlaps a non-blocking
 * allreduce with a blocking one, checks both results. */
#include <shoal/shoal.h>
#include <stdio.h>

int main(void) {
  shoal_comm_t *c;
  int rc = shoal_comm_init_env(&c);
  if (rc) {
    fprintf(stderr, "init: %s: %s\n", shoal_status_string(rc), shoal_last_error());
    return 1;
  }
  int r = shoal_comm_rank(c), n = shoal_comm_size(c);
  float v[1000];
  for (int i = 0; i < 1000; i++) v[i] = (float)(r + i);
  shoal_request_t *req;
  if ((rc = shoal_iallreduce(c, SHOAL_IN_PLACE, v, 1000, SHOAL_FLOAT32, SHOAL_SUM, &req)) || (rc = shoal_wait(&req))) {
    fprintf(stderr, "iallreduce: %s\n", shoal_last_error());
    return 1;
  }
  int x = 1;
  if ((rc = shoal_allreduce(c, SHOAL_IN_PLACE, &x, 1, SHOAL_INT32, SHOAL_SUM))) {
    fprintf(stderr, "allreduce: %s\n", shoal_last_error());
    return 1;
  }
  float want = (float)(n * (n - 1) / 2 + n * 999);
  if (x != n || v[999] != want) {
    fprintf(stderr, "wrong: x %d v %g (want %g)\n", x, v[999], want);
    return 1;
  }
  printf("hello from rank %d of %d, shoal %s: ok\n", r, n, SHOAL_VERSION_STRING);
  shoal_comm_destroy(c);
  return 0;
}
