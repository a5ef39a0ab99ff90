/* The journal's record format and file handling (journal.h). */
#include "live/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "core/error.h"

struct shoal_live_journal {
  int fd;
  char path[4096];
};

static unsigned long payload_crc(const char *p, size_t n) { return crc32(crc32(0L, Z_NULL, 0), (const Bytef *)p, (uInt)n); }

int shoal__live_journal_encode(const char *payload, char *buf, size_t cap) {
  size_t n = strlen(payload);
  if (memchr(payload, '\n', n)) return -1;
  int k = snprintf(buf, cap, "%zu %08lx %s\n", n, payload_crc(payload, n), payload);
  return k < 0 || (size_t)k >= cap ? -1 : k;
}

/* the payload of one complete line (without its newline), NULL with why set when it fails a check */
static const char *decode(char *line, size_t len, char *why, size_t cap) {
  char *sp1 = memchr(line, ' ', len);
  char *end = NULL;
  unsigned long n = strtoul(line, &end, 10);
  if (!sp1 || end != sp1 || sp1 == line || line[0] < '0' || line[0] > '9') {
    snprintf(why, cap, "not a checksummed record (no length)");
    return NULL;
  }
  char *crc_s = sp1 + 1;
  if ((size_t)(crc_s - line) + 9 > len || crc_s[8] != ' ') {
    snprintf(why, cap, "not a checksummed record (no checksum)");
    return NULL;
  }
  char hex[9];
  memcpy(hex, crc_s, 8);
  hex[8] = 0;
  unsigned long crc = strtoul(hex, &end, 16);
  if (*end) {
    snprintf(why, cap, "not a checksummed record (checksum '%s')", hex);
    return NULL;
  }
  char *payload = crc_s + 9;
  size_t have = len - (size_t)(payload - line);
  if (have != n) {
    snprintf(why, cap, "record of %lu bytes holds %zu (cut or changed)", n, have);
    return NULL;
  }
  if (payload_crc(payload, have) != crc) {
    snprintf(why, cap, "checksum mismatch (changed)");
    return NULL;
  }
  payload[have] = 0;
  return payload;
}

static void add_damage(shoal_live_journal_scan_t *s, int line, const char *why) {
  if (s->ndamage < (int)(sizeof s->damage / sizeof s->damage[0])) {
    s->damage[s->ndamage].line = line;
    snprintf(s->damage[s->ndamage].what, sizeof s->damage[0].what, "%s", why);
  }
  s->ndamage++;
}

static int read_all(const char *path, char **buf, size_t *len) {
  *buf = NULL;
  *len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? 0 : shoal__seterr(SHOAL_ERR_IO, "journal %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    close(fd);
    return shoal__seterr(SHOAL_ERR_IO, "journal %s: not a regular file", path);
  }
  char *b = malloc((size_t)st.st_size + 1);
  if (!b) {
    close(fd);
    return shoal__seterr(SHOAL_ERR_NOMEM, "journal %s: out of memory", path);
  }
  size_t n = 0;
  while (n < (size_t)st.st_size) {
    ssize_t k = read(fd, b + n, (size_t)st.st_size - n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    n += (size_t)k;
  }
  close(fd);
  b[n] = 0;
  *buf = b;
  *len = n;
  return 0;
}

int shoal__live_journal_scan(const char *path, int (*fn)(void *arg, int line, const char *payload), void *arg,
                             shoal_live_journal_scan_t *scan) {
  memset(scan, 0, sizeof *scan);
  char *b;
  size_t len;
  int rc = read_all(path, &b, &len);
  if (rc || !b) return rc;
  /* damage seen since the last valid record: it is a torn tail if nothing valid follows */
  int pend_line = 0, pend_unfinished = 0;
  char pend_why[160] = "";
  size_t off = 0;
  while (off < len && !rc) {
    char *line = b + off, *nl = memchr(line, '\n', len - off);
    size_t l = nl ? (size_t)(nl - line) : len - off;
    scan->lines++;
    char why[160];
    const char *payload = nl ? decode(line, l, why, sizeof why) : NULL;
    if (!nl) snprintf(why, sizeof why, "unfinished last line (no newline)");
    off += l + (nl ? 1 : 0);
    if (!payload) {
      if (pend_line) add_damage(scan, pend_line, pend_why);
      pend_line = scan->lines;
      pend_unfinished = !nl;
      snprintf(pend_why, sizeof pend_why, "%s", why);
      continue;
    }
    if (pend_line) add_damage(scan, pend_line, pend_why), pend_line = 0;
    scan->records++;
    scan->valid_end = (off_t)off;
    rc = fn ? fn(arg, scan->lines, payload) : 0;
  }
  /* the last line failed: a crash while writing it, after valid records (or with no newline yet), is a torn
   * tail; a file of nothing but complete lines that are no records is no journal of ours: damage */
  if (pend_line) {
    if (scan->records > 0 || pend_unfinished) scan->torn_line = pend_line;
    else add_damage(scan, pend_line, pend_why);
  }
  free(b);
  return rc;
}

int shoal__live_journal_open(const char *path, int *created, shoal_live_journal_t **out) {
  shoal_live_journal_t *j = calloc(1, sizeof *j);
  if (!j) return shoal__seterr(SHOAL_ERR_NOMEM, "journal: out of memory");
  snprintf(j->path, sizeof j->path, "%s", path);
  /* (close-on-exec: a command the controller runs must not keep the lock after it dies) */
  int made = 0;
  j->fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC);
  if (j->fd < 0 && errno == ENOENT) j->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644), made = 1;
  if (j->fd < 0) {
    int e = errno;
    free(j);
    return shoal__seterr(SHOAL_ERR_IO, "journal %s: %s", path, strerror(e));
  }
  if (flock(j->fd, LOCK_EX | LOCK_NB)) {
    int e = errno;
    close(j->fd);
    free(j);
    if (e == EWOULDBLOCK)
      return shoal__seterr(SHOAL_ERR_ADDR_IN_USE, "journal %s: in use by another controller (one controller per journal)",
                           path);
    return shoal__seterr(SHOAL_ERR_IO, "journal %s: lock: %s", path, strerror(e));
  }
  if (created) *created = made;
  *out = j;
  return 0;
}

int shoal__live_journal_truncate(shoal_live_journal_t *j, off_t at) {
  struct stat st;
  if (fstat(j->fd, &st) == 0 && st.st_size > at && (ftruncate(j->fd, at) || fsync(j->fd)))
    return shoal__seterr(SHOAL_ERR_IO, "journal %s: cutting its torn tail: %s", j->path, strerror(errno));
  return 0;
}

void shoal__live_journal_close_unused(shoal_live_journal_t *j, int created) {
  if (!j) return;
  struct stat st;
  if (created && fstat(j->fd, &st) == 0 && st.st_size == 0) unlink(j->path);
  shoal__live_journal_close(j);
}

int shoal__live_journal_append(shoal_live_journal_t *j, const char *fmt, ...) {
  char payload[SHOAL_LIVE_RECORD_MAX], line[SHOAL_LIVE_RECORD_MAX + 32];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(payload, sizeof payload, fmt, ap);
  va_end(ap);
  if (n < 0 || n >= (int)sizeof payload) return shoal__seterr(SHOAL_ERR_INVALID, "journal: record too long");
  int k = shoal__live_journal_encode(payload, line, sizeof line);
  if (k < 0) return shoal__seterr(SHOAL_ERR_INVALID, "journal: record not encodable");
  size_t done = 0;
  while (done < (size_t)k) {
    ssize_t w = write(j->fd, line + done, (size_t)k - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return shoal__seterr(SHOAL_ERR_IO, "journal %s: write: %s", j->path, strerror(errno));
    done += (size_t)w;
  }
  if (fsync(j->fd)) return shoal__seterr(SHOAL_ERR_IO, "journal %s: fsync: %s", j->path, strerror(errno));
  return 0;
}

void shoal__live_journal_close(shoal_live_journal_t *j) {
  if (!j) return;
  if (j->fd >= 0) close(j->fd);
  free(j);
}

int shoal__live_journal_rewrite(shoal_live_journal_t *j, const char *const *payloads, int n, char *saved, size_t cap) {
  snprintf(saved, cap, "%s.damaged-%ld", j->path, (long)time(NULL));
  /* the damaged file is kept first (written and synced), then the journal is rewritten in place under its lock */
  char *b;
  size_t len;
  int rc = read_all(j->path, &b, &len);
  if (rc) return rc;
  int fd = open(saved, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    free(b);
    return shoal__seterr(SHOAL_ERR_IO, "journal %s: keeping it as %s: %s", j->path, saved, strerror(errno));
  }
  ssize_t w = b ? write(fd, b, len) : 0;
  int bad = (b && w != (ssize_t)len) || fsync(fd);
  close(fd);
  free(b);
  if (bad) return shoal__seterr(SHOAL_ERR_IO, "journal %s: keeping it as %s: write failed", j->path, saved);
  if (ftruncate(j->fd, 0)) return shoal__seterr(SHOAL_ERR_IO, "journal %s: %s", j->path, strerror(errno));
  for (int i = 0; i < n && !rc; i++) rc = shoal__live_journal_append(j, "%s", payloads[i]);
  return rc;
}
