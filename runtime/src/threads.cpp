// See threads.hpp.
#include "runtime/src/threads.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

#include "gpu/nvtx.hpp"

namespace ckpt::detail {
namespace {

/// The kernel's struct sched_attr (include/uapi/linux/sched/types.h; glibc has no wrapper).
struct SchedAttr {
  std::uint32_t size;
  std::uint32_t sched_policy;
  std::uint64_t sched_flags;
  std::int32_t sched_nice;
  std::uint32_t sched_priority;
  std::uint64_t sched_runtime;  ///< SCHED_OTHER (EEVDF): the requested slice, ns (0.1-100 ms)
  std::uint64_t sched_deadline;
  std::uint64_t sched_period;
};

void request_slice(int slice_us) noexcept {
#ifdef SYS_sched_setattr
  if (slice_us <= 0) return;
  SchedAttr attr{};
  attr.size = sizeof attr;
  attr.sched_policy = 0;  // SCHED_OTHER; nice stays what the thread inherited
  attr.sched_nice = static_cast<std::int32_t>(nice(0));
  attr.sched_runtime = static_cast<std::uint64_t>(slice_us) * 1000u;
  (void)syscall(SYS_sched_setattr, 0, &attr, 0u);
#else
  (void)slice_us;
#endif
}

void set_cpus(const std::vector<int>& cpus) noexcept {
  if (cpus.empty()) return;  // inherit
  cpu_set_t set;
  CPU_ZERO(&set);
  if (cpus.size() == 1 && cpus.front() < 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) CPU_SET(c, &set);  // the kernel keeps the cpuset's share
  } else {
    for (int c : cpus)
      if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  }
  (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

}  // namespace

void start_ckpt_thread(const char* os_name, const char* nvtx_name, const ThreadPolicy& policy) noexcept {
  (void)pthread_setname_np(pthread_self(), os_name);
  nvtx_name_thread(nvtx_name);
  set_cpus(policy.cpus);
  request_slice(policy.slice_us);
}

}  // namespace ckpt::detail
