#!/usr/bin/env bash
# Direct-path benchmark: kharond vs plain loopback, measured in the same run. Not a test.
#
#   bench/direct.sh [BYTES] [RUNS] [CONNS]     (defaults: 1 GiB, 5 runs, 2000 connections)
#
# Builds kharond and the bench client in release, starts kharond on the example inventory on an
# ephemeral port, and runs kharon-bench against it (see bench/client/main.rs for what is measured).
# When installed (apt-get install microsocks dante-server), microsocks and dante are measured in
# the same run as further baselines: what other SOCKS5 servers get on the same cores. So is
# thin-relay, a bare blocking-splice relay: the most a relay can get on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
BYTES=${1:-1073741824}; RUNS=${2:-5}; CONNS=${3:-2000}
cargo build --release -q -p kharond -p kharonctl -p kharon-bench
BIN=$PWD/target/release
W=$(mktemp -d /tmp/khdirect.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$W"; }
trap cleanup EXIT
mkdir -p "$W/run" && chmod 700 "$W/run"
export HOME=$W XDG_RUNTIME_DIR=$W/run KHARON_CONTROL_SOCKET=$W/run/kharond.sock
RUST_LOG=warn "$BIN/kharond" --listen 127.0.0.1:0 --inventory contrib/examples/inventory.json 2>"$W/kharond.log" &
KPID=$!; PIDS+=("$KPID")
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
BASELINES=()
# The thinnest relay we could write (bench/client/thin_relay.rs): roughly the ceiling on this machine.
P=$(free_port); "$BIN/thin-relay" "127.0.0.1:$P" 2>/dev/null & PIDS+=($!)
BASELINES+=(--baseline "thin splice relay=127.0.0.1:$P")
if command -v microsocks >/dev/null; then
  P=$(free_port); microsocks -i 127.0.0.1 -p "$P" >/dev/null 2>&1 & PIDS+=($!)
  BASELINES+=(--baseline "microsocks=127.0.0.1:$P")
fi
DANTED=$(command -v danted || ls /usr/sbin/danted 2>/dev/null || true)
if [ -n "$DANTED" ]; then
  P=$(free_port)
  cat > "$W/danted.conf" <<CFG
logoutput: /dev/null
internal: 127.0.0.1 port = $P
external: 127.0.0.1
clientmethod: none
socksmethod: none
user.privileged: $(id -un)
user.unprivileged: $(id -un)
client pass { from: 127.0.0.0/8 to: 0.0.0.0/0 }
socks pass { from: 127.0.0.0/8 to: 0.0.0.0/0 }
CFG
  "$DANTED" -f "$W/danted.conf" -p "$W/danted.pid" >/dev/null 2>&1 & PIDS+=($!)
  BASELINES+=(--baseline "dante=127.0.0.1:$P")
fi
for _ in $(seq 200); do "$BIN/kharonctl" status >/dev/null 2>&1 && break; sleep 0.05; done
ADDR=$("$BIN/kharonctl" status -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["listen_address"])')
echo "# $(uname -srm); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); $(nproc) cores; splice relay on Linux"
sleep 0.3
"$BIN/kharon-bench" --socks "$ADDR" --proxy-pid "$KPID" "${BASELINES[@]}" --bytes "$BYTES" --runs "$RUNS" --conns "$CONNS"
