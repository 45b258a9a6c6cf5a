// layout: series (internal): which segment each checkpoint of a run is appended to. See
// docs/design.md ("Series layout") and docs/format.md.
#ifndef CKPT_RUNTIME_SERIES_HPP
#define CKPT_RUNTIME_SERIES_HPP

#include <cstdint>
#include <string>

#include "ckpt/status.hpp"

namespace ckpt::detail {

class Store;

/// Where the checkpoints of a run go: segment `first` of the root, then a new segment whenever one
/// rank's data file would grow past `max_bytes` or `max_steps` checkpoints went into the current one.
/// Every rank asks wants_roll(), the ranks agree (any rank wanting one rolls every rank), and place()
/// gives the checkpoint its segment: the same on every rank, in the same order. Used by one thread at
/// a time (the one that makes the checkpoint's agreement: write thread, or the application thread
/// when funneled), in checkpoint order.
class SeriesCursor {
 public:
  SeriesCursor(std::string root, std::int64_t first, std::uint64_t max_bytes, int max_steps, std::uint64_t alignment)
      : m_root(std::move(root)),
        m_segment(first),
        m_max_bytes(max_bytes),
        m_max_steps(max_steps),
        m_alignment(alignment) {}
  /// Whether this rank wants a new segment before a checkpoint whose stream has `bytes` bytes.
  bool wants_roll(std::uint64_t bytes) const;
  /// After the agreement (`roll`: some rank wanted one): the segment directory of this checkpoint.
  std::string place(bool roll, std::uint64_t bytes);

 private:
  std::string m_root;
  std::int64_t m_segment;
  std::uint64_t m_max_bytes;
  int m_max_steps;
  std::uint64_t m_alignment;
  std::uint64_t m_bytes = 0;  ///< this rank's data file in the current segment so far (estimated as written)
  int m_steps = 0;            ///< checkpoints placed in the current segment
};

/// Whether a run can continue the series root `store` with `keep` > 0 on the space its file system
/// has: the segments that hold the `keep` newest steps go only once a new segment holds `keep` steps,
/// so a run needs room for about `keep` checkpoints of the newest one's size - the first of them in
/// the free space, the rest also in what retention removes at the first commit (segments holding no
/// kept step). Otherwise io_error naming the space needed, what is there and the ways out (docs/
/// design.md, "Series layout"). Rank 0, at construction, after recovery; ok for a root without steps.
Status check_series_space(const Store& store, int keep);

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_SERIES_HPP
