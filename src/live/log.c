/* The controller's log lines (controller clock in front) and journal records. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "core/error.h"
#include "live/ctl.h"

double live_wall(const shoal_live_ctl_t *L) {
  if (L->cfg.clock) return L->cfg.clock(L->cfg.clock_arg);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void live_log(shoal_live_ctl_t *L, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(L->log, "[%8.1f] %s", live_wall(L) - L->epoch, L->cfg.dry_run ? "dry-run: " : "");
  vfprintf(L->log, fmt, ap);
  fputc('\n', L->log);
  fflush(L->log);
  va_end(ap);
}

int live_journal(shoal_live_ctl_t *L, const char *fmt, ...) {
  if (!L->journal) return 0;
  char payload[SHOAL_LIVE_RECORD_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(payload, sizeof payload, fmt, ap);
  va_end(ap);
  int rc = n < 0 || n >= (int)sizeof payload ? shoal__seterr(SHOAL_ERR_INVALID, "journal record too long")
                                              : shoal__live_journal_append(L->journal, "%s", payload);
  if (rc) {
    /* nothing is done that the journal does not hold first: stop acting */
    live_log(L, "journal %s: %s: the controller stops acting", L->journal_s, shoal_last_error());
    L->fatal = 1;
  }
  return rc;
}
