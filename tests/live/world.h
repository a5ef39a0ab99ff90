/* A controller on the in-memory manager, stepped by the test: the manager's
 * clock is the controller's clock, so every behaviour runs without Slurm and
 * without waiting (tests/live). */
#ifndef SHOAL_TESTS_LIVE_WORLD_H
#define SHOAL_TESTS_LIVE_WORLD_H

#include <stdio.h>

#include "live/live.h"
#include "live/manager_mem.h"

typedef struct world {
  shoal_live_mem_t *m;
  shoal_live_manager_t mgr;
  shoal_live_ctl_t *L;
  shoal_live_config_t cfg;
  char journal[128], logpath[128], policy[128];
  FILE *log;
  double t;
  int rc;                  /* the last create or tick */
} world_t;

/* n nodes h0..h{n-1} with `gpus` GPUs each (and 4 CPUs), partition "shoal", one rack; policy `policy` */
void world_init(world_t *w, int nodes, int gpus, const char *policy);
/* a controller on it (w->cfg as set); its status is w->rc */
int world_start(world_t *w);
/* the controller goes away without a word (as a kill -9: its lease stays until it runs out) */
void world_crash(world_t *w);
/* dt seconds pass, then one round */
int world_step(world_t *w, double dt);
/* rounds every 0.5 s for `seconds`, or until `until` jobs ended (0: no limit) */
void world_run(world_t *w, double seconds, int until);
/* a shoal job: workers, elastic range, work in worker-seconds, checkpoints or not */
long world_submit(world_t *w, int gpus, int min, int max, double work, int checkpoints);
/* the same with a comment of its own */
long world_submit_comment(world_t *w, const char *comment, double work, int checkpoints);
/* everything the controller logged so far (static buffer) */
const char *world_log(world_t *w);
/* 1 if the log holds the text */
int world_logged(world_t *w, const char *text);
/* the same for a formatted text (a job's id in it) */
int world_loggedf(world_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* the log must hold the formatted text; the failure shows the whole log */
#define CHECK_LOGGED(w, ...) CHECK_MSG(world_loggedf((w), __VA_ARGS__), "not logged: %s", world_log(w))
/* a second controller's configuration: w's, with identity `id` and a journal of its own (path in journal) */
void world_second(world_t *w, const char *id, shoal_live_config_t *cfg, char *journal, size_t cap);
/* the nodes the job runs (or last ran) on, "h0,h1" (static buffer) */
const char *world_nodes(world_t *w, long id);
void world_fini(world_t *w);
/* the job's runs and completions in the manager */
int world_runs(world_t *w, long id);
int world_completions(world_t *w, long id);

#endif
