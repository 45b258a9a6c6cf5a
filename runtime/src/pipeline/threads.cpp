// See threads.hpp.
#include "runtime/src/pipeline/threads.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
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

/// 0, or the errno of the kernel's refusal.
int request_slice(int slice_us) noexcept {
#ifdef SYS_sched_setattr
  if (slice_us <= 0) return 0;
  SchedAttr attr{};
  attr.size = sizeof attr;
  attr.sched_policy = 0;  // SCHED_OTHER; nice stays what the thread inherited
  attr.sched_nice = static_cast<std::int32_t>(nice(0));
  attr.sched_runtime = static_cast<std::uint64_t>(slice_us) * 1000u;
  return syscall(SYS_sched_setattr, 0, &attr, 0u) == 0 ? 0 : errno;
#else
  return slice_us > 0 ? ENOSYS : 0;
#endif
}

cpu_set_t every_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c = 0; c < CPU_SETSIZE; ++c) CPU_SET(c, &set);  // the kernel keeps the cpuset's share
  return set;
}

/// 0, or the errno of the kernel's refusal.
int set_cpus(const ThreadPolicy& policy) noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  switch (policy.where) {
    case ThreadPolicy::Cpus::inherit:
    case ThreadPolicy::Cpus::spare:  // unresolved: nothing spare was found
      return 0;
    case ThreadPolicy::Cpus::all: set = every_cpu(); break;
    case ThreadPolicy::Cpus::list:
      for (int c : policy.cpus)
        if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
      break;
  }
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/// "0-3,8": CPU numbers, ascending, as ranges.
std::string cpu_ranges(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(cpus[i]) + (j > i ? "-" + std::to_string(cpus[j]) : "");
    i = j + 1;
  }
  return out;
}

/// Says the first refusal of one setting in this process on stderr.
void warn_once(std::atomic<bool>& said, const std::string& what, int err) noexcept {
  if (said.exchange(true)) return;
  std::fprintf(stderr, "ckpt: %s (%s); ckpt's threads keep the setting they inherited\n", what.c_str(),
               std::strerror(err));
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

Status check_cpus(const ThreadPolicy& policy) {
  if (policy.where != ThreadPolicy::Cpus::list) return Status::OK();
  const cpu_set_t allowed = allowed_cpus();
  if (CPU_COUNT(&allowed) == 0) return Status::OK();  // unknown: the threads' refusal is reported
  std::vector<int> outside, inside;
  for (int c : policy.cpus)
    if (c < 0 || c >= CPU_SETSIZE || !CPU_ISSET(c, &allowed)) outside.push_back(c);
  if (outside.empty()) return Status::OK();
  std::sort(outside.begin(), outside.end());
  outside.erase(std::unique(outside.begin(), outside.end()), outside.end());
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) inside.push_back(c);
  const bool many = outside.size() > 1;
  return Status(Code::invalid_argument, std::string("thread_cpus: CPU") + (many ? "s " : " ") + cpu_ranges(outside) +
                                            (many ? " are" : " is") +
                                            " not in this process's cpuset (allowed: " + cpu_ranges(inside) + ")");
}

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

namespace {
double clock_seconds(clockid_t clock) {
  timespec ts{};
  return clock_gettime(clock, &ts) == 0 ? static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9 : 0;
}
}  // namespace

/// Leaves a thread's meter when the thread ends (a thread_local's destructor), keeping its time.
struct CpuMeterLeave {
  std::shared_ptr<CpuMeter> meter;
  clockid_t clock{};
  ~CpuMeterLeave() {
    if (meter) meter->leave(clock);
  }
};

void CpuMeter::add(clockid_t clock) {
  std::lock_guard<std::mutex> lk(m_mu);
  m_live.push_back(clock);
}

void CpuMeter::leave(clockid_t clock) {
  std::lock_guard<std::mutex> lk(m_mu);  // the clock read under the lock: seconds() never goes back
  m_live.erase(std::remove(m_live.begin(), m_live.end(), clock), m_live.end());
  m_ended_s += clock_seconds(clock);  // the ending thread's own clock, still valid
}

double CpuMeter::seconds() {
  std::lock_guard<std::mutex> lk(m_mu);
  double s = m_ended_s;
  for (const clockid_t c : m_live) s += clock_seconds(c);
  return s;
}

void start_ckpt_thread(const char* os_name, const char* nvtx_name, const ThreadPolicy& policy) noexcept {
  (void)pthread_setname_np(pthread_self(), os_name);
  clockid_t clock{};
  if (policy.meter && pthread_getcpuclockid(pthread_self(), &clock) == 0) {  // else not counted: the budget sees less
    thread_local CpuMeterLeave leave;  // a ckpt thread belongs to one Runtime: one meter per thread
    if (!leave.meter) {                // a second start on one thread: counted once
      policy.meter->add(clock);
      leave.meter = policy.meter;
      leave.clock = clock;
    }
  }
  nvtx_name_thread(nvtx_name);
  static std::atomic<bool> cpus_said{false}, slice_said{false};
  if (const int err = set_cpus(policy); err != 0 && policy.warn) {
    const std::string where =
        policy.where == ThreadPolicy::Cpus::all ? "every CPU of the process" : "CPUs " + cpu_ranges(policy.cpus);
    warn_once(cpus_said, "thread_cpus: the kernel refused to run ckpt's threads on " + where, err);
  }
  if (const int err = request_slice(policy.slice_us); err != 0 && policy.warn && !policy.slice_auto)
    warn_once(
        slice_said,
        "thread_slice_us: the kernel refused a slice of " + std::to_string(policy.slice_us) + " us (sched_setattr)",
        err);
}

}  // namespace ckpt::detail
