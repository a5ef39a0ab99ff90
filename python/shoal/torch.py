"""shoal as a torch.distributed backend.

    import shoal.torch                      # registers the "shoal" backend (so does `import shoal` once
    import torch.distributed as dist        # torch.distributed has been imported)
    dist.init_process_group("shoal")        # env:// (torchrun, shoal launch), tcp://..., or store=...
    dist.all_reduce(t); model = torch.nn.parallel.DistributedDataParallel(net)

Every collective of the group is one non-blocking request of libshoal, issued by a thin C++ process group
(python/shoal/csrc/process_group.cpp, built by `make` as _c10d.so where libtorch-dev is installed). Each
group (the default one, every new_group) is its own shoal world, joined through the store torch gives it.
See docs/python.md, "torch.distributed backend"."""
import fcntl
import importlib.util
import os
import socket
import struct
import sys

import torch
import torch.distributed as dist

from . import _lib  # loads libshoal.so.0 first: the extension's libshoal.so.0 is that one

_HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "shoal"


def _load_extension():
    # next to the library this package loaded (the repository's build/), else installed beside the package
    tried = []
    for path in (os.path.join(os.path.dirname(_lib.path), "_c10d.so"), os.path.join(_HERE, "_c10d.so")):
        if not os.path.exists(path):
            tried.append(path)
            continue
        spec = importlib.util.spec_from_file_location("shoal._c10d", path)
        mod = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(mod)
        except ImportError as e:
            raise ImportError("shoal.torch: %s does not load with this torch %s (rebuild it with `make`): %s"
                              % (path, torch.__version__, e)) from None
        sys.modules["shoal._c10d"] = mod
        return mod
    raise ImportError("shoal.torch: the torch backend is not built (`make` builds it where Debian's libtorch-dev, "
                      "python3-dev and pybind11-dev are installed; scripts/deps.sh test installs them); looked for "
                      + ", ".join(tried))


_ext = _load_extension()
ProcessGroupShoal = _ext.ProcessGroupShoal


def _iface_addr(spec):
    """The IPv4 address of the first interface SHOAL_SOCKET_IFNAME names (prefix, =exact, ^exclude, a comma
    list: the C library's syntax), or None."""
    items = [i for i in spec.lstrip("^").split(",") if i]
    exclude = spec.startswith("^")
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _, name in socket.if_nameindex():
            hit = any(name == i[1:] if i.startswith("=") else name.startswith(i) for i in items)
            if hit == exclude or (exclude and name == "lo"):
                continue
            try:  # SIOCGIFADDR
                req = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue  # no IPv4 address
            return socket.inet_ntoa(req[20:24])
    finally:
        s.close()
    return None


def _store_host(store):
    """The host of the TCPStore behind torch's store of the group (PrefixStores unwrapped), or None."""
    for _ in range(16):
        if isinstance(store, dist.TCPStore):
            return store.host
        store = getattr(store, "underlying_store", None)
        if store is None:
            return None
    return None


def advertise_address(store=None):
    """The address this process offers its group's other ranks when it is the group's rank 0 (they reach its
    shoal store there): the interface SHOAL_SOCKET_IFNAME names; else the local address of the route to the
    host of torch's store (or MASTER_ADDR), the one the other ranks reached too; else the host name's address;
    else 127.0.0.1."""
    spec = os.environ.get("SHOAL_SOCKET_IFNAME")
    if spec:
        addr = _iface_addr(spec)
        if addr:
            return addr
    host = _store_host(store) or os.environ.get("MASTER_ADDR")
    if host:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.connect((host, 9))  # no packet is sent: the kernel picks the route's source address
            return s.getsockname()[0]
        except OSError:
            pass
        finally:
            s.close()
    try:
        addr = socket.gethostbyname(socket.gethostname())
        if not addr.startswith("127."):
            return addr
    except OSError:
        pass
    return "127.0.0.1"


def _create(store, rank, size, timeout):
    return ProcessGroupShoal(store, rank, size, timeout, advertise_address(store))


if not hasattr(dist.Backend, NAME.upper()):
    dist.Backend.register_backend(NAME, _create)


# ---- communication hooks for DistributedDataParallel ----
#
# DDP's hook contract is a gradient hook: it gets a bucket of gradients and returns a future of the
# gradients to apply. Local SGD and DS-Sync average parameters, not gradients, after the optimizer step;
# what of them fits that contract is the gradient side (each rank applies its own gradients: the hook skips
# DDP's allreduce). Their parameter averaging runs after the optimizer step, in state.after_step(module),
# by the C strategies of include/shoal/sync.h (the code `shoal train` and shoal.ddp run) on the group's own
# shoal communicator: the same periods and group patterns, nothing of them written again here.
#
#     state = shoal.torch.DSSyncState(k=2)            # or LocalSGDState(period=8); process_group=...
#     model.register_comm_hook(state, shoal.torch.local_gradients_hook)
#     for x, y in data:
#         opt.zero_grad(); loss(model(x), y).backward(); opt.step()
#         state.after_step(model.module)              # parameters averaged (every period / in groups)
#     state.final(model.module)                      # every rank ends with the global average


def local_gradients_hook(state, bucket):
    """DDP comm hook: no communication, each rank keeps its own gradients (local SGD, DS-Sync)."""
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


class _SyncState:
    """A shoal synchronization strategy (include/shoal/sync.h) over a shoal process group's communicator."""

    def __init__(self, strategy, config, process_group=None):
        from .comm import Comm
        from .sync import Sync
        pg = process_group if process_group is not None else dist.distributed_c10d._get_default_group()
        if not isinstance(pg, ProcessGroupShoal):
            raise TypeError("shoal.torch.%s: the process group must be a shoal one (dist.init_process_group"
                            "(\"shoal\") or dist.new_group(backend=\"shoal\")), not %s" % (type(self).__name__,
                                                                                        type(pg).__name__))
        self.comm = Comm(_handle=pg.handle)
        self.comm._borrowed = True  # the process group's: destroying this wrapper leaves it alone
        self.sync = Sync(self.comm, strategy, config)
        self.step = 0
        self._flat = None
        self._params = None

    def _gather(self, module):
        params = [q for q in module.parameters() if q.requires_grad]
        if self._flat is None:
            if any(q.dtype != torch.float32 for q in params):
                raise TypeError("shoal.torch: %s averages float32 parameters" % self.sync.strategy)
            self._params = params
            self._flat = torch.empty(sum(q.numel() for q in params))
            self._grads = torch.zeros_like(self._flat)  # the strategies' gradient side is unused here
            self.sync.add_bucket(self._flat, self._grads)
        elif [id(q) for q in params] != [id(q) for q in self._params]:
            raise ValueError("shoal.torch: the module's parameters changed since the first after_step")
        torch.cat([q.detach().reshape(-1) for q in params], out=self._flat)

    def _scatter(self):
        off = 0
        with torch.no_grad():
            for q in self._params:
                q.copy_(self._flat[off:off + q.numel()].view_as(q))
                off += q.numel()

    def after_step(self, module):
        """After the optimizer step, on every rank: the strategy's parameter averaging of this step."""
        self._gather(module)
        self.sync.begin(self.step)
        self.sync.finish()
        self.sync.end()
        self.step += 1
        self._scatter()

    def final(self, module):
        """After the last step: every rank holds the global average."""
        self._gather(module)
        self.sync.final()
        self._scatter()

    def __setstate__(self, state):  # DDP may pickle hook states; this one holds a live communicator
        raise TypeError("shoal.torch hook states cannot be pickled")


class LocalSGDState(_SyncState):
    """Local SGD: parameters averaged over the group after every period-th step (steps period-1, 2*period-1...)."""

    def __init__(self, period=8, process_group=None):
        super().__init__("localsgd", "period=%d" % int(period), process_group)


class DSSyncState(_SyncState):
    """DS-Sync (divide and shuffle): after every step, parameters averaged within groups of k ranks that
    change every step (pattern random, butterfly...; global_every=n adds a global average every n steps)."""

    def __init__(self, k=2, pattern="random", seed=1, global_every=0, process_group=None):
        super().__init__("dssync", "pattern=%s k=%d seed=%d global_every=%d" % (pattern, int(k), int(seed),
                                                                               int(global_every)), process_group)
