// What each of ckpt's own threads (digest, write, commit, launch, drain) does first. Internal.
#ifndef CKPT_RUNTIME_THREADS_HPP
#define CKPT_RUNTIME_THREADS_HPP

namespace ckpt::detail {

/// Names the calling thread for the OS (`os_name`, at most 15 characters: what `top -H`, `perf report
/// --sort comm` and /proc/<pid>/task/<tid>/comm show) and for an NVTX tool (`nvtx_name`), and asks the
/// scheduler for slices of `slice_us` microseconds (option thread_slice_us; 0: leave the default).
///
/// Why the slice: ckpt's threads wake for short pieces of work (a chunk's digest, a write, one test of
/// an agreement's progress) on cores where the application computes. Linux's EEVDF scheduler (6.6+)
/// lets the running thread finish its slice (a few ms on a busy core) before a woken one of the same
/// weight runs; a thread that asked for a shorter slice (sched_setattr's sched_runtime, honoured from
/// 6.12) gets an earlier deadline and runs at once. It does not get more CPU time than before, only
/// sooner. Measured in docs/performance.md: the wait for the previous checkpoint's agreement, and
/// with it the application's time blocked per checkpoint, shrank about 3x. Kernels without it refuse
/// or ignore the request; nothing else changes.
void start_ckpt_thread(const char* os_name, const char* nvtx_name, int slice_us) noexcept;

}  // namespace ckpt::detail

#endif  // CKPT_RUNTIME_THREADS_HPP
