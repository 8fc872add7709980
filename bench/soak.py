#!/usr/bin/env python3
"""Load and soak test of `headscope serve`, on loopback only, bounded in requests and time.

Starts the server on a free port, then 64 client threads send 5,000 requests between them: runs,
attention, decompositions (and generations on a decoder) over a pool of texts, malformed and
hostile requests (1e999, text/plain, a foreign Host or Origin, PUT, /%ff, an oversized chunked
body), and slow clients that send their headers a byte at a time. It reports the status counts,
the 5xx answers other than the deliberate 503 of a full queue (must be 0), p50/p99 latency of the
light endpoints (/api/health, /api/model) measured while the heavy work runs, and the server's
resident memory before and after. Exit status 1 if an unexpected 5xx came back or the server died.

    python3 bench/soak.py --bin build/headscope --model models/all-MiniLM-L6-v2
    python3 bench/soak.py --bin build/headscope --model models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf

Standard library only; stops by itself after --requests requests or --deadline seconds.

Soak mode (--soak-minutes): memory that must plateau. The script builds --distinct texts in code
(seeded random word sequences of 4-160 words from a vocabulary of made-up words, all different),
and 16 client threads send each one exactly once, spread evenly over the period, cycling through
/api/run, /api/attention, /api/tile, /api/ablate, /api/overview, /api/decompose and, on a decoder,
/api/generate. The server's resident memory (VmRSS) is sampled every --sample-seconds and written
with --curve (CSV, or JSON when the name ends in .json). It reports RSS at the start (the model
loaded, nothing run), the maximum, the maximum in the last third and the least-squares slope over
the last third, against the ceiling

    --cache-mib (the run cache's budget, passed to the server) + RSS at the start + --margin-mib

and exits 1 when the slope is above --max-slope MiB/min and more than two standard errors above
zero (the requests in progress make RSS swing by hundreds of MiB), RSS passed the ceiling, a request got an
answer other than 200 (503 is retried), or the server died.

    python3 bench/soak.py --bin build/headscope --model models/all-MiniLM-L6-v2 \
        --soak-minutes 30 --distinct 20000 --curve soak-minilm.csv
"""
import argparse
import csv
import http.client
import json
import math
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter

WORDS = ("the cat sat on a mat while the dog that chased it slept because it was tired and the "
         "old man who lived by the river told a story about a ship lost at sea").split()


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def raw_request(port, data, timeout=30.0, slow=False):
    """Sends bytes and returns the status of the reply (0: no reply)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        if slow:  # a slow client: headers one byte at a time, 20 ms apart
            for i in range(len(data)):
                s.sendall(data[i:i + 1])
                time.sleep(0.02)
        else:
            s.sendall(data)
        reply = b""
        while b"\r\n" not in reply:
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
    try:
        return int(reply.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0


class Soak:
    def __init__(self, port, causal, texts):
        self.port, self.causal, self.texts = port, causal, texts
        self.lock = threading.Lock()
        self.status = Counter()
        self.unexpected = []  # (kind, status) of 5xx other than 503
        self.light_ms = []

    def record(self, kind, status, ms=None):
        with self.lock:
            self.status[(kind, status)] += 1
            if status >= 500 and status != 503 or status == 0:
                self.unexpected.append((kind, status))
            if ms is not None and kind in ("health", "model"):
                self.light_ms.append(ms)

    def post(self, path, body, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        conn.request("POST", path, body=body if isinstance(body, bytes) else json.dumps(body).encode(), headers=h)
        r = conn.getresponse()
        r.read()
        conn.close()
        return r.status

    def get(self, path):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        conn.request("GET", path)
        r = conn.getresponse()
        r.read()
        conn.close()
        return r.status

    def one(self, rng):
        text = rng.choice(self.texts)
        kind = rng.choices(
            ["health", "model", "run", "attention", "decompose", "generate", "bad", "slow"],
            weights=[25, 5, 20, 20, 10, 8 if self.causal else 0, 10, 2])[0]
        t0 = time.perf_counter()
        try:
            if kind == "health":
                status = self.get("/api/health")
            elif kind == "model":
                status = self.get("/api/model")
            elif kind == "run":
                status = self.post("/api/run", {"text": text, "level": rng.choice(["token", "word"])})
            elif kind == "attention":
                status = self.post("/api/attention", {"text": text, "layer": rng.randrange(2), "dtype": "uint8"})
            elif kind == "decompose":
                status = self.post("/api/decompose", {"text": text, "layer": 0, "token": 1})
            elif kind == "generate":
                status = self.post("/api/generate", {"text": text, "max_new_tokens": 4})
            elif kind == "bad":
                status = self.bad(rng)
            else:
                status = raw_request(self.port, b"GET /api/health HTTP/1.1\r\nHost: localhost\r\n\r\n", slow=True)
        except (OSError, http.client.HTTPException) as e:
            status = 0
            kind = f"{kind} ({type(e).__name__})"
        self.record(kind, status, (time.perf_counter() - t0) * 1000)
        if status == 503:  # as a polite client would: wait before the next heavy request
            time.sleep(rng.uniform(0.5, 2.0))

    def bad(self, rng):
        p = self.port
        case = rng.randrange(7)
        if case == 0:
            return self.post("/api/attention", b'{"text": "a", "layer": 1e999}')
        if case == 1:
            return self.post("/api/run", {"text": "hi"}, {"Content-Type": "text/plain"})
        if case == 2:
            return self.post("/api/run", {"text": "hi"}, {"Origin": "http://evil.example"})
        if case == 3:
            return raw_request(p, b"GET /api/model HTTP/1.1\r\nHost: evil.example\r\n\r\n")
        if case == 4:
            return raw_request(p, b"PUT /api/run HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n")
        if case == 5:
            return raw_request(p, b"GET /%ff HTTP/1.1\r\nHost: localhost\r\n\r\n")
        chunk = b"x" * 65536
        body = b"".join(b"10000\r\n" + chunk + b"\r\n" for _ in range(24)) + b"0\r\n\r\n"  # 1.5 MiB
        return raw_request(p, b"POST /api/run HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                              b"Transfer-Encoding: chunked\r\n\r\n" + body)


# Soak mode. The margin covers what a server holds beside its model and cached runs: the tensor
# storage's kept buffers (src/tensor/buffers.cc), one run in progress and the replies being sent,
# thread stacks and the allocator's slack. RSS swings by a few hundred MiB with the requests in
# progress (two runs being computed, replies being written), so a slope over the last third is
# growth only when it is both above SOAK_MAX_SLOPE and more than two standard errors above zero:
# the 40 KB per new run that leaked before is about 80 MiB/min at this pace, far outside the noise.
SOAK_MARGIN_MIB = 1024
SOAK_MAX_SLOPE = 1.0  # MiB per minute, over the last third
SYLLABLES = "ka lo mi ren tus vor pel an dri qua sen bo lit zu mar fen gol ish ter nov".split()


def soak_texts(n, seed):
    """n distinct texts: seeded random sequences of 4–160 words (lengths spread log-uniformly),
    two thirds common words, one third made-up ones (new word pieces for the tokenizer)."""
    rng = random.Random(seed)
    made_up = sorted({"".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(4000)})
    texts, seen = [], set()
    while len(texts) < n:
        k = int(round(math.exp(rng.uniform(math.log(4), math.log(160)))))
        words = [rng.choice(made_up) if rng.random() < 1 / 3 else rng.choice(WORDS) for _ in range(k)]
        text = " ".join(words) + rng.choice(".?!")
        if text not in seen:
            seen.add(text)
            texts.append(text)
    return texts


def soak_request(i, text, model):
    """The i-th text's request: (path, body), cycling through the endpoints that analyse a text."""
    kinds = ["run", "attention", "tile", "ablate", "overview", "decompose", "link"] + (["generate"] if model["causal"] else [])
    kind = kinds[i % len(kinds)]
    n_layer, n_head = model["n_layer"], model["n_head"]
    layer, head, turn = (i // len(kinds)) % n_layer, (i // 7) % n_head, i // len(kinds)
    bodies = {
        "run": {"level": ["token", "word"][turn % 2], "special": ["keep", "hide"][turn // 2 % 2]},
        "attention": {"layer": layer, "dtype": ["uint8", "float32"][turn % 2], "view": ["weights", "norm"][turn // 2 % 2]},
        "tile": {"layer": layer, "head": head, "q0": 0, "q1": 2, "k0": 0, "k1": 2},
        "ablate": {"heads": [[layer, head]], "mode": ["zero", "mean", "resample"][turn % 3]},
        "overview": {"layer": layer, "part": ["maps", "received", "offsets"][turn % 3]},
        "decompose": {"layer": layer, "token": 1},
        "link": {"q": 1, "k": 0, "limit": 8},
        "generate": {"max_new_tokens": 4},
    }
    body = {"text": text, **bodies[kind]}
    if kind != "generate":
        body["truncate"] = True
    return kind, "/api/overview" if kind == "overview" else f"/api/{kind}", body


class RssSampler(threading.Thread):
    """Samples the server's VmRSS every `period` seconds: [(seconds, MiB, requests done)]."""

    def __init__(self, pid, period, done):
        super().__init__(daemon=True)
        self.pid, self.period, self.done = pid, period, done
        self.samples, self.stop = [], threading.Event()
        self.t0 = time.monotonic()

    def sample(self):
        try:
            self.samples.append((time.monotonic() - self.t0, rss_mib(self.pid)[0], self.done()))
        except (OSError, KeyError):
            pass  # the server is gone; the soak reports it

    def run(self):
        while not self.stop.wait(self.period):
            self.sample()


def slope_per_minute(points):
    """Least-squares slope of (seconds, MiB) points and its standard error, both in MiB per minute."""
    n = len(points)
    if n < 3:
        return float("nan"), float("nan")
    mt = sum(t for t, _ in points) / n
    mr = sum(r for _, r in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    if not var:
        return float("nan"), float("nan")
    slope = sum((t - mt) * (r - mr) for t, r in points) / var
    residual = sum((r - mr - slope * (t - mt)) ** 2 for t, r in points) / (n - 2)
    return 60 * slope, 60 * math.sqrt(residual / var)


def write_curve(path, samples, summary):
    if path.endswith(".json"):
        with open(path, "w") as f:
            json.dump({"summary": summary, "samples": [{"seconds": round(t, 1), "rss_mib": round(r, 1), "requests": d}
                                                       for t, r, d in samples]}, f, indent=1)
    else:
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["seconds", "rss_mib", "requests"])
            w.writerows((round(t, 1), round(r, 1), d) for t, r, d in samples)


def soak_send(port, path, body):
    """Sends one request; retries a 503 (queue full) after its Retry-After. Returns the status."""
    for _ in range(30):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        try:
            conn.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            retry = float(r.getheader("Retry-After") or 2)
        finally:
            conn.close()
        if r.status != 503:
            return r.status
        time.sleep(retry)
    return 503


def soak_clients(args, server, port, model, texts):
    """Sends every text once from args.clients threads, text i not before start + i · period / n."""
    lock, status, unexpected, next_i = threading.Lock(), Counter(), [], [0]
    period = args.soak_minutes * 60
    t0 = time.monotonic()

    def worker():
        while server.poll() is None:
            with lock:
                i = next_i[0]
                if i >= len(texts) or time.monotonic() - t0 > period:
                    return
                next_i[0] += 1
            time.sleep(max(0.0, t0 + i * period / len(texts) - time.monotonic()))
            kind, path, body = soak_request(i, texts[i], model)
            try:
                code = soak_send(port, path, body)
            except (OSError, http.client.HTTPException) as e:
                code, kind = 0, f"{kind} ({type(e).__name__})"
            with lock:
                status[(kind, code)] += 1
                if code != 200:
                    unexpected.append((i, kind, code))

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(args.clients)]
    for t in threads:
        t.start()
    return threads, status, unexpected, lambda: sum(status.values())


def soak_test(args, server, port, model):
    texts = soak_texts(args.distinct, args.seed)
    time.sleep(1.0)
    start_rss = rss_mib(server.pid)[0]  # the model loaded, nothing run: the model's share
    threads, status, unexpected, done = soak_clients(args, server, port, model, texts)
    sampler = RssSampler(server.pid, args.sample_seconds, done)
    sampler.sample()
    sampler.start()
    for t in threads:
        t.join()
    sampler.stop.set()
    sampler.join()
    sampler.sample()
    alive = server.poll() is None
    samples = sampler.samples
    elapsed = samples[-1][0] if samples else 0.0
    last = [(t, r) for t, r, _ in samples if t >= elapsed * 2 / 3] or [(0.0, start_rss)]
    samples = samples or [(0.0, start_rss, 0)]
    ceiling = args.cache_mib + start_rss + args.margin_mib
    slope, slope_se = slope_per_minute(last)
    summary = {
        "model": model["name"], "bin": args.bin, "clients": args.clients, "distinct": len(texts),
        "sent": done(), "seconds": round(elapsed, 1), "alive": alive,
        "statuses": {f"{k} {c}": n for (k, c), n in sorted(status.items())},
        "rss_start_mib": round(start_rss, 1), "rss_max_mib": round(max(r for _, r, _ in samples), 1),
        "rss_last_third_max_mib": round(max(r for _, r in last), 1),
        "rss_end_mib": round(samples[-1][1], 1),
        "slope_last_third_mib_per_min": round(slope, 2),
        "slope_standard_error_mib_per_min": round(slope_se, 2),
        "cache_mib": args.cache_mib, "margin_mib": args.margin_mib, "ceiling_mib": round(ceiling, 1),
    }
    if args.curve:
        write_curve(args.curve, samples, summary)
    for k, v in summary.items():
        print(f"{k}: {v}")
    failures = []
    if not alive:
        failures.append("the server died")
    if unexpected:
        failures.append(f"{len(unexpected)} requests answered other than 200, first {unexpected[:3]}")
    if not slope <= args.max_slope and not slope - 2 * slope_se <= 0:  # a NaN slope (too few samples) fails
        failures.append(f"RSS still grows in the last third: {slope:.2f} ± {slope_se:.2f} MiB/min "
                        f"(limit {args.max_slope}, and more than two standard errors above zero)")
    if summary["rss_max_mib"] > ceiling:
        failures.append(f"RSS reached {summary['rss_max_mib']} MiB, over the ceiling of {ceiling:.0f} MiB "
                        f"(--cache-mib {args.cache_mib} + {start_rss:.0f} at start + margin {args.margin_mib:.0f})")
    print("soak: " + ("; ".join(failures) if failures else "plateau, within the ceiling"))
    return 1 if failures else 0


def start_server(args):
    """Starts `headscope serve` on a free loopback port; returns (process, port, /api/model)."""
    cmd = [args.bin, "serve", "--model", args.model, "--port", "0", "--host", "127.0.0.1", "--web-dir", "/nonexistent"]
    if args.cache_mib is not None:
        cmd += ["--cache-mib", str(args.cache_mib)]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = server.stdout.readline()
    if "http://" not in line:
        server.kill()
        sys.exit(f"soak: the server did not start: {line!r}")
    port = int(line.rsplit(":", 1)[1].strip().rstrip("/"))
    return server, port, json.loads(urlopen_json(port, "/api/model"))


def load_test(args, server, port, model):
    rng = random.Random(args.seed)
    # 40 texts of 8–120 words: cache misses and hits, some long passes.
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 120))) + "." for _ in range(40)]
    soak = Soak(port, model["causal"], texts)
    rss_before = rss_mib(server.pid)

    next_index = [0]
    index_lock = threading.Lock()
    t_end = time.monotonic() + args.deadline

    def worker(seed):
        local = random.Random(seed)
        while time.monotonic() < t_end and server.poll() is None:
            with index_lock:
                if next_index[0] >= args.requests:
                    return
                next_index[0] += 1
            soak.one(local)

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker, args=(args.seed * 1000 + i,), daemon=True) for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, t_end - time.monotonic()) + 130)
    elapsed = time.monotonic() - t0
    alive = server.poll() is None
    rss_after = rss_mib(server.pid) if alive else (float("nan"), float("nan"))

    done = sum(soak.status.values())
    by_status = Counter()
    for (kind, status), n in soak.status.items():
        by_status[status] += n
    light = sorted(soak.light_ms)
    p50 = statistics.median(light) if light else float("nan")
    p99 = light[min(len(light) - 1, int(0.99 * len(light)))] if light else float("nan")
    print(f"model {model['name']}: {done} requests from {args.clients} clients in {elapsed:.0f} s; server alive: {alive}")
    print("status counts:", dict(sorted(by_status.items())))
    for (kind, status), n in sorted(soak.status.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        print(f"  {kind:12s} {status:3d}  {n}")
    print(f"deliberate 503 (queue full): {by_status[503]}; unexpected 5xx or no reply: {len(soak.unexpected)}")
    print(f"light endpoints (health, model): p50 {p50:.1f} ms, p99 {p99:.1f} ms over {len(light)} requests")
    print(f"server RSS: {rss_before[0]:.0f} MiB before, {rss_after[0]:.0f} MiB after (peak {rss_after[1]:.0f} MiB)")
    return 0 if alive and not soak.unexpected else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/headscope")
    ap.add_argument("--model", default="models/all-MiniLM-L6-v2")
    ap.add_argument("--clients", type=int, default=None, help="client threads (64 in the load test, 16 in a soak)")
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--deadline", type=float, default=900, help="seconds; the load test stops by then in any case")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cache-mib", type=int, default=None,
                    help="the server's --cache-mib (default: the server's own, 2048; a soak passes 2048 explicitly)")
    soak_args = ap.add_argument_group("soak mode")
    soak_args.add_argument("--soak-minutes", type=float, default=None, help="run a soak of this length instead")
    soak_args.add_argument("--distinct", type=int, default=20000, help="distinct texts, each sent once")
    soak_args.add_argument("--sample-seconds", type=float, default=5.0, help="RSS sampling period")
    soak_args.add_argument("--curve", default=None, help="write the RSS curve here (.csv, or .json)")
    soak_args.add_argument("--margin-mib", type=float, default=SOAK_MARGIN_MIB,
                           help="ceiling = --cache-mib + RSS at start + this margin (MiB)")
    soak_args.add_argument("--max-slope", type=float, default=SOAK_MAX_SLOPE,
                           help="largest slope of RSS over the last third that passes (MiB/min)")
    args = ap.parse_args()
    if args.clients is None:
        args.clients = 16 if args.soak_minutes else 64
    if args.soak_minutes and args.cache_mib is None:
        args.cache_mib = 2048

    server, port, model = start_server(args)
    try:
        if args.soak_minutes:
            return soak_test(args, server, port, model)
        return load_test(args, server, port, model)
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()


def urlopen_json(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path)
    body = conn.getresponse().read()
    conn.close()
    return body


if __name__ == "__main__":
    sys.exit(main())
