#!/usr/bin/env python3
"""bench/burst.py: kharond's memory before, during and after a burst of concurrent connections
(bench/burst.sh runs it; not a test).

  burst.py KHAROND KHARONCTL WORK CONNS IDLE_S RUNS JSON

Per run, a fresh kharond on the example inventory (direct route for everything asked here) and
an echo server on 127.0.0.1. CONNS SOCKS5 clients connect through kharond, at most HANDSHAKES at
a time, each by name (`localhost`, resolved by kharond) or by address (every other one),
exchange PAYLOAD bytes with the echo server and stay open until all CONNS are: the burst. Then
all close at once, and kharond is left alone for IDLE_S seconds. kharond's resident set (VmRSS)
and what its heaps hold (`kharonctl status -o json`: live allocations and the heaps' size) are
sampled at start, with every connection open, 2 s after they closed, and after IDLE_S seconds.
Every run goes to JSON as one line.
"""

import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time

KHAROND, KHARONCTL, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
CONNS, IDLE_S, RUNS, OUT = int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
# Handshakes in flight at once: under the listen backlog, so no SYN is dropped and retried.
HANDSHAKES = 256
# Each client's request and the echo's answer: enough to fill a relay buffer once.
PAYLOAD = 16 * 1024
SETTLE_S = 2.0
MIB = 1024 * 1024


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def sample(pid, env):
    status = subprocess.run([KHARONCTL, "status", "-o", "json"], env=env, capture_output=True, text=True,
                            timeout=30, check=True)
    memory = json.loads(status.stdout).get("memory", {})
    return {"rss_kib": rss_kib(pid), "heap_in_use": memory.get("heap_in_use_bytes", 0),
            "heap": memory.get("heap_bytes", 0)}


async def echo(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def client(i, proxy, target, gate):
    async with gate:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy)
        writer.write(b"\x05\x01\x00")
        if await reader.readexactly(2) != b"\x05\x00":
            raise RuntimeError("kharond refused the SOCKS greeting")
        if i % 2 == 0:
            name = b"localhost"
            writer.write(b"\x05\x01\x00\x03" + bytes([len(name)]) + name + target.to_bytes(2, "big"))
        else:
            writer.write(b"\x05\x01\x00\x01" + socket.inet_aton("127.0.0.1") + target.to_bytes(2, "big"))
        head = await reader.readexactly(4)
        if head[1] != 0:
            raise RuntimeError(f"connection {i}: SOCKS reply {head[1]}")
        # The bound address: IPv4, IPv6 or a name, then the port.
        if head[3] == 1:
            await reader.readexactly(4 + 2)
        elif head[3] == 4:
            await reader.readexactly(16 + 2)
        else:
            await reader.readexactly((await reader.readexactly(1))[0] + 2)
        writer.write(b"x" * PAYLOAD)
        await reader.readexactly(PAYLOAD)
        return writer


async def burst(proxy, target):
    gate = asyncio.Semaphore(HANDSHAKES)
    writers = await asyncio.gather(*(client(i, proxy, target, gate) for i in range(CONNS)))
    return writers


async def once(run):
    port = free_port()
    run_dir = f"{WORK}/run{run}"
    os.makedirs(run_dir, mode=0o700)
    env = {"PATH": os.environ["PATH"], "HOME": WORK, "XDG_RUNTIME_DIR": run_dir, "RUST_LOG": "warn",
           "KHARON_CONTROL_SOCKET": f"{run_dir}/kharond.sock", "XDG_CONFIG_HOME": f"{WORK}/config"}
    server = await asyncio.start_server(echo, "127.0.0.1", 0, backlog=1024)
    target = server.sockets[0].getsockname()[1]
    p = subprocess.Popen([KHAROND, "--listen", f"127.0.0.1:{port}", "--inventory", "contrib/examples/inventory.json",
                          "--ssh-config", f"{WORK}/none"], env=env, stderr=open(f"{WORK}/kharond.log", "a"))
    try:
        deadline = time.monotonic() + 30
        while subprocess.run([KHARONCTL, "status"], env=env, capture_output=True).returncode != 0:
            if p.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"kharond did not start; see {WORK}/kharond.log")
            time.sleep(0.05)
        time.sleep(1)
        start = sample(p.pid, env)
        t0 = time.monotonic()
        writers = await burst(port, target)
        took = time.monotonic() - t0
        held = sample(p.pid, env)
        for w in writers:
            w.close()
        await asyncio.gather(*(w.wait_closed() for w in writers), return_exceptions=True)
        await asyncio.sleep(SETTLE_S)
        closed = sample(p.pid, env)
        await asyncio.sleep(IDLE_S - SETTLE_S)
        idle = sample(p.pid, env)
    finally:
        p.terminate()
        p.wait()
        server.close()
    return {"phase": "burst", "conns": CONNS, "idle_s": IDLE_S, "burst_s": took,
            "start": start, "held": held, "closed": closed, "idle": idle}


def main():
    for run in range(RUNS):
        r = asyncio.run(once(run))
        mib = lambda s: s["rss_kib"] / 1024
        heap = lambda s: f"{s['heap_in_use'] / MIB:.1f}/{s['heap'] / MIB:.1f}"
        print(f"run {run + 1}: {CONNS} connections in {r['burst_s']:.1f} s; RSS start {mib(r['start']):.1f}, "
              f"held {mib(r['held']):.1f}, closed {mib(r['closed']):.1f}, after {IDLE_S:.0f} s idle "
              f"{mib(r['idle']):.1f} MiB; heap in use/held {heap(r['start'])} → {heap(r['held'])} → "
              f"{heap(r['closed'])} → {heap(r['idle'])} MiB", flush=True)
        if OUT:
            with open(OUT, "a") as f:
                f.write(json.dumps(r) + "\n")


main()
