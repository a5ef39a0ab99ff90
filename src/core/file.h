/* Opening the files a user names (traces, cluster files, checkpoints, settings) for reading. */
#ifndef SHOAL_CORE_FILE_H
#define SHOAL_CORE_FILE_H

#include <stdio.h>

/* fopen(path, "r") for a regular file only: a FIFO would block the open or the read forever, a
 * directory or a device (/dev/zero) reads as garbage or without end. 0 and *out, or SHOAL_ERR_NOT_FOUND
 * (no such file) / SHOAL_ERR_IO with "WHAT PATH: reason" in shoal_last_error(). */
int shoal__fopen_input(const char *path, const char *what, FILE **out);

#endif
