// What flows through the pipeline (internal): a checkpoint's job and its ticket state, the work items
// between the threads, and the queue that carries them. Which thread owns which part is in the types.
#ifndef CKPT_RUNTIME_JOB_HPP
#define CKPT_RUNTIME_JOB_HPP

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/format.hpp"
#include "base/layout.hpp"
#include "ckpt/ckpt.hpp"
#include "runtime/src/pipeline/incremental.hpp"
#include "runtime/src/pipeline/pool.hpp"
#include "runtime/src/pipeline/trace.hpp"
#include "transports/transport.hpp"

namespace ckpt::detail {

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// Shared between a checkpoint's Ticket copies and the pipeline.
class Funnel;

struct TicketState {
  std::int64_t step = -1;
  mutable std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool observed = false;  ///< wait() was called after done
  Status status;
  CheckpointStats stats;
  std::shared_ptr<Tracer> tracer;  ///< records wait() calls when tracing
  /// Funneled mode (Options::mpi_threads): wait() commits on the calling (application) thread through
  /// it; expired once the Runtime is closed (every ticket is done by then).
  std::weak_ptr<Funnel> funnel;
  void finish(Status s);
  bool is_done() const {
    std::lock_guard<std::mutex> lk(mu);
    return done;
  }
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

/// The digest thread's part of a job: only the digest thread writes it. The write thread reads
/// `progress[b]` of blocks whose last chunk it has already received from the digest thread (the queue
/// between them orders those reads after the writes).
struct DigestState {
  std::vector<BlockProgress> progress;  ///< one per plan block
  std::size_t next_block = 0;           ///< cursor into plan.blocks
  // Blocks are digested in stream order, so one running state serves them all (a state per block
  // cost ~600 bytes each: 60 MB for 100 000 variables).
  Hasher hasher;                 ///< the block at next_block
  std::optional<MinMax> minmax;  ///< its min/max, when its dtype has statistics
  bool block_open = false;       ///< hasher/minmax hold a part of the block at next_block
};

/// The write thread's part of a job: the write thread opens the writers when the job's first chunk
/// reaches it (the application thread does, before the first chunk is handed over, for transports
/// that write in open(): hdf5-sync); the write thread alone uses it until it hands the job to the
/// commit thread (handed_over), which reads placements and error.
struct WriteState {
  std::vector<std::unique_ptr<Writer>> writers;  ///< one per segment (transport group)
  std::vector<Placement> placements;             ///< one per segment, filled by finish()
  std::vector<bool> segment_done;                ///< finished or aborted
  std::size_t next_segment = 0;                  ///< next segment to finish
  std::size_t next_start = 0;                    ///< next segment to start
  Status error;                                  ///< first failure on this rank
  std::uint64_t stream_bytes = 0;                ///< bytes of the stream handed to write()
  bool opened = false;                           ///< open_writers() ran
  bool handed_over = false;                      ///< the job went to the commit thread
};

/// One checkpoint on this rank, from checkpoint() to the commit's outcome. The fields at the top are
/// set by the application thread before the first chunk is handed over and read-only afterwards.
struct Job {
  std::shared_ptr<TicketState> ticket;
  std::int64_t step = 0;
  StreamPlan plan;
  /// The staging chunk size the plan was made with (segments start at its multiples; one window per
  /// chunk). The pool keeps it while any chunk is lent (StagingPool::rechunk).
  std::uint64_t chunk_bytes = 0;
  std::string tmp_dir;  ///< the checkpoint's staging directory (Store::staging_dir)
  Clock::time_point t0;
  Clock::time_point flush_start;  ///< when the first chunk was handed over
  DigestState digest;
  IncrementalJob incremental;  ///< option incremental: the digest thread's, then the commit thread's
  WriteState write;
  /// The node level: some rank's node disk was full, so the commit thread commits this checkpoint in
  /// `dir` (through the drain thread, which finishes `spill_done` with the outcome).
  bool spilled = false;
  std::shared_ptr<TicketState> spill_done;
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
  bool keep_chunk = false;  ///< the copy into the chunk could not be confirmed landed: retire, never reuse
  Status error;             ///< a capture or digest failure; the write thread makes it the job's error
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
  /// Items queued now.
  std::size_t size() const {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_q.size();
  }
  enum class Popped { item, closed, timeout };
  /// pop() that gives up at `deadline`: an item, closed (and drained), or the deadline passed.
  template <class Clock, class Duration>
  Popped pop_until(T& out, const std::chrono::time_point<Clock, Duration>& deadline) {
    std::unique_lock<std::mutex> lk(m_mu);
    if (!m_cv.wait_until(lk, deadline, [&] { return m_closed || !m_q.empty(); })) return Popped::timeout;
    if (m_q.empty()) return Popped::closed;
    out = std::move(m_q.front());
    m_q.pop_front();
    return Popped::item;
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
  mutable std::mutex m_mu;
  std::condition_variable m_cv;
  std::deque<T> m_q;
  bool m_closed = false;
};

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_JOB_HPP
