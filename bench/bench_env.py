"""The environment every benchmark process runs in: the same thread count for headscope and the
reference (OpenMP, OpenBLAS and MKL pools alike) and no hub access.

OpenMP's wait policy is left at the runtime's default unless `passive` is asked for
(OMP_WAIT_POLICY=PASSIVE, threads sleep between parallel regions instead of spinning briefly):
passive waiting matters when two processes share the cores, which the benchmarks never do (each
side runs alone), and it slows both sides' many short parallel regions (see docs/performance.md)."""
import json
import os
import subprocess


def env_for(threads, passive=False):
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    env.pop("OMP_WAIT_POLICY", None)
    if passive:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    env["HF_HUB_OFFLINE"] = "1"
    return env


def json_lines(cmd, env):
    """Runs cmd in env and returns the JSON objects it printed, one per line starting with '{'."""
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]
