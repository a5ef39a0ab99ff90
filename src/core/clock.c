#include "core/clock.h"

#include <stdint.h>
#include <time.h>

uint64_t shoal__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double shoal__now_s(void) { return (double)shoal__now_ns() * 1e-9; }

double shoal__wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

shoal__deadline_t shoal__deadline_in(double seconds) {
  shoal__deadline_t d = {0};
  if (seconds <= 0) seconds = 0;
  d.at_ns = shoal__now_ns() + (uint64_t)(seconds * 1e9);
  if (d.at_ns == 0) d.at_ns = 1;
  return d;
}

int shoal__deadline_ms_left(shoal__deadline_t d) {
  if (d.at_ns == 0) return -1;
  uint64_t now = shoal__now_ns();
  if (now >= d.at_ns) return 0;
  uint64_t ms = (d.at_ns - now + 999999) / 1000000;
  return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

int shoal__deadline_passed(shoal__deadline_t d) { return d.at_ns != 0 && shoal__now_ns() >= d.at_ns; }

void shoal__sleep_s(double s) {
  if (s <= 0) return;
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}
