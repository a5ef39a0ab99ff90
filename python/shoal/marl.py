"""Training the learned placer (docs/learned-placement.md): centralized training of the agents' shared
network with a team reward, through the simulator's step interface (shoal.sim.PlacementEnv); the
trained weights are a file the C policy `marl:weights=FILE` runs with no Python.

    python3 -m shoal.marl train --out W.weights [--seed 1] [--iters 60] [--rollouts 4] [--agents 2] ...
    python3 -m shoal.marl eval --weights W.weights [--windows ...]

Algorithm (REINFORCE with a time-based baseline, as Decima trains its scheduler): each iteration takes
one training window of the trace and runs `rollouts` episodes on it, every decision sampled from the
masked softmax of the network. The team reward of a decision is minus the growth of the jobs-in-system
integral until the next decision (shared by every agent: minimizing it minimizes the sum of JCTs); its
return is minus the integral from the decision to the end. The baseline at time t is the mean return of
the episodes at t (interpolated), so that each decision is credited with how much better its episode did
from that point than the others. Loss: -mean(advantage x log pi) - entropy_weight x entropy; Adam.
"""
import argparse
import json
import math
import os
import random
import sys
import time

import numpy as np
import torch

from .marl_net import Net
from .sim import PlacementEnv

PHILLY = "../shared/data/philly/philly.csv"
DAY = 86400.0


def topology_config(name):
    """The clusters the experiments train and test on (docs/learned-placement.md)."""
    t = {"8x2": "machines=32 gpus=8 racks=8 oversub=2 sockets=2",     # 256 GPUs, 8 per server, 2:1 uplinks
         "4x4": "machines=64 gpus=4 racks=8 oversub=4 sockets=2",     # 256 GPUs, 4 per server, 4:1 uplinks
         "8x2-small": "machines=16 gpus=8 racks=4 oversub=2 sockets=2"}  # 128 GPUs: jobs queue and co-locate
    if name not in t:
        sys.exit("marl: --topology %s: expected one of %s" % (name, ", ".join(t)))
    return t[name]


def parse_windows(spec):
    """'A-B,C-D' in days since the trace's first submission -> [(start_s, end_s)]."""
    out = []
    for part in spec.split(","):
        a, b = part.split("-")
        out.append((float(a) * DAY, float(b) * DAY))
    return out


def env_config(args, window, weights=None):
    cfg = "trace=%s window_start=%g window_end=%g %s agents=%d interference=%s load_scale=%g seed=%d" % (
        args.trace, window[0], window[1], topology_config(args.topology), args.agents, args.interference,
        args.load_scale, args.seed)
    if weights:
        cfg += " weights=" + weights
    return cfg


def to_tensors(batch):
    """A list of Observations of one partition shape -> the Net's inputs."""
    st = lambda k: torch.from_numpy(np.stack([getattr(o, k) for o in batch]))
    o0 = batch[0]
    return (st("socket"), st("server"), st("rack"), st("job"), torch.from_numpy(o0.socket_server),
            torch.from_numpy(o0.server_rack), st("mask"))


def teacher_action(o):
    """The warm start's teacher, a placement rule on the features alone: a server where consolidation
    would put workers of this job not placed yet; then the socket of a server that already has this job's
    workers, then one with room for all its remaining workers, not adding a machine, the fullest (best
    fit), the least interference, the socket with this job's workers."""
    sv = o.server[o.socket_server]
    score = (100 * (sv[:, 6] > 0) + 4 * sv[:, 1] + 2 * sv[:, 4] - 2 * sv[:, 5] - sv[:, 0]
             - 0.5 * (o.socket[:, 2] + o.socket[:, 3]) + 0.5 * o.socket[:, 1])
    return int(np.argmax(np.where(o.mask, score, -np.inf)))


def run_episode(env, net, seed, greedy=False, gen=None, record=True, teacher=False):
    """One episode; returns (decisions [(obs, action, now, area, teacher's action)], area_final, report).
    teacher: the teacher's actions drive the episode."""
    obs = env.reset(seed)
    dec = []
    while obs is not None:
        t = teacher_action(obs)
        if teacher:
            if record:
                dec.append((obs, t, obs.now, obs.area, t))
            obs = env.step(t)
            continue
        with torch.no_grad():
            logits = net(*to_tensors([obs]))[0]
        if greedy:
            a = int(torch.argmax(logits))
        else:
            p = torch.softmax(logits, 0)
            a = int(torch.multinomial(p, 1, generator=gen))
        if record:
            dec.append((obs, a, obs.now, obs.area, t))
        obs = env.step(a)
    rep, area = env.report()
    return dec, area, rep


def advantages(episodes):
    """episodes: [(decisions, area_final)] -> per episode an array of advantages (time-based baseline)."""
    curves = []
    for dec, area in episodes:
        t = np.array([d[2] for d in dec] + [math.inf])
        g = np.array([-(area - d[3]) for d in dec] + [0.0])
        curves.append((t, g))
    out = []
    for (dec, _), (t, g) in zip(episodes, curves):
        if not dec:
            out.append(np.zeros(0))
            continue
        base = np.zeros(len(dec))
        for t2, g2 in curves:
            # return-to-go of the other episode at the same times: step-wise (the value at its last
            # decision at or before t; before its first decision, its whole return)
            idx = np.searchsorted(t2, t[:-1], side="right") - 1
            base += np.where(idx >= 0, g2[np.maximum(idx, 0)], g2[0])
        base /= len(curves)
        out.append(g[:-1] - base)
    return out


def policy_loss(net, episodes, advs, entropy_weight, chunk=256):
    """Mean -A log pi - entropy term over every decision (batched per partition shape)."""
    items = [(o, a, adv) for (dec, _), A in zip(episodes, advs) for (o, a, _, _, _), adv in zip(dec, A)]
    if not items:
        return None
    total = 0.0
    groups = {}
    for it in items:
        groups.setdefault((it[0].socket.shape[0], it[0].server.shape[0], it[0].rack.shape[0]), []).append(it)
    ent_sum = 0.0
    for g in groups.values():
        for i in range(0, len(g), chunk):
            part = g[i:i + chunk]
            logits = net(*to_tensors([p[0] for p in part]))
            logp = torch.log_softmax(logits, -1)
            a = torch.tensor([p[1] for p in part])
            adv = torch.tensor([p[2] for p in part], dtype=torch.float32)
            chosen = logp.gather(1, a.view(-1, 1)).squeeze(1)
            # masked sockets: p = 0 and log p = -inf; their terms are 0 (log p replaced by 0), so that no -inf
            # enters a product (its gradient would be 0 x inf = nan)
            safe = logp.masked_fill(~torch.isfinite(logp), 0.0)
            ent = -(safe.exp() * safe).sum(-1)
            total = total + (-(adv * chosen).sum() - entropy_weight * ent.sum())
            ent_sum += float(ent.sum())
    return total / len(items), ent_sum / len(items)


def imitation_step(net, opt, buffer, steps, rng, batch=256):
    """`steps` Adam steps on the cross-entropy of the network against the teacher's actions, on
    minibatches of one partition shape from the buffer of (observation, teacher's action) seen so far
    (DAgger: the states the network's own actions reached). Returns the agreement before the steps."""
    groups = {}
    for it in buffer:
        groups.setdefault((it[0].socket.shape[0], it[0].server.shape[0], it[0].rack.shape[0]), []).append(it)
    keys = sorted(groups)
    with torch.no_grad():
        last = buffer[-min(len(buffer), 1024):]
        g0 = [x for x in last if x[0].socket.shape == last[0][0].socket.shape]
        agree = float((net(*to_tensors([x[0] for x in g0])).argmax(-1) == torch.tensor([x[1] for x in g0])).float().mean())
    for _ in range(steps):
        g = groups[keys[rng.randrange(len(keys))]]
        part = [g[rng.randrange(len(g))] for _ in range(min(batch, len(g)))]
        logp = torch.log_softmax(net(*to_tensors([p[0] for p in part])), -1)
        t = torch.tensor([p[1] for p in part])
        loss = -logp.gather(1, t.view(-1, 1)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return agree


def train(args):
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    rng = random.Random(args.seed)
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(args.seed)
    windows = parse_windows(args.windows)
    envs = [PlacementEnv(env_config(args, w)) for w in windows]
    net = Net(args.hidden)
    if args.init:
        net, _, _ = Net.load(args.init)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    start = 0
    if args.state and os.path.exists(args.state):
        # a run continued: everything that decides what happens next comes back, so that a run in
        # pieces (--stop-after) is the same run as one piece
        st = torch.load(args.state)
        net.load_state_dict(st["net"])
        opt.load_state_dict(st["opt"])
        rng.setstate(st["rng"])
        gen.set_state(st["gen"])
        start = st["iter"]
    log = open(args.log, "a" if start else "w") if args.log else None
    if log and not start:
        log.write("iter,phase,window,seed,episodes,decisions,jct_avg_mean,jct_avg_best,entropy,agreement,wall_s\n")
    t0 = time.time()
    end = args.iters if not args.stop_after else min(args.iters, start + args.stop_after)
    buffer = []  # imitation: (observation, teacher's action); not kept in --state (imitation ends early)
    for it in range(start, end):
        wi = rng.randrange(len(envs))
        seed = rng.randrange(1, 1 << 30)
        eps = []
        jcts = []
        imitate = it < args.pretrain
        for k in range(args.rollouts):
            dec, area, rep = run_episode(envs[wi], net, seed, gen=gen, teacher=imitate and it == 0 and k == 0)
            eps.append((dec, area))
            jcts.append(rep.jct_avg_s)
        if imitate:
            buffer.extend((d[0], d[4]) for dec, _ in eps for d in dec)
            del buffer[:-args.buffer]
            # a window whose jobs all started without a decision leaves nothing to imitate yet
            agree = imitation_step(net, opt, buffer, args.bc_steps, rng) if buffer else float("nan")
            line = "%d,imitate,%d,%d,%d,%d,%.1f,%.1f,nan,%.4f,%.1f" % (
                it, wi, seed, len(eps), sum(len(d) for d, _ in eps), float(np.mean(jcts)), float(np.min(jcts)), agree,
                time.time() - t0)
            if log:
                log.write(line + "\n")
                log.flush()
            print("iter " + line, flush=True)
            continue
        advs = advantages(eps)
        flat = np.concatenate([a for a in advs if len(a)]) if any(len(a) for a in advs) else np.zeros(1)
        scale = flat.std() + 1e-9
        advs = [a / scale for a in advs]
        res = policy_loss(net, eps, advs, args.entropy)
        ent = float("nan")
        if res is not None:
            loss, ent = res
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
        ndec = sum(len(d) for d, _ in eps)
        line = "%d,reinforce,%d,%d,%d,%d,%.1f,%.1f,%.4f,nan,%.1f" % (
            it, wi, seed, len(eps), ndec, float(np.mean(jcts)), float(np.min(jcts)), ent, time.time() - t0)
        if log:
            log.write(line + "\n")
            log.flush()
        print("iter %s" % line, flush=True)
        if args.checkpoint_every and (it + 1) % args.checkpoint_every == 0:
            net.save(args.out, args.agents, trained_line(args, it + 1))
    if args.state:
        torch.save({"net": net.state_dict(), "opt": opt.state_dict(), "rng": rng.getstate(), "gen": gen.get_state(),
                    "iter": end}, args.state + ".tmp")
        os.replace(args.state + ".tmp", args.state)
    net.save(args.out, args.agents, trained_line(args, end))
    print("wrote %s (%d of %d iterations, %.0f s)" % (args.out, end, args.iters, time.time() - t0))
    for e in envs:
        e.close()


def trained_line(args, iters):
    return "python3 -m shoal.marl train --seed %d --iters %d --rollouts %d --agents %d --topology %s --windows %s " \
           "--load-scale %g --hidden %d --lr %g --entropy %g --pretrain %d --bc-steps %d (%d iterations done)" % (
               args.seed, args.iters, args.rollouts, args.agents, args.topology, args.windows, args.load_scale,
               args.hidden, args.lr, args.entropy, args.pretrain, args.bc_steps, iters)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m shoal.marl", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    tr = sub.add_parser("train", help="train from scratch (or --init FILE) and write a weights file")
    tr.add_argument("--out", required=True)
    tr.add_argument("--seed", type=int, default=1)
    tr.add_argument("--iters", type=int, default=80)
    tr.add_argument("--rollouts", type=int, default=4)
    tr.add_argument("--agents", type=int, default=2)
    tr.add_argument("--topology", default="8x2")
    tr.add_argument("--trace", default=PHILLY)
    # busy days of the Philly trace (its first 19 days hold a few jobs each); day 25 (the scenario
    # interference) and those after 34 stay out for testing
    tr.add_argument("--windows", default="20-21,21-22,22-23,23-24,27-28,29-30,31-32,33-34",
                    help="training windows, days since the first submission (A-B,C-D,...)")
    tr.add_argument("--load-scale", type=float, default=2)
    tr.add_argument("--interference", default="shipped")
    tr.add_argument("--hidden", type=int, default=32)
    tr.add_argument("--lr", type=float, default=3e-3)
    tr.add_argument("--entropy", type=float, default=0.01)
    tr.add_argument("--pretrain", type=int, default=40,
                    help="first iterations imitate the teacher rule (DAgger) instead of following the reward")
    tr.add_argument("--bc-steps", type=int, default=100, help="imitation: Adam steps per iteration")
    tr.add_argument("--buffer", type=int, default=30000, help="imitation: decisions kept")
    tr.add_argument("--init")
    tr.add_argument("--log")
    tr.add_argument("--checkpoint-every", type=int, default=5)
    tr.add_argument("--state", help="training state file: continue from it when it exists, write it at the end")
    tr.add_argument("--stop-after", type=int, default=0, help="run at most N iterations in this call (with --state)")
    a = ap.parse_args(argv)
    if a.cmd == "train":
        if a.iters < 1 or a.rollouts < 2 or not 1 <= a.agents <= 64 or not 1 <= a.hidden <= 256:
            sys.exit("marl: --iters >= 1, --rollouts >= 2, --agents 1..64, --hidden 1..256")
        train(a)


if __name__ == "__main__":
    main()
