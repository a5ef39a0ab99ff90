/* The controller's journal: an append-only file of records, one per line,
 *     <length> <crc32> <payload>\n
 * with the payload's length in bytes and its CRC-32 (zlib's) in 8 hex digits,
 * so that no record can be half-read: a line cut anywhere, or changed, fails
 * its length or its checksum. Each record is written with one write() and
 * fsync'ed before the action it announces is taken.
 *
 * Reading tells three things apart:
 *   - valid records;
 *   - a torn tail: the last line, unfinished (no newline) or failing its
 *     checks with nothing valid after it: what a crash while writing leaves.
 *     Its action was never taken (the record comes first), so it is dropped
 *     (and cut off before the next append);
 *   - damage: a line that fails its checks with valid records after it, or a
 *     file whose lines are no records at all (an edit, a disk error, another
 *     program's file): the journal no longer says what the controller did. */
#ifndef SHOAL_LIVE_JOURNAL_H
#define SHOAL_LIVE_JOURNAL_H

#include <stddef.h>
#include <sys/types.h>

#define SHOAL_LIVE_RECORD_MAX 8192

typedef struct shoal_live_journal shoal_live_journal_t;

/* What reading found wrong, line by line (1-based). */
typedef struct shoal_live_journal_damage {
  int line;
  char what[160];
} shoal_live_journal_damage_t;

typedef struct shoal_live_journal_scan {
  int records;                  /* valid records */
  int lines;
  int torn_line;                /* line of a torn tail, 0 if none */
  off_t valid_end;              /* offset just past the last valid record */
  int ndamage;                  /* damaged records (not counting a torn tail) */
  shoal_live_journal_damage_t damage[16]; /* the first ones */
} shoal_live_journal_scan_t;

/* Read `path` (missing = empty), calling fn(arg, line, payload) for every valid record in order (a non-zero
 * return stops the read and is returned). 0, or a negative status when the file cannot be read. */
int shoal__live_journal_scan(const char *path, int (*fn)(void *arg, int line, const char *payload), void *arg,
                             shoal_live_journal_scan_t *scan);

/* Open for appending (created if missing: *created says so) under an exclusive lock held until close (one writer
 * per journal: SHOAL_ERR_ADDR_IN_USE when another process holds it). */
int shoal__live_journal_open(const char *path, int *created, shoal_live_journal_t **out);
/* Cut the file at `at` (a torn tail found by the scan: the offset just past the last valid record). */
int shoal__live_journal_truncate(shoal_live_journal_t *j, off_t at);
/* Close, and remove the file if it was created by this open and nothing was written to it. */
void shoal__live_journal_close_unused(shoal_live_journal_t *j, int created);
/* Append one record (payload: printf format, no newline) and fsync it. */
int shoal__live_journal_append(shoal_live_journal_t *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void shoal__live_journal_close(shoal_live_journal_t *j);
/* Keep a damaged journal's content aside (PATH.damaged-<unix time>, synced first), then rewrite the open journal
 * with the given valid records (payloads, in order). The saved name in saved. */
int shoal__live_journal_rewrite(shoal_live_journal_t *j, const char *const *payloads, int n, char *saved, size_t cap);
/* The line for a payload (length, checksum, payload, newline) into buf; its length, or -1 if it does not fit. */
int shoal__live_journal_encode(const char *payload, char *buf, size_t cap);

#endif
