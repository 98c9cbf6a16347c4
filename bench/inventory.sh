#!/usr/bin/env bash
# A large inventory: kharond's start time, resident memory and PAC size with CLUSTERS clusters,
# next to the same figures for the small example inventory, measured in the same run. Not a test.
#
#   [JSON=FILE] [KHAROND=PATH] bench/inventory.sh [CLUSTERS] [RUNS]   (defaults: 50000 clusters, 3 runs)
#
# KHAROND measures another kharond binary (e.g. one built from another commit) in place of this
# tree's release build.
#
# The inventory is generated here, shaped like a large Lieutenant (as routing/benches/routing.rs):
# each cluster with an OpenShift base domain, apps domain, API and console URLs, half of them with
# two `jumphostDomains`, a third skipping their apps domain. Runs alternate small and large.
# "Start" is from exec until the SOCKS port accepts; RSS is read then, one second later (kharond
# frees the parsed inventory beside its start: that is the figure), and after the first PAC fetch
# (the PAC is rendered on first use). JSON appends each figure for bench/report.py.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
CLUSTERS=${1:-50000}; RUNS=${2:-3}
cargo build --release -q -p kharond
use_kharond bench/inventory.sh
W=$(mktemp -d /tmp/khinventory.XXXXXX)
python3 - "$CLUSTERS" > "$W/large.json" <<'PY'
import json, sys
n = int(sys.argv[1])
clusters = []
for i in range(n):
    base = f"c-{i:05}.zone{i % 40}.vshnmanaged.net"
    # A host name, as VSHN's jump hosts are: it anchors the cluster's dynamic names (issue 41).
    facts = {"distribution": "openshift4", "jumphost": f"jump{i % 7}.zone{i % 40}.vshnmanaged.net"}
    if i % 2 == 0:
        facts["jumphostDomains"] = f"vcenter.t{i}.example.ch,storage.t{i}.example.ch"
    if i % 3 == 0:
        facts["jumphostSkipDomains"] = f"apps.{base}"
    clusters.append({"id": f"c-{i:05}", "tenant": f"t-{i % 500}", "facts": facts, "dynamicFacts": {
        "openshiftBaseDomain": base, "openshiftAppsDomain": f"apps.{base}",
        "openshiftApiURL": f"https://api.{base}:6443", "openshiftConsoleURL": f"https://console.apps.{base}",
        "kubernetesVersion": {"major": "1", "minor": "30"}}})
json.dump(clusters, sys.stdout)
PY
mkdir -p "$W/run" && chmod 700 "$W/run"
python3 - "$KHAROND" "$W" "$RUNS" "${JSON:-}" contrib/examples/inventory.json "$W/large.json" "$CLUSTERS" <<'PY'
import json, os, socket, statistics, subprocess, sys, time
kharond, work, runs, out, small, large, clusters = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], int(sys.argv[7])

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

SETTLE_S = 1.0

def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0

def once(inventory):
    port = free_port()
    env = {"PATH": os.environ["PATH"], "HOME": work, "XDG_RUNTIME_DIR": f"{work}/run", "RUST_LOG": "warn"}
    t0 = time.perf_counter()
    p = subprocess.Popen([kharond, "--listen", f"127.0.0.1:{port}", "--inventory", inventory,
                          "--control-socket", f"{work}/run/k.sock", "--ssh-config", f"{work}/none"],
                         env=env, stderr=open(f"{work}/kharond.log", "a"))
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close(); break
            except OSError:
                if p.poll() is not None:
                    sys.exit(f"kharond exited with {p.returncode}; see {work}/kharond.log")
                if time.perf_counter() - t0 > 60:
                    sys.exit("kharond did not listen within 60 s")
                time.sleep(0.002)
        start = time.perf_counter() - t0
        at_accept = rss_kib(p.pid)
        # kharond frees the parsed inventory on a thread of its own beside the start (issue 41):
        # resident memory is read again once that is done.
        time.sleep(SETTLE_S)
        rss = rss_kib(p.pid)
        t1 = time.perf_counter()
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /proxy.pac HTTP/1.1\r\nHost: localhost\r\n\r\n")
        body = b""
        while (d := s.recv(1 << 20)): body += d
        pac_s = time.perf_counter() - t1
        head, _, pac = body.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            sys.exit(f"PAC fetch failed: {head[:80]!r}")
        return {"start_s": start, "rss_kib": rss, "rss_at_accept_kib": at_accept, "pac_bytes": len(pac), "pac_s": pac_s, "rss_after_pac_kib": rss_kib(p.pid)}
    finally:
        p.terminate(); p.wait()

results = {"example": [], "large": []}
for _ in range(runs):
    results["example"].append(once(small))
    results["large"].append(once(large))
for name, rs in results.items():
    med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
    label = "example inventory" if name == "example" else f"{clusters} clusters"
    print(f"{label:18}: start {med['start_s']*1000:7.0f} ms  RSS {med['rss_kib']/1024:6.1f} MiB"
          f"  PAC {med['pac_bytes']/1e6:6.2f} MB in {med['pac_s']*1000:.0f} ms, RSS then {med['rss_after_pac_kib']/1024:.1f} MiB")
    if out:
        open(out, "a").write(json.dumps({"phase": "inventory", "which": name, "clusters": clusters if name == "large" else None,
                                         "runs": rs}) + "\n")
PY
