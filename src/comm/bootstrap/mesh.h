/* Full-mesh connection setup with the peer handshake (docs/comm.md):
 * rank r connects to every rank below it and accepts from every rank above. */
#ifndef SHOAL_COMM_MESH_H
#define SHOAL_COMM_MESH_H

#include "comm/bootstrap/auth.h"
#include "comm/comm_impl.h"
#include "core/clock.h"

/* sockbuf: SO_SNDBUF/SO_RCVBUF of every peer socket; rcvbuf_remote (> 0): SO_RCVBUF of the sockets
 * to peers on other hosts instead (SHOAL_SOCKET_RCVBUF_REMOTE, docs/comm.md); cc: SHOAL_TCP_CONGESTION
 * (see shoal__sock_congestion). */
int shoal__mesh_connect(shoal__world_t *w, int listen_fd, const shoal__authkey_t *key, long sockbuf,
                        long rcvbuf_remote, const char *cc, shoal__deadline_t dl);

#endif
