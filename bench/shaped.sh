#!/usr/bin/env bash
# A shaped first link: what one bulk transfer does to everyone else's small requests, kharond
# against `ssh -D` through the same two jump hosts (host -> j1 -> j2 -> target, as in issue 43),
# in the same run, on each of a list of emulated links. Not a test.
#
#   [PROFILES="NAME LINK-EMU OPTIONS; …" | ONLY="deep lossy"] [PHASE_SECONDS=6] [REPS=2] [WARMUP=6]
#   [CC=cubic] [JSON=FILE] [KHAROND=PATH] [PIN_WINDOWS="KIB …"] [KHAROND_LOG=FILTER KEEP_LOG=FILE]
#   [CAPTURE=DIR] [UPLOAD_RATE=MB/s] bench/shaped.sh
#
# The link between this host and the first jump host is emulated at the packet level by
# `link-emu` (bench/client/link_emu/, bench/netns_link.sh): the clients, kharond and `ssh -D` run in
# one network namespace, the jump hosts' sshds and the target in another, and every packet between
# them crosses a drop-tail buffer, a bottleneck rate, random loss and a one-way delay, per
# direction, so that kernel TCP on both sides meets real queueing delay and real loss (this kernel
# has no sch_netem). The profiles are bench/netns_link.sh's list (25 ms each way at
# 50 Mbit/s with a buffer of half a BDP, one BDP and 1,000 packets; 10 ms at 200 Mbit/s; 60 ms at
# 20 Mbit/s with 1,000 packets; 25 ms at 1 Gbit/s; 0.5 % random loss; a rate that halves for 2 s
# of every 5), or PROFILES: each a name and link-emu's options (`link-emu --help`), or RTT_MS:MBIT.
# ONLY picks profiles of the list by name. CC sets both namespaces' TCP congestion control
# (default: the machine's). `bench/link_check.sh` checks the emulator itself on the same profiles.
#
# Per profile, a fresh kharond and `ssh -D`; bench/shaped.py measures, per proxy and repetition,
# interleaved: small requests (new connection, and on one kept-alive connection) idle, during one
# bulk download and during one bulk upload, the download's rate, the upload's rate as the target
# received it, and two downloads at once; and the same transfers dialled directly through the link
# ("link alone", no proxy, no SSH): what the link itself gives one TCP connection. WARMUP seconds
# of one unmeasured download per proxy first: kharond learns the path there (its first transfer on
# a new path starts with the window it assumes and follows the measured one once it has measured;
# the page shows that one too). The defaults keep the whole list to about 20 minutes; more
# repetitions (REPS) and longer phases (PHASE_SECONDS) make each figure steadier. The load average
# is sampled every 5 s and recorded per profile and for the run.
#
# PIN_WINDOWS adds, per profile, one more kharond per size (KiB) with every SSH window fixed to it
# (`ssh_window = "NK"` in its config file, kharond/ssh/src/flow/fixed.rs): what a fixed window of
# that size does on the same path, measured beside the rule's. The page reports them as "pinned"
# rows. KHAROND_LOG replaces kharond's RUST_LOG (e.g. "warn,kharon_ssh::flow=trace" logs every
# sample of the window rule) and KEEP_LOG copies kharond's log there at the end of each profile.
#
# CAPTURE records, per profile in DIR/NAME/ (replacing an earlier capture there), where a small
# request's time goes: `tcpdump` of the small packets at the clients' side of the proxies (near
# `lo`), at the target (far `lo`) and at both ends of the link (`emu0`, the link alone's),
# `ss -tnmi` of both namespaces every 50 ms, and each phase's wall-clock span;
# `bench/crossings.py DIR/NAME` then prints every crossing's median per proxy and phase, and the
# socket queues along the path during the upload. Needs tcpdump.
# UPLOAD_RATE paces the bulk upload at that many MB/s instead of as fast as the socket takes
# (below the link's rate: what the path adds when no queue of the upload's own stands).
#
# With JSON (as bench/run.sh calls it) the figures are appended there. Without it, the run
# replaces the shaped rows of docs/benchmarks.jsonl and re-renders docs/benchmarks.md from it
# (bench/report.py): every other figure on the page stays as the last full run measured it.
#
# Needs: root (namespaces, TUN devices, sshd's own /etc/hosts via `unshare -m`), ip, sshd, ssh,
# python3. Builds in release.
set -euo pipefail
SECONDS_EACH=${PHASE_SECONDS:-6}
REPS=${REPS:-2}
WARMUP=${WARMUP:-6}
JSON=${JSON:-}
CIPHER=aes256-gcm@openssh.com
cd "$(dirname "$0")/.."
. bench/lib.sh
. bench/netns_link.sh
SSHD=$(find_tool sshd)
TCPDUMP=$(find_tool tcpdump)
if [ -n "${CAPTURE:-}" ] && [ -z "$TCPDUMP" ]; then
  echo "bench/shaped.sh: CAPTURE needs tcpdump (apt-get install tcpdump)" >&2; exit 1
fi
[ -n "$SSHD" ] || { echo "bench/shaped.sh needs OpenSSH's sshd (apt-get install openssh-server)" >&2; exit 1; }
select_profiles
cargo build --release -q -p kharond -p kharon-bench
BIN=$PWD/target/release
use_kharond bench/shaped.sh
LOAD_BEFORE=$(cut -d' ' -f1 /proc/loadavg)
STARTED=$(date +%s)

W=$(mktemp -d /tmp/khshaped.XXXXXX)
OUT=$W/shaped.jsonl
# The load average while the run goes on: "seconds 1-min 5-min 15-min" every 5 s.
(while :; do echo "$(( $(date +%s) - STARTED )) $(cut -d' ' -f1-3 /proc/loadavg)"; sleep 5; done) > "$W/load" &
PIDS+=($!)
link_namespaces "khs$$"
bench_keys
# Processes started in the background are `ip netns exec …` themselves, not in_near/in_far (a
# function run in the background is a subshell: its PID is not the process's, and killing it
# leaves the process running). The far namespace is ours alone: fixed ports. j1 listens on the link, j2 and the target on the far
# side's loopback as before, the target on the link too (for the "link alone" path).
J1_PORT=2201; J2_PORT=2202; TARGET_PORT=8080
# kharond and `ssh -D` per profile; the pinned kharonds (PIN_WINDOWS) take the ports after these.
KH_PORT=1080; SD_PORT=1081
read -r -a PIN_WINDOWS_LIST <<< "${PIN_WINDOWS:-}"
USER_NAME=${USER:-root}
TARGET=bench.c1.example

# j1 behind the link; j2 (the last hop) alone resolves the target's name.
printf '127.0.0.1 localhost\n127.0.0.1 %s\n' "$TARGET" > "$W/hosts"
write_sshd_config "$W/sshd_config.1" "$J1_PORT" "ListenAddress $FAR_ADDR" "Ciphers $CIPHER" "LogLevel ERROR"
write_sshd_config "$W/sshd_config.2" "$J2_PORT" "Ciphers $CIPHER" "LogLevel ERROR"
ip netns exec "$FAR" "$SSHD" -D -e -f "$W/sshd_config.1" 2>"$W/sshd.1.log" & PIDS+=($!)
ip netns exec "$FAR" unshare -m sh -c "mount --bind $W/hosts /etc/hosts && exec $SSHD -D -e -f $W/sshd_config.2" 2>"$W/sshd.2.log" &
PIDS+=($!)
echo "[$FAR_ADDR]:$J1_PORT $(cut -d' ' -f1,2 "$W/host_key.pub")" >> "$W/home/.ssh/known_hosts"
echo "[127.0.0.1]:$J2_PORT $(cut -d' ' -f1,2 "$W/host_key.pub")" >> "$W/home/.ssh/known_hosts"
cat > "$W/home/.ssh/config" <<CFG
Host j1
  HostName $FAR_ADDR
  Port $J1_PORT
Host bench
  HostName 127.0.0.1
  Port $J2_PORT
  ProxyJump j1
CFG
ssh_config_defaults "$USER_NAME"

# Target: GET /bytes/N sends N zero bytes; POST /sink swallows its body and, once it ends, answers
# how many bytes arrived and the seconds from the first to the last; anything else is "ok" (kept
# alive under HTTP/1.1).
cat > "$W/target.py" <<'PY'
import socket, sys, threading, time
CHUNK = b"\0" * (1 << 20)
def serve(c):
    try:
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                d = c.recv(65536)
                if not d: return
                buf += d
            head, buf = buf.split(b"\r\n\r\n", 1)
            method, path, version = head.split(b"\r\n", 1)[0].decode().split()
            if path.startswith("/bytes/"):
                n = int(path[7:])
                c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % n)
                while n > 0:
                    k = min(n, len(CHUNK)); c.sendall(CHUNK[:k]); n -= k
                return
            if method == "POST":
                n, first, last = len(buf), time.monotonic(), time.monotonic()
                while True:
                    d = c.recv(1 << 20)
                    if not d: break
                    n += len(d); last = time.monotonic()
                c.sendall(b"HTTP/1.0 200 OK\r\n\r\n%d %.6f" % (n, last - first))
                return
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            if version != "HTTP/1.1": return
    except OSError:
        pass
    finally:
        c.close()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(512)
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
ip netns exec "$FAR" python3 "$W/target.py" "$TARGET_PORT" 2>"$W/target.log" & PIDS+=($!)
wait_port_in "$FAR" "$FAR_ADDR" "$J1_PORT" "sshd j1" "$W/sshd.1.log"
wait_port_in "$FAR" 127.0.0.1 "$J2_PORT" "sshd j2" "$W/sshd.2.log"
wait_port_in "$FAR" 127.0.0.1 "$TARGET_PORT" "the target server" "$W/target.log"
# The base domain is static too: the jump host is an alias of 127.0.0.1, which anchors no dynamic
# name (issue 41, routing/src/anchor.rs).
echo '[{"id":"c1","facts":{"distribution":"openshift4","jumphost":"bench","jumphostDomains":"c1.example"},"dynamicFacts":{"openshiftBaseDomain":"c1.example"}}]' > "$W/inventory.json"
echo "== $(date -u '+%H:%M') ${#PROFILE_NAMES[@]} profiles, $REPS repetitions of ${SECONDS_EACH} s phases;" \
  "congestion control $(in_near sysctl -n net.ipv4.tcp_congestion_control); load average $(cut -d' ' -f1-3 /proc/loadavg)"

stop() { for p in "$@"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
for i in "${!PROFILE_NAMES[@]}"; do
  NAME=${PROFILE_NAMES[$i]}; ARGS=${PROFILE_ARGS[$i]}
  echo "== shaped $NAME: $ARGS (link-emu to j1, then j2)"
  P_STARTED=$(( $(date +%s) - STARTED )); P_LOAD=$(cut -d' ' -f1 /proc/loadavg)
  link_start "$NAME" $ARGS
  CAPTURING=()
  if [ -n "${CAPTURE:-}" ]; then
    C=$CAPTURE/$NAME; mkdir -p "$C"; rm -f "$C"/*.pcap "$C/ss.txt" "$C/phases.jsonl"
    # What bench/crossings.py needs to tell the sockets apart.
    printf '{"j1": %d, "j2": %d, "target": %d}\n' "$J1_PORT" "$J2_PORT" "$TARGET_PORT" > "$C/ports.json"
    # Only packets of at most 400 bytes: the small requests' own, not the transfers' beside them.
    # The proxies' ports: kharond's, ssh -D's and the pinned kharonds' after them.
    for where in "$NEAR lo near_lo tcp and portrange $KH_PORT-$((SD_PORT + 1 + ${#PIN_WINDOWS_LIST[@]}))" \
        "$FAR lo far_lo tcp port $TARGET_PORT" "$NEAR emu0 near_emu tcp port $TARGET_PORT" \
        "$FAR emu0 far_emu tcp port $TARGET_PORT"; do
      read -r ns dev file filter <<< "$where"
      ip netns exec "$ns" "$TCPDUMP" -i "$dev" -s 200 -U -w "$C/$file.pcap" "($filter) and less 400" 2>/dev/null &
      CAPTURING+=($!); PIDS+=($!)
    done
    (while :; do
      echo "T $(date +%s.%N)"
      ip netns exec "$FAR" ss -tnmiH state established; ip netns exec "$NEAR" ss -tnmiH state established
      sleep 0.05
    done) > "$C/ss.txt" 2>&1 &
    CAPTURING+=($!); PIDS+=($!)
    sleep 1
  fi
  ip netns exec "$NEAR" env -i PATH="$PATH" HOME="$W/home" USER="$USER_NAME" XDG_RUNTIME_DIR="$W" RUST_LOG=${KHAROND_LOG:-warn,kharon_ssh=info} \
    "$KHAROND" --listen 127.0.0.1:"$KH_PORT" --control-socket "$W/k.$NAME.sock" \
    --inventory "$W/inventory.json" --ssh-config "$W/home/.ssh/config" 2>"$W/kharond.log" & KPID=$!
  ip netns exec "$NEAR" env HOME="$W/home" ssh -F "$W/home/.ssh/config" -N -o ExitOnForwardFailure=yes -c "$CIPHER" \
    -D 127.0.0.1:"$SD_PORT" bench 2>"$W/ssh.log" & SPID=$!
  PIDS+=("$KPID" "$SPID")
  PINNED=(); PINNED_PIDS=(); port=$((SD_PORT + 1))
  for kib in "${PIN_WINDOWS_LIST[@]}"; do
    port=$((port + 1))
    printf 'ssh_window = "%sK"\n' "$kib" > "$W/pinned.$kib.toml"
    ip netns exec "$NEAR" env -i PATH="$PATH" HOME="$W/home" USER="$USER_NAME" XDG_RUNTIME_DIR="$W" RUST_LOG=warn \
      "$KHAROND" --config "$W/pinned.$kib.toml" --listen 127.0.0.1:"$port" --control-socket "$W/k.$NAME.$kib.sock" \
      --inventory "$W/inventory.json" --ssh-config "$W/home/.ssh/config" 2>"$W/kharond.$kib.log" &
    PINNED_PIDS+=($!); PIDS+=($!)
    wait_port_in "$NEAR" 127.0.0.1 "$port" "kharond pinned to $kib KiB" "$W/kharond.$kib.log"
    PINNED+=("kharond pinned $kib KiB=$port")
  done
  wait_port_in "$NEAR" 127.0.0.1 "$KH_PORT" kharond "$W/kharond.log"
  wait_port_in "$NEAR" 127.0.0.1 "$SD_PORT" "ssh -D" "$W/ssh.log"
  : > "$W/profile.jsonl"
  PHASE_TIMES=${CAPTURE:+$CAPTURE/$NAME/phases.jsonl} UPLOAD_RATE=${UPLOAD_RATE:-} \
    in_near python3 bench/shaped.py "$TARGET" "$TARGET_PORT" "$SECONDS_EACH" "$REPS" "$WARMUP" "$W/profile.jsonl" \
    "kharond=$KH_PORT" "ssh -D=$SD_PORT" "${PINNED[@]}" "link alone=@$FAR_ADDR:$TARGET_PORT"
  grep -h "replacing the SSH session" "$W/kharond.log" | sed 's/^/  kharond: /' | cut -c1-220 || true
  [ -z "${KEEP_LOG:-}" ] || cp "$W/kharond.log" "$KEEP_LOG"
  stop "$KPID" "$SPID" "${PINNED_PIDS[@]}" "${CAPTURING[@]}"
  link_stop
  python3 - "$NAME" "$ARGS" "$LINK_STATS" "$W/profile.jsonl" "$P_LOAD" "$(cut -d' ' -f1 /proc/loadavg)" \
    "$P_STARTED" "$(( $(date +%s) - STARTED ))" >> "$OUT" <<'PY'
import json, sys
name, args, stats, rows, load_start, load_end, t0, t1 = sys.argv[1:9]
link = json.load(open(stats))
# rtt_ms and mbit: the link's round trip and first rate near → far, as the rows have always carried.
common = {"phase": "shaped", "profile": name, "rtt_ms": link["rtt_ms"], "mbit": link["up"]["rate"][0]["bit_s"] / 1e6}
for line in open(rows):
    print(json.dumps({**common, **json.loads(line)}))
print(json.dumps({"phase": "shaped_link", "profile": name, "args": args.strip(), "link": link,
                  "load_start": float(load_start), "load_end": float(load_end),
                  "seconds": [int(t0), int(t1)]}))
PY
  c=$(python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['counters']; print(' / '.join(f\"{w}: {c[w]['dropped_full']} dropped, {c[w]['lost']} lost, late p99 < {c[w]['late_p99_below_us']} µs\" for w in ('up','down')))" "$LINK_STATS")
  echo "   link-emu $c"
done
python3 - "$LOAD_BEFORE" "$(cut -d' ' -f1 /proc/loadavg)" "$(git log -1 --format='%h %s')" "$W/load" \
  "$(in_near sysctl -n net.ipv4.tcp_congestion_control)" "$(( $(date +%s) - STARTED ))" >> "$OUT" <<'PY'
import json, sys, datetime
samples = [[float(x) for x in l.split()] for l in open(sys.argv[4]) if l.strip()]
during = [s[1] for s in samples]
print(json.dumps({"phase": "shaped_run", "load_before": float(sys.argv[1]), "load_after": float(sys.argv[2]),
                  "load_during_max": max(during, default=None),
                  "load_during_mean": round(sum(during) / len(during), 2) if during else None,
                  "load_samples": samples, "kharond": sys.argv[3], "congestion_control": sys.argv[5],
                  "seconds": int(sys.argv[6]),
                  "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}))
PY

if [ -n "$JSON" ]; then
  cat "$OUT" >> "$JSON"
else
  # Standalone: this run's shaped rows replace the last ones on the page.
  python3 - docs/benchmarks.jsonl "$OUT" <<'PY'
import json, sys
kept = [l for l in open(sys.argv[1]) if l.strip() and json.loads(l)["phase"] not in ("shaped", "shaped_run", "shaped_link")]
open(sys.argv[1], "w").write("".join(kept) + open(sys.argv[2]).read())
PY
  python3 bench/report.py docs/benchmarks.jsonl docs/benchmarks.md docs/benchmarks.png
  echo "docs/benchmarks.md: shaped rows rewritten"
fi
echo "== done in $(( $(date +%s) - STARTED )) s; load average $(cut -d' ' -f1-3 /proc/loadavg)"
