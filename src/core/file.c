/* Opening user-named input files (file.h). */
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

int shoal__fopen_input(const char *path, const char *what, FILE **out) {
  if (!path || !*path) return shoal__seterr(SHOAL_ERR_IO, "%s: no file name", what);
  /* non-blocking: opening a FIFO for reading waits for a writer otherwise */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return shoal__seterr(errno == ENOENT ? SHOAL_ERR_NOT_FOUND : SHOAL_ERR_IO, "%s %s: cannot open: %s", what, path,
                         strerror(errno));
  struct stat st = {0}; /* fstat failing: mode 0, "not a regular file" */
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const char *kind = S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "not a regular file";
    close(fd);
    return shoal__seterr(SHOAL_ERR_IO, "%s %s: %s (expected a regular file)", what, path, kind);
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  FILE *f = fdopen(fd, "r");
  if (!f) {
    int e = errno;
    close(fd);
    return shoal__seterr(SHOAL_ERR_IO, "%s %s: %s", what, path, strerror(e));
  }
  *out = f;
  return 0;
}

/* "64 MiB", "1 GiB", "4096 bytes": the cap in the unit a reader would write */
static void size_words(size_t n, char *out, size_t outsz) {
  if (n >= ((size_t)1 << 30) && n % ((size_t)1 << 30) == 0) snprintf(out, outsz, "%zu GiB", n >> 30);
  else if (n >= ((size_t)1 << 20) && n % ((size_t)1 << 20) == 0) snprintf(out, outsz, "%zu MiB", n >> 20);
  else snprintf(out, outsz, "%zu bytes", n);
}

int shoal__file_read_all(const char *path, const char *what, size_t cap, char **buf, size_t *len) {
  FILE *f;
  int rc = shoal__fopen_input(path, what, &f);
  if (rc) return rc;
  char *b = NULL;
  size_t n = 0, size = 0;
  for (;;) {
    if (n == size) { /* full (or nothing yet): grow, reading one byte past cap to tell "exactly cap" from more */
      if (size > cap) {
        char words[32];
        size_words(cap, words, sizeof words);
        rc = shoal__seterr(SHOAL_ERR_PARSE, "%s %s: larger than %s", what, path, words);
        break;
      }
      size_t grow = size < ((size_t)1 << 16) ? (size_t)1 << 16 : size * 2;
      if (grow > cap + 1) grow = cap + 1;
      char *nb = realloc(b, grow + 1); /* + 1: the terminating NUL */
      if (!nb) {
        rc = shoal__seterr(SHOAL_ERR_NOMEM, "%s %s: out of memory", what, path);
        break;
      }
      b = nb;
      size = grow;
    }
    size_t got = fread(b + n, 1, size - n, f);
    n += got;
    if (got == 0) {
      if (ferror(f)) rc = shoal__seterr(SHOAL_ERR_IO, "%s %s: read error: %s", what, path, strerror(errno));
      break;
    }
  }
  fclose(f);
  if (rc) {
    free(b);
    return rc;
  }
  b[n] = 0;
  *buf = b;
  *len = n;
  return 0;
}
