// The drain thread (internal): copies locally complete checkpoints from the node-local level to `dir`
// through the configured transports and commits them there; applies retention to the node level.
// See docs/design.md, "Levels".
#ifndef CKPT_RUNTIME_LEVELS_DRAIN_HPP
#define CKPT_RUNTIME_LEVELS_DRAIN_HPP

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "base/store.hpp"
#include "runtime/src/commit/commit.hpp"
#include "runtime/src/pipeline/flush.hpp"
#include "runtime/src/pipeline/job.hpp"
#include "runtime/src/pipeline/threads.hpp"

namespace ckpt::detail {

/// What the drain needs of the options and of the node layout.
struct DrainConfig {
  int drain_every = 1;                      ///< drain the n-th, 2n-th, ... locally complete checkpoint; 0 = none
  int keep = 2;                             ///< retention of the node directory (node leaders)
  bool node_leader = false;                 ///< this rank applies retention to `local`
  std::uint64_t chunk_bytes = 16ull << 20;  ///< read/write window
  ThreadPolicy threads;                     ///< options thread_cpus, thread_slice_us
};

/// Owns the drain thread. submit() is called by the commit thread (jobs committed locally, in step
/// order); wait_idle() and close() by the application thread.
class Drainer {
 public:
  /// `open` (configured transports; open.comm a communicator of its own, freed by close()), `local`
  /// (this node's store) and `global` (a Committer on `dir`'s store) must outlive the Drainer.
  Drainer(const DrainConfig& cfg, const OpenEnv& open, Store& local, const Store& global_store, Committer& global);
  ~Drainer();
  Drainer(const Drainer&) = delete;
  Drainer& operator=(const Drainer&) = delete;

  /// Queues a locally committed job (its writers' placements name the local files).
  void submit(std::shared_ptr<Job> job);
  /// The commit thread: commits a spilled job (files in `dir`'s staging directory, job.tmp_dir) in
  /// `dir`, in order with the drains, and returns the outcome.
  Status commit_spilled(std::shared_ptr<Job> job);
  /// Waits until every submitted job was drained (or skipped) and retained; returns the first drain
  /// failure not yet taken (the application's tickets report the local level only); `take` clears it.
  Status wait_idle(bool take);
  /// Drains what was submitted, stops the thread, frees the communicator.
  void close();

 private:
  void loop();
  /// Writes `local`'s segments from the node directory through the configured transports into
  /// `dir`'s staging directory and hands the result to the global Committer; returns its outcome.
  Status drain(const Job& local);
  /// The global job of `local` (a copy of its plan and checksums, a ticket of its own) for `dir`.
  std::shared_ptr<Job> global_job(const Job& local) const;

  DrainConfig m_cfg;
  OpenEnv m_open;
  Store& m_local;
  const Store& m_global_store;
  Committer& m_global;
  BlockingQueue<std::shared_ptr<Job>> m_queue;
  std::mutex m_mu;
  std::condition_variable m_cv;
  std::uint64_t m_pending = 0;  ///< submitted, not finished
  std::uint64_t m_count = 0;    ///< drain thread: locally complete checkpoints seen
  Status m_error;               ///< first failure since the last wait_idle()
  std::thread m_thread;
};

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_LEVELS_DRAIN_HPP
