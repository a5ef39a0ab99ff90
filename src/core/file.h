/* Opening the files a user names (traces, cluster files, checkpoints, settings) for reading. */
#ifndef SHOAL_CORE_FILE_H
#define SHOAL_CORE_FILE_H

#include <stdio.h>
#include <string.h>

/* fopen(path, "r") for a regular file only: a FIFO would block the open or the read forever, a
 * directory or a device (/dev/zero) reads as garbage or without end. 0 and *out, or SHOAL_ERR_NOT_FOUND
 * (no such file) / SHOAL_ERR_IO with "WHAT PATH: reason" in shoal_last_error(). */
int shoal__fopen_input(const char *path, const char *what, FILE **out);

/* The whole of a regular file (opened as shoal__fopen_input does) into a new buffer of *len bytes plus a
 * terminating NUL, at most cap bytes: larger is SHOAL_ERR_PARSE "WHAT PATH: larger than ...". 0 and
 * *buf (the caller frees it) and *len, or an error code as shoal__fopen_input's, with the message. */
int shoal__file_read_all(const char *path, const char *what, size_t cap, char **buf, size_t *len);

/* The length of a UTF-8 byte order mark at the start of text (3, else 0): spreadsheets write one. */
static inline size_t shoal__utf8_bom(const char *text, size_t len) {
  return len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3) ? 3 : 0;
}

#endif
