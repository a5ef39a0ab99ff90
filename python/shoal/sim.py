"""The simulator's step interface (include/shoal/sim.h, shoal_sim_env_*): an episode of the learned
placer `marl` in which Python takes every placement decision. Used by the trainer (shoal.marl); see
docs/learned-placement.md.

    env = PlacementEnv("trace=../shared/data/philly/philly.csv window_start=0 window_end=86400 "
                       "machines=16 gpus=8 racks=4 oversub=2 agents=2")
    obs = env.reset(seed=1)
    while obs is not None:
        obs = env.step(int(np.flatnonzero(obs.mask)[0]))
    report, area = env.report()
"""
import ctypes

import numpy as np

from ._lib import c_double, c_int, c_void_p, lib, P, PP
from .comm import check

_F = ctypes.POINTER(ctypes.c_float)
_I = ctypes.POINTER(ctypes.c_int32)
_U = ctypes.POINTER(ctypes.c_uint8)


class _Obs(ctypes.Structure):
    _fields_ = [("agent", c_int), ("agents", c_int), ("nsockets", c_int), ("nservers", c_int), ("nracks", c_int),
                ("fsocket", c_int), ("fserver", c_int), ("frack", c_int), ("fjob", c_int),
                ("socket", _F), ("server", _F), ("rack", _F), ("job", _F),
                ("socket_server", _I), ("server_rack", _I), ("mask", _U), ("logits", _F),
                ("job_id", ctypes.c_int32), ("worker", c_int), ("workers", c_int),
                ("now", c_double), ("area", c_double), ("jobs_in_system", c_int)]


class Report(ctypes.Structure):
    """shoal_sim_report_t."""
    _fields_ = [("jobs", ctypes.c_long), ("unfinished", ctypes.c_long), ("jct_avg_s", c_double),
                ("jct_p50_s", c_double), ("jct_p95_s", c_double), ("jct_p99_s", c_double),
                ("makespan_s", c_double), ("queue_avg_s", c_double), ("gpu_util", c_double),
                ("preemptions", ctypes.c_long), ("reallocations", ctypes.c_long), ("ftf_max", c_double),
                ("ftf_avg", c_double), ("wall_s", c_double), ("events", ctypes.c_ulonglong)]


lib.shoal_sim_env_create.restype = c_int
lib.shoal_sim_env_create.argtypes = [ctypes.c_char_p, PP]
lib.shoal_sim_env_reset.restype = c_int
lib.shoal_sim_env_reset.argtypes = [P, ctypes.c_uint64, ctypes.POINTER(_Obs)]
lib.shoal_sim_env_step.restype = c_int
lib.shoal_sim_env_step.argtypes = [P, c_int, ctypes.POINTER(_Obs)]
lib.shoal_sim_env_report.restype = c_int
lib.shoal_sim_env_report.argtypes = [P, ctypes.POINTER(Report), ctypes.POINTER(c_double)]
lib.shoal_sim_env_destroy.restype = None
lib.shoal_sim_env_destroy.argtypes = [P]


class Observation:
    """One decision, copied out of the simulator (NumPy arrays): socket [S, fs], server [M, fm],
    rack [R, fr], job [fj], socket_server [S], server_rack [M], mask [S] (bool), logits [S] or None (the
    C network's scores when the environment has weights), agent, agents, job_id, worker, workers, now,
    area, jobs_in_system."""

    def __init__(self, o):
        s, m, r = o.nsockets, o.nservers, o.nracks
        arr = lambda p, n, dt: np.ctypeslib.as_array(p, shape=(n,)).astype(dt, copy=True)
        self.socket = arr(o.socket, s * o.fsocket, np.float32).reshape(s, o.fsocket)
        self.server = arr(o.server, m * o.fserver, np.float32).reshape(m, o.fserver)
        self.rack = arr(o.rack, r * o.frack, np.float32).reshape(r, o.frack)
        self.job = arr(o.job, o.fjob, np.float32)
        self.socket_server = arr(o.socket_server, s, np.int64)
        self.server_rack = arr(o.server_rack, m, np.int64)
        self.mask = arr(o.mask, s, np.bool_)
        self.logits = arr(o.logits, s, np.float32) if o.logits else None
        for k in ("agent", "agents", "job_id", "worker", "workers", "now", "area", "jobs_in_system"):
            setattr(self, k, getattr(o, k))


class PlacementEnv:
    """An episode of the policy `marl` whose decisions the caller takes. config: the keys of
    shoal_sim_env_create (space-separated key=value)."""

    def __init__(self, config):
        self._env = c_void_p()
        check(lib.shoal_sim_env_create(config.encode(), ctypes.byref(self._env)))
        self._obs = _Obs()

    def _next(self, rc):
        check(rc)
        return Observation(self._obs) if rc == 1 else None

    def reset(self, seed=0):
        """Start an episode (seed: the workload's model assignment; 0 the config's). The first
        Observation, or None if the episode had no decision."""
        return self._next(lib.shoal_sim_env_reset(self._env, seed, ctypes.byref(self._obs)))

    def step(self, action):
        """Put the pending worker on socket `action` (mask 1); the next Observation, None at the end."""
        return self._next(lib.shoal_sim_env_step(self._env, int(action), ctypes.byref(self._obs)))

    def report(self):
        """(Report, sum of the jobs' completion times) of the finished episode."""
        rep, area = Report(), c_double()
        check(lib.shoal_sim_env_report(self._env, ctypes.byref(rep), ctypes.byref(area)))
        return rep, area.value

    def close(self):
        if self._env:
            lib.shoal_sim_env_destroy(self._env)
            self._env = c_void_p()

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()
