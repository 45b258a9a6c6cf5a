// layout: series: the segment of each checkpoint. See series.hpp.
#include "runtime/src/series.hpp"

#include <algorithm>

#include "base/format.hpp"
#include "base/store.hpp"

namespace ckpt::detail {

namespace {
/// What a checkpoint adds to a rank's data file: its stream from an aligned offset.
std::uint64_t appended(std::uint64_t bytes, std::uint64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}
}  // namespace

bool SeriesCursor::wants_roll(std::uint64_t bytes) const {
  if (m_steps == 0) return false;  // at least one checkpoint per segment
  if (m_max_steps > 0 && m_steps >= m_max_steps) return true;
  return m_bytes + appended(bytes, m_alignment) > m_max_bytes;
}

std::string SeriesCursor::place(bool roll, std::uint64_t bytes) {
  if (roll && m_steps > 0) {
    ++m_segment;
    m_bytes = 0;
    m_steps = 0;
  }
  if (m_steps == 0) m_bytes = std::max<std::uint64_t>(m_alignment, kDataHeaderBytes);  // the file's header
  m_bytes += appended(bytes, m_alignment);
  ++m_steps;
  return segment_dir(m_root, m_segment);
}

}  // namespace ckpt::detail
