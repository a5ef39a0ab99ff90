/* The shared-memory segment of a host group: created by the group's leader
 * as an anonymous memory file, opened by the members through /proc, mapped,
 * and the same-host connections switched to the shm transport (shm.h,
 * docs/shm.md). */
#include "comm/transport/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "comm/bootstrap/auth.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

#define SEG_MAGIC 0x4d48534c414f4853ull /* "SHOALSHM" */

typedef struct seg_hdr {
  uint64_t magic;
  uint64_t nlocal, ring_bytes, chunk_bytes, total;
  uint64_t nonce; /* the leader's random nonce, also in its message: proves the right file was opened */
} seg_hdr_t;

/* The leader's message to the other members: where and how big. name is
 * the memfd as /proc/<leader pid>/fd/<fd> ("" if creation failed). */
typedef struct seg_msg {
  char name[64];
  uint64_t ring_bytes, chunk_bytes, total, nonce;
} seg_msg_t;

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

#define CMA_PIECE (256u << 10) /* the cma allreduce's piece per peer (64 KiB: 20-30% slower from 1 MiB) */

/* Cross-memory attach from this process to pid: its mapping of the segment at remote reads back as this
 * rank's own (the header, with the leader's nonce). Refused by Yama's ptrace_scope, a seccomp filter or a
 * non-dumpable target, whatever the reason the algorithm needing it would fail the same way. */
static int cma_reads(const shoal__shm_t *s, int pid, uint64_t remote) {
  seg_hdr_t h;
  struct iovec lv = {&h, sizeof h}, rv = {(void *)(uintptr_t)remote, sizeof h};
  return pid > 0 && remote && process_vm_readv(pid, &lv, 1, &rv, 1, 0) == (ssize_t)sizeof h &&
         !memcmp(&h, s->base, sizeof h);
}

static size_t layout(shoal__shm_t *s, int set) {
  size_t off = align_up(sizeof(seg_hdr_t), SHOAL__SHM_LINE);
  size_t ctrl = off;
  off += align_up((size_t)s->topo->nlocal * sizeof(shoal__shm_ctrl_t), 4096);
  size_t rings = off;
  off += (size_t)s->topo->nlocal * (size_t)s->topo->nlocal * (sizeof(shoal__shm_ring_t) + s->ring_bytes);
  off = align_up(off, 4096);
  size_t arena = off;
  off += (size_t)s->topo->nlocal * SHOAL__SHM_NBUF * s->chunk_bytes;
  size_t result = off;
  off += SHOAL__SHM_NBUF * s->chunk_bytes;
  size_t boxes = off;
  off += (size_t)s->topo->nlocal * SHOAL__SHM_NBUF * sizeof(shoal__shm_box_t);
  if (set) {
    char *b = s->base;
    s->ctrl = (shoal__shm_ctrl_t *)(b + ctrl);
    s->rings = b + rings;
    s->arena = b + arena;
    s->result = b + result;
    s->boxes = (shoal__shm_box_t *)(b + boxes);
  }
  return off;
}

static int map_segment(shoal__shm_t *s, int fd, size_t total, int create) {
  struct stat st;
  if (fstat(fd, &st)) return shoal__seterr(SHOAL_ERR_SYSTEM, "fstat of the shm segment: %s", strerror(errno));
  if (!create && (st.st_uid != geteuid() || (size_t)st.st_size != total || (st.st_mode & 077)))
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "shm segment: owner %u size %lld mode %o, expected owner %u size %zu "
                         "mode 0600", (unsigned)st.st_uid, (long long)st.st_size, (unsigned)(st.st_mode & 0777),
                         (unsigned)geteuid(), total);
  void *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED)
    return shoal__seterr(SHOAL_ERR_SYSTEM, "mmap of a %zu-byte shm segment: %s", total, strerror(errno));
  s->base = p;
  s->size = total;
  layout(s, 1);
  return 0;
}

/* The host group's leader: create, size, map and initialize the segment.
 * An anonymous memory file (memfd): it has no name in /dev/shm at any
 * moment, so no path (a crash, SIGKILL, a failed set-up) can leak it. The
 * members open it through /proc/<leader pid>/fd/<fd> (same user: the kernel's
 * ptrace-read check) while the leader keeps *fd_out open, until their acks. */
static int create_segment(shoal__world_t *w, shoal__shm_t *s, seg_msg_t *msg, int *fd_out) {
  char label[64];
  snprintf(label, sizeof label, "shoal-%016llx", (unsigned long long)w->id);
  size_t total = layout(s, 0);
  int fd = (int)syscall(SYS_memfd_create, label, 1u /* MFD_CLOEXEC */);
  if (fd < 0) return shoal__seterr(SHOAL_ERR_SYSTEM, "memfd_create(%s): %s", label, strerror(errno));
  snprintf(msg->name, sizeof msg->name, "/proc/%d/fd/%d", (int)getpid(), fd);
  msg->nonce = shoal__auth_random_u64() | 1;
  int rc = 0;
  (void)fchmod(fd, 0600);
  int fe;
  /* reserve the pages now: a tmpfs too small for the segment (e.g. a container's 64 MiB /dev/shm)
   * is a clear error here rather than a SIGBUS at the first touch of a missing page */
  if (ftruncate(fd, (off_t)total) || ((fe = posix_fallocate(fd, 0, (off_t)total)) != 0 && (errno = fe))) {
    rc = shoal__seterr(SHOAL_ERR_SYSTEM, "shm segment %s of %zu bytes: %s (is /dev/shm big enough? lower "
                       "SHOAL_SHM_RING_BYTES / SHOAL_SHM_CHUNK_BYTES or set SHOAL_SHM=0)", msg->name, total,
                       strerror(errno));
  } else if (!(rc = map_segment(s, fd, total, 1))) {
    seg_hdr_t *h = s->base;
    h->nlocal = (uint64_t)s->topo->nlocal;
    h->ring_bytes = s->ring_bytes;
    h->chunk_bytes = s->chunk_bytes;
    h->total = total;
    h->nonce = msg->nonce;
    atomic_thread_fence(memory_order_release);
    h->magic = SEG_MAGIC;
  }
  if (rc) close(fd);
  else *fd_out = fd;
  msg->ring_bytes = s->ring_bytes;
  msg->chunk_bytes = s->chunk_bytes;
  msg->total = total;
  return rc;
}

static int open_segment(shoal__shm_t *s, const seg_msg_t *msg, int *open_errno) {
  s->ring_bytes = (size_t)msg->ring_bytes;
  s->chunk_bytes = (size_t)msg->chunk_bytes;
  size_t total = layout(s, 0);
  if (total != msg->total)
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "shm segment %s: size %llu, expected %zu", msg->name,
                         (unsigned long long)msg->total, total);
  int fd = open(msg->name, O_RDWR | O_CLOEXEC);
  *open_errno = fd < 0 ? errno : 0;
  if (fd < 0)
    return shoal__seterr(SHOAL_ERR_SYSTEM, "open(%s), the host leader's shared-memory file: %s (ranks of one host "
                         "must share a pid namespace and user; else set SHOAL_SHM=0 or distinct SHOAL_HOSTNAME)",
                         msg->name, strerror(errno));
  int rc = map_segment(s, fd, total, 0);
  close(fd);
  if (!rc && (((seg_hdr_t *)s->base)->magic != SEG_MAGIC || ((seg_hdr_t *)s->base)->nonce != msg->nonce)) {
    munmap(s->base, s->size);
    s->base = NULL;
    rc = shoal__seterr(SHOAL_ERR_PROTOCOL, "shm segment %s: bad magic", msg->name);
  }
  return rc;
}

/* The leader keeps its descriptor until every member answered, unless it
 * failed first: a member that finds the file gone was usually overtaken by
 * an abort elsewhere (the leader left on another rank's error). Listen for
 * that notice a moment and report its cause rather than the missing file. */
static int prefer_abort(shoal_comm_t *c, shoal__op_t *op, int rc) {
  shoal__world_t *w = c->w;
  uint64_t until = shoal__now_ns() + 1000000000u;
  while (!w->aborted && shoal__now_ns() < until)
    if (shoal__progress(c, op, 20) < 0) break;
  if (!w->aborted) return rc;
  return shoal__seterr(w->abort_status ? w->abort_status : SHOAL_ERR_ABORTED, "%s", w->abort_msg);
}

/* Exchange over TCP: leader -> members (segment message), members -> leader
 * (1-byte status), then the leader closes its descriptor. */
static int setup_group(shoal_comm_t *c, shoal__shm_t *s, shoal__op_t *op) {
  shoal__world_t *w = c->w;
  int n = s->topo->nlocal, rc = 0;
  seg_msg_t msg;
  memset(&msg, 0, sizeof msg);
  shoal__req_t *reqs = calloc((size_t)n, sizeof *reqs);
  unsigned char *acks = calloc((size_t)n, 1);
  if (!reqs || !acks) {
    free(reqs), free(acks);
    return shoal__seterr(SHOAL_ERR_NOMEM, "shm setup: out of memory");
  }
  op->count = sizeof msg;
  if (s->topo->lrank == 0) {
    int seg_fd = -1;
    int made = create_segment(w, s, &msg, &seg_fd);
    int made_errno = errno;
    char made_err[512] = ""; /* kept: a member's abort during the acks below would replace the last error */
    if (!made) s->ctrl[0].base = (uint64_t)(uintptr_t)s->base;
    if (made) {
      snprintf(made_err, sizeof made_err, "%s", shoal_last_error());
      msg.name[0] = '\0'; /* tells the members that creation failed, and after it why */
      snprintf(msg.name + 1, sizeof msg.name - 1, "%s", strerror(made_errno));
    }
    for (int l = 1; l < n && !rc; l++) rc = shoal__isend(c, op, s->topo->l2w[l], &msg, sizeof msg, &reqs[l]);
    if (!rc) rc = shoal__waitall(c, op, reqs + 1, n - 1);
    op->count = 1;
    for (int l = 1; l < n && !rc; l++) rc = shoal__irecv(c, op, s->topo->l2w[l], &acks[l], 1, &reqs[l]);
    if (!rc) rc = shoal__waitall(c, op, reqs + 1, n - 1);
    if (seg_fd >= 0) close(seg_fd); /* every member mapped it (or failed); only the mappings keep it */
    /* the verdict on cross-memory attach: every member read the leader's mapping (ack 0, not 2) and the
     * leader reads every member's; the members that mapped wait for it, so every rank has the same
     * candidates for its allreduces */
    int got_acks = !rc, cma = !made && s->cma_tmp != NULL;
    for (int l = 1; l < n && got_acks; l++)
      cma = cma && !acks[l] && cma_reads(s, w->peers[s->topo->l2w[l]].pid, s->ctrl[l].base);
    unsigned char verdict = (unsigned char)cma;
    for (int l = 1; l < n && got_acks && !rc; l++)
      if (acks[l] != 1) rc = shoal__isend(c, op, s->topo->l2w[l], &verdict, 1, &reqs[l]);
    for (int l = 1; l < n && got_acks && !rc; l++)
      if (acks[l] != 1) rc = shoal__waitall(c, op, &reqs[l], 1);
    s->cma_ok = cma;
    if (made) rc = shoal__seterr(made, "%s", made_err);
    for (int l = 1; l < n && !rc; l++)
      if (acks[l] == 1) rc = shoal__seterr(SHOAL_ERR_SYSTEM, "rank %d: same-host rank %d could not map the shm segment",
                                           w->rank, s->topo->l2w[l]);
  } else {
    int leader = s->topo->l2w[0];
    rc = shoal__irecv(c, op, leader, &msg, sizeof msg, &reqs[0]);
    if (!rc) rc = shoal__waitall(c, op, reqs, 1);
    if (!rc) {
      int open_errno = 0;
      int mapped = msg.name[0] ? open_segment(s, &msg, &open_errno)
                               : shoal__seterr(SHOAL_ERR_SYSTEM, "rank %d: the host leader (rank %d) could not create "
                                               "the shm segment: %.62s", w->rank, leader, msg.name + 1);
      if (!mapped) s->ctrl[s->topo->lrank].base = (uint64_t)(uintptr_t)s->base;
      acks[0] = mapped ? 1 : s->cma_tmp && cma_reads(s, w->peers[leader].pid, s->ctrl[0].base) ? 0 : 2;
      op->count = 1;
      rc = shoal__isend(c, op, leader, &acks[0], 1, &reqs[0]);
      if (!rc) rc = shoal__waitall(c, op, reqs, 1);
      unsigned char verdict = 0;
      if (!rc && !mapped) rc = shoal__irecv(c, op, leader, &verdict, 1, &reqs[0]);
      if (!rc && !mapped) rc = shoal__waitall(c, op, reqs, 1);
      s->cma_ok = verdict == 1;
      if (!rc) rc = mapped;
      if (mapped && open_errno == ENOENT) rc = prefer_abort(c, op, rc);
    }
  }
  free(reqs);
  free(acks);
  return rc;
}

/* This rank's host group has several ranks and SHOAL_SHM is on: map the
 * group's segment (w->shm) and switch the same-host connections to it. */
static int map_group(shoal_comm_t *c, shoal__op_t *op, long ring, long chunk, long spin_us, long nt) {
  shoal__world_t *w = c->w;
  const shoal__topo_t *t = w->topo;
  int rc;
  shoal__shm_t *s = calloc(1, sizeof *s);
  if (!s) return shoal__seterr(SHOAL_ERR_NOMEM, "shm: out of memory");
  s->topo = t;
  w->shm = s; /* from here on shoal__shm_detach frees what exists */
  s->last_check_ns = calloc((size_t)t->nlocal, sizeof *s->last_check_ns);
  s->pidfd = malloc((size_t)t->nlocal * sizeof *s->pidfd);
  if (!s->last_check_ns || !s->pidfd) return shoal__seterr(SHOAL_ERR_NOMEM, "shm: out of memory");
  for (int l = 0; l < t->nlocal; l++) s->pidfd[l] = -1;
  /* n^2 rings: cap their total at 64 MiB for large host groups (a ring of 16 KiB still streams) */
  size_t ring_cap = ((size_t)64 << 20) / ((size_t)t->nlocal * (size_t)t->nlocal);
  if ((size_t)ring > ring_cap) ring = (long)(ring_cap > 16384 ? ring_cap : 16384);
  s->ring_bytes = align_up((size_t)ring, 4096);
  s->chunk_bytes = align_up((size_t)chunk, 4096);
  s->spin_ns = (uint64_t)spin_us * 1000;
  s->nt_bytes = (size_t)nt;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  s->oversub = cores > 0 && t->nlocal > cores;
  if (t->nlocal <= SHOAL__SHM_CMA_MAXLOCAL) { /* no buffer: no cma, agreed like a refused attach */
    s->cma_piece = CMA_PIECE;
    s->cma_tmp = aligned_alloc(4096, (size_t)(t->nlocal - 1) * s->cma_piece);
  }
  if ((rc = setup_group(c, s, op))) return rc;
  s->ctrl[t->lrank].pid = (int32_t)getpid();
  for (int l = 0; l < t->nlocal; l++)
    if (l != t->lrank) {
      w->conns[t->l2w[l]].tp = &shoal__shm_transport;
      int pid = w->peers[t->l2w[l]].pid;
#ifdef SYS_pidfd_open
      s->pidfd[l] = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1; /* -1 on old kernels: socket only */
      if (s->pidfd[l] < 0 && errno == ESRCH) s->pidfd[l] = -2;            /* exited (and reaped) already */
#else
      (void)pid;
#endif
    }
  shoal__world_add_waiter(w, &shoal__shm_transport);
  SHOAL_INFO("INIT", "rank %d: shared memory with %d same-host rank(s), %zu-byte segment (unlinked)%s", w->rank,
             t->nlocal - 1, s->size, s->cma_ok ? ", cross-memory attach" : "");
  return 0;
}

int shoal__shm_attach(shoal_comm_t *c) {
  shoal__world_t *w = c->w;
  const shoal__topo_t *t = w->topo;
  int use, rc;
  long ring, chunk, spin_us, nt;
  if ((rc = shoal__config_bool("SHOAL_SHM", 1, &use)) ||
      (rc = shoal__config_long("SHOAL_SHM_NT_BYTES", 16L << 20, 0, 1L << 40, &nt)) ||
      (rc = shoal__config_long("SHOAL_SHM_RING_BYTES", 256 << 10, 4096, 1L << 30, &ring)) ||
      (rc = shoal__config_long("SHOAL_SHM_CHUNK_BYTES", 512 << 10, 4096, 1L << 30, &chunk)) ||
      (rc = shoal__config_long("SHOAL_SHM_SPIN_US", 50, 0, 10000000, &spin_us)))
    return rc;
  w->shm_on = use;
  SHOAL_DEBUG("INIT", "rank %d: %d host(s); %d rank(s) on this host (%s)%s", w->rank, t->nhosts, t->nlocal,
              w->peers[w->rank].host, use ? "" : "; SHOAL_SHM=0: TCP between them");
  if (w->size < 2) return 0;
  /* one op on every rank, with a segment to set up or not: the sequence numbers of the
   * world's internal traffic after it must be equal on every rank */
  shoal__op_t op = {.opcode = SHOAL__OP_INTERNAL, .dtype = SHOAL_UINT8, .root = -1, .tag = 0x5348};
  if ((rc = shoal__op_begin(c, &op))) return rc;
  if (use && t->nlocal > 1) rc = map_group(c, &op, ring, chunk, spin_us, nt);
  return shoal__op_end(c, &op, rc);
}

void shoal__shm_detach(shoal__world_t *w) {
  shoal__shm_t *s = w->shm;
  if (!s) return;
  if (s->base) munmap(s->base, s->size);
  free(s->last_check_ns);
  free(s->cma_tmp);
  for (int l = 0; s->pidfd && l < s->topo->nlocal; l++)
    if (s->pidfd[l] >= 0) close(s->pidfd[l]);
  free(s->pidfd);
  free(s);
  w->shm = NULL;
}
