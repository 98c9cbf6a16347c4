#!/usr/bin/env bash
# What one direct connection costs each SOCKS server, counted rather than timed. Not a test.
#
#   [KHAROND=…] [BEFORE=…] [CONNS=2000] [WORKERS=8] bench/conn_cost.sh
#
# Wall-clock rates on a shared 2-core machine move with whatever else runs; counts do not. For
# kharond (this tree's release build, or KHAROND), BEFORE (another kharond build, e.g. main's, to
# compare against), microsocks and thin-socks (bench/client/thin_socks.rs: the least a SOCKS server
# can do, in its thread-pool and its epoll form), each on the example inventory where it has one,
# this runs CONNS connections of kharon-bench's rate phase (connect, SOCKS5 handshake by IP
# literal, one byte each way, close; WORKERS at a time) and prints per connection:
# - instructions in user space, by valgrind's callgrind (repeatable to about 2 %: the same binary
#   and load give the same count whatever else runs; counted only while the connections run);
# - system calls, by name, with `perf stat` on the syscalls tracepoints, and the CPU time they
#   took (task-clock: timed, so noisy), when perf can count them here.
# The kernel's own work per connection (TCP, wake-ups) is most of a proxy's CPU and neither count
# sees it; bench/direct.sh's rate phase measures that, CPU per connection of each server.
# Needs valgrind; microsocks and perf are used when installed (apt-get install microsocks
# linux-perf).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
CONNS=${CONNS:-2000}; WORKERS=${WORKERS:-8}
# The system calls counted: every one the servers here make per connection. perf opens a counter
# per call and thread, and thin-socks' pool has 129 threads: all of Linux's 350-odd calls would
# need more descriptors than a hard limit of 20,000 allows.
CALLS=(accept accept4 read write readv writev recvfrom sendto recvmsg sendmsg splice pipe2 ioctl fcntl
  epoll_ctl epoll_wait epoll_pwait poll ppoll select futex socket connect setsockopt getsockopt
  getsockname getpeername shutdown close clone3 exit mmap munmap madvise mprotect rt_sigprocmask
  set_robust_list rseq newfstatat lseek brk)
ulimit -n 262144 2>/dev/null || ulimit -n "$(ulimit -Hn)"
command -v valgrind >/dev/null || { echo "conn_cost.sh: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
cargo build --release -q -p kharond -p kharon-bench
use_kharond conn_cost.sh
BIN=$PWD/target/release
W=$(mktemp -d /tmp/khcost.XXXXXX)
PERF=$(command -v perf || true)
if [ -n "$PERF" ] && ! perf stat -e 'syscalls:sys_enter_read' true >/dev/null 2>&1; then PERF=; fi

# start NAME PORT [valgrind ARGS…]: the server NAME on 127.0.0.1:PORT (in the background), its
# pid in SERVER; under valgrind when given its arguments.
start() {
  local name=$1 port=$2
  shift 2
  local cmd
  case "$name" in
    kharond | before)
      local bin=$KHAROND
      [ "$name" = kharond ] || bin=$BEFORE
      mkdir -p "$W/$name/run" && chmod 700 "$W/$name/run"
      cmd=("$bin" --listen "127.0.0.1:$port" --inventory contrib/examples/inventory.json
        --control-socket "$W/$name/run/kharond.sock")
      ;;
    microsocks) cmd=("$MICROSOCKS" -i 127.0.0.1 -p "$port") ;;
    thin-socks) cmd=("$BIN/thin-socks" "127.0.0.1:$port") ;;
    thin-socks-epoll) cmd=("$BIN/thin-socks" --epoll "127.0.0.1:$port") ;;
  esac
  HOME=$W/$name XDG_RUNTIME_DIR=$W/$name/run RUST_LOG=warn "$@" "${cmd[@]}" >"$W/$name.log" 2>&1 &
  SERVER=$!
  PIDS+=("$SERVER")
  # valgrind starts slowly.
  for _ in $(seq 600); do (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && return 0; sleep 0.1; done
  echo "$name is not listening on 127.0.0.1:$port after 60 s; its log ($W/$name.log):" >&2
  tail -n 20 "$W/$name.log" >&2
  exit 1
}

# load PORT: the connections whose cost is counted.
load() {
  "$BIN/kharon-bench" --socks "127.0.0.1:$1" --no-direct --name 127.0.0.1 --phases rate \
    --rate-conns "$CONNS" --rate-workers "$WORKERS" --runs 1 >"$W/bench.log"
  grep -q ', 0 failed' "$W/bench.log" || { echo "conn_cost.sh: connections failed:" >&2; cat "$W/bench.log" >&2; exit 1; }
}

# instructions NAME: user-space instructions per connection, by callgrind.
instructions() {
  local port out
  port=$(free_port)
  out=$W/$1.callgrind
  start "$1" "$port" valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out.%p"
  callgrind_control -i on "$SERVER" >/dev/null 2>&1
  load "$port"
  callgrind_control -d "$SERVER" >/dev/null 2>&1
  kill "$SERVER"; wait "$SERVER" 2>/dev/null || true
  # The dump taken right after the load (the one at exit follows it).
  callgrind_annotate "$out.$SERVER.1" 2>/dev/null |
    awk -v n="$CONNS" '/PROGRAM TOTALS/ {gsub(",", "", $1); printf "%.0f", $1 / n}'
}

# syscalls NAME: system calls per connection, by name, then "all" and the CPU time (µs).
syscalls() {
  local port
  port=$(free_port)
  start "$1" "$port"
  perf stat "${CALLS[@]/#/-esyscalls:sys_enter_}" -e task-clock -p "$SERVER" -o "$W/$1.perf" 2>/dev/null &
  local perf=$!
  sleep 0.5
  load "$port"
  kill -INT "$perf"; wait "$perf" || true
  kill "$SERVER"; wait "$SERVER" 2>/dev/null || true
  awk -v n="$CONNS" '
    $2 ~ /^syscalls:sys_enter_/ { gsub(",", "", $1); if ($1 + 0 > 0) { sub("syscalls:sys_enter_", "", $2); c[$2] = $1 / n; all += $1 / n } }
    $2 == "msec" { gsub(",", "", $1); cpu = $1 * 1000 / n }
    END { for (k in c) if (c[k] >= 0.05) printf "%s=%.2f ", k, c[k]; printf "| all %.2f, CPU %.0f µs", all, cpu }' "$W/$1.perf"
}

MICROSOCKS=$(find_tool microsocks)
SERVERS=(kharond)
[ -z "${BEFORE:-}" ] || SERVERS+=(before)
[ -z "$MICROSOCKS" ] || SERVERS+=(microsocks)
SERVERS+=(thin-socks thin-socks-epoll)
echo "# $(uname -srm); $(nproc) cores; $CONNS connections, $WORKERS at a time, per server; kharond: $KHAROND${BEFORE:+, before: $BEFORE}"
for name in "${SERVERS[@]}"; do
  printf '%-17s %7s instructions per connection (user space)\n' "$name" "$(instructions "$name")"
done
if [ -n "$PERF" ]; then
  for name in "${SERVERS[@]}"; do
    # A thread per connection (microsocks) gets counters of its own at every clone: perf's cost,
    # which its CPU figure then includes.
    printf '%-17s system calls per connection: %s\n' "$name" "$(syscalls "$name")"
  done
else
  echo "# perf cannot count system calls here (linux-perf missing, or no tracepoints): skipped"
fi
