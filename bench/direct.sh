#!/usr/bin/env bash
# Direct-path benchmark: kharond vs plain loopback, measured in the same run. Not a test.
#
#   [PHASES=bulk,conn] [STREAMS=1] [JSON=FILE] [BENCH_ARGS=…] bench/direct.sh [BYTES] [RUNS] [CONNS]
#
# Defaults: 1 GiB, 5 runs, 2000 connections, phases bulk and conn, 1 stream. PHASES may also
# name rate (connections per second), link (through slow-link) and idle (memory per idle
# connection); BENCH_ARGS passes further kharon-bench options (see bench/client/main.rs), JSON
# appends each figure as a JSON line for bench/report.py (bench/run.sh runs it all).
#
# Builds kharond and the bench client in release, starts kharond on the example inventory on an
# ephemeral port, and runs kharon-bench against it (see bench/client/main.rs for what is measured).
# When installed (apt-get install microsocks dante-server), microsocks and dante are measured in
# the same run as further baselines: what other SOCKS5 servers get on the same cores. So is
# thin-relay (Linux), a bare blocking-splice relay: the most a relay can get on this machine; and
# thin-epoll, the same relay driven by epoll readiness on one thread per connection: the most an
# event loop such as kharond's can get (bench/client/thin_relay.rs, --epoll); and thin-socks, the
# least a SOCKS server can do per connection, the ceiling of the rate phase (a thread pool, and
# with --epoll an event loop: bench/client/thin_socks.rs). Each baseline's CPU is measured too.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
BYTES=${1:-1073741824}; RUNS=${2:-5}; CONNS=${3:-2000}
PHASES=${PHASES:-bulk,conn}; STREAMS=${STREAMS:-1}
# Thousands of idle connections need three descriptors each here (client, holder) and more in
# the proxies; root may raise the hard limit too.
ulimit -n 262144 2>/dev/null || ulimit -n "$(ulimit -Hn)"
cargo build --release -q -p kharond -p kharonctl -p kharon-bench
BIN=$PWD/target/release
W=$(mktemp -d /tmp/khdirect.XXXXXX)
mkdir -p "$W/run" && chmod 700 "$W/run"
export HOME=$W XDG_RUNTIME_DIR=$W/run KHARON_CONTROL_SOCKET=$W/run/kharond.sock
RUST_LOG=warn "$BIN/kharond" --listen 127.0.0.1:0 --inventory contrib/examples/inventory.json 2>"$W/kharond.log" &
KPID=$!; PIDS+=("$KPID"); CPU=(--proxy-pid "$KPID")
BASELINES=()
# baseline NAME PORT [PID]: measure the SOCKS server just started on PORT too, once it listens
# (with PID, its CPU per GiB as well).
baseline() { wait_port "$2" "$1" "$W/$1.log"; BASELINES+=(--baseline "$1=127.0.0.1:$2${3:+/$3}"); }
if [ "$(uname)" = Linux ]; then
  # The thinnest relay we could write (bench/client/thin_relay.rs): roughly the ceiling here.
  P=$(free_port); "$BIN/thin-relay" "127.0.0.1:$P" 2>"$W/thin-relay.log" & PIDS+=($!)
  baseline thin-relay "$P" "$!"
  P=$(free_port); "$BIN/thin-relay" --epoll "127.0.0.1:$P" 2>"$W/thin-epoll.log" & PIDS+=($!)
  baseline thin-epoll "$P" "$!"
  # The least a SOCKS server can do per connection (bench/client/thin_socks.rs): the ceiling of
  # the rate phase, a thread pool and an event loop.
  P=$(free_port); "$BIN/thin-socks" "127.0.0.1:$P" 2>"$W/thin-socks.log" & PIDS+=($!)
  baseline thin-socks "$P" "$!"
  P=$(free_port); "$BIN/thin-socks" --epoll "127.0.0.1:$P" 2>"$W/thin-socks-epoll.log" & PIDS+=($!)
  baseline thin-socks-epoll "$P" "$!"
fi
MICROSOCKS=$(find_tool microsocks)
if [ -n "$MICROSOCKS" ]; then
  P=$(free_port); "$MICROSOCKS" -i 127.0.0.1 -p "$P" >"$W/microsocks.log" 2>&1 & PIDS+=($!)
  baseline microsocks "$P" "$!"
fi
DANTED=$(find_tool danted)
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
  "$DANTED" -f "$W/danted.conf" -p "$W/danted.pid" >"$W/dante.log" 2>&1 & PIDS+=($!)
  baseline dante "$P" "$!"
fi
for _ in $(seq 200); do "$BIN/kharonctl" status >/dev/null 2>&1 && break; sleep 0.05; done
ADDR=$("$BIN/kharonctl" status -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["listen_address"])')
# The idle daemon: example inventory loaded, no connection served yet.
RSS=$(awk '/^VmRSS:/ {print $2}' "/proc/$KPID/status" 2>/dev/null || echo 0)
echo "# kharond idle RSS: $RSS KiB"
[ -z "${JSON:-}" ] || echo "{\"phase\": \"daemon\", \"rss_kib\": $RSS}" >> "$JSON"
echo "# $(uname -srm); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); $(nproc) cores; splice relay on Linux"
JSON_ARGS=(); [ -z "${JSON:-}" ] || JSON_ARGS=(--json "$JSON")
# shellcheck disable=SC2086 # BENCH_ARGS is a list of options
"$BIN/kharon-bench" --socks "$ADDR" "${CPU[@]}" "${BASELINES[@]}" --bytes "$BYTES" --runs "$RUNS" --conns "$CONNS" \
  --phases "$PHASES" --streams "$STREAMS" "${JSON_ARGS[@]}" ${BENCH_ARGS:-}
