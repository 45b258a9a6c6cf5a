// Format v2 index codec: root index, catalog, sub-index, directories, and the conversion from and to the
// one-level Index. Little-endian only, as the v1 codec (base/format.cpp), whose records it reuses.
#include "base/index_v2.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "base/bytes.hpp"
#include "base/store.hpp"  // var_stats

namespace ckpt::detail {
namespace {

constexpr char kRootMagic[8] = {'C', 'K', 'P', 'T', 'I', 'N', 'D', 'X'};
constexpr char kCatalogMagic[8] = {'C', 'K', 'P', 'T', 'C', 'A', 'T', 'L'};
constexpr char kSubMagic[8] = {'C', 'K', 'P', 'T', 'S', 'U', 'B', 'X'};
constexpr char kEndMagic[8] = {'C', 'K', 'P', 'T', 'E', 'N', 'D', '1'};
constexpr std::uint32_t kSubFlagPieces = 1;  // sub-index header flags bit 0: it has pieces
constexpr std::uint8_t kVarFlagStats = 1;    // VAR2 flags bit 0: min/max present
/// The smallest object: header and footer around an empty body.
constexpr std::uint64_t kMinObjectBytes = kObjectHeaderBytes + kObjectFooterBytes;
/// Fixed bytes of a VAR2 after the version-1 VAR (flags .. directory checksum), and its smallest size.
constexpr std::size_t kVar2TailBytes = 8 + 8 + 8 + 8 + 8 + 4 + 4 + 8 + 8 + 8;
constexpr std::size_t kMinVar2Bytes = 16 + kVar2TailBytes;
constexpr std::size_t kMinRefBytes = 4 + 4 + 8 + 8 + 4;  // a REF with an empty name (refused, but counted so)

Status corrupt(const std::string& what) { return Status(Code::corrupt, what); }
Status bad_arg(const std::string& what) { return Status(Code::invalid_argument, "split_index: " + what); }

std::string num(std::uint64_t v) { return std::to_string(v); }

/// Header, then the body the caller writes, then footer(): every object is framed the same way.
ByteWriter open_object(const char (&magic)[8], std::uint32_t flags) {
  ByteWriter w;
  w.raw(magic, 8);
  w.put<std::uint32_t>(kIndexV2Version);
  w.put<std::uint32_t>(flags);
  return w;
}

std::vector<std::uint8_t> close_object(ByteWriter& w) {
  const std::uint64_t body_len = w.bytes().size() - kObjectHeaderBytes;
  const std::uint64_t body_hash = hash64(w.bytes().data() + kObjectHeaderBytes, body_len);
  w.put<std::uint64_t>(kObjectHeaderBytes);
  w.put<std::uint64_t>(body_len);
  w.put<std::uint64_t>(body_hash);
  w.put<std::uint32_t>(kIndexV2Version);
  w.put<std::uint32_t>(0);
  w.raw(kEndMagic, 8);
  return std::move(w.bytes());
}

struct Framed {
  std::uint32_t flags = 0;
  const std::uint8_t* body = nullptr;
  std::size_t body_len = 0;
};

/// The frame of a v2 object, as version 1 checks its index's: magics, versions, footer reserved,
/// body_offset, body_length against the size, body checksum. The header's flags go to the caller.
Result<Framed> open_frame(const std::uint8_t* p, std::size_t n, const char (&magic)[8], const std::string& what) {
  if (n < kMinObjectBytes) return corrupt(what + " truncated (" + num(n) + " bytes)");
  if (std::memcmp(p, magic, 8) != 0) return corrupt(what + " magic missing");
  const std::uint8_t* f = p + n - kObjectFooterBytes;
  if (std::memcmp(f + 32, kEndMagic, 8) != 0) return corrupt(what + " footer magic missing (torn write?)");
  std::uint64_t body_off = 0, body_len = 0, body_hash = 0;
  std::uint32_t version = 0, hversion = 0, freserved = 0;
  Framed fr;
  std::memcpy(&hversion, p + 8, 4);
  std::memcpy(&fr.flags, p + 12, 4);
  std::memcpy(&body_off, f, 8);
  std::memcpy(&body_len, f + 8, 8);
  std::memcpy(&body_hash, f + 16, 8);
  std::memcpy(&version, f + 24, 4);
  std::memcpy(&freserved, f + 28, 4);
  if (version != kIndexV2Version || hversion != kIndexV2Version)
    return corrupt(what + " version " + num(hversion != kIndexV2Version ? hversion : version) +
                   " unsupported (this build reads " + num(kIndexV2Version) + ")");
  if (freserved != 0) return corrupt(what + " footer reserved field is not zero");
  if (body_off != kObjectHeaderBytes || body_len != n - kMinObjectBytes)
    return corrupt(what + " footer offsets inconsistent with its size");
  if (hash64(p + body_off, body_len) != body_hash) return corrupt(what + " checksum mismatch");
  fr.body = p + body_off;
  fr.body_len = static_cast<std::size_t>(body_len);
  return fr;
}

/// A reader's failure as `<what>: <why> (<where>)`.
Status fail_at(const std::string& what, const ByteReader& r, const std::string& why) {
  return corrupt(what + ": " + why + (r.error().empty() ? "" : " (" + r.error() + ")"));
}

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return a / b + (a % b != 0); }

/// Rule 1: how many ranks writer w holds.
std::uint64_t group_size(const RootIndex& root, std::uint32_t w) {
  const std::uint64_t first = static_cast<std::uint64_t>(w) * root.g;
  return first >= root.nranks ? 0 : std::min<std::uint64_t>(root.g, root.nranks - first);
}

/// Bytes of one directory entry of an ndim-dimensional variable.
std::uint64_t dir_entry_bytes(std::uint32_t ndim) { return 8 + 16 * static_cast<std::uint64_t>(ndim); }

/// Stored statistics compared in their class, as var_stats orders them (floats as doubles: -0 == +0).
bool same_stat(DType t, std::uint64_t a, std::uint64_t b) {
  if (a == b) return true;
  return (t == DType::f32 || t == DType::f64) && stat_to_double(t, a) == stat_to_double(t, b);
}

/// The box [start, start + count) of `b` inside the box of `e` (an empty box too: by its corner).
bool box_inside(const BlockRecord& b, const DirEntry& e) {
  for (std::size_t d = 0; d < b.start.size(); ++d)
    if (b.start[d] < e.start[d] || b.start[d] + b.count[d] > e.start[d] + e.count[d]) return false;
  return true;
}

}  // namespace

// ---- root index ------------------------------------------------------------------------------------

std::vector<std::uint8_t> encode_root_index(const RootIndex& root) {
  ByteWriter w = open_object(kRootMagic, root.refs.empty() ? 0u : kRootFlagRefs);
  w.put<std::int64_t>(root.step);
  w.put<std::uint32_t>(root.nranks);
  w.put<std::uint64_t>(root.ckpt_id);
  w.put<double>(root.created_unix);
  w.str(root.transport);
  w.attrs(root.attrs);
  w.put<std::uint64_t>(root.token);
  w.put<std::uint32_t>(root.writers);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(root.rule));
  w.put<std::uint32_t>(root.g);
  w.put<std::uint32_t>(0);
  w.put<std::uint64_t>(root.catalog_offset);
  w.put<std::uint64_t>(root.catalog_length);
  w.put<std::uint64_t>(root.catalog_hash.lo);
  w.put<std::uint64_t>(root.catalog_hash.hi);
  w.put<std::int64_t>(root.base_step);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(root.refs.size()));
  for (const RefSummary& s : root.refs) {
    w.put<std::uint32_t>(s.kind);
    w.put<std::uint32_t>(0);
    w.put<std::int64_t>(s.step);
    w.put<std::uint64_t>(s.ckpt_id);
    w.put<std::uint64_t>(0);
  }
  w.put<std::uint32_t>(static_cast<std::uint32_t>(root.vars.size()));
  for (const Var2& v : root.vars) {
    put_var_record(w, v.var);
    w.put<std::uint8_t>(v.has_stats ? kVarFlagStats : 0);
    for (int i = 0; i < 7; ++i) w.put<std::uint8_t>(0);
    w.put<std::uint64_t>(v.min_bits);
    w.put<std::uint64_t>(v.max_bits);
    w.put<std::uint64_t>(v.n_blocks);
    w.put<std::uint64_t>(v.bytes);
    w.put<std::uint32_t>(v.dir.entries);
    w.put<std::uint32_t>(0);
    w.put<std::uint64_t>(v.dir.offset);
    w.put<std::uint64_t>(v.dir.length);
    w.put<std::uint64_t>(v.dir.checksum);
  }
  return close_object(w);
}

Result<RootIndex> decode_root_index(const std::uint8_t* p, std::size_t n) {
  auto fr = open_frame(p, n, kRootMagic, "root index");
  if (!fr.ok()) return fr.status();
  const std::uint32_t flags = fr->flags;
  if ((flags & ~kRootFlagRefs) != 0) return corrupt("root index flags " + num(flags) + " unknown to this version");
  ByteReader r(fr->body, fr->body_len);
  RootIndex root;
  auto fail = [&](const std::string& why) { return fail_at("root index", r, why); };
  if (!r.get(root.step) || !r.get(root.nranks) || !r.get(root.ckpt_id) || !r.get(root.created_unix) ||
      !r.str(root.transport, 256) || !r.attrs(root.attrs, kMaxAttrs))
    return fail("bad checkpoint record");
  if (root.nranks == 0) return fail("zero ranks");
  std::uint32_t rule = 0, reserved = 0;
  if (!r.get(root.token) || !r.get(root.writers) || !r.get(rule) || !r.get(root.g) || !r.get(reserved))
    return fail("bad writer record");
  if (root.token == 0) return fail("zero token");
  if (reserved != 0) return fail("non-zero reserved field after g");
  if (root.writers == 0 || root.writers > root.nranks)
    return fail(num(root.writers) + " writers for " + num(root.nranks) + " ranks");
  if (rule > 2) return fail("unknown writer rule " + num(rule));
  root.rule = static_cast<WriterRule>(rule);
  if (root.rule == WriterRule::per_rank && root.writers != root.nranks)
    return fail("rule 0 with " + num(root.writers) + " writers for " + num(root.nranks) + " ranks");
  if (root.rule == WriterRule::groups && (root.g == 0 || root.writers != ceil_div(root.nranks, root.g)))
    return fail("rule 1 with g = " + num(root.g) + " and " + num(root.writers) + " writers for " + num(root.nranks) +
                " ranks");
  if (root.rule != WriterRule::groups && root.g != 0) return fail("g = " + num(root.g) + " without rule 1");
  if (!r.get(root.catalog_offset) || !r.get(root.catalog_length) || !r.get(root.catalog_hash.lo) ||
      !r.get(root.catalog_hash.hi))
    return fail("bad catalog record");
  std::uint64_t catalog_end = 0;
  if (__builtin_add_overflow(root.catalog_offset, root.catalog_length, &catalog_end))
    return fail("catalog extent overflows");
  const std::uint64_t dir_begin = catalog_directories_offset(root.writers, root.rule, root.nranks);
  if (root.catalog_length < dir_begin + kObjectFooterBytes)
    return fail("catalog of " + num(root.catalog_length) + " bytes cannot hold " + num(root.writers) + " writers");
  const std::uint64_t dir_end = root.catalog_length - kObjectFooterBytes;  // the directories end at the footer

  std::uint32_t nrefs = 0;
  if (!r.get(root.base_step) || !r.count(nrefs, kRefSummaryBytes, 1u << 24)) return fail("bad reference list");
  if ((nrefs != 0) != ((flags & kRootFlagRefs) != 0))
    return fail("flag bit 0 says " + std::string(nrefs ? "no references" : "references") + " but " + num(nrefs) +
                " are listed");
  if (nrefs == 0 && root.base_step != root.step)
    return fail("base step " + std::to_string(root.base_step) + " of a checkpoint without references");
  if (nrefs != 0 && (root.base_step < 0 || root.base_step >= root.step))
    return fail("base step " + std::to_string(root.base_step) + " not below step " + std::to_string(root.step));
  root.refs.resize(nrefs);
  for (RefSummary& s : root.refs) {
    std::uint32_t zero32 = 0;
    std::uint64_t zero64 = 0;
    if (!r.get(s.kind) || !r.get(zero32) || !r.get(s.step) || !r.get(s.ckpt_id) || !r.get(zero64))
      return fail("bad REFSUM");
    if (s.kind > 1) return fail("REFSUM of unknown kind " + num(s.kind));
    if (zero32 != 0 || zero64 != 0 || (s.kind == 1 && s.ckpt_id != 0))
      return fail("REFSUM with a non-zero reserved field");
    if (s.kind == 1 && s.step < 0) return fail("REFSUM of segment " + std::to_string(s.step));
    if (s.kind == 0 && (s.step < root.base_step || s.step >= root.step))
      return fail("REFSUM of step " + std::to_string(s.step) + " outside [base step, step)");
  }
  for (std::size_t i = 0; i < root.refs.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)  // bounded by what the chain refers to; a set would cost more
      if (root.refs[i] == root.refs[j]) return fail("REFSUM listed twice");

  std::uint32_t nvars = 0;
  if (!r.count(nvars, kMinVar2Bytes, 1u << 28)) return fail("bad variable count");
  root.vars.resize(nvars);
  std::unordered_set<std::string> names;
  names.reserve(nvars);
  for (Var2& v : root.vars) {
    const Status st = get_var_record(r, v.var);
    if (!st.ok()) return fail(st.message());
    const std::string& name = v.var.name;
    if (!names.insert(name).second) return fail("variable '" + name + "' appears twice");
    std::uint8_t vflags = 0, zero8 = 0;
    std::uint32_t zero32 = 0;
    if (!r.get(vflags)) return fail("bad VAR2 of '" + name + "'");
    for (int i = 0; i < 7; ++i)
      if (!r.get(zero8) || zero8 != 0) return fail("VAR2 of '" + name + "' has a non-zero reserved byte");
    if (!r.get(v.min_bits) || !r.get(v.max_bits) || !r.get(v.n_blocks) || !r.get(v.bytes) || !r.get(v.dir.entries) ||
        !r.get(zero32) || !r.get(v.dir.offset) || !r.get(v.dir.length) || !r.get(v.dir.checksum))
      return fail("bad VAR2 of '" + name + "'");
    if ((vflags & ~kVarFlagStats) != 0) return fail("VAR2 of '" + name + "' has unknown flag bits");
    v.has_stats = (vflags & kVarFlagStats) != 0;
    if (!v.has_stats && (v.min_bits != 0 || v.max_bits != 0)) return fail("'" + name + "' has min/max without stats");
    if (zero32 != 0) return fail("VAR2 of '" + name + "' has a non-zero reserved field");
    if (v.n_blocks > root.nranks)
      return fail("'" + name + "' has " + num(v.n_blocks) + " blocks on " + num(root.nranks) + " ranks");
    if (!has_global_shape(v.var.kind) && v.dir.entries != 0)
      return fail(std::string(region_kind_name(v.var.kind)) + " variable '" + name + "' has a directory");
    if (v.dir.entries > kMaxDirEntries)
      return fail("directory of '" + name + "' has " + num(v.dir.entries) + " entries");
    if (v.dir.length != v.dir.entries * dir_entry_bytes(v.var.ndim))
      return fail("directory of '" + name + "' has " + num(v.dir.length) + " bytes for " + num(v.dir.entries) +
                  " entries");
    if (v.dir.entries == 0 && (v.dir.offset != 0 || v.dir.checksum != 0))
      return fail("empty directory of '" + name + "' has an offset or checksum");
    if (v.dir.entries != 0 &&
        (v.dir.offset < dir_begin || v.dir.offset > dir_end || v.dir.length > dir_end - v.dir.offset))
      return fail("directory of '" + name + "' lies outside the catalog's directories");
  }
  if (r.left() != 0) return fail("trailing bytes in its body");
  return root;
}

// ---- catalog -----------------------------------------------------------------------------------------

Status check_directory_layout(const RootIndex& root) {
  if (root.catalog_offset == 0) return Status::OK();
  return corrupt("the root index puts its catalog at offset " + num(root.catalog_offset) +
                 " of its file (a checkpoint directory's catalog starts at 0)");
}

std::uint64_t catalog_entry_position(std::uint32_t w) {
  return kObjectHeaderBytes + kCatalogFixedBytes + kCatalogEntryBytes * static_cast<std::uint64_t>(w);
}

std::uint64_t catalog_directories_offset(std::uint32_t writers, WriterRule rule, std::uint32_t nranks) {
  return catalog_entry_position(writers) +
         (rule == WriterRule::mapped ? 4 + 4 * static_cast<std::uint64_t>(nranks) : 0);
}

std::uint64_t catalog_entry_checksum(const CatalogEntry& e, std::uint64_t token, std::uint32_t w) {
  const std::uint64_t words[6] = {e.offset, e.length, e.checksum, e.ranks, token, w};
  return hash64(words, sizeof words);
}

std::vector<std::uint8_t> encode_catalog(const Catalog& c) {
  ByteWriter w = open_object(kCatalogMagic, 0);
  w.put<std::int64_t>(c.step);
  w.put<std::uint64_t>(c.ckpt_id);
  w.put<std::uint64_t>(c.token);
  w.put<std::uint32_t>(c.writers);
  w.put<std::uint32_t>(0);
  for (const CatalogEntry& e : c.entries) {
    w.put<std::uint64_t>(e.offset);
    w.put<std::uint64_t>(e.length);
    w.put<std::uint64_t>(e.checksum);
    w.put<std::uint64_t>(e.ranks);
    w.put<std::uint64_t>(e.self_checksum);
  }
  if (!c.rank_map.empty()) {
    w.put<std::uint32_t>(static_cast<std::uint32_t>(c.rank_map.size()));
    for (std::uint32_t x : c.rank_map) w.put<std::uint32_t>(x);
  }
  w.raw(c.directories.data(), c.directories.size());
  return close_object(w);
}

namespace {
bool get_entry(ByteReader& r, CatalogEntry& e) {
  return r.get(e.offset) && r.get(e.length) && r.get(e.checksum) && r.get(e.ranks) && r.get(e.self_checksum);
}
}  // namespace

Result<Catalog> decode_catalog(const std::uint8_t* p, std::size_t n, WriterRule rule) {
  auto fr = open_frame(p, n, kCatalogMagic, "catalog");
  if (!fr.ok()) return fr.status();
  if (fr->flags != 0) return corrupt("catalog flags " + num(fr->flags) + " unknown to this version");
  ByteReader r(fr->body, fr->body_len);
  Catalog c;
  auto fail = [&](const std::string& why) { return fail_at("catalog", r, why); };
  std::uint32_t reserved = 0;
  if (!r.get(c.step) || !r.get(c.ckpt_id) || !r.get(c.token) || !r.count(c.writers, kCatalogEntryBytes, ~0u) ||
      !r.get(reserved))
    return fail("bad catalog record");
  if (c.writers == 0) return fail("zero writers");
  if (reserved != 0) return fail("non-zero reserved field");
  c.entries.resize(c.writers);
  for (std::uint32_t w = 0; w < c.writers; ++w) {
    CatalogEntry& e = c.entries[w];
    if (!get_entry(r, e)) return fail("bad entry of writer " + num(w));
    if (e.self_checksum != catalog_entry_checksum(e, c.token, w)) return fail("entry of writer " + num(w) + " damaged");
  }
  if (rule == WriterRule::mapped) {
    std::uint32_t nmap = 0;
    if (!r.count(nmap, 4, ~0u)) return fail("bad rank map");
    if (nmap == 0) return fail("empty rank map");
    c.rank_map.resize(nmap);
    for (std::uint32_t i = 0; i < nmap; ++i) {
      if (!r.get(c.rank_map[i])) return fail("bad rank map");
      if (c.rank_map[i] >= c.writers)
        return fail("rank map names writer " + num(c.rank_map[i]) + " for rank " + num(i) + " of " + num(c.writers));
    }
  }
  c.directories.assign(fr->body + (fr->body_len - r.left()), fr->body + fr->body_len);
  return c;
}

Status check_catalog_entry(const CatalogEntry& e, const RootIndex& root, std::uint32_t w) {
  const std::string what = "catalog entry of writer " + num(w);
  if (w >= root.writers) return corrupt(what + ": only " + num(root.writers) + " writers");
  if (e.self_checksum != catalog_entry_checksum(e, root.token, w))
    return corrupt(what + " damaged or of another commit (its checksum with the root's token fails)");
  if (root.rule == WriterRule::mapped) {
    if (e.ranks > root.nranks) return corrupt(what + " holds " + num(e.ranks) + " of " + num(root.nranks) + " ranks");
  } else {
    const std::uint64_t want = root.rule == WriterRule::per_rank ? 1 : group_size(root, w);
    if (e.ranks != want) return corrupt(what + " holds " + num(e.ranks) + " ranks, the rule gives " + num(want));
  }
  std::uint64_t end = 0;
  if (e.length < kMinObjectBytes || __builtin_add_overflow(e.offset, e.length, &end))
    return corrupt(what + ": a sub-index of " + num(e.length) + " bytes at " + num(e.offset));
  return Status::OK();
}

Result<CatalogEntry> decode_catalog_entry(const std::uint8_t* p, std::size_t n, const RootIndex& root,
                                          std::uint32_t w) {
  if (n != kCatalogEntryBytes) return corrupt("catalog entry of " + num(n) + " bytes");
  ByteReader r(p, n);
  CatalogEntry e;
  get_entry(r, e);
  CKPT_RETURN_IF_ERROR(check_catalog_entry(e, root, w));
  return e;
}

Status check_catalog(const Catalog& c, const RootIndex& root, const std::uint8_t* p, std::size_t n) {
  if (n != root.catalog_length || hash128(p, n) != root.catalog_hash)
    return corrupt("catalog (" + num(n) + " bytes) is not the one the root index names (its XXH3-128 or length)");
  if (c.step != root.step || c.ckpt_id != root.ckpt_id || c.token != root.token || c.writers != root.writers)
    return corrupt("catalog of step " + std::to_string(c.step) + " / id " + num(c.ckpt_id) + " / token " +
                   num(c.token) + " / " + num(c.writers) + " writers disagrees with its root index");
  if (root.rule == WriterRule::mapped && c.rank_map.size() != root.nranks)
    return corrupt("catalog rank map has " + num(c.rank_map.size()) + " ranks, the root " + num(root.nranks));
  std::vector<std::uint64_t> mapped(root.rule == WriterRule::mapped ? root.writers : 0, 0);
  for (std::uint32_t w : c.rank_map) ++mapped[w];
  for (std::uint32_t w = 0; w < c.writers; ++w) {
    CKPT_RETURN_IF_ERROR(check_catalog_entry(c.entries[w], root, w));
    if (root.rule == WriterRule::mapped && c.entries[w].ranks != mapped[w])
      return corrupt("catalog entry of writer " + num(w) + " holds " + num(c.entries[w].ranks) + " ranks, the map " +
                     num(mapped[w]));
  }
  return Status::OK();
}

// ---- directories ---------------------------------------------------------------------------------------

std::vector<std::uint8_t> encode_directory(const std::vector<DirEntry>& entries) {
  ByteWriter w;
  for (const DirEntry& e : entries) {
    w.put<std::uint32_t>(e.first);
    w.put<std::uint32_t>(e.writers);
    for (auto s : e.start) w.put<std::uint64_t>(s);
    for (auto c : e.count) w.put<std::uint64_t>(c);
  }
  return std::move(w.bytes());
}

Result<std::vector<DirEntry>> decode_directory(const std::uint8_t* p, std::size_t n, const Var2& v,
                                               std::uint32_t writers) {
  const VarRecord& var = v.var;
  const std::string what = "directory of '" + var.name + "'";
  if (!has_global_shape(var.kind)) return corrupt(what + ": a " + region_kind_name(var.kind) + " variable has none");
  if (v.dir.entries > kMaxDirEntries) return corrupt(what + " has " + num(v.dir.entries) + " entries");
  if (n != v.dir.length || n != v.dir.entries * dir_entry_bytes(var.ndim))
    return corrupt(what + ": " + num(n) + " bytes for " + num(v.dir.entries) + " entries");
  if ((n == 0 ? 0 : hash64(p, n)) != v.dir.checksum) return corrupt(what + ": checksum mismatch");  // none: 0
  ByteReader r(p, n);
  std::vector<DirEntry> out(v.dir.entries);
  std::uint64_t next = 0;  // the first writer the next range may start at
  for (std::size_t i = 0; i < out.size(); ++i) {
    DirEntry& e = out[i];
    e.start.resize(var.ndim);
    e.count.resize(var.ndim);
    r.get(e.first);
    r.get(e.writers);
    for (auto& s : e.start) r.get(s);
    for (auto& c : e.count) r.get(c);
    const std::uint64_t end = static_cast<std::uint64_t>(e.first) + e.writers;
    if (e.writers == 0 || end > writers)
      return corrupt(what + ": entry " + num(i) + " names writers [" + num(e.first) + ", " + num(end) + ") of " +
                     num(writers));
    if (e.first < next) return corrupt(what + ": entry " + num(i) + " overlaps or precedes the one before it");
    next = end;
    for (std::uint32_t d = 0; d < var.ndim; ++d) {
      std::uint64_t box_end = 0;
      if (__builtin_add_overflow(e.start[d], e.count[d], &box_end) || box_end > var.global[d])
        return corrupt(what + ": entry " + num(i) + " lies outside the global shape");
      if (var.kind == RegionKind::joined && d > 0 && (e.start[d] != 0 || e.count[d] != var.global[d]))
        return corrupt(what + ": entry " + num(i) + " of a joined array is not a set of whole rows");
    }
  }
  return out;
}

// ---- sub-index -----------------------------------------------------------------------------------------

bool SubIndex::holds(std::uint32_t rank) const { return std::binary_search(ranks.begin(), ranks.end(), rank); }

const BlockRecord* SubIndex::find(std::uint32_t var, std::uint32_t rank) const {
  for (const BlockRecord& b : blocks)
    if (b.var == var && b.rank == rank) return &b;
  return nullptr;
}

std::vector<std::uint8_t> encode_subindex(const SubIndex& s) {
  const bool pieced = std::any_of(s.blocks.begin(), s.blocks.end(), [](const BlockRecord& b) { return b.pieced(); });
  ByteWriter w = open_object(kSubMagic, pieced ? kSubFlagPieces : 0u);
  w.put<std::int64_t>(s.step);
  w.put<std::uint64_t>(s.ckpt_id);
  w.put<std::uint64_t>(s.token);
  w.put<std::uint32_t>(s.w);
  w.put<std::uint32_t>(s.writers);
  w.put<std::uint32_t>(s.nranks);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(s.ranks.size()));
  for (std::uint32_t r : s.ranks) w.put<std::uint32_t>(r);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(s.files.size()));
  for (const FileRecord& f : s.files) put_file_record(w, f);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(s.refs.size()));
  for (const RefFile& f : s.refs) put_ref_record(w, f);
  w.put<std::uint64_t>(s.blocks.size());
  for (const BlockRecord& b : s.blocks) put_block_record(w, b);
  return close_object(w);
}

Result<SubIndex> decode_subindex(const std::uint8_t* p, std::size_t n, const RootIndex& root) {
  auto fr = open_frame(p, n, kSubMagic, "sub-index");
  if (!fr.ok()) return fr.status();
  if ((fr->flags & ~kSubFlagPieces) != 0)
    return corrupt("sub-index flags " + num(fr->flags) + " unknown to this version");
  const bool pieces = fr->flags == kSubFlagPieces;
  if (pieces && root.refs.empty()) return corrupt("sub-index with pieces in a checkpoint without references");
  ByteReader r(fr->body, fr->body_len);
  SubIndex s;
  auto fail = [&](const std::string& why) { return fail_at("sub-index", r, why); };
  if (!r.get(s.step) || !r.get(s.ckpt_id) || !r.get(s.token) || !r.get(s.w) || !r.get(s.writers) || !r.get(s.nranks))
    return fail("bad sub-index record");
  std::uint32_t nr = 0;
  if (!r.count(nr, 4, root.nranks)) return fail("bad rank count");
  s.ranks.resize(nr);
  for (std::uint32_t i = 0; i < nr; ++i) {
    if (!r.get(s.ranks[i])) return fail("bad rank list");
    if (s.ranks[i] >= root.nranks || (i > 0 && s.ranks[i] <= s.ranks[i - 1]))
      return fail("rank list not ascending below " + num(root.nranks) + " at rank " + num(s.ranks[i]));
  }
  std::uint32_t nfiles = 0;
  if (!r.count(nfiles, 16, 1u << 24)) return fail("bad file count");
  s.files.resize(nfiles);
  for (FileRecord& f : s.files) {
    const Status st = get_file_record(r, root.nranks, f);
    if (!st.ok()) return fail(st.message());
  }
  std::uint32_t nrefs = 0;
  if (!r.count(nrefs, kMinRefBytes, 1u << 24)) return fail("bad REF count");
  if (nrefs != 0 && !pieces) return fail(num(nrefs) + " REFs without pieces");  // REFs serve pieces only
  s.refs.resize(nrefs);
  std::unordered_set<std::string> ref_keys;
  ref_keys.reserve(nrefs);
  // The root's list, sorted once: W sub-indices of many REFs each must not cost a scan of it per REF.
  using Sum = std::tuple<std::uint32_t, std::int64_t, std::uint64_t>;
  std::vector<Sum> listed;
  if (nrefs != 0)
    for (const RefSummary& x : root.refs) listed.emplace_back(x.kind, x.step, x.ckpt_id);
  std::sort(listed.begin(), listed.end());
  for (std::uint32_t k = 0; k < nrefs; ++k) {
    RefFile& f = s.refs[k];
    const Status st = get_ref_record(r, f);
    if (!st.ok()) return fail(st.message());
    const std::string what = "REF " + num(k + 1) + " ('" + f.name + "' of step " + std::to_string(f.step) + ")";
    // The sub-indices this build reads are in a checkpoint directory (a version-2 root in a step-log record is
    // refused): it refers to checkpoint directories, not to series segments.
    if (f.kind != 0) return fail(what + ": a series segment, in a checkpoint directory");
    if (f.step < root.base_step || f.step >= root.step)
      return fail(what + " outside [base step " + std::to_string(root.base_step) + ", step " +
                  std::to_string(root.step) + ")");
    if (!std::binary_search(listed.begin(), listed.end(), Sum{f.kind, f.step, f.ckpt_id}))
      return fail(what + " of checkpoint id " + num(f.ckpt_id) + " is not in the root index's list");
    if (!ref_keys.insert(ref_key(f)).second) return fail(what + " listed twice");
  }
  std::uint64_t nblocks = 0;
  if (!r.count(nblocks, 56, std::numeric_limits<std::uint32_t>::max())) return fail("bad block count");
  s.blocks.resize(nblocks);
  std::unordered_set<std::uint64_t> var_rank;
  var_rank.reserve(static_cast<std::size_t>(nblocks));
  auto var_of = [&root](std::uint32_t v) -> const VarRecord& { return root.vars[v].var; };
  bool pieced = false;
  for (std::uint64_t i = 0; i < nblocks; ++i) {
    BlockRecord& b = s.blocks[i];
    const Status st =
        get_block_record(r, root.vars.size(), var_of, s.files.size(), root.nranks, i, b, PieceLimits{pieces, nrefs});
    if (!st.ok()) return fail(st.message());
    pieced = pieced || b.pieced();
    if (!s.holds(b.rank)) return fail("block " + num(i) + " of rank " + num(b.rank) + ", which it does not hold");
    if (!var_rank.insert((static_cast<std::uint64_t>(b.var) << 32) | b.rank).second)
      return fail("rank " + num(b.rank) + " has two blocks of '" + root.vars[b.var].var.name + "'");
  }
  if (pieces && !pieced) return fail("flag bit 0 says it has pieces, but no block is pieced");
  if (r.left() != 0) return fail("trailing bytes in its body");
  return s;
}

Status check_subindex(const SubIndex& s, const RootIndex& root, const CatalogEntry& e, std::uint32_t w,
                      const std::uint8_t* p, std::size_t n) {
  const std::string what = "sub-index " + num(w);
  if (n != e.length || hash64(p, n) != e.checksum)
    return corrupt(what + " (" + num(n) + " bytes) is not the one its catalog entry names (its XXH3-64 or length)");
  if (s.step != root.step || s.ckpt_id != root.ckpt_id || s.token != root.token || s.w != w ||
      s.writers != root.writers || s.nranks != root.nranks)
    return corrupt(what + " names step " + std::to_string(s.step) + ", id " + num(s.ckpt_id) + ", token " +
                   num(s.token) + ", writer " + num(s.w) + " of " + num(s.writers) + ", " + num(s.nranks) +
                   " ranks: not its root index's");
  if (s.ranks.size() != e.ranks)
    return corrupt(what + " holds " + num(s.ranks.size()) + " ranks, its catalog entry says " + num(e.ranks));
  std::uint64_t first = 0;
  bool by_rule = true;
  switch (root.rule) {
    case WriterRule::per_rank: first = w; break;
    case WriterRule::groups: first = static_cast<std::uint64_t>(w) * root.g; break;
    case WriterRule::mapped: by_rule = false; break;
  }
  if (by_rule)
    for (std::size_t i = 0; i < s.ranks.size(); ++i)
      if (s.ranks[i] != first + i)
        return corrupt(what + " holds rank " + num(s.ranks[i]) + ", which rule " +
                       num(static_cast<std::uint32_t>(root.rule)) + " gives another writer");
  return Status::OK();
}

Result<SubIndex> decode_writer_subindex(const std::uint8_t* p, std::size_t n, const RootIndex& root,
                                        const CatalogEntry& e, std::uint32_t w) {
  if (n != e.length || hash64(p, n) != e.checksum)  // a cheap refusal before any parsing
    return corrupt("sub-index " + num(w) + " (" + num(n) +
                   " bytes) is not the one its catalog entry names (its XXH3-64 or length)");
  auto s = decode_subindex(p, n, root);
  if (!s.ok()) return Status(Code::corrupt, "writer " + num(w) + ": " + s.status().message());
  CKPT_RETURN_IF_ERROR(check_subindex(s.value(), root, e, w, p, n));
  return s;
}

// ---- finding a block -------------------------------------------------------------------------------------

Result<RankPlace> locate_rank(const RootIndex& root, std::uint32_t rank) {
  if (rank >= root.nranks)
    return Status(Code::invalid_argument,
                  "rank " + num(rank) + " of a checkpoint written by " + num(root.nranks) + " ranks");
  RankPlace at;
  switch (root.rule) {
    case WriterRule::per_rank: at.writer = rank; break;
    case WriterRule::groups: at.writer = rank / root.g; break;
    case WriterRule::mapped:
      at.needs_map = true;
      at.map_offset =
          root.catalog_offset + catalog_entry_position(root.writers) + 4 + 4 * static_cast<std::uint64_t>(rank);
      return at;
  }
  at.entry_offset = root.catalog_offset + catalog_entry_position(at.writer);
  return at;
}

Result<RankPlace> locate_rank_by_map(const RootIndex& root, std::uint32_t rank, const std::uint8_t* map_entry,
                                     std::size_t n) {
  auto at = locate_rank(root, rank);
  if (!at.ok()) return at;
  if (!at->needs_map)
    return Status(Code::invalid_argument, "rule " + num(static_cast<std::uint32_t>(root.rule)) + " has no rank map");
  if (n != 4) return corrupt("rank map entry of " + num(n) + " bytes");
  std::uint32_t w = 0;
  std::memcpy(&w, map_entry, 4);
  if (w >= root.writers)
    return corrupt("rank map names writer " + num(w) + " of " + num(root.writers) + " for rank " + num(rank));
  RankPlace place = at.value();
  place.writer = w;
  place.needs_map = false;
  place.entry_offset = root.catalog_offset + catalog_entry_position(w);
  return place;
}

// ---- conversions -----------------------------------------------------------------------------------------

std::vector<std::uint32_t> derive_rank_file(const Index& idx) {
  const std::uint32_t none = ~0u;
  std::vector<std::uint32_t> out(idx.nranks, none);
  for (std::size_t f = 0; f < idx.files.size(); ++f) {
    const std::uint32_t w = idx.files[f].writer;
    if (w < idx.nranks && out[w] == none) out[w] = static_cast<std::uint32_t>(f);
  }
  for (const BlockRecord& b : idx.blocks)
    if (b.rank < idx.nranks && out[b.rank] == none) out[b.rank] = b.file;
  for (auto& f : out)
    if (f == none) f = 0;
  return out;
}

bool uniform_blocks(const Index& idx, std::uint32_t var, const std::vector<std::uint32_t>& blocks) {
  if (has_global_shape(idx.vars[var].kind) || blocks.size() != idx.nranks) return false;
  const BlockRecord& first = idx.blocks[blocks.front()];
  for (const std::uint32_t bi : blocks) {
    const BlockRecord& b = idx.blocks[bi];
    if (b.checksum != first.checksum || b.count != first.count) return false;
  }
  return true;
}

namespace {
/// The bounding box of boxes a and b (an empty box counts by its corner, as box_inside() does).
void grow_box(DirEntry& a, const Shape& start, const Shape& count) {
  for (std::size_t d = 0; d < a.start.size(); ++d) {
    const std::uint64_t end = std::max(a.start[d] + a.count[d], start[d] + count[d]);
    a.start[d] = std::min(a.start[d], start[d]);
    a.count[d] = end - a.start[d];
  }
}

/// One entry per writer holding blocks of the variable (`owner` of each block's rank), in writer order;
/// neighbours merged into their bounding box when there are more than kMaxDirEntries.
std::vector<DirEntry> make_directory(const Index& idx, const std::vector<std::uint32_t>& blocks,
                                     const std::vector<std::uint32_t>& owner) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> by_writer;  // (writer, block)
  by_writer.reserve(blocks.size());
  for (const std::uint32_t bi : blocks) by_writer.emplace_back(owner[idx.blocks[bi].rank], bi);
  std::sort(by_writer.begin(), by_writer.end());
  std::vector<DirEntry> out;
  for (const auto& [w, bi] : by_writer) {
    const BlockRecord& b = idx.blocks[bi];
    if (out.empty() || out.back().first != w)
      out.push_back(DirEntry{w, 1, b.start, b.count});
    else
      grow_box(out.back(), b.start, b.count);
  }
  if (out.size() <= kMaxDirEntries) return out;
  const std::size_t k = static_cast<std::size_t>(ceil_div(out.size(), kMaxDirEntries));
  std::vector<DirEntry> merged;
  for (std::size_t i = 0; i < out.size(); i += k) {
    DirEntry m = out[i];
    const std::size_t last = std::min(out.size(), i + k) - 1;
    for (std::size_t j = i + 1; j <= last; ++j) grow_box(m, out[j].start, out[j].count);
    m.writers = out[last].first + out[last].writers - m.first;
    merged.push_back(std::move(m));
  }
  return merged;
}
}  // namespace

Result<SplitIndex> split_index(const Index& idx, WriterRule rule, std::uint32_t g, std::uint64_t token,
                               const std::vector<std::uint32_t>& rank_map) {
  const std::uint32_t nranks = idx.nranks;
  if (nranks == 0) return bad_arg("an index of zero ranks");
  if (token == 0) return bad_arg("a zero token");
  if (static_cast<std::uint32_t>(rule) > 2) return bad_arg("unknown rule " + num(static_cast<std::uint32_t>(rule)));
  if ((rule == WriterRule::groups) != (g != 0))
    return bad_arg("g = " + num(g) + " with rule " + num(static_cast<std::uint32_t>(rule)));
  if ((rule == WriterRule::mapped) != !rank_map.empty() || (!rank_map.empty() && rank_map.size() != nranks))
    return bad_arg("a rank map of " + num(rank_map.size()) + " entries for " + num(nranks) + " ranks and rule " +
                   num(static_cast<std::uint32_t>(rule)));
  for (const std::uint32_t w : rank_map)
    if (w >= nranks) return bad_arg("the rank map names writer " + num(w) + " of at most " + num(nranks));
  // Each rank's writer, and W.
  std::vector<std::uint32_t> owner(nranks);
  std::uint32_t writers = 0;
  for (std::uint32_t r = 0; r < nranks; ++r) {
    owner[r] = rule == WriterRule::per_rank ? r : rule == WriterRule::groups ? r / g : rank_map[r];
    writers = std::max(writers, owner[r] + 1);
  }
  std::unordered_set<std::string> names;
  for (const FileRecord& f : idx.files)
    if (!names.insert(f.name).second) return bad_arg("file '" + f.name + "' is listed twice");
  for (const BlockRecord& b : idx.blocks) {
    if (b.var >= idx.vars.size() || b.rank >= nranks || b.file >= idx.files.size())
      return bad_arg("a block names a missing variable, rank or file");
    if (b.pieced() ? b.piece_log2 < kMinPieceLog2 || b.piece_log2 > kMaxPieceLog2 ||
                         b.pieces.size() != piece_count(b.length, b.piece_log2)
                   : !b.pieces.empty())
      return bad_arg("a block of " + num(b.length) + " bytes in " + num(b.pieces.size()) + " pieces of 2^" +
                     num(b.piece_log2));
    for (const PieceRecord& pc : b.pieces)
      if (pc.ref > idx.refs.size()) return bad_arg("a piece names REF " + num(pc.ref) + " of " + num(idx.refs.size()));
  }
  for (const RefFile& f : idx.refs)
    if (f.kind != 0 || f.step < 0 || f.step >= idx.step)
      return bad_arg("a REF of " + std::string(f.kind != 0 ? "a series segment" : "step " + std::to_string(f.step)) +
                     " in checkpoint directory " + std::to_string(idx.step));

  RootIndex root;
  root.step = idx.step;
  root.nranks = nranks;
  root.ckpt_id = idx.ckpt_id;
  root.created_unix = idx.created_unix;
  root.transport = idx.transport;
  root.attrs = idx.attrs;
  root.token = token;
  root.writers = writers;
  root.rule = rule;
  root.g = g;
  root.base_step = idx.step;
  // References: every REF's checkpoint once; the base is the lowest one (the caller may know an older one).
  for (const RefFile& f : idx.refs) {
    const RefSummary sum{f.kind, f.step, f.ckpt_id};
    if (std::find(root.refs.begin(), root.refs.end(), sum) == root.refs.end()) root.refs.push_back(sum);
    root.base_step = std::min(root.base_step, f.step);
  }

  // Sub-indices: ranks, files (global indices, sorted: the index's order), blocks. A sub-index lists its
  // blocks' files and the files its ranks are the writers of, nothing else: not the version-1 writer map,
  // which version 2 does not keep (listing a file through it would make the assembled file order depend
  // on what assembling drops, and assembling no longer a fixed point).
  std::vector<SubIndex> subs(writers);
  std::vector<std::vector<std::uint32_t>> sub_files(writers);
  for (std::uint32_t r = 0; r < nranks; ++r) subs[owner[r]].ranks.push_back(r);
  for (std::size_t f = 0; f < idx.files.size(); ++f)
    if (idx.files[f].writer < nranks) sub_files[owner[idx.files[f].writer]].push_back(static_cast<std::uint32_t>(f));
  for (const BlockRecord& b : idx.blocks) sub_files[owner[b.rank]].push_back(b.file);
  for (std::uint32_t w = 0; w < writers; ++w) {
    auto& fs = sub_files[w];
    std::sort(fs.begin(), fs.end());
    fs.erase(std::unique(fs.begin(), fs.end()), fs.end());
    SubIndex& s = subs[w];
    s.step = idx.step;
    s.ckpt_id = idx.ckpt_id;
    s.token = token;
    s.w = w;
    s.writers = writers;
    s.nranks = nranks;
    for (const std::uint32_t f : fs) s.files.push_back(idx.files[f]);
  }
  // Each sub-index lists the REFs its pieces name, in the order they are first named.
  std::vector<std::unordered_map<std::uint32_t, std::uint32_t>> sub_ref(writers);  // index's ref -> the sub-index's
  for (const BlockRecord& b : idx.blocks) {
    const std::uint32_t w = owner[b.rank];
    const auto& fs = sub_files[w];
    BlockRecord local = b;
    local.file = static_cast<std::uint32_t>(std::lower_bound(fs.begin(), fs.end(), b.file) - fs.begin());
    for (PieceRecord& pc : local.pieces) {
      if (pc.ref == 0) continue;
      auto [it, fresh] = sub_ref[w].emplace(pc.ref, static_cast<std::uint32_t>(subs[w].refs.size() + 1));
      if (fresh) subs[w].refs.push_back(idx.refs[pc.ref - 1]);
      pc.ref = it->second;
    }
    subs[w].blocks.push_back(std::move(local));
  }

  const IndexLookup look(idx);
  root.vars.resize(idx.vars.size());
  for (std::uint32_t v = 0; v < idx.vars.size(); ++v) {
    Var2& out = root.vars[v];
    // In rank order, as assemble_index() merges them: min/max then pick the same bits among equals.
    std::vector<std::uint32_t> blocks = look.blocks(v);
    std::stable_sort(blocks.begin(), blocks.end(),
                     [&idx](std::uint32_t a, std::uint32_t b) { return idx.blocks[a].rank < idx.blocks[b].rank; });
    out.var = idx.vars[v];
    out.var.uniform = uniform_blocks(idx, v, blocks);
    const VarStats st = var_stats(idx, v, blocks);
    out.has_stats = st.valid;
    out.min_bits = st.min_bits;
    out.max_bits = st.max_bits;
    out.n_blocks = blocks.size();
    for (const std::uint32_t bi : blocks)
      if (__builtin_add_overflow(out.bytes, idx.blocks[bi].length, &out.bytes))
        return bad_arg("the blocks of '" + out.var.name + "' hold more than 2^64 bytes");
  }

  SplitIndex out;
  out.subindices.resize(writers);
  std::vector<CatalogEntry> entries(writers);
  for (std::uint32_t w = 0; w < writers; ++w) {
    out.subindices[w] = encode_subindex(subs[w]);
    entries[w].length = out.subindices[w].size();
    entries[w].checksum = hash64(out.subindices[w].data(), out.subindices[w].size());
    entries[w].ranks = subs[w].ranks.size();
  }
  out.catalog = build_catalog(root, std::move(entries), idx, owner, rank_map);
  out.root = std::move(root);
  return out;
}

std::vector<std::uint8_t> build_catalog(RootIndex& root, std::vector<CatalogEntry> entries, const Index& boxes,
                                        const std::vector<std::uint32_t>& owner,
                                        const std::vector<std::uint32_t>& rank_map) {
  // The catalog: entries, rank map, then one directory per global or joined variable, back to back.
  Catalog cat;
  cat.step = root.step;
  cat.ckpt_id = root.ckpt_id;
  cat.token = root.token;
  cat.writers = root.writers;
  if (root.rule == WriterRule::mapped) cat.rank_map = rank_map;
  const std::uint64_t dir_begin = catalog_directories_offset(root.writers, root.rule, root.nranks);
  const IndexLookup look(boxes);
  for (std::uint32_t v = 0; v < root.vars.size(); ++v) {
    Var2& out = root.vars[v];
    out.dir = DirectoryRef{};
    if (!has_global_shape(out.var.kind) || v >= boxes.vars.size()) continue;
    const std::vector<std::uint32_t>& blocks = look.blocks(v);  // make_directory() orders them by writer
    if (blocks.empty()) continue;
    const std::vector<DirEntry> dir = make_directory(boxes, blocks, owner);
    const std::vector<std::uint8_t> bytes = encode_directory(dir);
    out.dir.entries = static_cast<std::uint32_t>(dir.size());
    out.dir.offset = dir_begin + cat.directories.size();
    out.dir.length = bytes.size();
    out.dir.checksum = hash64(bytes.data(), bytes.size());
    cat.directories.insert(cat.directories.end(), bytes.begin(), bytes.end());
  }
  for (std::uint32_t w = 0; w < entries.size(); ++w) {
    entries[w].offset = 0;
    entries[w].self_checksum = catalog_entry_checksum(entries[w], root.token, w);
  }
  cat.entries = std::move(entries);
  std::vector<std::uint8_t> bytes = encode_catalog(cat);
  root.catalog_offset = 0;
  root.catalog_length = bytes.size();
  root.catalog_hash = hash128(bytes.data(), bytes.size());
  return bytes;
}

Result<std::vector<std::uint32_t>> merge_files(std::vector<FileRecord>& files,
                                               std::unordered_map<std::string, std::uint32_t>& by_name,
                                               const std::vector<FileRecord>& add, std::uint32_t w) {
  std::vector<std::uint32_t> at;
  at.reserve(add.size());
  for (const FileRecord& f : add) {
    auto [it, added] = by_name.emplace(f.name, static_cast<std::uint32_t>(files.size()));
    if (added) {
      files.push_back(f);
    } else {
      const FileRecord& have = files[it->second];
      if (have.writer != f.writer || have.bytes != f.bytes)
        return corrupt("file '" + f.name + "' is listed with writer " + num(f.writer) + " and " + num(f.bytes) +
                       " bytes by sub-index " + num(w) + ", with writer " + num(have.writer) + " and " +
                       num(have.bytes) + " bytes before");
    }
    at.push_back(it->second);
  }
  return at;
}

std::vector<std::uint32_t> merge_refs(std::vector<RefFile>& refs,
                                      std::unordered_map<std::string, std::uint32_t>& by_key,
                                      const std::vector<RefFile>& add) {
  std::vector<std::uint32_t> at;
  at.reserve(add.size());
  for (const RefFile& f : add) {
    auto [it, added] = by_key.emplace(ref_key(f), static_cast<std::uint32_t>(refs.size()));
    if (added) refs.push_back(f);
    at.push_back(it->second);
  }
  return at;
}

void renumber_block(BlockRecord& b, const std::vector<std::uint32_t>& file_map,
                    const std::vector<std::uint32_t>& ref_map) {
  b.file = file_map[b.file];
  for (PieceRecord& pc : b.pieces)
    if (pc.ref != 0) pc.ref = ref_map[pc.ref - 1] + 1;
}

Result<Index> assemble_index(const RootIndex& root, const std::uint8_t* catalog, std::size_t catalog_bytes,
                             const std::vector<std::vector<std::uint8_t>>& subindices) {
  auto cat = decode_catalog(catalog, catalog_bytes, root.rule);
  if (!cat.ok()) return cat.status();
  CKPT_RETURN_IF_ERROR(check_catalog(cat.value(), root, catalog, catalog_bytes));
  if (subindices.size() != root.writers)
    return Status(Code::invalid_argument,
                  num(subindices.size()) + " sub-indices for the " + num(root.writers) + " writers of the root index");

  Index idx;
  idx.step = root.step;
  idx.nranks = root.nranks;
  idx.ckpt_id = root.ckpt_id;
  idx.created_unix = root.created_unix;
  idx.transport = root.transport;
  idx.attrs = root.attrs;
  idx.vars.reserve(root.vars.size());
  for (const Var2& v : root.vars) idx.vars.push_back(v.var);

  // Every sub-index against the root and its entry; every rank in exactly one; files merged by name.
  const std::uint32_t unowned = ~0u;
  std::vector<std::uint32_t> owner(root.nranks, unowned);
  std::unordered_map<std::string, std::uint32_t> file_ix, ref_ix;
  struct Ref {
    std::uint32_t rank, w, i;
  };
  std::vector<Ref> order;
  std::vector<SubIndex> subs(root.writers);
  std::vector<std::vector<std::uint32_t>> file_map(root.writers);  // sub-index file -> idx.files
  std::vector<std::vector<std::uint32_t>> ref_map(root.writers);   // sub-index REF -> idx.refs (from 0)
  for (std::uint32_t w = 0; w < root.writers; ++w) {
    const auto& bytes = subindices[w];
    auto s = decode_writer_subindex(bytes.data(), bytes.size(), root, cat->entries[w], w);
    if (!s.ok()) return s.status();
    subs[w] = std::move(s).value();
    for (const std::uint32_t r : subs[w].ranks) {
      if (root.rule == WriterRule::mapped && cat->rank_map[r] != w)
        return corrupt("rank " + num(r) + " is in sub-index " + num(w) + " but the rank map names writer " +
                       num(cat->rank_map[r]));
      if (owner[r] != unowned)
        return corrupt("rank " + num(r) + " is in sub-indices " + num(owner[r]) + " and " + num(w));
      owner[r] = w;
    }
    auto files = merge_files(idx.files, file_ix, subs[w].files, w);
    if (!files.ok()) return files.status();
    file_map[w] = std::move(files).value();
    ref_map[w] = merge_refs(idx.refs, ref_ix, subs[w].refs);
    for (std::uint32_t i = 0; i < subs[w].blocks.size(); ++i) order.push_back(Ref{subs[w].blocks[i].rank, w, i});
  }
  for (std::uint32_t r = 0; r < root.nranks; ++r)
    if (owner[r] == unowned) return corrupt("rank " + num(r) + " is in no sub-index");
  if (idx.files.empty()) return corrupt("no sub-index lists a file");

  // Blocks in rank order (a rank's blocks are all in one sub-index: its order is kept).
  std::stable_sort(order.begin(), order.end(), [](const Ref& a, const Ref& b) { return a.rank < b.rank; });
  idx.blocks.reserve(order.size());
  for (const Ref& at : order) {
    BlockRecord b = std::move(subs[at.w].blocks[at.i]);
    renumber_block(b, file_map[at.w], ref_map[at.w]);
    idx.blocks.push_back(std::move(b));
  }
  subs.clear();
  idx.rank_file = derive_rank_file(idx);
  CKPT_RETURN_IF_ERROR(check_joined_rows(idx));

  // What the root says of each variable against what the blocks give; blocks against the directories.
  const IndexLookup look(idx);
  for (std::uint32_t v = 0; v < root.vars.size(); ++v) {
    const Var2& want = root.vars[v];
    const std::string& name = want.var.name;
    const auto& blocks = look.blocks(v);
    std::uint64_t bytes = 0;
    bool overflow = false;
    for (const std::uint32_t bi : blocks) overflow |= __builtin_add_overflow(bytes, idx.blocks[bi].length, &bytes);
    if (want.n_blocks != blocks.size() || overflow || want.bytes != bytes)
      return corrupt("root index: '" + name + "' has " + num(want.n_blocks) + " blocks of " + num(want.bytes) +
                     " bytes, its blocks are " + num(blocks.size()) +
                     (overflow ? " of more than 2^64" : " of " + num(bytes)) + " bytes");
    const VarStats st = var_stats(idx, v, blocks);
    if (st.valid != want.has_stats || (st.valid && (!same_stat(want.var.dtype, st.min_bits, want.min_bits) ||
                                                    !same_stat(want.var.dtype, st.max_bits, want.max_bits))))
      return corrupt("root index: the min/max of '" + name + "' are not its blocks'");
    if (want.var.uniform != uniform_blocks(idx, v, blocks))
      return corrupt("root index: '" + name + "' is " + (want.var.uniform ? "" : "not ") + "uniform, its blocks " +
                     (want.var.uniform ? "are not" : "are"));
    if (!has_global_shape(want.var.kind)) continue;
    auto dir =
        decode_directory(catalog + want.dir.offset, static_cast<std::size_t>(want.dir.length), want, root.writers);
    if (!dir.ok()) return dir.status();
    for (const std::uint32_t bi : blocks) {
      const BlockRecord& b = idx.blocks[bi];
      const std::uint32_t w = owner[b.rank];
      auto it =
          std::upper_bound(dir->begin(), dir->end(), w, [](std::uint32_t x, const DirEntry& e) { return x < e.first; });
      if (it == dir->begin() || w >= std::prev(it)->first + static_cast<std::uint64_t>(std::prev(it)->writers))
        return corrupt("directory of '" + name + "': writer " + num(w) + " holds a block of it (rank " + num(b.rank) +
                       ") but is in no entry");
      if (!box_inside(b, *std::prev(it)))
        return corrupt("directory of '" + name + "': the block of rank " + num(b.rank) + " (writer " + num(w) +
                       ") lies outside its entry's box");
    }
  }
  return idx;
}

}  // namespace ckpt::detail
