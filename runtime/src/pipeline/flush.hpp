// The flush threads (internal): the digest thread (checksums and min/max of the staged chunks) and the
// write thread (the transports' writers, then the hand-over to the commit thread). See docs/design.md.
#ifndef CKPT_RUNTIME_FLUSH_HPP
#define CKPT_RUNTIME_FLUSH_HPP

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "gpu/device.hpp"
#include "runtime/src/commit/commit.hpp"
#include "runtime/src/pipeline/job.hpp"
#include "runtime/src/pipeline/pool.hpp"
#include "runtime/src/commit/series.hpp"
#include "runtime/src/pipeline/threads.hpp"

namespace ckpt::detail {

/// What the flush threads need of the options.
struct FlushConfig {
  bool stats = true;       ///< compute min/max
  int flush_delay_ms = 0;  ///< testing: sleep before each write
  ThreadPolicy threads;    ///< options thread_cpus, thread_slice_us
};

/// What opening a checkpoint's writers needs (open_writers).
struct OpenEnv {
  MPI_Comm comm = MPI_COMM_NULL;  ///< the setup agreement (agree_on_job); one thread's only
  int rank = 0, size = 1;
  const std::vector<std::unique_ptr<Transport>>* transports = nullptr;  ///< [g] = transport group g
  bool persistent = false;                                              ///< some transport writes files
  std::uint64_t run_id = 0;
  bool fsync = true;
  /// Writers start the write-back of what they write at once (WriteContext::writeback): the data will
  /// be synced, now (fsync) or by the periodic sync (durable_every_ms).
  bool writeback = true;
  /// Funneled mode (Options::mpi_threads): checkpoint() agreed the arguments and the step on the
  /// application thread already, so open_writers makes no agree_on_job (the write thread calls no MPI).
  bool agreed_before = false;
  /// layout series: the segment each checkpoint goes to (placed at the agreement; null for directories).
  SeriesCursor* series = nullptr;
};

/// Whether some transport writes the whole checkpoint in open() (hdf5-sync): then open_writers runs
/// on the application thread, inside checkpoint().
/// `funneled`: ckpt's MPI calls are the application thread's (Options::mpi_threads), so collective
/// opens (their setup agreement, posix's open token) run there too.
bool opens_on_app_thread(const std::vector<std::unique_ptr<Transport>>& transports, bool funneled);

/// The agreement every checkpoint makes before it touches the file system (collective over `comm`, one
/// allreduce when all is well): ok when every rank's `local` is ok and every rank passed the same
/// `step`; otherwise the same failure on every rank (the lowest failing rank's Status, or
/// invalid_argument naming the range of steps). `ready` (funneled mode, checkpoint()): this rank's count
/// of checkpoints written and waiting for their commit, replaced by the smallest count of any rank
/// (carried by the same allreduce). `roll` (layout series): in, whether this rank wants a new segment;
/// out, whether some rank does (SeriesCursor).
Status agree_on_job(MPI_Comm comm, std::int64_t step, const Status& local, std::uint64_t* ready = nullptr,
                    bool* roll = nullptr);

/// Creates `job`'s staging directory and opens one writer per segment into job.write.writers
/// (collective for MPI transports: every rank opens every group, in order, even after a failure).
/// `setup` is a failure found before (arguments, pool, capture): the ranks agree on it and on the step
/// first (agree_on_job, unless env.agreed_before), and after a failure anywhere nobody creates or opens anything; with
/// collective opens they also agree on the staging directory. Returns the first failure on this rank.
/// Runs on the write thread (or the application thread, see opens_on_app_thread), once per job.
Status open_writers(const OpenEnv& env, Job& job, Status setup);

/// The digests of segment `segment`'s blocks (the others left empty), for its writer's finish(). Reads
/// only that segment's entries of job.digest (the digest thread may still own later ones).
std::vector<BlockDigest> segment_digests(const Job& job, std::size_t segment);

/// Owns the digest and write threads and the queues into them. push() and close() are called by the
/// application thread only.
class FlushPipeline {
 public:
  /// `device`, `pool`, `committer` and open.transports must outlive the pipeline; open.comm (a
  /// communicator of its own, for the setup agreement on the write thread) is freed by close().
  /// Starts the threads.
  /// `chain` (option incremental; else null) says what each checkpoint compares its pieces with.
  FlushPipeline(const FlushConfig& cfg, const OpenEnv& open, Device& device, StagingPool& pool, Committer& committer,
                Tracer* tracer, const Chain* chain = nullptr);
  ~FlushPipeline();
  FlushPipeline(const FlushPipeline&) = delete;
  FlushPipeline& operator=(const FlushPipeline&) = delete;

  /// Hands chunks over, in stream order per job (the digest needs that order).
  void push(WorkItem item) { m_flush_q.push(std::move(item)); }
  void push_all(std::vector<WorkItem>&& items) { m_flush_q.push_all(std::move(items)); }
  /// Hands `job` over with `error` and nothing (more) to write: the job still goes through the write
  /// thread (commit order = step order) and the commit, which every rank must run, and fails there.
  void fail(const std::shared_ptr<Job>& job, const Status& error) { push(final_item(job, error)); }
  /// The item fail() hands over: nothing to write, last, with `error`.
  static WorkItem final_item(const std::shared_ptr<Job>& job, const Status& error);
  /// Drains both queues, stops the threads and frees the communicator.
  void close();

 private:
  void digest_loop();
  void write_loop();
  /// `bound`: the digest thread's device binding; without it the item's chunk is retired unwaited.
  void digest_item(WorkItem& item, const Status& bound);
  void write_item(WorkItem& item);
  /// Finishes (or aborts, after an error) the writers of segments that end at or before `offset`.
  void close_segments(Job& j, std::uint64_t offset, bool all);
  /// Starts the writers of segments [next_start, upto], in order.
  void start_segments(Job& j, std::size_t upto);

  FlushConfig m_cfg;
  OpenEnv m_open;
  Device& m_device;
  StagingPool& m_pool;
  Committer& m_committer;
  Tracer* m_tracer;
  const Chain* m_chain;
  std::uint64_t m_incremental_started = 0;  ///< digest thread: incremental jobs it has started
  BlockingQueue<WorkItem> m_flush_q;  // capture -> digest thread
  BlockingQueue<WorkItem> m_write_q;  // digest thread -> write thread
  std::thread m_digest_thread, m_write_thread;
};

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_FLUSH_HPP
