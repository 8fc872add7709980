"""The environment every benchmark process runs in: the same thread count for headscope and the
reference (OpenMP, OpenBLAS and MKL pools alike), passive OpenMP waiting so that two processes on
a 2-core machine do not spin against each other, and no hub access."""
import os


def env_for(threads):
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    env["HF_HUB_OFFLINE"] = "1"
    return env
