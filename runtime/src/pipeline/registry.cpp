// The region registry: protect, update, unprotect, annotate.
#include "runtime/src/pipeline/registry.hpp"

#include <fnmatch.h>

#include "base/box.hpp"
#include "base/format.hpp"

namespace ckpt::detail {

Region* Registry::find(const std::string& name) {
  auto it = m_region_at.find(name);
  return it == m_region_at.end() ? nullptr : &m_regions[it->second];
}

namespace {
/// `empty_ok`: a local array may have no element (a Source with a resize: restart() sizes it).
Status check_extents(const std::string& name, DType dtype, RegionKind kind, const Shape& global, const Shape& start,
                     const Shape& count, bool empty_ok = false) {
  auto bad = [&](const std::string& why) { return Status(Code::invalid_argument, "region '" + name + "': " + why); };
  if (count.size() > kMaxDims) return bad("more than 16 dimensions");
  if (kind == RegionKind::global) {
    if (global.empty()) return bad("a Block needs a global shape with at least one dimension");
    if (global.size() != start.size() || global.size() != count.size())
      return bad("Block global, start and count must have the same number of dimensions");
    std::uint64_t total = 1;
    for (std::size_t d = 0; d < global.size(); ++d) {
      if (global[d] == 0) return bad("zero-size global dimension " + std::to_string(d));
      if (start[d] > global[d] || count[d] > global[d] - start[d])
        return bad("Block box exceeds the global shape in dimension " + std::to_string(d));
      if (__builtin_mul_overflow(total, global[d], &total)) return bad("global shape overflows");
    }
    if (__builtin_mul_overflow(total, dtype_size(dtype), &total))
      return bad("global shape overflows: its size in bytes exceeds 2^64");
    return Status::OK();
  }
  if (kind == RegionKind::joined) {
    if (count.empty()) return bad("a joined array needs at least one dimension (its rows)");
    std::uint64_t row = 1;
    for (std::size_t d = 1; d < count.size(); ++d) {
      if (count[d] == 0) return bad("zero-size dimension " + std::to_string(d) + " of a joined array's rows");
      if (__builtin_mul_overflow(row, count[d], &row)) return bad("shape overflows");
    }
    if (__builtin_mul_overflow(row, count[0], &row) || __builtin_mul_overflow(row, dtype_size(dtype), &row))
      return bad("shape overflows: its size in bytes exceeds 2^64");
    return Status::OK();  // zero rows are allowed: a rank may contribute nothing
  }
  std::uint64_t total = 1;
  for (auto c : count) {
    if (c == 0 && !empty_ok)
      return bad(
          "zero-size dimension (a zero-size region cannot be restored; use a Block for "
          "arrays whose local part may be empty)");
    if (__builtin_mul_overflow(total, c, &total)) return bad("shape overflows");
  }
  if (__builtin_mul_overflow(total, dtype_size(dtype), &total))
    return bad("shape overflows: its size in bytes exceeds 2^64");
  return Status::OK();
}
}  // namespace

namespace {
/// The extents as the Region keeps them: a joined region's `start` is {first_row} or {} (balanced).
void set_extents(Region& r, Shape global, Shape start, Shape count) {
  if (r.kind == RegionKind::joined) {
    r.first_row = start.empty() ? kBalancedRows : start[0];
    start.clear();
  }
  r.global = std::move(global);
  r.start = std::move(start);
  r.count = std::move(count);
}
}  // namespace

std::uint64_t Registry::bound(const Region& r) const {
  // As plan_stream pads: blocks of >= 64 KiB to `alignment`, smaller ones to 8 bytes.
  return r.bytes() + (r.bytes() >= 64 * 1024 ? m_alignment : 8);
}

/// Checks that a region with bytes has a pointer and sets its memory kind from the device (host for
/// a null pointer of an empty region). `what` prefixes the classification error ("region 'x'").
Status Registry::locate(Region& r, const char* what) const {
  if (r.pieces) return locate_pieces(r, what);
  if (r.bytes() > 0 && r.ptr == nullptr) return Status(Code::invalid_argument, "region '" + r.name + "': null pointer");
  r.mem = MemoryKind::host;
  if (r.ptr == nullptr) return Status::OK();
  auto mem = m_device.classify(r.ptr);
  if (!mem.ok()) return mem.status().with_context(std::string(what) + " '" + r.name + "'");
  r.mem = mem.value();
  return Status::OK();
}

/// As locate(), for every piece of a scattered region: all of them in one kind of memory.
Status Registry::locate_pieces(Region& r, const char* what) const {
  r.mem = MemoryKind::host;
  bool first = true;
  for (std::size_t i = 0; i < r.pieces->size(); ++i) {
    const PieceRef& p = (*r.pieces)[i];
    if (p.rows == 0) continue;
    if (p.ptr == nullptr)
      return Status(Code::invalid_argument, "region '" + r.name + "': piece " + std::to_string(i) + " has " +
                                                std::to_string(p.rows) + " rows and a null pointer");
    auto mem = m_device.classify(p.ptr);
    if (!mem.ok())
      return mem.status().with_context(std::string(what) + " '" + r.name + "', piece " + std::to_string(i));
    if (!first && mem.value() != r.mem)
      return Status(Code::invalid_argument, "region '" + r.name + "': piece " + std::to_string(i) + " is in " +
                                                memory_kind_name(mem.value()) + " memory, the pieces before it in " +
                                                memory_kind_name(r.mem) + " memory (one kind per region)");
    r.mem = mem.value();
    first = false;
  }
  return Status::OK();
}

Status Registry::set_scattered(const std::string& name, DType dtype, std::vector<PieceRef> pieces, const Shape& row,
                               const Shape& start, const Shape& alloc, Upsert mode) {
  const char* call = mode == Upsert::protect ? "protect" : mode == Upsert::update ? "update" : "protect_or_update";
  auto bad = [&](Code code, const std::string& why) {
    return Status(code, std::string(call) + ": region '" + name + "' " + why);
  };
  Region* have = find(name);
  if (have != nullptr && mode == Upsert::protect) return bad(Code::invalid_argument, "is already protected");
  if (have == nullptr && mode == Upsert::update) return bad(Code::not_found, "is not protected");
  Region n;
  if (have != nullptr) {
    if (!have->pieces)
      return bad(Code::invalid_argument, std::string("was protected as a ") + region_kind_name(have->kind) +
                                             " region, not as Scattered pieces; its kind cannot change");
    if (mode == Upsert::either && have->dtype != dtype)
      return bad(Code::invalid_argument, std::string("was protected as ") + dtype_name(have->dtype) + ", not " +
                                             dtype_name(dtype) + "; its dtype cannot change");
    if (!std::equal(have->count.begin() + 1, have->count.end(), row.begin(), row.end()))
      return bad(Code::invalid_argument, "has rows of extents " +
                                             shape_text(Shape(have->count.begin() + 1, have->count.end())) + ", not " +
                                             shape_text(row) + "; they cannot change");
    n = *have;
  } else {
    CKPT_RETURN_IF_ERROR(check_name(name));
    if (dtype_size(dtype) == 0) return bad(Code::invalid_argument, "has an unknown dtype");
    n.name = name;
    n.dtype = dtype;
    n.kind = RegionKind::joined;
    n.group = group_of(name);
  }
  // The row's own dimensions, numbered as the caller gave them (check_extents counts the rows' too).
  if (row.size() >= kMaxDims)
    return bad(Code::invalid_argument, "has rows of " + std::to_string(row.size()) + " dimensions (at most " +
                                           std::to_string(kMaxDims - 1) + ")");
  for (std::size_t d = 0; d < row.size(); ++d)
    if (row[d] == 0)
      return bad(Code::invalid_argument, "has rows " + shape_text(row) + ": row extent " + std::to_string(d) + " is 0");
  std::uint64_t rows = 0;
  for (const PieceRef& p : pieces)
    if (__builtin_add_overflow(rows, p.rows, &rows)) return bad(Code::invalid_argument, "has more than 2^64 rows");
  Shape count{rows};
  count.insert(count.end(), row.begin(), row.end());
  CKPT_RETURN_IF_ERROR(check_extents(name, n.dtype, RegionKind::joined, {}, {}, count));
  // The selection describes one row; the Region's has the rows' dimension in front (see Region::pieces).
  if (row.empty() && !(start.empty() && alloc.empty()))
    return bad(Code::invalid_argument, "has rows of one element: a memory selection needs row extents");
  CKPT_RETURN_IF_ERROR(check_selection(name, row, start, alloc, dtype_size(n.dtype)).with_context(call));
  n.ptr = nullptr;
  n.count = std::move(count);
  n.first_row = kBalancedRows;
  n.mem_start.clear();
  n.mem_alloc.clear();
  if (!alloc.empty()) {
    n.mem_start = Shape{0};
    n.mem_start.insert(n.mem_start.end(), start.begin(), start.end());
    n.mem_alloc = Shape{rows};
    n.mem_alloc.insert(n.mem_alloc.end(), alloc.begin(), alloc.end());
  }
  n.pieces = std::make_shared<const std::vector<PieceRef>>(std::move(pieces));
  CKPT_RETURN_IF_ERROR(locate(n, call == std::string("update") ? "update: region" : "region"));
  if (m_check) CKPT_RETURN_IF_ERROR(m_check(n).with_context(call));
  if (have == nullptr) return add(std::move(n));
  m_stream_bound = m_stream_bound - bound(*have) + bound(n);
  *have = std::move(n);
  return Status::OK();
}

Status Registry::protect(const std::string& name, void* ptr, DType dtype, RegionKind kind, Shape global, Shape start,
                         Shape count) {
  CKPT_RETURN_IF_ERROR(check_name(name));
  if (find(name) != nullptr) return Status(Code::invalid_argument, "region '" + name + "' is already protected");
  if (dtype_size(dtype) == 0) return Status(Code::invalid_argument, "region '" + name + "': unknown dtype");
  CKPT_RETURN_IF_ERROR(check_extents(name, dtype, kind, global, start, count));
  Region r;
  r.name = name;
  r.ptr = ptr;
  r.dtype = dtype;
  r.kind = kind;
  set_extents(r, std::move(global), std::move(start), std::move(count));
  CKPT_RETURN_IF_ERROR(locate(r, "region"));
  r.group = group_of(name);
  if (m_check) CKPT_RETURN_IF_ERROR(m_check(r));
  return add(std::move(r));
}

std::uint32_t Registry::group_of(const std::string& name) const {
  for (std::size_t g = 0; g < m_groups.size(); ++g)
    for (auto& pattern : m_groups[g].match)
      if (::fnmatch(pattern.c_str(), name.c_str(), 0) == 0) return static_cast<std::uint32_t>(g + 1);
  return 0;
}

Status Registry::add(Region r) {
  m_region_at.emplace(r.name, m_regions.size());
  m_stream_bound += bound(r);
  m_regions.push_back(std::move(r));
  return Status::OK();
}

Status Registry::update(const std::string& name, void* ptr, RegionKind kind, Shape global, Shape start, Shape count) {
  Region* r = find(name);
  if (r == nullptr) return Status(Code::not_found, "update: region '" + name + "' is not protected");
  if (r->source)
    return Status(Code::invalid_argument, "update: region '" + name +
                                              "' is registered with a Source, which says where it is at each "
                                              "checkpoint; it takes no update()");
  if (r->pieces)
    return Status(Code::invalid_argument,
                  "update: region '" + name + "' was protected as Scattered pieces; update it with Scattered");
  // Dims update scalars and local arrays; a Block a global region; Joined a joined one.
  const bool plain = kind == RegionKind::local || kind == RegionKind::scalar;
  if (plain ? has_global_shape(r->kind) : kind != r->kind)
    return Status(Code::invalid_argument, "update: region '" + name + "' was protected as " +
                                              region_kind_name(r->kind) + "; its kind cannot change");
  if (r->kind == RegionKind::scalar && !count.empty())
    return Status(Code::invalid_argument, "update: scalar '" + name + "' cannot get dimensions");
  if (r->kind == RegionKind::local && count.empty())
    return Status(Code::invalid_argument, "update: array '" + name + "' needs dimensions");
  CKPT_RETURN_IF_ERROR(check_extents(name, r->dtype, r->kind, global, start, count));
  Region n = *r;
  n.ptr = ptr;
  set_extents(n, std::move(global), std::move(start), std::move(count));
  CKPT_RETURN_IF_ERROR(
      check_selection(name, n.count, n.mem_start, n.mem_alloc, dtype_size(n.dtype)).with_context("update"));
  CKPT_RETURN_IF_ERROR(locate(n, "update: region"));
  if (m_check) CKPT_RETURN_IF_ERROR(m_check(n).with_context("update"));
  m_stream_bound = m_stream_bound - bound(*r) + bound(n);
  *r = std::move(n);
  return Status::OK();
}

namespace {
/// Calls a user callback; an exception becomes an error naming the region.
template <class F>
Status call_user(const std::string& name, const char* what, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Status(Code::invalid_argument, "region '" + name + "': its Source's " + what + "() threw: " + e.what());
  } catch (...) {
    return Status(Code::invalid_argument, "region '" + name + "': its Source's " + what + "() threw");
  }
}
}  // namespace

Status Registry::relocate(Region& r, bool registered) {
  Place place;
  CKPT_RETURN_IF_ERROR(call_user(r.name, "locate", [&] {
    place = r.source->locate();
    return Status::OK();
  }));
  if (place.count.has_negative() || place.memory.start.has_negative() || place.memory.alloc.has_negative())
    return Status(Code::invalid_argument, "region '" + r.name + "': its Source's locate() gave a negative extent");
  Region n = r;
  if (n.kind != RegionKind::joined) n.kind = place.count.empty() ? RegionKind::scalar : RegionKind::local;
  CKPT_RETURN_IF_ERROR(check_extents(n.name, n.dtype, n.kind, {}, {}, place.count, r.source->resize != nullptr));
  CKPT_RETURN_IF_ERROR(check_selection(n.name, place.count, place.memory.start, place.memory.alloc, dtype_size(n.dtype))
                           .with_context("its Source's locate()"));
  n.ptr = place.ptr;
  n.count = std::move(place.count);
  n.mem_start = std::move(place.memory.start);
  n.mem_alloc = std::move(place.memory.alloc);
  CKPT_RETURN_IF_ERROR(locate(n, "region"));
  if (m_check) CKPT_RETURN_IF_ERROR(m_check(n));
  if (registered) m_stream_bound = m_stream_bound - bound(r) + bound(n);
  r = std::move(n);
  return Status::OK();
}

Status Registry::protect(const std::string& name, DType dtype, RegionKind kind, std::shared_ptr<const Source> source) {
  if (!source || !source->locate)
    return Status(Code::invalid_argument, "region '" + name + "': a Source needs a locate() function");
  CKPT_RETURN_IF_ERROR(check_name(name));
  if (find(name) != nullptr) return Status(Code::invalid_argument, "region '" + name + "' is already protected");
  if (dtype_size(dtype) == 0) return Status(Code::invalid_argument, "region '" + name + "': unknown dtype");
  Region r;
  r.name = name;
  r.dtype = dtype;
  r.kind = kind;
  r.source = std::move(source);
  r.group = group_of(name);
  CKPT_RETURN_IF_ERROR(relocate(r, false));
  return add(std::move(r));
}

Status Registry::protect_or_update(const std::string& name, void* ptr, DType dtype, RegionKind kind, Shape global,
                                   Shape start, Shape count) {
  const Region* r = find(name);
  if (r == nullptr) return protect(name, ptr, dtype, kind, std::move(global), std::move(start), std::move(count));
  if (r->dtype != dtype)
    return Status(Code::invalid_argument, "region '" + name + "' was protected as " + dtype_name(r->dtype) + ", not " +
                                              dtype_name(dtype) + "; its dtype cannot change");
  return update(name, ptr, kind, std::move(global), std::move(start), std::move(count));
}

Status Registry::set_optional(const std::string& name, bool optional) {
  Region* r = find(name);
  if (r == nullptr) return Status(Code::not_found, "set_optional: region '" + name + "' is not protected");
  r->optional = optional;
  return Status::OK();
}

Status Registry::set_memory_selection(const std::string& name, Shape start, Shape alloc) {
  Region* r = find(name);
  if (r == nullptr) return Status(Code::not_found, "set_memory_selection: region '" + name + "' is not protected");
  if (r->source)
    return Status(Code::invalid_argument, "set_memory_selection: region '" + name +
                                              "' is registered with a Source: its locate() gives the selection "
                                              "in the Place it returns");
  if (r->pieces)
    return Status(Code::invalid_argument, "set_memory_selection: region '" + name +
                                              "' was protected as Scattered pieces: its Scattered::memory gives "
                                              "the selection");
  if (r->kind == RegionKind::scalar && !(start.empty() && alloc.empty()))
    return Status(Code::invalid_argument, "set_memory_selection: region '" + name + "' is a scalar");
  CKPT_RETURN_IF_ERROR(
      check_selection(name, r->count, start, alloc, dtype_size(r->dtype)).with_context("set_memory_selection"));
  r->mem_start = std::move(start);
  r->mem_alloc = std::move(alloc);
  return Status::OK();
}

Status Registry::set_restart_rows(const std::string& name, std::shared_ptr<const RestartRows> rows) {
  Region* r = find(name);
  const char* what = rows && !rows->key.empty() ? "set_restart_keys" : "set_restart_rows";
  if (r == nullptr) return Status(Code::not_found, std::string(what) + ": region '" + name + "' is not protected");
  if (r->kind != RegionKind::joined)
    return Status(Code::invalid_argument, std::string(what) + ": region '" + name + "' is a " +
                                              region_kind_name(r->kind) + " region, not a joined array");
  r->restart_rows = std::move(rows);
  return Status::OK();
}

Status Registry::locate_sources() {
  for (Region& r : m_regions)
    if (r.source) CKPT_RETURN_IF_ERROR(relocate(r));
  return Status::OK();
}

Status Registry::fit_sources(const std::function<std::optional<Shape>(const Region&)>& wanted) {
  for (Region& r : m_regions) {
    if (!r.source || !r.source->resize) continue;
    const std::optional<Shape> count = wanted(r);
    if (!count) continue;
    CKPT_RETURN_IF_ERROR(call_user(r.name, "resize", [&] { return r.source->resize(*count); }));
    CKPT_RETURN_IF_ERROR(relocate(r));
  }
  return Status::OK();
}

Status Registry::unprotect(const std::string& name) {
  auto at = m_region_at.find(name);
  if (at == m_region_at.end()) return Status(Code::not_found, "unprotect: region '" + name + "' is not protected");
  m_stream_bound -= bound(m_regions[at->second]);
  m_regions.erase(m_regions.begin() + static_cast<std::ptrdiff_t>(at->second));
  m_region_at.clear();  // positions after it moved; unprotect is rare, so rebuild
  for (std::size_t i = 0; i < m_regions.size(); ++i) m_region_at.emplace(m_regions[i].name, i);
  return Status::OK();
}

Status Registry::annotate(const std::string& name, const std::string& key, const std::string& value) {
  Region* r = find(name);
  if (r == nullptr) return Status(Code::not_found, "annotate: region '" + name + "' is not protected");
  if (key.empty() || key.size() > 255 || value.size() > 65536)
    return Status(Code::invalid_argument, "annotate: key must be 1..255 bytes and value at most 64 KiB");
  for (auto& kv : r->attrs)
    if (kv.first == key) {
      kv.second = value;
      return Status::OK();
    }
  if (r->attrs.size() >= kMaxAttrs) return Status(Code::invalid_argument, "annotate: too many attributes");
  r->attrs.emplace_back(key, value);
  return Status::OK();
}

}  // namespace ckpt::detail
