/* Monotonic clock and deadlines. */
#ifndef SHOAL_CORE_CLOCK_H
#define SHOAL_CORE_CLOCK_H

#include <stdint.h>

uint64_t shoal__now_ns(void);          /* CLOCK_MONOTONIC */
double   shoal__now_s(void);
double   shoal__wall_s(void);          /* CLOCK_REALTIME, for logs */

/* Deadline as an absolute monotonic time in ns; 0 means "none". */
typedef struct { uint64_t at_ns; } shoal__deadline_t;
shoal__deadline_t shoal__deadline_in(double seconds);
/* Milliseconds left (>= 0), capped at INT32_MAX; -1 when there is no deadline. */
int shoal__deadline_ms_left(shoal__deadline_t d);
int shoal__deadline_passed(shoal__deadline_t d);
void shoal__sleep_s(double s);

#endif
