/* Notes to the launcher (note.h). SHOAL_NOTE_FD is "FD:INODE": the program may have closed the descriptor
 * and reused its number, so the note goes only to a pipe with the launcher's inode, opened for writing,
 * non-blocking (the launcher set O_NONBLOCK on it): a failing rank never waits for the launcher. */
#include "comm/bootstrap/note.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config.h"

void shoal__note_lost_peer(int peer_pid) {
  const char *v = shoal__config_str("SHOAL_NOTE_FD", "");
  int fd;
  unsigned long long ino;
  char tail;
  if (peer_pid <= 0 || !v || sscanf(v, "%d:%llu%c", &fd, &ino, &tail) != 2 || fd < 0) return;
  struct stat st;
  int fl = fcntl(fd, F_GETFL);
  if (fstat(fd, &st) || !S_ISFIFO(st.st_mode) || (unsigned long long)st.st_ino != ino || fl < 0 ||
      (fl & O_ACCMODE) != O_WRONLY || !(fl & O_NONBLOCK))
    return;
  char line[64];
  int n = snprintf(line, sizeof line, "lost %d %d\n", (int)getpid(), peer_pid);
  ssize_t k = write(fd, line, (size_t)n); /* < PIPE_BUF: one atomic line among the ranks' */
  (void)k;
}
