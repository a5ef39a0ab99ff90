/* MPICH's fold of a non-power-of-two rank count, shared by rhd and rd
 * (coll.h): among the first 2(p - p') ranks each even rank hands its whole
 * vector to the odd rank above it (which reduces lower OP higher) and sits
 * out; the others are renumbered 0..p'-1; at the end the odd ranks send the
 * result back. */
#include "comm/coll/coll.h"

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
