/* A world's life: its object, the owners started once its mesh stands (host groups, the shared-memory
 * segment, the tuning profile), communicator objects over it, and its end. Above the collectives, the
 * tuning and the non-blocking requests (it starts and stops them); below the code that makes worlds
 * (comm.c: shoal_comm_init and split; elastic/: shrink, grow, join). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/async.h"
#include "comm/bootstrap/door.h"
#include "comm/coll/algo.h"
#include "comm/comm_impl.h"
#include "comm/topo.h"
#include "comm/transport/shm.h"
#include "comm/tune/tune.h"

shoal__world_t *shoal__world_new(int rank, int size) {
  shoal__world_t *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->rank = rank;
  w->size = size;
  w->listen_fd = -1;
  w->door_fd = -1;
  w->wake_fd = -1;
  w->conns = calloc((size_t)size, sizeof *w->conns);
  w->peers = calloc((size_t)size, sizeof *w->peers);
  w->pfd = calloc((size_t)size, sizeof *w->pfd);
  w->pfd_conn = calloc((size_t)size, sizeof *w->pfd_conn);
  w->cfg = calloc(1, sizeof *w->cfg);
  if (!w->conns || !w->peers || !w->pfd || !w->pfd_conn || !w->cfg) {
    free(w->conns);
    free(w->peers);
    free(w->pfd);
    free(w->pfd_conn);
    free(w->cfg);
    free(w);
    return NULL;
  }
  for (int i = 0; i < size; i++) {
    w->conns[i].fd = -1;
    w->conns[i].zombie_fd = -1;
    w->conns[i].peer = i;
    w->conns[i].tp = &shoal__tcp_transport;
  }
  w->algo_name = shoal_algo_name;
  return w;
}

void shoal__world_free(shoal__world_t *w) {
  shoal__async_stop(w);
  shoal__flowmon_detach(w);
  shoal__door_finish(w);
  shoal__world_goodbye(w);
  shoal__shm_detach(w);
  shoal__tune_free(w);
  shoal__topo_free(w);
  for (int i = 0; i < w->size; i++) {
    if (w->conns[i].fd >= 0) close(w->conns[i].fd);
    if (w->conns[i].zombie_fd >= 0) close(w->conns[i].zombie_fd);
  }
  if (w->listen_fd >= 0) close(w->listen_fd);
  if (w->door_fd >= 0) close(w->door_fd);
  if (w->wake_fd >= 0) close(w->wake_fd);
  free(w->cfg);
  free(w->conns);
  free(w->peers);
  free(w->pfd);
  free(w->pfd_conn);
  free(w);
}

shoal_comm_t *shoal__comm_new(shoal__world_t *w, uint64_t id, int rank, int size, double timeout_s) {
  shoal_comm_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->wranks = malloc((size_t)size * sizeof *c->wranks);
  if (!c->wranks) {
    free(c);
    return NULL;
  }
  c->w = w;
  c->id = id;
  c->rank = rank;
  c->size = size;
  c->timeout_s = timeout_s;
  w->refs++;
  return c;
}

int shoal__world_start(shoal_comm_t *c) {
  shoal__world_t *w = c->w;
  for (int i = 0; i < c->size; i++) c->wranks[i] = i;
  /* the world's three owners, in order: host groups; the shared-memory segment of this rank's group
   * (its connections switch to the shm transport); the tuning profile (cache lookup or measurement).
   * Their set-up traffic does not count: users' sequence numbers start at 1. */
  uint32_t seq0 = c->seq;
  int rc;
  /* the flow monitor after the shm switch: only the connections left on TCP are flows */
  if ((rc = shoal__topo_init(w)) || (rc = shoal__shm_attach(c)) || (rc = shoal__tune_init(c)) ||
      (rc = shoal__flowmon_attach(w)))
    return rc;
  /* The set-up's last step: when one rank leaves it, every rank is past the mesh and the owners. A shrink
   * called at once then finds every listener out of the mesh's hands (a probe the mesh took in would pass
   * for a listener that closed: a live rank left out, a split world), and its revoke reaches a rank only
   * in this barrier, which every rank has entered: that rank's set-up is complete, and its communicator
   * comes back revoked (its first call fails naming the shrinking rank, and it shrinks too). */
  if (c->size > 1 && (rc = shoal_barrier(c)) && !w->peer_revoked) return rc;
  c->seq = seq0;
  if (w->shm) w->shm->user_step0 = w->shm->step; /* the same on every member: set-up ran the same steps */
  return 0;
}

void shoal_comm_destroy(shoal_comm_t *c) {
  if (!c) return;
  shoal__world_t *w = c->w;
  if (w->async) shoal__async_quiesce(w); /* pending requests may use c */
  free(c->wranks);
  free(c);
  if (--w->refs == 0) shoal__world_free(w);
}

