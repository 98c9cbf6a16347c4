#!/usr/bin/env python3
"""The workspace's crate boundaries, checked.

The libraries both binaries use are cut by what they are, and point one way:
`kharon-common` (common/: errors, text made safe to show, files, paths, secrets; no kharon
trade), `kharon-routing` (routing/: the inventory, its trust bounds and the routing table,
pure), `kharon-config` (config/: the settings, which add hosts and anchors to the routing
model's bounds) and `kharon-proto` (proto/: the gRPC control API, which speaks of the routing
model's refusals and changes). kharond's subsystems that have a boundary worth keeping are crates
of their own, so that the compiler keeps it: `kharon-ssh-config` (kharond/ssh-config, reading
ssh_config as ssh does), `kharon-ssh` (kharond/ssh, the SSH engine, which reads ssh_config
through it) and `kharon-relay` (kharond/relay, moving bytes). This checks what the compiler
alone would not:

1. The engine crates' `lib.rs` declares every module private (`mod x;`, never `pub mod x;`):
   their public surface is what `lib.rs` re-exports, and no `use` of their internals can compile
   outside them.
2. Dependencies point one way (ALLOWED below, a package's only kharon dependencies).
   kharon-common depends on no kharon crate; kharon-routing on kharon-common (the routing model
   knows no settings, no control API); kharon-config on kharon-common and kharon-routing;
   kharon-proto on kharon-routing only (no settings cross the control API as types).
   kharon-relay depends on no kharon crate; kharon-ssh-config on kharon-common only (it knows
   nothing of sessions or routing); kharon-ssh on kharon-ssh-config, kharon-relay and
   kharon-common only; kharonctl on the four libraries and none of kharond's crates (SSH stays
   in the daemon).
3. kharond's client side (kharond/src/proxy) never names the SSH engine: a routed upstream is a
   stream that routing dialled, like a direct one.

Prints each violation with its file and line; exits 1 if there is any.
"""

import json
import os
import re
import subprocess
import sys

ENGINE_CRATES = {
    "kharon-ssh-config": "kharond/ssh-config/src/lib.rs",
    "kharon-ssh": "kharond/ssh/src/lib.rs",
    "kharon-relay": "kharond/relay/src/lib.rs",
}
# package -> the kharon crates it may depend on (normal dependencies)
ALLOWED = {
    "kharon-common": set(),
    "kharon-routing": {"kharon-common"},
    "kharon-config": {"kharon-common", "kharon-routing"},
    "kharon-proto": {"kharon-routing"},
    "kharon-relay": set(),
    "kharon-ssh-config": {"kharon-common"},
    "kharon-ssh": {"kharon-ssh-config", "kharon-relay", "kharon-common"},
    "kharonctl": {"kharon-common", "kharon-routing", "kharon-config", "kharon-proto"},
}
# folders that must not name a crate
MUST_NOT_NAME = [("kharond/src/proxy", "kharon_ssh")]
KHARON = re.compile(r"^kharon(-|$)|^kharond$|^kharonctl$")


def private_modules(problems):
    for crate, lib in ENGINE_CRATES.items():
        with open(lib, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if re.match(r"\s*pub(\([^)]*\))?\s+mod\s+\w+\s*;", line) and "pub(crate)" not in line:
                    problems.append(f"{lib}:{number}: {crate} declares a public module; re-export items instead")


def dependencies(problems):
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
            capture_output=True, text=True, check=True,
        ).stdout
    )
    for package in meta["packages"]:
        name = package["name"]
        if name not in ALLOWED:
            continue
        for dep in package["dependencies"]:
            if dep.get("kind") not in (None, "normal"):
                continue
            if KHARON.match(dep["name"]) and dep["name"] != "kharon-workspace-hack" and dep["name"] not in ALLOWED[name]:
                problems.append(f"{package['manifest_path']}: {name} depends on {dep['name']}")


def names(problems):
    for folder, crate in MUST_NOT_NAME:
        for root, _dirs, files in os.walk(folder):
            for file in sorted(files):
                if not file.endswith(".rs"):
                    continue
                path = os.path.join(root, file)
                with open(path, encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        code = re.sub(r"//.*", "", line)
                        if re.search(rf"\b{crate}\b", code):
                            problems.append(f"{path}:{number}: {folder} names {crate}")


def main():
    problems = []
    private_modules(problems)
    dependencies(problems)
    names(problems)
    for problem in problems:
        print(problem)
    if problems:
        print(f"crate_boundaries: {len(problems)} violation(s)", file=sys.stderr)
        return 1
    print("crate_boundaries: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
