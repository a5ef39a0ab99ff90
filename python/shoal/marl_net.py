"""The learned placement policy's network in PyTorch (the C forward pass is src/sched/model/marl_net.c;
docs/learned-placement.md). Needs torch; the rest of the shoal package does not."""
import math
import os
import warnings

import torch
from torch import nn

FS, FM, FR, FJ = 6, 7, 4, 7          # features per socket, server, rack, job (marl_net.h)
HIERARCHY = "rack,server,socket"
FORMAT = "shoal-marl-weights"
VERSION = 1
TENSORS = ["socket", "server", "rack", "score", "out"]


def _segment_mean_max(h, index, groups):
    """h [B, N, H], index [N] (group of each row) -> [B, groups, 2H]: mean and max per group (zeros when
    a group is empty, as the C pass)."""
    warnings.filterwarnings("ignore", message="scatter_reduce")  # "in beta" (torch 1.13): what it computes is stable
    b, n, d = h.shape
    idx = index.view(1, n, 1).expand(b, n, d)
    mean = torch.zeros(b, groups, d, dtype=h.dtype).scatter_reduce(1, idx, h, reduce="mean", include_self=False)
    mx = torch.zeros(b, groups, d, dtype=h.dtype).scatter_reduce(1, idx, h, reduce="amax", include_self=False)
    return torch.cat([mean, mx], -1)


class Net(nn.Module):
    """hs = relu(Ws xs + bs); hm = relu(Wm [xm, mean hs, max hs] + bm); hr = relu(Wr [xr, mean hm, max hm] + br);
    hp = [mean hr, max hr]; logit(s) = wo . relu(Wc [hs, hm, hr, hp, xj] + bc) + bo, masked."""

    def __init__(self, hidden=32):
        super().__init__()
        h = hidden
        self.hidden = h
        self.socket = nn.Linear(FS, h)
        self.server = nn.Linear(FM + 2 * h, h)
        self.rack = nn.Linear(FR + 2 * h, h)
        self.score = nn.Linear(5 * h + FJ, h)
        self.out = nn.Linear(h, 1)

    def forward(self, xs, xm, xr, xj, sock_serv, serv_rack, mask):
        """xs [B, S, FS], xm [B, M, FM], xr [B, R, FR], xj [B, FJ]; sock_serv [S], serv_rack [M] (int64,
        shared by the batch); mask [B, S] bool -> logits [B, S] (-inf where masked)."""
        relu = torch.relu
        m, r = xm.shape[1], xr.shape[1]
        hs = relu(self.socket(xs))
        hm = relu(self.server(torch.cat([xm, _segment_mean_max(hs, sock_serv, m)], -1)))
        hr = relu(self.rack(torch.cat([xr, _segment_mean_max(hm, serv_rack, r)], -1)))
        hp = torch.cat([hr.mean(1), hr.max(1).values], -1)
        s = xs.shape[1]
        z = torch.cat([hs, hm[:, sock_serv], hr[:, serv_rack[sock_serv]], hp.unsqueeze(1).expand(-1, s, -1),
                       xj.unsqueeze(1).expand(-1, s, -1)], -1)
        logits = self.out(relu(self.score(z))).squeeze(-1)
        return logits.masked_fill(~mask, -math.inf)

    def save(self, path, agents, trained=""):
        """Write the weights file the C policy reads (marl_net.h); numbers with 9 significant digits (exact
        float32)."""
        lines = ["%s %d" % (FORMAT, VERSION), "hierarchy " + HIERARCHY,
                 "features socket=%d server=%d rack=%d job=%d" % (FS, FM, FR, FJ),
                 "hidden %d" % self.hidden, "agents %d" % agents]
        if trained:
            lines.append("trained " + " ".join(trained.split()))
        for name in TENSORS:
            layer = getattr(self, name)
            for part, t in (("W", layer.weight), ("b", layer.bias)):
                t = t.detach().to(torch.float32)
                rows, cols = (t.shape[0], t.shape[1]) if t.dim() == 2 else (t.shape[0], 1)
                lines.append("tensor %s.%s %d %d" % (name, part, rows, cols))
                for row in t.reshape(rows, cols).tolist():
                    lines.append(" ".join("%.9g" % x for x in row))
        lines.append("end")
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path):
        """Read a weights file (the layout save() writes; the C reader is the strict one)."""
        head, tensors = {}, {}
        with open(path) as f:
            toks = [l.split() for l in f if l.strip() and not l.lstrip().startswith("#")]
        i = 0
        if not toks or toks[0][0] != FORMAT or int(toks[0][1]) != VERSION:
            raise ValueError("%s: not a %s %d file" % (path, FORMAT, VERSION))
        i = 1
        while toks[i][0] != "tensor":
            head[toks[i][0]] = " ".join(toks[i][1:])
            i += 1
        flat = []
        order = []
        while toks[i][0] != "end":
            if toks[i][0] == "tensor":
                order.append((toks[i][1], int(toks[i][2]), int(toks[i][3])))
            else:
                flat.extend(float(x) for x in toks[i])
            i += 1
        net = cls(int(head["hidden"]))
        pos = 0
        for name, rows, cols in order:
            layer, part = name.split(".")
            t = torch.tensor(flat[pos:pos + rows * cols], dtype=torch.float32)
            pos += rows * cols
            p = getattr(getattr(net, layer), "weight" if part == "W" else "bias")
            with torch.no_grad():
                p.copy_(t.reshape(p.shape))
        return net, int(head["agents"]), head.get("trained", "")
