#!/usr/bin/env python3
"""bench/report.py RESULTS.jsonl OUT.md OUT.png: the benchmark page from bench/run.sh's results.

Each figure is a ratio of kharond against a baseline measured in the same run (the median of the
run pairs, with their min and max), put next to its target from issue 17 with a verdict:
- "met" / "not met";
- "ceiling-bound" when the target is out of reach of anything on this machine, with the
  measurement that shows it: the bare splice relay (thin-relay) itself not reaching the ratio
  asked of kharond against microsocks or dante, or sshd using a whole core while serving kharond.

The plot shows every ratio divided by its target (so 1 is the target and more is better, for
"at most" targets the inverse), on a log scale, drawn by gnuplot.
"""

import json
import os
import statistics
import subprocess
import sys
from collections import defaultdict

KIB = 1024


def load(path):
    records = defaultdict(list)
    for line in open(path):
        line = line.strip()
        if line:
            r = json.loads(line)
            records[r["phase"]].append(r)
    return records


def med(v):
    return statistics.median(v) if v else float("nan")


def pair_ratios(a, b):
    """Run-by-run ratios of two interleaved series."""
    return [x / y for x, y in zip(a, b) if y > 0]


class Figure:
    def __init__(self, name, value, unit, target, at_least, verdict, note="", lo=None, hi=None, plot=True):
        self.name, self.value, self.unit, self.target, self.at_least = name, value, unit, target, at_least
        self.verdict, self.note, self.lo, self.hi, self.plot = verdict, note, lo, hi, plot

    def score(self, v):
        if v is None or self.target is None or v != v or v <= 0:
            return None
        return v / self.target if self.at_least else self.target / v


def fmt(v, unit):
    if v is None or v != v:
        return "—"
    if unit == "x":
        return f"{v:.2f}×"
    if unit == "B":
        return f"{v / KIB:.1f} KiB"
    if unit == "MiB":
        return f"{v:.1f} MiB"
    if unit == "s":
        return f"{v:.2f} s"
    if unit == "conn/s":
        return f"{v:,.0f} conn/s"
    if unit == "ns":
        return f"{v:.0f} ns"
    return f"{v:.3g} {unit}"


def verdict(value, target, at_least):
    if value is None or value != value or target is None:
        return "reported"
    ok = value >= target if at_least else value <= target
    return "met" if ok else "not met"


def ratio_figure(name, ratios, target, at_least=True, ceiling=None, note=""):
    """A ratio figure from run-pair ratios; `ceiling` is (ceiling ratio, why) or None."""
    value = med(ratios)
    lo, hi = (min(ratios), max(ratios)) if ratios else (None, None)
    v = verdict(value, target, at_least)
    if v == "not met" and ceiling is not None:
        c, why = ceiling
        reachable = c >= target if at_least else c <= target
        if not reachable:
            v = "ceiling-bound"
            note = (note + "; " if note else "") + why
    return Figure(name, value, "x", target, at_least, v, note, lo, hi)


def direct_figures(rec, figures):
    bulk = defaultdict(dict)
    for r in rec["bulk"]:
        bulk[r["streams"]][r["path"]] = r
    for streams in sorted(bulk):
        paths = bulk[streams]
        if "kharond" not in paths:
            continue
        k = paths["kharond"]["mib_s"]
        s = f"{streams} stream" + ("s" if streams > 1 else "")
        thin = paths.get("thin-relay", {}).get("mib_s")
        loop = paths.get("direct loopback", {}).get("mib_s")
        cpu = paths["kharond"].get("cpu_s_per_gib")
        extra = f"kharond {med(k):.0f} MiB/s"
        if loop:
            extra += f", {100 * med(k) / med(loop):.0f} % of plain loopback ({med(loop):.0f} MiB/s)"
        if cpu is not None:
            extra += f", kharond CPU {cpu:.2f} s/GiB"
        if thin:
            thin_cpu = paths["thin-relay"].get("cpu_s_per_gib")
            thin_note = f"; thin-relay {med(thin):.0f} MiB/s"
            if thin_cpu is not None:
                # Client, relay and sink share 2 cores: a relay's throughput here is also its share
                # of them, so the CPU each spends per GiB is the fairer comparison of the two.
                thin_note += f", CPU {thin_cpu:.2f} s/GiB"
            figures.append(ratio_figure(f"direct, {s}: kharond / thin-relay", pair_ratios(k, thin), 0.95,
                                        note=extra + thin_note))
            k_cpu_runs = paths["kharond"].get("cpu_s_per_gib_runs") or []
            thin_cpu_runs = paths["thin-relay"].get("cpu_s_per_gib_runs") or []
            epoll_cpu_runs = paths.get("thin-epoll", {}).get("cpu_s_per_gib_runs") or []
            machine = {name: med(p.get("machine_s_per_gib_runs") or []) for name, p in paths.items()}
            machine_note = ""
            if all(v == v for v in machine.values()):
                # A process is charged the kernel's TCP work of whatever it sends on loopback
                # (delivery included), so relays can split one machine's work differently; the
                # machine's own total cannot be split.
                machine_note = "; whole machine per GiB: " + ", ".join(
                    f"{name} {v:.3f} s" for name, v in machine.items())
            if k_cpu_runs and thin_cpu_runs:
                # Issue 24: direct connections should not cost battery. thin-relay is the thread
                # relay (blocking splice, a thread per direction): no event loop at all. thin-epoll
                # is the same splice driven by epoll readiness, as any event loop must be: if it
                # costs more than thin-relay itself, so must kharond.
                ceiling = None
                if epoll_cpu_runs:
                    c = med(pair_ratios(epoll_cpu_runs, thin_cpu_runs))
                    ceiling = (c, f"thin-epoll, the same splice relay driven by epoll, itself costs {c:.2f}× "
                                  f"thin-relay ({med(epoll_cpu_runs):.3f} s/GiB)")
                figures.append(ratio_figure(
                    f"direct, {s}: kharond CPU per GiB / thin-relay", pair_ratios(k_cpu_runs, thin_cpu_runs),
                    1.0 if streams == 1 else None, at_least=False, ceiling=ceiling,
                    note=f"kharond {med(k_cpu_runs):.3f} s/GiB, thin-relay {med(thin_cpu_runs):.3f} s/GiB "
                         f"(lower is better; target from issue 24){machine_note}"))
            if k_cpu_runs and epoll_cpu_runs:
                figures.append(ratio_figure(
                    f"direct, {s}: kharond CPU per GiB / thin-epoll", pair_ratios(k_cpu_runs, epoll_cpu_runs),
                    1.0 if streams == 1 else None, at_least=False,
                    note=f"kharond {med(k_cpu_runs):.3f} s/GiB, thin-epoll {med(epoll_cpu_runs):.3f} s/GiB: "
                         "the floor for a relay driven by readiness (lower is better)"))
        for other, target in (("microsocks", 5.0), ("dante", 1.5)):
            o = paths.get(other, {}).get("mib_s")
            if not o:
                figures.append(Figure(f"direct, {s}: kharond / {other}", None, "x", target, True, "not measured",
                                      f"{other} not installed"))
                continue
            ceiling = None
            if thin:
                c = med(pair_ratios(thin, o))
                ceiling = (c, f"thin-relay itself reaches {c:.2f}× {other} ({med(o):.0f} MiB/s)")
            figures.append(ratio_figure(f"direct, {s}: kharond / {other}", pair_ratios(k, o), target,
                                        ceiling=ceiling, note=f"{other} {med(o):.0f} MiB/s"))

    conn = {(r["path"], r["how"]): r for r in rec["conn"]}
    k, m = conn.get(("kharond", "IP")), conn.get(("microsocks", "IP"))
    if k and m and m["added_p50_us"] and m["added_p50_us"] > 0:
        kn = conn.get(("kharond", "name"))
        thin = conn.get(("thin-relay", "IP"))
        note = f"added p50 kharond {k['added_p50_us']:.0f} µs, microsocks {m['added_p50_us']:.0f} µs (by IP)"
        if kn:
            note += f"; kharond by name {kn['added_p50_us']:.0f} µs"
        ceiling = None
        if thin:
            c = thin["added_p50_us"] / m["added_p50_us"]
            ceiling = (c, f"thin-relay adds {thin['added_p50_us']:.0f} µs, {c:.2f}× microsocks")
        figures.append(ratio_figure("direct, added setup p50: kharond / microsocks",
                                    [k["added_p50_us"] / m["added_p50_us"]], 1.2, at_least=False,
                                    ceiling=ceiling, note=note))

    for r in rec["owner_check"]:
        c, u = r["checked_us"], r["unchecked_us"]
        figures.append(ratio_figure(
            f"direct, added setup p50 by {r['how']}: owner check / none", pair_ratios(c, u), 1.1,
            at_least=False,
            note=f"a password-less kharond asking the kernel who owns each client's socket (sock_diag) "
                 f"against one with allow_other_users: {med(c):.1f} / {med(u):.1f} µs added p50, "
                 f"{med([x - y for x, y in zip(c, u)]):+.1f} µs; {len(c)} interleaved runs of "
                 f"{r['conns']} connections (issue 33)"))

    rates = {r["path"]: r for r in rec["rate"] if "hops" not in r}
    if "kharond" in rates:
        k = rates["kharond"]
        v = med(k["conn_s"])
        note = f"{k['workers']} workers, {k['errors']} failed"
        if "direct loopback" in rates:
            note += f"; plain loopback {med(rates['direct loopback']['conn_s']):,.0f} conn/s"
        for other in ("thin-relay", "microsocks", "dante", "thin-socks", "thin-socks-epoll"):
            if other in rates:
                note += f"; {other} {med(rates[other]['conn_s']):,.0f}"
        figures.append(Figure("direct, connections per second, 64 workers", v, "conn/s", 5000, True,
                              verdict(v, 5000, True) if k["errors"] == 0 else "not met", note + " (target: docs/performance.md)",
                              min(k["conn_s"]), max(k["conn_s"]), plot=False))
        if "microsocks" in rates:
            figures.append(direct_rate_against_microsocks(rates))

    link = {r["path"]: r for r in rec["link"]}
    if "kharond" in link and "direct loopback" in link:
        k, d = link["kharond"]["mib_s"], link["direct loopback"]["mib_s"]
        r0 = link["kharond"]
        figures.append(ratio_figure(f"direct over {r0['mbit']:.0f} Mbit/s, {r0['rtt_ms']} ms: kharond / no proxy",
                                    pair_ratios(k, d), 0.98,
                                    note=f"kharond {med(k):.1f} MiB/s, link alone {med(d):.1f} MiB/s (slow-link)"))


def direct_rate_against_microsocks(rates):
    """kharond's direct connections per second against microsocks' (issue 53: ahead of every peer,
    at least 1.2x the fastest), with the ceiling: thin-socks (bench/client/thin_socks.rs), the
    least a SOCKS server can do per connection, in its better form, against microsocks in the
    same run. Every path's CPU per connection is in the note: on 2 cores the rate is the busy
    time divided by what a connection costs the proxy, the client and the echo server together."""
    k, m = rates["kharond"], rates["microsocks"]
    note = f"{med(k['conn_s']):,.0f} / {med(m['conn_s']):,.0f} conn/s, failed {k['errors']} / {m['errors']}"
    costs = []
    for name in ("kharond", "microsocks", "thin-socks", "thin-socks-epoll", "dante"):
        c = rates.get(name, {}).get("cpu_us_per_conn", {})
        if "proxy" in c:
            costs.append(f"{name} {c['proxy']:.0f} (kernel {c.get('proxy_system', 0):.0f}) + client and echo "
                         f"server {c.get('client', 0) + c.get('echo', 0):.0f}")
    if costs:
        note += "; CPU µs per connection: " + ", ".join(costs)
    ceiling = None
    thin = [(name, med(pair_ratios(rates[name]["conn_s"], m["conn_s"])))
            for name in ("thin-socks", "thin-socks-epoll") if name in rates]
    if thin:
        name, c = max(thin, key=lambda t: t[1])
        ceiling = (c, f"{name}, the least a SOCKS server can do per connection (bench/client/thin_socks.rs), "
                      f"itself reaches {c:.2f}× microsocks")
    return ratio_figure("direct, connections per second, 64 workers: kharond / microsocks",
                        pair_ratios(k["conn_s"], m["conn_s"]), 1.2, ceiling=ceiling,
                        note=note + " (target from issue 53)")


def memory_figures(rec, figures):
    idle = defaultdict(dict)
    for r in rec["idle"]:
        idle[r["n"]][r["path"]] = r
    kernel = lambda r: (r["slab_kib"][1] - r["slab_kib"][0]) + (r["tcp_mem_kib"][1] - r["tcp_mem_kib"][0])
    for n in sorted(idle):
        k, d = idle[n].get("kharond"), idle[n].get("direct loopback")
        if not k:
            continue
        user = (k["rss_kib"][1] - k["rss_kib"][0]) * KIB / n
        kern = (kernel(k) - (kernel(d) if d else 0)) * KIB / n
        total = user + kern
        figures.append(Figure(f"memory per idle direct connection, {n:,}", total, "B", 16 * KIB, False,
                              verdict(total, 16 * KIB, False),
                              f"user (VmRSS) {user / KIB:.1f} KiB + kernel {kern / KIB:.1f} KiB "
                              f"(Slab + TCP memory, less the same {n:,} connections without a proxy); "
                              f"RSS {k['rss_kib'][0] / KIB:.1f} → {k['rss_kib'][1] / KIB:.1f} → "
                              f"{k['rss_kib'][2] / KIB:.1f} MiB after closing"))
    for r in rec["daemon"][:1]:
        v = r["rss_kib"] / KIB
        figures.append(Figure("idle daemon RSS (example inventory)", v, "MiB", 15, False, verdict(v, 15, False),
                              "right after start, no connection yet"))
    inv = {r["which"]: r for r in rec["inventory"]}
    if "large" in inv:
        runs = inv["large"]["runs"]
        n = inv["large"]["clusters"]
        rss = med([r["rss_kib"] for r in runs]) / KIB
        start = med([r["start_s"] for r in runs])
        pac = med([r["pac_bytes"] for r in runs])
        after = med([r["rss_after_pac_kib"] for r in runs]) / KIB
        small = inv.get("example", {}).get("runs", [])
        base = f"; example inventory: {med([r['start_s'] for r in small]) * 1000:.0f} ms, " \
               f"{med([r['rss_kib'] for r in small]) / KIB:.1f} MiB" if small else ""
        accept = [r["rss_at_accept_kib"] for r in runs if "rss_at_accept_kib" in r]
        settled = f"1 s after start ({med(accept) / KIB:.1f} MiB as the port first accepts, while the parsed " \
                  f"inventory is being freed); " if accept else ""
        figures.append(Figure(f"{n:,}-cluster inventory: daemon RSS", rss, "MiB", 100, False,
                              verdict(rss, 100, False), f"{settled}{after:.1f} MiB after the first PAC fetch{base}"))
        figures.append(Figure(f"{n:,}-cluster inventory: start", start, "s", 1.0, False, verdict(start, 1.0, False),
                              f"exec until the SOCKS port accepts; PAC {pac / 1e6:.1f} MB, "
                              f"rendered in {med([r['pac_s'] for r in runs]) * 1000:.0f} ms"))
    bursts = rec["burst"]
    if bursts:
        n, idle_s = bursts[0]["conns"], bursts[0]["idle_s"]
        rss = lambda at: med([r[at]["rss_kib"] for r in bursts]) / KIB
        heap = lambda at, field: med([r[at][field] for r in bursts]) / KIB / KIB
        after = rss("idle")
        # The idle daemon's own target (15 MiB), and room for what a burst may rightly leave: the
        # registry's and the runtime's tables grown to the burst's size.
        target = 20
        figures.append(Figure(f"RSS after a {n:,}-connection burst and {idle_s:.0f} s idle", after, "MiB", target,
                              False, verdict(after, target, False),
                              f"{n:,} concurrent SOCKS connections, direct, 16 KiB each way: RSS {rss('start'):.1f} "
                              f"before → {rss('held'):.1f} with all open → {rss('closed'):.1f} 2 s after they "
                              f"closed → {after:.1f} MiB; live heap {heap('idle', 'heap_in_use'):.1f} MiB then; "
                              f"median of {len(bursts)} runs (bench/burst.sh)"))
    lookups = [r for r in rec["routing"] if r["group"] == "lookup"]
    if lookups:
        vals = {r["name"]: r["median_ns"] for r in lookups}
        worst = max(vals.values())
        figures.append(Figure("route lookup at 10,000 clusters (slowest case)", worst, "ns", None, False, "reported",
                              ", ".join(f"{k} {v:.0f}" for k, v in sorted(vals.items())) + " ns (criterion medians)",
                              plot=False))


def routed_figures(rec, figures):
    for r in rec["routed"]:
        k, s = r["kharond_mb_s"], r["ssh_mb_s"]
        default = r["cipher"] == "default"
        where = "50 ms link" if r["rtt_ms"] else ("1 hop" if r["hops"] == 1 else f"{r['hops']} hops")
        if default:
            target, name = 1.5, f"routed, default vs default cipher, {where}: kharond / ssh -D"
        elif r["rtt_ms"]:
            target, name = 2.5, f"routed, same cipher, {r['rtt_ms']} ms link: kharond / ssh -D"
        else:
            target, name = (1.0 if r["hops"] == 1 else 1.25), f"routed, same cipher, {where}: kharond / ssh -D"
        util = med(r.get("sshd_util_kharond", []))
        note = f"{med(k):.0f} / {med(s):.0f} MB/s"
        if not default:
            note += f", {r['cipher']}"
        note += f"; client CPU {med(r['kharond_cpu_s_per_gib']):.2f} / {med(r['ssh_cpu_s_per_gib']):.2f} s/GiB"
        ceiling = None
        if util == util and util >= 0.9:
            ceiling = (0, f"sshd used {util:.2f} of a core serving kharond")
        figures.append(ratio_figure(name, pair_ratios(k, s), target, ceiling=ceiling, note=note))
    plain = [r for r in rec["conn"] if r["path"] == "direct loopback" and r["how"] == "IP"]
    floor_ms = plain[0]["p50_us"] / 1000 if plain else None
    setups = defaultdict(dict)
    for r in rec["routed_setup"]:
        setups[(r["hops"], r["cipher"], r["rtt_ms"])][r["path"]] = r
    for (hops, cipher, rtt), p in sorted(setups.items()):
        if "kharond" not in p or "ssh -D" not in p or cipher == "default":
            continue
        k, s = p["kharond"], p["ssh -D"]
        where = f"{rtt} ms link" if rtt else (f"{hops} hop" + ("s" if hops > 1 else ""))
        # Over a long link both pay the round trip: the target is for loopback.
        target = 0.1 if not rtt else None
        # No proxy sets a connection up faster than one plain loopback connect (same run): when
        # ssh -D's p50 is under ten of those, the target is out of anyone's reach.
        ceiling = None
        if floor_ms and target is not None:
            ceiling = (floor_ms / s["p50_ms"], f"one plain loopback connect alone takes {floor_ms * 1000:.0f} µs, "
                                               f"{floor_ms / s['p50_ms']:.2f}× ssh -D's p50")
        f = ratio_figure(f"routed, warm setup p50, {where}: kharond / ssh -D", [k["p50_ms"] / s["p50_ms"]], target,
                         at_least=False, ceiling=ceiling,
                         note=f"{k['p50_ms']:.2f} / {s['p50_ms']:.2f} ms; p99 {k['p99_ms']:.2f} / {s['p99_ms']:.2f} ms; "
                              f"over 20 ms {k['slow']} / {s['slow']} of {k['n']}")
        f.lo = f.hi = None
        f.plot = target is not None
        figures.append(f)
        if k.get("request_p50_ms") and s.get("request_p50_ms"):
            # What a client sees: setup plus one small request and its answer (kubectl's first call).
            r = k["request_p50_ms"] / s["request_p50_ms"]
            figures.append(Figure(f"routed, warm setup and first request/response p50, {where}: kharond / ssh -D",
                                  r, "x", None, False, "reported",
                                  f"{k['request_p50_ms']:.2f} / {s['request_p50_ms']:.2f} ms" + ("" if rtt else
                                  " (no target; shown because ssh -D's delayed ACK shows here at every hop count)"),
                                  plot=False))
    rates = {r["path"]: r for r in rec["rate"] if "hops" in r}
    if "kharond" in rates and "ssh -D" in rates:
        k, s = rates["kharond"], rates["ssh -D"]
        note = (f"{med(k['conn_s']):,.0f} / {med(s['conn_s']):,.0f} conn/s, failed {k['errors']} / {s['errors']}")
        if "p50_ms" in k and "p50_ms" in s:
            note += f"; per connection p50 {k['p50_ms']:.1f} / {s['p50_ms']:.1f} ms"
        kc, sc = k.get("cpu_us_per_conn", {}), s.get("cpu_us_per_conn", {})
        target = 1.3
        ceiling = None
        parts = ("proxy", "proxy_system", "sshd", "client", "echo")
        if all(p in kc for p in parts) and all(p in sc for p in parts):
            note += (f"; CPU µs per connection: proxy {kc['proxy']:.0f} (kernel {kc['proxy_system']:.0f}) / "
                     f"{sc['proxy']:.0f} (kernel {sc['proxy_system']:.0f}), sshd {kc['sshd']:.0f} / {sc['sshd']:.0f}, "
                     f"client and echo server {kc['client'] + kc['echo']:.0f} / {sc['client'] + sc['echo']:.0f}; "
                     f"machine idle {100 * k.get('machine_idle', 0):.0f} / {100 * s.get('machine_idle', 0):.0f} %")
            # On 2 cores shared by proxy, sshd, client and echo server the rate is the CPU the rig
            # gets divided by what a connection costs all of them. sshd, the client and the echo
            # server do the same work per connection whichever proxy is in front (sshd makes the
            # same syscalls per connection for both), so their cost is the mean of the two paths'
            # runs: measured apart, it moves with the machine by more than the proxies differ.
            # The best any proxy could do costs only the kernel work of its sockets (the lower of
            # the two proxies' system time) on top of that; against ssh -D's whole path at the
            # same idle, that is the ceiling. What it leaves for user space is the budget a proxy
            # would have to stay within to reach the target.
            shared = sum((kc[p] + sc[p]) / 2 for p in ("sshd", "client", "echo"))
            kernel = min(kc["proxy_system"], sc["proxy_system"])
            floor = shared + kernel
            whole = sc["proxy"] + shared
            if floor > 0:
                c = whole / floor
                budget = whole / target - floor
                note += (f"; ceiling on this rig {c:.2f}×, which leaves a proxy {budget:.0f} µs of user space per "
                         f"connection for {target}× (kharond {kc['proxy'] - kc['proxy_system']:.0f})")
                ceiling = (c, f"a proxy with no user-space work at all would reach {c:.2f}× ssh -D: sshd, client "
                              f"and echo server cost {shared:.0f} µs per connection (mean of both paths) and any "
                              f"proxy's sockets {kernel:.0f} µs of kernel time, against {whole:.0f} µs for the whole "
                              f"ssh -D path")
        figures.append(ratio_figure("routed, connections per second, 64 workers: kharond / ssh -D",
                                    pair_ratios(k["conn_s"], s["conn_s"]), target, ceiling=ceiling,
                                    note=note + " (target from issue 24)"))
    pages = {r["path"]: r for r in rec.get("page", []) if "hops" in r}
    if "kharond" in pages and "ssh -D" in pages:
        k, s = pages["kharond"], pages["ssh -D"]
        figures.append(Figure("routed, browser-like page load (6 connections, 100 objects) p50: kharond / ssh -D",
                              k["p50_ms"] / s["p50_ms"], "x", None, False, "reported",
                              f"p50 {k['p50_ms']:.2f} / {s['p50_ms']:.2f} ms, p95 {k['p95_ms']:.2f} / "
                              f"{s['p95_ms']:.2f} ms over {k['n']} pages each (issue 24; lower is better)", plot=False))


def shaped_profiles(rec):
    """bench/shaped.sh's rows per link profile, in the order they ran: name -> {"paths": {path:
    [rep records]}, "first": {path: record}, "link": its shaped_link record or None}. Rows written
    before profiles had names are keyed RTT_MS:MBIT."""
    profiles = {}
    for r in rec["shaped"]:
        key = r.get("profile") or f"{r['rtt_ms']:g}:{r['mbit']:g}"
        p = profiles.setdefault(key, {"paths": defaultdict(list), "first": {}, "link": None,
                                      "rtt_ms": r["rtt_ms"], "mbit": r["mbit"]})
        if r["kind"] == "rep":
            p["paths"][r["path"]].append(r)
        else:
            p["first"][r["path"]] = r
    for r in rec["shaped_link"]:
        if r["profile"] in profiles:
            profiles[r["profile"]]["link"] = r
    return profiles


def mbit_text(bit_s):
    return f"{bit_s / 1e9:g} Gbit/s" if bit_s >= 1e9 else f"{bit_s / 1e6:g} Mbit/s"


def link_summary(p):
    """(one-way delay and rate, for row names; buffer, loss and schedule, for the profile table)."""
    link = (p["link"] or {}).get("link")
    if not link:
        return f"{p['rtt_ms'] / 2:g} ms each way, {p['mbit']:g} Mbit/s", "one BDP (slow-link)", "", ""
    up = link["up"]
    steps = up["rate"]
    if len(steps) == 1:
        rate, schedule = mbit_text(steps[0]["bit_s"]), ""
    else:
        rate = "↔".join(f"{s['bit_s'] / 1e6:g}" for s in steps) + " Mbit/s"
        schedule = ", then ".join(f"{mbit_text(s['bit_s'])} for {s['seconds']:g} s" for s in steps) + ", repeated"
    if up["queue_packets"]:
        buffer = f"{up['queue_packets']:,} packets"
    else:
        buffer = f"{up['queue_bytes'] / 1000:,.0f} kB"
    buffer += f" ({up['queue_ms']:.0f} ms, {up['queue_bdp']:.2g} BDP)"
    loss = f"{up['loss'] * 100:g} %" if up["loss"] else ""
    return f"{up['delay_ms']:g} ms each way, {rate}", buffer, loss, schedule


def p50s(records, field):
    return [q(r[field], 50) for r in records if r.get(field)]


def q(v, p):
    return statistics.quantiles(v, n=100, method="inclusive")[p - 1] if len(v) > 1 else (v[0] if v else None)


def shaped_figures(rec, figures):
    """bench/shaped.sh: per link profile, kharond against ssh -D through the same emulated path,
    and the link alone (no proxy) as the reference. Ratios are per repetition (kharond's figure
    over ssh -D's in the same repetition). The same targets on every profile (docs/performance.md);
    at 1 Gbit/s the bulk download's is 2.5x. A target out of reach on this rig is ceiling-bound:
    no small request is faster than on the idle link, no transfer faster than the link alone."""
    run = rec["shaped_run"][0] if rec["shaped_run"] else {}
    load = ""
    if run:
        load = f"load {run.get('load_before', '?')} → {run.get('load_after', '?')}"
        if run.get("load_during_max") is not None:
            load += f" (max {run['load_during_max']})"
    for name, p in shaped_profiles(rec).items():
        paths = p["paths"]
        k, s, alone = paths.get("kharond", []), paths.get("ssh -D", []), paths.get("link alone", [])
        if not k or not s:
            continue
        mbit = p["mbit"]
        summary = link_summary(p)[0]
        where = f"shaped {name} ({summary})" if p["link"] else f"shaped {summary}"
        link_mb_s = mbit / 8
        counters = ((p["link"] or {}).get("link") or {}).get("counters", {})
        late = max((c.get("late_p99_below_us") or 0 for c in counters.values()), default=0)
        behind = f"; link-emu fell behind: p99 of its deliveries up to {late / 1000:.1f} ms late" if late > 1000 else ""
        tail = f"{behind}; {load}"
        best_idle = min(med(p50s(k, "idle_ms")), med(p50s(s, "idle_ms")))

        def lat(field, target, label, extra=""):
            ks, ss = [q(r[field], 50) for r in k], [q(r[field], 50) for r in s]
            pairs = [a / b for a, b in zip(ks, ss) if a is not None and b]
            if not pairs:
                return
            k95 = med([q(r[field], 95) for r in k if r[field]])
            s95 = med([q(r[field], 95) for r in s if r[field]])
            ref = p50s(alone, field)
            extra += f"; link alone {med(ref):.0f} ms" if ref else ""
            ceiling = None
            if target is not None and field != "idle_ms":
                c = best_idle / med([x for x in ss if x])
                ceiling = (c, f"no small request is faster than on the idle link ({best_idle:.0f} ms): "
                              f"{c:.2f}× ssh -D's")
            figures.append(ratio_figure(
                f"{where}: {label}: kharond / ssh -D", pairs, target, at_least=False, ceiling=ceiling,
                note=f"{med([x for x in ks if x is not None]):.0f} / {med([x for x in ss if x is not None]):.0f} ms, "
                     f"p95 {k95:.0f} / {s95:.0f} ms "
                     f"({', '.join(f'{a:.0f}/{b:.0f}' for a, b in zip(ks, ss) if a is not None and b is not None)} "
                     f"per repetition){extra}{tail}"))
        lat("idle_ms", 1.1, "small request p50, idle", "; target: unchanged, within 10 % of ssh -D")
        lat("down_new_ms", 0.5, "small request p50 during a bulk download")
        # Fixed windows on the same path (PIN_WINDOWS): what the rule is up against.
        for path in sorted(x for x in paths if x.startswith("kharond pinned ")):
            pinned = paths[path]
            news = [q(r["down_new_ms"], 50) for r in pinned]
            pairs = [a / q(b["down_new_ms"], 50) for a, b in zip(news, s) if a is not None]
            rates = [r["down_mb_s"] / b["down_mb_s"] for r, b in zip(pinned, s) if b["down_mb_s"]]
            if pairs and rates:
                figures.append(ratio_figure(
                    f"{where}: {path.removeprefix('kharond ')} window: small request p50 during a bulk download / ssh -D",
                    pairs, None, at_least=False,
                    note=f"{med(news):.0f} ms; its bulk rate {med(rates):.2f}× ssh -D's "
                         f"({med([r['down_mb_s'] for r in pinned]):.2f} MB/s, link {link_mb_s:.2f}){tail}"))
        lat("down_alive_ms", None, "kept-alive small request p50 during a bulk download")
        lat("up_new_ms", 0.5, "small request p50 during a bulk upload")
        lat("up_alive_ms", None, "kept-alive small request p50 during a bulk upload")
        for field, label, target in (("down_mb_s", "bulk download rate", 2.5 if mbit >= 1000 else 0.95),
                                     ("up_mb_s", "bulk upload rate", 0.95)):
            kr, sr = [r[field] for r in k], [r[field] for r in s]
            ref = [r[field] for r in alone]
            top = med(ref) if ref else link_mb_s
            what = f"the link alone carries {top:.2f} MB/s for one TCP connection" if ref else \
                f"the link itself carries {top:.2f} MB/s"
            c = top / med(sr) if med(sr) > 0 else None
            ceiling = (c, f"{what}, {c:.2f}× ssh -D's {med(sr):.2f} MB/s") if c else None
            why = " (issue 43's target at 1 Gbit/s)" if field == "down_mb_s" and mbit >= 1000 else ""
            figures.append(ratio_figure(
                f"{where}: {label}: kharond / ssh -D", pair_ratios(kr, sr), target, ceiling=ceiling,
                note=f"{med(kr):.2f} / {med(sr):.2f} MB/s; link alone "
                     f"{f'{top:.2f}' if ref else '—'} MB/s of the link's {link_mb_s:.2f}"
                     f" (per repetition {', '.join(f'{a:.1f}/{b:.1f}' for a, b in zip(kr, sr))}"
                     f"{STALL_NOTE if mbit >= 1000 and field == 'down_mb_s' else ''}){why}{tail}"))
        share = lambda r: min(r["two_mb_s"]) / max(r["two_mb_s"]) if max(r["two_mb_s"]) > 0 else 0.0
        kf, sf = [share(r) for r in k], [share(r) for r in s]
        f = Figure(f"{where}: two bulk downloads at once, slower / faster (kharond)", med(kf), "x", 0.8, True,
                   verdict(med(kf), 0.8, True),
                   "MB/s each: kharond " + ", ".join("/".join(f"{x:.2f}" for x in r["two_mb_s"]) for r in k)
                   + "; ssh -D " + ", ".join("/".join(f"{x:.2f}" for x in r["two_mb_s"]) for r in s)
                   + f" (ssh -D's share {med(sf):.2f}){tail}", min(kf), max(kf))
        figures.append(f)
        fk, fs = p["first"].get("kharond"), p["first"].get("ssh -D")
        if fk and fs and fk["new_ms"] and fs["new_ms"]:
            a, b = q(fk["new_ms"], 50), q(fs["new_ms"], 50)
            figures.append(Figure(f"{where}: small request p50 during the *first* bulk download after start: "
                                  f"kharond / ssh -D", a / b, "x", None, False, "reported",
                                  f"{a:.0f} / {b:.0f} ms: kharond starts with OpenSSH's 2 MiB window and doubles it "
                                  f"while the rate grows, measuring the path during this transfer, whose channel "
                                  f"follows the measured window from its next adjust on (docs/ssh-engine.md, "
                                  f"\"Windows that follow the path\"){tail}", plot=False))


def shaped_table(rec):
    """The profiles the shaped rows ran on, as link-emu resolved them, with what the emulator
    counted and the load average during each."""
    profiles = shaped_profiles(rec)
    if not any(p["link"] for p in profiles.values()):
        return []
    out = ["", "### Shaped link profiles", "",
           "The links of the \"shaped\" rows, emulated by `link-emu` ([performance.md](performance.md), \"The emulated link\"): "
           "per direction a one-way delay, a bottleneck rate, a drop-tail buffer in front of it and random loss. "
           "\"Link alone\": one TCP connection dialled straight through the link, no proxy, no SSH (median of the "
           "repetitions). The emulator's counters are both directions' over the whole profile; \"late\" is how much "
           "later than due it delivered 99 % of the packets (under 1 ms: it kept up).",
           "",
           "| profile | link-emu options | link | buffer | loss / rate schedule | link alone down / up | "
           "link-emu: dropped by the buffer / lost, late p99, CPU | load average |",
           "|---|---|---|---|---|---|---|---|"]
    for name, p in profiles.items():
        if not p["link"]:
            continue
        summary, buffer, loss, schedule = link_summary(p)
        r = p["link"]
        link = r["link"]
        c = link.get("counters", {})
        dropped = sum(x.get("dropped_full", 0) for x in c.values())
        lost = sum(x.get("lost", 0) for x in c.values())
        late = max((x.get("late_p99_below_us") or 0 for x in c.values()), default=0)
        cpu = link.get("cpu_s", 0) / link["seconds"] if link.get("seconds") else 0
        alone = p["paths"].get("link alone", [])
        rates = f"{med([x['down_mb_s'] for x in alone]):.2f} / {med([x['up_mb_s'] for x in alone]):.2f} MB/s" \
            if alone else "—"
        extra = "; ".join(x for x in (loss and f"{loss} loss", schedule) if x) or "—"
        out.append(f"| {name} | `{r['args']}` | {summary} | {buffer} | {extra} | {rates} | "
                   f"{dropped:,} / {lost:,}, under {late / 1000:g} ms, {cpu * 100:.0f} % of a core | "
                   f"{r['load_start']} → {r['load_end']} |")
    return out


# Why one repetition of the 1 Gbit/s bulk rate may fall a fifth short of the others.
STALL_NOTE = ": a repetition may hold a stall of the last hop's sshd (docs/ssh-engine.md, \"At 1 Gbit/s\")"


def page(rec, figures):
    m = rec["machine"][0] if rec["machine"] else {}
    ciphers = rec["cipher"]
    out = ["# Benchmarks", ""]
    if m.get("quick"):
        out += ["**QUICK=1 smoke run: tiny sizes, the figures mean nothing.**", ""]
    out += [
        "Written by `bench/run.sh` (one command; `QUICK=1` for a smoke run). Every figure is kharond "
        "against a baseline measured in the same run, runs interleaved and repeated; a ratio is the "
        "median of the run pairs, [min–max] beside it. Raw results: `docs/benchmarks.jsonl`.",
        "",
        "| | |", "|---|---|",
        f"| date | {m.get('date', '?')} |",
        f"| CPU | {m.get('cpu', '?')}, {m.get('cores', '?')} cores, AES-NI+PCLMULQDQ: {'yes' if m.get('aes') else 'no'} |",
        f"| kernel | Linux {m.get('kernel', '?')}, TCP congestion control {m.get('congestion_control', '?')} |",
        f"| load average | {m.get('load_before', '?')} before, {m.get('load_after', '?')} after ({m.get('seconds', '?')} s) |",
        f"| kharond | {m.get('kharond', '?')} |",
        f"| OpenSSH | {m.get('openssh', '?')} |",
        f"| microsocks, dante | {m.get('microsocks') or 'not installed'}, {m.get('dante') or 'not installed'} (Debian) |",
        f"| rustc | {m.get('rustc', '?')} |",
    ]
    for run in rec["shaped_run"][:1]:
        during = ""
        if run.get("load_during_max") is not None:
            during = f", {run['load_during_mean']} on average and at most {run['load_during_max']} during the run"
        took = f", {run['seconds']} s" if run.get("seconds") else ""
        cc = f"; TCP congestion control {run['congestion_control']}" if run.get("congestion_control") else ""
        out.append(f"| shaped rows | {run['date']}, {run['kharond']}; load average {run['load_before']} before"
                   f"{during}, {run['load_after']} after{took}{cc} (`bench/shaped.sh`, which can run alone) |")
    if ciphers:
        neg = "; ".join(f"{c['client']}: **{c['cipher']}**" for c in ciphers)
        out.append(f"| ciphers, default vs default | {neg} (sshd LogLevel DEBUG) |")
    out.append("| ciphers, same-cipher runs | aes256-gcm@openssh.com, the only one each sshd offers |")
    out += ["", "![ratios against targets](benchmarks.png)", "",
            "| figure | measured | [min–max] | target | verdict | how / why |", "|---|---|---|---|---|---|"]
    for f in figures:
        rng = f"{fmt(f.lo, f.unit)}–{fmt(f.hi, f.unit)}" if f.lo is not None and f.lo != f.hi else ""
        tgt = "—" if f.target is None else ("≥ " if f.at_least else "≤ ") + fmt(f.target, f.unit)
        out.append(f"| {f.name} | {fmt(f.value, f.unit)} | {rng} | {tgt} | {f.verdict} | {f.note} |")
    out += shaped_table(rec)
    out += ["", "Targets are issue 17's, issue 24's where marked, issue 43's and 53's on the shaped rows. \"ceiling-bound\": not reachable by anything on this machine, with the "
            "measurement that shows it. Memory is per connection, in KiB (1,024 B): kharond's VmRSS growth, plus "
            "the kernel's Slab and TCP memory growth less that of the same connections held without a proxy. "
            "The plot divides each ratio by its target (for an \"at most\" target, the target by the ratio): "
            "1 is the target, right of it is better.", ""]
    return "\n".join(out)


COLOURS = {"met": 0x44AA66, "not met": 0xCC4444, "ceiling-bound": 0x999999}


def plot(figures, png):
    rows = [f for f in figures if f.plot and f.score(f.value)]
    if not rows:
        return
    data = png + ".dat"
    with open(data, "w") as d:
        for i, f in enumerate(rows):
            v = f.score(f.value)
            lo, hi = sorted((f.score(f.lo) or v, f.score(f.hi) or v))
            tgt = ("≥ " if f.at_least else "≤ ") + fmt(f.target, f.unit)
            label = f"{fmt(f.value, f.unit)} ({tgt}) {f.verdict}"
            name = f.name.replace('"', "'")
            # Top to bottom in the table's order.
            d.write(f'{len(rows) - 1 - i} {v} {lo} {hi} {COLOURS.get(f.verdict, 0x4477AA)} "{name}" "{label}"\n')
    height = 120 + 28 * len(rows)
    script = f"""
set terminal pngcairo size 1300,{height} font "sans,10"
set output "{png}"
set logscale x
set xrange [0.01:20]
set yrange [-1:{len(rows)}]
set grid xtics
set xlabel "measured / target (1 = target; right of it is better)"
set key off
set arrow from 1, graph 0 to 1, graph 1 nohead lc rgb "#cc0000" lw 2
set style fill solid 0.7
set lmargin 62
set ytics nomirror
plot "{data}" using 2:1:(0.01):2:($1-0.35):($1+0.35):5:ytic(6) with boxxyerror lc rgb variable, \\
     "{data}" using 2:1:3:4 with xerrorbars lc rgb "black" pt 7 ps 0.4, \\
     "{data}" using ($4*1.08):1:7 with labels left font "sans,9"
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    os.remove(data)


KEPT = "<!-- bench/report.py writes the page above this line and keeps what follows -->"


def main():
    results, md, png = sys.argv[1:4]
    rec = load(results)
    figures = []
    direct_figures(rec, figures)
    routed_figures(rec, figures)
    shaped_figures(rec, figures)
    memory_figures(rec, figures)
    text = page(rec, figures)
    # What follows KEPT on the page (bench/idle.sh's section, one-off measurements written by
    # hand) is not this script's: a regenerated page keeps it.
    old = open(md).read() if os.path.exists(md) else ""
    if KEPT in old:
        text = text.rstrip("\n") + "\n\n" + KEPT + old.split(KEPT, 1)[1]
    open(md, "w").write(text)
    plot(figures, png)


if __name__ == "__main__":
    main()
