#!/usr/bin/env bash
# Re-keys under load: several GiB through one SSH session of kharond, twelve channels at once
# (six downloads, six uploads, every byte checked), with key re-exchanges every few hundred MB
# started by kharond (its ssh_config's RekeyLimit) and then by the last hop's sshd (its own).
# Not a test; writes the section "Re-keys under load" of docs/soak.md and exits 1 when a channel
# broke or a side started fewer re-exchanges than expected.
#
#   bench/rekey_soak.sh [--gib N] [--out FILE.md]
#
#   --gib    GiB each phase moves (default 4: 8 GiB in all)
#   --out    the report whose section is (re)written (default docs/soak.md)
#   KHAROND      the kharond to measure (its kharonctl beside it); default: this tree's release
#                build, built first
#   CLIENT_LIMIT, SERVER_LIMIT   RekeyLimit of kharond (phase 1) and of the last hop's sshd
#                                (default 200M and 300M: kharond's is reached first in phase 1;
#                                in phase 2 kharond's is back at its default, 1 GiB)
#
# Topology (loopback): kharond → sshd hop1 → sshd hop2 (ProxyJump) → the target
# (bench/soak/rekey_target.py); only hop2 resolves the target's name (its own /etc/hosts through
# `unshare -m`). Who started each re-exchange is read from the sshds' logs (LogLevel DEBUG1):
# "SSH2_MSG_KEXINIT sent" before "received" is the sshd's. Needs root and OpenSSH's sshd.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
GIB=4
OUT=$ROOT/docs/soak.md
ARGS="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    --gib) GIB=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "rekey_soak.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "rekey_soak.sh: needs root (the last hop's own /etc/hosts)" >&2; exit 2; }
CLIENT_LIMIT=${CLIENT_LIMIT:-200M}
SERVER_LIMIT=${SERVER_LIMIT:-300M}
CHANNELS=12
# shellcheck source=bench/lib.sh
. bench/lib.sh
SSHD=$(find_tool sshd)
[ -n "$SSHD" ] || { echo "rekey_soak.sh: OpenSSH's sshd not found (apt-get install openssh-server)" >&2; exit 2; }

if [ -z "${KHAROND:-}" ]; then
  echo "== building kharond and kharonctl (release)"
  cargo build --release -q -p kharond -p kharonctl
fi
use_kharond rekey_soak.sh
KHARONCTL=$(dirname "$KHAROND")/kharonctl
W=$(mktemp -d /tmp/khrekey.XXXXXX)
bench_keys
USER_NAME=${USER:-root}
TARGET=api.rekey.test
P1=$(free_port); P2=$(free_port); KH_PORT=$(free_port)

printf '127.0.0.1 localhost\n127.0.0.1 %s\n' "$TARGET" > "$W/hosts"
write_sshd_config "$W/sshd_config.1" "$P1" "LogLevel DEBUG1"
write_sshd_config "$W/sshd_config.2" "$P2" "LogLevel DEBUG1" "RekeyLimit $SERVER_LIMIT"
"$SSHD" -D -e -f "$W/sshd_config.1" 2>"$W/sshd.1.log" & PIDS+=($!)
unshare -m sh -c "mount --bind $W/hosts /etc/hosts && exec $SSHD -D -e -f $W/sshd_config.2" 2>"$W/sshd.2.log" &
PIDS+=($!)
python3 bench/soak/rekey_target.py > "$W/target.port" 2>"$W/target.log" & PIDS+=($!)
wait_port "$P1" "sshd hop1" "$W/sshd.1.log"; wait_port "$P2" "sshd hop2" "$W/sshd.2.log"
for _ in $(seq 100); do [ -s "$W/target.port" ] && break; sleep 0.05; done
TARGET_PORT=$(head -1 "$W/target.port")

# ssh_config: hop2 behind hop1; $1 is hop2's RekeyLimit line (or nothing).
write_ssh_config() {
  : > "$W/home/.ssh/config"
  printf 'Host hop1\n  HostName 127.0.0.1\n  Port %s\n' "$P1" >> "$W/home/.ssh/config"
  printf 'Host hop2\n  HostName 127.0.0.1\n  Port %s\n  ProxyJump hop1\n%s' "$P2" "${1:+  $1
}" >> "$W/home/.ssh/config"
  ssh_config_defaults "$USER_NAME"
}
: > "$W/home/.ssh/known_hosts"
for p in "$P1" "$P2"; do echo "[127.0.0.1]:$p $(cut -d' ' -f1,2 "$W/host_key.pub")" >> "$W/home/.ssh/known_hosts"; done
write_ssh_config "RekeyLimit $CLIENT_LIMIT"
echo '[{"id":"c-rekey","facts":{"distribution":"openshift4","jumphost":"hop2","jumphostDomains":"rekey.test"},"dynamicFacts":{}}]' > "$W/inventory.json"
env -i PATH="$PATH" HOME="$W/home" USER="$USER_NAME" XDG_RUNTIME_DIR="$W" RUST_LOG=info \
  "$KHAROND" --listen 127.0.0.1:"$KH_PORT" --control-socket "$W/k.sock" \
  --inventory "$W/inventory.json" --ssh-config "$W/home/.ssh/config" 2>"$W/kharond.log" &
KPID=$!; PIDS+=("$KPID")
wait_port "$KH_PORT" kharond "$W/kharond.log"

# Re-exchanges in an sshd log after byte OFFSET: "server client".
rekeys() {
  tail -c +"$(($2 + 1))" "$1" | grep -v preauth | grep -o 'SSH2_MSG_KEXINIT \(sent\|received\)' | awk '
    { if (first == "") first = $2; else { if (first == "sent") s++; else c++; first = "" } }
    END { printf "%d %d\n", s, c }'
}
cpu_s() { awk '{ printf "%.1f", ($14 + $15) / 100 }' "/proc/$KPID/stat"; }
PER_CHANNEL=$(python3 -c "import sys; print(int(float(sys.argv[1]) * 2**30) // int(sys.argv[2]))" "$GIB" "$CHANNELS")

# phase NAME: one load of $GIB GiB; appends a row to $W/rows and its verdict to $W/verdicts.
phase() {
  local name=$1 o1 o2 cpu0 result
  o1=$(stat -c %s "$W/sshd.1.log"); o2=$(stat -c %s "$W/sshd.2.log"); cpu0=$(cpu_s)
  echo "== $name: $CHANNELS channels, $GIB GiB"
  result=$(python3 bench/soak/rekey_load.py --proxy 127.0.0.1:"$KH_PORT" --target "$TARGET:$TARGET_PORT" \
    --channels "$CHANNELS" --bytes "$PER_CHANNEL")
  read -r s2 c2 <<<"$(rekeys "$W/sshd.2.log" "$o2")"
  read -r s1 c1 <<<"$(rekeys "$W/sshd.1.log" "$o1")"
  python3 - "$name" "$result" "$s2" "$c2" "$s1" "$c1" "$cpu0" "$(cpu_s)" >> "$W/rows" <<'PY'
import json, sys
name, result, s2, c2, s1, c1, cpu0, cpu1 = sys.argv[1:]
r = json.loads(result)
rate = r["bytes"] / r["seconds"] / 1e6
print(f"| {name} | {r['bytes'] / 2**30:.2f} | {r['seconds']:.1f} | {rate:.0f} | {c2} / {s2} | {c1} / {s1} "
      f"| {float(cpu1) - float(cpu0):.1f} | {len(r['failures'])} |")
for f in r["failures"]:
    print(f"FAILURE {name}: {f}", file=sys.stderr)
PY
  echo "$name ${s2} ${c2} $(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])["failures"]))' "$result")" >> "$W/verdicts"
}

: > "$W/rows"; : > "$W/verdicts"
phase "started by kharond (RekeyLimit $CLIENT_LIMIT)"
write_ssh_config ""
"$KHARONCTL" --control-socket "$W/k.sock" reload >/dev/null
phase "started by the sshd (RekeyLimit $SERVER_LIMIT)"

RSS_MAX=$(awk '/VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$KPID/status")
DOWN=$(grep -c "SSH session down" "$W/kharond.log" || true)
VERDICT=pass
# Phase 1 must have kharond's re-exchanges, phase 2 the sshd's, each at least three; no failures.
awk 'NR == 1 && $(NF-1) < 3 { exit 1 } NR == 2 && $(NF-2) < 3 { exit 1 } $NF != 0 { exit 1 }' "$W/verdicts" || VERDICT=fail
[ "$DOWN" = 0 ] || VERDICT=fail

SECTION=$W/section.md
{
  echo '<!-- rekey-soak: begin (bench/rekey_soak.sh writes this section) -->'
  echo '## Re-keys under load'
  echo
  echo "Generated by \`bench/rekey_soak.sh${ARGS:+ $ARGS}\` on $(date -u '+%Y-%m-%d %H:%M UTC') ($(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end); kharond $("$KHAROND" --version | head -1 | sed 's/^kharond //'). Verdict: **$VERDICT**."
  echo
  echo "One SSH session through two OpenSSH jump hosts on loopback (kharond → hop1 → hop2, ProxyJump) carries $CHANNELS channels at once, six downloads and six uploads of $((PER_CHANNEL >> 20)) MiB each, every byte checked against a pattern (bench/soak/rekey_load.py, rekey_target.py). In the first phase kharond re-keys the last hop's session after \`RekeyLimit $CLIENT_LIMIT\` (its ssh_config); then the ssh_config loses the line, \`kharonctl reload\` gives the chain a new session, and hop2's sshd re-keys it after its own \`RekeyLimit $SERVER_LIMIT\`. Re-exchanges are counted in the sshds' logs (who sent SSH2_MSG_KEXINIT first started it)."
  echo
  echo '| phase | GiB | s | MB/s | hop2: by kharond / by sshd | hop1: by kharond / by sshd | kharond CPU s | channels broken |'
  echo '|---|---|---|---|---|---|---|---|'
  cat "$W/rows"
  echo
  echo "Sessions lost (kharond's \"SSH session down\"): $DOWN. kharond's peak RSS: $RSS_MAX MiB. Must be: no channel broken, no session lost, at least three re-exchanges started by kharond in the first phase and by the sshd in the second."
  echo '<!-- rekey-soak: end -->'
} > "$SECTION"

# The section replaces its previous version in the report, or is appended to it.
python3 - "$OUT" "$SECTION" <<'PY'
import re, sys
out, section = sys.argv[1], open(sys.argv[2]).read()
try:
    text = open(out).read()
except FileNotFoundError:
    text = ""
pattern = re.compile(r"<!-- rekey-soak: begin.*?<!-- rekey-soak: end -->\n", re.S)
text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
open(out, "w").write(text)
PY
cat "$SECTION"
[ "$VERDICT" = pass ]
