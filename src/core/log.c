/* Logging to stderr with a "[shoal host:pid rN] LEVEL SUBSYS" prefix. The level
 * is read lazily from SHOAL_DEBUG (environment, then SHOAL_CONF_FILE) so that
 * logging works before any init call. */
#include "core/log.h"

#include "core/config.h"
#include "core/error.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <unistd.h>

int shoal__log_level_cur = SHOAL_LOG_TRACE; /* until configured: first call configures */
static int log_rank = -1;
static char log_subsys[256];
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static const char *level_names[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};

/* The subsystems that log (SHOAL_DEBUG_SUBSYS names them; ALL as well). */
static const char *subsys_names[] = {"INIT", "NET", "COLL", "DSSYNC", "TUNING", "SIM", "TRAIN", "FLOW", "ALL"};

/* The level a SHOAL_DEBUG value names; -1 if none. */
static int level_of(const char *lv) {
  for (int i = 0; i < 5; i++)
    if (strcasecmp(lv, level_names[i]) == 0) return i;
  return strcasecmp(lv, "VERSION") == 0 ? SHOAL_LOG_INFO : -1;
}

/* names joined by ", ", the last two by last (", " or " or "), into out */
static void name_list(const char *const *names, size_t n, const char *last, char *out, size_t cap) {
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < n && used < cap; i++)
    used += (size_t)snprintf(out + used, cap - used, "%s%s", i == 0 ? "" : i + 1 == n ? last : ", ", names[i]);
}

/* If a name of a SHOAL_DEBUG_SUBSYS list is no subsystem, "unknown
 * subsystem 'X' (the names)" into why and 1; 0 if every name is one. */
static int subsys_unknown(const char *ss, char *why, size_t cap) {
  size_t nnames = sizeof subsys_names / sizeof *subsys_names;
  for (const char *p = ss + (*ss == '^'); *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    int ok = 0;
    for (size_t i = 0; i < nnames; i++)
      if (len == strlen(subsys_names[i]) && strncasecmp(p, subsys_names[i], len) == 0) ok = 1;
    if (!ok) {
      char all[128];
      name_list(subsys_names, nnames, ", ", all, sizeof all);
      snprintf(why, cap, "unknown subsystem '%.*s' (%s)", len > 64 ? 64 : (int)len, p, all);
      return 1;
    }
    if (!e) break;
    p = e + 1;
  }
  return 0;
}

/* "ERROR, WARN, INFO, DEBUG or TRACE" */
static void level_list(char *out, size_t cap) {
  name_list(level_names, sizeof level_names / sizeof *level_names, " or ", out, cap);
}

static _Thread_local int in_configure; /* reading the config file may log: WARN level meanwhile */

/* SHOAL_CONF_FILE's problems, once (the config module does not log: this module reads its level there). */
static void report_config_problems(int level) {
  const char *msgs[8];
  int n = shoal__config_problems(msgs, 8), shown = n < 8 ? n : 8;
  if (level < SHOAL_LOG_WARN) return;
  for (int i = 0; i < shown; i++) shoal__log_write(SHOAL_LOG_WARN, "INIT", "%s", msgs[i]);
  if (n > shown) shoal__log_write(SHOAL_LOG_WARN, "INIT", "SHOAL_CONF_FILE: %d more problems not shown", n - shown);
}

/* Logging starts anywhere (no call returns its error), so a bad value is
 * reported on stderr once, naming the variable, and the default is used;
 * shoal_comm_init refuses it (shoal__log_check). */
static void log_configure(void) {
  in_configure = 1;
  const char *lv = shoal__config_raw("SHOAL_DEBUG"); /* the environment, then SHOAL_CONF_FILE */
  int level = SHOAL_LOG_WARN;
  if (lv && *lv) {
    int l = level_of(lv);
    if (l >= 0) level = l;
    else {
      char levels[64];
      level_list(levels, sizeof levels);
      fprintf(stderr, "[shoal] WARN INIT: SHOAL_DEBUG=%s is not a log level (%s): using WARN\n", lv, levels);
    }
  }
  const char *ss = shoal__config_raw("SHOAL_DEBUG_SUBSYS");
  if (ss) {
    char why[256];
    snprintf(log_subsys, sizeof log_subsys, "%s", ss);
    if (subsys_unknown(ss, why, sizeof why)) fprintf(stderr, "[shoal] WARN INIT: SHOAL_DEBUG_SUBSYS: %s\n", why);
  }
  shoal__log_level_cur = level;
  report_config_problems(level);
  in_configure = 0;
}

int shoal__log_check(void) {
  const char *lv = shoal__config_raw("SHOAL_DEBUG"), *ss = shoal__config_raw("SHOAL_DEBUG_SUBSYS");
  char why[256];
  if (lv && *lv && level_of(lv) < 0) {
    level_list(why, sizeof why);
    return shoal__seterr(SHOAL_ERR_CONFIG, "SHOAL_DEBUG='%s': expected %s", lv, why);
  }
  if (ss && subsys_unknown(ss, why, sizeof why)) return shoal__seterr(SHOAL_ERR_CONFIG, "SHOAL_DEBUG_SUBSYS='%s': %s", ss, why);
  return 0;
}

void shoal__log_set_rank(int rank) {
  pthread_once(&log_once, log_configure); /* a bad SHOAL_DEBUG is reported when a rank starts */
  log_rank = rank;
}

void shoal__log_init(void) { pthread_once(&log_once, log_configure); }

/* SHOAL_DEBUG_SUBSYS: "INIT,NET" enables those, "^COLL" everything but COLL. */
static int subsys_match(const char *subsys) {
  if (!log_subsys[0] || !subsys) return 1;
  int exclude = log_subsys[0] == '^';
  const char *list = log_subsys + exclude;
  size_t n = strlen(subsys);
  for (const char *p = list; *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if ((len == n && strncasecmp(p, subsys, n) == 0) || (len == 3 && strncasecmp(p, "ALL", 3) == 0))
      return !exclude;
    if (!e) break;
    p = e + 1;
  }
  return exclude;
}

int shoal__log_enabled(int level, const char *subsys) {
  if (in_configure) return level <= SHOAL_LOG_WARN;
  pthread_once(&log_once, log_configure);
  return level <= shoal__log_level_cur && (level <= SHOAL_LOG_WARN || subsys_match(subsys));
}

void shoal__log_write(int level, const char *subsys, const char *fmt, ...) {
  char host[64] = "?";
  gethostname(host, sizeof host);
  host[sizeof host - 1] = '\0';
  char *dot = strchr(host, '.');
  if (dot) *dot = '\0';
  char line[2048];
  int off;
  if (log_rank >= 0)
    off = snprintf(line, sizeof line, "[shoal %s:%d r%d] %s %s: ", host, (int)getpid(), log_rank,
                   level_names[level], subsys ? subsys : "");
  else
    off = snprintf(line, sizeof line, "[shoal %s:%d] %s %s: ", host, (int)getpid(),
                   level_names[level], subsys ? subsys : "");
  if (off < 0 || off >= (int)sizeof line) off = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + off, sizeof line - (size_t)off - 1, fmt, ap);
  va_end(ap);
  size_t len = strlen(line);
  line[len] = '\n';
  /* one write() per line so that lines of concurrent ranks do not interleave */
  ssize_t w = write(STDERR_FILENO, line, len + 1);
  (void)w;
}
