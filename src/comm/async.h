/* The progress engine behind shoal/request.h (request.c): one thread per
 * world runs queued non-blocking collectives in issue order. The world's
 * lifecycle (world.c) and shrink call these so that destruction and a rebuild
 * are ordered after pending requests; the point-to-point engine, a layer
 * below, reaches the quiesce through the hook request.c sets in the world
 * (w->async_quiesce). */
#ifndef SHOAL_COMM_ASYNC_H
#define SHOAL_COMM_ASYNC_H

struct shoal__world;

/* Wait until no request of w is queued or running. No-op on the progress
 * thread itself and when w never had a request. */
void shoal__async_quiesce(struct shoal__world *w);
/* Quiesce, then stop and join the progress thread (world destruction). */
void shoal__async_stop(struct shoal__world *w);

#endif
