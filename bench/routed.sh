#!/usr/bin/env bash
# Routed throughput and warm connection-setup latency: kharond vs `ssh -D`, through the same local
# OpenSSH sshd, same cipher, measured in the same run. Not a test.
#
#   [HOPS=1|2|3] [CIPHER=…|default] [RTT_MS=… [MBIT=…]] [RATE_CONNS=…] [PAGES=…] [JSON=FILE]
#   [KHAROND=PATH] bench/routed.sh [SIZE_MIB] [CONNECTIONS] [RUNS]
#
# Defaults: 1024 MiB, 500 connections, 9 runs; HOPS 1; CIPHER aes256-gcm@openssh.com (each sshd
# offers only that one, so both clients use it); RTT_MS 0 (loopback), MBIT 1000. KHAROND measures
# another kharond binary (e.g. one built from another branch) in place of this tree's release build.
#
# CIPHER=default configures no cipher anywhere: sshd offers OpenSSH's list, `ssh -D` and kharond
# each propose their own default order, which is what users get. The first sshd then logs at
# DEBUG, and the script reports the cipher each client negotiated.
#
# RATE_CONNS > 0 (default 0: skipped) also measures connections per second with 64 workers
# through each proxy (kharon-bench's rate phase), with the CPU per connection of the proxy, sshd,
# the client and its echo server. PAGES > 0 (default 0) also times that many
# browser-like page loads through each (6 new keep-alive connections fetching 100 objects of
# 1-32 KiB, like an OpenShift console; kharon-bench's page phase). JSON appends every figure as a
# JSON line for bench/report.py (bench/run.sh runs it all).
#
# HOPS > 1 chains that many sshd with ProxyJump, and `ssh -D` takes the same chain (its `ssh -W`
# children count as its CPU).
#
# Throughput runs alternate kharond and `ssh -D`; each prints MB/s and the CPU time per GiB of the
# client (kharond vs the ssh client) and of sshd, because on 2 cores shared by sshd, client, curl
# and the target, the CPU each one spends is what decides the speed. The ratio is reported as the
# median of the run pairs with a distribution-free confidence interval, so "faster" means faster
# by more than this machine's noise.
#
# With RTT_MS > 0 the (first) jump host sits behind `slow-link` (bench/client/slow_link.rs): that round
# trip and MBIT of bandwidth, the situation of a user whose jump host is far away. There the SSH
# channel window decides: ssh's 2 MiB allows at most 2 MiB per round trip, kharond's window (see
# ssh/chain.rs) more (e.g. RTT_MS=50 bench/routed.sh 128 50 5).
#
# Needs: root (sshd's own /etc/hosts via `unshare -m`, so the target name resolves only at the
# jump host, as in the e2e tests), sshd, ssh, curl, python3. Builds kharond in release.
set -euo pipefail
SIZE_MIB=${1:-1024}
CONNS=${2:-500}
RUNS=${3:-9}
RTT_MS=${RTT_MS:-0}
MBIT=${MBIT:-1000}
CIPHER=${CIPHER:-aes256-gcm@openssh.com}
HOPS=${HOPS:-1}
RATE_CONNS=${RATE_CONNS:-0}
PAGES=${PAGES:-0}
JSON=${JSON:-}
case "$HOPS" in 1|2|3) ;; *) echo "HOPS must be 1, 2 or 3" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
. bench/lib.sh
SSHD=$(find_tool sshd)
[ -n "$SSHD" ] || { echo "bench/routed.sh needs OpenSSH's sshd (apt-get install openssh-server)" >&2; exit 1; }
cargo build --release -q -p kharond -p kharon-bench
BIN=$PWD/target/release
use_kharond bench/routed.sh

W=$(mktemp -d /tmp/khbench.XXXXXX)

bench_keys
TARGET_PORT=$(free_port); KH_PORT=$(free_port); SSHD_D_PORT=$(free_port)
SSHD_PORTS=(); for _ in $(seq "$HOPS"); do SSHD_PORTS+=("$(free_port)"); done
# The port clients dial for the first jump host: its sshd, or slow-link in front of it.
HOP_PORT=${SSHD_PORTS[0]}; [ "$RTT_MS" = 0 ] || HOP_PORT=$(free_port)
USER_NAME=${USER:-root}
TARGET=bench.c1.example

# sshd number i listens on SSHD_PORTS[i-1]; only the last one resolves the target's name.
printf '127.0.0.1 localhost\n127.0.0.1 %s\n' "$TARGET" > "$W/hosts"
SSHD_PIDS=()
for i in $(seq "$HOPS"); do
  # A named cipher is the only one sshd offers; "default" leaves OpenSSH's list (and the first
  # sshd logs the negotiation).
  CIPHERS=("Ciphers $CIPHER"); [ "$CIPHER" != default ] || CIPHERS=()
  write_sshd_config "$W/sshd_config.$i" "${SSHD_PORTS[$((i - 1))]}" "${CIPHERS[@]}" \
    "LogLevel $([ "$CIPHER" = default ] && [ "$i" = 1 ] && echo DEBUG || echo ERROR)"
  if [ "$i" = "$HOPS" ]; then
    unshare -m sh -c "mount --bind $W/hosts /etc/hosts && exec $SSHD -D -e -f $W/sshd_config.$i" 2>"$W/sshd.$i.log" &
  else
    "$SSHD" -D -e -f "$W/sshd_config.$i" 2>"$W/sshd.$i.log" &
  fi
  SSHD_PIDS+=($!); PIDS+=($!)
done

# Hosts h1, h2, … bench: each one's ProxyJump is the one before.
: > "$W/home/.ssh/config"
for i in $(seq "$HOPS"); do
  name=h$i; [ "$i" = "$HOPS" ] && name=bench
  port=${SSHD_PORTS[$((i - 1))]}; [ "$i" = 1 ] && port=$HOP_PORT
  echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$W/host_key.pub")" >> "$W/home/.ssh/known_hosts"
  printf 'Host %s\n  HostName 127.0.0.1\n  Port %s\n' "$name" "$port" >> "$W/home/.ssh/config"
  [ "$i" = 1 ] || printf '  ProxyJump h%s\n' "$((i - 1))" >> "$W/home/.ssh/config"
done
ssh_config_defaults "$USER_NAME"

# Target: HTTP/1.0-ish; GET /bytes/N sends N zero bytes, anything else a short body.
cat > "$W/target.py" <<'PY'
import socket, sys, threading
CHUNK = b"\0" * (1 << 20)
def serve(c):
    try:
        req = b""
        while b"\r\n\r\n" not in req:
            d = c.recv(4096)
            if not d: return
            req += d
        path = req.split()[1].decode()
        if path.startswith("/bytes/"):
            n = int(path[7:])
            c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % n)
            while n > 0:
                k = min(n, len(CHUNK)); c.sendall(CHUNK[:k]); n -= k
        else:
            c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
    finally:
        c.close()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(512)
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
python3 "$W/target.py" "$TARGET_PORT" 2>"$W/target.log" & PIDS+=($!)
for i in $(seq "$HOPS"); do wait_port "${SSHD_PORTS[$((i - 1))]}" "sshd $i" "$W/sshd.$i.log"; done
wait_port "$TARGET_PORT" "the target server" "$W/target.log"
if [ "$RTT_MS" != 0 ]; then
  "$BIN/slow-link" 127.0.0.1:"$HOP_PORT" 127.0.0.1:"${SSHD_PORTS[0]}" "$RTT_MS" "$MBIT" 2>"$W/link.log" &
  PIDS+=($!)
  wait_port "$HOP_PORT" slow-link "$W/link.log"
fi

# The base domain is static too: the jump host is an alias of 127.0.0.1, which anchors no dynamic
# name (issue 41, routing/src/anchor.rs).
echo '[{"id":"c1","facts":{"distribution":"openshift4","jumphost":"bench","jumphostDomains":"c1.example"},"dynamicFacts":{"openshiftBaseDomain":"c1.example"}}]' > "$W/inventory.json"
env -i PATH="$PATH" HOME="$W/home" USER="$USER_NAME" XDG_RUNTIME_DIR="$W" RUST_LOG=warn \
  "$KHAROND" --listen 127.0.0.1:"$KH_PORT" --control-socket "$W/k.sock" \
  --inventory "$W/inventory.json" --ssh-config "$W/home/.ssh/config" 2>"$W/kharond.log" &
KPID=$!; PIDS+=("$KPID")
SSH_CIPHER=(-c "$CIPHER"); [ "$CIPHER" != default ] || SSH_CIPHER=()
HOME="$W/home" ssh -F "$W/home/.ssh/config" -N -o ExitOnForwardFailure=yes "${SSH_CIPHER[@]}" \
  -D 127.0.0.1:"$SSHD_D_PORT" bench 2>"$W/ssh.log" &
SPID=$!; PIDS+=("$SPID")
wait_port "$KH_PORT" kharond "$W/kharond.log"; wait_port "$SSHD_D_PORT" "ssh -D" "$W/ssh.log"

URL_BIG="http://$TARGET:$TARGET_PORT/bytes/$((SIZE_MIB << 20))"
URL_SMALL="http://$TARGET:$TARGET_PORT/hello"
# Warm both (kharond dials its session on first use).
for p in "$KH_PORT" "$SSHD_D_PORT"; do curl -sf -x "socks5h://127.0.0.1:$p" "$URL_SMALL" >/dev/null; done

# CPU seconds (user + system) so far of the client ($1) and of every sshd (the rest), each with
# its child processes (ssh's ProxyJump helpers, sshd's session processes).
cpu_of() { python3 - "$@" <<'PY'
import os, sys
tick = os.sysconf("SC_CLK_TCK")
stat = {}
for p in filter(str.isdigit, os.listdir("/proc")):
    try:
        f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        continue
    stat[int(p)] = (int(f[1]), int(f[11]) + int(f[12]))
def tree(root):
    return stat.get(root, (0, 0))[1] + sum(tree(c) for c, (pp, _) in stat.items() if pp == root)
print(f"{tree(int(sys.argv[1])) / tick:.2f} {sum(tree(int(p)) for p in sys.argv[2:]) / tick:.2f}")
PY
}
# One download through the proxy on port $1 whose process is $2: "MB/s client-cpu sshd-cpu".
run() {
  local before after speed
  before=$(cpu_of "$2" "${SSHD_PIDS[@]}")
  speed=$(curl -sf -o /dev/null -w '%{speed_download}' -x "socks5h://127.0.0.1:$1" "$URL_BIG")
  after=$(cpu_of "$2" "${SSHD_PIDS[@]}")
  echo "$speed $before $after"
}
LINK="loopback"; [ "$RTT_MS" = 0 ] || LINK="a ${RTT_MS} ms, ${MBIT} Mbit/s link (slow-link) to the jump host"
HOPS_TEXT="1 jump host"; [ "$HOPS" = 1 ] || HOPS_TEXT="$HOPS jump hosts (ProxyJump)"
echo "== throughput: one ${SIZE_MIB} MiB stream, $HOPS_TEXT, $CIPHER, $LINK, $RUNS alternating runs each"
K=(); S=()
for _ in $(seq "$RUNS"); do
  K+=("$(run "$KH_PORT" "$KPID")"); S+=("$(run "$SSHD_D_PORT" "$SPID")")
done
python3 - "$SIZE_MIB" "$HOPS" "$CIPHER" "$RTT_MS" "$JSON" "${K[@]}" "${S[@]}" <<'PY'
import json, sys, statistics
from math import comb
gib = int(sys.argv[1]) / 1024
hops, cipher, rtt_ms, out = int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
runs = [[float(x) for x in r.split()] for r in sys.argv[6:]]
k, s = runs[: len(runs) // 2], runs[len(runs) // 2 :]
def line(name, v):
    mbs = [r[0] / 1e6 for r in v]
    client = statistics.median((r[3] - r[1]) / gib for r in v)
    sshd = statistics.median((r[4] - r[2]) / gib for r in v)
    print(f"{name}: " + " ".join(f"{x:.0f}" for x in mbs)
          + f"   median {statistics.median(mbs):.0f} MB/s; CPU per GiB: client {client:.2f} s, sshd {sshd:.2f} s")
line("kharond", k), line("ssh -D ", s)
# Median of the run pairs' ratios, with the order statistics that bound it at >= 90 % confidence
# whatever the distribution (binomial, sign-test style).
pairs = sorted(a[0] / b[0] for a, b in zip(k, s))
n = len(pairs)
cover = lambda j: sum(comb(n, i) for i in range(j, n - j + 1)) / 2**n
j = max((j for j in range(1, n // 2 + 1) if cover(j) >= 0.90), default=None)
ci = f", {cover(j):.0%} interval {pairs[j - 1]:.2f}x to {pairs[n - j]:.2f}x" if j else " (too few runs for an interval)"
print(f"ratio kharond / ssh -D: {statistics.median(pairs):.2f}x, median of {n} run pairs{ci}")
if out:
    # sshd's share of a core while it served each run: near 1, sshd is the ceiling.
    util = lambda v: [(r[4] - r[2]) / (gib * 1024 * 2**20 / r[0]) for r in v]
    record = {"phase": "routed", "hops": hops, "cipher": cipher, "rtt_ms": rtt_ms,
              "kharond_mb_s": [r[0] / 1e6 for r in k], "ssh_mb_s": [r[0] / 1e6 for r in s],
              "kharond_cpu_s_per_gib": [(r[3] - r[1]) / gib for r in k],
              "ssh_cpu_s_per_gib": [(r[3] - r[1]) / gib for r in s],
              "sshd_util_kharond": util(k), "sshd_util_ssh": util(s)}
    open(out, "a").write(json.dumps(record) + "\n")
PY

echo "== warm connection setup: $CONNS sequential SOCKS5 CONNECTs by name each, blocks of 50 alternating (ms, until the success reply)"
cat > "$W/latency.py" <<'PY'
import json, socket, struct, sys, time, statistics
host, port, n, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
proxies = [(a.split("=")[0], int(a.split("=")[1])) for a in sys.argv[5:]]
def once(proxy):
    t0 = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", proxy))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(b"\x05\x01\x00"); assert s.recv(2) == b"\x05\x00"
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(host)]) + host.encode() + struct.pack(">H", port))
    r = b""
    while len(r) < 10: r += s.recv(10 - len(r))
    assert r[1] == 0, r
    t1 = time.perf_counter()
    s.sendall(b"GET /hello HTTP/1.0\r\n\r\n")
    while s.recv(4096): pass
    t2 = time.perf_counter(); s.close()
    return (t1 - t0) * 1e3, (t2 - t0) * 1e3
setup = {name: [] for name, _ in proxies}; full = {name: [] for name, _ in proxies}
# Blocks alternate between the proxies, so drift on the machine hits both alike.
done = 0
while done < n:
    block = min(50, n - done)
    for name, proxy in proxies:
        for _ in range(block):
            a, b = once(proxy); setup[name].append(a); full[name].append(b)
    done += block
q = lambda v, p: statistics.quantiles(v, n=100)[p - 1] if len(v) > 1 else v[0]
# A delayed ACK behind Nagle costs ~40 ms: count those separately, a percentile hides how many.
slow = lambda v: sum(x > 20 for x in v)
for name, _ in proxies:
    s, f = setup[name], full[name]
    print(f"{name:8}: p50 {q(s,50):.2f}  p99 {q(s,99):.2f}  over 20 ms {slow(s)}/{n}"
          f"  (with a tiny request/response: p50 {q(f,50):.2f} p99 {q(f,99):.2f}  over 20 ms {slow(f)}/{n})")
    if out:
        rec = {"phase": "routed_setup", "path": name, "p50_ms": q(s, 50), "p99_ms": q(s, 99), "slow": slow(s), "n": n,
               "request_p50_ms": q(f, 50)}
        open(out, "a").write(json.dumps(rec) + "\n")
PY
JSON_TAGGED=""
[ -z "$JSON" ] || JSON_TAGGED="$W/setup.jsonl"
python3 "$W/latency.py" "$TARGET" "$TARGET_PORT" "$CONNS" "$JSON_TAGGED" "kharond=$KH_PORT" "ssh -D=$SSHD_D_PORT"
# Tag each line with the scenario, so bench/report.py can tell runs apart.
tag() { python3 -c '
import json, sys
extra = {"hops": int(sys.argv[1]), "cipher": sys.argv[2], "rtt_ms": int(sys.argv[3])}
for line in open(sys.argv[4]):
    print(json.dumps({**json.loads(line), **extra}))' "$HOPS" "$CIPHER" "$RTT_MS" "$1" >> "$JSON"; }
[ -z "$JSON" ] || tag "$W/setup.jsonl"

if [ "$RATE_CONNS" -gt 0 ]; then
  echo "== connections per second, 64 workers, by name through each proxy"
  RATE_JSON=(); [ -z "$JSON" ] || RATE_JSON=(--json "$W/rate.jsonl")
  # The CPU each process spends per connection (kharond or ssh, every sshd, the client and its
  # echo server): on 2 cores the rate is what these add up to, so the report can tell a proxy
  # that is slow from a rig that is full. Nine alternating runs: one run of either proxy moves by
  # up to 30 % with the machine's phase, so the median needs more pairs than the bulk phase.
  "$BIN/kharon-bench" --socks 127.0.0.1:"$KH_PORT" --proxy-pid "$KPID" --baseline "ssh -D=127.0.0.1:$SSHD_D_PORT/$SPID" \
    --cpu-of "sshd=$(IFS=,; echo "${SSHD_PIDS[*]}")" \
    --no-direct --name "$TARGET" --phases rate --rate-workers 64 --rate-conns "$RATE_CONNS" \
    --runs "$(( RUNS < 9 ? RUNS : 9 ))" "${RATE_JSON[@]}"
  [ -z "$JSON" ] || tag "$W/rate.jsonl"
fi

if [ "$PAGES" -gt 0 ]; then
  echo "== page loads: 6 connections, 100 objects of 1-32 KiB, by name through each proxy"
  PAGE_JSON=(); [ -z "$JSON" ] || PAGE_JSON=(--json "$W/page.jsonl")
  "$BIN/kharon-bench" --socks 127.0.0.1:"$KH_PORT" --baseline "ssh -D=127.0.0.1:$SSHD_D_PORT" \
    --no-direct --name "$TARGET" --phases page --pages "$PAGES" "${PAGE_JSON[@]}"
  [ -z "$JSON" ] || tag "$W/page.jsonl"
fi

if [ "$CIPHER" = default ]; then
  # sshd logs each client's version, then the cipher its key exchange settled on.
  python3 - "$W/sshd.1.log" "$JSON" <<'PY'
import json, sys
client, seen = None, []
for line in open(sys.argv[1], errors="replace"):
    if "remote software version" in line:
        client = line.rsplit("remote software version", 1)[1].strip()
    elif "kex: client->server cipher:" in line and client:
        seen.append((client, line.split("cipher:", 1)[1].split()[0])); client = None
for client, cipher in seen:
    print(f"negotiated: {client} -> {cipher}")
    if sys.argv[2]:
        open(sys.argv[2], "a").write(json.dumps({"phase": "cipher", "client": client, "cipher": cipher}) + "\n")
PY
fi
