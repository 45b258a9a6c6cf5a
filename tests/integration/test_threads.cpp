// Options thread_slice_us and thread_cpus (runtime/src/pipeline/threads.hpp).
// Slice: every thread ckpt starts (digest, write, commit, launch) asks the scheduler for that slice,
// keeps the application's nice value, and the application thread keeps its own slice; 0 leaves the
// kernel's default. Read back from /proc/self/task/<tid>/sched ("se.slice"): skipped where the kernel
// does not show it or does not honour sched_runtime for SCHED_OTHER (before 6.12).
// CPUs: with the application thread bound to one CPU (as mpiexec binds a rank), `all` lets ckpt's
// threads run on every CPU of the process, `inherit` keeps the binding, a list is taken as given, and
// `auto` takes the CPUs no rank of the node is bound to - or keeps the binding when there are none.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::all_true;
using ckpt::test::scratch_dir;

namespace {

/// A field of /proc/self/task/<tid>/sched ("se.slice : 100000"), or -1.
long long sched_field(const std::string& tid, const std::string& field) {
  std::ifstream in("/proc/self/task/" + tid + "/sched");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string name, colon;
    long long v = -1;
    if (ls >> name >> colon >> v && name == field) return v;
  }
  return -1;
}

std::string comm_of(const std::string& tid) {
  std::ifstream in("/proc/self/task/" + tid + "/comm");
  std::string c;
  std::getline(in, c);
  return c;
}

struct ThreadInfo {
  long long slice = -1;
  int nice = 0;
  cpu_set_t cpus;
};

/// comm -> what this process's threads named "ckpt ..." have (one per name: one Runtime).
std::map<std::string, ThreadInfo> ckpt_threads() {
  std::map<std::string, ThreadInfo> out;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return out;
  std::vector<std::string> tids;
  while (const dirent* e = readdir(d))
    if (e->d_name[0] != '.') tids.emplace_back(e->d_name);
  closedir(d);
  for (const auto& tid : tids) {
    const std::string c = comm_of(tid);
    if (c.rfind("ckpt ", 0) != 0) continue;
    ThreadInfo& t = out[c];
    t.slice = sched_field(tid, "se.slice");
    t.nice = getpriority(PRIO_PROCESS, static_cast<id_t>(std::stoi(tid)));
    CPU_ZERO(&t.cpus);
    (void)sched_getaffinity(static_cast<pid_t>(std::stoi(tid)), sizeof t.cpus, &t.cpus);
  }
  return out;
}

/// Whether this kernel shows se.slice and honours a requested slice (checked on a thread of our own).
std::string slice_unsupported() {
  const std::string self = std::to_string(static_cast<long>(syscall(SYS_gettid)));
  if (sched_field(self, "se.slice") < 0) return "/proc/self/task/<tid>/sched has no se.slice on this kernel";
  long long got = -1;
  std::thread([&] {
    struct {
      std::uint32_t size, policy;
      std::uint64_t flags;
      std::int32_t nice;
      std::uint32_t priority;
      std::uint64_t runtime, deadline, period;
    } attr{};
    attr.size = sizeof attr;
    attr.nice = getpriority(PRIO_PROCESS, 0);
    attr.runtime = 300000;
    if (syscall(SYS_sched_setattr, 0, &attr, 0u) == 0)
      got = sched_field(std::to_string(static_cast<long>(syscall(SYS_gettid))), "se.slice");
  }).join();
  return got == 300000 ? "" : "the kernel does not honour sched_runtime for SCHED_OTHER (EEVDF slices, Linux 6.12+)";
}

/// Makes a Runtime (coalesce: it has a launcher thread too), checkpoints once, and returns its threads.
std::map<std::string, ThreadInfo> threads_of_a_runtime(const std::string& dir, int slice_us,
                                                       const std::string& cpus = "all",
                                                       Options::OnBusy busy = Options::OnBusy::coalesce) {
  Options o = Options::defaults();
  o.dir = dir;
  o.on_busy = busy;
  o.thread_slice_us = slice_us < 0 ? AutoInt() : AutoInt(slice_us);  // -1: auto
  o.thread_cpus = cpus == "auto" ? AutoText() : AutoText(cpus);
  Runtime rt(MPI_COMM_WORLD, o);
  EXPECT_TRUE(rt.status().ok()) << rt.status().to_string();
  std::vector<double> x(4096, 1.0);
  EXPECT_TRUE(rt.protect("x", x.data(), DType::f64, {x.size()}).ok());
  Ticket t = rt.checkpoint(1);
  EXPECT_TRUE(t.wait().ok());
  auto threads = ckpt_threads();
  EXPECT_TRUE(rt.close().ok());
  return threads;
}

const char* const kNames[] = {"ckpt digest", "ckpt write", "ckpt commit", "ckpt launch", "ckpt reclaim"};

/// Every CPU the process may use (mpiexec may have bound this rank to one): what a thread gets when it
/// asks for all of them, the kernel keeping the cpuset's share.
cpu_set_t process_cpus() {
  cpu_set_t process;
  std::thread([&] {
    cpu_set_t full;
    CPU_ZERO(&full);
    for (int c = 0; c < CPU_SETSIZE; ++c) CPU_SET(c, &full);
    (void)sched_setaffinity(0, sizeof full, &full);
    CPU_ZERO(&process);
    (void)sched_getaffinity(0, sizeof process, &process);
  }).join();
  return process;
}

/// "0-3,8" for a set (written here again, not taken from the runtime: the test checks its message).
std::string ranges_of(const cpu_set_t& set) {
  std::string out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    int last = c;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
    out += (out.empty() ? "" : ",") + std::to_string(c) + (last > c ? "-" + std::to_string(last) : "");
    c = last;
  }
  return out;
}

/// The CPUs below CPU_SETSIZE outside this process's cpuset, highest first.
std::vector<int> cpus_outside(const cpu_set_t& process) {
  std::vector<int> out;
  for (int c = CPU_SETSIZE - 1; c >= 0; --c)
    if (!CPU_ISSET(c, &process)) out.push_back(c);
  return out;
}

Status runtime_status(const std::string& dir, const std::string& cpus) {
  Options o = Options::defaults();
  o.dir = dir;
  o.thread_cpus = cpus == "auto" ? AutoText() : AutoText(cpus);
  Runtime rt(MPI_COMM_WORLD, o);
  return rt.status();
}

}  // namespace

TEST(ThreadSlice, EveryCkptThreadAsksForIt) {
  const std::string why = slice_unsupported();
  if (!all_true(why.empty())) GTEST_SKIP() << why;
  const std::string self = std::to_string(static_cast<long>(syscall(SYS_gettid)));
  const long long app_slice = sched_field(self, "se.slice");
  const int app_nice = getpriority(PRIO_PROCESS, 0);
  ASSERT_NE(app_slice, 250000) << "the test needs an application slice other than the one it asks for";

  auto threads = threads_of_a_runtime(scratch_dir("/slice"), 250);
  for (const char* name : kNames) {
    ASSERT_EQ(threads.count(name), 1u) << name << " not found among this process's threads";
    EXPECT_EQ(threads[name].slice, 250000) << name;
    EXPECT_EQ(threads[name].nice, app_nice) << name << " keeps the application's nice value";
  }
  EXPECT_EQ(sched_field(self, "se.slice"), app_slice) << "the application thread's own slice is left alone";

  threads = threads_of_a_runtime(scratch_dir("/noslice"), 0);
  for (const char* name : kNames) {
    ASSERT_EQ(threads.count(name), 1u) << name;
    EXPECT_EQ(threads[name].slice, app_slice) << name << ": 0 leaves the default slice";
  }
}

// auto (the default): 100 us where the application waits for the pipeline (on_busy wait), the
// kernel's default slice with coalesce.
TEST(ThreadSlice, AutoAsksForItWhereTheApplicationWaits) {
  const std::string why = slice_unsupported();
  if (!all_true(why.empty())) GTEST_SKIP() << why;
  ASSERT_FALSE(Options::defaults().thread_slice_us.has_value()) << "auto";
  const long long app_slice = sched_field(std::to_string(static_cast<long>(syscall(SYS_gettid))), "se.slice");
  ASSERT_NE(app_slice, 100000) << "the test needs an application slice other than the one auto asks for";
  auto threads = threads_of_a_runtime(scratch_dir("/auto-wait"), -1, "all", Options::OnBusy::wait);
  for (const char* name : {"ckpt digest", "ckpt write", "ckpt commit"}) {
    ASSERT_EQ(threads.count(name), 1u) << name << " not found among this process's threads";
    EXPECT_EQ(threads[name].slice, 100000) << name << ": auto with on_busy wait";
  }
  threads = threads_of_a_runtime(scratch_dir("/auto-coalesce"), -1, "all", Options::OnBusy::coalesce);
  for (const char* name : kNames) {
    ASSERT_EQ(threads.count(name), 1u) << name;
    EXPECT_EQ(threads[name].slice, app_slice) << name << ": auto with coalesce leaves the default slice";
  }
}

TEST(ThreadCpus, AllInheritAndAList) {
  cpu_set_t bound, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof bound, &bound), 0);
  const cpu_set_t process = process_cpus();
  if (!all_true(CPU_COUNT(&process) >= 2)) GTEST_SKIP() << "needs 2 CPUs to tell a binding from none";
  int first = 0;
  while (!CPU_ISSET(first, &process)) ++first;
  int second = first + 1;
  while (!CPU_ISSET(second, &process)) ++second;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);  // bound to one CPU, as mpiexec --bind-to core does

  auto threads = threads_of_a_runtime(scratch_dir("/all"), 0, "all");
  for (const char* name : kNames) {
    ASSERT_EQ(threads.count(name), 1u) << name;
    EXPECT_TRUE(CPU_EQUAL(&threads[name].cpus, &process))
        << name << " runs on every CPU of the process, " << CPU_COUNT(&threads[name].cpus) << " of "
        << CPU_COUNT(&process);
  }
  threads = threads_of_a_runtime(scratch_dir("/inherit"), 0, "inherit");
  for (const char* name : kNames) EXPECT_TRUE(CPU_EQUAL(&threads[name].cpus, &one)) << name << " keeps the binding";
  threads = threads_of_a_runtime(scratch_dir("/list"), 0, std::to_string(second));
  for (const char* name : kNames) {
    EXPECT_EQ(CPU_COUNT(&threads[name].cpus), 1) << name;
    EXPECT_TRUE(CPU_ISSET(second, &threads[name].cpus)) << name << " runs on the listed CPU";
  }
  // auto: every rank bound to `first` leaves the others spare - the threads go there ...
  threads = threads_of_a_runtime(scratch_dir("/auto-spare"), 0, "auto");
  cpu_set_t spare;
  CPU_ZERO(&spare);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (c != first && CPU_ISSET(c, &process)) CPU_SET(c, &spare);
  for (const char* name : kNames)
    EXPECT_TRUE(CPU_EQUAL(&threads[name].cpus, &spare)) << name << " runs on the CPUs no rank is bound to";
  // ... and when every CPU has a rank (bound round robin), they stay on their own rank's.
  cpu_set_t own;
  CPU_ZERO(&own);
  {
    int k = 0;
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &process) && k++ % ckpt::test::world_size() == ckpt::test::world_rank()) CPU_SET(c, &own);
  }
  const bool covered = CPU_COUNT(&process) <= ckpt::test::world_size() * CPU_COUNT(&own);
  ASSERT_EQ(sched_setaffinity(0, sizeof own, &own), 0);
  threads = threads_of_a_runtime(scratch_dir("/auto-none"), 0, "auto");
  if (covered)
    for (const char* name : kNames) EXPECT_TRUE(CPU_EQUAL(&threads[name].cpus, &own)) << name << " keeps the binding";
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);

  cpu_set_t now;
  ASSERT_EQ(sched_getaffinity(0, sizeof now, &now), 0);
  EXPECT_TRUE(CPU_EQUAL(&now, &one)) << "the application thread's binding is left alone";
  ASSERT_EQ(sched_setaffinity(0, sizeof bound, &bound), 0);
}

TEST(ThreadCpus, AListOutsideTheCpusetIsRefused) {
  const cpu_set_t process = process_cpus();
  const std::vector<int> outside = cpus_outside(process);
  if (!all_true(!outside.empty())) GTEST_SKIP() << "every CPU below CPU_SETSIZE is in this process's cpuset";
  int inside = 0;
  while (!CPU_ISSET(inside, &process)) ++inside;
  const std::string bad = std::to_string(outside[0]);
  const std::string want =
      "thread_cpus: CPU " + bad + " is not in this process's cpuset (allowed: " + ranges_of(process) + ")";
  // Wholly outside, and partly inside (refused too: who names CPUs wants those).
  for (const std::string& list : {bad, std::to_string(inside) + "," + bad}) {
    const Status s = runtime_status(scratch_dir("/refused"), list);
    EXPECT_EQ(s.code(), Code::invalid_argument) << list << ": " << s.to_string();
    EXPECT_NE(s.message().find(want), std::string::npos) << list << ": " << s.message();
  }
  // Several outside: named as ranges.
  if (outside.size() >= 4) {
    const std::string list = std::to_string(outside[3]) + "," + std::to_string(outside[1]) + "-" + bad;
    const Status s = runtime_status(scratch_dir("/several"), list);
    EXPECT_EQ(s.code(), Code::invalid_argument) << s.to_string();
    const std::string several = "thread_cpus: CPUs " + std::to_string(outside[3]) + "," + std::to_string(outside[1]) +
                                "-" + bad + " are not in this process's cpuset";
    EXPECT_NE(s.message().find(several), std::string::npos) << s.message();
  }
  // The refusal leaves nothing behind: a list inside the cpuset works next.
  const Status s = runtime_status(scratch_dir("/inside"), std::to_string(inside));
  EXPECT_TRUE(s.ok()) << s.to_string();
}

TEST(ThreadCpus, RanksThatDisagreeAllFail) {
  // One rank names a CPU outside its cpuset (as where the ranks' cpusets differ), the others are
  // fine: every rank's Runtime fails with that rank's reason, and none waits for the others.
  const cpu_set_t process = process_cpus();
  const std::vector<int> outside = cpus_outside(process);
  if (!all_true(!outside.empty())) GTEST_SKIP() << "every CPU below CPU_SETSIZE is in this process's cpuset";
  const int last = ckpt::test::world_size() - 1;
  const std::string bad = std::to_string(outside[0]);
  const Status s =
      runtime_status(scratch_dir("/disagree"), ckpt::test::world_rank() == last ? bad : std::string("inherit"));
  EXPECT_EQ(s.code(), Code::invalid_argument) << s.to_string();
  EXPECT_EQ(s.message().rfind("rank " + std::to_string(last) + ": thread_cpus: CPU " + bad + " is not", 0), 0u)
      << s.message();
}
