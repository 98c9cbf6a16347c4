#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60): kharond's SOCKS handshake parser, its
# ssh_config lexer/loader/resolver, the inventory parser with the routing table built from it, and
# the PAC port's HTTP request judge.
# Not part of the test suite.
#
#   fuzz/run.sh [SECONDS]
#
# Needs a nightly toolchain (cargo-fuzz builds with -Zsanitizer=address); without one it says so
# and exits 0. Installs cargo-fuzz from crates.io when missing. Each target starts from the seeds
# in fuzz/seeds/TARGET plus what earlier runs found (fuzz/corpus/TARGET, not committed). A crash
# leaves its input in fuzz/artifacts/TARGET/ and makes the script exit 1, naming it: turn it into
# a regression test next to the parser, then fix the parser.
set -euo pipefail
cd "$(dirname "$0")"
SECONDS_EACH=${1:-60}
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "nightly not available, skipped fuzzing (rustup toolchain install nightly to run it)"
  exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz"
  cargo install -q cargo-fuzz --locked
fi
failed=()
for target in $(cargo +nightly fuzz list); do
  mkdir -p "corpus/$target"
  echo "== $target: $SECONDS_EACH s"
  # -rss_limit_mb: a parser that allocates per input byte shows up as a failure, not a slow run.
  if ! cargo +nightly fuzz run "$target" "corpus/$target" "seeds/$target" -- \
      -max_total_time="$SECONDS_EACH" -rss_limit_mb=1024 -timeout=10 -print_final_stats=1 2>"corpus/$target.log"; then
    failed+=("$target")
    tail -n 30 "corpus/$target.log" >&2
  else
    grep -E '^stat::number_of_executed_units|^#[0-9]+.*DONE' "corpus/$target.log" | tail -n 2 || true
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "crashes in: ${failed[*]}; inputs in fuzz/artifacts/" >&2
  exit 1
fi
echo "no crash in $(cargo +nightly fuzz list | wc -l) targets, $SECONDS_EACH s each"
