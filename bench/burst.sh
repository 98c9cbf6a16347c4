#!/usr/bin/env bash
# Memory after a burst: kharond's resident set and heaps before, during and after CONNS
# concurrent connections, and after IDLE_S seconds of idle. Not a test.
#
#   [JSON=FILE] [KHAROND=PATH] bench/burst.sh [CONNS] [IDLE_S] [RUNS]   (defaults: 3000, 30, 3)
#
# bench/burst.py does the work (a fresh kharond per run on the example inventory, so every
# connection takes the direct route to a local echo server); see there for what is sampled when.
# KHAROND measures another kharond binary (e.g. one built from another commit) in place of this
# tree's release build. JSON appends each run for bench/report.py; without it the runs are only
# printed.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
CONNS=${1:-3000}; IDLE_S=${2:-30}; RUNS=${3:-3}
# kharond holds two descriptors per connection, the driver and the echo server one each.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
cargo build --release -q -p kharond -p kharonctl
use_kharond bench/burst.sh
W=$(mktemp -d /tmp/khburst.XXXXXX)
python3 bench/burst.py "$KHAROND" "$PWD/target/release/kharonctl" "$W" "$CONNS" "$IDLE_S" "$RUNS" "${JSON:-}"
