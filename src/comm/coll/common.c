/* Helpers shared by the collectives: scratch buffers, argument checks, and
 * posting helpers that skip empty messages. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>

#include "comm/coll/coll.h"
#include "core/clock.h"
#include "core/error.h"

/* How long a collective polls (non-blocking progress, yielding the CPU
 * between polls) before it blocks in the transport's poll(). A blocked
 * process pays a scheduler wakeup per message (tens of us on a loaded VM);
 * Open MPI avoids it by busy-polling forever. Bounded here so that ranks
 * oversubscribing cores do not burn them; sched_yield lets a runnable peer
 * on the same core go first. */
#define SPIN_NS 50000ull
#define SPIN_MAX_BYTES 32768u

typedef struct {
  void *ptr;
  size_t cap;
} scratch_slot_t;
static _Thread_local scratch_slot_t scratch[SHOAL__SCRATCH_SLOTS];

/* Threads that run collectives and then exit (BSP's communication thread)
 * must not leak their scratch: a key whose destructor frees it. */
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *arg) {
  scratch_slot_t *slots = arg;
  for (int i = 0; i < SHOAL__SCRATCH_SLOTS; i++) {
    free(slots[i].ptr);
    slots[i].ptr = NULL;
    slots[i].cap = 0;
  }
}

static void scratch_key_create(void) { (void)pthread_key_create(&scratch_key, scratch_free); }

void *shoal__coll_scratch(int slot, size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes > scratch[slot].cap) {
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes)) return NULL;
    pthread_once(&scratch_once, scratch_key_create);
    (void)pthread_setspecific(scratch_key, scratch);
    free(scratch[slot].ptr);
    scratch[slot].ptr = p;
    scratch[slot].cap = bytes;
  }
  return scratch[slot].ptr;
}

int shoal__coll_check(const shoal_comm_t *c, const char *what, shoal_dtype_t dtype, size_t count, size_t nblocks,
                      const void *buf, size_t *bytes_out) {
  if (!c) return shoal__seterr(SHOAL_ERR_INVALID, "%s: communicator is NULL", what);
  size_t es = shoal_dtype_size(dtype);
  if (es == 0) return shoal__seterr(SHOAL_ERR_INVALID, "%s: invalid dtype %d", what, (int)dtype);
  if (nblocks == 0) nblocks = 1;
  if (count > SIZE_MAX / es / nblocks)
    return shoal__seterr(SHOAL_ERR_INVALID, "%s: count %zu x %zu ranks of %s overflows", what, count, nblocks,
                         shoal_dtype_name(dtype));
  if (count > 0 && !buf) return shoal__seterr(SHOAL_ERR_INVALID, "%s: buffer is NULL with count %zu", what, count);
  if (buf == SHOAL_IN_PLACE)
    return shoal__seterr(SHOAL_ERR_INVALID, "%s: the receive buffer is SHOAL_IN_PLACE (only the send buffer may be)",
                         what);
  *bytes_out = count * es;
  return 0;
}

int shoal__post_recv(shoal_comm_t *c, const shoal__op_t *op, int src, void *buf, size_t bytes, shoal__req_t *req,
                     char *posted) {
  *posted = 0;
  if (bytes == 0) return 0;
  int rc = shoal__irecv(c, op, src, buf, bytes, req);
  if (rc == 0) *posted = 1;
  return rc;
}

int shoal__post_send(shoal_comm_t *c, const shoal__op_t *op, int dst, const void *buf, size_t bytes,
                     shoal__req_t *req, char *posted) {
  *posted = 0;
  if (bytes == 0) return 0;
  int rc = shoal__isend(c, op, dst, buf, bytes, req);
  if (rc == 0) *posted = 1;
  return rc;
}

int shoal__coll_wait(shoal_comm_t *c, const shoal__op_t *op, shoal__req_t *reqs, int n) {
  /* Spinning only pays when the wait is a message latency; a large transfer
   * takes longer than the spin anyway, and ranks sharing cores need the CPU. */
  size_t left = 0;
  for (int i = 0; i < n; i++)
    if (reqs[i].kind && reqs[i].state == 0) left += reqs[i].bytes - reqs[i].done;
  if (left > SPIN_MAX_BYTES) return shoal__waitall(c, op, reqs, n);
  uint64_t t0 = shoal__now_ns();
  for (;;) {
    int ndone = 0, rc = shoal__test(c, op, reqs, n, &ndone);
    if (rc) return rc;
    if (ndone == n) return 0;
    if (shoal__now_ns() - t0 > SPIN_NS) break;
    sched_yield();
  }
  return shoal__waitall(c, op, reqs, n);
}

int shoal__coll_sendrecv(shoal_comm_t *c, const shoal__op_t *op, int dst, const void *sbuf, size_t sbytes, int src,
                         void *rbuf, size_t rbytes) {
  shoal__req_t r[2];
  r[0].kind = r[1].kind = 0;
  int rc;
  if (src >= 0 && (rc = shoal__irecv(c, op, src, rbuf, rbytes, &r[1]))) return rc;
  if (dst >= 0 && (rc = shoal__isend(c, op, dst, sbuf, sbytes, &r[0]))) return rc;
  return shoal__coll_wait(c, op, r, 2);
}

int shoal__wait_posted(shoal_comm_t *c, const shoal__op_t *op, shoal__req_t *req, char *posted) {
  if (!*posted) return 0;
  int rc = shoal__coll_wait(c, op, req, 1);
  if (rc == 0) *posted = 0;
  return rc;
}
