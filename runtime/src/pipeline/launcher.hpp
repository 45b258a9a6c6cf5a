// on_busy = coalesce (internal): captured checkpoints wait here, the newest replacing the one that is
// waiting, until the ranks agree which one to flush. See docs/design.md ("Coalescing").
#ifndef CKPT_RUNTIME_LAUNCHER_HPP
#define CKPT_RUNTIME_LAUNCHER_HPP

#include <mpi.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "runtime/src/pipeline/flush.hpp"
#include "runtime/src/pipeline/job.hpp"
#include "runtime/src/pipeline/threads.hpp"

namespace ckpt::detail {

/// A captured checkpoint that waits to be flushed. `seq` counts the checkpoint() calls that passed
/// the argument agreement: the same on every rank.
struct PendingCapture {
  std::shared_ptr<Job> job;
  std::vector<WorkItem> items;  ///< its chunks in stream order, the last one last (empty when `streams`)
  std::uint64_t seq = 0;
  /// The stream does not fit in the pool next to the checkpoints in flight: nothing is captured yet;
  /// the application thread waits in checkpoint() until it is launched, then streams it (as on_busy =
  /// wait does), or until it is superseded.
  bool streams = false;
};

/// The launcher thread and the slot of the capture that waits. The application thread submits; the
/// launcher thread, whenever fewer than max_in_flight checkpoints are in flight (and, with a CPU budget,
/// the wait agreed at the last launch has passed: option background_cpu), agrees with the other
/// ranks (MPI_Allreduce on a communicator of its own) on one sequence number that every rank has
/// captured, and hands that capture to the flush threads; every older capture ends `superseded`.
/// A superseded capture's chunks go back to the pool from a thread of their own (the reclaim thread,
/// bound to the device), once the copies into them landed: neither the application thread nor the
/// launcher thread ever waits for a D2H.
/// Every rank launches the same checkpoints in the same order, whatever the timing of its threads:
/// a rank proposes its newest capture; when the proposals differ, ranks behind drop theirs and take
/// the agreed one (or a newer one) as their application thread submits it, and they try again.
class Launcher {
 public:
  /// `comm` is a communicator of its own, freed by close(); `device`, `flush` and `pool` must outlive the
  /// Launcher. Starts the launcher and reclaim threads.
  Launcher(MPI_Comm comm, int max_in_flight, ThreadPolicy threads, Device& device, FlushPipeline& flush,
           StagingPool& pool);
  ~Launcher();
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  /// Application thread: the capture that waits, if any (not a streaming one), is superseded now (its
  /// chunks go back to the pool), so that the next capture has room. Call before capturing.
  void supersede_waiting();
  /// Application thread: queues `p`, superseding the capture that waits. Returns at once - or, for a
  /// streaming capture, once it was launched (true: stream it now and count it in flight) or
  /// superseded (false).
  bool submit(PendingCapture p);
  /// Commit thread: a launched checkpoint is done (committed or failed).
  void finished();
  /// Application thread: while on (wait_all), this rank asks for no wait for the CPU budget and cuts its own
  /// short; the agreement still decides when the capture launches.
  void hurry(bool on);
  /// Stops the threads (after wait_all: nothing waits on any rank; every superseded capture's chunks
  /// back in the pool) and frees the communicator; a capture still waiting ends superseded.
  void close();

 private:
  void loop();
  /// Under m_mu: ends `p` superseded and hands its chunks to the reclaim thread.
  void drop(PendingCapture& p);
  /// The reclaim thread: gives each dropped chunk back once its copy landed (retires it otherwise).
  void reclaim_loop(const ThreadPolicy& threads);
  /// Hands `p` to the flush threads (or wakes its streaming application thread).
  void launch(PendingCapture& p);
  /// Option background_cpu: how long this rank's threads are over their CPU budget, in us (0: within it, or
  /// no budget). A token bucket: the budget accrues with wall time up to a burst of kBurst of it, the
  /// threads' CPU time (ThreadPolicy::meter) drains it.
  long long budget_wait_us();

  MPI_Comm m_comm;
  const int m_max_in_flight;
  const double m_budget;                    // background_cpu: a share of one core; 0: no budget
  std::shared_ptr<CpuMeter> m_meter;        // ckpt's threads' CPU time (launcher thread only, with the next two)
  double m_credit_s = 0, m_cpu_last_s = 0;  // the bucket (CPU seconds) and the meter when last read
  Clock::time_point m_budget_last;
  Clock::time_point m_not_before;  // no capture is claimed before (the budget's wait, agreed at the last launch)
  bool m_hurry = false;
  Device& m_device;
  FlushPipeline& m_flush;
  StagingPool& m_pool;
  std::mutex m_mu;
  std::condition_variable m_cv;             // the launcher waits: room and a capture, or its wanted seq
  std::condition_variable m_app_cv;         // a streaming application thread waits for its verdict
  std::optional<PendingCapture> m_waiting;  // the newest capture, not yet claimed by the launcher
  std::optional<std::uint64_t> m_want;      // the launcher waits for this seq (or a newer one)
  int m_in_flight = 0;
  bool m_closing = false;
  // A streaming capture's verdict, for seq m_verdict_seq: launched or superseded.
  std::uint64_t m_verdict_seq = 0;
  bool m_has_verdict = false, m_verdict_launched = false;
  BlockingQueue<WorkItem> m_reclaim;  // chunks of dropped captures, for the reclaim thread
  std::thread m_thread, m_reclaimer;
};

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_LAUNCHER_HPP
