#!/usr/bin/env python3
"""Counts an application's checkpoint glue: the code lines between `ckpt-glue begin` and `ckpt-glue end`
marker comments.

A marker is a line holding only the comment `// ckpt-glue begin` (or `/* ckpt-glue begin */`, or in
Fortran `! ckpt-glue begin`), and likewise `end`. Between a begin and its end, every line that holds code
counts: blank lines, comment lines (`//`, `/* ... */` blocks and the lines inside them; Fortran `!`) do
not, and a line of code with a comment after it does. Regions may not nest and must be closed.

  tools/glue_lines.py apps/mini_amr                    # a folder: its C, C++ and Fortran sources
  tools/glue_lines.py --max 150 apps/amr_sedov/*.cpp   # exit status 1 when the total exceeds 150
  tools/glue_lines.py --list apps/mini_amr/main.cpp    # also print the lines counted
  tools/glue_lines.py --regions apps/amr_sedov         # also print each region's count

Prints one row per file (regions, glue lines) and the total. Exit status: 0; 1 when the total exceeds
--max; 2 on an error (a file that cannot be read, unbalanced markers, no marker in any file given).
Python 3 standard library only.
"""
import argparse
import os
import re
import sys

C_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu", ".h", ".hh", ".hpp", ".hxx")
FORTRAN_SUFFIXES = (".f", ".for", ".f90", ".f95", ".f03", ".f08")
MARKER = re.compile(r"^\s*(?://|/\*|!)\s*ckpt-glue\s+(begin|end)\s*(?:\*/)?\s*$")


class GlueError(Exception):
    pass


def is_fortran(path):
    return path.lower().endswith(FORTRAN_SUFFIXES)


def c_code(line, in_block):
    """The code of one C/C++ line once its comments are removed, and whether a /* */ block is still open
    at its end. String and character literals are skipped, so `"//"` in a string is code."""
    out = []
    i, n = 0, len(line)
    while i < n:
        if in_block:
            end = line.find("*/", i)
            if end < 0:
                return "".join(out), True
            i, in_block = end + 2, False
            out.append(" ")
            continue
        c = line[i]
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            in_block, i = True, i + 2
            continue
        if c in "\"'":
            j = i + 1
            while j < n and line[j] != c:
                j += 2 if line[j] == "\\" else 1
            out.append(line[i:j + 1])
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out), in_block


def fortran_code(line):
    """The code of one Fortran line once its `!` comment is removed (quotes respected)."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "!":
            return line[:i]
    return line


def count_file(path):
    """Returns the glue regions of one file: [(begin line, end line, [(line number, text) counted])]."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise GlueError(f"{path}: {e.strerror}")
    fortran = is_fortran(path)
    regions, region, in_block = [], None, False
    for number, line in enumerate(lines, 1):
        m = None if in_block else MARKER.match(line)
        if m:
            if m.group(1) == "begin":
                if region is not None:
                    raise GlueError(f"{path}:{number}: ckpt-glue begin inside the region opened at line {region[0]}")
                region = (number, [])
            else:
                if region is None:
                    raise GlueError(f"{path}:{number}: ckpt-glue end without a begin")
                regions.append((region[0], number, region[1]))
                region = None
            continue
        if fortran:
            code = fortran_code(line)
        else:
            code, in_block = c_code(line, in_block)
        if region is not None and code.strip():
            region[1].append((number, line))
    if region is not None:
        raise GlueError(f"{path}:{region[0]}: ckpt-glue begin without an end")
    return regions


def expand(paths):
    """Files as given; folders: their C, C++ and Fortran sources, recursively, in name order."""
    out = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs.sort()
                out += [os.path.join(root, f) for f in sorted(files)
                        if f.lower().endswith(C_SUFFIXES + FORTRAN_SUFFIXES)]
        else:
            out.append(p)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", help="source files or folders")
    ap.add_argument("--max", type=int, help="exit with status 1 when the total exceeds this")
    ap.add_argument("--list", action="store_true", help="print every line counted")
    ap.add_argument("--regions", action="store_true", help="print every region: its lines and glue lines")
    a = ap.parse_args(argv)
    rows, total, regions = [], 0, 0
    try:
        for path in expand(a.paths):
            found = count_file(path)
            n = sum(len(counted) for _, _, counted in found)
            rows.append((path, len(found), n))
            total += n
            regions += len(found)
            for begin, end, counted in found:
                if a.regions:
                    print(f"{path}:{begin}-{end}: {len(counted)} glue lines")
                if a.list:
                    for number, text in counted:
                        print(f"{path}:{number}: {text}")
    except GlueError as e:
        print(f"glue_lines: {e}", file=sys.stderr)
        return 2
    if regions == 0:
        print("glue_lines: no ckpt-glue markers in " + " ".join(a.paths), file=sys.stderr)
        return 2
    width = max([len("total")] + [len(p) for p, _, _ in rows])
    print(f"{'file':<{width}}  regions  glue lines")
    for path, r, n in rows:
        print(f"{path:<{width}}  {r:7d}  {n:10d}")
    print(f"{'total':<{width}}  {regions:7d}  {total:10d}")
    if a.max is not None and total > a.max:
        print(f"glue_lines: {total} glue lines, more than --max {a.max}", file=sys.stderr)
        return 1
    if a.max is not None:
        print(f"ok: {total} glue lines <= {a.max}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
