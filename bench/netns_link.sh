# An emulated link between two network namespaces, for the bench scripts (sourced after
# bench/lib.sh, not run): `link-emu` (bench/client/link_emu/) moves the IP packets between a TUN
# device in each namespace through a drop-tail buffer, a bottleneck rate, random loss and a one-way
# delay per direction; kernel TCP runs at both ends. docs/performance.md, "The emulated link", says
# what it emulates and what it does not. Needs root.
#
#   link_namespaces PREFIX       makes $NEAR and $FAR (PREFIX-near, PREFIX-far), each with `lo` and
#                                a TUN device emu0 (MTU $LINK_MTU): $NEAR_ADDR in near, $FAR_ADDR in far,
#                                each the other's only route; removed when the script exits
#   link_start NAME ARGS…        starts link-emu with a profile's ARGS (LINK_PID; its description and,
#                                once stopped, its counters in $W/link.NAME.json)
#   link_stop                    stops it (its counters are then in that file)
#   in_near CMD… / in_far CMD…   runs CMD in that namespace (in the foreground: started with `&`, a
#                                function's PID is its subshell's; use `ip netns exec "$NEAR" CMD &`)
#   wait_port_in NS ADDR PORT WHAT LOG
#   select_profiles              the profiles to run, from PROFILES / ONLY (below), into
#                                PROFILE_NAMES and PROFILE_ARGS
#
# The default profiles: the links the window rule is asked to hold on. Each line is a name
# and link-emu's options (`link-emu --help`); "delay" is one way, half the round trip; a BDP is the
# rate times the round trip; 1000p is 1,000 full packets (a Linux interface's default txqueuelen),
# 240 ms at 50 Mbit/s. The Wi-Fi profile's rate halves for 2 s of every 5 (from the emulator's
# start), so every transfer of the bench's phases sees it halve and recover.
LINK_PROFILES=(
  "shallow --delay 25ms --rate 50mbit --queue 0.5bdp"
  "bdp --delay 25ms --rate 50mbit --queue 1bdp"
  "deep --delay 25ms --rate 50mbit --queue 1000p"
  "200m --delay 10ms --rate 200mbit --queue 1bdp"
  "far-deep --delay 60ms --rate 20mbit --queue 1000p"
  "1g --delay 25ms --rate 1gbit --queue 1bdp"
  "lossy --delay 25ms --rate 50mbit --queue 1bdp --loss 0.5%"
  "wifi --delay 25ms --rate 50mbit/3s,25mbit/2s --queue 1bdp"
)
LINK_MTU=${LINK_MTU:-1500}
# link-emu runs at a real-time priority: it is the wire, and the hosts at both ends (kharond,
# sshd, the clients) must not delay it by tens of milliseconds on a busy 2-core machine. Its
# threads sleep until a packet arrives or is due, so they take only what the packets cost.
# LINK_CHRT="" runs it as any other process (as it runs where chrt is missing or refused).
if [ -z "${LINK_CHRT+set}" ]; then
  LINK_CHRT=""
  if chrt --fifo 10 true 2>/dev/null; then LINK_CHRT="chrt --fifo 10"; fi
fi
# RFC 2544's benchmarking range: addresses no real network uses.
NEAR_ADDR=198.18.0.1
FAR_ADDR=198.18.0.2

# PROFILES replaces the list: entries separated by ";", each a name and link-emu's options
# ("wan --delay 40ms --rate 100mbit --queue 2bdp"), or RTT_MS:MBIT (a round trip and a rate: half
# the round trip each way, a BDP of buffer). ONLY picks entries of the list by name ("deep lossy").
select_profiles() {
  local entries=() entry words name
  if [ -n "${PROFILES:-}" ]; then
    IFS=';' read -r -a entries <<< "$PROFILES"
  else
    entries=("${LINK_PROFILES[@]}")
  fi
  PROFILE_NAMES=(); PROFILE_ARGS=()
  for entry in "${entries[@]}"; do
    read -r -a words <<< "$entry"
    [ ${#words[@]} -gt 0 ] || continue
    if [ ${#words[@]} = 1 ] && [[ ${words[0]} =~ ^([0-9]+):([0-9.]+)$ ]]; then
      words=("${BASH_REMATCH[1]}ms-${BASH_REMATCH[2]}mbit" --delay "$(python3 -c "print(${BASH_REMATCH[1]} / 2)")ms"
        --rate "${BASH_REMATCH[2]}mbit" --queue 1bdp)
    fi
    name=${words[0]}
    if [ -n "${ONLY:-}" ] && ! [[ " $ONLY " == *" $name "* ]]; then continue; fi
    PROFILE_NAMES+=("$name"); PROFILE_ARGS+=("${words[*]:1}")
  done
  [ ${#PROFILE_NAMES[@]} -gt 0 ] || { echo "no profile selected (PROFILES=${PROFILES:-} ONLY=${ONLY:-})" >&2; exit 2; }
}

in_near() { ip netns exec "$NEAR" "$@"; }
in_far() { ip netns exec "$FAR" "$@"; }

# Stops link-emu and whatever still runs in the two namespaces (only what the script started
# there: they are its own), then removes them.
link_cleanup() {
  [ -z "${LINK_PID:-}" ] || kill "$LINK_PID" 2>/dev/null || true
  for ns in "${NEAR:-}" "${FAR:-}"; do
    [ -n "$ns" ] || continue
    ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
}

link_namespaces() {
  NEAR=$1-near; FAR=$1-far
  EXIT_HOOKS+=(link_cleanup)
  local ns addr peer
  for ns in "$NEAR" "$FAR"; do
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    if [ "$ns" = "$NEAR" ]; then addr=$NEAR_ADDR; peer=$FAR_ADDR; else addr=$FAR_ADDR; peer=$NEAR_ADDR; fi
    ip netns exec "$ns" ip tuntap add dev emu0 mode tun
    # No IPv6 (router solicitations and the like would cross the link too); the interface's own
    # queue is left as the kernel makes it: link-emu reads every packet as it comes, so nothing
    # waits there unless the emulator falls behind (its counters say when).
    ip netns exec "$ns" sysctl -q -w net.ipv6.conf.emu0.disable_ipv6=1
    ip -n "$ns" link set emu0 mtu "$LINK_MTU" up
    ip -n "$ns" addr add "$addr" peer "$peer" dev emu0
  done
  # TCP_WMEM="4096 16384 33554432" lets one TCP connection keep more than the machine's send
  # buffer in flight (a link's BDP above tcp_wmem's maximum caps it at about that over the RTT).
  if [ -n "${TCP_WMEM:-}" ]; then
    for ns in "$NEAR" "$FAR"; do ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_wmem="$TCP_WMEM"; done
  fi
  if [ -n "${CC:-}" ]; then
    for ns in "$NEAR" "$FAR"; do ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_congestion_control="$CC"; done
  fi
}

link_start() {
  local name=$1
  shift
  LINK_STATS=$W/link.$name.json
  rm -f "$LINK_STATS"
  # shellcheck disable=SC2068 # the profile's options, word by word
  ${LINK_CHRT:-} "$BIN/link-emu" --near "$NEAR:emu0" --far "$FAR:emu0" --mtu "$LINK_MTU" --stats "$LINK_STATS" $@ \
    2>"$W/link.$name.log" &
  LINK_PID=$!
  for _ in $(seq 100); do [ -s "$LINK_STATS" ] && return 0; sleep 0.05; done
  echo "link-emu did not start; its log ($W/link.$name.log):" >&2
  tail -n 20 "$W/link.$name.log" >&2
  exit 1
}

link_stop() {
  kill "$LINK_PID" 2>/dev/null || true
  wait "$LINK_PID" 2>/dev/null || true
  LINK_PID=
}

# wait_port_in NS ADDR PORT WHAT LOG: as wait_port (bench/lib.sh), inside namespace NS.
wait_port_in() {
  for _ in $(seq 200); do
    ip netns exec "$1" bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "$4 is not listening on $2:$3 in $1 after 10 s; its log ($5):" >&2
  tail -n 20 "$5" >&2 || true
  exit 1
}
