#!/usr/bin/env python3
"""Import cycles between the modules of each crate (kharond and its crates, kharonctl, and the
libraries both use: common, routing, config, proto).

A module is one source file. There is an edge A -> B when A names something in B: a `use` item or
a `crate::`/`super::`/`self::` path in code. A `mod b;` declaration alone is not an edge, and test
modules (`tests.rs`, `#[cfg(test)] mod tests { … }`) are left out: a test reaching into its parent
is what it is for. A path is attributed to the deepest module it names (`crate::ssh::pool::Pool` ->
ssh::pool), so a facade that re-exports a child (`pub use pool::Pool` in ssh/mod.rs) depends on that
child, and a child using the facade's own items depends on the facade: that is a cycle too.

Prints each cycle (strongly connected component of more than one module) with the lines that make
its edges, and exits 1 if there is any; `--graph` also prints every edge.
Usage: .ci/module_cycles.py [--graph] [CRATE_SRC_DIR …]   (default: CRATES)
"""

import os
import re
import sys

CRATES = [
    "kharond/src", "kharond/ssh-config/src", "kharond/ssh/src", "kharond/relay/src", "kharonctl/src",
    "common/src", "routing/src", "config/src", "proto/src",
]
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def module_path(src, path):
    rel = os.path.relpath(path, src)[: -len(".rs")].split(os.sep)
    if rel in (["main"], ["lib"]):
        return ()
    if rel[-1] == "mod":
        rel = rel[:-1]
    return tuple(rel)


def strip(text):
    """Drops comments, strings and the inline test module, keeping line numbers."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r'r#*"(?:.|\n)*?"#*', lambda m: "\n" * m.group(0).count("\n"), text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', lambda m: '""' + "\n" * m.group(0).count("\n"), text, flags=re.S)
    lines = []
    for line in text.split("\n"):
        lines.append(re.sub(r"//.*", "", line))
    out = []
    skipping = False
    for i, line in enumerate(lines):
        if re.match(r"\s*#\[cfg\(test\)\]", line):
            following = " ".join(lines[i + 1 : i + 3])
            if re.match(r"\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", following):
                skipping = True
        out.append("" if skipping else line)
    return out


def expand_use(tree):
    """`a::{b, c::{self, D}}` -> [[a, b], [a, c], [a, c, D]]."""
    # `as NAME` first: with the white space gone, `x as y` would read as one segment `xasy`.
    tree = re.sub(r"\s+as\s+" + IDENT, "", tree)
    tree = re.sub(r"\s+", "", tree)
    results = []

    def walk(prefix, s):
        depth, parts, cur = 0, [], ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        for part in parts:
            m = re.match(r"^((?:" + IDENT + r"::)*)\{(.*)\}$", part)
            if m:
                head = [p for p in m.group(1).split("::") if p]
                walk(prefix + head, m.group(2))
            else:
                segs = [p for p in part.split("::") if p]
                segs = [p for p in segs if p != "*"]
                if segs == ["self"]:
                    segs = []
                results.append(prefix + segs)

    walk([], tree)
    return results


def resolve(current, segs, modules, children):
    """The deepest known module named by `segs`, seen from module `current`, or None."""
    if not segs:
        return None
    if segs[0] == "crate":
        base, rest = (), segs[1:]
    elif segs[0] in ("super", "self"):
        base, rest = current, segs
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                base = base[:-1]
            rest = rest[1:]
    elif segs[0] in children.get(current, ()):
        base, rest = current, segs
    else:
        return None  # another crate, std, or a local name
    best = base if base in modules else None
    cur = base
    for seg in rest:
        cur = cur + (seg,)
        if cur in modules:
            best = cur
        else:
            break
    return best


def analyse(src):
    files = {}
    for root, _dirs, names in os.walk(src):
        for name in names:
            if name.endswith(".rs") and name != "tests.rs":
                path = os.path.join(root, name)
                files[module_path(src, path)] = path
    modules = set(files)
    children = {}
    for mod in modules:
        if mod:
            children.setdefault(mod[:-1], set()).add(mod[-1])
    edges = {}
    for mod, path in files.items():
        with open(path, encoding="utf-8") as f:
            lines = strip(f.read())
        text = "\n".join(lines)
        # Local names for modules: `use crate::http;` lets code say `http::connect::judge`.
        aliases = {}
        for m in re.finditer(r"\buse\s+([^;]+);", text):
            line = text.count("\n", 0, m.start()) + 1
            for segs in expand_use(m.group(1)):
                target = resolve(mod, segs, modules, children)
                if target is not None and target != mod:
                    edges.setdefault((mod, target), f"{path}:{line}")
                if target is not None and segs and target and target[-1] == segs[-1]:
                    aliases[segs[-1]] = target
        local = set(aliases) | set(children.get(mod, ()))
        pattern = r"(?<![A-Za-z0-9_:])((?:crate|super|self|" + "|".join(map(re.escape, local or {"crate"})) + r")(?:::" + IDENT + r")+)"
        for m in re.finditer(pattern, text):
            if re.search(r"\buse\s+[^;]*$", text[: m.start()][-200:]):
                continue  # inside a `use` item, handled above
            line = text.count("\n", 0, m.start()) + 1
            segs = m.group(1).split("::")
            if segs[0] in aliases:
                segs = ["crate", *aliases[segs[0]], *segs[1:]]
            target = resolve(mod, segs, modules, children)
            if target is not None and target != mod:
                edges.setdefault((mod, target), f"{path}:{line}")
    return modules, edges


def sccs(nodes, edges):
    graph = {n: [] for n in nodes}
    for a, b in edges:
        graph[a].append(b)
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def connect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for n in sorted(nodes):
        if n not in index:
            connect(n)
    return out


def name(mod):
    return "::".join(mod) or "(crate root)"


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    show_graph = "--graph" in sys.argv
    found = 0
    for src in args or CRATES:
        modules, edges = analyse(src)
        cycles = sccs(modules, edges)
        print(f"{src}: {len(modules)} modules, {len(edges)} edges, {len(cycles)} cycle(s)")
        if show_graph:
            for (a, b), where in sorted(edges.items()):
                print(f"  {name(a)} -> {name(b)}  ({where})")
        for comp in cycles:
            found += 1
            members = set(comp)
            print("  cycle: " + ", ".join(name(m) for m in comp))
            for (a, b), where in sorted(edges.items()):
                if a in members and b in members:
                    print(f"    {name(a)} -> {name(b)}  ({where})")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
