/* The per-host flow segment (flowseg.h): naming, mapping, claiming and reaping slots. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/flowseg.h"

void shoal__flowseg_name(const char *host, char *name, size_t cap) {
  char h[64];
  if (!host) {
    if (gethostname(h, sizeof h) != 0) snprintf(h, sizeof h, "localhost");
    h[sizeof h - 1] = 0;
    host = h;
  }
  int n = snprintf(name, cap, "/shoal-flow.");
  for (const char *p = host; *p && n + 1 < (int)cap && n < 90; p++) {
    char c = *p;
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
             c == '_';
    name[n++] = ok ? c : '_';
  }
  name[n] = 0;
}

/* flock with a deadline: holders keep the lock for microseconds (a claim, an initialization). */
static int lock_fd(int fd, const char *name) {
  shoal__deadline_t d = shoal__deadline_in(2.0);
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR)
      return shoal__seterr(SHOAL_ERR_SYSTEM, "flow segment %s: flock: %s", name, strerror(errno));
    if (shoal__deadline_passed(d))
      return shoal__seterr(SHOAL_ERR_TIMEOUT, "flow segment %s: still locked by another process after 2 s", name);
    shoal__sleep_s(0.001);
  }
  return 0;
}

/* A process that no longer runs: gone, or a zombie (killed, and its parent has not reaped it: a daemon
 * reparented to a container's init that never waits stays one) */
static int pid_gone(int32_t pid) {
  if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH)) return 1;
  char path[32], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *paren = strrchr(buf, ')'); /* "pid (comm) S ...": the name may hold spaces and parentheses */
  return paren && paren[1] == ' ' && paren[2] == 'Z';
}

static void init_fresh(shoal__flowseg_t *seg, const char *name) {
  memset(seg, 0, sizeof *seg);
  seg->version = SHOAL__FLOWSEG_VERSION;
  seg->nflows = SHOAL__FLOWSEG_FLOWS;
  snprintf(seg->host, sizeof seg->host, "%s", name + strlen("/shoal-flow."));
  atomic_thread_fence(memory_order_release);
  seg->magic = SHOAL__FLOWSEG_MAGIC; /* last: an opener that sees it sees the rest */
}

static int seg_valid(const shoal__flowseg_t *seg) {
  return seg->magic == SHOAL__FLOWSEG_MAGIC && seg->version == SHOAL__FLOWSEG_VERSION &&
         seg->nflows == SHOAL__FLOWSEG_FLOWS;
}

/* Under the lock: size, map, check or initialize. */
static int map_locked(int fd, const char *name, int create, shoal__flowseg_t **out) {
  struct stat st;
  if (fstat(fd, &st) != 0) return shoal__seterr(SHOAL_ERR_SYSTEM, "flow segment %s: fstat: %s", name, strerror(errno));
  int fresh = 0;
  if ((size_t)st.st_size != sizeof(shoal__flowseg_t)) {
    if (!create)
      return shoal__seterr(SHOAL_ERR_PROTOCOL, "flow segment %s: %lld bytes, expected %zu (another shoal version?)",
                           name, (long long)st.st_size, sizeof(shoal__flowseg_t));
    if (ftruncate(fd, 0) != 0 || ftruncate(fd, (off_t)sizeof(shoal__flowseg_t)) != 0)
      return shoal__seterr(SHOAL_ERR_SYSTEM, "flow segment %s: ftruncate: %s", name, strerror(errno));
    fresh = 1;
  }
  void *p = mmap(NULL, sizeof(shoal__flowseg_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return shoal__seterr(SHOAL_ERR_SYSTEM, "flow segment %s: mmap: %s", name, strerror(errno));
  shoal__flowseg_t *seg = p;
  if (fresh || !seg_valid(seg)) {
    if (!create) {
      munmap(p, sizeof *seg);
      return shoal__seterr(SHOAL_ERR_PROTOCOL, "flow segment %s: not a shoal flow segment of version %u", name,
                           SHOAL__FLOWSEG_VERSION);
    }
    init_fresh(seg, name);
  }
  *out = seg;
  return 0;
}

int shoal__flowseg_open(const char *host, int create, shoal__flowseg_t **out) {
  char name[96];
  shoal__flowseg_name(host, name, sizeof name);
  int fd = shm_open(name, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0666);
  if (fd < 0) {
    if (errno == ENOENT) return shoal__seterr(SHOAL_ERR_NOT_FOUND, "flow segment %s: none (no agent on this host)", name);
    return shoal__seterr(SHOAL_ERR_SYSTEM, "flow segment /dev/shm%s: %s", name, strerror(errno));
  }
  if (create) (void)fchmod(fd, 0666); /* the umask must not keep other users' ranks out */
  shoal__flowseg_t *seg = NULL;
  int rc = lock_fd(fd, name);
  if (!rc) {
    rc = map_locked(fd, name, create, &seg);
    if (!rc) shoal__flowseg_reap(seg);
    flock(fd, LOCK_UN);
  }
  close(fd);
  if (rc) return rc;
  *out = seg;
  return 0;
}

int shoal__flowseg_open_ro(const char *host, const shoal__flowseg_t **out) {
  char name[96];
  shoal__flowseg_name(host, name, sizeof name);
  int fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) {
    if (errno == ENOENT) return shoal__seterr(SHOAL_ERR_NOT_FOUND, "flow segment %s: none (no agent on this host)", name);
    return shoal__seterr(SHOAL_ERR_SYSTEM, "flow segment /dev/shm%s: %s", name, strerror(errno));
  }
  struct stat st;
  int rc = 0;
  void *p = MAP_FAILED;
  if (fstat(fd, &st) != 0 || (size_t)st.st_size != sizeof(shoal__flowseg_t))
    rc = shoal__seterr(SHOAL_ERR_PROTOCOL, "flow segment %s: wrong size (another shoal version?)", name);
  else if ((p = mmap(NULL, sizeof(shoal__flowseg_t), PROT_READ, MAP_SHARED, fd, 0)) == MAP_FAILED)
    rc = shoal__seterr(SHOAL_ERR_SYSTEM, "flow segment %s: mmap: %s", name, strerror(errno));
  else if (!seg_valid(p)) {
    munmap(p, sizeof(shoal__flowseg_t));
    rc = shoal__seterr(SHOAL_ERR_PROTOCOL, "flow segment %s: not initialized", name);
  }
  close(fd);
  if (rc) return rc;
  *out = p;
  return 0;
}

void shoal__flowseg_close(const shoal__flowseg_t *seg) {
  if (seg) munmap((void *)seg, sizeof *seg);
}

int shoal__flowseg_unlink(const char *host) {
  char name[96];
  shoal__flowseg_name(host, name, sizeof name);
  if (shm_unlink(name) == 0) return 0;
  if (errno == ENOENT) return shoal__seterr(SHOAL_ERR_NOT_FOUND, "flow segment %s: none", name);
  return shoal__seterr(SHOAL_ERR_SYSTEM, "flow segment %s: shm_unlink: %s", name, strerror(errno));
}

/* The first free slot, its identity cleared and its generation advanced; NULL when none. */
static shoal__flowseg_flow_t *claim_free(shoal__flowseg_t *seg) {
  for (uint32_t i = 0; i < seg->nflows; i++) {
    shoal__flowseg_flow_t *f = &seg->flow[i];
    if (atomic_load_explicit(&f->state, memory_order_acquire) != SHOAL__FLOWSEG_FREE) continue;
    uint32_t gen = f->gen + 1;
    memset((char *)f + offsetof(shoal__flowseg_flow_t, job), 0, sizeof *f - offsetof(shoal__flowseg_flow_t, job));
    f->gen = gen;
    f->pid = (int32_t)getpid();
    return f;
  }
  return NULL;
}

shoal__flowseg_flow_t *shoal__flowseg_claim(shoal__flowseg_t *seg) {
  char name[96];
  shoal__flowseg_name(seg->host, name, sizeof name);
  int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    shoal__seterr(SHOAL_ERR_SYSTEM, "flow segment %s: %s", name, strerror(errno));
    return NULL;
  }
  shoal__flowseg_flow_t *got = NULL;
  if (lock_fd(fd, name) == 0) {
    got = claim_free(seg);
    if (!got && shoal__flowseg_reap(seg) > 0) got = claim_free(seg);
    flock(fd, LOCK_UN);
    if (!got) shoal__seterr(SHOAL_ERR_NOMEM, "flow segment %s: all %u slots are in use", name, seg->nflows);
  }
  close(fd);
  return got;
}

void shoal__flowseg_init_local(shoal__flowseg_t *seg, const char *host) {
  char name[96];
  shoal__flowseg_name(host, name, sizeof name);
  init_fresh(seg, name);
}

shoal__flowseg_flow_t *shoal__flowseg_claim_local(shoal__flowseg_t *seg) { return claim_free(seg); }

int shoal__flowseg_reap(shoal__flowseg_t *seg) {
  int freed = 0;
  for (uint32_t i = 0; i < seg->nflows; i++) {
    shoal__flowseg_flow_t *f = &seg->flow[i];
    if (atomic_load_explicit(&f->state, memory_order_acquire) == SHOAL__FLOWSEG_LIVE && pid_gone(f->pid)) {
      atomic_store_explicit(&f->rate, 0, memory_order_relaxed);
      atomic_store_explicit(&f->state, SHOAL__FLOWSEG_FREE, memory_order_release);
      freed++;
    }
  }
  int32_t ap = atomic_load_explicit(&seg->agent_pid, memory_order_relaxed);
  if (ap && pid_gone(ap)) { /* an agent killed with -9: nothing of it may keep pacing */
    atomic_store_explicit(&seg->agent_pid, 0, memory_order_relaxed);
    atomic_store_explicit(&seg->agent_beat_ns, 0, memory_order_relaxed);
    for (uint32_t i = 0; i < seg->nflows; i++) atomic_store_explicit(&seg->flow[i].rate, 0, memory_order_relaxed);
  }
  return freed;
}

int shoal__flowseg_agent_alive(const shoal__flowseg_t *seg, uint64_t now_ns) {
  uint64_t beat = atomic_load_explicit(&seg->agent_beat_ns, memory_order_relaxed);
  uint64_t slot_ns = (uint64_t)atomic_load_explicit(&seg->slot_us, memory_order_relaxed) * 1000u;
  if (!beat || !slot_ns) return 0;
  return now_ns < beat + SHOAL__FLOWSEG_STALE_SLOTS * slot_ns + slot_ns / 2;
}
