// The restorer (internal): latest(), restart(step) and restart() of the newest usable checkpoint, on the
// application thread, collective over the application's communicator.
#ifndef CKPT_RUNTIME_RESTART_HPP
#define CKPT_RUNTIME_RESTART_HPP

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/partial_index.hpp"
#include "base/store.hpp"
#include "ckpt/ckpt.hpp"
#include "runtime/src/levels/partner.hpp"
#include "runtime/src/levels/xor.hpp"
#include "runtime/src/pipeline/capture.hpp"
#include "runtime/src/pipeline/registry.hpp"

namespace ckpt::detail {

/// The restart's two bounce chunks: piece k is read into chunk[k % 2] while the copies of piece k-1
/// run; before a chunk is read into again, the fence taken after its copies is waited on.
struct Bounces {
  Chunk* chunk[2] = {nullptr, nullptr};
  Fence fence[2] = {0, 0};
  int next = 0;
};

/// Stored rows [src, src + len) of a joined array landing in rows [dst, dst + len) of this rank's.
struct RowRun {
  std::uint64_t dst = 0, src = 0, len = 0;
};

/// A checkpoint's index (whole, or with restart's lazy reading the sub-indices asked for so far) and the
/// directory its file names are relative to.
struct StepIndex {
  PartialIndex index;
  std::string dir;
};

/// Application thread only. The referenced objects must outlive the Restorer.
class Restorer {
 public:
  /// `local`: this node's store when the Runtime has a node-local level (docs/design.md, "Levels"),
  /// else nullptr; `layout`: the nodes (their leaders list `local` for the others).
  Restorer(MPI_Comm comm, const Options& opts, bool persistent, const Store& store, Store* local,
           const NodeLayout& layout, Device& device, StagingPool& pool, Tracer* tracer)
      : m_app_comm(comm),
        m_opts(opts),
        m_persistent(persistent),
        m_store(store),
        m_local(local),
        m_layout(layout),
        m_device(device),
        m_pool(pool),
        m_tracer(tracer) {
    MPI_Comm_rank(comm, &m_rank);
    MPI_Comm_size(comm, &m_size);
  }

  /// The newest complete step (rank 0 decides, every rank gets it): of `dir`, or held by every node;
  /// none when there is none, an error when `dir` cannot be listed (listable()).
  Result<std::optional<std::int64_t>> latest();
  /// "local", "partner" or "xor" (a lost node rebuilt from its partner's copy or its group's parity,
  /// then local) or "global": where the
  /// last successful restart read from; "" before any.
  const std::string& level() const { return m_level; }
  /// Restores `regions` from step `step`, after the checkpoints `capture` has in flight are done.
  /// Device copies are ordered after the work on `stream` (nullptr: the default stream).
  /// Regions registered with a Source are located and resized (Source::resize) first.
  Status restart(std::int64_t step, void* stream, Registry& registry, Capture& capture);
  /// The validated index of step `step` (rank 0 reads it, every rank gets it), after the checkpoints
  /// `capture` has in flight are done.
  Result<StepIndex> inspect(std::int64_t step, Capture& capture);
  /// The complete steps, oldest first: those of `dir` whose index validates, and with a node level
  /// the steps it can restore (local_candidates()). Collective: rank 0 lists, every rank gets it.
  Result<std::vector<std::int64_t>> steps() { return candidate_steps(true); }
  /// restart() of the newest step that restores, falling back to older ones.
  Result<std::int64_t> restart_newest(void* stream, Registry& registry, Capture& capture);
  /// The optional regions the last restart(step) left untouched (not in its checkpoint).
  const std::vector<std::string>& skipped_optional() const { return m_skipped; }
  /// Index bytes this rank read or received in the last restart(step): a version-2 checkpoint's root and
  /// the catalog pieces and sub-indices it needed; the whole index otherwise.
  std::uint64_t index_bytes() const { return m_index_bytes; }
  /// The stored rows of joined array `name` in `step` and this rank's balanced share (collective).
  Result<JoinedRows> joined_rows(std::int64_t step, const std::string& name, Capture& capture);

 private:
  /// Collective: the newest committed step of `dir` whose index validates, the same on every rank. A
  /// two-level index's sub-indices are checked by every rank, each its writers' (w = rank, rank + P, ...).
  std::optional<std::int64_t> newest_validated();
  /// Collective: whether committed step `step` of `dir` is complete - the same Status on every rank.
  Status validate_step(std::int64_t step);
  /// Rank 0: `dir` is a directory that can be listed (or nothing is persistent): an empty listing of
  /// an unreadable root must not read as "no checkpoint" (the application would start afresh).
  Status listable() const;
  /// Collective: the steps of both levels, ascending, the same on every rank (rank 0 lists): `dir`'s
  /// complete ones (`validated`: those whose index validates; else every committed name, which restart
  /// judges one by one) and the node level's candidates; an error when `dir` cannot be listed.
  Result<std::vector<std::int64_t>> candidate_steps(bool validated);
  /// A step the node level can restore: every node holds it complete, or the nodes in `lost` do not
  /// but the next node of each does (partner) or every other node of each one's group does (xor).
  struct LocalCandidate {
    std::int64_t step = 0;
    std::vector<int> lost;
  };
  /// The node level's candidates, newest first; empty without a node level. Collective (node leaders
  /// list, rank 0 decides, every rank gets the answer).
  std::vector<LocalCandidate> local_candidates();
  /// Whether the redundancy can bring back the nodes in `lost` when every other node holds the step:
  /// partner: the next node of each is not lost; xor: no other node of each one's group is lost.
  bool rebuildable(const std::vector<int>& lost) const;
  /// The nodes where some rank's own reads of the last restart_from() found damaged data (corrupt).
  /// Collective.
  std::vector<int> damaged_nodes();
  /// Rebuilds the files of the nodes in `c.lost` over MPI (partner: theirs from the next node's partner
  /// copy, their partner copy from the previous node; xor: theirs and their parity from the rest of the
  /// group) and commits them there. Collective.
  Status rebuild(const LocalCandidate& c);
  /// What rebuild() rebuilds from, for messages.
  const char* redundancy_source() const {
    return m_opts.redundancy == Redundancy::xor_parity ? "the xor parity" : "the partner copy";
  }
  /// restart() from one level: `store` is this rank's store of that level (its node's or `dir`'s).
  Status restart_from(std::int64_t step, void* stream, Registry& registry, const Store& store);
  /// Rank 0 reads the index of `step` and where its files are (a series step's segment); every rank
  /// gets both and validates the index. `lazy` (restart) and a version-2 index in a directory of `dir`:
  /// rank 0 reads the root only and every rank opens it as a PartialIndex, which reads the catalog pieces
  /// and sub-indices it is asked for from that directory.
  Result<StepIndex> read_index_collective(std::int64_t step, const Store& store, bool lazy = false);
  /// mismatch when joined region `r`'s row extents (all but the first) are not the stored ones `v`.
  static Status joined_row_extents_fit(const VarRecord& v, const Region& r);
  /// The first stored row of joined region `r` on this rank (its balanced share or r.first_row), or
  /// why its rows do not fit the stored ones `v`.
  Result<std::uint64_t> joined_first_row(const VarRecord& v, const Region& r) const;
  /// Where joined region `r`'s rows come from in the stored array `v`: one run from its first row, or
  /// the runs of its restart rows (row indices: set_restart_keys' are resolved first); or why they do
  /// not fit.
  Result<std::vector<RowRun>> joined_runs(const VarRecord& v, const Region& r) const;
  /// Collective: the stored row indices of the regions with restart keys (set_restart_keys), by region
  /// name, looked up in their key columns in `idx`: each rank reads its balanced share of each key
  /// column and the requests are routed to the rank that holds each key's hash (three all-to-alls per
  /// key column). `local`: this rank's state so far - a rank that failed takes part without reading
  /// (only when it is ok are `bounces` acquired). Agreed: the same failure on every rank. `mine`: this
  /// rank's own outcome before agreement (`local`, or its reading of its shares; for m_mine).
  Result<std::vector<std::pair<std::string, std::vector<std::uint64_t>>>> resolve_keys(
      PartialIndex& idx, const std::vector<Region>& regions, BlockReader& reader, Bounces& bounces, const Status& local,
      Status& mine);
  /// The extents `r` gets from checkpoint `idx` on this rank (what Source::resize is asked for), or
  /// nullopt when the checkpoint does not say (missing, another kind: restore_region() reports it).
  std::optional<Shape> stored_extents(const Index& idx, const IndexLookup& look, const Region& r) const;
  /// Restores region `r` from the blocks of `idx` that meet it (read into `idx` first, when it is partial).
  Status restore_region(PartialIndex& idx, const Region& r, BlockReader& reader, Bounces& bounces);
  /// Copies the packed elements `from` (n bytes, a shadow of an optional region) into region `r`'s
  /// memory: its box, when it has a memory selection.
  Status copy_packed(const Region& r, const std::uint8_t* from, std::size_t n);

  MPI_Comm m_app_comm;
  int m_rank = 0, m_size = 1;
  const Options& m_opts;
  bool m_persistent;
  const Store& m_store;
  Store* m_local;
  const NodeLayout& m_layout;
  std::string m_level;
  Device& m_device;
  StagingPool& m_pool;
  Tracer* m_tracer;
  std::vector<std::string> m_skipped;  ///< optional regions the last restart(step) left untouched
  Status m_mine;                       ///< this rank's own outcome of the last restart_from(), before agreement
  std::uint64_t m_index_bytes = 0;     ///< index_bytes()
};

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_RESTART_HPP
