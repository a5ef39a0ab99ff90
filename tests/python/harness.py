"""Helpers for the Python tests: run this test file's child mode on N ranks, with `shoal launch` or by
hand with torchrun's variables (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT), each bounded in time."""
import os
import socket
import subprocess
import sys

PY = "/usr/bin/python3"
SHOAL_BIN = os.environ.get("SHOAL_BIN") or os.path.join(os.path.dirname(__file__), "..", "..", "build", "shoal")
LAUNCH_VARS = ("SHOAL_RANK", "SHOAL_WORLD_SIZE", "SHOAL_MASTER_ADDR", "SHOAL_MASTER_PORT", "SHOAL_STORE_FD",
               "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(extra or {})
    return env


def launch(n, script, args=(), timeout=60, env=None):
    """`shoal launch -n N -- python3 script --child args`: (exit code, combined output)."""
    cmd = [SHOAL_BIN, "launch", "-n", str(n), "--", PY, script, "--child"] + list(args)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, env=clean_env(env))
    return p.returncode, p.stdout.decode(errors="replace")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def torchrun_style(n, script, args=(), timeout=60, env=None):
    """Start N ranks by hand with torchrun's variables only: [(exit code, output)] per rank."""
    port = free_port()
    procs = []
    for r in range(n):
        e = clean_env(env)
        e.update({"RANK": str(r), "WORLD_SIZE": str(n), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                  "LOCAL_RANK": str(r)})
        procs.append(subprocess.Popen([PY, script, "--child"] + list(args), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, env=e))
    res = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            res.append((-9, out.decode(errors="replace") + "\n(killed after %s s)" % timeout))
            continue
        res.append((p.returncode, out.decode(errors="replace")))
    return res
