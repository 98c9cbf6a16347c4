#!/usr/bin/env bash
# Quiet idle (issue 21): how often an idle kharond wakes up and how much CPU it burns per hour,
# with no tunnel and with N idle tunnels, against `ssh -D` on the same jump host. Not a test.
#
#   [N=4] [WINDOW=60] [ALIVE=15] bench/idle.sh [--update-doc]
#
# Wakeups are context switches (voluntary + involuntary) summed over every thread of the
# process(es), read from /proc/PID/task/*/status at the start and the end of WINDOW seconds; CPU
# is the time on a CPU of every thread (/proc/PID/task/*/schedstat, in ns) over the same window,
# scaled to an hour. Cases:
# - kharond, no tunnel: started with an inventory of N routed clusters and left alone;
# - kharond, N idle tunnels: one connection through each of N jump host aliases (N SSH sessions
#   to the same local sshd, ServerAliveInterval ALIVE), closed, then left alone;
# - ssh -D, 1 tunnel: one `ssh -N -D` (same alias, same ServerAliveInterval) after one connection;
# - ssh -D, N tunnels: N of them (ssh -D keeps one session per process), summed.
# What one keepalive costs: one timer wakeup plus the reply's socket wakeup in the process that
# sends it, so "about one per tunnel per ServerAliveInterval" is 2N/ALIVE context switches per s.
#
# --update-doc replaces the "Quiet idle" section of docs/benchmarks.md (between its markers) with
# this run's table; the rest of that page is left as it is. Needs root for nothing but sshd's
# privilege separation directory and its private /etc/hosts (unshare -m); needs sshd, ssh, curl,
# python3.
set -euo pipefail
N=${N:-4}
WINDOW=${WINDOW:-60}
ALIVE=${ALIVE:-15}
UPDATE_DOC=0
[ "${1:-}" = --update-doc ] && UPDATE_DOC=1
cd "$(dirname "$0")/.."
ROOT=$PWD
. bench/lib.sh
SSHD=$(find_tool sshd)
[ -n "$SSHD" ] || { echo "bench/idle.sh needs OpenSSH's sshd (apt-get install openssh-server)" >&2; exit 1; }
cargo build --release -q -p kharond -p kharonctl
BIN=$PWD/target/release
W=$(mktemp -d /tmp/khidle.XXXXXX)
mkdir -p "$W/home/.ssh" "$W/run" /run/sshd
chmod 700 "$W/run"
ssh-keygen -q -t ed25519 -N '' -f "$W/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$W/home/.ssh/id_idle"
cp "$W/home/.ssh/id_idle.pub" "$W/authorized_keys"
SSHD_PORT=$(free_port); TARGET_PORT=$(free_port); KH_PORT=$(free_port)
write_sshd_config "$W/sshd_config" "$SSHD_PORT" "ClientAliveInterval 0" "LogLevel ERROR"
# sshd has its own /etc/hosts (a private mount namespace): the clusters' names resolve only there.
{ echo "127.0.0.1 localhost"; for i in $(seq "$N"); do echo "127.0.0.1 api.c$i.idle"; done; } >"$W/hosts"
unshare -m sh -c "mount --bind $W/hosts /etc/hosts && exec $SSHD -D -e -f $W/sshd_config" 2>"$W/sshd.log" &
PIDS+=($!)
python3 -m http.server --bind 127.0.0.1 "$TARGET_PORT" --directory "$W" >/dev/null 2>&1 &
PIDS+=($!)
wait_port "$SSHD_PORT" sshd "$W/sshd.log"
wait_port "$TARGET_PORT" "the target" /dev/null

echo "[127.0.0.1]:$SSHD_PORT $(cut -d' ' -f1,2 "$W/host_key.pub")" >"$W/home/.ssh/known_hosts"
: >"$W/home/.ssh/config"
for i in $(seq "$N"); do
  printf 'Host jump%s\n  HostName 127.0.0.1\n  Port %s\n' "$i" "$SSHD_PORT" >>"$W/home/.ssh/config"
done
cat >>"$W/home/.ssh/config" <<CFG
Host *
  User ${USER:-root}
  IdentityFile $W/home/.ssh/id_idle
  IdentityAgent none
  IdentitiesOnly yes
  UserKnownHostsFile $W/home/.ssh/known_hosts
  ServerAliveInterval $ALIVE
CFG
python3 - "$W" "$N" <<'PY'
import json, sys
w, n = sys.argv[1], int(sys.argv[2])
# Static base domains too: the jump hosts are aliases of 127.0.0.1, which anchor no dynamic name
# (issue 41, routing/src/anchor.rs).
json.dump([{"id": f"c-{i}", "tenant": "t",
            "facts": {"distribution": "openshift4", "jumphost": f"jump{i}", "jumphostDomains": f"c{i}.idle"},
            "dynamicFacts": {"openshiftBaseDomain": f"c{i}.idle"}} for i in range(1, n + 1)],
          open(f"{w}/inventory.json", "w"))
PY
KENV=(env -i HOME="$W/home" XDG_RUNTIME_DIR="$W/run" XDG_CONFIG_HOME="$W/config" XDG_CACHE_HOME="$W/cache"
  PATH="$PATH" USER="${USER:-root}" KHARON_CONTROL_SOCKET="$W/run/kharond.sock")

# measure NAME PID…: context switches per second and CPU ms per hour over WINDOW seconds.
tasks() { python3 - "$@" <<'PY'
import glob, sys
ctx = cpu = 0
for pid in sys.argv[1:]:
    for task in glob.glob(f"/proc/{pid}/task/*"):
        try:
            for line in open(f"{task}/status"):
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    ctx += int(line.split()[1])
            # Nanoseconds on a CPU (schedstat): utime/stime count 10 ms ticks, too coarse for an idle process.
            cpu += int(open(f"{task}/schedstat").read().split()[0]) / 1e9
        except OSError:
            pass
print(ctx, cpu)
PY
}
RESULTS=()
measure() {
  local name=$1; shift
  sleep 5 # let the connections that made the tunnels wind down
  read -r c0 u0 < <(tasks "$@")
  sleep "$WINDOW"
  read -r c1 u1 < <(tasks "$@")
  local line
  line=$(python3 -c "import sys; c0,u0,c1,u1,w=map(float,sys.argv[1:]); print(f'{(c1-c0)/w:.2f} {(u1-u0)/w*3600*1000:.0f}')" "$c0" "$u0" "$c1" "$u1" "$WINDOW")
  RESULTS+=("$name|$line")
  echo "  $name: $line (wakeups/s, CPU ms/h)"
}
through() { # PROXY-PORT HOST: one request through a SOCKS proxy
  curl -sS --max-time 20 -o /dev/null -x "socks5h://127.0.0.1:$1" "http://$2:$TARGET_PORT/"
}

echo "== kharond, no tunnel ($WINDOW s)"
"${KENV[@]}" "$BIN/kharond" --inventory "$W/inventory.json" --ssh-config "$W/home/.ssh/config" \
  --listen "127.0.0.1:$KH_PORT" 2>"$W/kharond.log" &
KHAROND=$!; PIDS+=($KHAROND)
wait_port "$KH_PORT" kharond "$W/kharond.log"
measure "kharond, no tunnel" "$KHAROND"

echo "== kharond, $N idle tunnels"
for i in $(seq "$N"); do through "$KH_PORT" "api.c$i.idle"; done
"${KENV[@]}" "$BIN/kharonctl" status | grep -c connected | xargs echo "  sessions connected:"
measure "kharond, $N idle tunnels" "$KHAROND"
kill "$KHAROND"; wait "$KHAROND" 2>/dev/null || true

echo "== ssh -D, 1 tunnel and $N tunnels"
SSH_PIDS=()
for i in $(seq "$N"); do
  port=$(free_port)
  env -i HOME="$W/home" PATH="$PATH" ssh -F "$W/home/.ssh/config" -N -D "127.0.0.1:$port" "jump$i" 2>"$W/ssh.$i.log" &
  SSH_PIDS+=($!); PIDS+=($!)
  wait_port "$port" "ssh -D" "$W/ssh.$i.log"
  through "$port" 127.0.0.1
done
measure "ssh -D, 1 tunnel" "${SSH_PIDS[0]}"
measure "ssh -D, $N tunnels" "${SSH_PIDS[@]}"

cat >"$W/section.py" <<'PY'
import os, sys, time
n, window, alive = sys.argv[1:4]
rows = [r.split("|") for r in sys.argv[4:]]
out = [
    "## Quiet idle",
    "",
    f"`N={n} WINDOW={window} ALIVE={alive} bench/idle.sh --update-doc`, {time.strftime('%Y-%m-%d')}, "
    f"{os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end. "
    "Wakeups are context switches of every thread over the window (a keepalive costs its timer and its "
    "reply: about 2 per tunnel per ServerAliveInterval); CPU is the threads' time on a CPU (schedstat), "
    "scaled to an hour. "
    f"Targets (issue 21): ≤ 0.2 wakeups/s with no tunnel; about one keepalive per tunnel per "
    f"ServerAliveInterval ({alive} s) with tunnels.",
    "",
    "| process, idle | wakeups/s | CPU ms per hour |",
    "|---|---|---|",
]
for name, figures in rows:
    w, cpu = figures.split()
    out.append(f"| {name} | {w} | {cpu} |")
print("\n".join(out))
PY
SECTION=$(python3 "$W/section.py" "$N" "$WINDOW" "$ALIVE" "${RESULTS[@]}")
echo
echo "$SECTION"
if [ "$UPDATE_DOC" = 1 ]; then
  python3 - "$ROOT/docs/benchmarks.md" "$SECTION" <<'PY'
import re, sys
path, section = sys.argv[1], sys.argv[2]
text = open(path).read()
block = f"<!-- idle.sh: begin -->\n{section}\n<!-- idle.sh: end -->"
if "<!-- idle.sh: begin -->" in text:
    text = re.sub(r"<!-- idle.sh: begin -->.*?<!-- idle.sh: end -->", lambda _: block, text, flags=re.S)
else:
    text = text.rstrip("\n") + "\n\n" + block + "\n"
open(path, "w").write(text)
PY
  echo "== docs/benchmarks.md: Quiet idle section updated"
fi
