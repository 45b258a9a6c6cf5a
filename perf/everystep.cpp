// perf/everystep: the every-step pattern (issue 38) with a cache-resident compute - the second
// every-step benchmark beside perf/finegrain, written against the public API only.
//
// Each step is a 1-D three-point stencil swept `passes` times over a work array of --work bytes per
// rank (two f64 arrays of half that each), the passes calibrated so that a step takes about --step-ms
// on the slowest rank; then the ranks exchange the stencil's edges with their neighbours (--coupling
// halo, the default: a distributed stencil's halo, so the ranks advance together as coupled codes do;
// --coupling none: they drift apart, and a commit, which needs every rank's capture of a step, then
// trails the fastest rank by the drift), the state (--state bytes per rank, f64) advances by touching
// one element in every 512, and checkpoint(step) is called. finegrain streams its compute from memory (a window of
// a 256 MiB array); here the work array stays in a cache level when --work is small (256K: L2, 2M:
// L3 as in the program, 64M: memory), so what ckpt's copies and threads evict shows up.
//
// Modes, interleaved round by round (round 0 is a warm-up), each a fresh Runtime in an empty directory
// (made untimed), the timed loop from a barrier to the last checkpoint durable:
//   none               the loop without checkpoints: every ratio's denominator (same round)
//   coalesce-fsync     posix, on_busy coalesce, fsync on, keep 2; ends with wait_all()
//   coalesce-nofsync   the same without fsync          } variants that leave one stage out, so that
//   coalesce-nostats   the same without min/max stats  } differences place the cost (this VM has no
//   coalesce-null      the null transport: no I/O      } hardware counters)
//   coalesce-slice100  coalesce-fsync with thread_slice_us 100 (ckpt's threads woken sooner; --modes only)
//   series-coalesce    coalesce-fsync with layout series: every written checkpoint durable (--modes only)
//   <mode>:cpu=X       <mode> with option background_cpu X (off, or a share of one core; default auto)
//   series-end         layout series, fsync on, durable_every_ms 1 day, keep 1000000, on_busy wait:
//                      every step kept, durable at the end (close() syncs), as ADIOS2 BP5 in finegrain
// Per mode: the median over rounds of run time / the same round's none with the 95% interval of that
// median (order statistics), compute time per step (median step of the median round) over none's -
// the interference of ckpt's threads with a cache-resident compute -, time blocked in checkpoint()
// per call, checkpoints written (coalesce supersedes some) and the lag: how many steps the newest
// committed checkpoint was behind the step just computed (checked before each checkpoint() from step 4):
// the medians over rounds of its median and 90th percentile over the steps, and its largest in any round
// (--lag-trace F: rank 0's lag at every step of every round, as CSV). Then where the time goes, from
// the scheduler's per-thread counters (/proc/self/task/*/schedstat): the application thread's time on a
// CPU and runnable but waiting per step, and ckpt's threads' CPU per checkpoint written, by thread
// (--csv F also writes F.threads).
//
//   mpiexec -n 2 build/perf/everystep --work 256K,2M,64M --reps 11 --dir /tmp/ckpt-everystep
//       [--state 1M] [--steps 100] [--step-ms 4] [--modes none,coalesce-fsync] [--csv F] [--lag-trace F]
//       [--coupling halo|none]
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ckpt/ckpt.hpp"

using namespace ckpt::bench;

namespace {

[[noreturn]] void fail(const std::string& what) { abort_job("everystep", what); }

struct Args {
  std::vector<std::uint64_t> work{2ull << 20};
  std::uint64_t state = 1ull << 20;
  int steps = 100, reps = 11;
  double step_ms = 4;
  std::string dir = "/tmp/ckpt-everystep", csv, modes, lag_trace;
  bool halo = true;  ///< --coupling halo: the ranks exchange their stencil's edges every step
};

/// The application: the checkpointed state and the stencil's two arrays.
struct App {
  std::vector<double> state, a, b;
  int passes = 1;
  __attribute__((noinline)) void compute() {  // not inlined: every mode runs the same machine code
    const std::size_t n = a.size();
    for (int p = 0; p < passes; ++p) {
      for (std::size_t i = 1; i + 1 < n; ++i) b[i] = (a[i - 1] + a[i] + a[i + 1]) * (1.0 / 3.0);
      std::swap(a, b);
    }
  }
  /// The stencil's halo: each rank's edge values to its neighbours on a ring (a distributed 1-D stencil's
  /// exchange): the ranks advance step by step together, as coupled codes do.
  void exchange() {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size == 1) return;
    const int left = (rank + size - 1) % size, right = (rank + 1) % size;
    const std::size_t n = a.size();
    MPI_Sendrecv(&a[n - 2], 1, MPI_DOUBLE, right, 0, &a[0], 1, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(&a[1], 1, MPI_DOUBLE, left, 1, &a[n - 1], 1, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  void advance(std::int64_t s) {
    for (std::size_t i = 0; i < state.size(); i += 512) state[i] = static_cast<double>(s);
  }
};

/// passes so that a step takes about `ms` on the slowest rank, from the fastest of a few timed passes.
void calibrate(App& app, double ms) {
  app.passes = 1;
  double best = 1e30;
  for (int i = 0; i < 12; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = Clock::now();
    app.compute();
    if (i >= 2) best = std::min(best, since(t0));
  }
  int mine = std::max(1, static_cast<int>(std::lround(ms * 1e-3 / best))), agreed = 0;
  MPI_Allreduce(&mine, &agreed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  app.passes = agreed;
}

/// ckpt's threads that a coalescing Runtime runs, by the names they give themselves (threads.hpp).
constexpr const char* kCkptThreads[] = {"ckpt launch", "ckpt digest", "ckpt write", "ckpt commit", "ckpt reclaim"};

/// CPU and run-queue time of this process's threads (/proc/self/task/*/schedstat: time on a CPU, time
/// runnable but waiting for one, ns), by role: the application's thread ("app"), each of ckpt's threads by
/// its name ("ckpt commit", ...), and the rest (MPI's) as "other". This VM has no hardware counters;
/// where the time goes per thread is what the scheduler knows.
struct ThreadTime {
  double run_s = 0, wait_s = 0;
};
std::map<std::string, ThreadTime> thread_times() {
  std::map<std::string, ThreadTime> out;
  const std::string self = std::to_string(::getpid());
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(e.path() / "comm"), stat(e.path() / "schedstat");
    std::string name;
    std::getline(comm, name);
    double run_ns = 0, wait_ns = 0;
    if (!(stat >> run_ns >> wait_ns)) continue;  // gone meanwhile
    const std::string role = e.path().filename() == self ? "app" : name.rfind("ckpt ", 0) == 0 ? name : "other";
    out[role].run_s += run_ns * 1e-9;
    out[role].wait_s += wait_ns * 1e-9;
  }
  return out;
}

struct Sample {
  double run_s = 0, step_s = 0, blocked_s = 0;  ///< maxima over ranks
  int kept = 0, lag = 0;
  double lag_median = 0, lag_p90 = 0;  ///< over the steps, the larger of the ranks'
  std::vector<int> lags;               ///< rank 0's lag before each checkpoint() (steps 4 on)
  /// The timed loop's thread times (thread_times()), summed over ranks; a thread that ended inside the loop
  /// is missing (ckpt's live until close()).
  std::map<std::string, ThreadTime> threads;
};

ckpt::Options mode_options(std::string mode, const std::string& dir) {
  ckpt::Options o = ckpt::Options::defaults();
  // A mode may end in ":cpu=X": option background_cpu X (off, or a share of one core), else auto.
  if (const auto at = mode.find(":cpu="); at != std::string::npos) {
    const std::string v = mode.substr(at + 5);
    char* end = nullptr;
    o.background_cpu = v == "off" ? 0.0 : std::strtod(v.c_str(), &end);
    if (v != "off" && (v.empty() || *end != '\0')) fail(mode + ": :cpu= takes off or a share of one core");
    if (auto s = o.validate(); !s.ok()) fail(mode + ": " + s.to_string());
    mode.erase(at);
  }
  o.dir = dir;
  o.keep = 2;
  o.on_busy = ckpt::Options::OnBusy::coalesce;
  if (mode == "coalesce-nofsync") o.fsync = false;
  if (mode == "coalesce-nostats") o.stats = false;
  if (mode == "coalesce-null") o.transport = "null";
  if (mode == "coalesce-slice100") o.thread_slice_us = 100;  // short scheduler slices for ckpt's threads
  if (mode == "series-coalesce") o.layout = ckpt::Options::Layout::series;  // fsync, every written one durable
  if (mode == "series-end") {
    o.layout = ckpt::Options::Layout::series;
    o.on_busy = ckpt::Options::OnBusy::wait;
    o.keep = 1000000;
    o.durable_every_ms = 86400000;
  }
  return o;
}

/// One timed loop of `mode` (a fresh Runtime, made before the barrier).
Sample run_mode(const std::string& mode, App& app, const Args& a, const std::string& dir) {
  std::unique_ptr<ckpt::Runtime> rt;
  if (mode != "none") {
    if (world_rank() == 0) {
      std::filesystem::remove_all(dir);
      if (auto e = make_dir(dir); !e.empty()) fail(e);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    rt = std::make_unique<ckpt::Runtime>(MPI_COMM_WORLD, mode_options(mode, dir));
    if (!rt->status().ok()) fail(mode + ": " + rt->status().to_string());
    if (auto s = rt->protect("state", app.state.data(), ckpt::DType::f64, {app.state.size()}); !s.ok())
      fail(s.to_string());
  }
  std::vector<ckpt::Ticket> tickets;
  std::vector<double> steps, blocked;
  std::int64_t newest_ok = 0;
  std::size_t scanned = 0;  // tickets before this one are done
  int lag = 0;
  std::vector<int> lags;
  MPI_Barrier(MPI_COMM_WORLD);
  const std::map<std::string, ThreadTime> threads0 = thread_times();
  const auto t0 = Clock::now();
  for (int s = 1; s <= a.steps; ++s) {
    const auto c0 = Clock::now();
    app.compute();
    app.advance(s);
    steps.push_back(since(c0));  // the compute's own time; the exchange waits for the neighbours
    if (a.halo) app.exchange();
    if (!rt) continue;
    // The newest checkpoint committed so far (tickets may complete out of order: a superseded one
    // is done when its successor is taken).
    for (std::size_t i = scanned; i < tickets.size(); ++i)
      if (tickets[i].done() && tickets[i].wait().ok()) newest_ok = std::max(newest_ok, tickets[i].step());
    while (scanned < tickets.size() && tickets[scanned].done()) ++scanned;
    if (s > 3) {  // steps behind, before this one
      lags.push_back(static_cast<int>(s - 1 - newest_ok));
      lag = std::max(lag, lags.back());
    }
    const auto b0 = Clock::now();
    tickets.push_back(rt->checkpoint(s));
    blocked.push_back(since(b0));
  }
  int kept = 0;
  if (rt)
    if (auto s = rt->wait_all(); !s.ok()) fail(mode + ": " + s.to_string());
  std::map<std::string, ThreadTime> threads = thread_times();
  if (rt) {
    if (mode.rfind("series-end", 0) == 0)
      if (auto s = rt->close(); !s.ok()) fail(mode + ": close: " + s.to_string());
    for (auto& t : tickets) {
      const ckpt::Status s = t.wait();
      if (s.ok()) ++kept;
      else if (s.code() != ckpt::Code::superseded) fail(mode + ": step " + std::to_string(t.step()) + ": " + s.to_string());
    }
  }
  Sample r;
  r.run_s = max_over_ranks(since(t0));
  r.step_s = max_over_ranks(median(steps));
  r.blocked_s = max_over_ranks(median(blocked));
  r.kept = kept;
  int lag_all = 0;
  MPI_Allreduce(&lag, &lag_all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  r.lag = lag_all;
  std::vector<double> sorted(lags.begin(), lags.end());
  std::sort(sorted.begin(), sorted.end());
  r.lag_median = max_over_ranks(sorted.empty() ? 0.0 : median(sorted));
  r.lag_p90 = max_over_ranks(sorted.empty() ? 0.0 : sorted[sorted.size() * 9 / 10]);
  r.lags = std::move(lags);
  // Summed over ranks: every rank has the same roles (its own "other" threads aside).
  std::vector<std::string> roles{"app", "other"};
  roles.insert(roles.end(), std::begin(kCkptThreads), std::end(kCkptThreads));
  for (const std::string& role : roles) {
    ThreadTime mine = threads[role];
    if (const auto it = threads0.find(role); it != threads0.end()) {
      mine.run_s -= it->second.run_s;
      mine.wait_s -= it->second.wait_s;
    }
    double v[2] = {mine.run_s, mine.wait_s}, sum[2] = {0, 0};
    MPI_Allreduce(v, sum, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    r.threads[role] = ThreadTime{sum[0], sum[1]};
  }
  if (rt) (void)rt->close();
  return r;
}

/// An interval of at least 95% for the median of `v`, from its order statistics: [x(k), x(n-k+1)] of
/// the sorted values covers the median with 1 - 2 P(Bin(n, 1/2) <= k-1); k is the largest with that
/// tail at most 2.5% (n = 11: k = 2, 98.8%; at least k = 1, the whole range).
std::pair<double, double> median_interval(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const int n = static_cast<int>(v.size());
  double tail = 0, p = std::pow(0.5, n);  // p = P(Bin = j)
  int k = 1;
  for (int j = 0; j < n; ++j) {
    tail += p;  // P(Bin <= j)
    if (tail > 0.025) break;
    k = j + 1;
    p = p * (n - j) / (j + 1);
  }
  k = std::min(k, (n + 1) / 2);
  return {v[static_cast<std::size_t>(k - 1)], v[static_cast<std::size_t>(n - k)]};
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;  // ckpt's threads call MPI (on_busy coalesce needs it)
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  Args a;
  parse_options(
      argc, argv, "--work, --state, --steps, --reps, --step-ms, --dir, --modes, --csv, --lag-trace, --coupling",
      [&](const std::string& k, const std::string& v) {
        if (k == "--work") {
          a.work.clear();
          for (auto& w : split_list(v)) a.work.push_back(f64_bytes_option(k, w, fail));
        } else if (k == "--state")
          a.state = f64_bytes_option(k, v, fail);
        else if (k == "--steps")
          a.steps = positive_option(k, v, fail);
        else if (k == "--reps")
          a.reps = positive_option(k, v, fail);
        else if (k == "--step-ms") {
          a.step_ms = std::atof(v.c_str());
          if (!(a.step_ms > 0)) fail("--step-ms must be positive");
        } else if (k == "--dir")
          a.dir = v;
        else if (k == "--modes")
          a.modes = v;
        else if (k == "--csv")
          a.csv = v;
        else if (k == "--lag-trace")
          a.lag_trace = v;
        else if (k == "--coupling") {
          if (v != "halo" && v != "none") fail("--coupling is halo or none");
          a.halo = v == "halo";
        } else
          return false;
        return true;
      },
      fail);
  std::vector<std::string> modes{"none", "coalesce-fsync", "coalesce-nofsync", "coalesce-nostats", "coalesce-null",
                                 "series-end"};
  if (!a.modes.empty()) {
    modes = split_list(a.modes);
    if (modes.front() != "none") modes.insert(modes.begin(), "none");
  }
  int nranks = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  const bool root = world_rank() == 0;
  FILE* csv = root && !a.csv.empty() ? std::fopen(a.csv.c_str(), "w") : nullptr;
  if (csv) std::fprintf(csv, "ranks,work_bytes,mode,round,run_s,x_none,step_s,blocked_s,kept,lag,lag_median,lag_p90\n");
  FILE* threads_csv = root && !a.csv.empty() ? std::fopen((a.csv + ".threads").c_str(), "w") : nullptr;
  if (threads_csv) std::fprintf(threads_csv, "ranks,work_bytes,mode,round,thread,run_s,wait_s\n");
  FILE* trace = root && !a.lag_trace.empty() ? std::fopen(a.lag_trace.c_str(), "w") : nullptr;
  if (trace) std::fprintf(trace, "ranks,work_bytes,mode,round,step,lag\n");
  for (std::uint64_t work : a.work) {
    App app;
    app.state.assign(a.state / sizeof(double), 1.0);
    app.a.assign(work / 2 / sizeof(double) + 2, 1.0);
    app.b = app.a;
    calibrate(app, a.step_ms);
    std::vector<std::vector<Sample>> rounds(modes.size());
    for (int round = 0; round <= a.reps; ++round)
      for (std::size_t m = 0; m < modes.size(); ++m) {
        Sample s = run_mode(modes[m], app, a, a.dir + "/" + modes[m]);
        if (trace && round > 0)
          for (std::size_t i = 0; i < s.lags.size(); ++i)
            std::fprintf(trace, "%d,%llu,%s,%d,%zu,%d\n", nranks, static_cast<unsigned long long>(work),
                         modes[m].c_str(), round, i + 4, s.lags[i]);
        if (round > 0) rounds[m].push_back(s);
      }
    if (!root) continue;
    std::printf("everystep: %d rank(s), work %.0f KiB per rank (%d stencil passes per step), state %.0f KiB per rank, "
                "%d steps, %d rounds\n",
                nranks, static_cast<double>(work) / 1024, app.passes, static_cast<double>(a.state) / 1024, a.steps,
                a.reps);
    std::printf("%-18s %8s %8s %17s %14s %12s %5s %16s\n", "mode", "run s", "x none", "95% interval", "step x none",
                "blocked us", "kept", "lag med/p90/max");
    for (std::size_t m = 0; m < modes.size(); ++m) {
      std::vector<double> ratio, runs, step_ratio, blocked;
      for (int r = 0; r < a.reps; ++r) {
        const Sample& s = rounds[m][static_cast<std::size_t>(r)];
        const Sample& n = rounds[0][static_cast<std::size_t>(r)];
        ratio.push_back(s.run_s / n.run_s);
        runs.push_back(s.run_s);
        step_ratio.push_back(s.step_s / n.step_s);
        blocked.push_back(s.blocked_s);
        if (csv)
          std::fprintf(csv, "%d,%llu,%s,%d,%.6f,%.4f,%.6g,%.6g,%d,%d,%.1f,%.1f\n", nranks,
                       static_cast<unsigned long long>(work), modes[m].c_str(), r + 1, s.run_s, s.run_s / n.run_s,
                       s.step_s, s.blocked_s, s.kept, s.lag, s.lag_median, s.lag_p90);
      }
      const auto ci = median_interval(ratio);
      int kept = 0, lag = 0;
      std::vector<double> lag_med, lag_p90;
      for (auto& s : rounds[m]) {
        kept = std::max(kept, s.kept), lag = std::max(lag, s.lag);
        lag_med.push_back(s.lag_median);
        lag_p90.push_back(s.lag_p90);
      }
      std::printf("%-18s %8.3f %8.3f   [%5.3f, %5.3f] %14.3f %12.1f %5d %6.1f/%4.1f/%4d\n", modes[m].c_str(),
                  median(runs), median(ratio), ci.first, ci.second, median(step_ratio), median(blocked) * 1e6, kept,
                  median(lag_med), median(lag_p90), lag);
    }
    // Where the time goes: per rank and step, the application thread's time on a CPU and waiting for one
    // (runnable, preempted: by ckpt's threads on its core, among others); ckpt's threads' CPU per checkpoint
    // written (medians over rounds).
    std::printf("%-18s %9s %10s %11s | ckpt threads' CPU us per checkpoint written: %s\n", "mode", "app us/st",
                "app wait", "other us/st", "launch digest write commit reclaim");
    for (std::size_t m = 0; m < modes.size(); ++m) {
      const auto per_step = [&](const std::string& role, bool wait) {
        std::vector<double> v;
        for (const Sample& s : rounds[m]) {
          const ThreadTime& t = s.threads.at(role);
          v.push_back((wait ? t.wait_s : t.run_s) / (a.steps * nranks) * 1e6);
        }
        return median(v);
      };
      std::printf("%-18s %9.1f %10.1f %11.1f |", modes[m].c_str(), per_step("app", false), per_step("app", true),
                  per_step("other", false));
      for (const char* role : kCkptThreads) {
        std::vector<double> v;
        for (const Sample& s : rounds[m])
          if (s.kept > 0) v.push_back(s.threads.at(role).run_s / (s.kept * nranks) * 1e6);
        std::printf(" %7.1f", v.empty() ? 0.0 : median(v));
      }
      std::printf("\n");
      if (threads_csv)
        for (int r = 0; r < a.reps; ++r)
          for (const auto& [role, t] : rounds[m][static_cast<std::size_t>(r)].threads)
            std::fprintf(threads_csv, "%d,%llu,%s,%d,%s,%.6f,%.6f\n", nranks, static_cast<unsigned long long>(work),
                         modes[m].c_str(), r + 1, role.c_str(), t.run_s, t.wait_s);
    }
    std::fflush(stdout);
  }
  if (csv) std::fclose(csv);
  if (trace) std::fclose(trace);
  if (threads_csv) std::fclose(threads_csv);
  MPI_Finalize();
  return 0;
}
