// The index of one checkpoint as a restart reads it (internal): whole (version 1, or a version-2 index
// assembled), or a version-2 root with only the sub-indices that this rank has asked for so far, so that
// what a rank reads and decodes at an N->N restart does not grow with the rank count (docs/design.md,
// "Restart", and docs/format.md, "Version 2 index: two levels": how a reader finds a rank's or a box's
// sub-indices).
#ifndef CKPT_BASE_PARTIAL_INDEX_HPP
#define CKPT_BASE_PARTIAL_INDEX_HPP

#include <mpi.h>

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/format.hpp"
#include "base/index_v2.hpp"
#include "ckpt/status.hpp"

namespace ckpt::detail {

class PartialIndex {
 public:
  /// A box of a variable: start and count, ndim each (a joined array's rows: whole rows).
  using Box = std::pair<Shape, Shape>;

  PartialIndex() = default;  ///< an empty whole index
  /// A whole index (`decoded_bytes`: the size of its encoding): load_rank() and cover() find everything.
  PartialIndex(Index whole, std::uint64_t decoded_bytes);
  /// The version-2 checkpoint in directory `dir` (every object at offset 0 of its own file) whose root index
  /// is `root_bytes` (read by whoever; decoded and checked here, and that it describes `step`). Holds the
  /// variables and no block until asked. corrupt "corrupt checkpoint <dir>: ..." as every reader says it.
  static Result<PartialIndex> open_v2(std::string dir, const std::vector<std::uint8_t>& root_bytes, std::int64_t step);

  /// Variables (all), and the files, REFs and blocks of the sub-indices loaded so far. Stays the same object
  /// (references to it and to lookup() hold across load_rank() and cover(), which append to it).
  const Index& index() const { return m_idx; }
  const IndexLookup& lookup() const { return m_look; }
  bool whole() const { return m_whole; }
  /// The index, moved out (a whole one to hand to a reader); this object is left empty.
  Index take() { return std::move(m_idx); }

  /// Loads the sub-index of the writer that holds rank `rank` (its catalog entry, with rule 2 its rank map
  /// entry, then the sub-index). invalid_argument when `rank` is not a rank of the checkpoint.
  Status load_rank(std::uint32_t rank);
  /// Loads the sub-index of writer `w` (< writers()): its catalog entry, then the sub-index, each checked.
  Status load_writer(std::uint32_t w);
  /// Loads the sub-indices of writers [first, first + count) (within writers()): their catalog entries in
  /// one read, the loaded ones skipped.
  Status load_range(std::uint32_t first, std::uint32_t count);
  /// Loads every writer's sub-index (their catalog entries in one read): the whole index, checked as
  /// each part is when loaded alone. Nothing when whole.
  Status load_all();
  /// The root's writer count W (whole: 0).
  std::uint32_t writers() const { return m_whole ? 0 : m_root.writers; }
  /// Whether every sub-index is loaded (whole: always).
  bool complete() const { return m_whole || m_loaded.size() == m_root.writers; }
  /// The root index (not whole only; whole: an empty one): what is merged per variable (statistics,
  /// block counts) before any sub-index is read.
  const RootIndex& root() const { return m_root; }
  /// Loads what global array `var`'s blocks inside `boxes` need: nothing when the blocks loaded so far
  /// cover every box; else the variable's directory (once) and every writer whose entry meets a box.
  /// Nothing for the other kinds (local and scalar variables have no directory; joined: cover_rows()).
  Status cover(std::uint32_t var, const std::vector<Box>& boxes);
  /// As cover(), for joined array `var`'s stored rows [first, first + count) of each (first, count).
  Status cover_rows(std::uint32_t var, const std::vector<std::pair<std::uint64_t, std::uint64_t>>& rows);
  /// After a failure every call that would load a sub-index returns it again (the restart gives up); what
  /// is loaded already - the sub-indices added before it, which the lookup holds - still serves (a
  /// reader's later calls that need only those).

  /// Index bytes read so far: the root, catalog entries, map entries, directories and sub-indices (whole:
  /// the encoded index).
  std::uint64_t bytes_read() const { return m_bytes; }
  /// Sub-indices loaded so far (whole: 0).
  std::size_t subindices_read() const { return m_subindices; }

 private:
  Status corrupt(const std::string& what) const;
  Status load_rank_once(std::uint32_t rank);
  /// cover() of `boxes` (a global array), or with `boxes` null cover_rows() of the merged ranges `rows` [lo, hi).
  /// Without `may_load` (after a failure): OK when what is loaded covers them, else the failure.
  Status cover_once(std::uint32_t var, const std::vector<Box>* boxes,
                    const std::vector<std::pair<std::uint64_t, std::uint64_t>>& rows, bool may_load);
  /// `n` bytes at catalog offset `at` (from the catalog's first byte).
  Result<std::vector<std::uint8_t>> read_catalog(std::uint64_t at, std::uint64_t n);
  /// The writers of each range (first, count) not loaded yet: their entries (one read per range) and
  /// sub-indices; then the lookup and the checks of what is loaded, once.
  Status load_writers(const std::vector<std::pair<std::uint32_t, std::uint32_t>>& ranges);
  /// Appends writer w's sub-index (checked against `e`) to the index.
  Status add_subindex(std::uint32_t w, const CatalogEntry& e);
  /// The blocks of `var` loaded so far inside its directory entries (once the directory is read), and
  /// a joined array's in rank order without overlapping rows.
  Status check_var(std::uint32_t var) const;

  bool m_whole = true;
  std::string m_dir;
  RootIndex m_root;
  Index m_idx;
  IndexLookup m_look{Index{}};
  std::uint64_t m_bytes = 0;
  std::size_t m_subindices = 0;
  Status m_failed;                                                    ///< the first failure, returned ever after
  std::unordered_set<std::uint32_t> m_loaded;                         ///< the writers loaded
  std::unordered_map<std::uint32_t, std::uint32_t> m_writer_of_rank;  ///< the ranks of the loaded sub-indices
  std::unordered_map<std::string, std::uint32_t> m_file_ix;           ///< file name -> index of m_idx.files
  std::unordered_map<std::string, std::uint32_t> m_ref_ix;            ///< ref_key() -> index of m_idx.refs
  std::map<std::uint32_t, std::vector<DirEntry>> m_dirs;              ///< directories read, by variable
};

/// Collective over `comm` (every rank with the same `root_bytes`, a version-2 root of checkpoint directory
/// `dir`, step `step`): each rank loads and checks the sub-indices of writers rank, rank + P, ... against
/// their catalog entries; the outcome agreed (a failing rank's message on every rank). With the root and
/// catalog checked by one rank (check_committed()), what validates the step whole at O(writers / ranks)
/// reads a rank: latest(), steps(), a collective Reader's listing.
Status check_subindices_collective(MPI_Comm comm, const std::string& dir, const std::vector<std::uint8_t>& root_bytes,
                                   std::int64_t step);

}  // namespace ckpt::detail

#endif  // CKPT_BASE_PARTIAL_INDEX_HPP
