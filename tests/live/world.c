/* The test world of tests/live (world.h). */
#include "world.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../runner.h"
#include "live/params.h"

static double world_clock(void *arg) { return shoal__live_mem_now(arg); }

void world_init(world_t *w, int nodes, int gpus, const char *policy) {
  static int seq;
  memset(w, 0, sizeof *w);
  w->t = 1000000;
  CHECK_OK(shoal__live_mem_create(w->t, &w->m));
  for (int i = 0; i < nodes; i++) {
    char name[16];
    snprintf(name, sizeof name, "h%d", i);
    CHECK_OK(shoal__live_mem_add_node(w->m, name, gpus, 4, 0, "shoal"));
  }
  w->mgr = shoal__live_mem_manager(w->m);
  snprintf(w->journal, sizeof w->journal, "/tmp/shoal-live-test-%d-%d.journal", (int)getpid(), ++seq);
  snprintf(w->logpath, sizeof w->logpath, "/tmp/shoal-live-test-%d-%d.log", (int)getpid(), seq);
  snprintf(w->policy, sizeof w->policy, "%s", policy);
  unlink(w->journal);
  w->log = fopen(w->logpath, "w+");
  CHECK(w->log != NULL);
  shoal__live_config_default(&w->cfg);
  w->cfg.policy = w->policy;
  w->cfg.journal = w->journal;
  w->cfg.partition = "shoal";
  w->cfg.grace = 2;
  w->cfg.clock = world_clock;
  w->cfg.clock_arg = w->m;
  w->cfg.log = w->log;
}

int world_start(world_t *w) {
  w->rc = shoal__live_ctl_create(&w->cfg, w->mgr, &w->L);
  if (w->rc) {
    fprintf(w->log, "create: %s\n", shoal_last_error());
    fflush(w->log);
    w->L = NULL;
  }
  return w->rc;
}

void world_crash(world_t *w) {
  shoal__live_ctl_abandon(w->L);
  w->L = NULL;
}

int world_step(world_t *w, double dt) {
  double now = shoal__live_mem_now(w->m); /* a slow call moved the manager's clock on */
  if (now > w->t) w->t = now;
  w->t += dt;
  shoal__live_mem_advance(w->m, w->t);
  if (w->L) w->rc = shoal__live_ctl_tick(w->L);
  return w->rc;
}

void world_run(world_t *w, double seconds, int until) {
  for (double s = 0; s < seconds; s += 0.5) {
    world_step(w, 0.5);
    if (w->rc) break;
    if (until > 0 && w->L) {
      int seen, ended;
      shoal__live_ctl_counts(w->L, &seen, &ended);
      if (ended >= until) break;
    }
  }
}

long world_submit_comment(world_t *w, const char *comment, double work, int checkpoints) {
  shoal_live_mem_behaviour_t b = {.work = work, .checkpoints = checkpoints, .ckpt_s = 1};
  long id = shoal__live_mem_submit(w->m, comment, "shoal", "research", "ann", 1, &b);
  CHECK(id > 0);
  return id;
}

long world_submit(world_t *w, int gpus, int min, int max, double work, int checkpoints) {
  shoal_live_params_t p = {.gpus = gpus, .min = min, .max = max, .work = work};
  snprintf(p.model, sizeof p.model, "resnet50");
  char c[256];
  CHECK_OK(shoal__live_params_format(&p, c, sizeof c));
  return world_submit_comment(w, c, work, checkpoints);
}

const char *world_log(world_t *w) {
  static char buf[1 << 20];
  fflush(w->log);
  FILE *f = fopen(w->logpath, "r");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = 0;
  return buf;
}

int world_logged(world_t *w, const char *text) { return strstr(world_log(w), text) != NULL; }

int world_loggedf(world_t *w, const char *fmt, ...) {
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  return world_logged(w, text);
}

void world_second(world_t *w, const char *id, shoal_live_config_t *cfg, char *journal, size_t cap) {
  snprintf(journal, cap, "%s.%s", w->journal, id);
  unlink(journal);
  *cfg = w->cfg;
  cfg->journal = journal;
  cfg->id = id;
}

const char *world_nodes(world_t *w, long id) {
  static shoal_live_mem_stats_t st;
  CHECK_OK(shoal__live_mem_stats(w->m, id, &st));
  return st.nodes;
}

void world_fini(world_t *w) {
  shoal__live_ctl_destroy(w->L);
  w->L = NULL;
  shoal__live_mem_destroy(w->m);
  if (w->log) fclose(w->log);
  unlink(w->journal);
  unlink(w->logpath);
}

int world_runs(world_t *w, long id) {
  shoal_live_mem_stats_t st;
  CHECK_OK(shoal__live_mem_stats(w->m, id, &st));
  return st.runs;
}

int world_completions(world_t *w, long id) {
  shoal_live_mem_stats_t st;
  CHECK_OK(shoal__live_mem_stats(w->m, id, &st));
  return st.completions;
}
