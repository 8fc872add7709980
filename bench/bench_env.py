"""The environment every benchmark process runs in: the same thread count for headscope and the
reference (OpenMP, OpenBLAS and MKL pools alike) and no hub access.

OpenMP's wait policy is left at the runtime's default unless `passive` is asked for
(OMP_WAIT_POLICY=PASSIVE, threads sleep between parallel regions instead of spinning briefly):
passive waiting matters when two processes share the cores, which the benchmarks never do (each
side runs alone), and it slows both sides' many short parallel regions (see docs/performance.md)."""
import os


def env_for(threads, passive=False):
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    env.pop("OMP_WAIT_POLICY", None)
    if passive:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    env["HF_HUB_OFFLINE"] = "1"
    return env
