/* Interference where jobs sit (colocation.h). */
#include <stdlib.h>

#include "core/error.h"
#include "sched/model/colocation.h"

int shoal__colo_init(shoal__colo_t *x, const shoal_interference_t *im, const shoal_speed_t *sp) {
  x->im = im;
  x->nmodels = sp->nmodels;
  x->cls = malloc((size_t)(sp->nmodels ? sp->nmodels : 1) * sizeof *x->cls);
  if (!x->cls) return shoal__seterr(SHOAL_ERR_NOMEM, "interference: out of memory");
  for (int i = 0; i < sp->nmodels; i++) x->cls[i] = shoal__interference_class_of(im, sp->models[i].name);
  return 0;
}

void shoal__colo_fini(shoal__colo_t *x) {
  free(x->cls);
  x->cls = NULL;
}

void shoal__colo_socket(const shoal__colo_t *x, const shoal__slots_t *sl, const shoal_job_t *j, int m, int s, double *own,
                        double *imposed) {
  int a, n, cj = shoal__colo_class(x, j);
  shoal__slots_socket_range(sl, m, s, &a, &n);
  double o = 0, im = 0;
  const shoal_job_t *seen[SHOAL_MAX_GPUS_PER_MACHINE];
  int ns = 0;
  for (int k = a; k < a + n; k++) {
    const shoal_job_t *h = shoal__slots_owner(sl, m, k);
    if (!h || h == j) continue;
    int ch = shoal__colo_class(x, h);
    o += shoal__interference_term(x->im, SHOAL_IL_SOCKET, cj, ch);
    int dup = 0;
    for (int i = 0; i < ns; i++) dup |= seen[i] == h;
    if (!dup) {
      seen[ns++] = h;
      im += shoal__interference_term(x->im, SHOAL_IL_SOCKET, ch, cj);
    }
  }
  *own = o;
  *imposed = im;
}

/* the sum over the other jobs on m that span machines of g_nic(j, k) (suffered) or g_nic(k, j) */
static double nic_sum(const shoal__colo_t *x, const shoal__slots_t *sl, const shoal_job_t *j, int m, int suffered) {
  int g = sl->c->m[m].cap.gpus, cj = shoal__colo_class(x, j);
  const shoal_job_t *seen[SHOAL_MAX_GPUS_PER_MACHINE];
  int ns = 0;
  double sum = 0;
  for (int k = 0; k < g; k++) {
    const shoal_job_t *h = shoal__slots_owner(sl, m, k);
    if (!h || h == j || h->alloc.n < 2) continue;
    int dup = 0;
    for (int i = 0; i < ns; i++) dup |= seen[i] == h;
    if (dup) continue;
    seen[ns++] = h;
    int ch = shoal__colo_class(x, h);
    sum += suffered ? shoal__interference_term(x->im, SHOAL_IL_NIC, cj, ch)
                    : shoal__interference_term(x->im, SHOAL_IL_NIC, ch, cj);
  }
  return sum;
}

double shoal__colo_nic(const shoal__colo_t *x, const shoal__slots_t *sl, const shoal_job_t *j, int m) {
  return nic_sum(x, sl, j, m, 1);
}

double shoal__colo_nic_imposed(const shoal__colo_t *x, const shoal__slots_t *sl, const shoal_job_t *j, int m) {
  return nic_sum(x, sl, j, m, 0);
}

double shoal__colo_slowdown(const shoal__colo_t *x, const shoal__slots_t *sl, const shoal_job_t *j) {
  double worst = 1;
  for (int i = 0; i < j->alloc.n; i++) {
    int m = j->alloc.p[i].machine;
    if (j->alloc.p[i].workers == 0) continue;
    double nic = j->alloc.n > 1 ? shoal__colo_nic(x, sl, j, m) : 0;
    int S = shoal__slots_sockets(sl, m);
    for (int s = 0; s < S; s++) {
      int a, n, mine = 0;
      shoal__slots_socket_range(sl, m, s, &a, &n);
      for (int k = a; k < a + n; k++) mine |= shoal__slots_owner(sl, m, k) == j;
      if (!mine) continue;
      double own, imposed;
      shoal__colo_socket(x, sl, j, m, s, &own, &imposed);
      if (1 + own + nic > worst) worst = 1 + own + nic;
    }
  }
  return worst;
}

/* the quietest sockets for w workers (colocation.h) */
double shoal__colo_pick_sockets(const shoal__colo_t *x, const shoal__slots_t *sl, const shoal_job_t *j, int m, int w,
                                uint8_t *want) {
  int S = shoal__slots_sockets(sl, m), freeS[SHOAL_MAX_SOCKETS];
  double cost[SHOAL_MAX_SOCKETS], total = 0;
  for (int k = 0; k < S; k++) {
    double own, imposed;
    shoal__colo_socket(x, sl, j, m, k, &own, &imposed);
    cost[k] = own + imposed;
    freeS[k] = shoal__slots_free_in(sl, m, k);
    want[k] = 0;
  }
  for (int i = 0; i < w; i++) {
    int best = -1;
    for (int k = 0; k < S; k++)
      if (freeS[k] > 0 && (best < 0 || cost[k] < cost[best])) best = k;
    if (best < 0) return -1;
    freeS[best]--;
    want[best]++;
    total += cost[best];
  }
  return total;
}
