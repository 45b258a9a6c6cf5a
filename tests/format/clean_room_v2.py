"""A clean-room reader of ckpt's version-2 (two-level, incremental) checkpoint directories.

Written from docs/format.md alone ("Directory layout", "Index file (`index`), version 1", "Version 2
index: two levels", "Version 2 index: incremental references"), without reading ckpt's C++ sources, so
that a test can check that the page describes what the library writes.

    blocks = read_checkpoint("<root>/ckpt.<step>")   # {(variable name, rank): payload bytes}

Python standard library and numpy only. Hashes: the `xxhash` Python module is not assumed. When the
system's libxxhash (xxHash 0.8, an implementation independent of ckpt) can be loaded through ctypes,
every checksum the page defines on the objects read is checked (root footer, catalog XXH3-128 and
footer, catalog entries, sub-indices, directories, pieces' XXH3-128, blocks' XXH3-64). Without it no
hash is checked, but every structural rule below still is. Not checked in either case: min/max
statistics and `uniform` against the data, data-file headers and their zero padding (what only
`ckpt verify` checks), the series layout (kind-1 references are refused as unsupported).

Every violation raises `Corrupt` (format.md's `corrupt`).
"""
import ctypes
import ctypes.util
import os
import stat
import struct

MAX_INDEX = 4 << 30
DTYPE_SIZE = {1: 1, 2: 1, 3: 2, 4: 2, 5: 4, 6: 4, 7: 8, 8: 8, 9: 4, 10: 8, 11: 1}
GLOBAL, JOINED, LOCAL, SCALAR = 1, 3, 0, 2


class Corrupt(Exception):
    pass


def need(cond, msg):
    if not cond:
        raise Corrupt(msg)


# ---- optional hashes (system libxxhash through ctypes) ----
class _U128(ctypes.Structure):
    _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]


def _load_xxhash():
    for name in (ctypes.util.find_library("xxhash"), "libxxhash.so.0", "libxxhash.so"):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            lib.XXH3_64bits.restype = ctypes.c_uint64
            lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
            lib.XXH3_128bits.restype = _U128
            lib.XXH3_128bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
            return lib
        except (OSError, AttributeError):
            continue
    return None


_XXH = _load_xxhash()
HASHES = _XXH is not None


def xxh64(b):
    return _XXH.XXH3_64bits(bytes(b), len(b))


def xxh128(b):
    r = _XXH.XXH3_128bits(bytes(b), len(b))
    return r.low64, r.high64


def check64(data, want, what):
    if HASHES:
        need(xxh64(data) == want, f"{what}: XXH3-64 mismatch")


# ---- files ----
def open_regular(path):
    """A descriptor of `path`, a regular file opened O_NOFOLLOW | O_NONBLOCK (format.md, "Complete"), and
    its size."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise Corrupt(f"{path}: cannot open ({e.strerror})")
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise Corrupt(f"{path}: not a regular file")
    return fd, st.st_size


def read_regular(path, limit=MAX_INDEX):
    """The whole of `path` (open_regular), at most `limit` bytes."""
    fd, size = open_regular(path)
    try:
        need(size <= limit, f"{path}: larger than {limit} bytes")
        chunks, left = [], size
        while left:
            c = os.read(fd, left)
            if not c:
                break
            chunks.append(c)
            left -= len(c)
        return b"".join(chunks)
    finally:
        os.close(fd)


def pread_regular(path, offset, length):
    """`length` bytes at `offset` of `path` (open_regular), all inside the file."""
    fd, size = open_regular(path)
    try:
        need(offset + length <= size, f"{path}: [{offset}, {offset + length}) beyond its {size} bytes")
        out = os.pread(fd, length, offset)
        need(len(out) == length, f"{path}: short read")
        return out
    finally:
        os.close(fd)


# ---- a bounds-checked little-endian cursor ----
class Cur:
    def __init__(self, buf, what):
        self.b, self.p, self.what = memoryview(buf), 0, what

    def take(self, n):
        need(self.p + n <= len(self.b), f"{self.what}: truncated at byte {self.p} (needs {n} more)")
        v = self.b[self.p:self.p + n]
        self.p += n
        return v

    def _u(self, fmt, n):
        return struct.unpack("<" + fmt, self.take(n))[0]

    def u8(self): return self._u("B", 1)
    def u32(self): return self._u("I", 4)
    def u64(self): return self._u("Q", 8)
    def i64(self): return self._u("q", 8)
    def f64(self): return self._u("d", 8)

    def zero32(self, field):
        need(self.u32() == 0, f"{self.what}: non-zero {field}")

    def zero64(self, field):
        need(self.u64() == 0, f"{self.what}: non-zero {field}")

    def str(self, limit=1 << 20):
        n = self.u32()
        need(n <= limit, f"{self.what}: string of {n} bytes (limit {limit})")
        return bytes(self.take(n))

    def end(self):
        need(self.p == len(self.b), f"{self.what}: {len(self.b) - self.p} trailing bytes")


def plain_name(name, what):
    need(name and b"/" not in name and name not in (b".", b".."), f"{what}: bad file name {name!r}")
    return name.decode()


def var_name_ok(name):
    if not name or len(name) > 255 or name.startswith(b"/"):
        return False
    ok = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./-")
    if any(c not in ok for c in name):
        return False
    return all(part not in (b"", b".", b"..") for part in name.split(b"/"))


def attrs(c, what, distinct):
    n = c.u32()
    need(n <= 4096, f"{what}: {n} attributes")
    out = [(c.str(), c.str()) for _ in range(n)]
    if distinct:
        need(len({k for k, _ in out}) == n, f"{what}: an attribute key twice")
    return out


def framed(buf, magic, version, what, flags_allowed=0):
    """The version-1 header and footer (with `version` in both); returns (flags, body bytes)."""
    need(len(buf) >= 56, f"{what}: {len(buf)} bytes, shorter than header and footer")
    need(bytes(buf[0:8]) == magic, f"{what}: magic {bytes(buf[0:8])!r}, expected {magic!r}")
    ver, flags = struct.unpack_from("<II", buf, 8)
    need(ver == version, f"{what}: header version {ver}, expected {version}")
    need(flags & ~flags_allowed == 0, f"{what}: flags {flags:#x}")
    off, blen, bsum, fver, fres = struct.unpack_from("<QQQII", buf, len(buf) - 40)
    need(bytes(buf[-8:]) == b"CKPTEND1", f"{what}: footer magic {bytes(buf[-8:])!r}")
    need(fver == version, f"{what}: footer version {fver}")
    need(fres == 0, f"{what}: footer reserved {fres}")
    need(off == 16, f"{what}: body_offset {off}")
    need(blen == len(buf) - 56, f"{what}: body_length {blen}, object of {len(buf)} bytes")
    body = buf[16:16 + blen]
    check64(body, bsum, f"{what} body")
    return flags, body


# ---- root index ----
def parse_root(buf, what):
    flags, body = framed(buf, b"CKPTINDX", 2, what, flags_allowed=1)
    c = Cur(body, what)
    r = {"flags": flags, "step": c.i64(), "nranks": c.u32(), "id": c.u64(), "created": c.f64()}
    need(r["nranks"] > 0, f"{what}: nranks 0")
    r["transport"] = c.str(256)
    r["attrs"] = attrs(c, what, distinct=False)
    r["token"] = c.u64()
    need(r["token"] != 0, f"{what}: token 0")
    W, rule, g = c.u32(), c.u32(), c.u32()
    c.zero32("writer reserved")
    need(1 <= W <= r["nranks"], f"{what}: W = {W} with {r['nranks']} ranks")
    need(rule in (0, 1, 2), f"{what}: writer rule {rule}")
    if rule == 0:
        need(W == r["nranks"] and g == 0, f"{what}: rule 0 with W {W}, g {g}")
    elif rule == 1:
        need(g > 0 and W == -(-r["nranks"] // g), f"{what}: rule 1 with g {g}, W {W}")
    else:
        need(g == 0, f"{what}: rule 2 with g {g}")
    r.update(W=W, rule=rule, g=g)
    r["cat_off"], r["cat_len"], r["cat_lo"], r["cat_hi"] = c.u64(), c.u64(), c.u64(), c.u64()
    r["base"] = c.i64()
    need(0 <= r["base"] <= r["step"], f"{what}: base step {r['base']} outside [0, {r['step']}]")
    n_refs = c.u32()
    refs = []
    for _ in range(n_refs):
        kind = c.u32()
        c.zero32("REFSUM zero")
        s, rid = c.i64(), c.u64()
        c.zero64("REFSUM zero")
        need(kind in (0, 1), f"{what}: REFSUM kind {kind}")
        if kind == 0:
            need(r["base"] <= s < r["step"], f"{what}: REFSUM step {s} outside [{r['base']}, {r['step']})")
        else:
            need(rid == 0, f"{what}: kind-1 REFSUM with id {rid}")
        refs.append((kind, s, rid))
    need(len(set(refs)) == len(refs), f"{what}: REFSUM list not deduplicated")
    r["refs"] = refs
    if not refs:
        need(r["base"] == r["step"], f"{what}: no references but base step {r['base']} != step")
    n_vars = c.u32()
    need(n_vars <= 1 << 28, f"{what}: {n_vars} variables")
    vs = []
    for i in range(n_vars):
        vw = f"{what}: variable {i}"
        name = c.str(255)
        need(var_name_ok(name), f"{vw}: bad name {name!r}")
        v = {"name": name.decode(), "dtype": c.u8(), "kind": c.u8(), "uniform": c.u8()}
        need(c.u8() == 0, f"{vw}: VAR reserved")
        need(v["dtype"] in DTYPE_SIZE, f"{vw}: dtype {v['dtype']}")
        need(v["kind"] in (0, 1, 2, 3), f"{vw}: kind {v['kind']}")
        need(v["uniform"] in (0, 1), f"{vw}: uniform {v['uniform']}")
        nd = c.u32()
        need(nd <= 16, f"{vw}: ndim {nd}")
        if v["kind"] == SCALAR:
            need(nd == 0, f"{vw}: scalar with ndim {nd}")
        if v["kind"] == JOINED:
            need(nd >= 1, f"{vw}: joined with ndim 0")
        v["ndim"] = nd
        v["shape"] = [c.u64() for _ in range(nd)] if v["kind"] in (GLOBAL, JOINED) else None
        if v["shape"] is not None:
            total = DTYPE_SIZE[v["dtype"]]
            for e in v["shape"]:
                total *= e
            need(total < 1 << 64, f"{vw}: global shape overflows")
        v["attrs"] = attrs(c, vw, distinct=True)
        vflags = c.u8()
        need(vflags & ~1 == 0, f"{vw}: VAR2 flags {vflags:#x}")
        need(bytes(c.take(7)) == bytes(7), f"{vw}: VAR2 zero bytes")
        v["min"], v["max"], v["n_blocks"], v["bytes"] = c.u64(), c.u64(), c.u64(), c.u64()
        if not vflags & 1:
            need(v["min"] == 0 and v["max"] == 0, f"{vw}: min/max without flag bit 0")
        v["entries"] = c.u32()
        c.zero32("directory zero")
        v["dir_off"], v["dir_len"], v["dir_sum"] = c.u64(), c.u64(), c.u64()
        need(v["entries"] <= 4096, f"{vw}: {v['entries']} directory entries")
        if v["kind"] in (LOCAL, SCALAR):
            need(v["entries"] == 0, f"{vw}: local/scalar with a directory")
        if v["entries"] == 0:
            need(v["dir_off"] == v["dir_len"] == v["dir_sum"] == 0, f"{vw}: empty directory not all 0")
        else:
            need(v["dir_len"] == v["entries"] * (8 + 16 * nd), f"{vw}: directory length {v['dir_len']}")
        vs.append(v)
    need(len({v["name"] for v in vs}) == len(vs), f"{what}: a variable name twice")
    r["vars"] = vs
    c.end()
    return r


def open_root(ckdir, step):
    what = f"{ckdir}/index"
    r = parse_root(read_regular(os.path.join(ckdir, "index")), what)
    need(r["step"] == step, f"{what}: names step {r['step']}, directory is of step {step}")
    return r


def dir_step(ckdir):
    name = os.path.basename(os.path.normpath(ckdir))
    need(name.startswith("ckpt."), f"{ckdir}: not a ckpt.<step> directory")
    s = name[5:]
    need(s.isdigit() and s.isascii() and (s == "0" or s[0] != "0") and len(s) <= 19 and int(s) < 1 << 63,
         f"{ckdir}: {name!r} is not a canonical step name")
    return int(s)


# ---- catalog ----
def parse_catalog(ckdir, r):
    what = f"{ckdir}/catalog"
    raw = read_regular(os.path.join(ckdir, "catalog"))
    need(r["cat_off"] == 0, f"{what}: directory layout with catalog offset {r['cat_off']}")
    need(r["cat_off"] + r["cat_len"] <= len(raw), f"{what}: root says {r['cat_len']} bytes, file has {len(raw)}")
    buf = raw[r["cat_off"]:r["cat_off"] + r["cat_len"]]
    if HASHES:
        need(xxh128(buf) == (r["cat_lo"], r["cat_hi"]), f"{what}: XXH3-128 differs from the root's")
    _, body = framed(buf, b"CKPTCATL", 2, what)
    c = Cur(body, what)
    step, cid, token, W = c.i64(), c.u64(), c.u64(), c.u32()
    c.zero32("catalog reserved")
    need((step, cid, token, W) == (r["step"], r["id"], r["token"], r["W"]),
         f"{what}: step/id/token/W {(step, cid, token, W)} disagree with the root")
    writers = []
    for w in range(W):
        e = bytes(c.take(40))
        off, ln, ssum, nr, esum = struct.unpack("<QQQQQ", e)
        if HASHES:
            need(xxh64(e[:32] + struct.pack("<QQ", token, w)) == esum, f"{what}: writer entry {w} checksum")
        writers.append({"off": off, "len": ln, "sum": ssum, "ranks": nr})
    rank_map = None
    if r["rule"] == 2:
        need(c.u32() == r["nranks"], f"{what}: rank map size differs from nranks")
        rank_map = [c.u32() for _ in range(r["nranks"])]
        need(all(x < W for x in rank_map), f"{what}: rank map names a writer >= W")
    dirs_start = 16 + c.p  # first byte a directory may use, counted from the catalog's first byte
    dirs = {}
    for i, v in enumerate(r["vars"]):
        if not v["entries"]:
            continue
        vw = f"{what}: directory of {v['name']}"
        # "u64 offset, u64 length (in the catalog, from its first byte)"; "A directory lies in the
        # catalog's body after the writer entries and the rank map".
        need(dirs_start <= v["dir_off"] and v["dir_off"] + v["dir_len"] <= 16 + len(body),
             f"{vw}: [{v['dir_off']}, +{v['dir_len']}) outside the catalog body's directory area")
        d = buf[v["dir_off"]:v["dir_off"] + v["dir_len"]]
        check64(d, v["dir_sum"], vw)
        dc, nd, ents, prev_end = Cur(d, vw), v["ndim"], [], 0
        for _ in range(v["entries"]):
            first, n = dc.u32(), dc.u32()
            start = [dc.u64() for _ in range(nd)]
            count = [dc.u64() for _ in range(nd)]
            need(n >= 1 and first + n <= W, f"{vw}: writer range [{first}, +{n}) with W {W}")
            need(first >= prev_end, f"{vw}: writer ranges overlap or are unsorted")
            prev_end = first + n
            need(all(s + k <= e for s, k, e in zip(start, count, v["shape"])), f"{vw}: box outside the global shape")
            ents.append((first, n, start, count))
        dc.end()
        dirs[i] = ents
    return writers, rank_map, dirs


# ---- sub-index ----
def parse_subindex(ckdir, r, w, ent):
    what = f"{ckdir}/index.{w}"
    raw = read_regular(os.path.join(ckdir, f"index.{w}"))
    need(ent["off"] == 0, f"{what}: directory layout with offset {ent['off']}")
    need(ent["len"] <= len(raw), f"{what}: catalog says {ent['len']} bytes, file has {len(raw)}")
    buf = raw[:ent["len"]]
    check64(buf, ent["sum"], what)
    flags, body = framed(buf, b"CKPTSUBX", 2, what, flags_allowed=1)
    need(not flags & 1 or r["flags"] & 1, f"{what}: pieces flag without the root's bit 0")
    c = Cur(body, what)
    hdr = (c.i64(), c.u64(), c.u64(), c.u32(), c.u32(), c.u32())
    need(hdr == (r["step"], r["id"], r["token"], w, r["W"], r["nranks"]),
         f"{what}: step/id/token/w/W/nranks {hdr} disagree with the root")
    n_ranks = c.u32()
    ranks = [c.u32() for _ in range(n_ranks)]
    need(all(a < b for a, b in zip(ranks, ranks[1:])), f"{what}: ranks not ascending")
    need(all(x < r["nranks"] for x in ranks), f"{what}: rank >= nranks")
    need(n_ranks == ent["ranks"], f"{what}: holds {n_ranks} ranks, its catalog entry says {ent['ranks']}")
    if r["rule"] == 0:
        need(ranks == [w], f"{what}: rule 0 sub-index with ranks {ranks}")
    elif r["rule"] == 1:
        g = r["g"]
        need(ranks == list(range(w * g, min((w + 1) * g, r["nranks"]))), f"{what}: rule 1 ranks {ranks}")
    n_files = c.u32()
    need(n_files <= 1 << 24, f"{what}: {n_files} files")
    files = []
    for _ in range(n_files):
        name = plain_name(c.str(4096), what)
        wr, nb = c.u32(), c.u64()
        need(wr < r["nranks"], f"{what}: FILE writer {wr}")
        files.append((name, wr, nb))
    n_refs = c.u32()
    refs = []
    for _ in range(n_refs):
        kind = c.u32()
        c.zero32("REF zero")
        s, rid = c.i64(), c.u64()
        name = plain_name(c.str(4096), what)
        need(kind in (0, 1), f"{what}: REF kind {kind}")
        need(kind == 1 or r["base"] <= s < r["step"], f"{what}: REF step {s} outside [{r['base']}, {r['step']})")
        need((kind, s, rid) in r["refs"], f"{what}: REF {(kind, s, rid)} not in the root's list")
        refs.append((kind, s, rid, name))
    n_blocks = c.u64()
    need(n_blocks < 1 << 32, f"{what}: {n_blocks} blocks")
    blocks, any_pieces = [], False
    for b in range(n_blocks):
        bw = f"{what}: block {b}"
        var, rank, fi, bflags, off, ln = c.u32(), c.u32(), c.u32(), c.u32(), c.u64(), c.u64()
        need(var < len(r["vars"]), f"{bw}: var {var}")
        need(rank in ranks, f"{bw}: rank {rank} not one of the sub-index's {ranks}")
        need(fi < n_files, f"{bw}: file {fi}")
        need(bflags & ~3 == 0, f"{bw}: flags {bflags:#x}")
        need(off + ln < 1 << 64, f"{bw}: offset + length overflows")
        v = r["vars"][var]
        nd = v["ndim"]
        start = [c.u64() for _ in range(nd)]
        count = [c.u64() for _ in range(nd)]
        elems = 1
        for k in count:
            elems *= k
        need(ln == elems * DTYPE_SIZE[v["dtype"]], f"{bw}: length {ln} != product(count) x dtype size")
        if v["kind"] == GLOBAL:
            need(all(s + k <= e for s, k, e in zip(start, count, v["shape"])), f"{bw}: outside the global shape")
        elif v["kind"] == JOINED:
            need(all(s == 0 and k == e for s, k, e in zip(start[1:], count[1:], v["shape"][1:])),
                 f"{bw}: joined block not whole rows")
        else:
            need(all(s == 0 for s in start), f"{bw}: non-zero start")
        bmin, bmax, bsum = c.u64(), c.u64(), c.u64()
        if not bflags & 1:
            need(bmin == 0 and bmax == 0, f"{bw}: min/max without flag bit 0")
        pieces = None
        if bflags & 2:
            need(flags & 1, f"{bw}: pieces in a sub-index without flag bit 0")
            need(r["flags"] & 1, f"{bw}: pieces in a checkpoint whose root has no bit 0")
            any_pieces = True
            lg = c.u32()
            c.zero32("piece-size zero")
            need(16 <= lg <= 24, f"{bw}: log2 piece size {lg}")
            need(off == 0, f"{bw}: pieced block with offset {off}")
            P = 1 << lg
            pieces = []
            for i in range(-(-ln // P)):
                ref = c.u32()
                c.zero32("PIECE zero")
                poff, lo, hi = c.u64(), c.u64(), c.u64()
                need(ref <= n_refs, f"{bw}: piece {i} ref {ref} beyond {n_refs} REFs")
                plen = min((i + 1) * P, ln) - i * P
                need(poff + plen < 1 << 64, f"{bw}: piece {i} offset overflows")
                pieces.append((ref, poff, plen, lo, hi))
            pieces = (P, pieces)
        blocks.append({"var": var, "rank": rank, "file": fi, "flags": bflags, "off": off, "len": ln,
                       "start": start, "count": count, "sum": bsum, "pieces": pieces})
    c.end()
    return {"flags": flags, "ranks": ranks, "files": files, "refs": refs, "blocks": blocks,
            "any_pieces": any_pieces}


# ---- a whole checkpoint ----
def load(ckdir):
    """Parse and validate root, catalog and every sub-index of ckpt.<step> (no payload is read)."""
    step = dir_step(ckdir)
    r = open_root(ckdir, step)
    writers, rank_map, dirs = parse_catalog(ckdir, r)
    subs = [parse_subindex(ckdir, r, w, writers[w]) for w in range(r["W"])]
    seen = {}
    for w, s in enumerate(subs):
        for rk in s["ranks"]:
            need(rk not in seen, f"{ckdir}: rank {rk} in sub-indices {seen.get(rk)} and {w}")
            seen[rk] = w
            if r["rule"] == 2:
                need(rank_map[rk] == w, f"{ckdir}: rank map sends rank {rk} to {rank_map[rk]}, it is in {w}")
    need(len(seen) == r["nranks"], f"{ckdir}: ranks {sorted(set(range(r['nranks'])) - set(seen))} in no sub-index")
    # Files are one list by name across the checkpoint: the same FILE record wherever listed.
    byname = {}
    for s in subs:
        for f in s["files"]:
            need(byname.setdefault(f[0], f) == f, f"{ckdir}: FILE {f[0]} listed differently by two sub-indices")
    used = set()
    for s in subs:
        used.update((k, st, i) for k, st, i, _ in s["refs"])
    # "every checkpoint or segment a sub-index refers to ... a reader accepts a root listing more"
    need(used <= set(r["refs"]), f"{ckdir}: sub-indices refer to {used - set(r['refs'])} the root does not list")
    # One block per (variable, rank); per-variable totals equal the root's; global blocks disjoint;
    # joined rows tile in rank order; every block of a variable lies in a directory box of its writer.
    per = {}
    for w, s in enumerate(subs):
        for b in s["blocks"]:
            key = (b["var"], b["rank"])
            need(key not in per, f"{ckdir}: two blocks of variable {b['var']} rank {b['rank']}")
            per[key] = (w, b)
    for i, v in enumerate(r["vars"]):
        bl = sorted((rk, wb) for (vi, rk), wb in per.items() if vi == i)
        need(len(bl) == v["n_blocks"], f"{ckdir}: {v['name']}: {len(bl)} blocks, root says {v['n_blocks']}")
        need(sum(b["len"] for _, (_, b) in bl) == v["bytes"], f"{ckdir}: {v['name']}: bytes differ from the root's")
        if v["kind"] == JOINED:
            row = 0
            for _, (_, b) in bl:
                need(b["start"][0] == row, f"{ckdir}: {v['name']}: joined rows do not tile in rank order")
                row += b["count"][0]
            need(row == v["shape"][0], f"{ckdir}: {v['name']}: joined rows end at {row}, not {v['shape'][0]}")
        if v["kind"] == GLOBAL:
            boxes = [b for _, (_, b) in bl if all(b["count"])]
            for a in range(len(boxes)):
                for c2 in range(a + 1, len(boxes)):
                    x, y = boxes[a], boxes[c2]
                    need(not all(xs < ys + yc and ys < xs + xc for xs, xc, ys, yc in
                                 zip(x["start"], x["count"], y["start"], y["count"])),
                         f"{ckdir}: {v['name']}: global blocks overlap")
        if v["kind"] in (GLOBAL, JOINED):
            ents = dirs.get(i, [])
            for _, (w, b) in bl:
                inside = any(f <= w < f + n and all(s0 <= s and s + k <= s0 + k0 for s, k, s0, k0 in
                                                    zip(b["start"], b["count"], st, ct))
                             for f, n, st, ct in ents)
                need(inside, f"{ckdir}: {v['name']}: writer {w}'s block lies in no directory box of its range")
    return {"dir": ckdir, "root": r, "subs": subs, "per": per}


_stored_cache = {}


def stored_extents(ckdir):
    """{file name: set of (offset, length)} of the bytes a checkpoint itself stored (not references)."""
    key = os.path.realpath(ckdir)
    if key not in _stored_cache:
        ck = load(ckdir)
        out = {}
        for s in ck["subs"]:
            for b in s["blocks"]:
                name = s["files"][b["file"]][0]
                if b["pieces"] is None:
                    out.setdefault(name, set()).add((b["off"], b["len"]))
                else:
                    for ref, poff, plen, _, _ in b["pieces"][1]:
                        if ref == 0:
                            out.setdefault(name, set()).add((poff, plen))
        _stored_cache[key] = (ck["root"]["id"], out)
    return _stored_cache[key]


def read_checkpoint(ckdir, stats=None):
    """{(variable name, rank): payload bytes} of ckpt.<step>, references resolved and checked.

    `stats`, if a dict, receives counts: pieces stored here and pieces read from other steps."""
    ck = load(ckdir)
    r, root_dir = ck["root"], os.path.dirname(os.path.normpath(ckdir))
    if stats is not None:
        stats.setdefault("stored", 0)
        stats.setdefault("referred", 0)
    out = {}
    for (vi, rk), (w, b) in ck["per"].items():
        s = ck["subs"][w]
        own = os.path.join(ckdir, s["files"][b["file"]][0])
        bw = f"{ckdir}: {r['vars'][vi]['name']} rank {rk}"
        if b["pieces"] is None:
            data = pread_regular(own, b["off"], b["len"]) if b["len"] else b""
        else:
            parts = []
            for i, (ref, poff, plen, lo, hi) in enumerate(b["pieces"][1]):
                if ref == 0:
                    path = own
                    if stats is not None:
                        stats["stored"] += 1
                else:
                    kind, st, rid, name = s["refs"][ref - 1]
                    need(kind == 0, f"{bw}: piece {i}: kind-1 (series) references are not supported here")
                    other = os.path.join(root_dir, f"ckpt.{st}")
                    # "valid only while ckpt.<step>/index is complete and has that checkpoint id"
                    oid, ext = stored_extents(other)
                    need(oid == rid, f"{bw}: piece {i}: ckpt.{st} has id {oid:#x}, the REF says {rid:#x}")
                    # depth one: the bytes referred to were stored there, not themselves a reference
                    need(any(o <= poff and poff + plen <= o + n for o, n in ext.get(name, ())),
                         f"{bw}: piece {i}: {name}[{poff}, +{plen}) is not bytes ckpt.{st} stored")
                    path = os.path.join(other, name)
                    if stats is not None:
                        stats["referred"] += 1
                piece = pread_regular(path, poff, plen)
                if HASHES:
                    need(xxh128(piece) == (lo, hi), f"{bw}: piece {i}: XXH3-128 mismatch")
                parts.append(piece)
            data = b"".join(parts)
        check64(data, b["sum"], bw)
        out[(r["vars"][vi]["name"], rk)] = data
    return out


if __name__ == "__main__":
    import sys
    for d in sys.argv[1:]:
        st = {}
        got = read_checkpoint(d, st)
        print(d, {k: len(v) for k, v in sorted(got.items())}, st, "hashes" if HASHES else "no hashes")
