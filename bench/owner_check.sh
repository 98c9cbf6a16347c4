#!/usr/bin/env bash
# The cost of the owner check (issue 33) on the direct path's connection setup. Not a test.
#
#   [JSON=FILE] [PAIRS=5] [CONNS=4000] bench/owner_check.sh
#
# A password-less kharond asks the kernel which user owns each client's socket (sock_diag) and
# serves only its own; `allow_other_users = true` turns that off. This starts both, from the same
# release build on the example inventory, and runs kharon-bench's conn phase (connect, SOCKS
# handshake, 1-byte echo, close; by IP and by name) against them in PAIRS runs, swapping which one
# is measured first in every other run so that drift on the machine hits both alike. It prints each
# run's added setup p50 (over plain loopback, measured in the same run) for both, then the median
# of the per-run ratios: "with check / without". The budget is 1.10 (the benchmark page's added
# setup p50 may grow by at most 10 %). JSON appends both series for bench/report.py (bench/run.sh
# puts the figure on the benchmark page).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
PAIRS=${PAIRS:-5}; CONNS=${CONNS:-4000}
cargo build --release -q -p kharond -p kharon-bench
use_kharond owner_check.sh
BENCH=$PWD/target/release/kharon-bench
W=$(mktemp -d /tmp/khowner.XXXXXX)
start() { # start NAME [CONFIG]: a kharond on a port of its own; its address in ADDR
  local name=$1 port
  port=$(free_port)
  mkdir -p "$W/$name/run" && chmod 700 "$W/$name/run"
  HOME=$W/$name XDG_RUNTIME_DIR=$W/$name/run RUST_LOG=warn "$KHAROND" --listen "127.0.0.1:$port" \
    --inventory contrib/examples/inventory.json --control-socket "$W/$name/run/kharond.sock" \
    ${2:+--config "$2"} 2>"$W/$name.log" &
  PIDS+=($!)
  wait_port "$port" "kharond ($name)" "$W/$name.log"
  ADDR=127.0.0.1:$port
}
printf 'allow_other_users = true\n' >"$W/others.toml"
start checked; CHECKED=$ADDR
start unchecked "$W/others.toml"; UNCHECKED=$ADDR
echo "# $(uname -srm); $(nproc) cores; $PAIRS runs of $CONNS connections per path"
RATIOS=()
for i in $(seq "$PAIRS"); do
  if [ $((i % 2)) -eq 1 ]; then FIRST=$CHECKED SECOND=$UNCHECKED; else FIRST=$UNCHECKED SECOND=$CHECKED; fi
  OUT=$("$BENCH" --socks "$FIRST" --baseline "other=$SECOND" --phases conn --conns "$CONNS" --json "$W/run$i.json")
  echo "$OUT" | sed "s/^/run $i: /"
  RATIOS+=("$(python3 - "$W/run$i.json" "$FIRST" "$CHECKED" <<'PY'
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if r.get("phase") == "conn"]
first_is_checked = sys.argv[2] == sys.argv[3]
def added(path, how):
    return next(r["added_p50_us"] for r in rows if r["path"] == path and r["how"] == how)
out = []
for how in ("IP", "name"):
    a, b = added("kharond", how), added("other", how)
    checked, unchecked = (a, b) if first_is_checked else (b, a)
    out.append(f"{how}:{checked:.1f}:{unchecked:.1f}")
print(" ".join(out))
PY
)")
done
python3 - "${JSON:-}" "$CONNS" "${RATIOS[@]}" <<'PY'
import json, statistics, sys
out, conns, runs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
for k, how in enumerate(("IP", "name")):
    pairs = [tuple(map(float, run.split()[k].split(":")[1:])) for run in runs]
    ratios = [c / u for c, u in pairs]
    if out:
        with open(out, "a") as f:
            print(json.dumps({"phase": "owner_check", "how": how, "conns": conns,
                              "checked_us": [c for c, _ in pairs], "unchecked_us": [u for _, u in pairs]}), file=f)
    print(f"added setup p50 by {how:<4}: with the owner check " + ", ".join(f"{c:.1f}" for c, _ in pairs)
          + " µs; without " + ", ".join(f"{u:.1f}" for _, u in pairs) + " µs")
    print(f"  ratio per run " + ", ".join(f"{r:.3f}" for r in ratios) + f"; median {statistics.median(ratios):.3f}"
          + f"; median difference {statistics.median(c - u for c, u in pairs):+.1f} µs")
PY
