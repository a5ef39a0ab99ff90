"""The shoal backend of torch.distributed against Gloo in the same processes: every op x dtype x async or not,
one launch per world size (2, 3, 4) running the whole matrix inside one default group (shoal) beside a Gloo
group of the same ranks. Each result is compared with a reference computed from every rank's inputs (each
rank can make them all) and, where Gloo has the op and dtype, with Gloo's: integers, min/max and data
movement bit for bit, float sums within the ordering tolerance. Async cases check the work object as Gloo's
(wait, is_completed, is_success, get_future). Also: non-contiguous tensors, subgroups
(new_group, new_subgroups), send/recv/isend/irecv and batch_isend_irecv, the object collectives."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402


def skip_without_backend():
    try:
        import shoal.torch  # noqa: F401
    except ImportError as e:
        print("skip: %s" % e)
        sys.exit(77)


class Matrix:
    def __init__(self, torch, dist, gloo):
        self.torch, self.dist, self.gloo = torch, dist, gloo
        self.r, self.p = dist.get_rank(), dist.get_world_size()
        self.cases = self.gloo_checked = 0
        self.failures = []

    # -- inputs every rank can compute for every rank --
    def values(self, rank, n, dtype, kind="sum", salt=0):
        torch = self.torch
        g = torch.Generator().manual_seed(1000 * salt + 17 * rank + n)
        if dtype == torch.bool:
            return torch.randint(0, 2, (n,), generator=g).bool()
        if dtype.is_complex and kind == "sum":
            return torch.randn(n, generator=g, dtype=torch.float64).to(dtype) + 1j * rank
        if dtype.is_complex:
            return torch.randint(-8, 9, (n,), generator=g).to(dtype) + 1j * rank
        if kind == "prod":
            v = torch.tensor([1, -1, 2, -2], dtype=torch.float64)[torch.randint(0, 4, (n,), generator=g)]
        elif dtype in (torch.float32, torch.float64) and kind == "sum":
            v = torch.randn(n, generator=g, dtype=torch.float64) * 3  # not exact: the ordering tolerance
        else:
            v = torch.randint(-8, 9, (n,), generator=g).to(torch.float64)  # exact in every dtype and order
        if dtype == torch.uint8:
            v = v.abs()
        return v.to(dtype)

    def same(self, what, got, want, exact):
        torch = self.torch
        if got.dtype != want.dtype or got.shape != want.shape:
            self.failures.append("%s: got %s %s, want %s %s" % (what, got.dtype, tuple(got.shape), want.dtype,
                                                                 tuple(want.shape)))
            return
        if exact or not (got.dtype.is_floating_point or got.dtype.is_complex):
            ok = torch.equal(got, want)
        else:
            tol = 1e-2 if got.dtype in (torch.float16, torch.bfloat16) else 1e-5
            ok = torch.allclose(got.to(torch.complex128 if got.dtype.is_complex else torch.float64),
                                want.to(torch.complex128 if want.dtype.is_complex else torch.float64), rtol=tol, atol=tol)
        if not ok:
            self.failures.append("%s: got %s want %s" % (what, got.reshape(-1)[:6].tolist(), want.reshape(-1)[:6].tolist()))

    def run(self, what, call, async_op):
        """call(group, async_op) -> the work or None; on shoal, then on Gloo. Returns (ok, gloo_ok)."""
        self.cases += 1
        try:
            w = call(None, async_op)
            if async_op:
                self.check_work(what, w)
        except Exception as e:
            self.failures.append("%s: shoal raised %s" % (what, e))
            return False
        return True

    def check_work(self, what, w):
        if w is None:
            self.failures.append("%s: async_op=True returned no work" % what)
            return
        ok = w.wait()
        fut = w.get_future()
        # (Work.exception() cannot return its value to Python in torch 1.13, for any backend: not called)
        if ok is not True or not w.is_completed() or not w.is_success():
            self.failures.append("%s: work after wait: %r %r %r" % (what, ok, w.is_completed(), w.is_success()))
        if not fut.done():
            self.failures.append("%s: future not done after wait" % what)

    def on_gloo(self, call, async_op):
        """The same call on the Gloo group, or None when Gloo lacks the op or dtype (it raises at once, on every rank)."""
        try:
            w = call(self.gloo, async_op)
            if async_op and w is not None:
                w.wait()
        except RuntimeError:  # raised before any message, on every rank alike
            return False
        self.gloo_checked += 1
        return True


def reference_reduce(torch, op, xs, dtype, p):
    """The reduction of xs (every rank's tensor) as the dtype computes it."""
    R = torch.distributed.ReduceOp
    if dtype == torch.bool:
        b = torch.stack(xs)
        return {R.SUM: b.any(0), R.MAX: b.any(0), R.BOR: b.any(0), R.PRODUCT: b.all(0), R.MIN: b.all(0),
                R.BAND: b.all(0), R.BXOR: (b.sum(0) % 2).bool()}[op]
    if op in (R.BAND, R.BOR, R.BXOR):
        acc = xs[0].clone()
        for x in xs[1:]:
            acc = {R.BAND: acc & x, R.BOR: acc | x, R.BXOR: acc ^ x}[op]
        return acc
    if op == R.MIN:
        return torch.stack(xs).min(0).values
    if op == R.MAX:
        return torch.stack(xs).max(0).values
    wide = torch.complex128 if dtype.is_complex else torch.float64 if dtype.is_floating_point else torch.int64
    acc = xs[0].to(wide)
    for x in xs[1:]:
        acc = acc * x.to(wide) if op == R.PRODUCT else acc + x.to(wide)
    if op == R.AVG:
        acc = acc / p if (dtype.is_floating_point or dtype.is_complex) else torch.div(acc, p, rounding_mode="trunc")
    return acc.to(dtype)  # integer types wrap, as they do in torch


def matrix(torch, dist, m):
    R = dist.ReduceOp
    r, p = m.r, m.p
    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.int16,
              torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128]
    ops = [R.SUM, R.AVG, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR]
    n = 37
    for dt in dtypes:
        integral = not (dt.is_floating_point or dt.is_complex)
        for oi, op in enumerate(ops):
            if dt.is_complex and op not in (R.SUM, R.AVG):
                continue
            if op in (R.BAND, R.BOR, R.BXOR) and not integral:
                continue
            if dt == torch.bool and op == R.AVG:
                continue
            kind = "prod" if op == R.PRODUCT else "sum" if op in (R.SUM, R.AVG) else "exact"
            xs = [m.values(q, n, dt, kind, oi) for q in range(p)]
            want = reference_reduce(torch, op, xs, dt, p)
            exact = integral or kind != "sum" or dt in (torch.float16, torch.bfloat16)
            for async_op in (False, True):
                what = "all_reduce %s %s async=%s" % (op, dt, async_op)
                t = xs[r].clone()
                if m.run(what, lambda g, a: dist.all_reduce(t, op=op, group=g, async_op=a), async_op):
                    m.same(what, t, want, exact)
                tg = xs[r].clone()
                if m.on_gloo(lambda g, a: dist.all_reduce(tg, op=op, group=g, async_op=a), async_op):
                    m.same(what + " vs gloo", t, tg, integral or op in (R.MIN, R.MAX))
            # reduce to the last rank, non-contiguous (a column of a matrix)
            if op in (R.SUM, R.MAX):
                base = torch.zeros(n, 2, dtype=dt)
                base[:, 1] = xs[r]
                col = base[:, 1]
                what = "reduce %s %s non-contiguous" % (op, dt)
                if m.run(what, lambda g, a: dist.reduce(col, dst=p - 1, op=op, group=g, async_op=a), True) and r == p - 1:
                    m.same(what, col, want, exact)
                    m.same(what + " (the other column untouched)", base[:, 0], torch.zeros(n, dtype=dt), True)
        data_movement(torch, dist, m, dt)
    p2p_and_groups(torch, dist, m)


def data_movement(torch, dist, m, dt):
    r, p = m.r, m.p
    n = 11
    xs = [m.values(q, n, dt, "exact", 99) for q in range(p)]
    for async_op in (False, True):
        tag = "%s async=%s" % (dt, async_op)
        # broadcast from the last rank, into a transposed (non-contiguous) view on the others
        t = xs[r].clone() if r == p - 1 else torch.zeros(n, 2, dtype=dt)[:, 0]
        if m.run("broadcast " + tag, lambda g, a: dist.broadcast(t, src=p - 1, group=g, async_op=a), async_op):
            m.same("broadcast " + tag, t, xs[p - 1], True)
        tg = xs[r].clone()
        if m.on_gloo(lambda g, a: dist.broadcast(tg, src=p - 1, group=g, async_op=a), async_op):
            m.same("broadcast vs gloo " + tag, t, tg, True)
        # all_gather into a list (one output non-contiguous) and into one tensor
        outs = [torch.zeros(n, dtype=dt) for _ in range(p)]
        outs[0] = torch.zeros(2, n, dtype=dt)[1]
        outs[-1] = torch.zeros(n, 2, dtype=dt)[:, 0]
        if m.run("all_gather " + tag, lambda g, a: dist.all_gather(outs, xs[r], group=g, async_op=a), async_op):
            for q in range(p):
                m.same("all_gather %s block %d" % (tag, q), outs[q], xs[q], True)
        outg = [torch.zeros(n, dtype=dt) for _ in range(p)]
        if m.on_gloo(lambda g, a: dist.all_gather(outg, xs[r], group=g, async_op=a), async_op):
            for q in range(p):
                m.same("all_gather vs gloo %s %d" % (tag, q), outs[q], outg[q], True)
        whole = torch.zeros(p * n, dtype=dt)
        if m.run("all_gather_into_tensor " + tag,
                 lambda g, a: dist.all_gather_into_tensor(whole, xs[r], group=g, async_op=a), async_op):
            m.same("all_gather_into_tensor " + tag, whole, torch.cat(xs), True)
        # gather to rank 1 % p, scatter from rank 0
        root = 1 % p
        gl = [torch.zeros(n, dtype=dt) for _ in range(p)] if r == root else None
        if m.run("gather " + tag, lambda g, a: dist.gather(xs[r], gl, dst=root, group=g, async_op=a), async_op) and gl:
            for q in range(p):
                m.same("gather %s block %d" % (tag, q), gl[q], xs[q], True)
        out = torch.zeros(n, dtype=dt)
        sl = [x.clone() for x in xs] if r == 0 else None
        if m.run("scatter " + tag, lambda g, a: dist.scatter(out, sl, src=0, group=g, async_op=a), async_op):
            m.same("scatter " + tag, out, xs[r], True)
        outg2 = torch.zeros(n, dtype=dt)
        if m.on_gloo(lambda g, a: dist.scatter(outg2, sl, src=0, group=g, async_op=a), async_op):
            m.same("scatter vs gloo " + tag, out, outg2, True)
        if dt == torch.bool:
            continue  # no sums of bools below
        # reduce_scatter (list and tensor): block q of every rank's input reduced on rank q
        ins = [[m.values(q, n, dt, "exact", 50 + b) for b in range(p)] for q in range(p)]
        want = reference_reduce(torch, dist.ReduceOp.SUM, [ins[q][r] for q in range(p)], dt, p)
        out = torch.zeros(n, dtype=dt)
        if m.run("reduce_scatter " + tag, lambda g, a: dist.reduce_scatter(out, ins[r], group=g, async_op=a), async_op):
            m.same("reduce_scatter " + tag, out, want, True)
        out = torch.zeros(n, dtype=dt)
        if m.run("reduce_scatter_tensor " + tag,
                 lambda g, a: dist.reduce_scatter_tensor(out, torch.cat(ins[r]), group=g, async_op=a), async_op):
            m.same("reduce_scatter_tensor " + tag, out, want, True)
        # all_to_all_single: equal blocks, then uneven splits (rank q sends q + b + 1 rows to rank b)
        src = torch.cat([m.values(r, n, dt, "exact", 70 + b) for b in range(p)])
        dst = torch.zeros(p * n, dtype=dt)
        if m.run("all_to_all_single " + tag, lambda g, a: dist.all_to_all_single(dst, src, group=g, async_op=a), async_op):
            m.same("all_to_all_single " + tag, dst, torch.cat([m.values(q, n, dt, "exact", 70 + r) for q in range(p)]), True)
        dstg = torch.zeros(p * n, dtype=dt)
        if m.on_gloo(lambda g, a: dist.all_to_all_single(dstg, src, group=g, async_op=a), async_op):
            m.same("all_to_all_single vs gloo " + tag, dst, dstg, True)
        rows = lambda q, b: q + b + 1  # noqa: E731
        src = torch.cat([m.values(r, 2 * rows(r, b), dt, "exact", 80 + b).view(-1, 2) for b in range(p)])
        dst = torch.zeros(sum(rows(q, r) for q in range(p)), 2, dtype=dt)
        insz, outsz = [rows(r, b) for b in range(p)], [rows(q, r) for q in range(p)]
        if m.run("all_to_all_single splits " + tag,
                 lambda g, a: dist.all_to_all_single(dst, src, outsz, insz, group=g, async_op=a), async_op):
            want = torch.cat([m.values(q, 2 * rows(q, r), dt, "exact", 80 + r).view(-1, 2) for q in range(p)])
            m.same("all_to_all_single splits " + tag, dst, want, True)
        # all_to_all of lists of different sizes
        il = [m.values(r, r + b + 1, dt, "exact", 90 + b) for b in range(p)]
        ol = [torch.zeros(q + r + 1, dtype=dt) for q in range(p)]
        if m.run("all_to_all " + tag, lambda g, a: dist.all_to_all(ol, il, group=g, async_op=a), async_op):
            for q in range(p):
                m.same("all_to_all %s from %d" % (tag, q), ol[q], m.values(q, q + r + 1, dt, "exact", 90 + r), True)


def p2p_and_groups(torch, dist, m):
    r, p = m.r, m.p
    right, left = (r + 1) % p, (r - 1) % p
    big = 1 << 20  # 4 MiB: more than the transport buffers
    for async_op in (False, True):
        out = torch.arange(big, dtype=torch.float32) + r
        got = torch.zeros(big, dtype=torch.float32)
        what = "send/recv ring async=%s" % async_op
        m.cases += 1
        if async_op:  # everyone sends first, then receives: the requests run together
            ws = [dist.isend(out, right, tag=3), dist.irecv(got, left, tag=3)]
            for w in ws:
                m.check_work(what, w)
        elif r % 2 == 0:
            dist.send(out, right)
            dist.recv(got, left)
        else:
            dist.recv(got, left)
            dist.send(out, right)
        m.same(what, got, torch.arange(big, dtype=torch.float32) + left, True)
    ops = [dist.P2POp(dist.irecv, torch.zeros(5, dtype=torch.int64), left),
           dist.P2POp(dist.isend, torch.full((5,), r, dtype=torch.int64), right)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    m.cases += 1
    m.same("batch_isend_irecv", ops[0].tensor, torch.full((5,), left, dtype=torch.int64), True)
    # new_group: every rank but the first; ranks outside call it too and get a non-member
    sub = dist.new_group(list(range(1, p)))
    x = torch.tensor([float(r)])
    if r >= 1:
        dist.all_reduce(x, group=sub)
        m.cases += 1
        m.same("new_group all_reduce", x, torch.tensor([float(sum(range(1, p)))]), True)
        check(dist.get_rank(sub) == r - 1 and dist.get_world_size(sub) == p - 1, "ranks of the subgroup")
        y = torch.tensor([float(r)])
        dist.broadcast(y, src=p - 1, group=sub)  # src is a global rank
        m.same("new_group broadcast", y, torch.tensor([float(p - 1)]), True)
    # subgroups of pairs, made as new_subgroups does (which itself wants CUDA in torch 1.13); the object collectives
    if p % 2 == 0:
        mine = [dist.new_group([q, q + 1]) for q in range(0, p, 2)][r // 2]
        z = torch.tensor([r])
        dist.all_reduce(z, group=mine)
        m.cases += 1
        m.same("new_subgroups", z, torch.tensor([(r // 2) * 4 + 1]), True)
    objs = [None] * p
    dist.all_gather_object(objs, {"rank": r, "s": "x" * r})
    m.cases += 1
    check(objs == [{"rank": q, "s": "x" * q} for q in range(p)], "all_gather_object: %s" % objs)
    lst = [{"from": 0}, [1, 2]] if r == 0 else [None, None]
    dist.broadcast_object_list(lst, src=0)
    check(lst == [{"from": 0}, [1, 2]], "broadcast_object_list: %s" % lst)
    # all_reduce_coalesced and all_gather_coalesced on shoal and Gloo
    ts = [torch.full((3,), float(r)), torch.full((2, 2), float(r + 1))]
    dist.all_reduce_coalesced(ts)
    m.cases += 1
    m.same("all_reduce_coalesced", ts[1], torch.full((2, 2), float(sum(q + 1 for q in range(p)))), True)
    dist.barrier()
    w = dist.barrier(async_op=True)
    m.check_work("barrier async", w)


def child():
    import torch
    import torch.distributed as dist
    import shoal.torch  # noqa: F401
    torch.set_num_threads(1)
    t0 = time.monotonic()
    dist.init_process_group("shoal")
    check(dist.get_backend() == "shoal", "backend %s" % dist.get_backend())
    gloo = dist.new_group(backend="gloo")
    m = Matrix(torch, dist, gloo)
    t1 = time.monotonic()
    matrix(torch, dist, m)
    for f in m.failures[:20]:
        print("FAIL rank %d: %s" % (m.r, f))
    check(not m.failures, "rank %d: %d of %d cases failed" % (m.r, len(m.failures), m.cases))
    dist.destroy_process_group()
    print("OK rank %d of %d: %d cases (%d also on gloo) in %.1f s (init %.1f s)"
          % (m.r, m.p, m.cases, m.gloo_checked, time.monotonic() - t1, t1 - t0))


def main():
    skip_without_backend()
    me = os.path.abspath(__file__)
    for n in (2, 3, 4):
        res = harness.torchrun_style(n, me, ["matrix"], timeout=100)
        for r, (rc, out) in enumerate(res):
            check(rc == 0 and "OK rank %d of %d" % (r, n) in out, "world %d rank %d (exit %d):\n%s" % (n, r, rc, out[-3000:]))
        print("\n".join(ln for ln in res[0][1].splitlines() if ln.startswith("OK")))
    print("python torch_backend: ok")


if __name__ == "__main__":
    child() if "--child" in sys.argv else main()
