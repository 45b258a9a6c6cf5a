// perf/first_checkpoint: what a Runtime's first checkpoint costs next to its later ones, and the
// staging it gets (issue 15, small states: "the first checkpoint pays no more than the later ones
// beyond the one-time allocation, which happens outside checkpoint()").
// One run: a fresh Runtime (CKPT_* options apply; transport posix unless CKPT_TRANSPORT), protect() of
// --regions arrays of --bytes per rank in all (timed: the auto pool is allocated there), then --ckpts
// checkpoints --gap-ms apart, each waited for before the next (so that none waits for room). Reported:
// the time blocked in checkpoint() (Ticket stats) of the first checkpoint, of the second (one sample
// like the first: the fair comparison, as noise is one-sided) and the median of all but the first,
// protect() in all, a memcpy of the same bytes, and the staging pool's size; medians over --runs runs
// of the maxima over ranks.
//   mpiexec -n 2 build/perf/first_checkpoint --bytes 234K --regions 39 --runs 20 --ckpts 10
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ckpt/ckpt.hpp"

using namespace ckpt::bench;

namespace {

[[noreturn]] void fail(const std::string& what) { abort_job("first_checkpoint", what); }

struct Args {
  std::uint64_t bytes = 234 << 10;
  int regions = 39, runs = 20, ckpts = 10;
  double gap_ms = 2;
  std::string dir = "/tmp/ckpt-first-checkpoint";
};

Args parse_args(int argc, char** argv) {
  Args a;
  parse_options(
      argc, argv, "--bytes, --regions, --runs, --ckpts, --gap-ms, --dir",
      [&](const std::string& k, const std::string& v) {
        if (k == "--bytes")
          a.bytes = f64_bytes_option(k, v, fail);
        else if (k == "--regions")
          a.regions = positive_option(k, v, fail);
        else if (k == "--runs")
          a.runs = positive_option(k, v, fail);
        else if (k == "--ckpts")
          a.ckpts = positive_option(k, v, fail);
        else if (k == "--gap-ms")
          a.gap_ms = std::atof(v.c_str());
        else if (k == "--dir")
          a.dir = v;
        else
          return false;
        return true;
      },
      fail);
  if (a.ckpts < 2 || !(a.gap_ms >= 0)) fail("--ckpts must be at least 2 and --gap-ms >= 0");
  return a;
}

struct Run {
  double protect_s = 0, first_s = 0, second_s = 0, later_s = 0;
  std::uint64_t staging = 0;
};

Run one_run(const Args& a, std::vector<std::vector<double>>& fields, const std::string& dir) {
  ckpt::Options o;  // defaults + CKPT_*
  if (!o.error.ok()) fail(o.error.to_string());
  if (std::getenv("CKPT_TRANSPORT") == nullptr) o.transport = "posix";
  o.dir = dir;
  ckpt::Runtime rt(MPI_COMM_WORLD, o);
  if (!rt.status().ok()) fail(rt.status().to_string());
  Run r;
  const auto tp = Clock::now();
  for (std::size_t f = 0; f < fields.size(); ++f) {
    ckpt::Status s = rt.protect("f" + std::to_string(f), fields[f].data(), ckpt::DType::f64, {fields[f].size()});
    if (!s.ok()) fail(s.to_string());
  }
  r.protect_s = since(tp);
  std::vector<double> later;
  for (int k = 0; k < a.ckpts; ++k) {
    ::usleep(static_cast<useconds_t>(a.gap_ms * 1000));
    for (auto& f : fields) f[0] = k;
    ckpt::Ticket t = rt.checkpoint(k);
    ckpt::Status s = t.wait();
    if (s.failed()) fail("checkpoint " + std::to_string(k) + ": " + s.to_string());
    (k == 0 ? r.first_s : later.emplace_back()) = t.stats().blocked_s;
    r.staging = t.stats().staging_bytes;
  }
  r.later_s = median(later);
  r.second_s = later.front();
  if (ckpt::Status s = rt.close(); !s.ok()) fail(s.to_string());
  return {max_over_ranks(r.protect_s), max_over_ranks(r.first_s), max_over_ranks(r.second_s), max_over_ranks(r.later_s),
          r.staging};
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return 1;
  const Args a = parse_args(argc, argv);
  const int rank = world_rank();
  const std::size_t per = std::max<std::size_t>(1, a.bytes / 8 / static_cast<std::size_t>(a.regions));
  std::vector<std::vector<double>> fields(static_cast<std::size_t>(a.regions), std::vector<double>(per, 1.0));
  std::vector<double> protect, first, second, later, copy;
  std::uint64_t staging = 0;
  std::vector<double> dst(per * fields.size());
  for (int run = 0; run <= a.runs; ++run) {  // run 0: warm-up
    const std::string dir = a.dir + "/run" + std::to_string(run);
    if (rank == 0) std::filesystem::create_directories(dir);
    MPI_Barrier(MPI_COMM_WORLD);
    const Run r = one_run(a, fields, dir);
    const auto tc = Clock::now();
    for (std::size_t f = 0; f < fields.size(); ++f) std::memcpy(&dst[f * per], fields[f].data(), per * 8);
    const double c = max_over_ranks(since(tc));
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) std::filesystem::remove_all(dir);
    if (run == 0) continue;
    protect.push_back(r.protect_s);
    first.push_back(r.first_s);
    second.push_back(r.second_s);
    later.push_back(r.later_s);
    copy.push_back(c);
    staging = r.staging;
  }
  if (rank == 0) {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    std::printf("first_checkpoint: %d ranks, %d regions, %.1f KiB/rank, %d runs of %d checkpoints\n", size, a.regions,
                static_cast<double>(per * fields.size() * 8) / 1024, a.runs, a.ckpts);
    std::printf("%14s %16s %16s %16s %12s %14s\n", "protect us", "first ckpt us", "second ckpt us", "later ckpt us",
                "memcpy us", "staging KiB");
    std::printf("%14.1f %16.1f %16.1f %16.1f %12.1f %14.1f\n", median(protect) * 1e6, median(first) * 1e6,
                median(second) * 1e6, median(later) * 1e6, median(copy) * 1e6, static_cast<double>(staging) / 1024);
  }
  MPI_Finalize();
  return 0;
}
