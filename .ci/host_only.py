#!/usr/bin/env python3
"""Checks (or with --write, rewrites) the dev profile's list of build-time-only packages.

The dev profile compiles every dependency at opt-level 1 (`[profile.dev.package."*"]`): the tests'
SSH crypto is unusably slow unoptimised. That rule also reaches the packages that only ever run at
build time (proc macros such as serde_derive and syn, build scripts' dependencies such as
prost-build): cargo ranks `package."*"` above `build-override` (the Cargo book, "Profiles",
"Overrides"), so `build-override` alone cannot lower them. Optimising them costs minutes of a
fresh CI build (a third of its compile time went to them) and buys nothing measurable: they run
for seconds in all. So each is named with opt-level 0 in `Cargo.toml`, between the markers below.

Build-time-only: in the graph of every workspace member on every target with build dependencies
(`cargo tree -e normal,dev,build --target all`), but not in it without proc macros and build
dependencies (`-e normal,dev,no-proc-macro`). Exit 1 when Cargo.toml's list differs.
"""

import re
import subprocess
import sys
from pathlib import Path

TOML = Path("Cargo.toml")
BEGIN = "# --- build-time-only packages, written by .ci/host_only.py --write ---\n"
END = "# --- end of build-time-only packages ---\n"


def names(edges):
    out = subprocess.run(
        ["cargo", "tree", "--workspace", "--target", "all", "--prefix", "none", "-e", edges],
        capture_output=True, text=True, check=True,
    ).stdout
    return {re.sub(r" v.*", "", line).strip() for line in out.splitlines() if line.strip()}


def section():
    host_only = sorted(names("normal,dev,build") - names("normal,dev,no-proc-macro"))
    body = "".join(f'[profile.dev.package.{name}]\nopt-level = 0\n' for name in host_only)
    return BEGIN + body + END


def main():
    text = TOML.read_text()
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < 0:
        print(f"host_only: {TOML} lacks the markers", file=sys.stderr)
        return 1
    current = text[start : end + len(END)]
    wanted = section()
    if "--write" in sys.argv[1:]:
        TOML.write_text(text[:start] + wanted + text[end + len(END) :])
        return 0
    if current != wanted:
        print(f"host_only: the build-time-only list in {TOML} is out of date: "
              "run `python3 .ci/host_only.py --write` and commit it", file=sys.stderr)
        return 1
    print("host_only: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
