#!/usr/bin/env python3
"""bench/shaped.py: what a shaped link does to small requests through two proxies (bench/shaped.sh
runs it; not a test).

  shaped.py HOST PORT SECONDS REPS WARMUP JSON NAME=SOCKS_PORT [NAME=SOCKS_PORT ...] [NAME=@ADDR:PORT]

NAME=SOCKS_PORT is a SOCKS5 proxy on 127.0.0.1 that reaches HOST:PORT by name; NAME=@ADDR:PORT is the
same server dialled directly, without a proxy (the link alone, as a reference: its bulk rates are
what the link itself carries for one TCP connection).

For each repetition, each proxy in turn (interleaved, so drift on the machine hits both alike):
- idle: small requests, each on a new connection (SOCKS5 CONNECT by name, GET /hello, read to
  the end), one after the other;
- during one bulk download (GET /bytes/N, read for SECONDS): small requests meanwhile, on new
  connections and on one kept-alive connection (HTTP/1.1, /hello again and again); the
  download's rate;
- during one bulk upload (POST /sink of zeros for SECONDS): the same small requests;
- two bulk downloads at once for SECONDS: each one's rate (proxies only).
WARMUP > 0 first runs one unmeasured bulk download of WARMUP seconds per proxy, with small
requests beside it whose latencies are recorded as "first" (a daemon that learns its path
learns it there). Every figure goes to JSON as one line per proxy and repetition.

Two settings from the environment, for looking closer (bench/shaped.sh passes them on):
UPLOAD_RATE (MB/s) paces the bulk upload below the link's rate instead of sending as fast as the
socket takes; PHASE_TIMES (a file) gets each measured phase's proxy, repetition and wall-clock
start and end, one JSON line each, so that packet captures can be cut by phase
(bench/crossings.py).
"""

import json
import os
import socket
import statistics
import struct
import sys
import threading
import time

HOST, PORT, SECONDS, REPS, WARMUP, OUT = (sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]),
                                          float(sys.argv[5]), sys.argv[6])


def path(arg):
    """(name, SOCKS port) or (name, (address, port)) for a direct path."""
    name, where = arg.rsplit("=", 1)
    if where.startswith("@"):
        addr, port = where[1:].rsplit(":", 1)
        return name, (addr, int(port))
    return name, int(where)


PROXIES = [path(a) for a in sys.argv[7:]]
BIG = 1 << 40
IDLE_REQUESTS = 15
UPLOAD_RATE = float(os.environ.get("UPLOAD_RATE") or 0) * 1e6
PHASE_TIMES = os.environ.get("PHASE_TIMES")
# A small request that takes longer than this is given up and counted as this long.
LIMIT = 30.0


def connect(proxy):
    if isinstance(proxy, tuple):
        s = socket.create_connection(proxy, timeout=LIMIT)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s
    s = socket.create_connection(("127.0.0.1", proxy), timeout=LIMIT)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(b"\x05\x01\x00")
    if s.recv(2) != b"\x05\x00":
        raise OSError("SOCKS greeting refused")
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(HOST)]) + HOST.encode() + struct.pack(">H", PORT))
    r = b""
    while len(r) < 10:
        d = s.recv(10 - len(r))
        if not d:
            raise OSError("SOCKS reply cut short")
        r += d
    if r[1] != 0:
        raise OSError(f"SOCKS reply {r[1]}")
    return s


def small(proxy):
    """ms for a new connection, a GET /hello and its whole answer."""
    t0 = time.perf_counter()
    try:
        s = connect(proxy)
        s.sendall(b"GET /hello HTTP/1.0\r\n\r\n")
        while s.recv(4096):
            pass
        s.close()
    except OSError:
        return LIMIT * 1e3
    return (time.perf_counter() - t0) * 1e3


class KeptAlive:
    """One connection that asks GET /hello again and again (HTTP/1.1 keep-alive)."""

    def __init__(self, proxy):
        self.s = connect(proxy)

    def ask(self):
        t0 = time.perf_counter()
        try:
            self.s.sendall(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            while not got.endswith(b"ok"):
                d = self.s.recv(4096)
                if not d:
                    raise OSError("closed")
                got += d
        except OSError:
            return LIMIT * 1e3
        return (time.perf_counter() - t0) * 1e3


def download(proxy, seconds, result):
    """Reads GET /bytes/BIG for `seconds`; result gets the rate in MB/s from the first byte."""
    s = connect(proxy)
    s.sendall(b"GET /bytes/%d HTTP/1.0\r\n\r\n" % BIG)
    s.settimeout(1.0)
    n, first, end = 0, None, time.perf_counter() + seconds
    while time.perf_counter() < end:
        try:
            d = s.recv(1 << 20)
        except socket.timeout:
            continue
        if not d:
            break
        if first is None:
            first = time.perf_counter()
        n += len(d)
    elapsed = time.perf_counter() - (first or end)
    s.close()
    result.append(n / elapsed / 1e6 if elapsed > 0 else 0.0)


def upload(proxy, seconds, result):
    """POSTs zeros for `seconds`; result gets the rate in MB/s at which they *arrived* at the server
    (its answer once the body ends: bytes over first to last byte), not the rate at which this end
    handed them to its socket, which counts whatever the path has buffered as sent."""
    s = connect(proxy)
    s.sendall(b"POST /sink HTTP/1.0\r\nContent-Length: %d\r\n\r\n" % BIG)
    chunk = b"\0" * (256 << 10)
    start = time.perf_counter()
    end = start + seconds
    sent = 0
    try:
        while time.perf_counter() < end:
            if UPLOAD_RATE > 0:
                ahead = sent / UPLOAD_RATE - (time.perf_counter() - start)
                if ahead > 0:
                    time.sleep(ahead)
            sent += s.send(chunk)
        s.shutdown(socket.SHUT_WR)
        s.settimeout(LIMIT)
        answer = b""
        while True:
            d = s.recv(4096)
            if not d:
                break
            answer += d
        n, elapsed = answer.split(b"\r\n\r\n", 1)[1].split()
        result.append(int(n) / float(elapsed) / 1e6 if float(elapsed) > 0 else 0.0)
    except (OSError, ValueError, IndexError):
        result.append(0.0)
    s.close()


def beside(proxy, bulk, seconds, keep_alive=True):
    """Runs `bulk` for `seconds` and small requests meanwhile: (new-connection ms, kept-alive ms, rate)."""
    rate = []
    t = threading.Thread(target=bulk, args=(proxy, seconds, rate))
    t.start()
    kept = KeptAlive(proxy) if keep_alive else None
    # Let the transfer fill what it fills before measuring beside it.
    time.sleep(min(1.0, seconds / 4))
    new, alive = [], []
    end = time.time() + seconds - 1.5
    while time.time() < end and t.is_alive():
        new.append(small(proxy))
        if kept:
            alive.append(kept.ask())
        time.sleep(0.1)
    t.join()
    return new, alive, rate[0] if rate else 0.0


def mark(name, proxy, rep, phase, start):
    """Appends one phase's wall-clock span to PHASE_TIMES, if set, with the proxy's SOCKS port (or
    the address dialled directly)."""
    if PHASE_TIMES:
        where = list(proxy) if isinstance(proxy, tuple) else proxy
        with open(PHASE_TIMES, "a") as f:
            f.write(json.dumps({"path": name, "proxy": where, "rep": rep, "phase": phase, "start": start,
                                "end": time.time()}) + "\n")


def q(v, p):
    if not v:
        return None
    if len(v) == 1:
        return v[0]
    return statistics.quantiles(v, n=100, method="inclusive")[p - 1]


def main():
    out = open(OUT, "a") if OUT else None
    if WARMUP > 0:
        for name, proxy in PROXIES:
            if isinstance(proxy, tuple):
                continue
            new, _, rate = beside(proxy, download, WARMUP, keep_alive=False)
            print(f"{name:8} first download: {rate:.2f} MB/s, small p50 {q(new, 50):.0f} ms beside it ({len(new)})")
            if out:
                out.write(json.dumps({"kind": "first", "path": name, "new_ms": new, "mb_s": rate}) + "\n")
    for rep in range(REPS):
        for name, proxy in PROXIES:
            t = time.time()
            idle = [small(proxy) for _ in range(IDLE_REQUESTS)]
            mark(name, proxy, rep, "idle", t)
            t = time.time()
            d_new, d_alive, d_rate = beside(proxy, download, SECONDS)
            mark(name, proxy, rep, "download", t)
            t = time.time()
            u_new, u_alive, u_rate = beside(proxy, upload, SECONDS)
            mark(name, proxy, rep, "upload", t)
            two = [0.0, 0.0]
            if not isinstance(proxy, tuple):
                rates = [[], []]
                both = [threading.Thread(target=download, args=(proxy, SECONDS, r)) for r in rates]
                for t in both:
                    t.start()
                for t in both:
                    t.join()
                two = [r[0] if r else 0.0 for r in rates]
            rec = {"kind": "rep", "rep": rep, "path": name, "idle_ms": idle, "down_new_ms": d_new,
                   "down_alive_ms": d_alive, "down_mb_s": d_rate, "up_new_ms": u_new, "up_alive_ms": u_alive,
                   "up_mb_s": u_rate, "two_mb_s": two}
            print(f"{name:10} rep {rep}: idle p50 {q(idle, 50):.0f} p95 {q(idle, 95):.0f} ms; during download "
                  f"p50 {q(d_new, 50):.0f} p95 {q(d_new, 95):.0f} ms (kept-alive {q(d_alive, 50):.0f}), "
                  f"{d_rate:.2f} MB/s; during upload p50 {q(u_new, 50):.0f} ms (kept-alive {q(u_alive, 50):.0f}), "
                  f"{u_rate:.2f} MB/s; two downloads {two[0]:.2f} / {two[1]:.2f} MB/s", flush=True)
            if out:
                out.write(json.dumps(rec) + "\n")
                out.flush()


if __name__ == "__main__":
    main()
