// What each of ckpt's own threads (digest, write, commit, launch, drain) does first. Internal.
#ifndef CKPT_RUNTIME_THREADS_HPP
#define CKPT_RUNTIME_THREADS_HPP

#include <vector>

namespace ckpt::detail {

/// Where and how ckpt's own threads run (options thread_cpus and thread_slice_us; made by
/// thread_policy() in options.cpp).
struct ThreadPolicy {
  /// Scheduler slice in microseconds asked for (sched_setattr's sched_runtime); 0: the default.
  int slice_us = 0;
  /// CPUs the threads may run on: empty = what the application thread had when the Runtime was made
  /// (thread_cpus: inherit); {-1} = every CPU the process's cpuset allows (all); else those CPUs.
  std::vector<int> cpus;
};

/// Names the calling thread for the OS (`os_name`, at most 15 characters: what `top -H`, `perf report
/// --sort comm` and /proc/<pid>/task/<tid>/comm show) and for an NVTX tool (`nvtx_name`), and applies
/// `policy`. Neither setting can fail a checkpoint: a refusal (an old kernel, a seccomp filter, CPUs
/// outside the cpuset) leaves the inherited setting.
///
/// Why the CPUs: mpiexec/srun bind a rank to its core(s), and threads inherit the binding, so ckpt's
/// threads competed with the application on its own core while other cores idled (1 rank on 2 cores:
/// checkpoint() took 2.4x its copy, the threads' work ran on the application's core). `all` lets them
/// run anywhere the job's cpuset allows; the kernel intersects the mask with the cpuset, so a job
/// never leaves its allocation.
///
/// Why the slice: ckpt's threads wake for short pieces of work (a chunk's digest, a write, one test of
/// an agreement's progress) on cores where the application computes. Linux's EEVDF scheduler (6.6+)
/// lets the running thread finish its slice (a few ms on a busy core) before a woken one of the same
/// weight runs; a thread that asked for a shorter slice (honoured from 6.12) gets an earlier deadline
/// and runs at once. It does not get more CPU time than before, only sooner.
///
/// Measured in docs/performance.md ("Where ckpt's threads run").
void start_ckpt_thread(const char* os_name, const char* nvtx_name, const ThreadPolicy& policy) noexcept;

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_THREADS_HPP
