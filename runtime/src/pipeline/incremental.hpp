// Incremental checkpoints (internal; issue 36, docs/format.md "Version 2 index: incremental references",
// docs/design.md "Incremental checkpoints"): which pieces of this rank's blocks are the same as in the
// previous checkpoint of the chain, and where those are stored. The digest thread hashes each piece and
// compares it (IncrementalJob), the write thread writes only the pieces that changed, the commit thread
// puts pieces and references into this rank's sub-index (pieced_blocks) and, once the checkpoint is
// committed, makes it the chain's newest (Chain::committed).
#ifndef CKPT_RUNTIME_INCREMENTAL_HPP
#define CKPT_RUNTIME_INCREMENTAL_HPP

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/format.hpp"
#include "base/hash.hpp"
#include "base/layout.hpp"

namespace ckpt::detail {

/// One piece of a committed checkpoint's block: its hash and where its bytes are stored.
struct ChainPiece {
  Hash128 hash;
  bool known = true;       ///< false: a probing checkpoint did not hash it (never equal to anything)
  std::uint32_t file = 0;  ///< index into ChainTable::files
  std::uint64_t offset = 0;
};

/// A probing checkpoint hashes one piece in kProbeStride (see IncrementalJob::probes); a checkpoint that
/// finds fewer than one in kProbeStride of the pieces it compared unchanged makes the next one probe.
inline constexpr std::uint64_t kProbeStride = 16;

/// The newest committed checkpoint of this rank's chain. Immutable once published.
struct ChainTable {
  std::int64_t step = 0;       ///< the checkpoint it describes
  std::int64_t base_step = 0;  ///< the full checkpoint the chain started with
  int length = 0;              ///< checkpoints in the chain, the full one included
  std::vector<RefFile> files;  ///< every file a piece below is stored in (kind 0)
  /// Pieced blocks by variable name: their length and pieces.
  std::unordered_map<std::string, std::pair<std::uint64_t, std::vector<ChainPiece>>> blocks;
  /// It found at least one in kProbeStride of the pieces it compared unchanged (true when it compared
  /// none): when not, the next checkpoint probes.
  bool saw_unchanged = true;
  /// Probing checkpoints in a row up to this one (0: it hashed every piece): the next probe's sample.
  std::uint64_t probes = 0;
};

/// The digest thread's incremental part of a job (Job::incremental); the write thread reads `reused` of
/// the pieces of chunks the digest thread has handed over, the commit thread all of it after hand-over.
struct IncrementalJob {
  bool on = false;               ///< this job cuts its blocks of >= one piece into pieces
  std::uint32_t piece_log2 = 0;  ///< log2 of the piece size
  bool started = false;          ///< `previous` was taken (at the job's first digested chunk)
  /// What this checkpoint is compared with; null: a full checkpoint (every piece written).
  std::shared_ptr<const ChainTable> previous;
  /// A probing checkpoint (the previous one found fewer than one in kProbeStride of its pieces unchanged,
  /// as when an application changes all of its state every step): full, its own base, it hashes one piece
  /// in kProbeStride and compares those with `probed`. The sample moves on by one piece at each probe in a
  /// row (pieces numbered across this rank's blocks in stream order: piece g when (g + probes) %
  /// kProbeStride == 0), so a run of probes sees every piece. When the sample finds enough unchanged, the
  /// next checkpoint hashes every piece again (and can refer to the sampled pieces), the one after refers
  /// to every unchanged piece. So hashing costs 1/kProbeStride of its full price while little can be
  /// saved. `probed` is what a probing checkpoint compares with (`previous` stays null: it is full).
  std::uint64_t probes = 0;  ///< probing checkpoints in a row, this one included (0: not probing)
  std::shared_ptr<const ChainTable> probed;
  bool probing() const { return probes > 0; }
  /// Per plan block: the number of the block's first piece among this rank's pieces (for the sample).
  std::vector<std::uint64_t> first_piece;
  /// Pieces compared with a known hash of the previous checkpoint, and of those the unchanged ones.
  std::uint64_t compared = 0, unchanged = 0;
  /// Whether the digest thread hashes piece k of plan block i.
  bool hashes_piece(std::size_t i, std::size_t k) const {
    return !probing() || (first_piece[i] + k + probes) % kProbeStride == 0;
  }
  /// Per plan block: its pieces' hashes (empty: a block shorter than a piece, stored whole) and whether
  /// each is the same as the previous checkpoint's (1: not written, referred to). Sized at the job's
  /// creation, so that the digest and write threads touch distinct elements only.
  std::vector<std::vector<Hash128>> hashes;
  std::vector<std::vector<std::uint8_t>> reused;
  Hasher128 hasher;  ///< the piece in progress
  std::uint64_t piece_bytes() const { return std::uint64_t{1} << piece_log2; }
};

/// Starts the digest of a job that compares with `newest` (Chain::previous()): a probing or an
/// incremental checkpoint (or a full one when null).
void begin_incremental(IncrementalJob& inc, std::shared_ptr<const ChainTable> newest);
/// Sizes a new job's `inc` for `plan` (on when piece_log2 > 0: every block of at least one piece is pieced, and the
/// plan aligned those blocks to the piece size; `chunk_bytes` must be a multiple of it).
void init_incremental(IncrementalJob& inc, const StreamPlan& plan, std::uint32_t piece_log2, std::uint64_t chunk_bytes);

/// The stream ranges [lo, hi) of the window [a, b) that the write thread writes: everything in it when the
/// job is not incremental; otherwise the blocks' bytes but their reused pieces (and no padding).
std::vector<std::pair<std::uint64_t, std::uint64_t>> dirty_ranges(const IncrementalJob& inc, const StreamPlan& plan,
                                                                  std::uint64_t a, std::uint64_t b);

/// This rank's chain: the newest committed checkpoint's table. The digest thread takes it (previous()), the
/// commit thread replaces it (committed()) and says when a job's outcome is known (settle()); a restart
/// starts a new chain (reset()).
///
/// A checkpoint compares with the outcome of the one before it: previous() waits until every incremental
/// job started before has settled. So a checkpoint refers only to the newest committed one and to what
/// that one refers to - all of which retention keeps while that one is kept (its root lists them) - and
/// never to a checkpoint retention may have removed meanwhile. (Funneled mode, where the commits wait for
/// the application thread, is refused with incremental: the wait could then never end.)
class Chain {
 public:
  explicit Chain(int full_every) : m_full_every(full_every) {}
  /// What a checkpoint of step `step` compares with, once `started_before` jobs have settled: null when it
  /// must be full (no chain, a chain of full_every checkpoints, or a step not above the chain's newest).
  std::shared_ptr<const ChainTable> previous(std::int64_t step, std::uint64_t started_before) const;
  /// A job whose digest started (IncrementalJob::started) has its outcome: committed() ran if it committed.
  void settle();
  /// Checkpoint `step` (id `ckpt_id`) committed: its blocks of at least one piece - plan block i with
  /// `inc`'s hashes, its pieces stored from offset `own[i]` of this rank's file `file` or reused from
  /// inc.previous - become the newest table.
  void committed(std::int64_t step, std::uint64_t ckpt_id, const std::string& file, const IncrementalJob& inc,
                 const StreamPlan& plan, const std::vector<std::uint64_t>& own);
  void reset();

 private:
  int m_full_every;
  mutable std::mutex m_mu;
  mutable std::condition_variable m_cv;
  std::uint64_t m_settled = 0;
  std::shared_ptr<const ChainTable> m_newest;
};

/// The pieces of plan block `i` (variable `name`) for its BlockRecord `b`, when some piece is reused (else
/// false and nothing: the block is stored whole at `own_offset`): reused pieces refer to inc.previous's files, added to
/// `refs` (this rank's REF list, PieceRecord::ref k >= 1 is refs[k - 1]) once each; the others are stored at own_offset
/// + k P.
bool pieced_block(const IncrementalJob& inc, std::size_t i, const std::string& name, std::uint64_t own_offset,
                  BlockRecord& b, std::vector<RefFile>& refs);

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_INCREMENTAL_HPP
