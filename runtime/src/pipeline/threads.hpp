// What each of ckpt's own threads (digest, write, commit, launch, drain) does first. Internal.
#ifndef CKPT_RUNTIME_THREADS_HPP
#define CKPT_RUNTIME_THREADS_HPP

#include <mpi.h>
#include <time.h>

#include <memory>
#include <mutex>
#include <vector>

#include "ckpt/status.hpp"

namespace ckpt::detail {

/// The CPU time of one Runtime's own threads (option background_cpu): each registers itself when it starts
/// (start_ckpt_thread) and leaves when it ends, its time kept. Thread-safe; seconds() reads one per-thread
/// clock per live thread (~1 us each). Waits count as they run: a thread in an MPI wait polls (sleeping
/// waits: a test every 10-200 us), so a peer's lateness costs it some of its budget.
class CpuMeter {
 public:
  /// A thread's CPU clock (pthread_getcpuclockid): its whole CPU time counts, from the thread's start.
  void add(clockid_t clock);
  /// The thread of `clock` ends (called on it): its time so far is kept.
  void leave(clockid_t clock);
  /// CPU seconds of the registered threads, live and ended.
  double seconds();

 private:
  std::mutex m_mu;
  std::vector<clockid_t> m_live;
  double m_ended_s = 0;
};

/// Where and how ckpt's own threads run (options thread_cpus and thread_slice_us; made by
/// thread_policy() in resolve.cpp).
struct ThreadPolicy {
  /// Scheduler slice in microseconds asked for (sched_setattr's sched_runtime); 0: the default.
  int slice_us = 0;
  /// CPUs the threads may run on: the application thread's when the Runtime was made (inherit), every
  /// CPU the process's cpuset allows (all), or `cpus` (list; thread_cpus auto resolves to the node's
  /// spare CPUs - a list - or to inherit when there are none, see spare_cpus()).
  enum class Cpus { inherit, all, list, spare } where = Cpus::inherit;
  std::vector<int> cpus;  ///< where == list
  /// Whether a refusal by the kernel is said on stderr (rank 0, or every rank with verbose >= 1).
  bool warn = false;
  /// slice_us came from thread_slice_us auto, not from the user: a kernel that refuses it (no
  /// sched_setattr, a seccomp filter) is not worth a line on every job's stderr.
  bool slice_auto = false;
  /// Option background_cpu resolved: the share of one core the threads may use with on_busy coalesce; 0:
  /// no limit. `meter` counts their CPU time (every thread start_ckpt_thread starts is in it).
  double cpu_budget = 0;
  std::shared_ptr<CpuMeter> meter;
};

/// thread_cpus: auto. Collective over `node` (the ranks of one node): the CPUs this process may use
/// (its cpuset) that no rank of the node is bound to, ascending; empty when there are none (ranks
/// not bound, or bound to every CPU). Ranks that were not bound count as using every CPU.
std::vector<int> spare_cpus(MPI_Comm node);

/// A thread_cpus list checked against this process's cpuset (the CPUs a thread gets when it asks for
/// every one; the job's allocation): ok, or invalid_argument naming the listed CPUs outside it and the
/// CPUs allowed ("thread_cpus: CPUs 7,9 are not in this process's cpuset (allowed: 0-1)"). A list
/// partly inside is refused too: who names CPUs wants those, and the kernel would silently keep only
/// the others (or refuse them all, leaving the threads where they were). Ok for the other policies,
/// and when the cpuset cannot be read (the threads' own refusal is then reported, see
/// start_ckpt_thread). Local: ranks may have different cpusets; the Runtime agrees on the outcome.
Status check_cpus(const ThreadPolicy& policy);

/// Names the calling thread for the OS (`os_name`, at most 15 characters: what `top -H`, `perf report
/// --sort comm` and /proc/<pid>/task/<tid>/comm show) and for an NVTX tool (`nvtx_name`), and applies
/// `policy`. Neither setting can fail a checkpoint: a refusal (an old kernel, a seccomp filter, a
/// cpuset changed since the Runtime was made) leaves the inherited setting, and the first refusal of
/// each setting in the process is said once on stderr when `policy.warn` ("ckpt: thread_cpus: ...").
///
/// Why the CPUs: mpiexec/srun bind a rank to its core(s), and threads inherit the binding, so ckpt's
/// threads competed with the application on its own core while other cores idled (1 rank on 2 cores:
/// checkpoint() took 2.4x its copy, the threads' work ran on the application's core). `auto` moves
/// them to the node's CPUs no rank is bound to, when there are any; when every CPU has its rank they
/// stay on their own rank's (`all` would let them preempt the other ranks' compute instead: measured
/// worse). The kernel intersects every mask with the cpuset: a job never leaves its allocation.
///
/// Why the slice: ckpt's threads wake for short pieces of work (a chunk's digest, a write, one test of
/// an agreement's progress) on cores where the application computes. Linux's EEVDF scheduler (6.6+)
/// lets the running thread finish its slice (a few ms on a busy core) before a woken one of the same
/// weight runs; a thread that asked for a shorter slice (honoured from 6.12) gets an earlier deadline
/// and runs at once. It does not get more CPU time than before, only sooner - which, on a core the
/// application computes on, is the compute's time: worth it where the application waits for the
/// pipeline (on_busy wait), not with coalesce (thread_slice_us auto; measured).
///
/// Measured in docs/performance.md ("Where ckpt's threads run").
/// The thread joins `policy.meter` (if any) until it ends.
void start_ckpt_thread(const char* os_name, const char* nvtx_name, const ThreadPolicy& policy) noexcept;

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_THREADS_HPP
