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

As torch's DDP: every rank must wrap the same model with the same strategy and options (checked at
construction); find_unused_parameters=True leaves .grad None on a parameter no rank used in a step (the
optimizer leaves it alone); broadcast_buffers=True (the default) gives every forward rank 0's buffers
(BatchNorm's running statistics); no_sync() accumulates gradients locally; join() lets ranks with fewer
batches shadow the others' steps. A train-mode forward without backward starts nothing, several forwards
before one backward are one step, and a second backward of the same graph (retain_graph) accumulates local
gradients. checkpoint() and load_checkpoint() save and resume each rank's state (docs/python.md).
"""
import contextlib
import zlib

import torch

from .comm import Comm, InvalidArgument
from .sync import F_GRADS, Sync


class _Bucket:
    __slots__ = ("index", "params", "offsets", "count", "pbuf", "gbuf", "ready", "pending")

    def __init__(self, index):
        self.index, self.params, self.offsets, self.count = index, [], [], 0
        self.pbuf = self.gbuf = None
        self.ready = 0
        self.pending = False


class DistributedDataParallel(torch.nn.Module):
    def __init__(self, module, comm=None, sync="bsp", bucket_mb=4.0, config=None, broadcast=True,
                 find_unused_parameters=False, broadcast_buffers=True):
        super().__init__()
        self.module = module
        self.comm = comm if comm is not None else Comm()
        self.sync_name = sync
        self.step = 0  # synchronized steps so far: save it with a checkpoint, set it when resuming
        self.find_unused_parameters = find_unused_parameters
        self.broadcast_buffers = broadcast_buffers
        self._in_backward = False
        self._open = self._finished = False  # a step begun; its backward's finish called
        self._armed = False  # a forward since the last step: its backward begins one
        self._sync_buffers_next = True  # DDP's require_forward_param_sync: the last forward synchronized
        self._no_sync = self._joining = False
        self._trained = 0  # steps this rank trained (not shadowed in join())
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            raise InvalidArgument(-1, "DistributedDataParallel: the module has no parameter requiring grad")
        for p in params:
            if p.dtype != torch.float32 or p.device.type != "cpu":
                raise InvalidArgument(-1, "DistributedDataParallel: parameters must be float32 on the CPU "
                                      "(got %s on %s)" % (p.dtype, p.device))
        self._check_same_setup(module, sync, config, bucket_mb)
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
        self._params = params
        with torch.no_grad():
            for b in self.buckets:
                b.pbuf = torch.empty(b.count, dtype=torch.float32)
                b.gbuf = torch.zeros(b.count, dtype=torch.float32)
                for p, off in zip(b.params, b.offsets):
                    n = p.numel()
                    b.pbuf[off:off + n].copy_(p.data.reshape(-1))
                    p.data = b.pbuf[off:off + n].view_as(p)
                    # .grad stays None until a gradient comes (a parameter never used keeps None, as with DDP)
                    self._where[id(p)] = (b, off)
                if broadcast:
                    self.comm.broadcast(b.pbuf, root=0)  # every rank starts from rank 0's model
            # the rest of the model's state: frozen parameters and buffers (BatchNorm's running statistics)
            bucketed = set(self._where)
            self._state = [t for t in list(module.parameters()) + list(module.buffers()) if id(t) not in bucketed]
            self._buffers = list(module.buffers())
            if broadcast:
                for t in self._state:
                    self._collective(t, lambda x: self.comm.broadcast(x, root=0))
        self._ptrs = [p.data_ptr() for p in params]
        self._index = {id(p): i for i, p in enumerate(params)}
        self._used = torch.zeros(len(params), dtype=torch.bool)
        self.sync = Sync(self.comm, sync, config)  # every rank the same strategy and config, or an error on all
        for b in self.buckets:
            self.sync.add_bucket(b.pbuf, b.gbuf)
        # find_unused_parameters with averaged gradients: one more bucket, never reported ready (finish reduces
        # it), holds 1 for each parameter this rank used: after the average, > 0 where some rank did
        self._usage = None
        if find_unused_parameters and self.sync.flags & F_GRADS:
            self._usage = torch.zeros(len(params), dtype=torch.float32)
            self._usage_p = torch.zeros(len(params), dtype=torch.float32)
            self.sync.add_bucket(self._usage_p, self._usage)
        if self.sync.is_server:
            return  # a parameter server: serve(), no training
        self._peers = self.sync.workers() or self.comm  # the training ranks (ps: without the servers)
        self._acc = []  # gradient accumulators: keep them alive, their hooks are the bucket counters
        for p in params:
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            acc.register_hook(self._make_hook(p))
            self._acc.append(acc)

    # -- construction checks --
    def _check_same_setup(self, module, sync, config, bucket_mb):
        """Every rank wraps the same parameters (names, order, shapes, dtypes) with the same strategy, settings and
        options, as DDP checks the model: a rank built otherwise would get rank 0's bytes in the wrong places, or
        train on a mixture of two strategies without an error. Raises InvalidArgument on every rank, naming the
        first thing that differs and the rank."""
        settings = " ".join(sorted((config or "").split()))  # "k=2 seed=1" is "seed=1 k=2"
        items = ["strategy %s with \"%s\"" % (sync, settings), "bucket_mb=%g" % bucket_mb,
                 "find_unused_parameters=%s" % self.find_unused_parameters,
                 "broadcast_buffers=%s" % self.broadcast_buffers]
        items += ["parameter %d %s: %s %s%s" % (i, n, tuple(p.shape), str(p.dtype)[6:], "" if p.requires_grad
                                                  else " (frozen)") for i, (n, p) in enumerate(module.named_parameters())]
        desc = "\n".join(items).encode()
        mine = torch.tensor([zlib.crc32(desc), len(desc)], dtype=torch.int64)
        every = torch.zeros(2 * self.comm.size, dtype=torch.int64)
        self.comm.allgather(mine, every)
        every = every.view(-1, 2)
        if bool((every == every[0]).all()):
            return
        # someone differs: every rank gets every description, and says what differs between rank 0 and the first
        bad = next(r for r in range(self.comm.size) if not bool((every[r] == every[0]).all()))
        width = int(every[:, 1].max())
        buf = torch.zeros(width, dtype=torch.uint8)
        if desc:
            buf[:len(desc)] = torch.frombuffer(bytearray(desc), dtype=torch.uint8)
        allb = torch.zeros(width * self.comm.size, dtype=torch.uint8)
        self.comm.allgather(buf, allb)
        d0, db = (bytes(allb[r * width:(r + 1) * width].tolist()).rstrip(b"\0").decode().split("\n")
                  for r in (0, bad))
        k = next(i for i in range(max(len(d0), len(db))) if i >= len(d0) or i >= len(db) or d0[i] != db[i])
        what = lambda d: d[k] if k < len(d) else "no parameter %d (%d in all)" % (k - 4, len(d) - 4)  # noqa: E731
        raise InvalidArgument(-1, "DistributedDataParallel: rank %d differs from rank 0 (this is rank %d): rank 0 has "
                              "%s, rank %d %s; every rank must wrap the same model with the same strategy and "
                              "options" % (bad, self.comm.rank, what(d0), bad, what(db)))

    def _check_intact(self):
        for p, ptr in zip(self._params, self._ptrs):
            if p.data_ptr() != ptr or p.dtype != torch.float32:
                raise InvalidArgument(-1, "DistributedDataParallel: a parameter was replaced after wrapping (%s %s: "
                                      ".double(), .half(), .to() or an assignment to .data?): the wrapper reduces the "
                                      "float32 buckets it made at construction; convert the module first, then wrap it"
                                      % (p.dtype, tuple(p.shape)))

    # -- forward / backward --
    #
    # A synchronized step begins at the first gradient of a backward pass that follows a forward (sync.begin),
    # its backward's end waits for the gradient phase (sync.finish), and the next forward (or checkpoint(),
    # final(), destroy()) ends it (sync.end: the parameter averaging of dssync and localsgd, after the caller's
    # optimizer step). So, as with torch's DDP: a train-mode forward without backward starts nothing; several
    # forwards before one backward are one step; a second backward of the same graph (retain_graph=True) only
    # accumulates this rank's gradients; backward passes inside no_sync() accumulate locally too.
    def forward(self, *args, **kw):
        self._check_intact()
        sync = torch.is_grad_enabled() and not self._no_sync  # this forward's backward synchronizes
        if sync or self._joining or self._buffers_due():
            self._close_step()  # the communicator is free for what comes before the forward
            self._before_forward(sync=sync)
        else:
            self._sync_buffers_next = False
        if torch.is_grad_enabled():
            self._armed = sync
        return self.module(*args, **kw)

    def _buffers_due(self):
        return self._sync_buffers_next and self.broadcast_buffers and bool(self._buffers)

    def _before_forward(self, active=True, sync=True):
        """What every rank does before a forward, as DDP does: under join(), one allreduce tells the ranks
        whether any still trains, the highest such rank (whose buffers are broadcast) and whether its backward
        synchronizes; then the buffers (BatchNorm's running statistics), when the last forward was one of a
        synchronized step (or this is the first). Returns (a rank still trains, its backward synchronizes)."""
        src, more = 0, True
        if self._joining:
            n = torch.tensor([int(active), self.comm.rank if active else -1, int(active and sync)],
                             dtype=torch.int32)
            self._peers.allreduce(n, op="max")
            more, src, sync = bool(n[0]), int(n[1]), bool(n[2])
        if more and self._buffers_due():
            with torch.no_grad():
                for t in self._buffers:
                    self._collective(t, lambda x: self._peers.broadcast(x, root=src))
        if more:
            self._sync_buffers_next = sync
        return more, sync

    def _begin_step(self):
        self.sync.begin(self.step)
        self._trained += 1
        self._open, self._finished, self._armed = True, False, False
        for b in self.buckets:
            b.ready = 0
            b.pending = False
        self._next = 0
        self._used.zero_()

    def _make_hook(self, p):
        b, off = self._where[id(p)]
        n = p.numel()
        i = self._index[id(p)]

        def hook(*_):
            if not self._open:
                if not self._armed:
                    return  # no_sync(), or a backward with no forward since the last step: local accumulation
                self._begin_step()
            elif self._finished:
                return  # a second backward of the step's graph (retain_graph): local accumulation, as DDP
            if not self._in_backward:
                self._in_backward = True
                torch.autograd.Variable._execution_engine.queue_callback(self._backward_done)
            self._used[i] = True
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

    def _zero_missing_grads(self):
        """A parameter without a gradient this step whose .grad the optimizer set to None: its hook did not
        fire, so its bucket still holds an old gradient; it is reduced as zeros. Returns their indices."""
        missing = set()
        with torch.no_grad():
            for b in self.buckets:
                for p, off in zip(b.params, b.offsets):
                    if p.grad is None:
                        view = b.gbuf[off:off + p.numel()].view_as(p)
                        view.zero_()
                        p.grad = view
                        missing.add(self._index[id(p)])
        return missing

    def _backward_done(self):
        self._in_backward = False
        missing = self._zero_missing_grads()
        kept = {}
        if self.find_unused_parameters:  # what this rank's unused parameters held, for the ones no rank used
            kept = {i: self._params[i].grad.clone() for i in torch.nonzero(~self._used).flatten().tolist()
                    if i not in missing}
        if self._usage is not None:
            self._usage.copy_(self._used.float())
        self.sync.finish()
        self._finished = True
        if self.find_unused_parameters:
            # as DDP: a parameter no rank used keeps its .grad as it was (None stays None: the optimizer leaves
            # the parameter alone); with strategies that average no gradients, "no rank" is this rank
            unused = self._usage == 0 if self._usage is not None else ~self._used
            with torch.no_grad():
                for i in torch.nonzero(unused).flatten().tolist():
                    if i in kept:
                        self._params[i].grad.copy_(kept[i])
                    else:
                        self._params[i].grad = None

    def _close_step(self):
        """End the step begun by the last backward (its parameter phase), if one is open."""
        if not self._open:
            return
        if not self._finished:  # its backward raised before its end: finish it as it stands
            self._finished = True
            self.sync.finish()
        self.sync.end()
        self._open = self._finished = False
        self.step += 1

    @contextlib.contextmanager
    def no_sync(self):
        """As DDP's: backward passes of forwards run inside accumulate gradients on this rank only; the first
        synchronized backward after it averages the accumulated gradients."""
        old, self._no_sync = self._no_sync, True
        try:
            yield
        finally:
            self._no_sync = old

    @contextlib.contextmanager
    def join(self):
        """As DDP's join() for uneven inputs: every rank enters it around its training loop; a rank whose
        batches ran out shadows the others' steps (zero gradients in their averages, their buffer broadcasts)
        until every rank is done; then every rank takes the model of the highest rank among those that trained
        longest. Inside it, every forward must be followed by its backward."""
        self._joining = True
        try:
            yield
        except BaseException:
            self._joining = False
            raise
        self._close_step()
        while True:
            more, sync = self._before_forward(active=False)
            if not more:
                break
            if sync:
                self._shadow_step()
        self._joining = False
        self._sync_from_last_joiner()

    def _shadow_step(self):
        for b in self.buckets:
            b.gbuf.zero_()
        if self._usage is not None:
            self._usage.zero_()
        self.sync.begin(self.step)
        self.sync.finish()
        self.sync.end()
        self.step += 1

    def _sync_from_last_joiner(self):
        key = torch.tensor([self._trained * self.comm.size + self.comm.rank], dtype=torch.int64)
        self.comm.allreduce(key, op="max")
        src = int(key[0]) % self.comm.size
        with torch.no_grad():
            for b in self.buckets:
                self.comm.broadcast(b.pbuf, root=src)
            for t in self._state:
                self._collective(t, lambda x: self.comm.broadcast(x, root=src))

    # -- checkpoints --
    def checkpoint(self):
        """Between steps (after the optimizer step), on every rank: ends the open step (its parameter phase:
        dssync and localsgd average here) and returns this rank's state to save with the optimizer's, each rank
        its own (with dssync and localsgd the ranks' models differ between averages):
            torch.save({"ddp": model.checkpoint(), "opt": opt.state_dict()}, "ckpt.%d" % rank)
        Resume by wrapping the model again, then model.load_checkpoint(ck["ddp"]) and opt.load_state_dict(ck["opt"]):
        the run goes on as if never stopped."""
        self._close_step()
        return {"module": self.module.state_dict(), "step": self.step, "strategy": self.sync_name}

    def load_checkpoint(self, state):
        """This rank's state from checkpoint() (after wrapping, which gave every rank rank 0's model)."""
        if state.get("strategy") != self.sync_name:
            raise InvalidArgument(-1, "DistributedDataParallel.load_checkpoint: a checkpoint of strategy %s, this "
                                  "wrapper runs %s" % (state.get("strategy"), self.sync_name))
        self._close_step()
        with torch.no_grad():
            self.module.load_state_dict(state["module"])
        self._check_intact()
        self.step = int(state["step"])

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
        """call(x) in place on tensor t (through a contiguous copy when t is not contiguous)."""
        with torch.no_grad():
            x = t.data if t.is_contiguous() else t.data.contiguous()
            call(x)
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
