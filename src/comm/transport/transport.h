/* The transport interface: how the point-to-point engine (p2p/engine.c)
 * moves the bytes of a connection, and the engine's services a transport
 * calls back. The engine names no transport: it calls these slots.
 *
 * Every connection is a TCP socket of the world's mesh (bootstrap/mesh.c);
 * a transport may move the payload another way (shared memory rings between
 * same-host ranks) but the socket stays open and carries the abort and
 * goodbye notices, and its hang-up is how a dead peer shows, for every
 * transport. Implementations: tcp.c (shoal__tcp_transport), shm_*.c
 * (shoal__shm_transport). Included by comm_impl.h. */
#ifndef SHOAL_COMM_TRANSPORT_H
#define SHOAL_COMM_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "comm/p2p/p2p.h"

typedef struct shoal__world shoal__world_t;
typedef struct shoal__conn shoal__conn_t;

#define SHOAL__MAX_TRANSPORTS 4

typedef struct shoal__transport {
  const char *name;
  /* Move bytes of req (the head of conn's queue). 1: req complete; 0: would
   * block; < 0: failed (status; the message is already recorded). */
  int  (*send_progress)(shoal__world_t *w, shoal__conn_t *conn, shoal__req_t *req);
  int  (*recv_progress)(shoal__world_t *w, shoal__conn_t *conn, shoal__req_t *req);
  /* Best-effort notice (abort/goodbye) then close. */
  void (*shutdown)(shoal__world_t *w, shoal__conn_t *conn, int wop, const char *text);
  /* Copy the next bytes of conn's incoming stream without consuming them
   * (recv(MSG_PEEK | MSG_DONTWAIT) semantics: > 0 bytes, 0 hang-up, < 0 with
   * errno, EAGAIN when nothing is there). */
  ssize_t (*peek)(shoal__world_t *w, shoal__conn_t *conn, void *buf, size_t cap);
  /* Optional: 1 if the peer's process is known to have exited (its socket
   * may outlive it, shared with a child), else 0. */
  int  (*peer_gone)(shoal__world_t *w, shoal__conn_t *conn);
  /* Optional wait hook, for transports whose arriving data does not wake
   * poll() on the sockets. The engine calls it (for each such transport in
   * use, shoal__world_add_waiter) before it blocks in poll() for up to
   * wait_ms: the transport spins, yields or sleeps its own way while its
   * requests are pending and returns the poll timeout to use next (0: drive
   * the connections again without blocking). idle != 0: no request is
   * posted, the caller waits for any incoming message (recv_any). */
  int  (*wait)(shoal__world_t *w, int wait_ms, int idle);
} shoal__transport_t;

extern const shoal__transport_t shoal__tcp_transport;
/* Send an abort or goodbye notice (wop; none when 0 or !boundary) and close the
 * write side: the TCP transport's shutdown, also used by transports whose
 * notices travel over the pair's TCP connection. */
void shoal__tcp_close(shoal__world_t *w, shoal__conn_t *conn, int wop, const char *text, int boundary);

/* ---- services of the engine (p2p/engine.c) to the transports ---- */
void shoal__hdr_pack(unsigned char *h, int opcode, int dtype, int redop, uint64_t comm_id, uint32_t seq, int32_t tag,
                     uint64_t count, uint64_t bytes);
/* Called by a transport once a receive's header is complete: 0 to go on
 * with the payload, or a failure status (message recorded, world aborted). */
int  shoal__recv_header(shoal__world_t *w, shoal__conn_t *conn, shoal__req_t *req);
/* Called by a transport on a broken connection: records the failure. */
int  shoal__conn_broken(shoal__world_t *w, shoal__conn_t *conn, shoal__req_t *req, int status, const char *why);
/* A connection with no receive posted is readable or hung up: consume a
 * goodbye, fail on an abort notice or an unannounced close, else note an
 * early message. 0 or a failure status. */
int  shoal__conn_idle_event(shoal_comm_t *c, const shoal__op_t *op, shoal__conn_t *conn, short revents);

#endif
