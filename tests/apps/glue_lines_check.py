#!/usr/bin/env python3
"""Checks tools/glue_lines.py on small files: what counts as a glue line (code between the markers, a line
of code with a comment after it, comment markers inside strings), what does not (blank lines, `//` and
`/* */` comments and the lines inside a block, Fortran `!` comments, a marker inside a block comment,
code outside the regions), and the exit statuses (--max, unbalanced markers, no marker at all)."""
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "glue_lines.py")

CPP = r"""int outside;  // ckpt-glue begin (code on the line: not a marker)
// ckpt-glue begin
/* a block
   // ckpt-glue end   (inside the block: not a marker)
*/
int a = 1;  // counted

   // a comment line
/* one */ int b; /* two */
const char* s = "// in a string";
const char* t = "/* in a string";
/*
 */ int c;
char q = '\'';
// ckpt-glue end
int also_outside;
  /* ckpt-glue begin */
  x();
  // ckpt-glue end
"""
# Counted: a, b, s, t, c, q (6) and x() (1).

F90 = """! ckpt-glue begin
call ckpt_protect(rt, "a!b", x, ierr) ! counted
! a comment
print *, 'c ! d'
! ckpt-glue end
y = 1
"""


def glue(*args):
    p = subprocess.run([sys.executable, SCRIPT] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    return p.returncode, p.stdout


def main():
    ok = True

    def check(cond, msg, out=""):
        nonlocal ok
        print(("ok:   " if cond else "FAIL: ") + msg)
        if not cond:
            print(out)
        ok &= cond

    with tempfile.TemporaryDirectory() as d:
        cpp, f90 = os.path.join(d, "a.cpp"), os.path.join(d, "b.F90")
        with open(cpp, "w") as f:
            f.write(CPP)
        with open(f90, "w") as f:
            f.write(F90)
        rc, out = glue("--list", cpp)
        counted = [line.split(": ", 1)[1] for line in out.splitlines() if line.startswith(cpp + ":")]
        want = ["int a = 1;  // counted", "/* one */ int b; /* two */", 'const char* s = "// in a string";',
                'const char* t = "/* in a string";', " */ int c;", "char q = '\\'';", "  x();"]
        check(rc == 0 and counted == want, f"C++: the {len(want)} code lines of 2 regions are counted", out)
        rc, out = glue(d)
        total = [line.split() for line in out.splitlines() if line.startswith("total")]
        check(rc == 0 and total == [["total", "3", "9"]], "a folder: C++ and Fortran files, 3 regions, 9 lines", out)
        rc, out = glue("--max", "9", d)
        check(rc == 0, "--max 9 with 9 lines: exit status 0", out)
        rc, out = glue("--max", "8", d)
        check(rc == 1 and "more than --max 8" in out, "--max 8 with 9 lines: exit status 1", out)
        bad = os.path.join(d, "bad.cpp")
        for text, words in [("// ckpt-glue begin\nint x;\n", "begin without an end"),
                            ("int x;\n// ckpt-glue end\n", "end without a begin"),
                            ("// ckpt-glue begin\n// ckpt-glue begin\n// ckpt-glue end\n", "inside the region"),
                            ("int x;\n", "no ckpt-glue markers")]:
            with open(bad, "w") as f:
                f.write(text)
            rc, out = glue(bad)
            check(rc == 2 and words in out, f"exit status 2: {words}", out)
        rc, out = glue(os.path.join(d, "missing.cpp"))
        check(rc == 2, "a file that cannot be read: exit status 2", out)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
