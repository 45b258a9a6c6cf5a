// Option thread_slice_us: every thread ckpt starts (digest, write, commit, launch) asks the scheduler
// for that slice, keeps the application's nice value, and the application thread keeps its own slice;
// 0 leaves the kernel's default. Read back from /proc/self/task/<tid>/sched ("se.slice"): skipped
// where the kernel does not show it or does not honour sched_runtime for SCHED_OTHER (before 6.12).
#include <dirent.h>
#include <gtest/gtest.h>
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

/// comm -> (se.slice, nice) of this process's threads named "ckpt ..." (one per name: one Runtime).
std::map<std::string, std::pair<long long, int>> ckpt_threads() {
  std::map<std::string, std::pair<long long, int>> out;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return out;
  std::vector<std::string> tids;
  while (const dirent* e = readdir(d))
    if (e->d_name[0] != '.') tids.emplace_back(e->d_name);
  closedir(d);
  for (const auto& tid : tids) {
    const std::string c = comm_of(tid);
    if (c.rfind("ckpt ", 0) != 0) continue;
    out[c] = {sched_field(tid, "se.slice"), getpriority(PRIO_PROCESS, static_cast<id_t>(std::stoi(tid)))};
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
std::map<std::string, std::pair<long long, int>> threads_of_a_runtime(int slice_us, const std::string& dir) {
  Options o = Options::defaults();
  o.dir = dir;
  o.on_busy = Options::OnBusy::coalesce;
  o.thread_slice_us = slice_us;
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

}  // namespace

TEST(ThreadSlice, EveryCkptThreadAsksForIt) {
  const std::string why = slice_unsupported();
  if (!all_true(why.empty())) GTEST_SKIP() << why;
  const std::string self = std::to_string(static_cast<long>(syscall(SYS_gettid)));
  const long long app_slice = sched_field(self, "se.slice");
  const int app_nice = getpriority(PRIO_PROCESS, 0);
  ASSERT_NE(app_slice, 250000) << "the test needs an application slice other than the one it asks for";

  auto threads = threads_of_a_runtime(250, scratch_dir("/slice"));
  for (const char* name : {"ckpt digest", "ckpt write", "ckpt commit", "ckpt launch"}) {
    ASSERT_EQ(threads.count(name), 1u) << name << " not found among this process's threads";
    EXPECT_EQ(threads[name].first, 250000) << name;
    EXPECT_EQ(threads[name].second, app_nice) << name << " keeps the application's nice value";
  }
  EXPECT_EQ(sched_field(self, "se.slice"), app_slice) << "the application thread's own slice is left alone";

  threads = threads_of_a_runtime(0, scratch_dir("/noslice"));
  for (const char* name : {"ckpt digest", "ckpt write", "ckpt commit", "ckpt launch"}) {
    ASSERT_EQ(threads.count(name), 1u) << name;
    EXPECT_EQ(threads[name].first, app_slice) << name << ": 0 leaves the default slice";
  }
}
