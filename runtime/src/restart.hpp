// The restorer (internal): latest(), restart(step) and restart() of the newest usable checkpoint, on the
// application thread, collective over the application's communicator.
#ifndef CKPT_RUNTIME_RESTART_HPP
#define CKPT_RUNTIME_RESTART_HPP

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "base/store.hpp"
#include "runtime/src/capture.hpp"

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
  Restorer(MPI_Comm comm, const Options& opts, bool persistent, const Store& store, Device& device, StagingPool& pool,
           Tracer* tracer)
      : m_app_comm(comm),
        m_opts(opts),
        m_persistent(persistent),
        m_store(store),
        m_device(device),
        m_pool(pool),
        m_tracer(tracer) {
    MPI_Comm_rank(comm, &m_rank);
    MPI_Comm_size(comm, &m_size);
  }

  /// The newest complete step (rank 0 decides, every rank gets it).
  std::optional<std::int64_t> latest();
  /// Restores `regions` from step `step`, after the checkpoints `capture` has in flight are done.
  /// Device copies are ordered after the work on `stream` (nullptr: the default stream).
  Status restart(std::int64_t step, void* stream, const std::vector<Region>& regions, Capture& capture);
  /// The validated index of step `step` (rank 0 reads it, every rank gets it), after the checkpoints
  /// `capture` has in flight are done.
  Result<Index> inspect(std::int64_t step, Capture& capture);
  /// restart() of the newest step that restores, falling back to older ones.
  Result<std::int64_t> restart_newest(void* stream, const std::vector<Region>& regions, Capture& capture);

 private:
  Result<Index> read_index_collective(std::int64_t step);
  Status restore_region(const Index& idx, const IndexLookup& look, const Region& r, BlockReader& reader,
                        Bounces& bounces);

  MPI_Comm m_app_comm;
  int m_rank = 0, m_size = 1;
  const Options& m_opts;
  bool m_persistent;
  const Store& m_store;
  Device& m_device;
  StagingPool& m_pool;
  Tracer* m_tracer;
};

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_RESTART_HPP
