// The Runtime behind the facade: the wiring of registry, capture, flush, commit and restore (internal).
// See docs/design.md for the threads and who owns what.
#ifndef CKPT_RUNTIME_RUNTIME_IMPL_HPP
#define CKPT_RUNTIME_RUNTIME_IMPL_HPP

#include <mpi.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/store.hpp"
#include "ckpt/ckpt.hpp"
#include "gpu/device.hpp"
#include "runtime/src/pipeline/capture.hpp"
#include "runtime/src/commit/commit.hpp"
#include "runtime/src/commit/dir_lock.hpp"
#include "runtime/src/pipeline/flush.hpp"
#include "runtime/src/pipeline/launcher.hpp"
#include "runtime/src/levels/node_level.hpp"
#include "runtime/src/pipeline/pool.hpp"
#include "runtime/src/pipeline/registry.hpp"
#include "runtime/src/api/resolve.hpp"
#include "runtime/src/restart/restart.hpp"
#include "runtime/src/commit/series.hpp"
#include "runtime/src/pipeline/trace.hpp"
#include "transports/transport.hpp"

namespace ckpt::detail {

/// The Runtime behind the facade: it makes the pieces, wires them and checks that the Runtime is
/// usable. Application thread only (like the facade).
///
///   Registry      the protected regions                              (application thread)
///   Capture       checkpoint(): plan, copy into staging              (application thread)
///   FlushPipeline digest thread + write thread (opens, writes)       (its two threads)
///   Committer     agreement, index, store commit, retention          (its thread)
///   Restorer      latest(), restart()                                (application thread)
///   NodeLevel     with options.local_dir (docs/design.md, "Levels"): the Committer commits into the
///                 node directories; its Drainer (a thread) + a second Committer drain them to `dir`
class RuntimeImpl {
 public:
  RuntimeImpl(CommRef comm, const Options& options);
  ~RuntimeImpl();

  Status status() const { return m_status; }
  int rank() const { return m_rank; }
  int size() const { return m_size; }
  const Options& options() const { return m_opts; }

  Status protect(const std::string& name, void* ptr, DType dtype, RegionKind kind, Shape global, Shape start,
                 Shape count);
  Status update(const std::string& name, void* ptr, RegionKind kind, Shape global, Shape start, Shape count);
  Status protect_source(const std::string& name, DType dtype, RegionKind kind, std::shared_ptr<const Source> source);
  Status protect_or_update(const std::string& name, void* ptr, DType dtype, RegionKind kind, Shape global, Shape start,
                           Shape count);
  /// Runtime::protect / update / protect_or_update with Scattered (`dtype` unused by update).
  Status set_scattered(const std::string& name, DType dtype, const Scattered& rows, Upsert mode);
  Status set_optional(const std::string& name, bool optional);
  Status set_memory_selection(const std::string& name, const MemorySelection& selection);
  Status set_restart_rows(const std::string& name, std::shared_ptr<const RestartRows> rows);
  const std::vector<std::string>& skipped_optional() const;
  Status unprotect(const std::string& name);
  Status annotate(const std::string& name, const std::string& key, const std::string& value);

  Ticket checkpoint(std::int64_t step, void* stream);
  Status wait_all();
  Status poll();
  bool funneled() const { return m_funneled; }
  Result<std::optional<std::int64_t>> latest();
  Result<std::vector<std::int64_t>> steps();
  Status restart(std::int64_t step, void* stream);
  Result<std::int64_t> restart_newest(void* stream);
  Result<CheckpointReader> inspect(std::int64_t step);
  const std::string& restart_level() const;
  std::uint64_t restart_index_bytes() const;
  const char* device_name() const;
  Result<JoinedRows> joined_rows(std::int64_t step, const std::string& name);
  Status close();
  /// close() from the MPI_COMM_SELF attribute callback at the start of MPI_Finalize.
  void close_at_finalize();
  static void register_live(RuntimeImpl* r);
  static void unregister_live(RuntimeImpl* r);

 private:
  Status usable() const;
  /// Collective: every rank passed the same arguments to `call`, or the same invalid_argument on every
  /// rank naming the first that differs and two ranks' values.
  Status agree_arguments(const char* call, std::vector<NamedValue> args);
  // Construction, in this order; each step is collective and returns a Status agreed on every rank.
  /// The communicator duplicated, the options resolved (resolve.hpp) and agreed.
  Status join(CommRef comm);
  /// The store of `dir`, the transports, and with local_dir the node level (not yet opened).
  Status make_io();
  /// `made` (make_io()'s Status) agreed with rank 0's preparation of the root (prepare_root()), the
  /// proof that every rank sees the directory rank 0 locked, and the node directories opened.
  Status open_root(Status made);
  /// Rank 0: `dir` made, locked, checked, recovered; with levels, the root's identity (root[0], and
  /// root[1] = 1 when this run made it) and its timeline record bound to this run.
  Status prepare_root(std::uint64_t root[2], std::vector<std::uint8_t>* timeline, long long* next_segment);
  /// The device, the staging pool and where ckpt's threads run (spare cpus found per node).
  Status start_device();
  /// The pipeline: registry, Committer (the node level attached), flush threads, launcher, capture, restorer.
  void make_pipeline();
  /// Makes the default transport and one per group, in order, on every rank (collective).
  Status make_transports();
  /// Rank 0, before the recovery: the root holds only what `layout` writes (a series root is not
  /// continued as directories, nor the other way round); the first segment a series run may use.
  Status check_root_layout(long long* next_segment) const;
  /// Waits for the drains in flight (restart and latest read what they write and retain).
  void wait_drains();
  /// Sizes the staging pool for what is registered now (see Registry::stream_bound and
  /// detail::reserve_for_regions), as `when` allows.
  void reserve_for_regions(Resize when);
  /// Chrome trace and I/O summary (trace.cpp), collective, at close().
  void write_trace_and_summary();
  /// close(), collective: a rank that called checkpoint() fewer times than another issues the missing
  /// checkpoints, refused with an error naming the counts, so that the other ranks' agreements on them
  /// complete and fail alike instead of waiting forever. Returns that error (OK when the counts match).
  Status match_checkpoint_counts();

  Resolved m_cfg;  ///< the resolve step's settings (resolve.hpp)
  Options m_opts;  ///< as given until resolved, then m_cfg.options
  Status m_status;
  bool m_closed = false;
  bool m_closed_by_finalize = false;
  std::recursive_mutex m_close_mu;  ///< close() from the application and from MPI_Finalize's callback
  DirLock m_lock;                   ///< rank 0 of a persistent Runtime: the directory's lock
  std::unique_ptr<Timeline> m_timeline;  ///< rank 0 with a root (persistent or levels): its timeline record
  int m_rank = 0, m_size = 1;
  MPI_Comm m_app_comm = MPI_COMM_NULL;     ///< collectives of the application thread
  MPI_Comm m_commit_comm = MPI_COMM_NULL;  ///< until the Committer takes it
  MPI_Comm m_flush_comm = MPI_COMM_NULL;   ///< until the FlushPipeline takes it (setup agreement)
  std::uint64_t m_run_id = 0;
  long long m_checkpoints = 0;             ///< checkpoint() calls that reached the pipeline (match_checkpoint_counts)
  std::unique_ptr<Store> m_store;          ///< paths on every rank; rank 0 alone lists, commits and retires
  std::unique_ptr<SeriesCursor> m_series;  ///< layout series: the segment of each checkpoint
  std::vector<std::unique_ptr<Transport>> m_transports;  ///< [0] default, [g] = options.groups[g - 1]
  bool m_persistent = false;                             ///< some transport writes files
  std::unique_ptr<NodeLevel> m_node;  ///< with options.local_dir: the node-local level (docs/design.md, "Levels")
  bool m_funneled = false;  ///< every MPI call on the application thread (Options::mpi_threads)
  std::shared_ptr<Tracer> m_tracer;
  std::unique_ptr<Device> m_device;
  std::unique_ptr<StagingPool> m_pool;
  std::unique_ptr<Registry> m_registry;
  std::unique_ptr<Chain> m_chain;  ///< option incremental: what the next checkpoint compares with
  std::unique_ptr<Committer> m_committer;
  std::unique_ptr<FlushPipeline> m_flush;
  std::unique_ptr<Launcher> m_launcher;  ///< on_busy = coalesce
  std::unique_ptr<Capture> m_capture;
  std::unique_ptr<Restorer> m_restorer;
};

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_RUNTIME_IMPL_HPP
