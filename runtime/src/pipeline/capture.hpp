// The capture (internal): checkpoint() on the application thread - the in-flight window, the stream
// plan, the copy into staging chunks and their hand-over to the flush threads. The staging directory
// and the writers' opens are the write thread's (flush.hpp), except for transports that write in
// open() (hdf5-sync).
#ifndef CKPT_RUNTIME_CAPTURE_HPP
#define CKPT_RUNTIME_CAPTURE_HPP

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "base/box.hpp"
#include "base/store.hpp"
#include "runtime/src/commit/commit.hpp"
#include "runtime/src/pipeline/flush.hpp"
#include "runtime/src/pipeline/job.hpp"
#include "runtime/src/pipeline/launcher.hpp"

namespace ckpt::detail {

/// A ticket that is done with `s` (a checkpoint refused before it started).
Ticket failed_ticket(std::int64_t step, Status s);

/// Everything checkpoint() uses; each referenced object must outlive the Capture.
struct CaptureEnv {
  const Options* options = nullptr;
  Device* device = nullptr;
  StagingPool* pool = nullptr;
  const std::vector<std::unique_ptr<Transport>>* transports = nullptr;  ///< [g] = transport group g
  OpenEnv open;  ///< for transports that open on this thread (opens_on_app_thread): the app's comm
  const Store* store = nullptr;
  std::shared_ptr<Tracer> tracer;
  FlushPipeline* flush = nullptr;
  Launcher* launcher = nullptr;  ///< on_busy = coalesce; null for wait
  /// Funneled mode (Options::mpi_threads): the commits this thread runs; empty otherwise.
  std::weak_ptr<Funnel> funnel;
  bool funneled = false;
};

/// Application thread only.
class Capture {
 public:
  explicit Capture(CaptureEnv env) : m_env(std::move(env)), m_opts(*m_env.options) {}

  /// Takes checkpoint `step` of `regions` (collective). See Runtime::checkpoint. `local`: a failure
  /// found before (e.g. a region that could not be located), agreed like a bad argument.
  Ticket checkpoint(std::int64_t step, void* stream, const std::vector<Region>& regions,
                    const Status& local = Status::OK());
  /// Waits for every checkpoint in flight; the first failure.
  Status wait_all();
  /// Forgets the checkpoints in flight (after the pipeline has drained).
  void clear() { m_in_flight.clear(); }

 private:
  /// Waits while max_in_flight checkpoints are in flight; an unobserved failure of one of them.
  /// With coalesce it waits only for an earlier checkpoint of the same step and forgets done ones.
  Status make_room(std::int64_t step);
  /// The job of `step`: plan, staging directory, digests of empty blocks.
  std::shared_ptr<Job> new_job(std::int64_t step, const std::vector<Region>& regions,
                               std::shared_ptr<TicketState> ticket) const;
  /// Copies the stream into chunks and hands them over - or, with `collect`, appends them there in
  /// stream order (the last one last); a failure travels with the job's last item.
  Status copy_chunks(const std::shared_ptr<Job>& job, void* stream, double& wait_s,
                     std::vector<WorkItem>* collect = nullptr);
  /// Copies bytes [p0, p0 + n) of the payload of block `bp` (region `r`'s packed elements) to `dst`,
  /// part by part (a scattered region: bp.parts; any other: `r` itself).
  Status copy_block(const Region& r, const BlockPlan& bp, std::uint8_t* dst, std::uint64_t p0, std::uint64_t n);
  /// Copies bytes [p0, p0 + n) of one part's packed elements to `dst`: the part at `ptr` (packed when
  /// `mem_alloc` is empty, else the box [mem_start, mem_start + count) of it, from the rows of its
  /// allocation), in bp.mem; bp.length is the whole block's (streaming stores from 64 KiB).
  Status copy_part(const void* ptr, const Shape& count, const Shape& mem_start, const Shape& mem_alloc,
                   std::size_t esize, const BlockPlan& bp, std::uint8_t* dst, std::uint64_t p0, std::uint64_t n);
  /// Captures `job` with on_busy = coalesce (see Launcher).
  void coalesce(const std::shared_ptr<Job>& job, Status setup, void* stream, double& wait_s);

  CaptureEnv m_env;
  const Options& m_opts;
  std::deque<std::shared_ptr<Job>> m_in_flight;
  std::uint64_t m_seq = 0;  ///< checkpoint() calls past the argument agreement (equal on every rank)
};

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_CAPTURE_HPP
