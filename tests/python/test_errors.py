"""Error paths of the Python binding: every failure is a ShoalError subclass carrying shoal's message
(option/variable, rank, peer, operation, sequence number), raised within the deadline; never a crash
or a hang."""
import os
import signal
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check  # noqa: E402


def expect(exc, fn, *words):
    try:
        fn()
    except exc as e:
        msg = str(e)
        for w in words:
            check(w in msg, "%s: %r not in %r" % (exc.__name__, w, msg))
        return e
    except Exception as e:  # noqa: BLE001
        harness.fail("expected %s, got %s: %s" % (exc.__name__, type(e).__name__, e))
    harness.fail("expected %s, nothing raised" % exc.__name__)


def local_errors():
    import torch
    import shoal
    from shoal._lib import lib
    def fresh():
        return shoal.Comm(rank=0, world_size=1, master_addr="127.0.0.1", master_port=0)
    # keyword arguments a C int cannot hold, or outside what comm.h documents: errors naming them
    expect(shoal.InvalidArgument, lambda: shoal.Comm(rank=2**32 + 1, world_size=2**32 + 2), "Comm(rank=4294967297)")
    expect(shoal.InvalidArgument, lambda: shoal.Comm(master_port=2**32), "Comm(master_port=4294967296)")
    expect(shoal.ShoalError, lambda: shoal.Comm(rank=-5, world_size=1), "params.rank=-5")
    expect(shoal.ShoalError, lambda: shoal.Comm(master_port=-2), "params.master_port=-2")
    expect(shoal.ShoalError, lambda: shoal.Comm(timeout=float("nan")), "params.timeout_s=nan")
    c = fresh()
    a = np.zeros(8, np.float32)
    e = expect(shoal.InvalidArgument, lambda: c.broadcast(a, root=3), "root 3 out of range")
    check(e.status == -1 and e.status_name == "invalid argument", "status fields: %r %r" % (e.status, e.status_name))
    check(isinstance(e, ValueError), "InvalidArgument is a ValueError")
    # an argument error found by the C library aborts the communicator (its other ranks must not wait for
    # a call this rank skipped): the next call says so
    expect(shoal.Aborted, lambda: c.barrier(), "aborted after an earlier error", "root 3 out of range")
    # also when the next call has an argument error of its own (its message comes second)
    expect(shoal.Aborted, lambda: c.broadcast(a, root=7), "root 3 out of range", "this call:", "root 7")
    c.destroy()
    c = fresh()
    expect(shoal.InvalidArgument, lambda: c.iallreduce(a, op="median"), "unknown reduction 'median'")
    expect(shoal.InvalidArgument, lambda: c.allreduce(np.zeros((4, 4), np.float32)[:, 1]), "not C-contiguous")
    expect(shoal.InvalidArgument, lambda: c.allreduce(torch.zeros(4, 4).t()), "not contiguous")
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    expect(shoal.InvalidArgument, lambda: c.allreduce(ro), "read-only")
    expect(shoal.InvalidArgument, lambda: c.allreduce(np.zeros(3, np.complex64)), "unsupported dtype complex64")
    expect(shoal.InvalidArgument, lambda: c.allreduce([1, 2, 3]), "neither a NumPy array")
    expect(shoal.InvalidArgument, lambda: c.allgather(np.zeros(3, np.float32), np.zeros(5, np.float32)),
           "5 elements are not 1 ranks x 3")
    # out= buffers: the input's dtype and count (the library would write past a shorter one)
    a8 = np.zeros(8, np.float32)
    expect(shoal.InvalidArgument, lambda: c.allreduce(a8, out=np.zeros(4, np.float32)), "out has 4 elements, the input 8")
    expect(shoal.InvalidArgument, lambda: c.iallreduce(a8, out=np.zeros(4, np.float32)), "out has 4 elements")
    expect(shoal.InvalidArgument, lambda: c.reduce(a8, out=np.zeros(4, np.float32)), "out has 4 elements")
    expect(shoal.InvalidArgument, lambda: c.reduce(a8, out=torch.zeros(8, dtype=torch.float64)), "dtypes differ")
    expect(shoal.InvalidArgument, lambda: c.ireduce(a8, out=np.zeros(8, np.int32)), "dtypes differ")
    expect(shoal.InvalidArgument, lambda: c.allreduce(np.zeros(4, ">f4")), "not in this machine's byte order")
    # refused on this rank, the communicator intact: reductions a dtype does not have, sums of bools
    expect(shoal.InvalidArgument, lambda: c.allreduce(np.zeros(4, np.float32), op="bxor"), "bxor is not defined on float32")
    expect(shoal.InvalidArgument, lambda: c.iallreduce(torch.zeros(4, dtype=torch.bool)), "sum of bool values")
    c.barrier()

    def raw_bxor_float(comm):  # past the binding's own checks, as another binding could call the library
        x = np.zeros(4, np.float32)
        return comm._issue(lib.shoal_iallreduce, (comm._c(), shoal.IN_PLACE, x.ctypes.data, 4, shoal.FLOAT32, 7),
                           (x,), x)
    # found when the operation runs: raised by wait(), the status of the C library
    req = raw_bxor_float(c)
    e = expect(shoal.ShoalError, req.wait, "bxor is not defined on float32")
    check(e.status == -11, "float bxor: status %d" % e.status)
    c.destroy()
    # done polls; an error of a request that destroy() completed is still raised by wait()
    c = fresh()
    req = c.iallreduce(np.ones(4, np.float32))
    t0 = time.monotonic()
    while not req.done and time.monotonic() - t0 < 10:
        time.sleep(0.01)
    check(req.done, "req.done still False 10 s after a one-rank iallreduce")
    req = raw_bxor_float(c)
    c.destroy()
    e = expect(shoal.ShoalError, req.wait, "bxor")
    check(e.status == -11, "float bxor completed by destroy: status %d" % e.status)
    c = fresh()
    # strategies: configuration errors name the key; wrong buffers are refused
    expect(shoal.InvalidArgument, lambda: shoal.Sync(c, "dssync", "bogus=1"), "bogus")
    expect(shoal.ShoalError, lambda: shoal.Sync(c, "nosuch"), "nosuch")
    s = shoal.Sync(c, "bsp")
    expect(shoal.InvalidArgument, lambda: s.add_bucket(np.zeros(4, np.float64), np.zeros(4, np.float64)), "float32")
    expect(shoal.InvalidArgument, lambda: s.add_bucket(np.zeros(4, np.float32), np.zeros(5, np.float32)),
           "4 parameters but 5 gradients")
    s.destroy()
    c.destroy()
    expect(shoal.InvalidArgument, lambda: c.barrier(), "already destroyed")
    # configuration errors name the variable
    r = subprocess.run([harness.PY, "-c", "import shoal; shoal.Comm()"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=30,
                       env=harness.clean_env({"SHOAL_RANK": "0", "SHOAL_WORLD_SIZE": "two"}))
    out = r.stdout.decode()
    check(r.returncode != 0 and "SHOAL_WORLD_SIZE" in out and "ShoalError" in out.replace("shoal.comm.", ""),
          "bad SHOAL_WORLD_SIZE:\n" + out)
    # a library that does not exist: ImportError naming it
    r = subprocess.run([harness.PY, "-c", "import shoal"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=30, env=harness.clean_env({"SHOAL_LIBRARY": "/nonexistent/libshoal.so.0"}))
    check(r.returncode != 0 and "ImportError" in r.stdout.decode() and "/nonexistent/libshoal.so.0" in
          r.stdout.decode(), "missing library:\n" + r.stdout.decode())


def child():
    import shoal
    mode = sys.argv[sys.argv.index("--child") + 1]
    c = shoal.Comm(timeout=10)
    r = c.rank
    if mode == "mismatch":
        c.barrier()
        e = expect(shoal.ShoalError, lambda: c.allreduce(np.zeros(16 if r == 0 else 32, np.float32)),
                   "rank %d" % r, "peer", "allreduce seq 2")
        check(isinstance(e, (shoal.Mismatch, shoal.PeerClosed)), "mismatch class %s" % type(e).__name__)
        expect(shoal.Aborted, lambda: c.barrier(), "aborted after an earlier error")
        print("OK %s rank %d: %s" % (mode, r, e))
    elif mode == "drop":
        # a request dropped while running keeps its buffer alive until the operation completes
        import gc
        import weakref
        if r == 1:
            time.sleep(1.0)
        a = np.ones(1 << 20, np.float32)
        w = weakref.ref(a)
        c.iallreduce(a)  # the Request is dropped at once
        del a
        gc.collect()
        check(r == 1 or w() is not None, "rank 0: buffer of a dropped, running request was freed")
        c.barrier()  # ordered after the request
        check(w() is None or float(w()[0]) == 2.0, "dropped request's buffer holds %r" % (w() is not None and w()[0]))
        c.iallreduce(np.ones(4, np.float32)).wait()  # issuing reaps the completed dropped request
        gc.collect()
        check(w() is None, "rank %d: dropped request's buffer still referenced after it completed" % r)
        print("OK %s rank %d" % (mode, r))
    elif mode == "kill":
        big = np.zeros(1 << 20, np.float32)
        c.barrier()
        if r == 1:
            c.iallreduce(big)
            time.sleep(0.02)
            os.kill(os.getpid(), signal.SIGKILL)
        t0 = time.monotonic()
        # the error comes from wait, or from issuing a later request once an earlier one failed (a busy
        # machine can hold this rank between two issues longer than the victim lives)
        e = expect(shoal.ShoalError, lambda: shoal.wait_all([c.iallreduce(big) for _ in range(4)]), "allreduce seq")
        took = time.monotonic() - t0
        check(not isinstance(e, shoal.Timeout), "waited for the deadline: %s" % e)
        check("peer 1" in str(e) or "aborted" in str(e), "names neither the peer nor the abort: %s" % e)
        check(took < 10, "error after %.1f s, past the 10 s deadline" % took)
        print("OK %s rank %d (%.2f s): %s" % (mode, r, took, e))
    c.destroy()


def main():
    local_errors()
    me = os.path.abspath(__file__)
    # over TCP, where the message names the peer and the sequence (shared-memory mismatches: tests/comm)
    res = harness.torchrun_style(2, me, ["mismatch"], timeout=40, env={"SHOAL_SHM": "0"})
    for r, (rc, out) in enumerate(res):
        check(rc == 0 and "OK mismatch rank %d" % r in out, "mismatch rank %d (exit %d):\n%s" % (r, rc, out))
    res = harness.torchrun_style(2, me, ["drop"], timeout=40)
    for r, (rc, out) in enumerate(res):
        check(rc == 0 and "OK drop rank %d" % r in out, "drop rank %d (exit %d):\n%s" % (r, rc, out))
    res = harness.torchrun_style(3, me, ["kill"], timeout=40)
    check(res[1][0] == -signal.SIGKILL, "victim exit %d" % res[1][0])
    for r in (0, 2):
        rc, out = res[r]
        check(rc == 0 and "OK kill rank %d" % r in out, "kill rank %d (exit %d):\n%s" % (r, rc, out))
    print("python errors: ok")


if __name__ == "__main__":
    child() if "--child" in sys.argv else main()
