#!/usr/bin/env python3
"""No function of the workspace's non-test code is longer than MAX_LINES lines.

A function is counted from its `fn` line to its closing brace, comments and blank lines
included. Test code is left out: files named `tests.rs` or under a `tests/` folder, and
`#[cfg(test)]` modules. A long function is cut into steps named for what they do.

Prints each function over the limit with its file, line and length; exits 1 if there is any.
Usage: .ci/function_length.py [DIR …]   (default: every crate of the workspace but the tests')
"""

import os
import re
import sys

MAX_LINES = 100
DIRS = [
    "common/src",
    "routing/src",
    "config/src",
    "proto/src",
    "kharond/src",
    "kharond/ssh-config/src",
    "kharond/ssh/src",
    "kharond/relay/src",
    "kharonctl/src",
    "bench/client",
]
FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+(\w+)")


def code_of(text):
    """Blanks out comments, strings and char literals (keeping line breaks), so braces count."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif re.match(r'r#*"', text[i:i + 8]):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = '"' + hashes
            j = text.find(end, i + 2 + len(hashes))
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]):
            m = re.match(r"'(\\.|[^\\'])'", text[i:i + 4])
            out.append(" " * len(m.group(0)))
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def test_ranges(lines):
    """Line ranges of `#[cfg(test)] mod … { … }` blocks."""
    ranges = []
    for i, line in enumerate(lines):
        if re.match(r"\s*#\[cfg\(test\)\]", line):
            for k in range(i + 1, min(i + 3, len(lines))):
                if re.match(r"\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", lines[k]):
                    end = block_end(lines, k)
                    ranges.append((i, end))
                    break
    return ranges


def block_end(lines, start):
    """The line of the brace that closes the first `{` at or after `start`."""
    depth, opened = 0, False
    for k in range(start, len(lines)):
        for ch in lines[k]:
            if ch == "{":
                depth += 1
                opened = True
            elif ch == "}":
                depth -= 1
                if opened and depth == 0:
                    return k
        if not opened and lines[k].rstrip().endswith(";"):
            return k
    return len(lines) - 1


def long_functions(path):
    with open(path, encoding="utf-8") as f:
        lines = code_of(f.read()).split("\n")
    skip = test_ranges(lines)
    found = []
    for i, line in enumerate(lines):
        m = FN.match(line)
        if not m or any(a <= i <= b for a, b in skip):
            continue
        end = block_end(lines, i)
        length = end - i + 1
        if length > MAX_LINES:
            found.append((i + 1, m.group(6), length))
    return found


def main():
    dirs = sys.argv[1:] or DIRS
    problems = []
    for top in dirs:
        for root, subdirs, files in os.walk(top):
            subdirs[:] = [d for d in subdirs if d != "tests"]
            for name in sorted(files):
                if not name.endswith(".rs") or name == "tests.rs" or name.endswith("_tests.rs"):
                    continue
                path = os.path.join(root, name)
                for line, fn, length in long_functions(path):
                    problems.append(f"{path}:{line}: fn {fn} is {length} lines (at most {MAX_LINES})")
    for p in problems:
        print(p)
    if problems:
        print(f"function_length: {len(problems)} function(s) over {MAX_LINES} lines; cut them into named steps",
              file=sys.stderr)
        return 1
    print("function_length: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
