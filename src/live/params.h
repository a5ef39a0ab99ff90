/* A job's shoal parameters as they travel in the manager's comment field:
 *     shoal:gpus=N:min=A:max=B[:ps=S][:model=NAME][:work=STEPS][:leave=1][:layout=...]
 * written by `shoal submit`, read by the controller. The convention is the
 * only thing a job needs to opt in (docs/live.md). ps=S makes it a
 * parameter-server job (S servers, rigid: min = max = gpus). leave=1: its
 * tasks leave on request (USR2 to a task: `shoal train --on-failure shrink
 * --leavable`), so the manager can shrink it in place at an iteration boundary
 * (all-reduce jobs only). layout= is the
 * manager's, rewritten at each start of a ps job (the nodes of its workers
 * and servers: manager_slurm.c); the parser keeps it but no decision reads it. */
#ifndef SHOAL_LIVE_PARAMS_H
#define SHOAL_LIVE_PARAMS_H

#include <stddef.h>

#define SHOAL_LIVE_COMMENT_TAG "shoal:"
#define SHOAL_LIVE_WORKERS_MAX 4096

typedef struct shoal_live_params {
  int gpus;                /* workers requested (1 GPU each) */
  int min, max;            /* elastic range; min = max = gpus for a job that cannot resize */
  char model[64];          /* "" when not given */
  double work;             /* worker-steps; 0 = unknown */
  int ps;                  /* parameter servers; 0: an all-reduce job */
  int leave;               /* 1: its tasks leave on request (USR2): shrinkable in place */
  char layout[256];        /* the manager's layout= ("" none) */
} shoal_live_params_t;

/* 1 if the comment opts in (starts with the tag) */
int shoal__live_params_tagged(const char *comment);
/* Parse a tagged comment: 0, or SHOAL_ERR_PARSE with why (the field and what is wrong). */
int shoal__live_params_parse(const char *comment, shoal_live_params_t *out, char *why, size_t cap);
/* 1 if the comment parses and its tasks leave on request (leave=1): a manager's shrink in place; else 0. */
int shoal__live_params_leaves(const char *comment);
/* Check values (ranges, min <= gpus <= max, model characters): 0 or SHOAL_ERR_INVALID with why. */
int shoal__live_params_check(const shoal_live_params_t *p, char *why, size_t cap);
/* The comment for p; 0, or SHOAL_ERR_INVALID if it does not fit. */
int shoal__live_params_format(const shoal_live_params_t *p, char *buf, size_t cap);

#endif
