# Helpers shared by the bench scripts (sourced, not run). Processes the script starts go into
# PIDS; they and the work directory `W` are removed on exit, after which each function named in
# EXIT_HOOKS runs (bench/netns_link.sh removes its namespaces so).

PIDS=()
EXIT_HOOKS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -z "${W:-}" ] || rm -rf "$W"
  for h in "${EXIT_HOOKS[@]}"; do "$h"; done
}
trap cleanup EXIT

# A loopback port nobody listens on right now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Path of a program also looked for in sbin (not on a normal user's PATH), or nothing.
find_tool() { command -v "$1" 2>/dev/null || { [ -x "/usr/sbin/$1" ] && echo "/usr/sbin/$1"; } || true; }

# use_kharond SCRIPT: KHAROND is the kharond binary to measure, this tree's release build unless the
# caller named another (e.g. one built from another commit); anything but an executable file ends
# SCRIPT at once, by name.
use_kharond() {
  KHAROND=${KHAROND:-$PWD/target/release/kharond}
  [ -x "$KHAROND" ] || { echo "$1: KHAROND=$KHAROND is not an executable file" >&2; exit 2; }
}

# wait_port PORT WHAT LOG: waits up to 10 s for a listener; else names it and shows its log.
wait_port() {
  for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done
  echo "$2 is not listening on 127.0.0.1:$1 after 10 s; its log ($3):" >&2
  tail -n 20 "$3" >&2 || true
  exit 1
}

# write_sshd_config FILE PORT [OPTION…]: a bench jump host's sshd_config on 127.0.0.1:PORT: key-only
# login with $W's host_key and authorized_keys, TCP forwarding allowed; each further argument is
# one more line ("LogLevel ERROR").
write_sshd_config() {
  local file=$1 port=$2
  shift 2
  printf '%s\n' "Port $port" "ListenAddress 127.0.0.1" "HostKey $W/host_key" "PidFile none" \
    "AuthorizedKeysFile $W/authorized_keys" "StrictModes no" "UsePAM no" "PasswordAuthentication no" \
    "KbdInteractiveAuthentication no" "PermitRootLogin prohibit-password" "AllowTcpForwarding yes" \
    "$@" >"$file"
}

# bench_keys: $W/host_key (every bench sshd's), the client key $W/home/.ssh/id_bench and the
# authorized_keys that lets it in; /run/sshd, which sshd insists on.
bench_keys() {
  mkdir -p "$W/home/.ssh" /run/sshd
  ssh-keygen -q -t ed25519 -N '' -f "$W/host_key"
  ssh-keygen -q -t ed25519 -N '' -f "$W/home/.ssh/id_bench"
  cp "$W/home/.ssh/id_bench.pub" "$W/authorized_keys"
}

# ssh_config_defaults USER: the `Host *` block both clients (kharond and `ssh -D`) share, appended
# to $W/home/.ssh/config: the bench key only, no agent, the bench's known_hosts.
ssh_config_defaults() {
  printf '%s\n' "Host *" "  User $1" "  IdentityFile $W/home/.ssh/id_bench" "  IdentityAgent none" \
    "  IdentitiesOnly yes" "  UserKnownHostsFile $W/home/.ssh/known_hosts" >> "$W/home/.ssh/config"
}
