#!/usr/bin/env python3
"""Every relative link of the project's Markdown pages resolves: the file (or folder) exists inside the
source tree, and an anchor (`page.md#section`, `#section`) names a heading of its page, as GitHub spells
it. Links inside code blocks and inline code are not links; http(s) and mailto links are not checked.

  doc_links_test.py ROOT [PAGE...]    default: every tracked *.md file (git ls-files), else README.md,
                                      CONTRIBUTING.md, CHANGELOG.md, docs/*.md, apps/*/README.md
"""
import glob
import os
import re
import subprocess
import sys

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def strip_code(text):
    """The text without fenced code blocks and inline code spans (kept as blank lines, so line numbers hold)."""
    out, fence = [], None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1) == fence:
                fence = None
            out.append("")
            continue
        if m:
            fence = m.group(1)
            out.append("")
            continue
        out.append(re.sub(r"(`+)(?:(?!\1).)+?\1", "", line))
    return out


def anchors(path):
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as '-', -1, -2 for repeats."""
    seen, got = {}, set()
    for line in strip_code_headings(open(path, encoding="utf-8").read()):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))  # a link in a heading: its text
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        got.add(slug if n == 0 else f"{slug}-{n}")
    return got


def strip_code_headings(text):
    """Lines outside fenced code blocks (headings keep their inline code's text, as GitHub's anchors do)."""
    out, fence = [], None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fence:
            fence = None if m and m.group(1) == fence else fence
            continue
        if m:
            fence = m.group(1)
            continue
        out.append(line)
    return out


def pages(root):
    try:
        files = subprocess.run(["git", "-C", root, "ls-files", "*.md"], check=True, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True).stdout.split()
        if files:
            return files
    except (OSError, subprocess.CalledProcessError):
        pass
    found = ["README.md", "CONTRIBUTING.md", "CHANGELOG.md"] + sorted(glob.glob("docs/*.md", root_dir=root)) + \
        sorted(glob.glob("apps/*/README.md", root_dir=root))
    return [f for f in found if os.path.exists(os.path.join(root, f))]


def main():
    root = os.path.realpath(sys.argv[1])
    todo = sys.argv[2:] or pages(root)
    bad, checked = [], 0
    for page in todo:
        path = os.path.join(root, page)
        for no, line in enumerate(strip_code(open(path, encoding="utf-8").read()), 1):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:, ...
                    continue
                checked += 1
                file, _, anchor = target.partition("#")
                dest = os.path.realpath(os.path.join(os.path.dirname(path), file)) if file else path
                where = f"{page}:{no}: ({target})"
                if not (dest == root or dest.startswith(root + os.sep)):
                    bad.append(f"{where} points outside the source tree")
                elif not os.path.exists(dest):
                    bad.append(f"{where}: no such file {os.path.relpath(dest, root)}")
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    bad.append(f"{where}: no heading '#{anchor}' in {os.path.relpath(dest, root)}")
    for b in bad:
        print("FAIL:", b)
    print(f"{checked} relative links in {len(todo)} pages: " + ("all resolve" if not bad else f"{len(bad)} broken"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
