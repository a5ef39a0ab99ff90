/* What the journal says the controller did, job by job: the records (payloads
 * of journal.h's lines) and their replay.
 *   ctl ID epoch T                 first record: the controller's identity and clock origin
 *   arrive JOB T                   the job became the controller's (T: arrival on its clock)
 *   start JOB T NODE:W,NODE:W      a placement given (before the manager is asked)
 *   run JOB T                      the manager shows the run started (T: when it did)
 *   stop JOB T WHY                 the placement taken back (before the manager is asked); WHY is
 *                                  preempt, resize, drain, foreign (its nodes were taken), outside
 *                                  (held by someone else), own (it checkpointed unasked) or
 *                                  unstarted (a start that never reached the manager)
 *   retry JOB T                    it failed on its own and goes again from its checkpoint
 *   end JOB T FINAL                it ended for good (COMPLETED, a failure with its reason, cancelled)
 * Times are seconds on the controller's clock (wall clock minus the epoch). */
#ifndef SHOAL_LIVE_REPLAY_H
#define SHOAL_LIVE_REPLAY_H

#include "live/journal.h"
#include "live/manager.h"

typedef struct shoal_live_jjob {
  long sid;
  int arrived;
  double arrival;
  int started, ran;            /* a start / run record exists */
  double first_start, first_run, last_start;
  int open;                    /* its last start is not closed by a stop or retry */
  int starts, runs, preempts, resizes, retries;
  char last_stop[16];          /* WHY of its last stop, "" if none */
  double held_s;               /* seconds its closed starts lasted (attained service) */
  int n;                       /* its last placement */
  char (*node)[SHOAL_LIVE_NAME];
  int *workers;
  int ended;
  double end;
  char final[96];
} shoal_live_jjob_t;

typedef struct shoal_live_replay {
  char id[64];                 /* the controller's identity ("" if no ctl record) */
  double epoch;                /* 0 if no ctl record */
  int n, cap;
  shoal_live_jjob_t *job;
  char **payload;              /* every valid record, in order (to rewrite a damaged journal) */
  int npayload, cappayload;
} shoal_live_replay_t;

/* Read and replay the journal at path. Records that pass their checks but say nothing this version reads are
 * damage too (added to scan). 0, or a negative status when the file cannot be read. */
int shoal__live_replay(const char *path, shoal_live_replay_t *r, shoal_live_journal_scan_t *scan);
void shoal__live_replay_free(shoal_live_replay_t *r);
shoal_live_jjob_t *shoal__live_replay_find(const shoal_live_replay_t *r, long sid);
/* preemptions the journal records for a job: its stops for a preemption or a drain */
int shoal__live_jjob_preemptions(const shoal_live_jjob_t *e);

#endif
