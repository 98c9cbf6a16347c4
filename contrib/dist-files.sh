#!/usr/bin/env bash
# The files a package installs besides the two binaries, made from the built binaries so they
# match them exactly:
#   OUT_DIR/man/man1/*.1       kharond(1), kharonctl(1) and one page per kharonctl subcommand
#   OUT_DIR/systemd/*          contrib/systemd's user units with @KHAROND@ set to PREFIX/bin/kharond
#                              and no SSH_AUTH_SOCK line: a package cannot know the user's agent
#                              (contrib/README.md says how users add it)
#   OUT_DIR/completions/*      contrib/completions' bash, zsh (_kharonctl) and fish loaders (they
#                              ask the installed kharonctl for its script when first used)
# Used by the .deb (kharond/Cargo.toml) and the Arch PKGBUILD.
#
# Usage: contrib/dist-files.sh BIN_DIR OUT_DIR [PREFIX]     PREFIX defaults to /usr
set -euo pipefail

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: $0 BIN_DIR OUT_DIR [PREFIX]   (e.g. $0 target/release target/dist /usr)" >&2
  exit 2
fi
bin_dir=$1
out_dir=$2
prefix=${3:-/usr}
contrib=$(cd "$(dirname "$0")" && pwd)

for b in kharond kharonctl; do
  if [ ! -x "$bin_dir/$b" ]; then
    echo "$0: $bin_dir/$b is missing: build first (cargo build --release --locked)" >&2
    exit 1
  fi
done

mkdir -p "$out_dir/man/man1" "$out_dir/systemd" "$out_dir/completions"
"$bin_dir/kharonctl" man-pages --output "$out_dir/man/man1" >/dev/null
"$bin_dir/kharond" --man-pages "$out_dir/man/man1" >/dev/null

for unit in kharond.service kharond.socket kharond-control.socket; do
  {
    echo "# Installed by the kharon package. To change it: systemctl --user edit ${unit}"
    # The source's header speaks of service-install; the agent line needs a per-user value.
    sed -e '1,2{/^#/d}' \
        -e '/^# the ssh-agent of the shell/d' \
        -e '/@SSH_AUTH_SOCK@/d' \
        -e "s|@KHAROND@|${prefix}/bin/kharond|g" \
        "$contrib/systemd/$unit"
  } > "$out_dir/systemd/$unit"
  if grep -n '@[A-Z_]*@' "$out_dir/systemd/$unit" >&2; then
    echo "$0: a placeholder is left in $unit (contrib/README.md lists them)" >&2
    exit 1
  fi
done

cp "$contrib/completions/kharonctl.bash" "$contrib/completions/_kharonctl" \
   "$contrib/completions/kharonctl.fish" "$out_dir/completions/"
