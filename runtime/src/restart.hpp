// The restorer (internal): latest(), restart(step) and restart() of the newest usable checkpoint, on the
// application thread, collective over the application's communicator.
#ifndef CKPT_RUNTIME_RESTART_HPP
#define CKPT_RUNTIME_RESTART_HPP

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/store.hpp"
#include "runtime/src/capture.hpp"
#include "runtime/src/registry.hpp"

namespace ckpt::detail {

/// The restart's two bounce chunks: piece k is read into chunk[k % 2] while the copies of piece k-1
/// run; before a chunk is read into again, the fence taken after its copies is waited on.
struct Bounces {
  Chunk* chunk[2] = {nullptr, nullptr};
  Fence fence[2] = {0, 0};
  int next = 0;
};

/// Application thread only. The referenced objects must outlive the Restorer.
class Restorer {
 public:
  /// `local`: this node's store when the Runtime has a node-local level (docs/design.md, "Levels"),
  /// else nullptr; `node_leader`: this rank lists `local` for the others of its node.
  Restorer(MPI_Comm comm, const Options& opts, bool persistent, const Store& store, const Store* local,
           bool node_leader, Device& device, StagingPool& pool, Tracer* tracer)
      : m_app_comm(comm),
        m_opts(opts),
        m_persistent(persistent),
        m_store(store),
        m_local(local),
        m_node_leader(node_leader),
        m_device(device),
        m_pool(pool),
        m_tracer(tracer) {
    MPI_Comm_rank(comm, &m_rank);
    MPI_Comm_size(comm, &m_size);
  }

  /// The newest complete step (rank 0 decides, every rank gets it): of `dir`, or held by every node.
  std::optional<std::int64_t> latest();
  /// "local" or "global": where the last successful restart read from; "" before any.
  const std::string& level() const { return m_level; }
  /// Restores `regions` from step `step`, after the checkpoints `capture` has in flight are done.
  /// Device copies are ordered after the work on `stream` (nullptr: the default stream).
  /// Regions registered with a Source are located and resized (Source::resize) first.
  Status restart(std::int64_t step, void* stream, Registry& registry, Capture& capture);
  /// The validated index of step `step` (rank 0 reads it, every rank gets it), after the checkpoints
  /// `capture` has in flight are done.
  Result<Index> inspect(std::int64_t step, Capture& capture);
  /// restart() of the newest step that restores, falling back to older ones.
  Result<std::int64_t> restart_newest(void* stream, Registry& registry, Capture& capture);
  /// The optional regions the last restart(step) left untouched (not in its checkpoint).
  const std::vector<std::string>& skipped_optional() const { return m_skipped; }
  /// The stored rows of joined array `name` in `step` and this rank's balanced share (collective).
  Result<JoinedRows> joined_rows(std::int64_t step, const std::string& name, Capture& capture);

 private:
  /// Steps that every node holds complete in its directory, newest first; empty without a node level.
  /// Collective (node leaders list, rank 0 intersects, every rank gets the answer).
  std::vector<std::int64_t> local_steps();
  /// restart() from one level: `store` is this rank's store of that level (its node's or `dir`'s).
  Status restart_from(std::int64_t step, void* stream, Registry& registry, const Store& store);
  Result<Index> read_index_collective(std::int64_t step, const Store& store);
  /// The first stored row of joined region `r` on this rank (its balanced share or r.first_row), or
  /// why its rows do not fit the stored ones `v`.
  Result<std::uint64_t> joined_first_row(const VarRecord& v, const Region& r) const;
  /// The extents `r` gets from checkpoint `idx` on this rank (what Source::resize is asked for), or
  /// nullopt when the checkpoint does not say (missing, another kind: restore_region() reports it).
  std::optional<Shape> stored_extents(const Index& idx, const IndexLookup& look, const Region& r) const;
  Status restore_region(const Index& idx, const IndexLookup& look, const Region& r, BlockReader& reader,
                        Bounces& bounces);

  MPI_Comm m_app_comm;
  int m_rank = 0, m_size = 1;
  const Options& m_opts;
  bool m_persistent;
  const Store& m_store;
  const Store* m_local;
  bool m_node_leader;
  std::string m_level;
  Device& m_device;
  StagingPool& m_pool;
  Tracer* m_tracer;
  std::vector<std::string> m_skipped;  ///< optional regions the last restart(step) left untouched
};

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_RESTART_HPP
