#!/usr/bin/env python3
"""Latency of GET /api/health while N clients dribble request heads (slowloris).

Starts `headscope serve` on a free loopback port, opens N connections that each send one byte of a
request head every --interval seconds (a dribbler the server closes is reopened, so N stay
connected), and meanwhile times --probes health requests on fresh connections, one after the
other. Prints p50 and p99 of their latency and how many got no answer within --timeout.

  python3 bench/slowloris_probe.py --bin build/headscope --model models/all-MiniLM-L6-v2 --dribblers 64
"""
import argparse
import socket
import statistics
import subprocess
import sys
import threading
import time

HEAD = b"GET /api/health HTTP/1.1\r\nHost: localhost\r\nX-Slow: "


def start_server(binary, model):
    proc = subprocess.Popen([binary, "serve", "--model", model, "--port", "0", "--no-corpus"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    if "http://" not in line:
        proc.kill()
        sys.exit("the server did not start: " + line)
    return proc, int(line.strip().rstrip("/").rsplit(":", 1)[1])


def dribble(port, n, interval, stop):
    socks = [None] * n
    sent = [0] * n
    while not stop.is_set():
        for i in range(n):
            try:
                if socks[i] is None:
                    socks[i] = socket.create_connection(("127.0.0.1", port), timeout=1)
                    socks[i].setblocking(False)
                    sent[i] = 0
                socks[i].send(HEAD[sent[i]:sent[i] + 1] if sent[i] < len(HEAD) else b"a")
                sent[i] += 1
            except OSError:
                if socks[i] is not None:
                    socks[i].close()
                socks[i] = None
        time.sleep(interval)
    for s in socks:
        if s is not None:
            s.close()


def probe(port, timeout):
    t0 = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"GET /api/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        if not data.startswith(b"HTTP/1.1 200"):
            return None
    except OSError:
        return None
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build/headscope")
    ap.add_argument("--model", default="models/all-MiniLM-L6-v2")
    ap.add_argument("--dribblers", type=int, default=64)
    ap.add_argument("--interval", type=float, default=0.2)
    ap.add_argument("--probes", type=int, default=40)
    ap.add_argument("--timeout", type=float, default=5.0)
    args = ap.parse_args()
    proc, port = start_server(args.bin, args.model)
    stop = threading.Event()
    thread = threading.Thread(target=dribble, args=(port, args.dribblers, args.interval, stop))
    thread.start()
    time.sleep(1.0)
    times, failed = [], 0
    for _ in range(args.probes):
        t = probe(port, args.timeout)
        if t is None:
            failed += 1
        else:
            times.append(t * 1000)
    stop.set()
    thread.join()
    alive = proc.poll() is None
    proc.kill()
    if times:
        times.sort()
        p99 = times[min(len(times) - 1, int(round(0.99 * (len(times) - 1))))]
        print(f"{args.dribblers} dribblers: health p50 {statistics.median(times):.1f} ms, p99 {p99:.1f} ms, "
              f"{failed} of {args.probes} without an answer within {args.timeout:g} s; server alive: {alive}")
    else:
        print(f"{args.dribblers} dribblers: no health request answered ({failed} of {args.probes} failed)")


if __name__ == "__main__":
    main()
