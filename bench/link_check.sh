#!/usr/bin/env bash
# Checks the emulated link of bench/shaped.sh against what each profile tells it to be: per
# profile, link-emu between two fresh namespaces and `link-check` measuring it from the outside
# (idle round trip, rate and full-buffer delay per direction, random loss, one TCP transfer each
# way and the round trip beside it; bench/client/link_emu/check.rs). Not a test: the figures are
# this machine's, and show where the emulator stops keeping up. Exit code 1 when a check is off.
#
#   [PROFILES=… | ONLY="deep lossy"] [SECONDS_EACH=3] [CC=cubic] [JSON=FILE] bench/link_check.sh
#
# PROFILES, ONLY and the default list are bench/shaped.sh's (bench/netns_link.sh). CC sets the
# congestion control of both namespaces (default: the machine's). link-check runs at a real-time
# priority below the emulator's (CHECK_CHRT, "" for none), so that on a busy machine its probes
# measure the link rather than how long they waited for a CPU; where an end still starved (a
# receiver's buffer overflowed, a sender fell short of its rate) the figure is shown without a
# verdict. Each profile takes about 20 seconds, more with a deep buffer. Needs root.
set -euo pipefail
SECONDS_EACH=${SECONDS_EACH:-3}
JSON=${JSON:-}
cd "$(dirname "$0")/.."
. bench/lib.sh
. bench/netns_link.sh
cargo build --release -q -p kharon-bench
BIN=$PWD/target/release
select_profiles
W=$(mktemp -d /tmp/khlink.XXXXXX)
link_namespaces "khc$$"
echo "== congestion control: $(in_near sysctl -n net.ipv4.tcp_congestion_control); load average $(cut -d' ' -f1-3 /proc/loadavg)"
failed=()
for i in "${!PROFILE_NAMES[@]}"; do
  name=${PROFILE_NAMES[$i]}
  echo "== $name: ${PROFILE_ARGS[$i]}"
  link_start "$name" ${PROFILE_ARGS[$i]}
  ${CHECK_CHRT-chrt --fifo 5} "$BIN/link-check" --link "$LINK_STATS" --near "$NEAR" --far "$FAR" --near-addr "$NEAR_ADDR" \
    --far-addr "$FAR_ADDR" --seconds "$SECONDS_EACH" --name "$name" ${JSON:+--json "$JSON"} || failed+=("$name")
  echo "   dropped by the kernel in front of link-emu (the TUN devices' queues):" \
    "near $(in_near cat /sys/class/net/emu0/statistics/tx_dropped), far $(in_far cat /sys/class/net/emu0/statistics/tx_dropped) (so far)"
  link_stop
  python3 - "$LINK_STATS" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for way in ("up", "down"):
    c = r["counters"][way]
    print(f"   link-emu {way}: {c['offered']} packets, {c['dropped_full']} dropped by the full buffer, "
          f"{c['lost']} lost at random, deepest buffer {c['max_queue_packets']} packets; "
          f"delivered late by under {c['late_p99_below_us']} µs (p99), at most {c['late_max_us']} µs")
print(f"   link-emu CPU {r['cpu_s']:.1f} s in {r['seconds']:.0f} s")
PY
done
echo "== load average $(cut -d' ' -f1-3 /proc/loadavg)"
if [ ${#failed[@]} -gt 0 ]; then
  echo "checks off for: ${failed[*]}" >&2
  exit 1
fi
