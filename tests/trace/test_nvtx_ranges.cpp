// ckpt's NVTX ranges, seen by an NVTX tool: libnvtx_record.so (nvtx_record.cpp) is loaded through
// NVTX_INJECTION64_PATH, the mechanism Nsight Systems uses, and records every range of every domain.
// The job: a compute loop marked with the application's own NVTX ranges (domain "app"), a checkpoint
// every few iterations (CKPT_TRACE and CKPT_TEST_FLUSH_DELAY_MS come from the environment, see
// CMakeLists.txt), then a restart. Each rank then checks its own capture:
//   - the "ckpt" domain holds exactly the host path's ranges (docs/gpu.md), each on the thread that
//     does that work, closed on the thread that opened it, nested as designed, no misuse recorded;
//   - the flush (write) and commit ranges of every checkpoint overlap the application's compute;
//   - the NVTX ranges are CKPT_TRACE's spans: same names, steps and threads, one for one, and each
//     range encloses its span (pushed before the span starts, popped after it ends) within a tolerance.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::all_true;
using ckpt::test::scratch_dir;
using ckpt::test::world_rank;

namespace {

struct NvtxRange {
  std::string domain, name, parent;
  std::int64_t step = -1;
  std::uint32_t tid = 0, end_tid = 0;
  std::int64_t start_ns = 0, end_ns = 0;
  int depth = 0;
};

struct Capture {
  std::map<std::string, std::uint32_t> threads;  // name -> OS thread id
  std::vector<NvtxRange> ranges;
  std::vector<std::string> problems;  // "open" and "error" lines
};

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  std::string x;
  while (std::getline(ss, x, '\t')) f.push_back(x);
  return f;
}

Capture read_capture(const std::string& path) {
  Capture c;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const auto f = split_tabs(line);
    if (f.empty() || f[0].empty() || f[0][0] == '#') continue;
    if (f[0] == "thread" && f.size() == 3) {
      c.threads[f[2]] = static_cast<std::uint32_t>(std::stoul(f[1]));
    } else if (f[0] == "range" && f.size() == 11) {
      NvtxRange r;
      r.domain = f[1];
      r.name = f[2];
      r.step = std::stoll(f[3]);
      r.tid = static_cast<std::uint32_t>(std::stoul(f[4]));
      r.end_tid = static_cast<std::uint32_t>(std::stoul(f[5]));
      r.start_ns = std::stoll(f[6]);
      r.end_ns = std::stoll(f[7]);
      r.depth = std::stoi(f[8]);
      r.parent = f[9];
      c.ranges.push_back(r);
    } else {
      c.problems.push_back(line);
    }
  }
  return c;
}

std::int64_t overlap_ns(const NvtxRange& a, const NvtxRange& b) {
  return std::max<std::int64_t>(0, std::min(a.end_ns, b.end_ns) - std::max(a.start_ns, b.start_ns));
}

/// Busy compute for about `ms` milliseconds: smoothing sweeps over `u` (the state that is checkpointed).
void compute(std::vector<double>& u, int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  do {
    for (std::size_t i = 1; i + 1 < u.size(); ++i) u[i] = 0.25 * u[i - 1] + 0.5 * u[i] + 0.25 * u[i + 1] + 1e-3;
  } while (std::chrono::steady_clock::now() < until);
}

// Per iteration of the loop; checkpoints at kEvery, 2 kEvery, 3 kEvery.
constexpr int kComputeMs = 8, kEvery = 4, kCheckpoints = 3;
constexpr std::uint64_t kChunk = 64 << 10, kElems = 4 * kChunk / sizeof(double);  // 4 chunks per checkpoint

}  // namespace

TEST(NvtxRanges, InjectionSeesEveryPhaseOverlapAndAgreesWithTrace) {
  const char* inject = std::getenv("NVTX_INJECTION64_PATH");
  const char* capture_dir = std::getenv("NVTXREC_DIR");
  ASSERT_TRUE(inject != nullptr && capture_dir != nullptr) << "run through ctest: NVTX_INJECTION64_PATH, NVTXREC_DIR";
  const std::string dir = scratch_dir();
  const int rank = world_rank();
  Options o;  // defaults, then the CKPT_* environment
  ASSERT_TRUE(o.error.ok()) << o.error.to_string();
  ASSERT_FALSE(o.trace.empty()) << "CKPT_TRACE must be set (CMakeLists.txt)";
  const char* delay = std::getenv("CKPT_TEST_FLUSH_DELAY_MS");
  const long long flush_delay_ms = delay != nullptr ? std::atoll(delay) : 0;
  ASSERT_GT(flush_delay_ms, 0) << "CKPT_TEST_FLUSH_DELAY_MS must be set (CMakeLists.txt)";
  o.dir = dir + "/ckpt";
  o.chunk_bytes = kChunk;
  if (rank == 0) {
    ckpt::detail::remove_tree(capture_dir);
    ckpt::detail::remove_tree(o.trace);
    ASSERT_TRUE(ckpt::detail::make_dirs(capture_dir).ok());
  }
  MPI_Barrier(MPI_COMM_WORLD);

  // The application's own ranges: a domain of its own. A null domain means no tool is attached.
  const nvtxDomainHandle_t app = nvtxDomainCreateA("app");
  ASSERT_TRUE(all_true(app != nullptr)) << "NVTX did not load " << inject;
  const auto app_tid = static_cast<std::uint32_t>(::syscall(SYS_gettid));
  nvtxEventAttributes_t compute_attr{};
  compute_attr.version = NVTX_VERSION;
  compute_attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  compute_attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
  compute_attr.message.ascii = "app:compute";
  compute_attr.payloadType = NVTX_PAYLOAD_TYPE_INT64;

  std::vector<double> u(kElems), at_last;
  bool on_gpu_device = false;  // a GPU (or the simulated device) is there: the Runtime uses its device
  for (std::size_t i = 0; i < u.size(); ++i) u[i] = static_cast<double>((i * 7919 + rank) % 1000);
  {
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(rt.protect("u", u.data(), DType::f64, {u.size()}).ok());
    // One iteration of the application, marked by its own range: compute, then agree with the other
    // ranks (as a real code exchanges halos) on whether the last checkpoint is committed everywhere.
    Ticket last;
    auto iterate = [&](std::int64_t it) {
      compute_attr.payload.llValue = it;
      nvtxDomainRangePushEx(app, &compute_attr);
      compute(u, kComputeMs);
      const bool committed = all_true(last.done());
      nvtxDomainRangePop(app);
      return committed;
    };
    // Between checkpoints the application iterates until the previous one is committed on every rank
    // (at least kEvery iterations; the ranks agree, so the steps are the same everywhere), so every
    // flush and commit runs beside compute; a bounded loop.
    std::int64_t it = 0;
    for (int c = 1; c <= kCheckpoints + 1; ++c) {
      for (int k = 0;; ++k) {
        ASSERT_LT(k, 2000) << "checkpoint " << last.step() << " not committed after 2000 iterations";
        if (iterate(++it) && k + 1 >= kEvery) break;
      }
      if (c > 1) ASSERT_TRUE(last.wait().ok()) << last.wait().to_string();
      if (c <= kCheckpoints) {
        at_last = u;
        last = rt.checkpoint(it);
      }
    }
    const std::int64_t last_step = last.step();
    on_gpu_device = last.stats().staging_pinned_bytes > 0;  // 0 on the host device
    std::fill(u.begin(), u.end(), -1.0);
    const Status rs = rt.restart(last_step);
    EXPECT_TRUE(rs.ok()) << rs.to_string();
    EXPECT_TRUE(u == at_last) << "restart did not bring back the last checkpoint";
    ASSERT_TRUE(rt.close().ok());  // rank 0 writes the trace
  }
  // The injection library writes its file at exit; ask for it now (the library is already loaded).
  void* lib = dlopen(inject, RTLD_LAZY | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto write_now = reinterpret_cast<int (*)()>(dlsym(lib, "nvtxrec_write"));
  ASSERT_NE(write_now, nullptr);
  ASSERT_EQ(write_now(), 0);
  dlclose(lib);
  MPI_Barrier(MPI_COMM_WORLD);

  const Capture cap = read_capture(std::string(capture_dir) + "/nvtx." + std::to_string(rank) + ".tsv");
  EXPECT_TRUE(cap.problems.empty()) << "rank " << rank << ": " << cap.problems.size()
                                    << " problems, first: " << (cap.problems.empty() ? "" : cap.problems[0]);
  std::vector<NvtxRange> ck, compute_ranges;
  for (const auto& r : cap.ranges) {
    if (r.domain == "ckpt") ck.push_back(r);
    if (r.domain == "app") compute_ranges.push_back(r);
    EXPECT_EQ(r.tid, r.end_tid) << r.name << " opened and closed on different threads";
    EXPECT_LE(r.start_ns, r.end_ns) << r.name;
  }
  ASSERT_FALSE(ck.empty());

  // ---- the host path's ranges, exactly (no D2D/D2H on the CPU-only path: host regions) ----
  std::set<std::string> names;
  for (const auto& r : ck) names.insert(r.name);
  std::set<std::string> host_path = {"ckpt:checkpoint", "ckpt:capture", "ckpt:open",  "ckpt:digest", "ckpt:write",
                                     "ckpt:fsync",      "ckpt:commit",  "ckpt:wait", "ckpt:restart"};
  // With a GPU the Runtime's device is the GPU device even for host regions: it marks allocating its
  // pinned staging and the end of a restart (no D2H, D2D or wait for one: nothing is on the device).
  if (on_gpu_device) host_path.insert({"ckpt:pool_grow", "ckpt:h2d_sync"});
  EXPECT_EQ(names, host_path);
  // Those two are the device's, on the application thread, with no CKPT_TRACE span; the checks below
  // are the host path's.
  const auto device_range = [](const NvtxRange& r) {
    return r.name == "ckpt:pool_grow" || r.name == "ckpt:h2d_sync";
  };
  for (const auto& r : ck)
    if (device_range(r)) {
      EXPECT_EQ(r.tid, app_tid) << r.name;
      if (r.name != "ckpt:pool_grow") EXPECT_EQ(r.parent, "ckpt:restart") << r.name;
    }
  ck.erase(std::remove_if(ck.begin(), ck.end(), device_range), ck.end());

  // ---- each range on the thread that does the work, nested as designed ----
  ASSERT_EQ(cap.threads.count("ckpt flush: digest") + cap.threads.count("ckpt flush: write") +
                cap.threads.count("ckpt commit"),
            3u)
      << "ckpt names its threads (nvtxNameOsThreadA)";
  const std::map<std::string, std::uint32_t> thread_of = {{"ckpt:checkpoint", app_tid},
                                                          {"ckpt:capture", app_tid},
                                                          {"ckpt:wait", app_tid},
                                                          {"ckpt:restart", app_tid},
                                                          {"ckpt:digest", cap.threads.at("ckpt flush: digest")},
                                                          {"ckpt:open", cap.threads.at("ckpt flush: write")},
                                                          {"ckpt:write", cap.threads.at("ckpt flush: write")},
                                                          {"ckpt:fsync", cap.threads.at("ckpt flush: write")},
                                                          {"ckpt:commit", cap.threads.at("ckpt commit")}};
  std::map<std::string, int> count;
  for (const auto& r : ck) {
    ++count[r.name];
    EXPECT_EQ(r.tid, thread_of.at(r.name)) << r.name << " step " << r.step << " on the wrong thread";
    // capture is part of checkpoint(); restart() waits for the checkpoints in flight (Ticket::wait).
    if (r.name == "ckpt:capture" || (r.name == "ckpt:wait" && r.depth == 1)) {
      const std::string outer = r.name == "ckpt:capture" ? "ckpt:checkpoint" : "ckpt:restart";
      EXPECT_EQ(r.depth, 1) << r.name << " nests in " << outer;
      EXPECT_EQ(r.parent, outer) << r.name;
      const bool inside = std::any_of(ck.begin(), ck.end(), [&](const NvtxRange& p) {
        return p.name == outer && p.tid == r.tid && p.start_ns <= r.start_ns && r.end_ns <= p.end_ns;
      });
      EXPECT_TRUE(inside) << r.name << " of step " << r.step << " outside its " << outer << " range";
    } else {
      EXPECT_EQ(r.depth, 0) << r.name << " nested in " << r.parent;
    }
  }
  EXPECT_EQ(count["ckpt:checkpoint"], kCheckpoints);
  EXPECT_EQ(count["ckpt:capture"], kCheckpoints);
  EXPECT_EQ(count["ckpt:commit"], kCheckpoints);
  EXPECT_EQ(count["ckpt:write"], kCheckpoints * 4) << "4 chunks per checkpoint";
  EXPECT_EQ(count["ckpt:digest"], kCheckpoints * 4);
  EXPECT_EQ(count["ckpt:restart"], 1);
  for (const auto& r : compute_ranges) {
    EXPECT_EQ(r.tid, app_tid);
    EXPECT_EQ(r.depth, 0);
  }

  // ---- the flush and the commit of every checkpoint ran beside the application's compute ----
  std::set<std::int64_t> steps;
  for (const auto& r : ck)
    if (r.name == "ckpt:checkpoint") steps.insert(r.step);
  ASSERT_EQ(steps.size(), static_cast<std::size_t>(kCheckpoints));
  for (std::int64_t s : steps) {
    std::int64_t write_ns = 0, write_overlap = 0, commit_overlap = 0;
    for (const auto& r : ck) {
      if (r.step != s) continue;
      for (const auto& c : compute_ranges) {
        if (r.name == "ckpt:write") write_overlap += overlap_ns(r, c);
        if (r.name == "ckpt:commit") commit_overlap += overlap_ns(r, c);
      }
      if (r.name == "ckpt:write") write_ns += r.end_ns - r.start_ns;
    }
    EXPECT_GE(write_ns, 4 * flush_delay_ms * 1000000LL) << "step " << s << ": each write sleeps the delay";
    EXPECT_GE(2 * write_overlap, write_ns) << "step " << s << ": less than half of the writes overlap compute";
    EXPECT_GT(commit_overlap, 0) << "step " << s << ": the commit did not overlap compute";
  }

  // ---- NVTX ranges == CKPT_TRACE spans (rank 0 wrote trace.json at close) ----
  std::ifstream tf(o.trace + "/trace.json");
  ASSERT_TRUE(tf.good()) << o.trace << "/trace.json";
  const auto trace = nlohmann::json::parse(tf);
  double origin_ns = -1;
  // (logical trace thread, name) -> spans in start order
  std::map<std::pair<int, std::string>, std::vector<std::pair<double, double>>> spans;  // start/end ns
  std::map<std::pair<int, std::string>, std::vector<std::int64_t>> span_steps;
  std::vector<nlohmann::json> mine;
  for (const auto& e : trace["traceEvents"]) {
    if (e["pid"] != rank) continue;
    if (e["name"] == "ckpt_clock") origin_ns = e["args"]["steady_origin_ns"].get<double>();
    if (e["ph"] == "X") mine.push_back(e);
  }
  ASSERT_GT(origin_ns, 0) << "trace.json has no clock origin for rank " << rank;
  std::sort(mine.begin(), mine.end(), [](const auto& a, const auto& b) {
    return a["ts"].template get<double>() < b["ts"].template get<double>();
  });
  const std::map<int, std::uint32_t> os_thread = {{0, app_tid},
                                                  {1, cap.threads.at("ckpt flush: digest")},
                                                  {2, cap.threads.at("ckpt flush: write")},
                                                  {3, cap.threads.at("ckpt commit")}};
  std::map<std::pair<std::uint32_t, std::string>, std::vector<NvtxRange>> by_thread;
  for (const auto& r : ck) by_thread[{r.tid, r.name}].push_back(r);
  for (auto& kv : by_thread)
    std::sort(kv.second.begin(), kv.second.end(),
              [](const NvtxRange& a, const NvtxRange& b) { return a.start_ns < b.start_ns; });
  std::map<std::pair<std::uint32_t, std::string>, std::size_t> used;
  constexpr double kRound = 10;  // ns: trace.json prints microseconds with 3 decimals (1 ns)
  constexpr double kTol = 50e6;  // ns: a loaded 2-core CI machine may preempt between the two clocks
  std::vector<double> diffs;
  for (const auto& e : mine) {
    const std::string name = e["name"];
    const int tid = e["tid"];
    const auto key = std::make_pair(os_thread.at(tid), name);
    const std::size_t k = used[key]++;
    const auto& list = by_thread[key];
    ASSERT_LT(k, list.size()) << "trace span " << name << " step " << e["args"]["step"] << " has no NVTX range";
    const NvtxRange& r = list[k];
    const double ts = origin_ns + e["ts"].get<double>() * 1e3, te = ts + e["dur"].get<double>() * 1e3;
    EXPECT_EQ(r.step, e["args"]["step"].get<std::int64_t>()) << name;
    EXPECT_LE(static_cast<double>(r.start_ns), ts + kRound) << name << ": range starts after its span";
    EXPECT_GE(static_cast<double>(r.end_ns), te - kRound) << name << ": range ends before its span";
    EXPECT_LT(ts - static_cast<double>(r.start_ns), kTol) << name;
    EXPECT_LT(static_cast<double>(r.end_ns) - te, kTol) << name;
    diffs.push_back(std::abs(ts - static_cast<double>(r.start_ns)));
    diffs.push_back(std::abs(static_cast<double>(r.end_ns) - te));
  }
  for (const auto& kv : by_thread)
    EXPECT_EQ(used[kv.first], kv.second.size()) << kv.first.second << ": NVTX ranges without a trace span";
  ASSERT_FALSE(diffs.empty());
  std::nth_element(diffs.begin(), diffs.begin() + diffs.size() / 2, diffs.end());
  EXPECT_LT(diffs[diffs.size() / 2], 1e6) << "median NVTX/trace difference above 1 ms";
}
