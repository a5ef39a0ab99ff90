/* Socket helpers for the bootstrap (store, handshakes): IPv4 TCP, every
 * blocking step bounded by a deadline. The data path (tcp.c) does its own
 * nonblocking I/O. */
#ifndef SHOAL_COMM_SOCK_H
#define SHOAL_COMM_SOCK_H

#include <netinet/in.h>
#include <stddef.h>

#include "core/clock.h"
#include "core/wire.h" /* the wire's little-endian integers */

/* "a.b.c.d:port" of a socket address. */
void shoal__sock_addr_str(const struct sockaddr_in *a, char *out, size_t cap);
/* Resolve host (name or dotted quad) to an IPv4 address. SHOAL_ERR_NOT_FOUND names the host. */
int  shoal__sock_resolve(const char *host, struct in_addr *out);
int  shoal__sock_set_nonblock(int fd);
/* TCP_NODELAY and SO_SNDBUF/SO_RCVBUF = bufsize (0: leave the kernel's). */
void shoal__sock_tune(int fd, long bufsize);
/* SO_RCVBUF alone (the kernel doubles it, capped at net.core.rmem_max). */
void shoal__sock_set_rcvbuf(int fd, long bytes);
/* TCP congestion control of a peer socket. mode "system" leaves it alone;
 * "auto" replaces bbr (whose pacing without the fq qdisc halves loopback and
 * LAN collective bandwidth here) by cubic, or reno where cubic is not
 * allowed; any other string is an algorithm to set. 0 or a negative error
 * (with the reason in the last error); *used (cap bytes) gets the algorithm
 * in effect either way. */
int  shoal__sock_congestion(int fd, const char *mode, char *used, size_t cap);
/* Bind and listen on ip:port (port 0: ephemeral). *port_out gets the real
 * port. EADDRINUSE becomes SHOAL_ERR_ADDR_IN_USE naming ip:port. */
int  shoal__sock_listen(struct in_addr ip, int port, int *fd_out, int *port_out);
/* Connect to ip:port, retrying refused/unreachable with exponential backoff
 * (10 ms doubling to 1 s) until the deadline. `what` names the target in the
 * error ("the store (rank 0)", "peer 3"). */
int  shoal__sock_connect(struct in_addr ip, int port, shoal__deadline_t dl, const char *what, int *fd_out);
/* One connection attempt, no retry, bounded by the deadline: 0 (*fd_out connected, nonblocking) or the
 * errno (ECONNREFUSED: nothing listens there; ETIMEDOUT: no answer in time). Liveness probes use it. */
int  shoal__sock_try_connect(struct in_addr ip, int port, shoal__deadline_t dl, int *fd_out);
/* Split "a.b.c.d:port" into its parts: 0 or SHOAL_ERR_PROTOCOL. */
int  shoal__sock_parse_addr(const char *s, struct in_addr *ip, int *port);
/* Accept one connection, waiting up to the deadline (fd nonblocking or not). */
int  shoal__sock_accept(int lfd, shoal__deadline_t dl, int *fd_out, struct sockaddr_in *peer);
/* Full blocking read/write with a deadline on a nonblocking socket.
 * Errors: SHOAL_ERR_TIMEOUT, SHOAL_ERR_PEER_CLOSED, SHOAL_ERR_IO (message set,
 * prefixed by `what`). */
int  shoal__sock_write_all(int fd, const void *buf, size_t n, shoal__deadline_t dl, const char *what);
int  shoal__sock_read_all(int fd, void *buf, size_t n, shoal__deadline_t dl, const char *what);

/* Prefix the thread's last error message (copied first: seterr must not
 * format its own buffer into itself). Returns status. */
int  shoal__err_prefix(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
