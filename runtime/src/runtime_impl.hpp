// The Runtime behind the facade: registry, pipeline threads, commit and restart (internal).
// See docs/design.md for the threads and who owns what.
#ifndef CKPT_RUNTIME_RUNTIME_IMPL_HPP
#define CKPT_RUNTIME_RUNTIME_IMPL_HPP

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/format.hpp"
#include "base/layout.hpp"
#include "base/mpi.hpp"
#include "base/posix_io.hpp"
#include "base/store.hpp"
#include "ckpt/ckpt.hpp"
#include "gpu/device.hpp"
#include "runtime/src/pool.hpp"
#include "runtime/src/trace.hpp"
#include "transports/transport.hpp"

namespace ckpt::detail {

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// Shared between a checkpoint's Ticket copies and the pipeline.
struct TicketState {
  std::int64_t step = -1;
  mutable std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool observed = false;  ///< wait() was called after done
  Status status;
  CheckpointStats stats;
  std::shared_ptr<Tracer> tracer;  ///< records wait() calls when tracing
  void finish(Status s);
};

/// What the summary needs of one finished checkpoint on this rank.
struct CheckpointRecord {
  CheckpointStats stats;
  bool ok = false;
  int files = 0;     ///< rank 0: files in the committed checkpoint
  Attributes attrs;  ///< rank 0: checkpoint attributes (hints in effect, writers)
};

/// Per-block running state of the digest thread.
struct BlockProgress {
  BlockDigest digest;  ///< checksum and min/max; valid once finished
  bool finished = false;
};

/// One checkpoint on this rank, from checkpoint() to the commit's outcome.
struct Job {
  std::shared_ptr<TicketState> ticket;
  std::int64_t step = 0;
  StreamPlan plan;
  std::vector<std::unique_ptr<Writer>> writers;  ///< one per segment (transport group)
  std::vector<Placement> placements;             ///< one per segment, filled by finish()
  std::vector<bool> segment_done;                ///< write thread: finished or aborted
  std::size_t next_segment = 0;                  ///< write thread: next segment to finish
  std::size_t next_start = 0;                    ///< write thread: next segment to start
  std::string tmp_dir;                           ///< the checkpoint's staging directory (Store::staging_dir)
  std::vector<BlockProgress> progress;
  std::size_t next_block = 0;  ///< digest thread's cursor into plan.blocks
  // Blocks are digested in stream order, so one running state serves them all (a state per block
  // cost ~600 bytes each: 60 MB for 100 000 variables).
  Hasher hasher;                 ///< digest thread: the block at next_block
  std::optional<MinMax> minmax;  ///< its min/max, when its dtype has statistics
  bool block_open = false;       ///< hasher/minmax hold a part of the block at next_block
  Status error;                  ///< first failure on this rank; written by the write thread only
  bool handed_over = false;      ///< write thread: the job went to the commit queue
  Clock::time_point t0;
  Clock::time_point flush_start;  ///< set by the app thread before the first chunk is handed over
};

/// A chunk on its way from capture to the flush thread. chunk == nullptr with last = true marks an
/// empty stream (nothing to write, but the job must still finish).
struct WorkItem {
  std::shared_ptr<Job> job;
  Chunk* chunk = nullptr;
  std::uint64_t offset = 0;
  std::size_t length = 0;
  Fence fence = 0;
  bool last = false;
  Status error;  ///< a capture or digest failure; the write thread makes it the job's error
};

/// A queue with blocking pop; close() releases the consumer.
template <class T>
class BlockingQueue {
 public:
  void push(T v) {
    {
      std::lock_guard<std::mutex> lk(m_mu);
      m_q.push_back(std::move(v));
    }
    m_cv.notify_one();
  }
  void push_all(std::vector<T>&& vs) {
    {
      std::lock_guard<std::mutex> lk(m_mu);
      for (auto& v : vs) m_q.push_back(std::move(v));
    }
    m_cv.notify_one();
  }
  /// False once closed and drained.
  bool pop(T& out) {
    std::unique_lock<std::mutex> lk(m_mu);
    m_cv.wait(lk, [&] { return m_closed || !m_q.empty(); });
    if (m_q.empty()) return false;
    out = std::move(m_q.front());
    m_q.pop_front();
    return true;
  }
  void close() {
    {
      std::lock_guard<std::mutex> lk(m_mu);
      m_closed = true;
    }
    m_cv.notify_all();
  }

 private:
  std::mutex m_mu;
  std::condition_variable m_cv;
  std::deque<T> m_q;
  bool m_closed = false;
};

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
  Status update(const std::string& name, void* ptr, bool is_block, Shape global, Shape start, Shape count);
  Status unprotect(const std::string& name);
  Status annotate(const std::string& name, const std::string& key, const std::string& value);

  Ticket checkpoint(std::int64_t step, void* stream);
  Status wait_all();
  std::optional<std::int64_t> latest();
  Status restart(std::int64_t step);
  Result<std::int64_t> restart_newest();
  Status close();

 private:
  Status usable() const;
  Region* find(const std::string& name);
  Status ensure_pool(std::uint64_t stream_bytes);

  // pipeline (pipeline.cpp)
  void digest_loop();
  void write_loop();
  void commit_loop();
  void digest_item(WorkItem& item);
  void write_item(WorkItem& item);
  Status commit(Job& job);
  Status commit_on_root(Job& job, const std::vector<std::vector<std::uint8_t>>& reports);
  void apply_retention(std::int64_t just_committed);

  // restart (restart.cpp)
  Result<Index> read_index_collective(std::int64_t step);
  Status restore_region(const Index& idx, const IndexLookup& look, Region& r, BlockReader& reader, Chunk* bounce);

  Options m_opts;
  Status m_status;
  bool m_closed = false;
  int m_rank = 0, m_size = 1;
  MPI_Comm m_app_comm = MPI_COMM_NULL;     // collectives of the application thread
  MPI_Comm m_commit_comm = MPI_COMM_NULL;  // collectives of the commit thread
  std::uint64_t m_run_id = 0;
  std::unique_ptr<Store> m_store;  ///< paths on every rank; rank 0 alone lists, commits and retires

  std::unique_ptr<Device> m_device;
  std::vector<std::unique_ptr<Transport>> m_transports;  ///< [0] default, [g] = options.groups[g - 1]
  bool m_persistent = false;                             ///< some transport writes files
  /// Name of the transports for the index: "posix" or "posix+rbio".
  std::string transport_names() const;
  /// Finishes (or aborts, after an error) the writers of segments that end at or before `offset`.
  void close_segments(Job& j, std::uint64_t offset, bool all);
  /// Starts the writers of segments [next_start, upto], in order.
  void start_segments(Job& j, std::size_t upto);
  std::unique_ptr<StagingPool> m_pool;
  std::vector<Region> m_regions;
  std::unordered_map<std::string, std::size_t> m_region_at;  ///< name -> position in m_regions
  std::deque<std::shared_ptr<Job>> m_in_flight;              // app thread only

  BlockingQueue<WorkItem> m_flush_q;  // capture -> digest thread
  BlockingQueue<WorkItem> m_write_q;  // digest thread -> write thread
  BlockingQueue<std::shared_ptr<Job>> m_commit_q;
  std::thread m_digest_thread, m_write_thread, m_commit_thread;

  // trace and summary (trace.cpp)
  std::shared_ptr<Tracer> m_tracer;
  std::mutex m_history_mu;
  std::vector<CheckpointRecord> m_history;  // appended by the commit thread
  CheckpointRecord m_root_last;             // commit thread, rank 0: files/attrs of the last commit
  void write_trace_and_summary();
};

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_RUNTIME_IMPL_HPP
