/* The flow planner: MLCC's emulated switch (docs/flow.md#the-planner). It knows the links (capacity, what
 * feedback says is usable now) and the flows (a job's cross-host connections, their path, their ring
 * neighbours), keeps for each flow a schedule of bytes over the next K slots, and answers each flow's
 * report with the rate it may send at in the current slot. The controller daemon and the flow-level
 * simulator both drive this one code.
 *
 * Units: bytes and bytes/s inside; slots are numbered by the caller (the controller: wall-clock time
 * divided by the slot length, so agents and controller agree without talking about it). */
#ifndef SHOAL_FLOW_PLAN_H
#define SHOAL_FLOW_PLAN_H

#include <stdint.h>

#define SHOAL__FPLAN_MAX_K 64
#define SHOAL__FPLAN_MAX_PATH 4
#define SHOAL__FPLAN_FORGET_SLOTS 50 /* a flow not reported for this many slots is dropped */
#define SHOAL__FPLAN_EXTRA_BYTES 65536 /* sent beyond a finished phase's volume (at most; 1% of it if less):
                                         * an extra phase starts */
/* rate of a phase whose grant is its whole path while another planned job has flows there, as a fraction
 * of the path's capacity (which counts frames: TCP's payload is 1448 of 1514 bytes, so 0.94 is 98% of it;
 * the ACKs of the ring's other direction, about 2% more, fit beside it). Measured on the testbed (ME1, 3
 * jobs, 1000 ms compute, 20 ms queue, two runs each): 0.9 gave 20.89 s average JCT, 0.94 20.62, the
 * uplinks' drops alike. */
#define SHOAL__FPLAN_TURN_FRAC 0.94

enum {
  SHOAL__FPOL_MLCC = 0,   /* NEW_ITER / RESCHEDULE with the ring dependency rule */
  SHOAL__FPOL_GREEDY = 1, /* the same without the dependency rule (ablation) */
  SHOAL__FPOL_EQUAL = 2,  /* static equal-share pacing: every live flow of a link gets capacity / flows */
};

typedef struct shoal__fplan_cfg {
  double slot_s;     /* slot length */
  int horizon;       /* K: slots planned ahead (1..SHOAL__FPLAN_MAX_K) */
  double factor;     /* volume planned per iteration = factor x the previous iteration's (spec: 1.6) */
  int policy;        /* SHOAL__FPOL_* */
  double floor_frac; /* rate of a flow told to wait, as a fraction of its path's capacity */
} shoal__fplan_cfg_t;

/* The defaults: 100 ms, K 10, factor 1.6, mlcc, floor 0.02. */
void shoal__fplan_cfg_default(shoal__fplan_cfg_t *cfg);
/* Name of a policy ("mlcc", ...), and the reverse (-1 if unknown). */
const char *shoal__fplan_policy_name(int policy);
int shoal__fplan_policy_parse(const char *s);

typedef struct shoal__fplan_link {
  double cap;   /* bytes/s, > 0 */
  double avail; /* bytes/s the planner may hand out: cap minus measured background and queue */
  double bg;    /* smoothed background (traffic that is not a planned flow's), bytes/s */
  double bg_raw; /* the last slot's unsmoothed background reading (feedback), bytes/s */
  double resv[SHOAL__FPLAN_MAX_K]; /* bytes reserved per slot, indexed by absolute slot mod K */
  double shoal_cur;                /* bytes the flows on it reported in the current slot's reports */
  double shoal_bytes;              /* the same for the previous slot (feedback subtracts it) */
  uint64_t drops;                  /* drops seen by feedback, in all */
  double backlog;                  /* the queue at the last feedback, bytes */
} shoal__fplan_link_t;

typedef struct shoal__fplan_flow {
  uint64_t job;
  uint32_t src, dst; /* ranks */
  int npath, path[SHOAL__FPLAN_MAX_PATH];
  int hsrc, hdst;    /* hosts: the ring neighbours are found by them */
  int pred, succ;    /* the job's flow into hsrc / out of hdst when there is exactly one (a ring), else -1 */
  uint64_t iter;     /* the iteration the schedule is for */
  double V;          /* bytes of an iteration (the previous one's), 0: unknown */
  double planned;    /* bytes planned for this iteration (factor x V) */
  double sent;       /* bytes sent in this iteration, as last reported (beyond base) */
  double base;       /* bytes of this iteration before its current phase: 0, or the earlier phases' when the
                      * flow sent more after its phase ended (an extra phase: a final broadcast of the model) */
  double last_slot_bytes; /* bytes sent during the previous slot (measured rate x slot) */
  double prev_slot_bytes; /* the same one report earlier: bytes sent in the slot before the previous one */
  int nrep;               /* reports taken (up to 2): a flow's first report has no slot to compare with */
  uint64_t rep_iter; /* the iteration and bytes of its last report (for last_slot_bytes) */
  double rep_sent;
  double given;      /* bytes it was granted for the previous slot (0: not reported then) */
  double granted;    /* bytes granted in the slots of this iteration that have passed */
  double wasted;     /* bytes granted in passed slots but not sent (statistics: a flow waiting on its ring) */
  double sched[SHOAL__FPLAN_MAX_K];
  double e;          /* bytes/s the flow can get at most (its path, or the agent's estimate) */
  double rate;       /* answer for the current slot, bytes/s; 0: no limit */
  int active;        /* it has volume left in this iteration */
  int open;          /* a phase of a volume not known yet (its job's first): it holds the room until it stops */
  int unpaced;       /* this phase followed its job's previous one with no gap: not planned, no limit */
  int64_t seen;      /* slot of its last report */
  int64_t slots_active; /* slots it has been active in this iteration */
} shoal__fplan_flow_t;

typedef struct shoal__fplan {
  shoal__fplan_cfg_t cfg;
  int64_t now;
  int nlinks;
  shoal__fplan_link_t *link;
  int nflows, capflows;
  shoal__fplan_flow_t *flow;
} shoal__fplan_t;

/* cap_bps[nlinks]: every link's capacity in bits/s (> 0). 0, or SHOAL_ERR_INVALID / SHOAL_ERR_NOMEM. */
int shoal__fplan_init(shoal__fplan_t *p, const shoal__fplan_cfg_t *cfg, const double *cap_bps, int nlinks);
void shoal__fplan_free(shoal__fplan_t *p);

/* Move the clock to slot (>= now): the passing slots' grants are counted and their reservations freed;
 * flows not reported for SHOAL__FPLAN_FORGET_SLOTS slots are dropped. */
void shoal__fplan_advance(shoal__fplan_t *p, int64_t slot);
/* The flow (job, src, dst) from host hsrc to host hdst over path[npath]; added if new. Its index, or
 * SHOAL_ERR_NOMEM. */
int shoal__fplan_flow(shoal__fplan_t *p, uint64_t job, uint32_t src, uint32_t dst, int hsrc, int hdst,
                      const int *path, int npath);

/* One flow's report for the current slot (status SHOAL__FS_*, proto.h): the iteration it is in, the
 * previous iteration's volume (0: unknown), the bytes sent in this iteration, the agent's rate estimate
 * (0: the path's capacity), taken into the plan. The rates of a slot are granted after every report of the
 * slot is taken (shoal__fplan_grant): a flow granted as its report came in got its rate from reservations
 * that a later report of the same slot freed (a job whose phase had just ended). */
void shoal__fplan_take(shoal__fplan_t *p, int f, int status, uint64_t iter, double volume, double sent, double e_bps);
/* f's rate for the current slot in bytes/s, 0 meaning no limit. */
double shoal__fplan_grant(shoal__fplan_t *p, int f);
/* shoal__fplan_take, then shoal__fplan_grant: a slot with this one report. */
double shoal__fplan_report(shoal__fplan_t *p, int f, int status, uint64_t iter, double volume, double sent, double e_bps);

/* In-network feedback for link l over the last slot: bytes/s it carried, its queue, its drops so far
 * (cumulative counter). Background = carried minus what the planned flows reported sending; usable
 * capacity = cap - background - the queue drained over one slot (at least a tenth of cap). */
void shoal__fplan_feedback(shoal__fplan_t *p, int l, double tx_bps, double backlog_bytes, uint64_t drops);
/* Background a host reports for link l (its uplink: TCP traffic that is not shoal's), bytes/s. */
void shoal__fplan_background(shoal__fplan_t *p, int l, double bps);

/* Bytes reserved on link l in the current slot + k. */
double shoal__fplan_reserved(const shoal__fplan_t *p, int l, int k);

#endif
