/* The progress engine behind shoal/request.h (request.c): one thread per
 * world runs queued non-blocking collectives in issue order. comm.c and
 * p2p.c call these two hooks so that blocking calls and destruction are
 * ordered after pending requests. */
#ifndef SHOAL_COMM_ASYNC_H
#define SHOAL_COMM_ASYNC_H

#include <stdint.h>

struct shoal__world;

/* Wait until no request of w is queued or running. No-op on the progress
 * thread itself and when w never had a request. */
void shoal__async_quiesce(struct shoal__world *w);
/* Quiesce, then stop and join the progress thread (world destruction). */
void shoal__async_stop(struct shoal__world *w);
/* Is `tag` (shoal__thread_tag of a thread) w's progress thread? It runs the requests of the application's
 * threads: a call while it is inside one is not another application thread's (the thread rule, comm.h). */
int shoal__async_is(const struct shoal__world *w, uintptr_t tag);

#endif
