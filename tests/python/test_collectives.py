"""Collectives from Python: every dtype and reduction on NumPy arrays and torch tensors, bit-identical to
the C library called directly (raw ctypes, no wrapper) and to the non-blocking calls, close to a NumPy
reference; the other collectives, point to point, split; worlds from `shoal launch` and from torchrun's
variables."""
import ctypes
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402


def data(rank, n, dtype, salt):
    i = np.arange(n, dtype=np.float64)
    v = np.sin(i * 0.37 + rank * 1.3 + salt) * 3 + rank
    if np.issubdtype(dtype, np.integer):
        return (v * 5).astype(dtype)
    return v.astype(dtype)


def child():
    import torch
    import shoal
    from shoal._lib import lib
    c = shoal.Comm()
    r, p = c.rank, c.size
    n = 1037
    dts = {np.float32: shoal.FLOAT32, np.float64: shoal.FLOAT64, np.int32: shoal.INT32, np.int64: shoal.INT64,
           np.float16: shoal.FLOAT16, np.uint8: shoal.UINT8, np.int8: shoal.INT8, np.int16: shoal.INT16}
    for dt, code in dts.items():
        for opname, opcode in shoal.REDOPS.items():
            if opname == "prod" and np.issubdtype(dt, np.floating):
                continue  # products of 3 ranks' values overflow nothing, but keep the float check on sums
            if opname in ("band", "bor", "bxor") and np.issubdtype(dt, np.floating):
                continue  # refused on this rank (checked below)
            if np.issubdtype(dt, np.integer) and np.iinfo(dt).bits == 8 and opname in ("sum", "avg", "prod"):
                continue  # wraps: checked against torch's own wrapping below
            x = data(r, n, dt, opcode)
            a = c.allreduce(x.copy(), op=opname)
            raw = x.copy()  # the C library itself, through bare ctypes
            rc = lib.shoal_allreduce(c.handle, shoal.IN_PLACE, raw.ctypes.data, n, code, opcode)
            check(rc == 0, "raw shoal_allreduce: %d" % rc)
            check(a.tobytes() == raw.tobytes(), "%s %s: wrapper differs from the C call" % (dt.__name__, opname))
            t = torch.from_numpy(x.copy())
            c.allreduce(t, op=opname)
            check(t.numpy().tobytes() == raw.tobytes(), "%s %s: torch tensor differs" % (dt.__name__, opname))
            nb = x.copy()
            c.iallreduce(nb, op=opname).wait()
            check(nb.tobytes() == raw.tobytes(), "%s %s: iallreduce differs" % (dt.__name__, opname))
            allx = np.stack([data(q, n, dt, opcode).astype(np.float64) for q in range(p)])
            alli = allx.astype(np.int64)
            ref = {"sum": allx.sum(0), "avg": allx.sum(0) / p, "min": allx.min(0), "max": allx.max(0),
                   "prod": allx.prod(0), "band": np.bitwise_and.reduce(alli, 0), "bor": np.bitwise_or.reduce(alli, 0),
                   "bxor": np.bitwise_xor.reduce(alli, 0)}[opname]
            if np.issubdtype(dt, np.integer):
                ref = np.trunc(ref) if opname == "avg" else ref
                check(np.array_equal(a.astype(np.float64), ref), "%s %s: wrong values" % (dt.__name__, opname))
            else:
                tol = 2e-2 if dt == np.float16 else 1e-5
                check(np.allclose(a.astype(np.float64), ref, rtol=tol, atol=tol),
                      "%s %s: wrong values (max err %g)" % (dt.__name__, opname, np.abs(a - ref).max()))
    # 8-bit integers wrap like torch's own tensors: the sum of the ranks' uint8/int8 tensors computed by torch
    for tdt in (torch.uint8, torch.int8):
        mine = torch.arange(200, dtype=torch.int64).mul(r + 3).to(tdt)
        want = sum(torch.arange(200, dtype=torch.int64).mul(q + 3).to(tdt) for q in range(p))
        got = c.allreduce(mine.clone())
        check(torch.equal(got, want), "%s sum: %s, torch says %s" % (tdt, got[:8].tolist(), want[:8].tolist()))
    # refused on this rank without aborting the communicator: bitwise ops on floats, sums of bools
    for buf, op in ((np.ones(4, np.float32), "bxor"), (torch.ones(4, dtype=torch.bool), "sum")):
        try:
            c.allreduce(buf, op=op)
            check(False, "allreduce %s of %s accepted" % (op, buf.dtype))
        except shoal.InvalidArgument as e:
            check("not defined" in str(e), "refusal says why: %s" % e)
    flags = torch.tensor([r == 0, True, False, r == p - 1])
    c.allreduce(flags, op="bor")
    check(flags.tolist() == [True, True, False, True], "bool bor: %s" % flags.tolist())
    # bfloat16 exists only in torch
    tb = torch.arange(64, dtype=torch.float32).to(torch.bfloat16)
    c.allreduce(tb)
    check(torch.equal(tb.float(), torch.arange(64, dtype=torch.float32).to(torch.bfloat16).float() * p),
          "bfloat16 sum")
    # several non-blocking requests in flight, then the blocking ones: identical
    bufs = [data(r, k, np.float32, k) for k in (1, 100, 70000, 300000)]
    reqs = [c.iallreduce(b.copy()) for b in bufs]
    outs = [q.wait() for q in reqs]
    for b, o in zip(bufs, outs):
        check(c.allreduce(b.copy()).tobytes() == o.tobytes(), "non-blocking vs blocking at %d" % b.size)
    # broadcast / reduce / reduce_scatter / allgather / barrier
    b = np.full(10, r, np.int64)
    c.broadcast(b, root=p - 1)
    check((b == p - 1).all(), "broadcast")
    x = np.full(5, r + 1, np.float64)
    out = np.zeros(5)
    c.reduce(x, out=out, op="sum", root=0)
    if r == 0:
        check((out == p * (p + 1) / 2).all(), "reduce")
    src = np.arange(4 * p, dtype=np.float32) + r
    blk = np.zeros(4, np.float32)
    c.reduce_scatter(src, blk)
    check(np.array_equal(blk, (np.arange(4 * p, dtype=np.float32)[4 * r:4 * r + 4] * p + p * (p - 1) / 2)),
          "reduce_scatter")
    ag = torch.zeros(3 * p, dtype=torch.int32)
    c.allgather(torch.full((3,), r, dtype=torch.int32), ag)
    check(ag.tolist() == [q for q in range(p) for _ in range(3)], "allgather")
    req = c.iallgather(np.full(2, r, np.int32), np.zeros(2 * p, np.int32))
    check(req.wait().tolist() == [q for q in range(p) for _ in range(2)], "iallgather")
    c.ibroadcast(b, root=0).wait()
    c.ibarrier().wait()
    c.barrier()
    # point to point around the ring
    right, left = (r + 1) % p, (r - 1) % p
    got = np.zeros(3, np.int32)
    if r % 2 == 0:
        c.send(np.full(3, r, np.int32), right, tag=5)
        c.recv(got, left, tag=5)
    else:
        c.recv(got, left, tag=5)
        c.send(np.full(3, r, np.int32), right, tag=5)
    check((got == left).all(), "send/recv")
    # split: halves
    sub = c.split(r % 2, key=r)
    v = np.ones(1, np.int32)
    sub.allreduce(v)
    check(v[0] == sub.size == len(range(r % 2, p, 2)), "split allreduce")
    sub.destroy()
    # the C strategies on flat NumPy buffers: bsp averages the gradients of every bucket
    s = shoal.Sync(c, "bsp")
    check("dssync" in shoal.strategies(), "strategies: %s" % shoal.strategies())
    pa, ga = np.zeros(1000, np.float32), np.zeros(1000, np.float32)
    pb, gb = torch.zeros(77), torch.zeros(77)
    check(s.add_bucket(pa, ga) == 0 and s.add_bucket(pb, gb) == 1, "bucket indices")
    for step in range(3):
        s.begin(step)
        ga[:] = data(r, 1000, np.float32, step)
        gb[:] = torch.from_numpy(data(r, 77, np.float32, step + 10))
        s.bucket_ready(0)
        s.finish()  # bucket 1 never reported: finish handles it
        s.end()
        want_a = c.allreduce(data(r, 1000, np.float32, step), op="avg")
        want_b = c.allreduce(data(r, 77, np.float32, step + 10), op="avg")
        check(np.allclose(ga, want_a, rtol=1e-6, atol=1e-6) and np.allclose(gb.numpy(), want_b, rtol=1e-6, atol=1e-6),
              "sync bsp step %d: gradients are not the average" % step)
    s.final()
    s.destroy()
    check(c.pending == 0, "requests left pending")
    c.destroy()
    print("OK rank %d of %d" % (r, p))


def main():
    me = os.path.abspath(__file__)
    rc, out = harness.launch(3, me, timeout=90)
    check(rc == 0 and out.count("OK rank") == 3, "shoal launch -n 3 (exit %d):\n%s" % (rc, out))
    res = harness.torchrun_style(2, me, timeout=90)
    for r, (rc, out) in enumerate(res):
        check(rc == 0 and ("OK rank %d of 2" % r) in out, "torchrun-style rank %d (exit %d):\n%s" % (r, rc, out))
    print("python collectives: ok")


if __name__ == "__main__":
    child() if "--child" in sys.argv else main()
