// The commit's agreement as a reduction (internal): what the root index needs of the ranks' reports -
// their failures, the variables with their merged statistics, block counts, bytes, uniformity and
// joined row counts - merged pairwise along the ranks (reduce_bytes), so that no rank receives every
// rank's block records. The commit of the two-level index (index_format 2, commit_spread) uses it: each
// rank (or rbio group writer) writes its own sub-index and rank 0 gets O(variables) bytes per round of the
// reduction (docs/design.md, "commit").
#ifndef CKPT_RUNTIME_COMMIT_SUMMARY_HPP
#define CKPT_RUNTIME_COMMIT_SUMMARY_HPP

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/format.hpp"
#include "ckpt/status.hpp"

namespace ckpt::detail {

/// A variable as the ranks [a, b) stored it.
struct SummaryVar {
  VarRecord var;                 ///< as the first of those ranks registered it; joined: global[0] is their rows
  std::uint32_t first_rank = 0;  ///< the first of those ranks that stored it
  std::uint32_t first_pos = 0;   ///< its place in that rank's report (which conflict that rank shows first)
  bool has_stats = false;
  /// Merged as var_stats() merges blocks, in rank order (the left's kept among equals; blocks' min/max
  /// hold no NaN: the accumulator skips them).
  std::uint64_t min_bits = 0, max_bits = 0;
  std::uint64_t n_blocks = 0, bytes = 0;
  /// Local and scalar kinds: every block so far has the first one's checksum and extents.
  bool same = true;
  std::uint64_t first_checksum = 0;
  Shape first_count;
};

/// The merged reports of the ranks [a, b).
struct CommitSummary {
  std::uint32_t failed = 0;           ///< ranks whose report is an error
  std::int32_t first_code = 0;        ///< the first failing rank's Code
  std::vector<std::string> failures;  ///< "rank r: message", in rank order, while they stay under 2000 chars
  std::string agreed;                 ///< the failing ranks' one message, or empty once two differ
  std::uint32_t conflict_rank = 0;    ///< with `conflict`: the first rank whose variable disagrees
  std::uint32_t conflict_pos = 0;     ///< and that variable's place in the rank's report
  std::string conflict;               ///< the first variable registered differently ("variable 'x' is ...")
  std::string overflow;               ///< a joined array whose row count overflows, or a variable's bytes
  std::vector<SummaryVar> vars;       ///< in order of first appearance (ranks in order, each in its order)
};

/// What the ranks agreed: the summary of all of them and the commit token.
struct AgreedSummary {
  CommitSummary summary;
  std::uint64_t token = 0;
  /// The largest `slot` any rank passed to allreduce_summary() (its writer report's size, for
  /// gather_slots()), and their sum (saturated); both 0 after the ordered reduction.
  std::uint64_t slot = 0, slot_sum = 0;
};
/// The agreement in one or two MPI_Allreduce calls (the variables' count unless `count` holds the count of
/// the last agreement, then O(variables) words), for the common case: no rank failed and
/// every rank registered the same variables (names, dtypes, kinds, shapes, attributes) in the same
/// order. Every rank passes its report and a random 64-bit draw; every rank gets the same answer: the
/// summary of all ranks with the commit token (the draws XORed; non-zero), or nullopt when the case does
/// not hold - or when merging min/max without the ranks' order could differ from merging them in rank
/// order (a NaN, or values equal but with other bits, such as -0.0 and 0.0, or a sum that overflows) -
/// and the ordered reduction must decide (reduce_bytes of encode_summary()). Collective over `comm`.
/// `count`: the same on every rank (the caller keeps it from one call to the next, starting empty); set to
/// the variables' count when every rank sent it and none failed, else emptied (from reduced values only).
/// `slot`: a size every rank needs agreed (the largest comes back in AgreedSummary::slot), 0 if none.
std::optional<AgreedSummary> allreduce_summary(MPI_Comm comm, const Index& report, std::uint64_t draw,
                                               std::optional<std::uint64_t>& count, std::uint64_t slot = 0);

/// Whether two ranks registered a variable alike: dtype, kind, rank and global shape (a joined array's
/// row count may differ).
bool same_registration(const VarRecord& a, const VarRecord& b);
/// The words of a commit that fails on it: "variable 'x' is registered differently on rank r (...)".
std::string registered_differently(const std::string& name, std::uint32_t rank);

/// A commit's failures are listed as "rank r: message; rank s: ..." while the list is under this size.
constexpr std::size_t kMaxFailureText = 2000;
/// Appends "rank `rank`: `message`" to such a list (nothing once it reached kMaxFailureText).
void add_failure(std::string& list, std::uint32_t rank, const std::string& message);

/// Rank `rank`'s report (Committer::report_of) as a summary of one rank.
CommitSummary summarize(const Index& report, std::uint32_t rank);
/// `right` (ranks following left's) merged into `left`.
void merge_summary(CommitSummary& left, const CommitSummary& right);

std::vector<std::uint8_t> encode_summary(const CommitSummary& s);
/// invalid_argument when the bytes are not an encode_summary() (they come from ranks of this job).
Result<CommitSummary> decode_summary(const std::uint8_t* p, std::size_t n);

/// Rank 0, after the reduction over `nranks` ranks: the commit's verdict (the ranks' failures first,
/// then a variable registered differently, then an overflow), as merge_reports() words it.
Status summary_status(const CommitSummary& s, std::uint32_t nranks, std::int64_t step);
/// Whether variable `v` of a summary of all `nranks` ranks is uniform (local or scalar, a block on every
/// rank, the same bytes and extents everywhere).
bool summary_uniform(const SummaryVar& v, std::uint32_t nranks);

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_COMMIT_SUMMARY_HPP
