/* MPICH's fold of a non-power-of-two rank count, shared by rhd and rd
 * (coll.h): among the first 2(p - p') ranks each even rank hands its whole
 * vector to the odd rank above it (which reduces lower OP higher) and sits
 * out; the others are renumbered 0..p'-1; at the end the odd ranks send the
 * result back. Also the costs of rhd and rd, which are made of the same
 * pairwise exchange steps. */
#include <math.h>
#include <stdlib.h>

#include "comm/coll/algo.h"

int shoal__pof2_floor(int p) {
  int q = 1;
  while (q * 2 <= p) q *= 2;
  return q;
}

int shoal__unfold_rank(int newrank, int rem) { return newrank < rem ? newrank * 2 + 1 : newrank + rem; }

int shoal__fold_in(shoal_comm_t *c, const shoal__op_t *op, const char **srcp, char *dst, char *tmp, size_t count,
                   int *newrank) {
  int p = shoal__comm_size(c), r = shoal__comm_rank(c), rem = p - shoal__pof2_floor(p);
  size_t bytes = count * shoal_dtype_size(op->dtype);
  int rc;
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      *newrank = -1;
      return shoal__coll_sendrecv(c, op, r + 1, *srcp, bytes, -1, NULL, 0);
    }
    if ((rc = shoal__coll_sendrecv(c, op, -1, NULL, 0, r - 1, tmp, bytes))) return rc;
    shoal__reduce3(dst, tmp, *srcp, count, op->dtype, op->redop); /* r-1 is the lower rank */
    *srcp = dst;
    *newrank = r / 2;
    return 0;
  }
  *newrank = r - rem;
  return 0;
}

int shoal__fold_out(shoal_comm_t *c, const shoal__op_t *op, char *dst, size_t count) {
  int p = shoal__comm_size(c), r = shoal__comm_rank(c), rem = p - shoal__pof2_floor(p);
  size_t bytes = count * shoal_dtype_size(op->dtype);
  if (r >= 2 * rem) return 0;
  if (r % 2) return shoal__coll_sendrecv(c, op, r - 1, dst, bytes, -1, NULL, 0);
  return shoal__coll_sendrecv(c, op, -1, NULL, 0, r + 1, dst, bytes);
}

/* One step of a pairwise exchange over the folded group (rhd, rd): every
 * participating rank sends `bytes` to its partner newrank ^ mask at once. */
static double xchg_step(const shoal__coll_ctx_t *x, int mask, double bytes, double *alpha) {
  int p = x->p, q = shoal__pof2_floor(p), rem = p - q;
  shoal__flow_t *f = malloc((size_t)q * sizeof *f);
  if (!f) return INFINITY;
  for (int nr = 0; nr < q; nr++)
    f[nr] = (shoal__flow_t){shoal__unfold_rank(nr, rem), shoal__unfold_rank(nr ^ mask, rem), bytes};
  double t = shoal__flows_time(x, f, q, alpha);
  free(f);
  return t;
}

/* The fold in and out (2 alpha + 2 S beta + S gamma with equal links). */
static double fold_cost(const shoal__coll_ctx_t *x, double S) {
  int p = x->p, rem = p - shoal__pof2_floor(p);
  if (!rem) return 0;
  shoal__flow_t *f = malloc((size_t)rem * sizeof *f);
  if (!f) return INFINITY;
  for (int i = 0; i < rem; i++) f[i] = (shoal__flow_t){2 * i, 2 * i + 1, S};
  double a, t = shoal__flows_time(x, f, rem, &a);
  free(f);
  return 2 * (a + t) + S * x->flat.gamma_s;
}

double shoal__cost_rhd(const shoal__coll_ctx_t *x, double S) {
  int q = shoal__pof2_floor(x->p);
  double t = fold_cost(x, S);
  for (int mask = q / 2; mask >= 1; mask >>= 1) { /* halving: reduce-scatter; doubling: the same bytes back */
    double a, part = S * mask / q, step = xchg_step(x, mask, part, &a);
    t += 2 * (a + step) + part * x->flat.gamma_s;
  }
  return t + x->o;
}

double shoal__cost_rd(const shoal__coll_ctx_t *x, double S) {
  int q = shoal__pof2_floor(x->p);
  double t = fold_cost(x, S);
  for (int mask = 1; mask < q; mask <<= 1) {
    double a, step = xchg_step(x, mask, S, &a);
    t += a + step + S * x->flat.gamma_s;
  }
  return t + x->o;
}
