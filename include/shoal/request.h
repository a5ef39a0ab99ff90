/* shoal non-blocking collectives.
 *
 * shoal_iallreduce() and the other shoal_i* calls check their arguments,
 * queue the operation and return at once with a request; the operation runs
 * on the communicator's progress thread, so it advances while the caller
 * computes (no polling needed). shoal_test() asks whether a request is
 * complete, shoal_wait() blocks until it is (running it itself if the
 * progress thread has not started it yet).
 *
 * Semantics:
 * - A request behaves exactly like the blocking call made at the moment it
 *   was issued: same algorithms, same results (bit for bit), same wire
 *   traffic. All ranks must issue collectives on a communicator in the same
 *   order, blocking or not.
 * - Requests on the communicators of one world (a communicator and those
 *   split from it) run one at a time, in the order they were issued, so
 *   several requests in flight complete in issue order (except consecutive
 *   isend/irecv requests, which run together: see shoal_isend).
 * - Each operation gets the communicator's deadline (SHOAL_TIMEOUT) when it
 *   starts running; a request queued behind others waits for them first.
 *   Errors are those of the blocking call: the status is returned by
 *   shoal_test/shoal_wait, and shoal_last_error() (on the waiting thread) and
 *   shoal_comm_errmsg() name the rank, the peer, the operation and its
 *   sequence number. After an error the communicator is aborted: requests
 *   still queued fail with SHOAL_ERR_ABORTED.
 * - A blocking call (collective, send/recv, split, destroy) on any
 *   communicator of the world while requests are pending first waits for
 *   them to complete, then runs: it is ordered after them, as if it had been
 *   queued. Buffers of a pending request must stay valid and untouched
 *   until it completes.
 * - The progress thread is created by the first request of a world and
 *   joined when the world's last communicator is destroyed; it inherits the
 *   caller's CPU affinity (a rank bound to one core shares it with its
 *   communication).
 *
 * Request lifetime: shoal_wait, shoal_waitall, and shoal_test reporting
 * completion free the request and set the pointer to NULL. shoal_request_free
 * gives a request up without waiting: the operation still runs in order; its
 * status is dropped (an error still aborts the communicator, so later calls
 * report it). Complete or free every request before destroying its
 * communicator (destroy waits for the operations, but a request handle
 * used afterwards refers to freed memory). Output parameters (*req) are
 * written only on success. */
#ifndef SHOAL_REQUEST_H
#define SHOAL_REQUEST_H

#include <stddef.h>

#include "shoal/comm.h"
#include "shoal/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct shoal_request shoal_request_t;

int shoal_iallreduce(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t count, shoal_dtype_t dtype,
                     shoal_redop_t op, shoal_request_t **req);
int shoal_ibroadcast(shoal_comm_t *c, void *buf, size_t count, shoal_dtype_t dtype, int root, shoal_request_t **req);
int shoal_ireduce(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t count, shoal_dtype_t dtype,
                  shoal_redop_t op, int root, shoal_request_t **req);
int shoal_ireduce_scatter(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t recvcount, shoal_dtype_t dtype,
                          shoal_redop_t op, shoal_request_t **req);
int shoal_iallgather(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t sendcount, shoal_dtype_t dtype,
                     shoal_request_t **req);
int shoal_ibarrier(shoal_comm_t *c, shoal_request_t **req);
int shoal_igather(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t sendcount, shoal_dtype_t dtype, int root,
                  shoal_request_t **req);
int shoal_iscatter(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t recvcount, shoal_dtype_t dtype,
                   int root, shoal_request_t **req);
int shoal_ialltoall(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t count, shoal_dtype_t dtype,
                    shoal_request_t **req);
/* The four arrays are copied at issue; the buffers must stay valid until completion. */
int shoal_ialltoallv(shoal_comm_t *c, const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                     void *recvbuf, const size_t *recvcounts, const size_t *rdispls, shoal_dtype_t dtype,
                     shoal_request_t **req);
/* Point to point (the blocking calls' semantics: in order per pair, the tag
 * must match). Unlike the collectives, the isend and irecv requests at the
 * head of the queue run together, and those issued while they are in flight
 * join them, so the sends and receives of an exchange can be issued in any
 * order on either side; a collective issued after them waits for them. */
int shoal_isend(shoal_comm_t *c, const void *buf, size_t count, shoal_dtype_t dtype, int peer, int tag,
                shoal_request_t **req);
int shoal_irecv(shoal_comm_t *c, void *buf, size_t count, shoal_dtype_t dtype, int peer, int tag,
                shoal_request_t **req);

/* Without blocking: *done = 0 if *req is still queued or running (returns 0);
 * else *done = 1, the request is freed, *req = NULL, and the operation's
 * status is returned. */
int  shoal_test(shoal_request_t **req, int *done);
/* Block until *req completes; free it, *req = NULL; the operation's status.
 * A collective still queued, first in line with nothing running, is run by
 * the waiting thread itself (as the blocking call would be; the progress
 * thread takes the requests issued after it once it is done): the same
 * operation, without the two thread wake-ups. */
int  shoal_wait(shoal_request_t **req);
/* Wait for all n (NULL entries skipped); every one is freed and set to NULL.
 * Returns 0, or the status of the first request (in array order) that failed. */
int  shoal_waitall(int n, shoal_request_t **reqs);
/* Give up the request without waiting (see above); NULL is a no-op. */
void shoal_request_free(shoal_request_t *req);
/* Call fn(arg) once, when *r's operation has finished: on the thread that ran
 * it, right after it and right before the request is marked complete (the
 * progress thread, or the thread whose shoal_wait ran it; fn must be quick and
 * must not call into shoal: hand the news to a thread of yours), or at once on
 * this thread if the operation has finished already. The functions of a
 * world's requests are called in the order the operations finish; a
 * shoal_wait/shoal_test on another thread returns the request's status once
 * fn has returned. A freed request (shoal_request_free) still calls fn. One
 * function per request: a second is SHOAL_ERR_INVALID. For bindings that
 * complete futures (the torch backend). */
int  shoal_request_notify(shoal_request_t *r, void (*fn)(void *arg), void *arg);
/* Requests issued on c's world and not yet complete. */
int  shoal_comm_pending(const shoal_comm_t *c);

#ifdef __cplusplus
}
#endif
#endif
