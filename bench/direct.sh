#!/usr/bin/env bash
# Direct-path benchmark: kharond vs plain loopback, measured in the same run. Not a test.
#
#   bench/direct.sh [BYTES] [RUNS] [CONNS]     (defaults: 1 GiB, 5 runs, 2000 connections)
#
# Builds kharond and the bench client in release, starts kharond on the example inventory on an
# ephemeral port, and runs kharon-bench against it (see bench/client/main.rs for what is measured).
set -euo pipefail
cd "$(dirname "$0")/.."
BYTES=${1:-1073741824}; RUNS=${2:-5}; CONNS=${3:-2000}
cargo build --release -q -p kharond -p kharonctl -p kharon-bench
BIN=$PWD/target/release
W=$(mktemp -d /tmp/khdirect.XXXXXX)
cleanup() { [ -n "${KPID:-}" ] && kill "$KPID" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
mkdir -p "$W/run" && chmod 700 "$W/run"
export HOME=$W XDG_RUNTIME_DIR=$W/run KHARON_CONTROL_SOCKET=$W/run/kharond.sock
RUST_LOG=warn "$BIN/kharond" --listen 127.0.0.1:0 --inventory contrib/examples/inventory.json 2>"$W/kharond.log" &
KPID=$!
for _ in $(seq 200); do "$BIN/kharonctl" status >/dev/null 2>&1 && break; sleep 0.05; done
ADDR=$("$BIN/kharonctl" status -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["listen_address"])')
echo "# $(uname -srm); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); $(nproc) cores; splice relay on Linux"
"$BIN/kharon-bench" --socks "$ADDR" --bytes "$BYTES" --runs "$RUNS" --conns "$CONNS"
