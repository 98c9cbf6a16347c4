#!/usr/bin/env bash
# The soak (issue 21): kharond for a long while under mixed load and scheduled faults, through
# real OpenSSH jump host chains in network namespaces this script makes. Not a test; writes
# docs/soak.md and docs/soak.png and exits 1 when a criterion is not met.
#
#   bench/soak.sh [--duration SECONDS] [--smoke] [--out FILE.md]
#
#   --duration   how long the load runs (default 1800 = 30 minutes; faults start after a 3-minute
#                warm-up and repeat every 150 s)
#   --smoke      2 minutes, one round of every fault, 20 s warm-up; checks that the script works
#                (its figures say nothing about weeks), writes to the work directory unless --out
#   --out        the report (default docs/soak.md; the plot goes beside it as .png)
#   KEEP=1       keep the work directory (kharond's log, every request, fault and stream as JSON lines)
#
# Topology (all made here, removed on exit or Ctrl-C; nothing is routed off the machine):
#   khs-c  kharond, the load driver (bench/soak/driver.py), the direct route's sink; no default
#          route, so a dropped link cannot send anything elsewhere
#   khs-a  route a: one sshd (hop-a)                       veth khs-a-c/khs-a-j 10.213.1.0/30
#   khs-b  route b: hop-b1 → hop-b2 (ProxyJump)            veth khs-b-c/khs-b-j 10.213.2.0/30
#   khs-c3 route c: hop-c1 → hop-c2 → hop-c3               veth khs-c-c/khs-c-j 10.213.3.0/30
# Inner hops listen on the namespace's own loopback; each last hop resolves its route's name
# (api.a.soak, …) to its namespace's target server. Needs root (ip netns), OpenSSH's sshd,
# gnuplot (installed with apt-get when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DURATION=1800
SMOKE=0
OUT=
ARGS="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) DURATION=$2; shift 2 ;;
    --smoke) SMOKE=1; DURATION=120; shift ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "soak.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "soak.sh: needs root (network namespaces)" >&2; exit 2; }
# One soak at a time: a second one's leftover cleanup (below) would delete this one's namespaces.
PIDFILE=/run/kharon-soak.pid
if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
  echo "soak.sh: another soak is running (pid $(cat "$PIDFILE")); let it finish or stop it first" >&2
  exit 2
fi
echo $$ >"$PIDFILE"

need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v gnuplot >/dev/null || need+=(gnuplot-nox)
command -v ssh-keygen >/dev/null || need+=(openssh-client)
if [ "${#need[@]}" -gt 0 ]; then
  echo "== installing ${need[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
mkdir -p /run/sshd

echo "== building kharond and kharonctl (release)"
cargo build --release -q -p kharond -p kharonctl
BIN=$ROOT/target/release

W=$(mktemp -d /tmp/khsoak.XXXXXX)
[ -n "$OUT" ] || { [ "$SMOKE" = 1 ] && OUT=$W/soak.md || OUT=$ROOT/docs/soak.md; }
NAMESPACES=(khs-c khs-a khs-b khs-c3)
DRIVER=

cleanup() {
  set +e
  [ -z "$DRIVER" ] || { kill -TERM "$DRIVER" 2>/dev/null; wait "$DRIVER" 2>/dev/null; }
  for ns in "${NAMESPACES[@]}"; do
    # Anything still running in a namespace (the driver kills its own children; this is for a
    # driver that was killed itself) goes first, then the namespace and its veth ends.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -CONT "$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
  if [ "$SMOKE" = 1 ] || [ "${KEEP:-0}" = 1 ]; then
    echo "== report: $OUT (work directory kept: $W, with records.jsonl, faults.jsonl, streams.jsonl)"
  else
    rm -rf "$W"
  fi
  # Last: until the namespaces are gone, a new soak must not start.
  [ "$(cat "$PIDFILE" 2>/dev/null)" != $$ ] || rm -f "$PIDFILE"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Leftovers of a run that was killed with -9.
for ns in "${NAMESPACES[@]}"; do ip netns del "$ns" 2>/dev/null || true; done

echo "== namespaces"
for ns in "${NAMESPACES[@]}"; do
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  mkdir -p "/etc/netns/$ns"
done
link() { # ROUTE-NS SHORT N: a veth pair between khs-c and ROUTE-NS, 10.213.N.1 ↔ 10.213.N.2
  ip link add "khs-$2-c" type veth peer name "khs-$2-j"
  ip link set "khs-$2-c" netns khs-c
  ip link set "khs-$2-j" netns "$1"
  ip -n khs-c addr add "10.213.$3.1/30" dev "khs-$2-c"
  ip -n "$1" addr add "10.213.$3.2/30" dev "khs-$2-j"
  ip -n khs-c link set "khs-$2-c" up
  ip -n "$1" link set "khs-$2-j" up
}
link khs-a a 1
link khs-b b 2
link khs-c3 c 3
printf '127.0.0.1 localhost\n127.0.0.1 api.direct.soak\n' >/etc/netns/khs-c/hosts
printf '127.0.0.1 localhost\n127.0.0.1 api.a.soak\n' >/etc/netns/khs-a/hosts
printf '127.0.0.1 localhost\n127.0.0.1 api.b.soak\n' >/etc/netns/khs-b/hosts
printf '127.0.0.1 localhost\n127.0.0.1 api.c.soak\n' >/etc/netns/khs-c3/hosts

echo "== keys and configs in $W"
mkdir -p "$W/home/.ssh" "$W/run" "$W/config" "$W/cache"
chmod 700 "$W/home/.ssh" "$W/run"
ssh-keygen -q -t ed25519 -N '' -C soak -f "$W/home/.ssh/id_soak"
ssh-keygen -q -t ed25519 -N '' -C soak-host -f "$W/host_key"
HOSTKEY=$(cut -d' ' -f1-2 "$W/host_key.pub")
cp "$W/home/.ssh/id_soak.pub" "$W/authorized_keys"
USER_NAME=$(id -un)

# name ns listen-address port
HOPS="a1 khs-a 10.213.1.2 2200
b1 khs-b 10.213.2.2 2200
b2 khs-b 127.0.0.1 2202
c1 khs-c3 10.213.3.2 2200
c2 khs-c3 127.0.0.1 2302
c3 khs-c3 127.0.0.1 2303"
: >"$W/known_hosts"
echo "$HOPS" >"$W/hops"
while read -r name ns addr port; do
  cat >"$W/sshd-$name.conf" <<EOF
Port $port
ListenAddress $addr
HostKey $W/host_key
PidFile none
AuthorizedKeysFile $W/authorized_keys
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
AllowTcpForwarding yes
PermitTunnel no
LogLevel INFO
ClientAliveInterval 0
MaxStartups 100
EOF
  echo "[$addr]:$port $HOSTKEY" >>"$W/known_hosts"
done <<<"$HOPS"

ssh_config() { # FILE SERVER-ALIVE-COUNT-MAX-OF-HOP-A
  {
    host() { # alias addr port [proxyjump]
      printf 'Host %s\n  HostName %s\n  Port %s\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n' \
        "$1" "$2" "$3" "$USER_NAME" "$W/home/.ssh/id_soak" "$W/known_hosts"
      [ -z "${4:-}" ] || printf '  ProxyJump %s\n' "$4"
      [ "$1" != hop-a ] || printf '  ServerAliveCountMax %s\n' "$SACM"
      printf '\n'
    }
    SACM=$2
    host hop-a 10.213.1.2 2200
    host hop-b1 10.213.2.2 2200
    host hop-b2 127.0.0.1 2202 hop-b1
    host hop-c1 10.213.3.2 2200
    host hop-c2 127.0.0.1 2302 hop-c1
    host hop-c3 127.0.0.1 2303 hop-c2
  } >"$1"
}
ssh_config "$W/ssh_config.0" 3
ssh_config "$W/ssh_config.1" 4

python3 - "$W" <<'EOF'
import json, sys
w = sys.argv[1]
def routed(cid, jump, base):
    return {"id": cid, "tenant": "t-soak", "displayName": cid,
            # Static too: the jump hosts are aliases of 127.0.0.1, which anchor no dynamic name
            # (issue 41, routing/src/anchor.rs).
            "facts": {"distribution": "openshift4", "jumphost": jump, "jumphostDomains": base},
            "dynamicFacts": {"openshiftBaseDomain": base, "openshiftApiURL": f"https://api.{base}:6443"}}
base = [routed("c-a", "hop-a", "a.soak"), routed("c-b", "hop-b2", "b.soak"), routed("c-c", "hop-c3", "c.soak")]
# The second inventory adds clusters (one more route per chain), so each reload changes the table.
more = base + [routed("c-a2", "hop-a", "a2.soak"), routed("c-b2", "hop-b2", "b2.soak"), routed("c-c2", "hop-c3", "c2.soak")]
for i, clusters in enumerate([base, more]):
    json.dump(clusters, open(f"{w}/inventory.{i}.json", "w"), indent=1)
EOF

python3 - "$W" "$BIN" <<'EOF'
import json, os, sys
w, bin_dir = sys.argv[1], sys.argv[2]
hops = {}
for line in open(f"{w}/hops"):
    name, ns, addr, port = line.split()
    hops[name] = {"ns": ns, "addr": addr, "port": int(port)}
hops["c1"]["veth"] = "khs-c-c"
env = {"HOME": f"{w}/home", "XDG_CONFIG_HOME": f"{w}/config", "XDG_CACHE_HOME": f"{w}/cache",
       "XDG_RUNTIME_DIR": f"{w}/run", "USER": os.environ.get("USER", "root"), "PATH": os.environ["PATH"]}
json.dump({
    "work": w, "kharond": f"{bin_dir}/kharond", "kharonctl": f"{bin_dir}/kharonctl",
    "hops": hops, "target_namespaces": ["khs-a", "khs-b", "khs-c3"],
    "inventory": f"{w}/inventory.json", "inventories": [f"{w}/inventory.0.json", f"{w}/inventory.1.json"],
    "ssh_config": f"{w}/ssh_config", "ssh_configs": [f"{w}/ssh_config.0", f"{w}/ssh_config.1"],
    "control": f"{w}/run/kharond.sock", "listen_port": 12000, "env": env,
}, open(f"{w}/setup.json", "w"), indent=1)
EOF

# The report's section that bench/rekey_soak.sh writes is not this run's: kept as it is.
REKEY_SECTION=$W/rekey-section.md
if [ -f "$OUT" ]; then
  sed -n '/<!-- rekey-soak: begin/,/<!-- rekey-soak: end -->/p' "$OUT" > "$REKEY_SECTION"
fi

echo "== soak: ${DURATION} s$([ "$SMOKE" = 1 ] && echo ' (smoke)')"
SMOKE_FLAG=()
[ "$SMOKE" = 1 ] && SMOKE_FLAG=(--smoke)
ip netns exec khs-c python3 "$ROOT/bench/soak/driver.py" --setup "$W/setup.json" --duration "$DURATION" \
  "${SMOKE_FLAG[@]}" --out "$OUT" --command "bench/soak.sh${ARGS:+ $ARGS}" &
DRIVER=$!
set +e
wait "$DRIVER"
STATUS=$?
DRIVER=
if [ -s "$REKEY_SECTION" ] && [ -f "$OUT" ]; then
  printf '\n' >> "$OUT"
  cat "$REKEY_SECTION" >> "$OUT"
fi
exit "$STATUS"
