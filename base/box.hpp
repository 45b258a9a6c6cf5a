// Boxes of row-major arrays (internal): the rows where a stored block and a wanted box intersect,
// walked in the order of the block's bytes, so that a block streamed piece by piece is scattered into
// the box as it passes. Used by the restart (into registered regions) and by the Reader (into any box).
#ifndef CKPT_BASE_BOX_HPP
#define CKPT_BASE_BOX_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "ckpt/types.hpp"
#include "ckpt/status.hpp"

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

}  // namespace ckpt::detail

#endif  // CKPT_BASE_BOX_HPP
