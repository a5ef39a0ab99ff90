/* Opening user-named input files (file.h). */
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
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
