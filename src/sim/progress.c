/* A progress bar on stderr, drawn only on a terminal and at most 10 times/s. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "sim/sim.h"

void shoal__progress_init(shoal_progress_t *p, const char *label, int enabled) {
  memset(p, 0, sizeof *p);
  p->enabled = enabled && isatty(STDERR_FILENO);
  snprintf(p->label, sizeof p->label, "%s", label);
}

void shoal__progress_cb(void *arg, long done, long total) {
  shoal_progress_t *p = arg;
  if (!p->enabled || total <= 0) return;
  double now = shoal__now_s();
  if (now - p->last_draw < 0.1 && done < total) return;
  p->last_draw = now;
  int width = 40, fill = (int)((double)done / (double)total * width);
  char bar[64];
  for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
  bar[width] = 0;
  fprintf(stderr, "\r%-10s [%s] %5.1f%% %ld/%ld jobs", p->label, bar, 100.0 * (double)done / (double)total, done, total);
  fflush(stderr);
}

void shoal__progress_done(shoal_progress_t *p) {
  if (!p->enabled) return;
  fprintf(stderr, "\r%*s\r", 80, "");
  fflush(stderr);
}
