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
"""
import argparse
import http.client
import json
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/headscope")
    ap.add_argument("--model", default="models/all-MiniLM-L6-v2")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--deadline", type=float, default=900, help="seconds; the soak stops by then in any case")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    server = subprocess.Popen([args.bin, "serve", "--model", args.model, "--port", "0", "--host", "127.0.0.1",
                               "--web-dir", "/nonexistent"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = server.stdout.readline()
        if "http://" not in line:
            sys.exit(f"soak: the server did not start: {line!r}")
        port = int(line.rsplit(":", 1)[1].strip().rstrip("/"))
        model = json.loads(urlopen_json(port, "/api/model"))
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
