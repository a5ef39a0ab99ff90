/* What `shoal train --preemptible` and the live controller (`shoal sched
 * serve`) agree on: the exit status of a run that stopped on a checkpoint
 * request after writing its checkpoint ("checkpointed, requeue me";
 * EX_TEMPFAIL). Any other status is the job's own end: 0 = finished. */
#ifndef SHOAL_TOOLS_LIVE_H
#define SHOAL_TOOLS_LIVE_H

#define SHOAL_EXIT_REQUEUE 75
#define SHOAL_EXIT_REQUEUE_STR "75"

#endif
