#!/usr/bin/env python3
"""bench/crossings.py: where a small request's time goes, from a `CAPTURE=DIR bench/shaped.sh` run
(not a test).

  bench/crossings.py DIR/PROFILE

Reads the profile's packet captures, socket samples and phase spans (bench/shaped.sh, CAPTURE) and
prints, per proxy, repetition and phase (idle, during the download, during the upload), the median
time of each crossing of a small request on a new connection:

- open, up: the client's SOCKS request to the far sshd's connect to the target (a SYN on the far
  side's `lo`); confirmation, down: that SYN to the SOCKS reply;
- GET, up: the request leaving the client to arriving at the target; response, down: the answer
  leaving the target to reaching the client; FIN after the response: the client's end of stream
  after the response's first byte;

and of a kept-alive request (up, down). For the link alone, the crossings of its SYN and GET
between the link's two ends. For the upload phases, the medians of the socket queues along the
path (`ss`): the first hop's socket on this side (unacknowledged and unsent bytes, the kernel's
round trip), and the jump hosts' and the target's queues on the far side.

One way of the link is the emulator's delay; what a crossing takes beyond it waited somewhere.
Matching is by order in time: the phases run one request at a time, so the first far-side event
after a near-side one is its own.
"""

import json
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

HEADER = re.compile(r"(\d+\.\d+) IP6? (\S+)\.(\d+) > (\S+)\.(\d+): Flags \[([^\]]*)\]")


def packets(pcap):
    """(time, source port, destination port, flags, payload) of every TCP packet in `pcap`."""
    if not pcap.exists():
        return []
    text = subprocess.run(["tcpdump", "-r", str(pcap), "-tt", "-nn", "-x"], capture_output=True,
                          text=True, check=False).stdout
    found, head, hexed = [], None, []

    def close():
        if head is None:
            return
        raw = bytes.fromhex("".join(hexed))
        if len(raw) < 20:
            return
        ip_len = (raw[0] & 15) * 4 if raw[0] >> 4 == 4 else 40
        if len(raw) < ip_len + 13:
            return
        tcp_len = (raw[ip_len + 12] >> 4) * 4
        found.append((*head, raw[ip_len + tcp_len:]))

    for line in text.splitlines():
        if line and not line[0].isspace():
            close()
            m = HEADER.match(line)
            head = (float(m[1]), int(m[3]), int(m[5]), m[6]) if m else None
            hexed = []
        elif head is not None and ":" in line:
            hexed.append("".join(line.split(":", 1)[1].split()))
    close()
    return found


def first_after(times, t):
    return next((x for x in times if x > t), None)


def median_ms(values):
    values = [v for v in values if v is not None]
    return f"{statistics.median(values) * 1e3:.1f}" if values else "-"


def new_connections(near, far, port, start, end, target):
    """Crossings of each small request on a new connection through the proxy on `port`."""
    conns = {}
    for t, sport, dport, flags, data in near:
        if start <= t <= end and port in (sport, dport):
            client = sport if dport == port else dport
            conns.setdefault(client, []).append((t, "up" if dport == port else "down", flags, data))
    syns = [t for t, _, dport, flags, _ in far if dport == target and flags == "S"]
    gets = [t for t, _, dport, _, data in far if dport == target and data.startswith(b"GET /hello HTTP/1.0")]
    kept_gets = [t for t, _, dport, _, data in far if dport == target and data.startswith(b"GET /hello HTTP/1.1")]
    answers = [t for t, sport, _, _, data in far if sport == target and data.startswith(b"HTTP/1.1 200")]
    rows, kept = [], []
    for events in conns.values():
        def at(way, test):
            return next((t for t, w, flags, data in events if w == way and test(flags, data)), None)

        ask = at("up", lambda f, d: d[:4] == b"\x05\x01\x00\x03")
        reply = at("down", lambda f, d: len(d) == 10 and d[:2] == b"\x05\x00")
        get = at("up", lambda f, d: d.startswith(b"GET /hello HTTP/1.0"))
        answer = at("down", lambda f, d: d.startswith(b"HTTP/1.1 200"))
        fin = at("down", lambda f, d: "F" in f)
        if None not in (ask, reply, get, answer, fin):
            syn, far_get = first_after(syns, ask), first_after(gets, get)
            far_answer = first_after(answers, far_get) if far_get else None
            if None not in (syn, far_get, far_answer):
                rows.append((syn - ask, reply - syn, far_get - get, answer - far_answer, fin - answer, fin - ask))
        for t, way, _, data in events:
            if way == "up" and data.startswith(b"GET /hello HTTP/1.1"):
                far_get = first_after(kept_gets, t)
                far_answer = first_after(answers, far_get) if far_get else None
                back = next((u for u, w, _, d in events if w == "down" and u > t and d.endswith(b"ok")), None)
                if None not in (far_get, far_answer, back):
                    kept.append((far_get - t, back - far_answer))
    return rows, kept


def link_alone(near_emu, far_emu, start, end, target):
    """Upward crossings of the link alone's SYNs and GETs, between the link's two ends."""
    def firsts(pkts, test):
        seen = {}
        for t, sport, dport, flags, data in pkts:
            if dport == target and test(flags, data):
                seen.setdefault(sport, t)
        return seen

    crossings = []
    for test in (lambda f, d: f == "S", lambda f, d: d.startswith(b"GET /hello")):
        sent, arrived = firsts(near_emu, test), firsts(far_emu, test)
        crossings += [arrived[p] - t for p, t in sent.items() if start <= t <= end and p in arrived]
    return crossings


def queues(samples, start, end, ports):
    """Median queues per socket role during [start, end], from `ss -tnmi` samples."""
    j1, j2, target = f":{ports['j1']}", f":{ports['j2']}", f":{ports['target']}"
    roles = {}
    for t, sockets in samples:
        if not start + 1.0 <= t <= end:
            continue
        seen = {}
        for recv_q, send_q, local, peer, info in sockets:
            role = ("first hop, this side" if peer.endswith(j1) else
                    "j1 from the link" if local.endswith(j1) else
                    "j1 to j2" if peer.endswith(j2) else
                    "j2 from j1" if local.endswith(j2) else
                    "target" if local.endswith(target) else None)
            if role is None:
                continue
            unsent = re.search(r"notsent:(\d+)", info)
            rtt = re.search(r" rtt:([\d.]+)", info)
            entry = (send_q, recv_q, int(unsent[1]) if unsent else 0, float(rtt[1]) if rtt else None)
            # The busiest socket of a role: the transfer's, not an idle session's.
            if role not in seen or entry[0] > seen[role][0]:
                seen[role] = entry
        for role, entry in seen.items():
            roles.setdefault(role, []).append(entry)
    return roles


def read_samples(path):
    samples, sockets, last = [], None, None
    if not path.exists():
        return samples
    for line in path.read_text().splitlines():
        if line.startswith("T "):
            sockets = []
            samples.append((float(line[2:]), sockets))
            last = None
        elif sockets is not None and line and not line[0].isspace() and len(line.split()) >= 4:
            f = line.split()
            last = [int(f[0]), int(f[1]), f[2], f[3], ""]
            sockets.append(last)
        elif last is not None:
            last[4] += " " + line.strip()
    return [(t, [tuple(s) for s in socks]) for t, socks in samples]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    where = Path(sys.argv[1])
    for needed in ("phases.jsonl", "ports.json"):
        if not (where / needed).is_file():
            sys.exit(f"{where / needed}: not found; {where} should be a profile's directory of a "
                     "`CAPTURE=DIR bench/shaped.sh` run (DIR/PROFILE)")
    if shutil.which("tcpdump") is None:
        sys.exit("bench/crossings.py reads the captures with tcpdump (apt-get install tcpdump)")
    phases = [json.loads(line) for line in (where / "phases.jsonl").read_text().splitlines() if line]
    ports = json.loads((where / "ports.json").read_text())
    target = ports["target"]
    near, far = packets(where / "near_lo.pcap"), packets(where / "far_lo.pcap")
    near_emu, far_emu = packets(where / "near_emu.pcap"), packets(where / "far_emu.pcap")
    samples = read_samples(where / "ss.txt")
    print("ms, medians | open up, confirmation down, GET up, response down, FIN after the response, "
          "whole | kept-alive up, down")
    for p in phases:
        label = f"{p['path']:>12} rep {p['rep']} {p['phase']:>8}"
        if isinstance(p["proxy"], list):
            ups = link_alone(near_emu, far_emu, p["start"], p["end"], target)
            print(f"{label}: link alone, up {median_ms(ups)} ({len(ups)} crossings)")
            continue
        rows, kept = new_connections(near, far, p["proxy"], p["start"], p["end"], target)
        cols = " ".join(median_ms([r[i] for r in rows]) for i in range(6))
        kept_cols = " ".join(median_ms([k[i] for k in kept]) for i in range(2))
        print(f"{label}: {cols} | {kept_cols} ({len(rows)} new, {len(kept)} kept-alive)")
        if p["phase"] == "upload":
            for role, entries in sorted(queues(samples, p["start"], p["end"], ports).items()):
                send_q = statistics.median(e[0] for e in entries)
                recv_q = statistics.median(e[1] for e in entries)
                unsent = statistics.median(e[2] for e in entries)
                rtts = [e[3] for e in entries if e[3] is not None]
                rtt = f", rtt {statistics.median(rtts):.1f} ms" if rtts else ""
                print(f"{'':>30} {role}: send queue {send_q:,.0f} B (unsent {unsent:,.0f}), "
                      f"receive queue {recv_q:,.0f} B{rtt}")


if __name__ == "__main__":
    main()
