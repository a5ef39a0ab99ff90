/* Inside tune/: the cache file, the link-matrix probe and the watch over
 * real collectives. */
#ifndef SHOAL_COMM_TUNE_IMPL_H
#define SHOAL_COMM_TUNE_IMPL_H

#include <stddef.h>

#include "comm/tune/tune.h"

struct shoal__world;

/* cache.c. The host-set key; sorted[i] (may be NULL, else [nhosts]) = the
 * topology's index of the i-th host in the key's order. */
int shoal__tune_key(const struct shoal__world *w, char *out, size_t cap, int *sorted);
/* 1 and the values (and the matrix where the entry has one, else -1s) if
 * path holds an entry for key; 0 if not. lat and bw are [nh * nh]. */
int shoal__tune_cache_read(const char *path, const char *key, int nh, const int *sorted, double v[SHOAL__TUNE_NVALS],
                           double *lat, double *bw);
int shoal__tune_cache_write(const char *path, const char *key, int nh, const int *sorted,
                            const double v[SHOAL__TUNE_NVALS], const double *lat, const double *bw);

/* links.c. Measure the host-pair matrix on c, a communicator that holds every
 * rank of its world in world order (the world communicator, or a view of
 * it). Collective; the values are agreed by all ranks and stored in w->tune;
 * the net class is set to their medians. */
int shoal__tune_probe_links(shoal_comm_t *c);
/* The same after a drift (the link watch): round 1 (every host to the next, at once) against the matrix says
 * which hosts' links changed (a host both of whose pairs moved by more than 30 %, else both ends of the one
 * pair that did); only the pairs of those hosts are measured again, the rest of the matrix stays. Nothing
 * moved: the matrix stays (and links_gen with it). Half the hosts or more, or a pair never measured: the
 * whole matrix. *nsuspects: the hosts measured again (0: none). Collective. */
int shoal__tune_reprobe_links(shoal_comm_t *c, int *nsuspects);

/* watch.c */
int  shoal__tune_watch_init(struct shoal__world *w);
void shoal__tune_watch_free(struct shoal__world *w);

#endif
