/* Rebuilding communicators while a job runs (docs/comm.md "Shrink and grow"):
 *   shrink.c  the live ranks of a communicator agree on a new world without the lost ones
 *   grow.c    shoal_comm_grow, which admits the processes waiting at the door (bootstrap/door.c), and
 *             shoal_comm_join, a new process's way in
 *   reform.c  what both share: a fresh listener, registrations, building a world from them
 * A new world never reuses the old one's connections (an abort shuts them down, and a stream that broke
 * mid-message cannot be resynchronized): it gets its own listeners and its own full mesh. */
#ifndef SHOAL_COMM_ELASTIC_H
#define SHOAL_COMM_ELASTIC_H

#include <stdint.h>

#include "comm/bootstrap/door.h"
#include "comm/comm_impl.h"
#include "core/clock.h"

/* Seconds a liveness probe waits for the peer's kernel to answer a connection attempt. A process that is
 * gone is refused at once (its host answers); silence this long means its host or the network is gone. */
#define SHOAL__PROBE_S 5.0

/* A fresh listener on `ip` (the address this rank advertises), and the registration that names it; never
 * on an address another rank of `was` (the world being rebuilt, or NULL) advertised. */
int shoal__reform_listen(const shoal__boot_cfg_t *cfg, struct in_addr ip, const shoal__world_t *was, int *fd_out,
                         shoal__reg_t reg);

/* Build world `id` of n members from their registrations (regs[rank] is this rank's, `lfd` its listener;
 * the world takes the listener over): the full mesh, then the owners (topology, shm segment, tuning
 * profile). Settings come from `tmpl` (a world of this process, or NULL with *cfg given); when this rank
 * is rank 0 of both, tmpl's door moves to the new world (it holds the master port). *out is the
 * world communicator whenever the world could be allocated: on a failure (a member died meanwhile, ...)
 * it is already aborted with the error, which is also the return value. */
int shoal__reform_build(shoal__world_t *tmpl, const shoal__boot_cfg_t *cfg, uint64_t id, int rank, int n,
                        shoal__reg_t *regs, int lfd, double timeout_s, shoal__deadline_t dl, shoal_comm_t **out);

/* The calling thread owns w for a whole shrink or grow (another thread's call on it is refused), even
 * when w is aborted (shoal__op_begin would refuse). 0, or SHOAL_ERR_UNSUPPORTED naming the other call. */
int  shoal__reform_own(shoal__world_t *w, const char *what);
void shoal__reform_release(shoal__world_t *w);

#endif
