"""Ray on this machine: the corpus job of N EWT dev sentences on a cluster of one worker node and of
two (one CPU each, `ray start`, torn down after), against the plain packed job in one process on 1
and 2 threads. Prints texts/s and the overhead of each Ray run against the plain run with as many
CPUs, and checks that every run gives the same statistics bit for bit.

    .venv/bin/python bench/ray_corpus.py MODEL TREEBANK.conllu [N=2000]
"""
import os
import secrets
import subprocess
import sys
import time

os.environ.setdefault("RAY_AUTH_MODE", "token")
os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))

import headscope  # noqa: E402
import headscope.distributed as hd  # noqa: E402
import ray  # noqa: E402

RAY = os.path.join(os.path.dirname(sys.executable), "ray")


def sentences(path, n):
    out = []
    for line in open(path, encoding="utf-8"):
        if line.startswith("# text = "):
            out.append(line[9:].rstrip("\n"))
            if len(out) == n:
                break
    return out


def cluster(nodes, port=36379):
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    common = ["--num-cpus", "1", "--disable-usage-stats", "--node-ip-address", "127.0.0.1"]
    subprocess.run([RAY, "start", "--head", "--port", str(port), "--include-dashboard", "false", *common], check=True,
                   env=env, capture_output=True)
    for _ in range(nodes - 1):
        subprocess.run([RAY, "start", "--address", f"127.0.0.1:{port}", *common], check=True, env=env,
                       capture_output=True)
    ray.init(address=f"127.0.0.1:{port}", log_to_driver=False)
    while len([n for n in ray.nodes() if n["Alive"]]) < nodes:
        time.sleep(0.2)


def teardown():
    ray.shutdown()
    subprocess.run([RAY, "stop", "--force"], capture_output=True)


def main():
    model_path, treebank = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    texts = sentences(treebank, n)
    plain = {}
    reference = None
    for threads in (1, 2):
        model = headscope.load(model_path, threads=threads)
        model.corpus(texts[:50], records=False, probe=False, corpus=False)  # warm-up
        t0 = time.monotonic()
        r = model.corpus(texts, records=False, probe=False, corpus=False)
        plain[threads] = time.monotonic() - t0
        reference = reference or r.stats
        assert r.stats == reference
        print(f"plain, {threads} thread(s): {plain[threads]:.2f} s, {len(texts) / plain[threads]:.1f} texts/s")
    for nodes in (1, 2):
        cluster(nodes)
        try:
            t0 = time.monotonic()
            r = hd.corpus(model_path, texts, texts_per_batch=100, probe=False, evidence=False, progress=False)
            wall = time.monotonic() - t0
        finally:
            teardown()
        assert r.stats == reference, "the Ray run's statistics differ"
        print(f"ray, {nodes} worker node(s) of 1 CPU: {wall:.2f} s, {len(texts) / wall:.1f} texts/s, "
              f"{wall / plain[nodes]:.2f}x the plain run on {nodes} thread(s) (identical statistics)")


if __name__ == "__main__":
    main()
