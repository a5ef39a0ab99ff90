/* Host topology of a world (topo.h). */
#include "comm/topo.h"

#include <stdlib.h>
#include <string.h>

#include "comm/comm_impl.h"
#include "core/error.h"

/* Hosts -> racks by the name each host's lowest rank registered; unknown anywhere: no racks. */
static void racks_init(const shoal__world_t *w, shoal__topo_t *t) {
  int *first = w->size ? t->l2w : NULL; /* scratch before l2w is filled: host -> its lowest rank */
  for (int r = w->size - 1; first && r >= 0; r--) first[t->host_of[r]] = r;
  t->nracks = 0;
  for (int h = 0; h < t->nhosts; h++) {
    const char *name = w->peers[first[h]].rack;
    if (!name[0] || !strcmp(name, "-")) {
      t->nracks = 0;
      memset(t->rack_of, 0, sizeof *t->rack_of * (size_t)t->nhosts);
      return;
    }
    int k = -1;
    for (int g = 0; g < h && k < 0; g++)
      if (!strcmp(w->peers[first[g]].rack, name)) k = t->rack_of[g];
    t->rack_of[h] = k >= 0 ? k : t->nracks++;
  }
}

int shoal__topo_init(shoal__world_t *w) {
  shoal__topo_t *t = calloc(1, sizeof *t);
  if (!t) return shoal__seterr(SHOAL_ERR_NOMEM, "topology: out of memory");
  w->topo = t;
  t->host_of = malloc((size_t)w->size * sizeof *t->host_of);
  t->w2l = malloc((size_t)w->size * sizeof *t->w2l);
  t->l2w = malloc((size_t)w->size * sizeof *t->l2w);
  t->host_size = calloc((size_t)w->size, sizeof *t->host_size);
  t->rack_of = calloc((size_t)w->size, sizeof *t->rack_of);
  if (!t->host_of || !t->w2l || !t->l2w || !t->host_size || !t->rack_of) {
    shoal__topo_free(w);
    return shoal__seterr(SHOAL_ERR_NOMEM, "topology: out of memory");
  }
  for (int r = 0; r < w->size; r++) {
    int h = -1;
    for (int q = 0; q < r && h < 0; q++)
      if (shoal__peer_same_host(&w->peers[q], &w->peers[r])) h = t->host_of[q];
    t->host_of[r] = h >= 0 ? h : t->nhosts++;
    t->host_size[t->host_of[r]]++;
  }
  racks_init(w, t);
  for (int r = 0; r < w->size; r++) {
    t->w2l[r] = -1;
    if (t->host_of[r] == t->host_of[w->rank]) {
      if (r == w->rank) t->lrank = t->nlocal;
      t->w2l[r] = t->nlocal;
      t->l2w[t->nlocal++] = r;
    }
  }
  t->cache_id = 0;
  return 0;
}

void shoal__topo_free(shoal__world_t *w) {
  shoal__topo_t *t = w->topo;
  if (!t) return;
  free(t->host_of);
  free(t->w2l);
  free(t->l2w);
  free(t->host_size);
  free(t->rack_of);
  free(t);
  w->topo = NULL;
}

void shoal__topo_layout(const shoal_comm_t *c, shoal__layout_t *out) {
  shoal__topo_t *t = c->w->topo;
  if (t->cache_id == c->id) { /* ids are odd: 0 is never one */
    *out = (shoal__layout_t){t->cache_nh, t->cache_maxq, t->cache_whole};
    return;
  }
  int *cnt = calloc((size_t)t->nhosts, sizeof *cnt);
  if (!cnt) { /* no memory: claim nothing that would enable the shm algorithms */
    *out = (shoal__layout_t){c->size, 1, 0};
    return;
  }
  int nh = 0, maxq = 1, whole = 1;
  for (int i = 0; i < c->size; i++) {
    int h = t->host_of[c->wranks[i]];
    if (cnt[h]++ == 0) nh++;
    if (cnt[h] > maxq) maxq = cnt[h];
  }
  for (int h = 0; h < t->nhosts; h++) whole &= !cnt[h] || cnt[h] == t->host_size[h];
  free(cnt);
  *out = (shoal__layout_t){nh, maxq, whole};
  t->cache_id = c->id, t->cache_nh = nh, t->cache_maxq = maxq, t->cache_whole = whole;
}

int shoal__topo_shm_ok(const shoal_comm_t *c, int *nhosts) {
  shoal__layout_t l;
  shoal__topo_layout(c, &l);
  *nhosts = l.nhosts;
  return l.whole && (l.maxq == 1 || c->w->shm_on);
}
