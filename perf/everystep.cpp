// perf/everystep: the every-step pattern (issue 38) with a cache-resident compute - the second
// every-step benchmark beside perf/finegrain, written against the public API only.
//
// Each step is a 1-D three-point stencil swept `passes` times over a work array of --work bytes per
// rank (two f64 arrays of half that each), the passes calibrated so that a step takes about --step-ms
// on the slowest rank; then the state (--state bytes per rank, f64) advances by touching one element
// in every 512, and checkpoint(step) is called. finegrain streams its compute from memory (a window of
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
//   series-end         layout series, fsync on, durable_every_ms 1 day, keep 1000000, on_busy wait:
//                      every step kept, durable at the end (close() syncs), as ADIOS2 BP5 in finegrain
// Per mode: the median over rounds of run time / the same round's none with the 95% interval of that
// median (order statistics), compute time per step (median step of the median round) over none's -
// the interference of ckpt's threads with a cache-resident compute -, time blocked in checkpoint()
// per call, checkpoints written (coalesce supersedes some) and the largest lag: how many steps the
// newest committed checkpoint was behind the step just computed (checked before each checkpoint()).
//
//   mpiexec -n 2 build/perf/everystep --work 256K,2M,64M --reps 11 --dir /tmp/ckpt-everystep
//       [--state 1M] [--steps 100] [--step-ms 4] [--modes none,coalesce-fsync] [--csv F]
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
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
  std::string dir = "/tmp/ckpt-everystep", csv, modes;
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

struct Sample {
  double run_s = 0, step_s = 0, blocked_s = 0;  ///< maxima over ranks
  int kept = 0, lag = 0;
};

ckpt::Options mode_options(const std::string& mode, const std::string& dir) {
  ckpt::Options o = ckpt::Options::defaults();
  o.dir = dir;
  o.keep = 2;
  o.on_busy = ckpt::Options::OnBusy::coalesce;
  if (mode == "coalesce-nofsync") o.fsync = false;
  if (mode == "coalesce-nostats") o.stats = false;
  if (mode == "coalesce-null") o.transport = "null";
  if (mode == "coalesce-slice100") o.thread_slice_us = 100;  // short scheduler slices for ckpt's threads
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
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = Clock::now();
  for (int s = 1; s <= a.steps; ++s) {
    const auto c0 = Clock::now();
    app.compute();
    app.advance(s);
    steps.push_back(since(c0));
    if (!rt) continue;
    // The newest checkpoint committed so far (tickets may complete out of order: a superseded one
    // is done when its successor is taken).
    for (std::size_t i = scanned; i < tickets.size(); ++i)
      if (tickets[i].done() && tickets[i].wait().ok()) newest_ok = std::max(newest_ok, tickets[i].step());
    while (scanned < tickets.size() && tickets[scanned].done()) ++scanned;
    if (s > 3) lag = std::max(lag, static_cast<int>(s - 1 - newest_ok));  // steps behind, before this one
    const auto b0 = Clock::now();
    tickets.push_back(rt->checkpoint(s));
    blocked.push_back(since(b0));
  }
  int kept = 0;
  if (rt) {
    if (auto s = rt->wait_all(); !s.ok()) fail(mode + ": " + s.to_string());
    if (mode == "series-end")
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
      argc, argv, "--work, --state, --steps, --reps, --step-ms, --dir, --modes, --csv",
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
        else
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
  if (csv) std::fprintf(csv, "ranks,work_bytes,mode,round,run_s,x_none,step_s,blocked_s,kept,lag\n");
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
        if (round > 0) rounds[m].push_back(s);
      }
    if (!root) continue;
    std::printf("everystep: %d rank(s), work %.0f KiB per rank (%d stencil passes per step), state %.0f KiB per rank, "
                "%d steps, %d rounds\n",
                nranks, static_cast<double>(work) / 1024, app.passes, static_cast<double>(a.state) / 1024, a.steps,
                a.reps);
    std::printf("%-18s %8s %8s %17s %14s %12s %5s %4s\n", "mode", "run s", "x none", "95% interval", "step x none",
                "blocked us", "kept", "lag");
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
          std::fprintf(csv, "%d,%llu,%s,%d,%.6f,%.4f,%.6g,%.6g,%d,%d\n", nranks, static_cast<unsigned long long>(work),
                       modes[m].c_str(), r + 1, s.run_s, s.run_s / n.run_s, s.step_s, s.blocked_s, s.kept, s.lag);
      }
      const auto ci = median_interval(ratio);
      int kept = 0, lag = 0;
      for (auto& s : rounds[m]) kept = std::max(kept, s.kept), lag = std::max(lag, s.lag);
      std::printf("%-18s %8.3f %8.3f   [%5.3f, %5.3f] %14.3f %12.1f %5d %4d\n", modes[m].c_str(), median(runs),
                  median(ratio), ci.first, ci.second, median(step_ratio), median(blocked) * 1e6, kept, lag);
    }
    std::fflush(stdout);
  }
  if (csv) std::fclose(csv);
  MPI_Finalize();
  return 0;
}
