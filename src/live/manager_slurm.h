/* The Slurm cluster manager: the interface of manager.h over Slurm's own
 * commands (22.05 or newer), each run with a deadline (core/command.h):
 *   nodes     sinfo --json (racks: the level-0 switches of scontrol show topology)
 *   jobs      squeue --json -t all
 *   start     scontrol update NumNodes, NumTasks, NumCPUs, ReqNodeList, Gres, StartTime=now; release
 *   stop      scancel --signal=USR1 --batch (checkpoint), --signal=KILL JOB.0 (tasks), --signal=KILL (job)
 *   requeue   scontrol requeuehold;  hold / release: scontrol hold / release
 *   resize    scontrol update NodeList (shrink only: Slurm's grow is not used)
 *   claim     scontrol update AdminComment (only Slurm operators and administrators may set it)
 *   lease     a held beacon job per scope (name shoal-lease, comment shoal-lease:SCOPE:HOLDER) whose
 *             AdminComment carries the renewal time; Slurm's job ids order the beacons, so of two
 *             controllers that start at once the one whose beacon came first holds the lease
 *   shares    sshare (associations and fair-share factors; accounting with slurmdbd)
 *   submit    sbatch with the batch script of docs/live.md
 * Slurm's configuration comes from the environment (SLURM_CONF) as for its commands. */
#ifndef SHOAL_LIVE_MANAGER_SLURM_H
#define SHOAL_LIVE_MANAGER_SLURM_H

#include "live/manager.h"

#define SHOAL_LIVE_SLURM_DEADLINE_S 20.0
/* a grow waits this long at most for the job's requeue (Slurm's KillWait and clean-up) */
#define SHOAL_LIVE_SLURM_GROW_WAIT_S 30

int shoal__live_slurm_create(shoal_live_manager_t *out);

#endif
