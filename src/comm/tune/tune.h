/* The tuning profile of a world: where it comes from and how it is measured
 * (the link model it feeds is coll/model.h).
 *
 * A short profile measures, per link class, the time of exchanging S bytes
 * each way for a few sizes and fits t = alpha + beta*S by least squares:
 *   shm: two same-host ranks over the shm rings;
 *   net: the leaders of hosts 0 and 1 over TCP (only when the world spans
 *        hosts; otherwise the TCP defaults, SHOAL_ALPHA_US...);
 *   coll: the shm-native allreduce of the host group (fitted the same way:
 *        it is what the shm algorithm costs);
 *   gamma: the float32 sum kernel's time per byte;
 *   op: the software overhead o of one whole collective on the point-to-
 *       point path (entry, headers, dispatch), measured as a 4-byte rd
 *       allreduce minus what the link model predicts for it; added to the
 *       point-to-point algorithms' predictions so that they are compared
 *       fairly with the shm-native allreduce, whose fit is end to end.
 * All ranks agree on the values (MAX over ranks), so every rank makes the
 * same choice. The profile is cached in SHOAL_TUNE_FILE under a key naming
 * the host set (host:ranks, sorted). SHOAL_TUNE: off | auto (the default: a
 * world on several hosts uses the file's entry, else measures the link matrix
 * alone, quickly (links.c), stores it and says so once; a world on one
 * host, or with SHOAL_ALGO set, measures nothing) | cache (the file's entry if any, else built-in
 * defaults) | init (the whole profile at creation when the cache has no
 * entry) | force. */
#ifndef SHOAL_COMM_TUNE_H
#define SHOAL_COMM_TUNE_H

#include <stddef.h>
#include <stdio.h>

#include "comm/coll/model.h"

/* The profile file (cache.c): SHOAL_TUNE_FILE, or when it is unset the default
 * under $XDG_CACHE_HOME or $HOME/.cache (*is_default, may be NULL, says which;
 * buf holds the default); "" when there is none. */
const char *shoal__tune_file(char *buf, size_t cap, int *is_default);
/* At world creation (world.c, after the topology and the shm segment): cache
 * lookup, optional profile. Collective over the world communicator c. */
int  shoal__tune_init(shoal_comm_t *c);
void shoal__tune_free(struct shoal__world *w);
/* Rank 0 writes c's profile into the profile file (if there is one). */
int  shoal__tune_store(shoal_comm_t *c);
/* Run the profile now on the world communicator c (collective) and, on
 * rank 0, store it in SHOAL_TUNE_FILE if set. */
int  shoal__tune_profile(shoal_comm_t *c, int write_cache);
/* Print the link model and the chooser's prediction and pick per size for
 * c, one column per algorithm of the table (shoal bench --explain, shoal tune). */
void shoal__tune_explain(shoal_comm_t *c, FILE *f);
/* The watch over real allreduces (watch.c): agreements made, re-profiles triggered, new plans dropped on
 * probation, other matrices tried and tries kept so far, probations and tries ended by calls of other sizes
 * (their own size stopped or ran too rarely); checks still held off; a new plan on probation now; a try
 * running now; the hosts whose pairs the last re-profile measured; seconds spent re-profiling. */
typedef struct shoal__watch_stats {
  unsigned checks, reprofiles, reverts, tries, tries_kept, ended_away;
  int skip, probation, trying, suspects;
  double reprofile_s;
} shoal__watch_stats_t;
void shoal__tune_watch_stats(const struct shoal__world *w, shoal__watch_stats_t *out);

#endif
