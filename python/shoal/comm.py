"""Communicators, collectives and requests over libshoal (ctypes).

Buffers are used in place, never copied: NumPy arrays (and any object with the
buffer protocol) through their data pointer, PyTorch CPU tensors through
data_ptr(). They must be C-contiguous; outputs must be writable. ctypes drops
the GIL during every call into the library, so other Python threads run while
a collective blocks.
"""
import ctypes
import weakref

from . import _lib
from ._lib import lib

# shoal_dtype_t / shoal_redop_t / shoal_algo_t (include/shoal/comm.h)
FLOAT32, FLOAT64, INT32, INT64, BFLOAT16, FLOAT16, UINT8, INT8, INT16 = range(9)
REDOPS = {"sum": 0, "avg": 1, "min": 2, "max": 3, "prod": 4, "band": 5, "bor": 6, "bxor": 7}
IN_PLACE = ctypes.c_void_p(1)
UNDEFINED = -32766
# bool travels as uint8 bytes (0/1): the reductions that stay 0/1 and mean the logical operation
_BOOL_REDOPS = ("min", "max", "band", "bor", "bxor")

_NP_DTYPES = {"float32": FLOAT32, "float64": FLOAT64, "int32": INT32, "int64": INT64, "float16": FLOAT16,
              "uint8": UINT8, "int8": INT8, "int16": INT16, "bool": UINT8}
_TORCH_DTYPES = {"torch.float32": FLOAT32, "torch.float64": FLOAT64, "torch.int32": INT32,
                 "torch.int64": INT64, "torch.bfloat16": BFLOAT16, "torch.float16": FLOAT16,
                 "torch.uint8": UINT8, "torch.int8": INT8, "torch.int16": INT16, "torch.bool": UINT8}

# ---- errors -------------------------------------------------------------------------------------


class ShoalError(RuntimeError):
    """A shoal call failed. .status is the negative shoal_status_t, .status_name its short name,
    and the message is shoal's detailed one (rank, peer, operation, sequence number ...)."""

    def __init__(self, status, message):
        self.status = status
        self.status_name = status_string(status)
        super().__init__("%s (%s)" % (message or self.status_name, self.status_name))


class InvalidArgument(ShoalError, ValueError):
    pass


class Timeout(ShoalError, TimeoutError):
    pass


class PeerClosed(ShoalError, ConnectionError):
    pass


class Mismatch(ShoalError):
    pass


class Aborted(ShoalError):
    pass


_ERRORS = {-1: InvalidArgument, -4: Timeout, -5: PeerClosed, -6: Mismatch, -18: Aborted}


def status_string(status):
    s = lib.shoal_status_string(status)
    return s.decode() if s else "status %d" % status


def last_error():
    """The detailed message of the last error on this thread."""
    return lib.shoal_last_error().decode(errors="replace")


def check(rc, message=None):
    """Raise the ShoalError of a negative status, with this thread's last error message."""
    if rc < 0:
        raise _ERRORS.get(rc, ShoalError)(rc, message if message is not None else last_error())
    return rc

# ---- buffers ------------------------------------------------------------------------------------


class _Buf:
    __slots__ = ("ptr", "count", "dtype", "keep", "is_bool")

    def __init__(self, ptr, count, dtype, keep, is_bool=False):
        self.ptr, self.count, self.dtype, self.keep, self.is_bool = ptr, count, dtype, keep, is_bool


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def as_buffer(x, writable=True, what="buffer"):
    """Pointer, element count and shoal dtype of x without copying it."""
    if _is_torch(x):
        if x.device.type != "cpu":
            raise InvalidArgument(-1, "%s: tensor on %s; shoal works on CPU tensors" % (what, x.device))
        if not x.is_contiguous():
            raise InvalidArgument(-1, "%s: tensor is not contiguous (call .contiguous() and keep that tensor)"
                                  % what)
        dt = _TORCH_DTYPES.get(str(x.dtype))
        if dt is None:
            raise InvalidArgument(-1, "%s: unsupported tensor dtype %s" % (what, x.dtype))
        if writable and x.requires_grad and x.is_leaf:
            x = x.detach()  # same storage; writing into a leaf that requires grad is the caller's intent
        return _Buf(x.data_ptr(), x.numel(), dt, x, str(x.dtype) == "torch.bool")
    import numpy as np
    if not isinstance(x, np.ndarray):
        try:
            x = np.asarray(memoryview(x))
        except TypeError:
            raise InvalidArgument(-1, "%s: %s is neither a NumPy array, a torch tensor nor a buffer"
                                  % (what, type(x).__name__)) from None
    if not x.flags.c_contiguous:
        raise InvalidArgument(-1, "%s: array is not C-contiguous (use np.ascontiguousarray and keep it)" % what)
    if writable and not x.flags.writeable:
        raise InvalidArgument(-1, "%s: array is read-only" % what)
    dt = _NP_DTYPES.get(x.dtype.name)
    if dt is None:
        raise InvalidArgument(-1, "%s: unsupported dtype %s" % (what, x.dtype))
    if not x.dtype.isnative:
        raise InvalidArgument(-1, "%s: dtype %s is not in this machine's byte order (convert with "
                              "x.astype(x.dtype.newbyteorder('=')))" % (what, x.dtype.str))
    return _Buf(x.ctypes.data, x.size, dt, x, x.dtype.name == "bool")


def _redop(op, buf=None, what="reduction"):
    """The shoal_redop_t of op (a name or a number); bool buffers take only the ops that stay logical,
    refused here, on this rank, before anything is sent."""
    code = op if isinstance(op, int) else REDOPS.get(op)
    if code is None:
        raise InvalidArgument(-1, "unknown reduction %r (one of %s)" % (op, ", ".join(REDOPS)))
    if buf is None:
        return code
    if buf.is_bool:
        names = [k for k, v in REDOPS.items() if v == code]
        if not names or names[0] not in _BOOL_REDOPS:
            raise InvalidArgument(-1, "%s: reduction %s of bool values is not defined (bool takes %s)"
                                  % (what, names[0] if names else code, ", ".join(_BOOL_REDOPS)))
    if _lib.HAVE_REDOP_SUPPORTED and lib.shoal_redop_supported(buf.dtype, code) < 0:
        raise InvalidArgument(-1, "%s: %s" % (what, last_error()))
    return code


def _same_type(a, b, what):
    if a.dtype != b.dtype:
        raise InvalidArgument(-1, "%s: input and output dtypes differ" % what)


def _same_out(a, b, what):
    """out of an allreduce or reduce: the input's dtype and element count."""
    _same_type(a, b, what)
    if a.count != b.count:
        raise InvalidArgument(-1, "%s: out has %d elements, the input %d" % (what, b.count, a.count))

# ---- requests -----------------------------------------------------------------------------------


class Request:
    """A non-blocking collective in flight. The request holds references to its buffers until the
    operation completes, even when the request itself is dropped; do not touch them meanwhile.
    wait() and test() raise the operation's error."""

    def __init__(self, handle, keep, result=None, orphans=None):
        self._h = handle
        self._keep = keep
        self._orphans = orphans
        self._rc, self._msg = 0, None
        self.result = result

    def _complete(self, rc):
        self._h = None
        self._keep = None
        if rc < 0:
            self._rc, self._msg = rc, last_error()

    def _raise(self):
        if self._rc < 0:
            rc, self._rc = self._rc, 0  # raised once, as the C status is returned once
            check(rc, self._msg)

    def _poll(self):
        """True once complete (its status kept for test/wait); never blocks, never raises."""
        if self._h is None:
            return True
        done = ctypes.c_int(0)
        rc = lib.shoal_test(ctypes.byref(self._h), ctypes.byref(done))
        if done.value or rc:
            self._complete(rc)
            return True
        return False

    def _release(self):
        """Its communicator is being destroyed: wait for it now (destroy would wait for it anyway);
        a later wait() or test() still raises its error."""
        if self._h is not None:
            self._complete(lib.shoal_wait(ctypes.byref(self._h)))

    def test(self):
        """True (and the operation's error raised, if any) once complete; False while running."""
        if not self._poll():
            return False
        self._raise()
        return True

    def wait(self):
        """Block until complete (the GIL is released meanwhile); returns .result (the output buffer)."""
        if self._h is not None:
            self._complete(lib.shoal_wait(ctypes.byref(self._h)))
        self._raise()
        return self.result

    @property
    def done(self):
        """True once the operation has completed (polls it; its error is raised by wait/test)."""
        return self._poll()

    def __del__(self):
        # Dropped while running: the operation still runs to completion in order, so its buffers
        # must live until then; the communicator keeps handle and buffers and reaps them later.
        if getattr(self, "_h", None) is None or lib is None:
            return
        if not self._poll() and self._orphans is not None:
            self._orphans.append((self._h, self._keep))
        elif self._h is not None:
            lib.shoal_request_free(self._h)
        self._h = None


def wait_all(requests):
    """Wait for every request; raise the first error (in list order) after all have completed."""
    first = None
    for r in requests:
        try:
            r.wait()
        except ShoalError as e:
            if first is None:
                first = e
    if first is not None:
        raise first

# ---- communicators ------------------------------------------------------------------------------


class Comm:
    """A shoal communicator. Comm() joins the world from the environment exactly as the C library's
    shoal_comm_init_env does (SHOAL_RANK/SHOAL_WORLD_SIZE, torchrun's RANK/WORLD_SIZE/MASTER_ADDR/
    MASTER_PORT, Open MPI, Slurm ...); keyword arguments override single fields."""

    def __init__(self, rank=None, world_size=None, master_addr=None, master_port=None, token=None,
                 timeout=None, connect_timeout=None, hostname=None, ifname=None, _handle=None):
        self._h = None
        if _handle is not None:
            self._h = ctypes.c_void_p(_handle)
            return
        p = _lib.CommParams()
        lib.shoal_comm_params_init(ctypes.byref(p))
        self._strings = []

        def s(v):
            b = str(v).encode()
            self._strings.append(b)
            return b
        def i(name, v):  # a C int: a value it cannot hold is an error, not a wrapped number
            v = int(v)
            if not -2**31 <= v < 2**31:
                raise InvalidArgument(-1, "Comm(%s=%d): out of the range of a C int" % (name, v))
            return v
        if rank is not None:
            p.rank = i("rank", rank)
        if world_size is not None:
            p.world_size = i("world_size", world_size)
        if master_addr is not None:
            p.master_addr = s(master_addr)
        if master_port is not None:
            p.master_port = i("master_port", master_port)
        if token is not None:
            p.token = s(token)
        if ifname is not None:
            p.ifname = s(ifname)
        if hostname is not None:
            p.hostname = s(hostname)
        if timeout is not None:
            p.timeout_s = float(timeout)
        if connect_timeout is not None:
            p.connect_timeout_s = float(connect_timeout)
        h = ctypes.c_void_p()
        check(lib.shoal_comm_init(ctypes.byref(p), ctypes.byref(h)))
        self._h = h

    # -- lifetime --
    def destroy(self):
        """Release the communicator (waits for its pending requests). Idempotent."""
        for r in list(getattr(self, "_reqs", ())):  # requests never waited for: C frees them in wait
            r._release()
        orphans = getattr(self, "_orphans", [])
        for h, _ in orphans:  # dropped requests: their buffers live until now
            lib.shoal_wait(ctypes.byref(h))
        del orphans[:]
        if getattr(self, "_borrowed", False):  # owned by a Sync context
            self._h = None
            return
        if self._h is not None and self._h.value:
            lib.shoal_comm_destroy(self._h)
        self._h = None

    close = destroy

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()

    def __del__(self):
        if getattr(self, "_h", None) is not None and lib is not None:
            self.destroy()

    def _c(self):
        if self._h is None:
            raise InvalidArgument(-1, "communicator already destroyed")
        return self._h

    @property
    def handle(self):
        """The shoal_comm_t pointer (an int), for other ctypes bindings."""
        return self._c().value

    # -- properties --
    @property
    def rank(self):
        return lib.shoal_comm_rank(self._c())

    @property
    def size(self):
        return lib.shoal_comm_size(self._c())

    @property
    def world_rank(self):
        return lib.shoal_comm_world_rank(self._c())

    @property
    def errmsg(self):
        return lib.shoal_comm_errmsg(self._c()).decode(errors="replace")

    @property
    def pending(self):
        """Non-blocking requests of this communicator's world not yet complete."""
        return lib.shoal_comm_pending(self._c())

    def set_timeout(self, seconds):
        check(lib.shoal_comm_set_timeout(self._c(), float(seconds)))

    def split(self, color, key=0):
        """Like MPI_Comm_split; None for color=UNDEFINED."""
        h = ctypes.c_void_p()
        check(lib.shoal_comm_split(self._c(), int(color), int(key), ctypes.byref(h)))
        return Comm(_handle=h.value) if h.value else None

    # -- blocking collectives: each returns its output buffer --
    def allreduce(self, buf, op="sum", out=None, algo=None):
        """Reduce buf over all ranks; in place unless out is given."""
        b = as_buffer(buf, writable=out is None, what="allreduce")
        o = as_buffer(out, what="allreduce out") if out is not None else b
        if out is not None:
            _same_out(b, o, "allreduce")
        send = IN_PLACE if out is None else b.ptr
        if algo is None:
            check(lib.shoal_allreduce(self._c(), send, o.ptr, b.count, b.dtype, _redop(op, b, "allreduce")))
        else:
            a = ctypes.c_int()
            check(lib.shoal_algo_parse(str(algo).encode(), ctypes.byref(a)))
            check(lib.shoal_allreduce_algo(self._c(), send, o.ptr, b.count, b.dtype, _redop(op, b, "allreduce"), a.value))
        return buf if out is None else out

    def broadcast(self, buf, root=0):
        b = as_buffer(buf, what="broadcast")
        check(lib.shoal_broadcast(self._c(), b.ptr, b.count, b.dtype, int(root)))
        return buf

    def reduce(self, buf, out=None, op="sum", root=0):
        """out (significant at root only; in place when None) receives the reduction."""
        b = as_buffer(buf, writable=out is None, what="reduce")
        o = as_buffer(out, what="reduce out") if out is not None else b
        _same_out(b, o, "reduce")
        check(lib.shoal_reduce(self._c(), IN_PLACE if out is None else b.ptr, o.ptr, b.count, b.dtype,
                               _redop(op, b, "reduce"), int(root)))
        return buf if out is None else out

    def reduce_scatter(self, buf, out, op="sum"):
        """buf holds size blocks of len(out) elements; this rank receives the reduction of its block."""
        b = as_buffer(buf, writable=False, what="reduce_scatter")
        o = as_buffer(out, what="reduce_scatter out")
        _same_type(b, o, "reduce_scatter")
        self._check_blocks(b.count, o.count, "reduce_scatter")
        check(lib.shoal_reduce_scatter(self._c(), b.ptr, o.ptr, o.count, b.dtype, _redop(op, b, "reduce_scatter")))
        return out

    def allgather(self, buf, out):
        """out holds size blocks of len(buf) elements."""
        b = as_buffer(buf, writable=False, what="allgather")
        o = as_buffer(out, what="allgather out")
        _same_type(b, o, "allgather")
        self._check_blocks(o.count, b.count, "allgather")
        check(lib.shoal_allgather(self._c(), b.ptr, o.ptr, b.count, b.dtype))
        return out

    def barrier(self):
        check(lib.shoal_barrier(self._c()))

    def send(self, buf, peer, tag=0):
        b = as_buffer(buf, writable=False, what="send")
        check(lib.shoal_send(self._c(), b.ptr, b.count, b.dtype, int(peer), int(tag)))

    def recv(self, buf, peer, tag=0):
        b = as_buffer(buf, what="recv")
        check(lib.shoal_recv(self._c(), b.ptr, b.count, b.dtype, int(peer), int(tag)))
        return buf

    def _check_blocks(self, whole, block, what):
        if whole != block * self.size:
            raise InvalidArgument(-1, "%s: %d elements are not %d ranks x %d" % (what, whole, self.size, block))

    # -- non-blocking collectives: each returns a Request whose wait() returns the output --
    def _issue(self, fn, args, keep, result):
        if not hasattr(self, "_reqs"):
            self._reqs = weakref.WeakSet()
            self._orphans = []
        self._reap()
        h = ctypes.c_void_p()
        check(fn(*args, ctypes.byref(h)))
        r = Request(h, keep, result, self._orphans)
        self._reqs.add(r)
        return r

    def _reap(self):
        """Free the dropped requests that have completed, and with them their buffers."""
        live = []
        for h, keep in self._orphans:
            done = ctypes.c_int(0)
            rc = lib.shoal_test(ctypes.byref(h), ctypes.byref(done))
            if not (done.value or rc):
                live.append((h, keep))
        self._orphans[:] = live

    def iallreduce(self, buf, op="sum", out=None):
        b = as_buffer(buf, writable=out is None, what="iallreduce")
        o = as_buffer(out, what="iallreduce out") if out is not None else b
        if out is not None:
            _same_out(b, o, "iallreduce")
        return self._issue(lib.shoal_iallreduce, (self._c(), IN_PLACE if out is None else b.ptr, o.ptr, b.count,
                                                  b.dtype, _redop(op, b, "iallreduce")), (b, o), buf if out is None else out)

    def ibroadcast(self, buf, root=0):
        b = as_buffer(buf, what="ibroadcast")
        return self._issue(lib.shoal_ibroadcast, (self._c(), b.ptr, b.count, b.dtype, int(root)), (b,), buf)

    def ireduce(self, buf, out=None, op="sum", root=0):
        b = as_buffer(buf, writable=out is None, what="ireduce")
        o = as_buffer(out, what="ireduce out") if out is not None else b
        _same_out(b, o, "ireduce")
        return self._issue(lib.shoal_ireduce, (self._c(), IN_PLACE if out is None else b.ptr, o.ptr, b.count,
                                               b.dtype, _redop(op, b, "ireduce"), int(root)), (b, o), buf if out is None else out)

    def ireduce_scatter(self, buf, out, op="sum"):
        b = as_buffer(buf, writable=False, what="ireduce_scatter")
        o = as_buffer(out, what="ireduce_scatter out")
        _same_type(b, o, "ireduce_scatter")
        self._check_blocks(b.count, o.count, "ireduce_scatter")
        return self._issue(lib.shoal_ireduce_scatter, (self._c(), b.ptr, o.ptr, o.count, b.dtype,
                                                         _redop(op, b, "ireduce_scatter")),
                           (b, o), out)

    def iallgather(self, buf, out):
        b = as_buffer(buf, writable=False, what="iallgather")
        o = as_buffer(out, what="iallgather out")
        _same_type(b, o, "iallgather")
        self._check_blocks(o.count, b.count, "iallgather")
        return self._issue(lib.shoal_iallgather, (self._c(), b.ptr, o.ptr, b.count, b.dtype), (b, o), out)

    def ibarrier(self):
        return self._issue(lib.shoal_ibarrier, (self._c(),), (), None)


def init(**kw):
    """The world communicator from the environment (see Comm)."""
    return Comm(**kw)
