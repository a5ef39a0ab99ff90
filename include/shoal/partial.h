/* shoal partial allreduce: an allreduce that does not wait for stragglers.
 *
 * Each step, rank 0 coordinates: it collects the ranks' readiness and closes
 * a window (the "rent or buy" rule, docs/collectives.md) once waiting longer
 * costs more than it can gain. The result covers the ranks whose data was
 * ready within the window and is normalized by their number (SHOAL_AVG).
 * Ranks that were not ready still take part in the step's data (adding
 * nothing; for min, max and prod they relay the others' partial sums in
 * reduction trees) and receive the result, so every rank ends the step with
 * the same bits. With carry, a late rank's data
 * is added to its contribution of the next step instead of being dropped.
 *
 * Two threads per rank use a partial allreduce:
 *
 *   communication thread                       compute thread
 *   shoal_partial_allreduce(pa, k, out, &i)    ... produce the data of step k ...
 *     (waits for the window, relays, gets      shoal_partial_arrive(pa, k, data, secs)
 *      the result of step k into out)
 *
 * shoal_partial_allreduce may be called before this rank's data of step k
 * exists: if the window closes first, this rank only relays and receives.
 * shoal_partial_arrive, shoal_partial_withdraw and shoal_partial_state never
 * touch the communicator and may be called from any thread at any time.
 *
 * Rules:
 * - Steps are consecutive integers, the same sequence on every rank; each
 *   rank calls shoal_partial_allreduce once per step (again after a
 *   cancelled attempt, below) and shoal_partial_arrive once per step, in
 *   step order (data == NULL: this rank has nothing for that step).
 * - The data passed to arrive must stay unchanged until shoal_partial_allreduce
 *   of that step has returned (if the step was already decided without it,
 *   arrive copies what it keeps before returning).
 * - The communicator is used by the thread inside shoal_partial_allreduce
 *   only (comm.h: one thread at a time per world).
 * - Every call inside shoal_partial_allreduce has the communicator's
 *   deadline (SHOAL_TIMEOUT); errors name the rank, the peer, the operation
 *   ("partial-allreduce"), its sequence number and the step, and abort the
 *   communicator like any collective error.
 */
#ifndef SHOAL_PARTIAL_H
#define SHOAL_PARTIAL_H

#include <stddef.h>

#include "shoal/comm.h"
#include "shoal/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct shoal_partial shoal_partial_t;

/* How the coordinator closes the window. m = ranks ready, N = ranks, w = time
 * since the first rank was ready; the window closes when every rank that can
 * still contribute has, when w >= tau, or when m >= 2 and
 * w >= (S/B) (N + 2 - 2N/m) (AdapCC's rule: waiting for one more rank costs
 * more than the bandwidth it adds). */
typedef enum shoal_partial_window {
  SHOAL_PARTIAL_MEASURED = 0, /* S = the call's bytes, B = N x the slowest link of the world's profile;
                                 tau = min(100 ms, 0.1 x the median compute time the ranks report) */
  SHOAL_PARTIAL_FAITHFUL = 1, /* AdapCC's constants: S = 100 MB, B = 50 Gbit/s x N, tau = 100 ms,
                                 decisions on 5 ms ticks */
  SHOAL_PARTIAL_FIXED = 2,    /* wait tau_s after the first ready rank (no buy rule); a huge tau_s
                                 (INFINITY too) waits for every rank (BSP with relays) */
  SHOAL_PARTIAL_WINDOW__COUNT
} shoal_partial_window_t;

/* What happens to the data of a rank that missed the window. */
typedef enum shoal_partial_carry {
  SHOAL_PARTIAL_DROP = 0,   /* dropped (counted in info.dropped of the rank) */
  SHOAL_PARTIAL_CARRY = 1,  /* added to the rank's contribution of the next step if it arrives before that
                               step's window closes (staleness 1); later than that it is dropped */
  SHOAL_PARTIAL_CARRY_WAIT = 2, /* added to the next step, whose window waits for it: nothing is dropped,
                                   staleness is exactly 1 (a long straggler then holds up the next step) */
  SHOAL_PARTIAL_CARRY__COUNT
} shoal_partial_carry_t;

typedef struct shoal_partial_params {
  shoal_partial_window_t window; /* MEASURED */
  double tau_s;                  /* > 0: the longest wait after the first ready rank (default: the mode's) */
  int min_ready;                 /* never close the window before this many ranks are ready (1; 0 counts as 1) */
  shoal_partial_carry_t carry;   /* DROP; carry needs SHOAL_SUM or SHOAL_AVG */
  int ntrees;                    /* the relay trees (min, max, prod with a rank out): 0 chosen by the cost
                                    model; else the number of reduction trees */
  int fanout;                    /* 0: chosen with ntrees; 1: chains, 2: binary trees, up to 8: k-ary trees */
  int excuse_late;               /* 1: once tau has passed, each rank still busy with a step it was late for
                                    (late in the step before, nothing reported in this one) lowers min_ready
                                    by one, down to 1; and once min_ready ranks are ready, the window does
                                    not wait for ranks whose late data of the step before came (or has not
                                    come) more than a window after it closed; 0 (default): min_ready and
                                    the window hold */
  double carry_weight;           /* (0, 1]: a carried data set counts this much: its data is scaled by it and,
                                    for an average, the divisor counts it so (fresh + w x carried sets);
                                    below 1 needs a floating dtype; 0 counts as 1 */
} shoal_partial_params_t;

void shoal_partial_params_init(shoal_partial_params_t *p);

/* A partial allreduce of `count` elements of dtype with op on c (the shape
 * of every step). No communication: every rank of c creates one with the
 * same arguments. Invalid arguments: SHOAL_ERR_INVALID naming the field; a
 * dtype the op cannot reduce (uint8): SHOAL_ERR_UNSUPPORTED. */
int  shoal_partial_create(shoal_comm_t *c, size_t count, shoal_dtype_t dtype, shoal_redop_t op,
                          const shoal_partial_params_t *params, shoal_partial_t **out);
void shoal_partial_destroy(shoal_partial_t *pa);

/* Any thread: this rank's data of step `step` is final (data != NULL), or
 * this rank has none (NULL). compute_s: how long producing it took (for the
 * MEASURED window; 0 if unknown). Steps in order, once each. */
int shoal_partial_arrive(shoal_partial_t *pa, long step, const void *data, double compute_s);

/* Any thread: this rank asks to put step `step` off (it is between steps and
 * wants the communicator back). If every rank withdraws before any data of
 * the step arrived, the step is cancelled: shoal_partial_allreduce returns 1
 * and is called again for the same step later. Otherwise the step goes on
 * and this rank only relays it. */
int shoal_partial_withdraw(shoal_partial_t *pa, long step);

/* Any thread: what this rank knows of step `step`. */
#define SHOAL_PARTIAL_PENDING 0 /* no rank's data of it is known to be ready */
#define SHOAL_PARTIAL_OPEN 1    /* the coordinator's window is running */
#define SHOAL_PARTIAL_DECIDED 2 /* the window closed: who is in is fixed */
#define SHOAL_PARTIAL_DONE 3    /* this rank has the result */
int shoal_partial_state(const shoal_partial_t *pa, long step);
/* Any thread: the longest the window of `step` can still stay open, in
 * seconds, as far as this rank knows (tau minus the time since it opened):
 * 0 once decided, a negative value while it has not opened. A rank that
 * would need longer than this to produce its data can only be late. */
double shoal_partial_window_left(const shoal_partial_t *pa, long step);

/* What a step's result covers. */
typedef struct shoal_partial_info {
  long step;
  int contributions;    /* data sets in the result: fresh + carried; SHOAL_AVG divided by this */
  int fresh;            /* ranks whose data of this step is in */
  int carried;          /* ranks whose late data of the previous step is in */
  int mine;             /* this rank: 1 its data of this step is in, 0 not (late, none, or dropped) */
  int dropped;          /* this rank's data sets dropped so far (DROP, or CARRY too late) */
  double window_s;      /* how long the coordinator waited after the first ready rank */
  double seconds;       /* time inside the call */
  /* [comm size]: per rank, bit 0: its data of this step is in, bit 1: its carried data is.
   * Valid until the next call on pa. */
  const unsigned char *ranks;
  double control_s;     /* of which the control round: from the call until this rank knew the decision
                           (the window's wait included) */
} shoal_partial_info_t;

/* Communication thread: run step `step`; the result (count elements) goes to
 * recvbuf. 0 when done (info, which may be NULL, says what it covers); 1 when
 * every rank withdrew and the step was cancelled (call again later); or an
 * error. No contribution at all (every rank without data): zeros. */
int shoal_partial_allreduce(shoal_partial_t *pa, long step, void *recvbuf, shoal_partial_info_t *info);

const char *shoal_partial_window_name(shoal_partial_window_t w); /* "measured", "faithful", "fixed" */
int shoal_partial_window_parse(const char *s, shoal_partial_window_t *out);

#ifdef __cplusplus
}
#endif
#endif
