#!/usr/bin/env python3
"""Fails when a public entry point of ckpt::Runtime (runtime/include/ckpt/ckpt.hpp) has no C twin, or a field
of ckpt::CheckpointStats none in C, Fortran or Python.

Parses the public member functions of class Runtime (each overload by its parameter types) and checks
them against TWINS below: every member must map to the C functions of ckpt/ckpt.h that do the same, or
to a reason why C has none. It fails on
  - a public member that TWINS does not list (a new entry point, or a new overload),
  - an entry of TWINS that is no longer a member (the table must stay true),
  - a C function named in TWINS that ckpt.h does not declare,
  - a function ckpt.h declares (CKPT_API) that neither docs/api-c-fortran.md nor docs/api-reader.md names,
  - a field of struct ckpt::CheckpointStats without a field of the same name in ckpt_checkpoint_stats
    (ckpt.h), in the Fortran type ckpt_checkpoint_stats and its bind(C) twin (fortran/ckpt.F90), in the
    ctypes struct CheckpointStatsC (python/ckpt/_lib.py) or in the namedtuple CheckpointStats
    (python/ckpt/runtime.py); a field there that C++ does not have; and the two structs laid over the C
    one (ctypes, Fortran bind(C)) in another order than ckpt.h's (their layout would differ).

    c_api_parity.py --source <repository root>       the check (ctest c_api_parity)
    c_api_parity.py --source <root> --self-test      shows that the check fails on a member without a twin,
                                                     a stale entry, a missing C function and each kind of
                                                     stats field gap
"""
import argparse
import os
import re
import sys
import tempfile

# Runtime member (name and parameter types, as normalised by members()) -> the C functions doing the
# same, or a string starting with "none:" saying why C has no twin.
TWINS = {
    "Runtime(CommRef, const Options&)": ["ckpt_create_handle", "ckpt_create_handle_options", "ckpt_create_fortran"],
    "~Runtime()": ["ckpt_free"],
    "status()": "none: ckpt_create returns the constructor's status and hands out no handle for a runtime that "
                "failed; every later call returns its own failure (ckpt_error_message says why)",
    "rank()": ["ckpt_rank"],
    "size()": ["ckpt_size"],
    "options()": ["ckpt_dir", "ckpt_options_yaml"],
    "device_name()": ["ckpt_device_name"],
    "protect(const std::string&, void*, DType, Dims)": ["ckpt_protect"],
    "protect(const std::string&, void*, DType, const Block&)": ["ckpt_protect_block"],
    "protect(const std::string&, void*, DType, const Joined&)": ["ckpt_protect_joined"],
    "protect_scalar(const std::string&, T*)": ["ckpt_protect_scalar"],
    "update(const std::string&, void*, Dims)": ["ckpt_update"],
    "update(const std::string&, void*, const Block&)": ["ckpt_update_block"],
    "update(const std::string&, void*, const Joined&)": ["ckpt_update_joined"],
    "protect(const std::string&, DType, const Scattered&)": ["ckpt_protect_scattered"],
    "update(const std::string&, const Scattered&)": ["ckpt_update_scattered"],
    "protect(const std::string&, DType, Source, SourceKind)": ["ckpt_protect_source"],
    "protect_or_update(const std::string&, void*, DType, Dims)": "none: a convenience over protect and update; C "
        "calls ckpt_update where it re-registers (ckpt_protect of a protected name is CKPT_INVALID_ARGUMENT "
        "naming it), so no capability is missing",
    "protect_or_update(const std::string&, void*, DType, const Block&)": "none: as protect_or_update(Dims)",
    "protect_or_update(const std::string&, void*, DType, const Joined&)": "none: as protect_or_update(Dims)",
    "protect_or_update(const std::string&, DType, const Scattered&)": "none: as protect_or_update(Dims); C calls "
        "ckpt_update_scattered where it re-registers",
    "set_optional(const std::string&, bool)": ["ckpt_set_optional"],
    "set_memory_selection(const std::string&, const MemorySelection&)": ["ckpt_set_memory_selection"],
    "set_restart_rows(const std::string&, std::vector<std::uint64_t>)": ["ckpt_set_restart_rows"],
    "set_restart_keys(const std::string&, const std::string&, std::vector<std::int64_t>)": ["ckpt_set_restart_keys"],
    "clear_restart_rows(const std::string&)": ["ckpt_clear_restart_rows"],
    "skipped_optional()": ["ckpt_skipped_optional"],
    "unprotect(const std::string&)": ["ckpt_unprotect"],
    "annotate(const std::string&, const std::string&, const std::string&)": ["ckpt_annotate"],
    "checkpoint(std::int64_t, void*)": ["ckpt_checkpoint"],
    "wait_all()": ["ckpt_wait_all"],
    "poll()": ["ckpt_poll"],
    "funneled()": ["ckpt_funneled"],
    "latest()": ["ckpt_latest"],
    "steps()": ["ckpt_steps"],
    "restart_level()": ["ckpt_restart_level"],
    "restart_index_bytes()": ["ckpt_restart_index_bytes"],
    "joined_rows(std::int64_t, const std::string&)": ["ckpt_joined_rows"],
    "restart(std::int64_t)": ["ckpt_restart_step"],
    "restart(std::int64_t, void*)": ["ckpt_restart_step_stream"],
    "restart()": ["ckpt_restart"],
    "restart(Newest, void*)": ["ckpt_restart_stream"],
    "restart_newest(void*)": ["ckpt_restart_stream"],  # deprecated alias of restart(ckpt::newest, stream)
    "inspect(std::int64_t)": ["ckpt_inspect"],
    "close()": ["ckpt_close"],
}


def strip_comments(text):
    """Comments and C++ attributes ([[deprecated("...")]], [[nodiscard]]): neither declares anything."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r"\[\[.*?\]\]", " ", text, flags=re.S)


def split_top(text, sep):
    """Splits `text` at `sep` outside (), <>, {} and []."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "(<{[":
            depth += 1
        elif ch in ")>}]":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def param_type(param):
    """`const std::string& name = x` -> `const std::string&`."""
    p = split_top(param, "=")[0].strip()
    p = re.sub(r"\s+", " ", p)
    p = re.sub(r"\s*([&*])\s*", r"\1 ", p).strip()
    tokens = p.split(" ")
    if len(tokens) > 1 and re.fullmatch(r"[A-Za-z_]\w*", tokens[-1]) and tokens[-2] not in ("const", "unsigned"):
        tokens = tokens[:-1]  # the parameter's name
    return re.sub(r"\s+([&*])", r"\1", " ".join(tokens)).strip()


def class_body(text, cls):
    m = re.search(r"\bclass\s+(?:CKPT_API\s+)?" + cls + r"\s*(?::[^{]*)?\{", text)
    if not m:
        raise SystemExit("c_api_parity: class %s not found" % cls)
    depth, i = 1, m.end()
    while depth:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return text[m.end():i - 1]


def members(header_text, cls="Runtime"):
    """The public member functions of `cls`, as 'name(type, type)' strings."""
    body = class_body(strip_comments(header_text), cls)
    # Inline bodies become ';' so that each declaration ends with one.
    flat, depth = "", 0
    for ch in body:
        if ch == "{":
            if depth == 0:
                flat += ";"
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0:
            flat += ch
    out, access = [], "private"
    for decl in flat.split(";"):
        decl = decl.strip()
        while True:  # access labels may precede a declaration
            m = re.match(r"(public|private|protected)\s*:(?!:)\s*", decl)
            if not m:
                break
            access = m.group(1)
            decl = decl[m.end():]
        if access != "public" or "(" not in decl or re.search(r"=\s*(delete|default)\s*$", decl):
            continue
        decl = re.sub(r"^template\s*<.*?>\s*", "", decl, flags=re.S)
        if re.match(r"(friend|using|typedef)\b", decl):
            continue
        m = re.search(r"(~?[A-Za-z_]\w*)\s*\(", decl)
        if not m or m.group(1) == "operator":
            continue
        start = m.end() - 1
        depth, i = 0, start
        while True:
            depth += {"(": 1, ")": -1}.get(decl[i], 0)
            if depth == 0:
                break
            i += 1
        params = decl[start + 1:i].strip()
        types = [param_type(p) for p in split_top(params, ",")] if params and params != "void" else []
        out.append("%s(%s)" % (m.group(1), ", ".join(types)))
    return out


def c_functions(header_text):
    # `CKPT_API int(ckpt_ticket_stats)(...)`: a name in parentheses, shadowed by a macro of the same name.
    return set(re.findall(r"CKPT_API\s+[^;(]*?\(?\b(ckpt_\w+)\)?\s*\(", strip_comments(header_text)))


def block(text, start_re, what):
    """The text between the match of `start_re` and the end of the block it opens (braces, or `end type`)."""
    m = re.search(start_re, text, flags=re.S | re.M)
    if not m:
        raise SystemExit("c_api_parity: %s not found" % what)
    if m.group(0).rstrip().endswith("{"):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        return text[m.end():i - 1]
    end = re.search(r"^\s*end\s+type\b", text[m.end():], flags=re.M | re.I)
    if not end:
        raise SystemExit("c_api_parity: the end of %s not found" % what)
    return text[m.end():m.end() + end.start()]


def stats_fields(hpp, h, fortran, py_lib, py_runtime):
    """The fields of each mirror of ckpt::CheckpointStats, in declaration order: {where: [names]}."""
    cxx = block(strip_comments(hpp), r"\bstruct\s+CheckpointStats\s*\{", "struct ckpt::CheckpointStats")
    c = block(strip_comments(h), r"typedef\s+struct\s+ckpt_checkpoint_stats\s*\{", "struct ckpt_checkpoint_stats")
    member = r"^\s*[\w:<> ]+?\b(\w+)\s*(?:=[^;]*)?;"
    f_text = re.sub(r"!.*", "", fortran)  # Fortran comments
    fortran_fields = lambda body: [n for line in body.splitlines() if "::" in line
                                   for n in re.findall(r"(\w+)\s*(?:=[^,]*)?(?:,|$)", line.split("::", 1)[1])]
    f_public = block(f_text, r"^\s*type\s*,\s*public\s*::\s*ckpt_checkpoint_stats\s*$", "Fortran ckpt_checkpoint_stats")
    f_bind = block(f_text, r"^\s*type\s*,\s*bind\(C\)\s*::\s*c_checkpoint_stats\s*$", "Fortran c_checkpoint_stats")
    m = re.search(r"class\s+CheckpointStatsC\(ctypes\.Structure\):.*?_fields_\s*=\s*\[(.*?)\]\n", py_lib,
                  flags=re.S)
    ctypes_body = m.group(1) if m else ""
    m = re.search(r'CheckpointStats\s*=\s*namedtuple\(\s*"CheckpointStats"\s*,\s*((?:"[^"]*"\s*)+)\)', py_runtime)
    named = " ".join(re.findall(r'"([^"]*)"', m.group(1))).split() if m else []
    return {
        "ckpt::CheckpointStats (ckpt.hpp)": re.findall(member, cxx, flags=re.M),
        "ckpt_checkpoint_stats (ckpt.h)": re.findall(member, c, flags=re.M),
        "Fortran type ckpt_checkpoint_stats (fortran/ckpt.F90)": fortran_fields(f_public),
        "Fortran type c_checkpoint_stats, bind(C) (fortran/ckpt.F90)": fortran_fields(f_bind),
        "CheckpointStatsC (python/ckpt/_lib.py)": re.findall(r'\(\s*"(\w+)"\s*,', ctypes_body),
        "namedtuple CheckpointStats (python/ckpt/runtime.py)": named,
    }


def check_stats(fields):
    """Problems of the mirrors of ckpt::CheckpointStats: a field missing, one C++ has not, an ABI order."""
    problems = []
    names = list(fields)
    cxx, c = fields[names[0]], fields[names[1]]
    if len(cxx) < 5:
        problems.append("parsed only %d fields of ckpt::CheckpointStats: the parser no longer understands ckpt.hpp"
                        % len(cxx))
    for where in names[1:]:
        got = fields[where]
        for f in cxx:
            if f not in got:
                problems.append("ckpt::CheckpointStats::%s has no counterpart in %s" % (f, where))
        for f in got:
            if f not in cxx:
                problems.append("%s has field %s, which ckpt::CheckpointStats does not" % (where, f))
    for where in (names[3], names[4]):  # laid over the C struct: same order, or another layout
        if fields[where] != c and sorted(fields[where]) == sorted(c):
            problems.append("%s declares the fields of ckpt_checkpoint_stats in another order (%s): its layout "
                            "differs from the C struct's" % (where, ", ".join(fields[where])))
    return problems


def check(root, hpp_text=None, h_text=None, twins=TWINS, texts=None):
    """The problems found (empty when the check passes). texts: replacements of other files, by path."""
    texts = texts or {}
    read = lambda rel: texts[rel] if rel in texts else open(os.path.join(root, rel), encoding="utf-8").read()
    hpp_text = hpp_text if hpp_text is not None else read("runtime/include/ckpt/ckpt.hpp")
    h_text = h_text if h_text is not None else read("runtime/include/ckpt/ckpt.h")
    docs = read("docs/api-c-fortran.md") + read("docs/api-reader.md")
    problems = []
    found = members(hpp_text)
    if len(found) < 10:
        problems.append("parsed only %d members of ckpt::Runtime: the parser no longer understands ckpt.hpp" %
                        len(found))
    declared = c_functions(h_text)
    for m in found:
        if m not in twins:
            problems.append("ckpt::Runtime::%s has no C twin: add one to ckpt/ckpt.h (and docs/api-c-fortran.md) "
                            "and map it in TWINS of %s, or record there why C needs none" %
                            (m, os.path.basename(__file__)))
    for key, twin in twins.items():
        if key not in found:
            problems.append("TWINS lists ckpt::Runtime::%s, which ckpt.hpp no longer declares" % key)
        if isinstance(twin, str):
            if not twin.startswith("none: ") or len(twin) < 20:
                problems.append("TWINS[%s]: a reason must start with 'none: ' and say why" % key)
            continue
        for f in twin:
            if f not in declared:
                problems.append("TWINS maps ckpt::Runtime::%s to %s, which ckpt/ckpt.h does not declare" % (key, f))
    for f in sorted(declared):
        if not re.search(r"\b%s\b" % f, docs):
            problems.append("%s (ckpt/ckpt.h) is documented in neither docs/api-c-fortran.md nor docs/api-reader.md" % f)
    problems += check_stats(stats_fields(hpp_text, h_text, read("fortran/ckpt.F90"), read("python/ckpt/_lib.py"),
                                         read("python/ckpt/runtime.py")))
    return found, problems


def self_test(root):
    """The check must fail on each kind of gap; returns the failures of this self-test."""
    read = lambda rel: open(os.path.join(root, rel), encoding="utf-8").read()
    hpp, h = read("runtime/include/ckpt/ckpt.hpp"), read("runtime/include/ckpt/ckpt.h")
    failures = []
    _, problems = check(root)
    if problems:
        failures.append("the real tree does not pass: " + "; ".join(problems))
    # A new public member without a twin.
    extra = hpp.replace("  Status close();", "  Status close();\n  /// New.\n  Status frobnicate(int times = 2);", 1)
    _, problems = check(root, hpp_text=extra)
    if not any("frobnicate(int)" in p and "no C twin" in p for p in problems):
        failures.append("a member without a twin was not reported: %s" % problems)
    # A new overload of an existing name.
    extra = hpp.replace("  Status close();", "  Status close();\n  Status restart(const std::string& tag);", 1)
    _, problems = check(root, hpp_text=extra)
    if not any("restart(const std::string&)" in p for p in problems):
        failures.append("a new overload was not reported: %s" % problems)
    # A private member is not an entry point.
    private = hpp.replace(" private:\n  std::unique_ptr<detail::RuntimeImpl> m_impl;",
                          " private:\n  Status hidden(int x);\n  std::unique_ptr<detail::RuntimeImpl> m_impl;", 1)
    if private == hpp:
        failures.append("self-test: could not find Runtime's private section")
    _, problems = check(root, hpp_text=private)
    if problems:
        failures.append("a private member was reported: %s" % problems)
    # A member removed while the table still lists it.
    fewer = re.sub(r"\n[^\n]*\bbool funneled\(\) const;", "\n", hpp, count=1)
    _, problems = check(root, hpp_text=fewer)
    if not any("funneled()" in p and "no longer" in p for p in problems):
        failures.append("a stale entry was not reported: %s" % problems)
    # A C twin removed from ckpt.h.
    fewer_c = h.replace("CKPT_API int ckpt_steps(", "int ckpt_steps_gone(", 1)
    _, problems = check(root, h_text=fewer_c)
    if not any("ckpt_steps, which ckpt/ckpt.h does not declare" in p for p in problems):
        failures.append("a missing C function was not reported: %s" % problems)
    # A new field of ckpt::CheckpointStats that no binding has.
    more = hpp.replace("  bool synced = false;\n", "  bool synced = false;\n  double frobnicate_s = 0;  ///< new\n", 1)
    if more == hpp:
        failures.append("self-test: could not find CheckpointStats::synced")
    _, problems = check(root, hpp_text=more)
    gaps = [p for p in problems if "CheckpointStats::frobnicate_s has no counterpart" in p]
    if len(gaps) != 5:
        failures.append("a C++ stats field missing from C, Fortran (2) and Python (2) gave %d of 5 reports: %s" %
                        (len(gaps), problems))
    # A field of the C struct dropped (here: renamed), as the struct was before synced was added.
    fewer_c = h.replace("  int synced; ", "  int synced_flag; ", 1)
    if fewer_c == h:
        failures.append("self-test: could not find ckpt_checkpoint_stats::synced in ckpt.h")
    _, problems = check(root, h_text=fewer_c)
    if not any("CheckpointStats::synced has no counterpart in ckpt_checkpoint_stats" in p for p in problems) or \
            not any("field synced_flag, which ckpt::CheckpointStats does not" in p for p in problems):
        failures.append("a C stats field missing (and one C++ lacks) was not reported: %s" % problems)
    # Python's namedtuple without a field.
    rt_py = read("python/ckpt/runtime.py")
    fewer_py = rt_py.replace('"staging_pinned_bytes synced")', '"synced")', 1)
    if fewer_py == rt_py:
        failures.append("self-test: could not find the namedtuple CheckpointStats in python/ckpt/runtime.py")
    _, problems = check(root, texts={"python/ckpt/runtime.py": fewer_py})
    if not any("staging_pinned_bytes has no counterpart in namedtuple CheckpointStats" in p for p in problems):
        failures.append("a Python stats field missing was not reported: %s" % problems)
    # The ctypes struct with two fields swapped: another layout than the C struct's.
    lib_py = read("python/ckpt/_lib.py")
    swapped = lib_py.replace('("redundancy_s", ctypes.c_double)', '("TMP", ctypes.c_double)', 1) \
        .replace('("redundancy_bytes", ctypes.c_uint64)', '("redundancy_s", ctypes.c_uint64)', 1) \
        .replace('("TMP", ctypes.c_double)', '("redundancy_bytes", ctypes.c_double)', 1)
    if swapped == lib_py:
        failures.append("self-test: could not find CheckpointStatsC's fields in python/ckpt/_lib.py")
    _, problems = check(root, texts={"python/ckpt/_lib.py": swapped})
    if not any("CheckpointStatsC" in p and "another order" in p for p in problems):
        failures.append("a ctypes struct in another order than the C struct was not reported: %s" % problems)
    # The Fortran bind(C) type without a field.
    f90 = read("fortran/ckpt.F90")
    fewer_f = f90.replace("    integer(c_int64_t) :: redundancy_bytes, staging_pinned_bytes\n",
                          "    integer(c_int64_t) :: redundancy_bytes\n", 1)
    if fewer_f == f90:
        failures.append("self-test: could not find c_checkpoint_stats's fields in fortran/ckpt.F90")
    _, problems = check(root, texts={"fortran/ckpt.F90": fewer_f})
    if not any("staging_pinned_bytes has no counterpart in Fortran type c_checkpoint_stats" in p for p in problems):
        failures.append("a Fortran bind(C) stats field missing was not reported: %s" % problems)
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, help="the repository root")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        failures = self_test(args.source)
        for f in failures:
            print("FAIL:", f)
        print("c_api_parity self-test: %s" % ("FAILED" if failures else "ok"))
        return 1 if failures else 0
    found, problems = check(args.source)
    for p in problems:
        print("FAIL:", p)
    twins = sum(1 for m in found if isinstance(TWINS.get(m), list))
    read = lambda rel: open(os.path.join(args.source, rel), encoding="utf-8").read()
    cxx_fields = next(iter(stats_fields(read("runtime/include/ckpt/ckpt.hpp"), read("runtime/include/ckpt/ckpt.h"),
                                        read("fortran/ckpt.F90"), read("python/ckpt/_lib.py"),
                                        read("python/ckpt/runtime.py")).values()))
    print("c_api_parity: %d fields of ckpt::CheckpointStats, each in C, Fortran and Python" % len(cxx_fields))
    print("c_api_parity: %d public members of ckpt::Runtime, %d with a C twin, %d with a reason: %s" %
          (len(found), twins, len(found) - twins, "FAILED" if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
