"""shoal's synchronization strategies (include/shoal/sync.h) for any training loop, on flat float32
buffers (NumPy arrays or torch CPU tensors, used in place):

    s = shoal.Sync(comm, "dssync", "pattern=random k=2")
    s.add_bucket(params, grads)           # one or more buckets, the last layers first
    for step in range(steps):
        s.begin(step)
        ... forward/backward into grads; s.bucket_ready(i) as bucket i's gradients become final ...
        s.finish()                        # bsp: gradients averaged; ps: parameters pulled
        if not s.server_step: ... optimizer step on params ...
        s.end()                           # dssync/localsgd: parameters averaged
    s.final()                             # every worker holds the same model

Parameter-server ranks (s.is_server) call s.serve() instead of training. Before using the
communicator yourself between steps, call s.pause() (partial with ahead > 0 needs it). Errors raise ShoalError with
the context's message."""
import ctypes

from . import _lib
from .comm import Comm, InvalidArgument, ShoalError, as_buffer, check
from ._lib import lib

F_GRADS, F_PARAMS, F_SERVER_STEP, F_SERVER = 1, 2, 4, 8


def strategies():
    """Names of the strategies the library has ("bsp", "dssync", "localsgd", "ps", "partial")."""
    if not _lib.HAVE_SYNC:
        return []
    out, i = [], 0
    while True:
        n = lib.shoal_sync_strategy_name(i)
        if not n:
            return out
        out.append(n.decode())
        i += 1


class Sync:
    def __init__(self, comm, strategy="bsp", config=""):
        if not _lib.HAVE_SYNC:
            raise ShoalError(-11, "the shoal library at %s has no synchronization strategies" % _lib.path)
        self.comm = comm
        self._keep = []
        self._h = None
        h = ctypes.c_void_p()
        check(lib.shoal_sync_create(comm._c(), str(strategy).encode(), (config or "").encode(), ctypes.byref(h)))
        self._h = h
        self.strategy = strategy
        self.nbuckets = 0

    def _rc(self, rc):
        if rc < 0:
            msg = lib.shoal_sync_errmsg(self._h).decode(errors="replace") if self._h is not None else None
            check(rc, msg or None)
        return rc

    def _c(self):
        if self._h is None:
            raise InvalidArgument(-1, "sync context already destroyed")
        return self._h

    def add_bucket(self, params, grads):
        """Register float32 parameters and their gradients (same length, kept alive here); the index."""
        p = as_buffer(params, what="sync params")
        g = as_buffer(grads, what="sync grads")
        if p.dtype != 0 or g.dtype != 0:
            raise InvalidArgument(-1, "sync buckets are float32")
        if p.count != g.count:
            raise InvalidArgument(-1, "sync bucket: %d parameters but %d gradients" % (p.count, g.count))
        i = self._rc(lib.shoal_sync_add_bucket(self._c(), p.ptr, g.ptr, p.count))
        self._keep.append((p, g))
        self.nbuckets += 1
        return i

    @property
    def flags(self):
        return lib.shoal_sync_flags(self._c())

    @property
    def is_server(self):
        return bool(self.flags & F_SERVER)

    @property
    def server_step(self):
        """True when the parameter servers take the optimizer step (ps workers skip theirs)."""
        return bool(self.flags & F_SERVER_STEP)

    def set_lr(self, lr):
        self._rc(lib.shoal_sync_set_lr(self._c(), float(lr)))

    def begin(self, step):
        self._rc(lib.shoal_sync_begin(self._c(), int(step)))

    def bucket_ready(self, i):
        self._rc(lib.shoal_sync_bucket_ready(self._c(), int(i)))

    def finish(self):
        self._rc(lib.shoal_sync_finish(self._c()))

    def end(self):
        self._rc(lib.shoal_sync_end(self._c()))

    def final(self):
        self._rc(lib.shoal_sync_final(self._c()))

    def serve(self):
        self._rc(lib.shoal_sync_serve(self._c()))

    def pause(self):
        """Between steps, on every worker after the same step, before using the communicator
        yourself (partial with ahead > 0 stops its thread; a no-op for the others)."""
        self._rc(lib.shoal_sync_pause(self._c()))

    def checkpoint(self):
        """Between steps, on every worker: ps servers write their state (config ckpt=PATH)."""
        self._rc(lib.shoal_sync_checkpoint(self._c()))

    def max_staleness(self):
        """ps servers: the largest staleness (clocks) of a gradient applied so far."""
        return self._rc(lib.shoal_sync_max_staleness(self._c()))

    def workers(self):
        """The communicator of the training workers (None on a server); owned by this context."""
        h = lib.shoal_sync_workers(self._c())
        if not h:
            return None
        w = Comm(_handle=h)
        w._borrowed = True
        return w

    def last_step(self):
        """(seconds blocked in finish+end, group size, payload bytes) of the last step."""
        w, g, b = ctypes.c_double(), ctypes.c_int(), ctypes.c_double()
        self._rc(lib.shoal_sync_last_step(self._c(), ctypes.byref(w), ctypes.byref(g), ctypes.byref(b)))
        return w.value, g.value, b.value

    @property
    def errmsg(self):
        return lib.shoal_sync_errmsg(self._c()).decode(errors="replace")

    def destroy(self):
        if self._h is not None:
            lib.shoal_sync_destroy(self._h)
            self._h = None
        self._keep = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()

    def __del__(self):
        if getattr(self, "_h", None) is not None and lib is not None:
            self.destroy()
