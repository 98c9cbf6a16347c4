#!/usr/bin/env bash
# A shaped first link: what one bulk transfer does to everyone else's small requests, kharond
# against `ssh -D` through the same two jump hosts (host -> j1 -> j2 -> target, as in issue 43),
# in the same run. Not a test.
#
#   [PROFILES="50:50 20:200 50:1000"] [PHASE_SECONDS=8] [REPS=4] [WARMUP=8] [JSON=FILE] [KHAROND=PATH]
#   [PIN_WINDOWS="KIB …"] [KHAROND_LOG=FILTER KEEP_LOG=FILE] bench/shaped.sh
#
# Each profile is RTT_MS:MBIT of the link between this host and the first jump host, emulated by
# `slow-link` (bench/client/slow_link.rs: one link shared by every connection to j1, half the
# round trip each way, a fixed drop-tail buffer of one bandwidth-delay product in front of it;
# this kernel has no sch_netem). The defaults are issue 43's: 25 ms each way at 50 Mbit/s, 10 ms
# each way at 200 Mbit/s, and the 50 ms, 1 Gbit/s link of bench/routed.sh's best row. Per profile,
# a fresh kharond and `ssh -D`; bench/shaped.py measures, per proxy and repetition, interleaved:
# small requests (new connection, and on one kept-alive connection) idle, during one bulk download
# and during one bulk upload, the download's rate, and two downloads at once. WARMUP seconds of
# one unmeasured download per proxy first: kharond learns the path there (its first transfer on a
# new path starts with the window it assumes and follows the measured one once it has measured;
# the page shows that one too). Four repetitions: on the 1 Gbit/s path a repetition may hold a
# 1-2 s stall of the last hop's sshd (docs/ssh-engine.md, "At 1 Gbit/s"), which moves its rate by
# a fifth, and the median of two is their mean.
#
# PIN_WINDOWS adds, per profile, one more kharond per size (KiB) with every SSH window fixed to it
# (`ssh_window = "NK"` in its config file, kharond/ssh/src/flow/fixed.rs): what a fixed window of
# that size does on the same path, measured beside the rule's. The page reports them as "pinned"
# rows. KHAROND_LOG replaces kharond's RUST_LOG (e.g. "warn,kharon_ssh::flow=trace" logs every
# sample of the window rule) and KEEP_LOG copies kharond's log there at the end of each profile.
#
# With JSON (as bench/run.sh calls it) the figures are appended there. Without it, the run
# replaces the shaped rows of docs/benchmarks.jsonl and re-renders docs/benchmarks.md from it
# (bench/report.py): the page's shaped rows are regenerated in about fifteen minutes (880 s at 9f3ed25), every other
# figure on the page stays as the last full run measured it.
#
# Needs: root (sshd's own /etc/hosts via `unshare -m`), sshd, ssh, python3. Builds in release.
set -euo pipefail
PROFILES=${PROFILES:-"50:50 20:200 50:1000"}
SECONDS_EACH=${PHASE_SECONDS:-8}
REPS=${REPS:-4}
WARMUP=${WARMUP:-8}
JSON=${JSON:-}
CIPHER=aes256-gcm@openssh.com
cd "$(dirname "$0")/.."
. bench/lib.sh
SSHD=$(find_tool sshd)
[ -n "$SSHD" ] || { echo "bench/shaped.sh needs OpenSSH's sshd (apt-get install openssh-server)" >&2; exit 1; }
cargo build --release -q -p kharond -p kharon-bench
BIN=$PWD/target/release
use_kharond bench/shaped.sh
LOAD_BEFORE=$(cut -d' ' -f1 /proc/loadavg)

W=$(mktemp -d /tmp/khshaped.XXXXXX)
OUT=$W/shaped.jsonl
bench_keys
TARGET_PORT=$(free_port); J1_PORT=$(free_port); J2_PORT=$(free_port); LINK_PORT=$(free_port)
USER_NAME=${USER:-root}
TARGET=bench.c1.example

# j1 behind the link; j2 (the last hop) alone resolves the target's name.
printf '127.0.0.1 localhost\n127.0.0.1 %s\n' "$TARGET" > "$W/hosts"
write_sshd_config "$W/sshd_config.1" "$J1_PORT" "Ciphers $CIPHER" "LogLevel ERROR"
write_sshd_config "$W/sshd_config.2" "$J2_PORT" "Ciphers $CIPHER" "LogLevel ERROR"
"$SSHD" -D -e -f "$W/sshd_config.1" 2>"$W/sshd.1.log" & PIDS+=($!)
unshare -m sh -c "mount --bind $W/hosts /etc/hosts && exec $SSHD -D -e -f $W/sshd_config.2" 2>"$W/sshd.2.log" &
PIDS+=($!)
for port in "$LINK_PORT" "$J2_PORT"; do
  echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$W/host_key.pub")" >> "$W/home/.ssh/known_hosts"
done
cat > "$W/home/.ssh/config" <<CFG
Host j1
  HostName 127.0.0.1
  Port $LINK_PORT
Host bench
  HostName 127.0.0.1
  Port $J2_PORT
  ProxyJump j1
CFG
ssh_config_defaults "$USER_NAME"

# Target: GET /bytes/N sends N zero bytes, POST /sink swallows its body, anything else is "ok"
# (kept alive under HTTP/1.1).
cat > "$W/target.py" <<'PY'
import socket, sys, threading
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
                while c.recv(1 << 20): pass
                return
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            if version != "HTTP/1.1": return
    except OSError:
        pass
    finally:
        c.close()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(512)
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
python3 "$W/target.py" "$TARGET_PORT" 2>"$W/target.log" & PIDS+=($!)
wait_port "$J1_PORT" "sshd j1" "$W/sshd.1.log"; wait_port "$J2_PORT" "sshd j2" "$W/sshd.2.log"
wait_port "$TARGET_PORT" "the target server" "$W/target.log"
# The base domain is static too: the jump host is an alias of 127.0.0.1, which anchors no dynamic
# name (issue 41, shared/src/anchor.rs).
echo '[{"id":"c1","facts":{"distribution":"openshift4","jumphost":"bench","jumphostDomains":"c1.example"},"dynamicFacts":{"openshiftBaseDomain":"c1.example"}}]' > "$W/inventory.json"

stop() { for p in "$@"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
for profile in $PROFILES; do
  RTT_MS=${profile%%:*}; MBIT=${profile##*:}
  echo "== shaped: $((RTT_MS / 2)) ms each way, $MBIT Mbit/s to j1, then j2; $REPS repetitions of ${SECONDS_EACH} s phases"
  "$BIN/slow-link" 127.0.0.1:"$LINK_PORT" 127.0.0.1:"$J1_PORT" "$RTT_MS" "$MBIT" 2>"$W/link.log" & LPID=$!
  wait_port "$LINK_PORT" slow-link "$W/link.log"
  KH_PORT=$(free_port); SD_PORT=$(free_port)
  env -i PATH="$PATH" HOME="$W/home" USER="$USER_NAME" XDG_RUNTIME_DIR="$W" RUST_LOG=${KHAROND_LOG:-warn,kharon_ssh=info} \
    "$KHAROND" --listen 127.0.0.1:"$KH_PORT" --control-socket "$W/k.$RTT_MS.$MBIT.sock" \
    --inventory "$W/inventory.json" --ssh-config "$W/home/.ssh/config" 2>"$W/kharond.log" & KPID=$!
  HOME="$W/home" ssh -F "$W/home/.ssh/config" -N -o ExitOnForwardFailure=yes -c "$CIPHER" \
    -D 127.0.0.1:"$SD_PORT" bench 2>"$W/ssh.log" & SPID=$!
  PIDS+=("$LPID" "$KPID" "$SPID")
  PINNED=(); PINNED_PIDS=()
  for kib in ${PIN_WINDOWS:-}; do
    port=$(free_port)
    printf 'ssh_window = "%sK"\n' "$kib" > "$W/pinned.$kib.toml"
    env -i PATH="$PATH" HOME="$W/home" USER="$USER_NAME" XDG_RUNTIME_DIR="$W" RUST_LOG=warn \
      "$KHAROND" --config "$W/pinned.$kib.toml" --listen 127.0.0.1:"$port" --control-socket "$W/k.$RTT_MS.$MBIT.$kib.sock" \
      --inventory "$W/inventory.json" --ssh-config "$W/home/.ssh/config" 2>"$W/kharond.$kib.log" &
    PINNED_PIDS+=($!); PIDS+=($!)
    wait_port "$port" "kharond pinned to $kib KiB" "$W/kharond.$kib.log"
    PINNED+=("kharond pinned $kib KiB=$port")
  done
  wait_port "$KH_PORT" kharond "$W/kharond.log"; wait_port "$SD_PORT" "ssh -D" "$W/ssh.log"
  : > "$W/profile.jsonl"
  python3 bench/shaped.py "$TARGET" "$TARGET_PORT" "$SECONDS_EACH" "$REPS" "$WARMUP" "$W/profile.jsonl" \
    "kharond=$KH_PORT" "ssh -D=$SD_PORT" "${PINNED[@]}"
  grep -h "replacing the SSH session" "$W/kharond.log" | sed 's/^/  kharond: /' | cut -c1-220 || true
  python3 - "$RTT_MS" "$MBIT" "$W/profile.jsonl" >> "$OUT" <<'PY'
import json, sys
for line in open(sys.argv[3]):
    print(json.dumps({"phase": "shaped", "rtt_ms": int(sys.argv[1]), "mbit": float(sys.argv[2]), **json.loads(line)}))
PY
  [ -z "${KEEP_LOG:-}" ] || cp "$W/kharond.log" "$KEEP_LOG"
  stop "$KPID" "$SPID" "$LPID" "${PINNED_PIDS[@]}"
done
python3 - "$LOAD_BEFORE" "$(cut -d' ' -f1 /proc/loadavg)" "$(git log -1 --format='%h %s')" >> "$OUT" <<'PY'
import json, sys, datetime
print(json.dumps({"phase": "shaped_run", "load_before": float(sys.argv[1]), "load_after": float(sys.argv[2]),
                  "kharond": sys.argv[3],
                  "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}))
PY

if [ -n "$JSON" ]; then
  cat "$OUT" >> "$JSON"
else
  # Standalone: this run's shaped rows replace the last ones on the page.
  python3 - docs/benchmarks.jsonl "$OUT" <<'PY'
import json, sys
kept = [l for l in open(sys.argv[1]) if l.strip() and json.loads(l)["phase"] not in ("shaped", "shaped_run")]
open(sys.argv[1], "w").write("".join(kept) + open(sys.argv[2]).read())
PY
  python3 bench/report.py docs/benchmarks.jsonl docs/benchmarks.md docs/benchmarks.png
  echo "docs/benchmarks.md: shaped rows rewritten"
fi
