/* shoal synchronization strategies for any data-parallel training loop.
 *
 * A sync context binds a communicator, a strategy (BSP gradient allreduce,
 * DS-Sync group parameter averaging, local SGD, parameter servers, partial
 * aggregation that does not wait for stragglers) and the
 * model's float32 parameter and gradient buffers, registered as buckets. A
 * training step then reads:
 *
 *     shoal_sync_begin(s, step);              before the forward pass
 *     (partial: if shoal_sync_flags(s) & SHOAL_SYNC_F_SKIP, skip forward and backward)
 *     ... backward; as the gradients of bucket i become final:
 *     shoal_sync_bucket_ready(s, i);          optional: starts bucket i at once
 *     shoal_sync_finish(s);                   gradients are now averaged (bsp),
 *                                             or pushed and new parameters pulled (ps)
 *     if (!(shoal_sync_flags(s) & SHOAL_SYNC_F_SERVER_STEP))
 *       ... the caller's optimizer step on params ...
 *     shoal_sync_end(s);                      parameters averaged (dssync, localsgd)
 *
 * and after the last step shoal_sync_final(s) leaves every worker with the
 * same final model. Before using the communicator between steps, call
 * shoal_sync_pause(s) (needed by partial with ahead > 0; a no-op otherwise). Ranks that are parameter servers (shoal_sync_flags has
 * SHOAL_SYNC_F_SERVER) call shoal_sync_serve(s) instead of training.
 *
 * Everything is plain pointers, integers and strings behind an opaque handle,
 * so that it can be called through ctypes. Every function returns 0 (or the
 * value described) or a negative shoal_status_t; the message is in
 * shoal_sync_errmsg(s) (and shoal_last_error() of the calling thread). After
 * an error the context is failed: every later call returns SHOAL_ERR_ABORTED
 * with the first error, whatever the error was. An error in communication
 * has aborted the communicator as well (comm.h); an argument or configuration
 * error of the context (create, add_bucket, set_lr, calls out of order) fails
 * the context only and leaves the communicator usable, so the peers are not
 * told: a rank whose create failed must exit or tell its peers itself.
 *
 * Threads: the context uses its communicator from one internal communication
 * thread while a step is in flight (between begin and end); the caller must
 * not use that communicator itself during that time. Between steps (after
 * shoal_sync_end returned) the caller may use it, e.g. for evaluation.
 */
#ifndef SHOAL_SYNC_H
#define SHOAL_SYNC_H

#include <stddef.h>

#include "shoal/comm.h"
#include "shoal/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct shoal_sync shoal_sync_t;

/* Create a context on `comm` (all its ranks call this with the same strategy
 * and config: the first step compares them, and a difference fails it on
 * every rank with SHOAL_ERR_MISMATCH naming the ranks). strategy: "bsp", "dssync", "localsgd", "ps" or "partial"
 * (shoal_sync_strategy_name lists them). config: "key=value" pairs separated
 * by spaces or ';' (NULL or "" for the defaults); an unknown key, a key of
 * another strategy or a bad value is an error naming the key.
 *
 *   bsp       overlap=1          allreduce each bucket on the communication
 *                                thread as soon as it is reported ready
 *   dssync    pattern=butterfly  random | butterfly | topo | fixed
 *             k=2                group size (random, fixed), largest radix
 *                                (butterfly, topo's local rounds)
 *             h=0 b=0            topo: bridge period and width (0: defaults)
 *             racks=0,0,1,1      topo: rack id of every rank (required for topo)
 *             seed=1             pattern seed (same on every rank)
 *             global_every=0     > 0: a global average every n steps
 *             overlap=0          1: average the parameters of step t on the
 *                                communication thread while the caller computes
 *                                step t's gradients; end() then applies
 *                                x = avg(x_t) + (x_t+1 - x_t)
 *   localsgd  period=8           average the parameters every `period` steps
 *   partial   window=measured    measured | faithful | fixed: how rank 0 closes
 *                                each step's window (shoal/partial.h); the
 *                                gradients are averaged over the workers
 *                                ready in it, the others relay and receive
 *             tau_ms=0           > 0: the longest wait after the first ready
 *                                worker (fixed: the wait; 0: 100 ms)
 *             min_ready=1        never fewer workers' gradients
 *             carry=1            0 drop late gradients; 1 add them to the next
 *                                step if in time; 2 the next step waits for them
 *             ahead=0            steps the communication thread may run beyond
 *                                the one this worker computes (a long step then
 *                                holds nobody up); > 0 requires shoal_sync_pause
 *                                before using the communicator between steps
 *             skip=1             set SHOAL_SYNC_F_SKIP when a step is under way
 *                                at begin (its gradients could only be late:
 *                                its window closed, or, with min_ready=1, it
 *                                closes before this worker's usual compute)
 *             trees=0 fanout=0   reduction trees (0: the cost model's choice)
 *             log=PATH           per-step CSV (PATH, PATH.rank1, ...)
 *   ps        servers=1          the last `servers` ranks are servers
 *             mode=sync          sync | async | ssp (bounded staleness)
 *             staleness=2        ssp: bound in clocks
 *             lr=0.05 momentum=0.9 wd=0   the servers' SGD (lr: see set_lr)
 *             slow_ms=0          testing: worker 0 sleeps this long per step
             ckpt=PATH          where shoal_sync_checkpoint makes servers write
             resume=PATH        servers start from PATH.server<s>; the workers
                                resume at the checkpoint's step (begin's step)
 */
int shoal_sync_create(shoal_comm_t *comm, const char *strategy, const char *config, shoal_sync_t **out);
void shoal_sync_destroy(shoal_sync_t *s);

/* Register the next bucket: `count` parameters and their gradients (float32,
 * caller-owned, valid until destroy). Returns the bucket index (0, 1, ...).
 * Buckets are reduced in index order, so number them in the order backward
 * completes them (the last layers first, as PyTorch DDP does); a flat model
 * is one bucket. All ranks register the same sizes. Before the first step. */
int shoal_sync_add_bucket(shoal_sync_t *s, float *params, float *grads, size_t count);

/* Strategy properties. */
#define SHOAL_SYNC_F_GRADS 1        /* finish() averages gradients (bsp) */
#define SHOAL_SYNC_F_PARAMS 2       /* end() averages parameters (dssync, localsgd) */
#define SHOAL_SYNC_F_SERVER_STEP 4  /* the servers take the optimizer step; skip yours (ps workers) */
#define SHOAL_SYNC_F_SERVER 8       /* this rank is a parameter server: call shoal_sync_serve */
#define SHOAL_SYNC_F_SKIP 16        /* after begin (partial): this step is under way without this worker;
                                       skip forward and backward, then finish/step/end as usual (computing
                                       anyway is correct, only slower) */
int shoal_sync_flags(const shoal_sync_t *s);

/* The learning rate the parameter servers apply to this worker's next push. */
int shoal_sync_set_lr(shoal_sync_t *s, double lr);

/* Start step `step` (0-based, counted across epochs and resumes: patterns
 * and periods are functions of it). */
int shoal_sync_begin(shoal_sync_t *s, long step);
/* Bucket i's gradients are final. Buckets never reported are handled in finish. */
int shoal_sync_bucket_ready(shoal_sync_t *s, int bucket);
/* After backward: wait until this step's gradient phase is complete. */
int shoal_sync_finish(shoal_sync_t *s);
/* After the caller's optimizer step: the parameter phase. Ends the step. */
int shoal_sync_end(shoal_sync_t *s);

/* After the last step: every worker ends with the same parameters (global
 * average for dssync/localsgd; the servers' parameters for ps; worker 0's
 * for bsp and partial, whose workers apply the same updates and differ only
 * if their initial parameters did). */
int shoal_sync_final(shoal_sync_t *s);
/* Parameter-server ranks: serve until every worker called final. The
 * registered parameters are the initial model; on return the server's shard
 * of them holds the final values. */
int shoal_sync_serve(shoal_sync_t *s);
/* Between steps, on every worker at the same step: ps servers write their
 * state (shard, momentum, clock) to CKPT.server<s> (config ckpt=CKPT, atomic
 * and fsync'ed like every checkpoint), consistent because all pushes of the
 * earlier steps are applied. Other strategies keep no state of their own
 * (the caller checkpoints its parameters and optimizer): nothing to do. */
int shoal_sync_checkpoint(shoal_sync_t *s);

/* Between steps, on every worker after the same step, before the caller
 * uses the communicator itself: a strategy whose communication thread runs
 * ahead (partial, ahead > 0) stops it (the step it is in is withdrawn and
 * runs again when begun). Others: nothing to do. */
int shoal_sync_pause(shoal_sync_t *s);

/* The communicator of the training workers (comm itself, or comm minus the
 * ps servers; NULL on a server). Owned by the context. */
shoal_comm_t *shoal_sync_workers(shoal_sync_t *s);

/* Figures of the last completed step: seconds the caller was blocked in
 * finish + end, this rank's group size (dssync; 1 when it did not
 * communicate), and the bytes of payload this rank handed to collectives or
 * sends (not counting the algorithms' internal traffic). Any pointer may be NULL. */
int shoal_sync_last_step(const shoal_sync_t *s, double *wait_s, int *group_size, double *payload_bytes);
/* ps servers: the largest staleness (clocks) of an applied gradient so far. */
int shoal_sync_max_staleness(const shoal_sync_t *s);

/* The message of the last error on this context ("" if none). */
const char *shoal_sync_errmsg(const shoal_sync_t *s);
/* The i-th strategy's name, NULL past the end. */
const char *shoal_sync_strategy_name(int i);

#ifdef __cplusplus
}
#endif
#endif
