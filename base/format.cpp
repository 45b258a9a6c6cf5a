// Format v1 codec. Little-endian on disk; this build supports little-endian hosts only (checked).
#include "base/format.hpp"

#include "base/bytes.hpp"
#include "base/hash.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_set>

namespace ckpt::detail {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "format v1 codec assumes a little-endian host");

constexpr char kDataMagic[8] = {'C', 'K', 'P', 'T', 'D', 'A', 'T', 'A'};
constexpr char kIndexMagic[8] = {'C', 'K', 'P', 'T', 'I', 'N', 'D', 'X'};
constexpr char kEndMagic[8] = {'C', 'K', 'P', 'T', 'E', 'N', 'D', '1'};
constexpr std::uint32_t kBlockFlagStats = 1;   // BLOCK flags bit 0: min/max present; other bits must be 0
constexpr std::uint32_t kBlockFlagPieces = 2;  // BLOCK2 flags bit 1: pieced (incremental)

constexpr std::size_t kMinRefBytes = 4 + 4 + 8 + 8 + 4;  // a REF with an empty name (refused, but counted so)

Status corrupt(const std::string& what) { return Status(Code::corrupt, what); }

bool valid_dtype(std::uint8_t t) { return t >= 1 && t <= static_cast<std::uint8_t>(DType::bytes); }

bool mul_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t& out) { return __builtin_mul_overflow(a, b, &out); }

bool valid_file_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos && s.find('\0') == std::string::npos;
}

/// The pieces of block `i` after its checksum (its flag bit 1 set, pieces allowed): `u32 log2, u32 0`, then
/// ceil(length / 2^log2) PIECE records. `b` has its other fields.
Status get_pieces(ByteReader& r, const PieceLimits& limits, std::uint64_t i, BlockRecord& b) {
  const std::string what = "pieced block " + std::to_string(i);
  std::uint32_t log2 = 0, zero = 0;
  if (!r.get(log2) || !r.get(zero)) return corrupt(what + ": bad piece header");
  if (log2 < kMinPieceLog2 || log2 > kMaxPieceLog2)
    return corrupt(what + " has pieces of 2^" + std::to_string(log2) + " bytes (2^16 to 2^24)");
  if (zero != 0) return corrupt(what + " has a non-zero reserved field");
  if (b.length == 0) return corrupt(what + " is empty (an empty block has no pieces)");
  if (b.offset != 0) return corrupt(what + " has offset " + std::to_string(b.offset) + " (0 for a pieced block)");
  const std::uint64_t n = piece_count(b.length, log2);
  if (n > r.left() / kPieceRecordBytes)  // before anything of that size is allocated
    return corrupt(what + ": its " + std::to_string(n) + " pieces (" + std::to_string(b.length) +
                   " bytes) do not fit in the index");
  b.piece_log2 = log2;
  b.pieces.resize(static_cast<std::size_t>(n));
  for (std::size_t k = 0; k < b.pieces.size(); ++k) {
    PieceRecord& pc = b.pieces[k];
    if (!r.get(pc.ref) || !r.get(zero) || !r.get(pc.offset) || !r.get(pc.hash.lo) || !r.get(pc.hash.hi))
      return corrupt(what + ": bad piece " + std::to_string(k));
    if (zero != 0) return corrupt(what + ", piece " + std::to_string(k) + " has a non-zero reserved field");
    if (pc.ref > limits.nrefs)
      return corrupt(what + ", piece " + std::to_string(k) + " names REF " + std::to_string(pc.ref) + " of " +
                     std::to_string(limits.nrefs));
    std::uint64_t end = 0;
    if (__builtin_add_overflow(pc.offset, piece_bytes(b, k), &end))
      return corrupt(what + ", piece " + std::to_string(k) + ": its offset overflows");
  }
  return Status::OK();
}

/// The REFs of the transfer encoding (after the writer map) into `idx`, whose blocks are decoded: unique, of
/// kind 0 a step below the index's, every piece's ref naming one; and something incremental at all (else the
/// index is version 1's). `pieced`: whether a block is.
Status get_transfer_refs(ByteReader& r, bool pieced, Index& idx) {
  auto fail = [&](const std::string& what) {
    return corrupt("index: " + what + (r.error().empty() ? "" : " (" + r.error() + ")"));
  };
  std::uint32_t nrefs = 0;
  if (!r.count(nrefs, kMinRefBytes, 1u << 24)) return fail("bad REF count");
  idx.refs.resize(nrefs);
  std::unordered_set<std::string> keys;
  keys.reserve(nrefs);
  for (RefFile& f : idx.refs) {
    const Status st = get_ref_record(r, f);
    if (!st.ok()) return fail(st.message());
    if (f.kind == 0 && f.step >= idx.step)
      return fail("REF of step " + std::to_string(f.step) + ", not before step " + std::to_string(idx.step));
    if (!keys.insert(ref_key(f)).second) return fail("REF '" + f.name + "' listed twice");
  }
  if (nrefs == 0 && !pieced) return fail("transfer encoding of an index without references or pieces");
  for (std::size_t i = 0; i < idx.blocks.size(); ++i)
    for (const PieceRecord& pc : idx.blocks[i].pieces)
      if (pc.ref > nrefs)
        return fail("block " + std::to_string(i) + " has a piece naming REF " + std::to_string(pc.ref) + " of " +
                    std::to_string(nrefs));
  return Status::OK();
}

}  // namespace

// ---- data header ----------------------------------------------------------------------------------

std::uint64_t checkpoint_id(std::uint64_t run_id, std::int64_t step) {
  return hash64(&run_id, sizeof run_id) ^ static_cast<std::uint64_t>(step);
}

std::vector<std::uint8_t> encode_data_header(const DataHeader& h) {
  ByteWriter w;
  w.raw(kDataMagic, 8);
  w.put<std::uint32_t>(kFormatVersion);
  w.put<std::uint32_t>(0x01020304u);  // endianness marker
  w.put<std::int64_t>(h.step);
  w.put<std::uint32_t>(h.writer);
  w.put<std::uint32_t>(h.nranks);
  w.put<std::uint64_t>(h.ckpt_id);
  w.put<std::uint64_t>(h.data_offset);
  auto& b = w.bytes();
  b.resize(kDataHeaderBytes - 8, 0);
  std::uint64_t hsh = hash64(b.data(), b.size());
  w.put<std::uint64_t>(hsh);
  return b;
}

Result<DataHeader> decode_data_header(const std::uint8_t* p, std::size_t n) {
  if (n < kDataHeaderBytes) return corrupt("data header truncated");
  if (std::memcmp(p, kDataMagic, 8) != 0) return corrupt("data file magic missing");
  std::uint64_t stored = 0;
  std::memcpy(&stored, p + kDataHeaderBytes - 8, 8);
  if (stored != hash64(p, kDataHeaderBytes - 8)) return corrupt("data header checksum mismatch");
  ByteReader r(p + 8, kDataHeaderBytes - 16);
  std::uint32_t version = 0, endian = 0;
  DataHeader h;
  r.get(version);
  r.get(endian);
  r.get(h.step);
  r.get(h.writer);
  r.get(h.nranks);
  r.get(h.ckpt_id);
  r.get(h.data_offset);
  std::uint64_t reserved = 0;
  r.get(reserved);
  if (version != kFormatVersion) return corrupt("data file version " + std::to_string(version) + " unsupported");
  if (endian != 0x01020304u) return corrupt("data file written with another byte order");
  if (reserved != 0) return corrupt("data header reserved field is not zero");
  if (h.nranks == 0 || h.writer >= h.nranks) return corrupt("data header writer rank out of range");
  return h;
}

// ---- index ----------------------------------------------------------------------------------------

long Index::find_var(const std::string& name) const {
  for (std::size_t i = 0; i < vars.size(); ++i)
    if (vars[i].name == name) return static_cast<long>(i);
  return -1;
}

bool Index::incremental() const {
  if (!refs.empty()) return true;
  for (const BlockRecord& b : blocks)
    if (b.pieced()) return true;
  return false;
}

std::uint64_t piece_count(std::uint64_t length, std::uint32_t log2) {
  return (length >> log2) + ((length & ((std::uint64_t{1} << log2) - 1)) != 0);
}

std::uint64_t piece_begin(const BlockRecord& b, std::size_t i) { return static_cast<std::uint64_t>(i) << b.piece_log2; }

std::uint64_t piece_bytes(const BlockRecord& b, std::size_t i) {
  const std::uint64_t begin = piece_begin(b, i);
  return std::min<std::uint64_t>(b.length - begin, std::uint64_t{1} << b.piece_log2);
}

std::uint64_t Index::payload_bytes() const {
  std::uint64_t n = 0;
  for (auto& b : blocks) n += b.length;
  return n;
}

IndexLookup::IndexLookup(const Index& idx) : m_blocks(idx.vars.size()) {
  m_by_name.reserve(idx.vars.size());
  for (std::size_t i = 0; i < idx.vars.size(); ++i) m_by_name.emplace(idx.vars[i].name, static_cast<long>(i));
  for (std::size_t b = 0; b < idx.blocks.size(); ++b)
    if (idx.blocks[b].var < m_blocks.size()) m_blocks[idx.blocks[b].var].push_back(static_cast<std::uint32_t>(b));
}

long IndexLookup::var(const std::string& name) const {
  auto it = m_by_name.find(name);
  return it == m_by_name.end() ? -1 : it->second;
}

// ---- records (shared with the version-2 index) -------------------------------------------------

void put_file_record(ByteWriter& w, const FileRecord& f) {
  w.str(f.name);
  w.put<std::uint32_t>(f.writer);
  w.put<std::uint64_t>(f.bytes);
}

void put_var_record(ByteWriter& w, const VarRecord& v) {
  w.str(v.name);
  w.put<std::uint8_t>(static_cast<std::uint8_t>(v.dtype));
  w.put<std::uint8_t>(static_cast<std::uint8_t>(v.kind));
  w.put<std::uint8_t>(v.uniform ? 1 : 0);
  w.put<std::uint8_t>(0);
  w.put<std::uint32_t>(v.ndim);
  for (auto g : v.global) w.put<std::uint64_t>(g);
  w.attrs(v.attrs);
}

void put_block_record(ByteWriter& w, const BlockRecord& b) {
  w.put<std::uint32_t>(b.var);
  w.put<std::uint32_t>(b.rank);
  w.put<std::uint32_t>(b.file);
  w.put<std::uint32_t>((b.has_stats ? kBlockFlagStats : 0u) | (b.pieced() ? kBlockFlagPieces : 0u));
  w.put<std::uint64_t>(b.offset);
  w.put<std::uint64_t>(b.length);
  for (auto s : b.start) w.put<std::uint64_t>(s);
  for (auto c : b.count) w.put<std::uint64_t>(c);
  w.put<std::uint64_t>(b.min_bits);
  w.put<std::uint64_t>(b.max_bits);
  w.put<std::uint64_t>(b.checksum);
  if (!b.pieced()) return;
  w.put<std::uint32_t>(b.piece_log2);
  w.put<std::uint32_t>(0);
  for (const PieceRecord& pc : b.pieces) {
    w.put<std::uint32_t>(pc.ref);
    w.put<std::uint32_t>(0);
    w.put<std::uint64_t>(pc.offset);
    w.put<std::uint64_t>(pc.hash.lo);
    w.put<std::uint64_t>(pc.hash.hi);
  }
}

void put_ref_record(ByteWriter& w, const RefFile& f) {
  w.put<std::uint32_t>(f.kind);
  w.put<std::uint32_t>(0);
  w.put<std::int64_t>(f.step);
  w.put<std::uint64_t>(f.ckpt_id);
  w.str(f.name);
}

std::string ref_key(const RefFile& f) {
  std::string k(20, '\0');
  std::memcpy(&k[0], &f.kind, 4);
  std::memcpy(&k[4], &f.step, 8);
  std::memcpy(&k[12], &f.ckpt_id, 8);
  return k + f.name;
}

Status get_ref_record(ByteReader& r, RefFile& f) {
  std::uint32_t zero = 0;
  if (!r.get(f.kind) || !r.get(zero) || !r.get(f.step) || !r.get(f.ckpt_id) || !r.str(f.name, 4096))
    return corrupt("bad REF");
  if (f.kind > 1) return corrupt("REF of unknown kind " + std::to_string(f.kind));
  if (zero != 0) return corrupt("REF with a non-zero reserved field");
  if (f.kind == 1 && f.ckpt_id != 0) return corrupt("REF of a segment with a checkpoint id");
  if (f.step < 0) return corrupt("REF of " + std::string(f.kind == 0 ? "step " : "segment ") + std::to_string(f.step));
  if (!valid_file_name(f.name)) return corrupt("REF file name '" + f.name + "' not allowed");
  return Status::OK();
}

Status get_file_record(ByteReader& r, std::uint32_t nranks, FileRecord& fr) {
  if (!r.str(fr.name, 4096) || !r.get(fr.writer) || !r.get(fr.bytes)) return corrupt("bad file record");
  if (!valid_file_name(fr.name)) return corrupt("file name '" + fr.name + "' not allowed");
  if (fr.writer >= nranks) return corrupt("file '" + fr.name + "' names writer rank " + std::to_string(fr.writer));
  return Status::OK();
}

Status get_var_record(ByteReader& r, VarRecord& v) {
  std::uint8_t dt = 0, kind = 0, uni = 0, pad = 0;
  if (!r.str(v.name, 255) || !r.get(dt) || !r.get(kind) || !r.get(uni) || !r.get(pad) || !r.get(v.ndim))
    return corrupt("bad variable record");
  if (!check_name(v.name).ok()) return corrupt("variable name '" + v.name + "' not allowed");
  if (!valid_dtype(dt)) return corrupt("variable '" + v.name + "' has unknown dtype " + std::to_string(dt));
  if (kind > 3) return corrupt("variable '" + v.name + "' has unknown kind");
  if (v.ndim > kMaxDims) return corrupt("variable '" + v.name + "' has too many dimensions");
  if (uni > 1) return corrupt("variable '" + v.name + "' has uniform = " + std::to_string(uni) + " (0 or 1)");
  if (pad != 0) return corrupt("variable '" + v.name + "' has a non-zero reserved byte");
  v.dtype = static_cast<DType>(dt);
  v.kind = static_cast<RegionKind>(kind);
  v.uniform = uni != 0;
  if (v.kind == RegionKind::scalar && v.ndim != 0) return corrupt("scalar '" + v.name + "' has dimensions");
  if (v.kind == RegionKind::joined && v.ndim == 0) return corrupt("joined array '" + v.name + "' has no dimensions");
  v.global.clear();
  if (has_global_shape(v.kind)) {
    v.global.resize(v.ndim);
    for (auto& g : v.global)
      if (!r.get(g)) return corrupt("bad global shape");
    std::uint64_t total = dtype_size(v.dtype);
    for (auto g : v.global)
      if (mul_overflows(total, g, total)) return corrupt("global shape of '" + v.name + "' overflows");
  }
  if (!r.attrs(v.attrs, kMaxAttrs)) return corrupt("bad attributes of '" + v.name + "'");
  std::unordered_set<std::string> keys;  // annotate() replaces a key's value: a key twice is forged
  for (const auto& kv : v.attrs)
    if (!keys.insert(kv.first).second)
      return corrupt("variable '" + v.name + "' has attribute '" + kv.first + "' twice");
  return Status::OK();
}

Status get_block_record(ByteReader& r, std::size_t nvars, const std::function<const VarRecord&(std::uint32_t)>& var,
                        std::size_t nfiles, std::uint32_t nranks, std::uint64_t i, BlockRecord& b,
                        const PieceLimits& pieces) {
  std::uint32_t flags = 0;
  if (!r.get(b.var) || !r.get(b.rank) || !r.get(b.file) || !r.get(flags) || !r.get(b.offset) || !r.get(b.length))
    return corrupt("bad block record " + std::to_string(i));
  if (b.var >= nvars || b.file >= nfiles || b.rank >= nranks)
    return corrupt("block " + std::to_string(i) + " refers to a missing variable, file or rank");
  const std::uint32_t known = kBlockFlagStats | (pieces.allowed ? kBlockFlagPieces : 0u);
  if ((flags & ~known) != 0) return corrupt("block " + std::to_string(i) + " has unknown flag bits");
  const VarRecord& v = var(b.var);
  b.start.resize(v.ndim);
  b.count.resize(v.ndim);
  for (auto& s : b.start)
    if (!r.get(s)) return corrupt("bad block start");
  for (auto& c : b.count)
    if (!r.get(c)) return corrupt("bad block count");
  if (!r.get(b.min_bits) || !r.get(b.max_bits) || !r.get(b.checksum)) return corrupt("bad block tail");
  b.has_stats = (flags & kBlockFlagStats) != 0;
  std::uint64_t elems = 1, bytes = 0;
  for (std::uint32_t d = 0; d < v.ndim; ++d) {
    if (mul_overflows(elems, b.count[d], elems)) return corrupt("block extents overflow");
    if (has_global_shape(v.kind)) {
      std::uint64_t end = 0;
      if (__builtin_add_overflow(b.start[d], b.count[d], &end) || end > v.global[d])
        return corrupt("block " + std::to_string(i) + " of '" + v.name + "' lies outside the global shape");
      if (v.kind == RegionKind::joined && d > 0 && (b.start[d] != 0 || b.count[d] != v.global[d]))
        return corrupt("block " + std::to_string(i) + " of joined array '" + v.name + "' is not a set of whole rows");
    } else if (b.start[d] != 0) {
      return corrupt("local block with a non-zero start");
    }
  }
  if (mul_overflows(elems, dtype_size(v.dtype), bytes) || bytes != b.length)
    return corrupt("block " + std::to_string(i) + " of '" + v.name + "' length disagrees with its extents");
  std::uint64_t end = 0;
  if (__builtin_add_overflow(b.offset, b.length, &end)) return corrupt("block offset overflows");
  b.piece_log2 = 0;
  b.pieces.clear();
  if ((flags & kBlockFlagPieces) == 0) return Status::OK();
  return get_pieces(r, pieces, i, b);
}

std::vector<std::uint8_t> encode_index(const Index& idx) {
  const bool transfer = idx.incremental();
  const std::uint32_t version = transfer ? kTransferIndexVersion : kFormatVersion;
  ByteWriter w;
  w.raw(kIndexMagic, 8);
  w.put<std::uint32_t>(version);
  w.put<std::uint32_t>(0);  // flags
  const std::size_t body_start = w.bytes().size();
  w.put<std::int64_t>(idx.step);
  w.put<std::uint32_t>(idx.nranks);
  w.put<std::uint64_t>(idx.ckpt_id);
  w.put<double>(idx.created_unix);
  w.str(idx.transport);
  w.attrs(idx.attrs);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(idx.files.size()));
  for (auto& f : idx.files) put_file_record(w, f);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(idx.vars.size()));
  for (auto& v : idx.vars) put_var_record(w, v);
  w.put<std::uint64_t>(idx.blocks.size());
  for (auto& b : idx.blocks) put_block_record(w, b);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(idx.rank_file.size()));
  for (auto f : idx.rank_file) w.put<std::uint32_t>(f);
  if (transfer) {
    w.put<std::uint32_t>(static_cast<std::uint32_t>(idx.refs.size()));
    for (const RefFile& f : idx.refs) put_ref_record(w, f);
  }
  const std::uint64_t body_len = w.bytes().size() - body_start;
  const std::uint64_t body_hash = hash64(w.bytes().data() + body_start, body_len);
  w.put<std::uint64_t>(body_start);
  w.put<std::uint64_t>(body_len);
  w.put<std::uint64_t>(body_hash);
  w.put<std::uint32_t>(version);
  w.put<std::uint32_t>(0);
  w.raw(kEndMagic, 8);
  return std::move(w.bytes());
}

Status check_joined_rows(const Index& idx) {
  std::vector<std::uint64_t> next(idx.vars.size(), 0);
  std::vector<std::uint32_t> last_rank(idx.vars.size(), 0);
  std::vector<bool> seen(idx.vars.size(), false);
  for (std::size_t i = 0; i < idx.blocks.size(); ++i) {
    const BlockRecord& b = idx.blocks[i];
    const VarRecord& v = idx.vars[b.var];
    if (v.kind != RegionKind::joined) continue;
    if (b.start[0] != next[b.var] || (seen[b.var] && b.rank <= last_rank[b.var]))
      return corrupt("index: block " + std::to_string(i) + " of joined array '" + v.name + "' starts at row " +
                     std::to_string(b.start[0]) + ", expected row " + std::to_string(next[b.var]) +
                     " (the rows of the ranks must follow each other in rank order)");
    next[b.var] += b.count[0];
    last_rank[b.var] = b.rank;
    seen[b.var] = true;
  }
  for (std::size_t v = 0; v < idx.vars.size(); ++v)
    if (idx.vars[v].kind == RegionKind::joined && next[v] != idx.vars[v].global[0])
      return corrupt("index: joined array '" + idx.vars[v].name + "' has " + std::to_string(idx.vars[v].global[0]) +
                     " rows but its blocks hold " + std::to_string(next[v]));
  return Status::OK();
}

std::uint32_t index_header_version(const std::uint8_t* p, std::size_t n) {
  std::uint32_t version = 0;
  if (n < kIndexHeaderBytes || std::memcmp(p, kIndexMagic, 8) != 0) return 0;
  std::memcpy(&version, p + 8, 4);
  return version;
}

Result<Index> decode_index(const std::uint8_t* p, std::size_t n) {
  if (n < kIndexHeaderBytes + kIndexFooterBytes) return corrupt("index truncated (" + std::to_string(n) + " bytes)");
  if (std::memcmp(p, kIndexMagic, 8) != 0) return corrupt("index magic missing");
  const std::uint8_t* f = p + n - kIndexFooterBytes;
  if (std::memcmp(f + 32, kEndMagic, 8) != 0) return corrupt("index footer magic missing (torn write?)");
  std::uint64_t body_off = 0, body_len = 0, body_hash = 0;
  std::uint32_t version = 0, hversion = 0, hflags = 0, freserved = 0;
  std::memcpy(&hflags, p + 12, 4);
  std::memcpy(&freserved, f + 28, 4);
  if (hflags != 0 || freserved != 0) return corrupt("index flags unknown to this version");
  std::memcpy(&body_off, f, 8);
  std::memcpy(&body_len, f + 8, 8);
  std::memcpy(&body_hash, f + 16, 8);
  std::memcpy(&version, f + 24, 4);
  std::memcpy(&hversion, p + 8, 4);
  if (version != hversion || (version != kFormatVersion && version != kTransferIndexVersion))
    return corrupt("index version " + std::to_string(version != kFormatVersion ? version : hversion) +
                   " unsupported (this build reads " + std::to_string(kFormatVersion) + ")");
  const bool transfer = version == kTransferIndexVersion;
  if (body_off != kIndexHeaderBytes || body_len != n - kIndexHeaderBytes - kIndexFooterBytes)
    return corrupt("index footer offsets inconsistent with file size");
  if (hash64(p + body_off, body_len) != body_hash) return corrupt("index checksum mismatch");

  ByteReader r(p + body_off, body_len);
  Index idx;
  auto fail = [&](const std::string& what) {
    return corrupt("index: " + what + (r.error().empty() ? "" : " (" + r.error() + ")"));
  };
  if (!r.get(idx.step) || !r.get(idx.nranks) || !r.get(idx.ckpt_id) || !r.get(idx.created_unix) ||
      !r.str(idx.transport, 256) || !r.attrs(idx.attrs, kMaxAttrs))
    return fail("bad checkpoint record");
  if (idx.nranks == 0) return fail("zero ranks");
  std::uint32_t nfiles = 0;
  if (!r.count(nfiles, 16, 1u << 24)) return fail("bad file count");
  idx.files.resize(nfiles);
  for (auto& fr : idx.files) {
    const Status st = get_file_record(r, idx.nranks, fr);
    if (!st.ok()) return fail(st.message());
  }
  std::uint32_t nvars = 0;
  if (!r.count(nvars, 16, 1u << 28)) return fail("bad variable count");
  idx.vars.resize(nvars);
  std::unordered_set<std::string> names;
  names.reserve(nvars);
  for (auto& v : idx.vars) {
    const Status st = get_var_record(r, v);
    if (!st.ok()) return fail(st.message());
    if (!names.insert(v.name).second) return fail("variable '" + v.name + "' appears twice");
  }
  std::uint64_t nblocks = 0;
  if (!r.count(nblocks, 56, std::numeric_limits<std::uint32_t>::max()))
    return fail("bad block count");  // 56: a 0-d block
  idx.blocks.resize(nblocks);
  std::unordered_set<std::uint64_t> var_rank;  // a variable has at most one block per rank
  var_rank.reserve(static_cast<std::size_t>(nblocks));
  auto var_of = [&idx](std::uint32_t v) -> const VarRecord& { return idx.vars[v]; };
  // The transfer encoding's REFs follow the writer map: pieces' refs are checked once they are known.
  const PieceLimits pieces{transfer, std::numeric_limits<std::uint32_t>::max()};
  bool pieced = false;
  for (std::uint64_t i = 0; i < nblocks; ++i) {
    auto& b = idx.blocks[i];
    const Status st = get_block_record(r, idx.vars.size(), var_of, idx.files.size(), idx.nranks, i, b, pieces);
    pieced = pieced || b.pieced();
    if (!st.ok()) return fail(st.message());
    if (!var_rank.insert((static_cast<std::uint64_t>(b.var) << 32) | b.rank).second)
      return fail("rank " + std::to_string(b.rank) + " has two blocks of '" + idx.vars[b.var].name + "'");
  }
  CKPT_RETURN_IF_ERROR(check_joined_rows(idx));
  std::uint32_t nmap = 0;
  if (!r.count(nmap, 4, 1u << 24)) return fail("bad writer map");
  if (nmap != idx.nranks) return fail("writer map size differs from the rank count");
  idx.rank_file.resize(nmap);
  for (auto& m : idx.rank_file) {
    if (!r.get(m)) return fail("bad writer map entry");
    if (m >= idx.files.size()) return fail("writer map names a missing file");
  }
  if (transfer) CKPT_RETURN_IF_ERROR(get_transfer_refs(r, pieced, idx));
  if (r.left() != 0) return fail("trailing bytes in index body");
  return idx;
}

Status check_stored_index_version(const std::uint8_t* p, std::size_t n) {
  const std::uint32_t v = index_header_version(p, n);
  if (v == 0 || v == kFormatVersion || v == 2) return Status::OK();
  return corrupt("index version " + std::to_string(v) + " unsupported (an index file is version 1 or 2)");
}

std::string human_bytes(std::uint64_t n) {
  if (n < 1024) return std::to_string(n) + " B";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(n) / 1024;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace ckpt::detail
