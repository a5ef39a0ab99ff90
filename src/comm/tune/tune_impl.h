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
/* The same after a drift (the link watch): round 1 (every host to the next, at once, twice, each pair's best)
 * against the matrix says which hosts' links changed (shoal__tune_moved_hosts); only the pairs of those hosts are measured again, the rest of the matrix stays. Nothing
 * moved: the matrix stays (and links_gen with it). Half the hosts or more, or a pair never measured: the
 * whole matrix. *nsuspects: the hosts measured again (0: none). Collective. */
int shoal__tune_reprobe_links(shoal_comm_t *c, int *nsuspects);
/* Which hosts' links moved, from round 1: before is the matrix's bandwidths ([H H]), now[h] the pair h -> h + 1
 * measured again. Each pair's ratio now/before is divided by the round's median ratio when that lies within
 * 2x either way (a busy CPU slows every flow of the round alike); a host is moved when both its pairs (in and out)
 * are then beyond 30 % either way, else both ends of a pair that is. Sets sel[H] (1: moved); returns how
 * many hosts, or a negative error code. */
int shoal__tune_moved_hosts(int H, const double *before, const double *now, unsigned char *sel);
/* The message size of a re-profile's stream for a pair estimated at est bytes/s when the fastest link
 * measured best: 128 KiB when est >= best / 2, else 2 est / best of it rounded up to 16 KiB, at least
 * 16 KiB (full size when either is unknown). */
size_t shoal__tune_stream_msg(double est, double best);

/* watch.c */
int  shoal__tune_watch_init(struct shoal__world *w);
void shoal__tune_watch_free(struct shoal__world *w);

#endif
