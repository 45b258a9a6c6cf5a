#include "base/layout.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace ckpt::detail {

bool is_integer_dtype(DType t) noexcept {
  switch (t) {
    case DType::i8:
    case DType::i16:
    case DType::i32:
    case DType::i64:
    case DType::u8:
    case DType::u16:
    case DType::u32:
    case DType::u64: return true;
    default: return false;
  }
}

bool widen_integer(const std::uint8_t* p, DType t, std::int64_t& out) noexcept {
  std::uint64_t u = 0;
  switch (t) {  // the integer of its width and signedness, widened
    case DType::i8: {
      std::int8_t x;
      std::memcpy(&x, p, 1);
      out = x;
      return true;
    }
    case DType::i16: {
      std::int16_t x;
      std::memcpy(&x, p, 2);
      out = x;
      return true;
    }
    case DType::i32: {
      std::int32_t x;
      std::memcpy(&x, p, 4);
      out = x;
      return true;
    }
    case DType::i64: {
      std::memcpy(&out, p, 8);
      return true;
    }
    case DType::u8: {
      std::uint8_t x;
      std::memcpy(&x, p, 1);
      u = x;
      break;
    }
    case DType::u16: {
      std::uint16_t x;
      std::memcpy(&x, p, 2);
      u = x;
      break;
    }
    case DType::u32: {
      std::uint32_t x;
      std::memcpy(&x, p, 4);
      u = x;
      break;
    }
    case DType::u64: {
      std::memcpy(&u, p, 8);
      break;
    }
    default: return false;
  }
  if (u > static_cast<std::uint64_t>(INT64_MAX)) return false;
  out = static_cast<std::int64_t>(u);
  return true;
}

const char* region_kind_name(RegionKind k) noexcept {
  switch (k) {
    case RegionKind::local: return "local";
    case RegionKind::global: return "global";
    case RegionKind::scalar: return "scalar";
    case RegionKind::joined: return "joined";
  }
  return "?";
}

std::uint64_t Region::elements() const {
  std::uint64_t n = 1;
  for (auto c : count) n *= c;
  return n;
}

std::vector<MemoryPart> memory_parts(const Region& r) {
  const std::uint64_t esize = dtype_size(r.dtype);
  if (!r.pieces) {
    MemoryPart whole{r.ptr, r.count, r.mem_start, r.mem_alloc, 0, 0, r.bytes()};
    return {std::move(whole)};
  }
  std::vector<MemoryPart> parts;
  parts.reserve(r.pieces->size());
  std::uint64_t row_bytes = esize;
  for (std::size_t d = 1; d < r.count.size(); ++d) row_bytes *= r.count[d];
  std::uint64_t first = 0;
  for (const PieceRef& p : *r.pieces) {
    if (p.rows == 0) continue;
    MemoryPart part{p.ptr, r.count, r.mem_start, r.mem_alloc, first, first * row_bytes, p.rows * row_bytes};
    part.count[0] = p.rows;
    if (!part.mem_alloc.empty()) part.mem_alloc[0] = p.rows;
    first += p.rows;
    parts.push_back(std::move(part));
  }
  return parts;
}

static std::uint64_t round_up(std::uint64_t x, std::uint64_t a) { return (x + a - 1) / a * a; }

std::size_t StreamPlan::segment_of(std::uint64_t off) const {
  for (std::size_t i = segments.size(); i-- > 0;)
    if (segments[i].begin <= off && off < segments[i].end) return i;
  return 0;
}

std::size_t StreamPlan::segment_of_var(std::uint32_t var) const {
  for (std::size_t i = 0; i < segments.size(); ++i)
    if (segments[i].group == vars[var].group) return i;
  return 0;
}

StreamPlan plan_stream(const std::vector<Region>& regions, std::uint64_t alignment, std::uint64_t chunk_bytes,
                       std::uint32_t ngroups, std::uint64_t piece_bytes) {
  constexpr std::uint64_t kLarge = 64 * 1024;
  StreamPlan p;
  std::uint64_t off = 0;
  for (std::uint32_t g = 0; g < ngroups; ++g) {
    off = round_up(off, chunk_bytes);
    Segment seg{g, off, off};
    for (const Region& r : regions) {
      if (r.group != g) continue;
      BlockPlan b;
      b.var = static_cast<std::uint32_t>(p.vars.size());
      b.length = r.bytes();
      if (piece_bytes > 0 && b.length >= piece_bytes)
        off = round_up(off, std::max(alignment, piece_bytes));  // incremental: pieces never straddle chunks
      else
        off = round_up(off, b.length >= kLarge ? alignment : 8);
      b.offset = off;
      b.mem = r.mem;
      if (r.pieces) b.parts = memory_parts(r);
      off += b.length;
      p.payload += b.length;
      p.vars.push_back(r);
      p.blocks.push_back(std::move(b));
    }
    seg.end = off;
    p.segments.push_back(seg);
  }
  p.bytes = off;
  return p;
}

Status check_name(const std::string& name) {
  auto bad = [&](const std::string& why) {
    return Status(Code::invalid_argument, "bad region name '" + name + "': " + why);
  };
  if (name.empty()) return bad("empty");
  if (name.size() > 255) return bad("longer than 255 bytes");
  if (name.front() == '/') return bad("starts with '/'");
  for (char c : name) {
    bool okc = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
               c == '/' || c == '-';
    if (!okc) return bad("only letters, digits and _ . / - are allowed");
  }
  std::size_t pos = 0;
  while (pos <= name.size()) {
    std::size_t e = name.find('/', pos);
    if (e == std::string::npos) e = name.size();
    std::string comp = name.substr(pos, e - pos);
    if (comp.empty()) return bad("empty path component");
    if (comp == ".." || comp == ".") return bad("'.' and '..' components are not allowed");
    pos = e + 1;
  }
  return Status::OK();
}

}  // namespace ckpt::detail
