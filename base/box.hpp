// Boxes of row-major arrays (internal): the rows where a stored block and a wanted box intersect,
// walked in the order of the block's bytes, so that a block streamed piece by piece is scattered into
// the box as it passes. Used by the restart (into registered regions) and by the Reader (into any box).
#ifndef CKPT_BASE_BOX_HPP
#define CKPT_BASE_BOX_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/format.hpp"  // kMaxDims
#include "ckpt/status.hpp"
#include "ckpt/types.hpp"

namespace ckpt::detail {

/// "[4, 3]": extents for messages.
inline std::string shape_text(const Shape& s) {
  std::string t = "[";
  for (std::size_t d = 0; d < s.size(); ++d) t += (d ? ", " : "") + std::to_string(s[d]);
  return t + "]";
}

/// The intersection [lo, hi) of the boxes [astart, astart + acount) and [bstart, bstart + bcount),
/// all of the same rank; false when it is empty.
inline bool intersect_boxes(const Shape& astart, const Shape& acount, const Shape& bstart, const Shape& bcount,
                            Shape& lo, Shape& hi) {
  const std::size_t n = astart.size();
  lo.assign(n, 0);
  hi.assign(n, 0);
  bool overlap = true;
  for (std::size_t d = 0; d < n; ++d) {
    lo[d] = std::max(astart[d], bstart[d]);
    hi[d] = std::min(astart[d] + acount[d], bstart[d] + bcount[d]);
    if (hi[d] <= lo[d]) overlap = false;
  }
  return overlap;
}

/// Rows of the intersection [lo, hi) of a stored block (bstart, bcount) and a destination box (mstart,
/// mcount), in increasing order of their offset in the stored block. Trailing dimensions that are whole
/// in both are merged into one row.
class RowWalker {
 public:
  RowWalker(const Shape& lo, const Shape& hi, const Shape& bstart, const Shape& bcount, const Shape& mstart,
            const Shape& mcount, std::size_t esize)
      : m_lo(lo), m_hi(hi), m_bstart(bstart), m_mstart(mstart), m_idx(lo) {
    const std::size_t n = lo.size();
    m_bstride.assign(n, 1);
    m_mstride.assign(n, 1);
    for (std::size_t d = n; d-- > 1;) {
      m_bstride[d - 1] = m_bstride[d] * bcount[d];
      m_mstride[d - 1] = m_mstride[d] * mcount[d];
    }
    // Merge trailing dimensions: row = dims [m_j, n), whole in the block and the region beyond m_j.
    m_j = n == 0 ? 0 : n - 1;
    std::uint64_t run = n == 0 ? 1 : hi[n - 1] - lo[n - 1];
    while (m_j > 0 && hi[m_j] - lo[m_j] == bcount[m_j] && hi[m_j] - lo[m_j] == mcount[m_j]) {
      --m_j;
      run *= hi[m_j] - lo[m_j];
    }
    m_row_bytes = run * esize;
    m_esize = esize;
    m_done = false;
    for (std::size_t d = 0; d < n; ++d)
      if (hi[d] <= lo[d]) m_done = true;
  }
  bool done() const { return m_done; }
  std::uint64_t row_bytes() const { return m_row_bytes; }
  /// Byte offset of the current row in the stored block / in the destination box.
  std::uint64_t block_offset() const { return offset(m_bstart, m_bstride); }
  std::uint64_t region_offset() const { return offset(m_mstart, m_mstride); }
  void next() {
    // Increment the outer index over dimensions [0, m_j).
    for (std::size_t d = m_j; d-- > 0;) {
      if (++m_idx[d] < m_hi[d]) return;
      m_idx[d] = m_lo[d];
    }
    m_done = true;
  }

  /// Hands the parts of the rows that lie in the piece [p0, p0 + n) of the stored block to
  /// `copy(dst_offset, src_offset_in_piece, bytes)`, advancing past the rows the piece completes.
  /// Pieces must come in order.
  template <class Copy>
  Status scatter_piece(std::uint64_t p0, std::size_t n, Copy&& copy) {
    const std::uint64_t p1 = p0 + n;
    while (!done()) {
      const std::uint64_t rb = block_offset(), re = rb + row_bytes();
      if (rb >= p1) break;
      const std::uint64_t c0 = std::max(rb, p0), c1 = std::min(re, p1);
      if (c1 > c0) CKPT_RETURN_IF_ERROR(copy(region_offset() + (c0 - rb), c0 - p0, c1 - c0));
      if (re > p1) break;  // the row continues in the next piece
      next();
    }
    return Status::OK();
  }

 private:
  std::uint64_t offset(const Shape& start, const Shape& stride) const {
    std::uint64_t o = 0;
    for (std::size_t d = 0; d < m_idx.size(); ++d) o += (m_idx[d] - start[d]) * stride[d];
    return o * m_esize;
  }
  Shape m_lo, m_hi, m_bstart, m_mstart, m_idx, m_bstride, m_mstride;
  std::size_t m_j = 0, m_esize = 1;
  std::uint64_t m_row_bytes = 0;
  bool m_done = true;
};

/// Calls f(memory_offset, packed_offset, bytes) for the parts of the rows of a memory selection - the
/// box [start, start + count) of a row-major allocation of extents `alloc`, elements of `esize` bytes -
/// that lie in bytes [p0, p0 + n) of the packed box, in order (every row of a ghosted block in a few
/// instructions): the capture's copy out of the allocation, hdf5-sync's checksums, the copy of an
/// optional region's packed shadow into place. Trailing dimensions whole in the allocation are merged
/// into one row.
template <class F>
Status for_each_selection_row(const Shape& start, const Shape& count, const Shape& alloc, std::size_t esize,
                              std::uint64_t p0, std::uint64_t n, F&& f) {
  const std::size_t dims = count.size();
  if (n == 0 || dims == 0) return Status::OK();
  for (std::size_t d = 0; d < dims; ++d)
    if (count[d] == 0) return Status::OK();  // an empty box has no row (and no byte in [p0, p0 + n))
  // The row: dimensions [j, dims), all but j whole in the allocation.
  std::size_t j = dims - 1;
  std::uint64_t row = count[j] * esize;
  while (j > 0 && count[j] == alloc[j]) {
    --j;
    row *= count[j];
  }
  if (row == 0) return Status::OK();
  std::uint64_t stride[kMaxDims];  // bytes between consecutive indices of each dimension in the allocation
  stride[dims - 1] = esize;
  for (std::size_t d = dims - 1; d-- > 0;) stride[d] = stride[d + 1] * alloc[d + 1];
  // The outer index (dimensions [0, j)) of the row holding p0, and that row's offset in the allocation.
  std::uint64_t r = p0 / row, idx[kMaxDims];
  for (std::size_t d = j; d-- > 0;) {
    idx[d] = r % count[d];
    r /= count[d];
  }
  std::uint64_t mem = start[j] * stride[j];
  for (std::size_t d = 0; d < j; ++d) mem += (start[d] + idx[d]) * stride[d];
  std::uint64_t packed = p0 - p0 % row, at = p0 % row;  // the row's packed offset; where the range starts in it
  const std::uint64_t end = p0 + n;
  while (packed < end) {
    const std::uint64_t len = std::min(row, end - packed) - at;
    CKPT_RETURN_IF_ERROR(f(mem + at, packed + at, len));
    packed += row;
    at = 0;
    // Next row: the innermost outer dimension advances, carrying outwards.
    std::size_t d = j;
    while (d-- > 0) {
      mem += stride[d];
      if (++idx[d] < count[d]) break;
      mem -= count[d] * stride[d];
      idx[d] = 0;
    }
    if (d == static_cast<std::size_t>(-1) && packed < end) break;  // past the last row (n beyond the box)
  }
  return Status::OK();
}

/// Checks a memory selection against a region's extents: as many dimensions, the box inside the
/// allocation in each, and the allocation's size in bytes (elements of `esize`) below 2^64, so that no
/// offset into it wraps. Empty start and alloc (no selection) always pass; `name` is for the message.
inline Status check_selection(const std::string& name, const Shape& count, const Shape& start, const Shape& alloc,
                              std::size_t esize) {
  if (start.empty() && alloc.empty()) return Status::OK();
  auto bad = [&](const std::string& why) {
    return Status(Code::invalid_argument, "region '" + name + "': memory selection " + why);
  };
  if (start.size() != alloc.size())
    return bad("start " + shape_text(start) + " and allocation " + shape_text(alloc) + " differ in dimensions");
  if (alloc.size() != count.size())
    return bad("has " + std::to_string(alloc.size()) + " dimensions, the region " + std::to_string(count.size()) + " " +
               shape_text(count));
  std::uint64_t total = 1;
  for (std::size_t d = 0; d < alloc.size(); ++d) {
    if (start[d] > alloc[d] || count[d] > alloc[d] - start[d])
      return bad("start " + shape_text(start) + " + extents " + shape_text(count) + " exceed the allocation " +
                 shape_text(alloc) + " in dimension " + std::to_string(d));
    if (__builtin_mul_overflow(total, alloc[d], &total)) return bad("allocation " + shape_text(alloc) + " overflows");
  }
  if (__builtin_mul_overflow(total, static_cast<std::uint64_t>(esize), &total))
    return bad("allocation " + shape_text(alloc) + " exceeds 2^64 bytes");
  return Status::OK();
}

}  // namespace ckpt::detail

#endif  // CKPT_BASE_BOX_HPP
