/* Host topology of a world: which ranks share a host (same host name and
 * boot id, from the registrations at rendezvous) and, for any communicator
 * of the world, the layout it has on those hosts. Built once per world
 * (shoal__topo_init) and read by the shared-memory segment (its members are
 * this rank's host group), the collectives (which algorithms apply) and the
 * tuning profile (its key and its per-host-pair link matrix). */
#ifndef SHOAL_COMM_TOPO_H
#define SHOAL_COMM_TOPO_H

#include <stdint.h>

#include "shoal/comm.h"

struct shoal__world;

typedef struct shoal__topo {
  int nhosts;
  int *host_of;   /* world rank -> host index; hosts are numbered in the order of their lowest world rank */
  int *host_size; /* host index -> ranks of the world on it */
  /* racks (the registrations' rack names): host index -> rack index, numbered in the order of their lowest
   * host; nracks 0 (rack_of all 0) when any host's rack is unknown: no uplink is modelled */
  int nracks;
  int *rack_of;
  /* this rank's host group */
  int nlocal, lrank; /* its size, this rank's index in it */
  int *l2w;          /* local index -> world rank */
  int *w2l;          /* world rank -> local index, or -1 on other hosts */
  /* cache of shoal__topo_layout for the last communicator asked about (one thread per world) */
  uint64_t cache_id;
  int cache_nh, cache_maxq, cache_whole;
} shoal__topo_t;

/* From w->peers (host name + boot id); w->topo is set. 0 or SHOAL_ERR_NOMEM. */
int  shoal__topo_init(struct shoal__world *w);
void shoal__topo_free(struct shoal__world *w);

/* The layout of c on the hosts: the number of hosts it spans, the most ranks
 * it has on one host, and whether every host group it touches lies entirely
 * inside c (then per-host shared-memory steps, which involve the whole group,
 * may run on c). */
typedef struct shoal__layout {
  int nhosts, maxq, whole;
} shoal__layout_t;
void shoal__topo_layout(const shoal_comm_t *c, shoal__layout_t *out);

/* c may run the shared-memory collectives (shm, hier, the shm barrier): its
 * host groups are whole and, where a group has several ranks, SHOAL_SHM is on
 * (the same on every rank: decisions use it, not whether this rank mapped a
 * segment, so that all ranks agree). *nhosts: the hosts c spans. */
int  shoal__topo_shm_ok(const shoal_comm_t *c, int *nhosts);

#endif
