/* Logging. Level from SHOAL_DEBUG (ERROR|WARN|INFO|DEBUG|TRACE, default WARN),
 * subsystems from SHOAL_DEBUG_SUBSYS (comma list, e.g. INIT,NET,COLL; ^ excludes). */
#ifndef SHOAL_CORE_LOG_H
#define SHOAL_CORE_LOG_H

enum shoal__log_level {
  SHOAL_LOG_ERROR = 0,
  SHOAL_LOG_WARN  = 1,
  SHOAL_LOG_INFO  = 2,
  SHOAL_LOG_DEBUG = 3,
  SHOAL_LOG_TRACE = 4
};

extern int shoal__log_level_cur;

int  shoal__log_enabled(int level, const char *subsys);
void shoal__log_write(int level, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The rank printed in every line's prefix (-1: none). */
void shoal__log_set_rank(int rank);
/* Read SHOAL_DEBUG and SHOAL_DEBUG_SUBSYS now (a bad value is reported on stderr). */
void shoal__log_init(void);
/* SHOAL_ERR_CONFIG naming the variable when SHOAL_DEBUG or SHOAL_DEBUG_SUBSYS
 * holds a value that is no level / subsystem; 0 otherwise. */
int shoal__log_check(void);

#define SHOAL_LOG(level, subsys, ...)                                   \
  do {                                                                  \
    if ((level) <= shoal__log_level_cur && shoal__log_enabled((level), (subsys))) \
      shoal__log_write((level), (subsys), __VA_ARGS__);                 \
  } while (0)

#define SHOAL_ERROR(subsys, ...) SHOAL_LOG(SHOAL_LOG_ERROR, subsys, __VA_ARGS__)
#define SHOAL_WARN(subsys, ...)  SHOAL_LOG(SHOAL_LOG_WARN, subsys, __VA_ARGS__)
#define SHOAL_INFO(subsys, ...)  SHOAL_LOG(SHOAL_LOG_INFO, subsys, __VA_ARGS__)
#define SHOAL_DEBUG(subsys, ...) SHOAL_LOG(SHOAL_LOG_DEBUG, subsys, __VA_ARGS__)
#define SHOAL_TRACE(subsys, ...) SHOAL_LOG(SHOAL_LOG_TRACE, subsys, __VA_ARGS__)

#endif
