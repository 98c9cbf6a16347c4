#!/usr/bin/env python3
"""vendor/russh is the russh crate published on crates.io plus vendor/russh.patch, byte for byte.

    .ci/vendored_russh.py            check it (CI): fetch the published .crate named in
                                     vendor/russh.toml, verify its sha256, unpack it, apply the
                                     patch, and compare every file with vendor/russh
    .ci/vendored_russh.py --diff     write vendor/russh.patch from vendor/russh (after editing it)
    .ci/vendored_russh.py --unpack   replace vendor/russh by the release vendor/russh.toml names,
                                     with the patch applied (moving to another release: bump the
                                     version and sha256 there first; vendor/README.md)

The .crate comes from cargo's own download cache when a file there has the pinned checksum, else
from static.crates.io (the address crates.io's index gives for downloads). A checksum that differs
stops everything: the pin is what makes "published" mean one exact tree.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENDOR = ROOT / "vendor"
TREE = VENDOR / "russh"
PATCH = VENDOR / "russh.patch"
PIN = VENDOR / "russh.toml"
DOWNLOAD = "https://static.crates.io/crates/russh/russh-{version}.crate"


def fail(message):
    print(f"vendored russh: {message}", file=sys.stderr)
    sys.exit(1)


def pinned():
    pin = tomllib.loads(PIN.read_text())
    return pin["version"], pin["sha256"]


def published_crate(version, sha256):
    """The .crate's bytes, checked against the pin."""
    name = f"russh-{version}.crate"
    registry = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo")) / "registry" / "cache"
    for cached in sorted(registry.glob(f"*/{name}")):
        data = cached.read_bytes()
        if hashlib.sha256(data).hexdigest() == sha256:
            return data
    url = DOWNLOAD.format(version=version)
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            data = response.read()
    except OSError as e:
        fail(f"cannot fetch {url}: {e}")
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        fail(f"{url} has sha256 {digest}, vendor/russh.toml pins {sha256}")
    return data


def unpack(data, into):
    """The crate's files under `into` (its `russh-VERSION/` prefix stripped)."""
    crate = into / "russh.crate"
    crate.write_bytes(data)
    with tarfile.open(crate) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if len(parts) < 2 or ".." in parts or not (member.isfile() or member.isdir()):
                fail(f"unexpected entry in the .crate: {member.name!r}")
            member.name = str(Path(*parts[1:]))
        tar.extractall(into / "tree", filter="data")
    crate.unlink()
    return into / "tree"


def apply_patch(tree):
    # git apply outside a repository patches the current directory; it refuses fuzz and offsets
    # nothing silently (a hunk that does not apply exactly is an error).
    result = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", str(PATCH)], cwd=tree, capture_output=True, text=True
    )
    if result.returncode != 0:
        fail(f"vendor/russh.patch does not apply to the published crate:\n{result.stderr}")


def files(tree):
    return {p.relative_to(tree) for p in tree.rglob("*") if p.is_file()}


def compare(expected, actual):
    want, have = files(expected), files(actual)
    problems = [f"missing from vendor/russh: {p}" for p in sorted(want - have)]
    problems += [f"not in the published crate nor the patch: vendor/russh/{p}" for p in sorted(have - want)]
    for p in sorted(want & have):
        if (expected / p).read_bytes() != (actual / p).read_bytes():
            problems.append(f"differs from published crate + patch: vendor/russh/{p}")
    return problems


def write_patch(pristine):
    # `diff -ruN` with fixed labels, so the patch names files as `a/PATH` and `b/PATH` and
    # carries no timestamps.
    lines = []
    for p in sorted(files(pristine) | files(TREE)):
        old, new = pristine / p, TREE / p
        if old.is_file() and new.is_file() and old.read_bytes() == new.read_bytes():
            continue
        result = subprocess.run(
            ["diff", "-u", "--label", f"a/{p}", "--label", f"b/{p}",
             str(old) if old.is_file() else "/dev/null", str(new) if new.is_file() else "/dev/null"],
            capture_output=True, text=True,
        )
        if result.returncode not in (0, 1):
            fail(result.stderr)
        lines.append(f"diff -u a/{p} b/{p}\n" + result.stdout)
    PATCH.write_text("".join(lines))
    changed = sum(1 for line in PATCH.read_text().splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---"))
    print(f"vendored russh: wrote {PATCH.relative_to(ROOT)} ({len(lines)} files, {changed} lines changed)")


def main():
    version, sha256 = pinned()
    with tempfile.TemporaryDirectory() as tmp:
        pristine = unpack(published_crate(version, sha256), Path(tmp))
        if "--diff" in sys.argv[1:]:
            write_patch(pristine)
            return
        apply_patch(pristine)
        if "--unpack" in sys.argv[1:]:
            shutil.rmtree(TREE, ignore_errors=True)
            shutil.copytree(pristine, TREE)
            print(f"vendored russh: vendor/russh is russh {version} with vendor/russh.patch")
            return
        problems = compare(pristine, TREE)
    if problems:
        fail("\n".join(problems) + "\n(.ci/vendored_russh.py --diff after editing vendor/russh; vendor/README.md)")
    print(f"vendored russh: vendor/russh is russh {version} (sha256 {sha256[:12]}…) plus vendor/russh.patch")


if __name__ == "__main__":
    main()
