#!/usr/bin/env python3
"""Replaces one generated section of a markdown file, between
`<!-- NAME: written by WHO -->` and `<!-- end of NAME -->`, leaving the rest
(the hand-written history in docs/benchmarks.md) alone; appends the
section, markers included, when the file has none yet.

    from section import replace; replace(path, "redline", "bench/redline.py", text)
    bench/section.py FILE NAME WHO < text        (for shell scripts)
"""
import os
import sys


def markers(name, who):
    return f"<!-- {name}: written by {who} -->", f"<!-- end of {name} -->"


def replace(path, name, who, text):
    begin, end = markers(name, who)
    old = open(path).read() if os.path.exists(path) else ""
    section = f"{begin}\n\n{text.strip(chr(10))}\n\n{end}"
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        new = head + section + rest.split(end, 1)[1]
    else:
        new = old.rstrip("\n") + ("\n\n" if old else "") + section + "\n"
    with open(path, "w") as f:
        f.write(new)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: bench/section.py FILE NAME WHO < text")
    replace(sys.argv[1], sys.argv[2], sys.argv[3], sys.stdin.read())
