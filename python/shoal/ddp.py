"""A DistributedDataParallel-like wrapper for torch.nn.Module over shoal.

    comm = shoal.Comm()                                  # from SHOAL_*/torchrun variables
    model = shoal.ddp.DistributedDataParallel(net, comm, sync="bsp")
    for x, y in batches:
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward()                 # bsp: gradients averaged when this returns
        opt.step()
    model.final()                                        # every rank holds the same model

The parameters (float32, requiring grad) are moved into flat buckets of about bucket_mb each, in
reverse registration order (backward produces the last layers' gradients first, as in PyTorch's DDP);
each parameter's .data and .grad become views of its bucket, so nothing is copied. A hook on every
parameter's gradient accumulator counts the gradients of its bucket; a bucket whose gradients are all
final is handed to shoal at once, in bucket order, and reduced while backward goes on. The end of the
backward pass waits for what is still in flight.

Strategies (sync=, with config= their "key=value ..." settings): the C implementations of
include/shoal/sync.h, the same code `shoal train` runs; nothing of them is written again in Python.
  "bsp"       gradients of every bucket averaged every step; each bucket's allreduce starts on shoal's
              communication thread as soon as the bucket is ready (overlap=1), backward goes on
  "dssync"    divide-and-shuffle: parameters averaged within groups that change every step
              (pattern=random|butterfly|topo|fixed, k=..., global_every=..., overlap=...)
  "localsgd"  parameters averaged every period=H steps
With "dssync" and "localsgd" the ranks' models differ between averages; final() averages them.
Frozen parameters and buffers are rank 0's at construction; final() averages the floating-point
buffers (BatchNorm's running statistics) over the ranks and gives the rest rank 0's values.
"""
import torch

from .comm import Comm, InvalidArgument
from .sync import Sync


class _Bucket:
    __slots__ = ("index", "params", "offsets", "count", "pbuf", "gbuf", "ready", "pending")

    def __init__(self, index):
        self.index, self.params, self.offsets, self.count = index, [], [], 0
        self.pbuf = self.gbuf = None
        self.ready = 0
        self.pending = False


class DistributedDataParallel(torch.nn.Module):
    def __init__(self, module, comm=None, sync="bsp", bucket_mb=4.0, config=None, broadcast=True):
        super().__init__()
        self.module = module
        self.comm = comm if comm is not None else Comm()
        self.sync_name = sync
        self.step = 0
        self._in_backward = False
        self._step_open = False
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            raise InvalidArgument(-1, "DistributedDataParallel: the module has no parameter requiring grad")
        for p in params:
            if p.dtype != torch.float32 or p.device.type != "cpu":
                raise InvalidArgument(-1, "DistributedDataParallel: parameters must be float32 on the CPU "
                                      "(got %s on %s)" % (p.dtype, p.device))
        # buckets in reverse registration order, each at most bucket_mb (a bigger parameter alone)
        cap = max(1, int(bucket_mb * (1 << 20) / 4))
        self.buckets = []
        b = None
        for p in reversed(params):
            if b is None or (b.count and b.count + p.numel() > cap):
                b = _Bucket(len(self.buckets))
                self.buckets.append(b)
            b.params.append(p)
            b.offsets.append(b.count)
            b.count += p.numel()
        self._where = {}
        with torch.no_grad():
            for b in self.buckets:
                b.pbuf = torch.empty(b.count, dtype=torch.float32)
                b.gbuf = torch.zeros(b.count, dtype=torch.float32)
                for p, off in zip(b.params, b.offsets):
                    n = p.numel()
                    b.pbuf[off:off + n].copy_(p.data.reshape(-1))
                    p.data = b.pbuf[off:off + n].view_as(p)
                    p.grad = b.gbuf[off:off + n].view_as(p)
                    self._where[id(p)] = (b, off)
                if broadcast:
                    self.comm.broadcast(b.pbuf, root=0)  # every rank starts from rank 0's model
            # the rest of the model's state: frozen parameters and buffers (BatchNorm's running statistics)
            bucketed = set(self._where)
            self._state = [t for t in list(module.parameters()) + list(module.buffers()) if id(t) not in bucketed]
            if broadcast:
                for t in self._state:
                    self._collective(t, lambda x: self.comm.broadcast(x, root=0))
        self.sync = Sync(self.comm, sync, config)
        for b in self.buckets:
            self.sync.add_bucket(b.pbuf, b.gbuf)
        if self.sync.is_server:
            return  # a parameter server: serve(), no training
        self._acc = []  # gradient accumulators: keep them alive, their hooks are the bucket counters
        for p in params:
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            acc.register_hook(self._make_hook(p))
            self._acc.append(acc)

    # -- forward / backward --
    def forward(self, *args, **kw):
        if torch.is_grad_enabled() and self.training:
            self._close_step()
            self.sync.begin(self.step)
            self._step_open = True
            for b in self.buckets:
                b.ready = 0
                b.pending = False
            self._next = 0
        return self.module(*args, **kw)

    def _make_hook(self, p):
        b, off = self._where[id(p)]
        n = p.numel()

        def hook(*_):
            if not self._step_open:
                return
            if not self._in_backward:
                self._in_backward = True
                torch.autograd.Variable._execution_engine.queue_callback(self._backward_done)
            g = p.grad
            if g is None or g.data_ptr() != b.gbuf[off:off + n].data_ptr():
                # the optimizer dropped or replaced .grad (zero_grad(set_to_none=True)): back into the bucket
                view = b.gbuf[off:off + n].view_as(p)
                with torch.no_grad():
                    if g is None:
                        view.zero_()
                    else:
                        view.copy_(g)
                p.grad = view
            b.ready += 1
            if b.ready == len(b.params):
                b.pending = True
                # hand buckets over in index order on every rank
                while self._next < len(self.buckets) and self.buckets[self._next].pending:
                    self.sync.bucket_ready(self.buckets[self._next].index)
                    self._next += 1
        return hook

    def _backward_done(self):
        self._in_backward = False
        # a parameter without a gradient this step whose .grad the optimizer set to None: its hook
        # did not fire, so its bucket still holds the previous step's gradient; it is reduced as zeros
        with torch.no_grad():
            for b in self.buckets:
                for p, off in zip(b.params, b.offsets):
                    if p.grad is None:
                        view = b.gbuf[off:off + p.numel()].view_as(p)
                        view.zero_()
                        p.grad = view
        self.sync.finish()

    def _close_step(self):
        if self._step_open:
            self.sync.end()
            self._step_open = False
            self.step += 1

    def zero_grad(self, set_to_none=False):
        for b in self.buckets:
            b.gbuf.zero_()

    def final(self):
        """After the last step: close it and leave every rank with the same model: the strategy's final
        parameters, the floating-point buffers (BatchNorm's running statistics) averaged over the ranks,
        the other state (frozen parameters, counters) rank 0's. With ps the workers' buffers stay theirs."""
        self._close_step()
        self.sync.final()
        if self.sync_name == "ps":
            return  # the servers take no part: a collective over the communicator would wait for them
        with torch.no_grad():
            for t in self._state:
                if t.dtype.is_floating_point:
                    self._collective(t, lambda x: self.comm.allreduce(x, op="avg"))
                else:
                    self._collective(t, lambda x: self.comm.broadcast(x, root=0))

    @staticmethod
    def _collective(t, call):
        """call(x) in place on tensor t (through a contiguous copy when t is not contiguous; bool and int8
        state through its bytes, which shoal carries as uint8)."""
        with torch.no_grad():
            x = t.data if t.is_contiguous() else t.data.contiguous()
            call(x.view(torch.uint8) if x.dtype in (torch.bool, torch.int8) else x)
            if x.data_ptr() != t.data.data_ptr():
                t.data.copy_(x)

    @property
    def is_server(self):
        """sync="ps": this rank is a parameter server; call serve() instead of training."""
        return self.sync.is_server

    @property
    def server_step(self):
        """sync="ps": the servers take the optimizer step; workers skip opt.step() (their lr: set_lr)."""
        return self.sync.server_step

    def set_lr(self, lr):
        self.sync.set_lr(lr)

    def serve(self):
        self.sync.serve()

    def destroy(self):
        """Close the open step and release the strategy (the communicator stays the caller's)."""
        if self.sync is not None:
            if not self.sync.is_server:
                self._close_step()
            self.sync.destroy()
            self.sync = None


