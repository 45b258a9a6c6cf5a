// See threads.hpp.
#include "runtime/src/threads.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <thread>

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

cpu_set_t every_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c = 0; c < CPU_SETSIZE; ++c) CPU_SET(c, &set);  // the kernel keeps the cpuset's share
  return set;
}

void set_cpus(const ThreadPolicy& policy) noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  switch (policy.where) {
    case ThreadPolicy::Cpus::inherit:
    case ThreadPolicy::Cpus::spare:  // unresolved: nothing spare was found
      return;
    case ThreadPolicy::Cpus::all: set = every_cpu(); break;
    case ThreadPolicy::Cpus::list:
      for (int c : policy.cpus)
        if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
      break;
  }
  (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/// The CPUs the kernel lets this process use (its cpuset): what a thread gets when it asks for all.
cpu_set_t allowed_cpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::thread([&allowed] {
    cpu_set_t all = every_cpu();
    if (sched_setaffinity(0, sizeof all, &all) != 0 || sched_getaffinity(0, sizeof allowed, &allowed) != 0)
      CPU_ZERO(&allowed);
  }).join();
  return allowed;
}

}  // namespace

std::vector<int> spare_cpus(MPI_Comm node) {
  cpu_set_t mine;
  if (sched_getaffinity(0, sizeof mine, &mine) != 0) mine = every_cpu();  // unknown: counts as unbound
  int size = 1;
  MPI_Comm_size(node, &size);
  std::vector<cpu_set_t> all(static_cast<std::size_t>(size));
  MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, node);
  cpu_set_t used;
  CPU_ZERO(&used);
  for (const cpu_set_t& s : all) CPU_OR(&used, &used, &s);
  const cpu_set_t allowed = allowed_cpus();
  std::vector<int> spare;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed) && !CPU_ISSET(c, &used)) spare.push_back(c);
  return spare;
}

void start_ckpt_thread(const char* os_name, const char* nvtx_name, const ThreadPolicy& policy) noexcept {
  (void)pthread_setname_np(pthread_self(), os_name);
  nvtx_name_thread(nvtx_name);
  set_cpus(policy);
  request_slice(policy.slice_us);
}

}  // namespace ckpt::detail
