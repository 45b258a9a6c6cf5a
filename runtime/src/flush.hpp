// The flush threads (internal): the digest thread (checksums and min/max of the staged chunks) and the
// write thread (the transports' writers, then the hand-over to the commit thread). See docs/design.md.
#ifndef CKPT_RUNTIME_FLUSH_HPP
#define CKPT_RUNTIME_FLUSH_HPP

#include <cstdint>
#include <thread>
#include <vector>

#include "gpu/device.hpp"
#include "runtime/src/commit.hpp"
#include "runtime/src/job.hpp"
#include "runtime/src/pool.hpp"

namespace ckpt::detail {

/// What the flush threads need of the options.
struct FlushConfig {
  bool stats = true;       ///< compute min/max
  int flush_delay_ms = 0;  ///< testing: sleep before each write
};

/// Owns the digest and write threads and the queues into them. push() and close() are called by the
/// application thread only.
class FlushPipeline {
 public:
  /// `device`, `pool` and `committer` must outlive the pipeline. Starts the threads.
  FlushPipeline(const FlushConfig& cfg, Device& device, StagingPool& pool, Committer& committer, Tracer* tracer);
  ~FlushPipeline();
  FlushPipeline(const FlushPipeline&) = delete;
  FlushPipeline& operator=(const FlushPipeline&) = delete;

  /// Hands chunks over, in stream order per job (the digest needs that order).
  void push(WorkItem item) { m_flush_q.push(std::move(item)); }
  void push_all(std::vector<WorkItem>&& items) { m_flush_q.push_all(std::move(items)); }
  /// Hands `job` over with `error` and nothing (more) to write: the job still goes through the write
  /// thread (commit order = step order) and the commit, which every rank must run, and fails there.
  void fail(const std::shared_ptr<Job>& job, const Status& error);
  /// Drains both queues and stops the threads.
  void close();

 private:
  void digest_loop();
  void write_loop();
  void digest_item(WorkItem& item);
  void write_item(WorkItem& item);
  /// Finishes (or aborts, after an error) the writers of segments that end at or before `offset`.
  void close_segments(Job& j, std::uint64_t offset, bool all);
  /// Starts the writers of segments [next_start, upto], in order.
  void start_segments(Job& j, std::size_t upto);

  FlushConfig m_cfg;
  Device& m_device;
  StagingPool& m_pool;
  Committer& m_committer;
  Tracer* m_tracer;
  BlockingQueue<WorkItem> m_flush_q;  // capture -> digest thread
  BlockingQueue<WorkItem> m_write_q;  // digest thread -> write thread
  std::thread m_digest_thread, m_write_thread;
};

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_FLUSH_HPP
