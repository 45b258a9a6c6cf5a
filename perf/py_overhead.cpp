// perf/py_overhead (C++ twin of perf/py_overhead.py, which runs both and compares them in one run): the
// time checkpoint() blocks, and protect() per region, through the C++ API, on the state the Python side
// protects through ckpt.Runtime:
//   big    one 64 MiB f64 array per rank (a box of a global array): the blocked time of a large capture
//   small  100 local f64 arrays of 1 KiB per rank: the fixed cost of a call, as Python adds its own to it
// Each checkpoint is waited for (untimed) before the next, so that none waits for staging room. Prints, from
// rank 0, one line per checkpoint: the wall time around checkpoint(), the Ticket's blocked_s (the time
// inside ckpt::Runtime::checkpoint) and their difference (the time outside it: here the call itself; from
// Python, ctypes, the C API and the package) and the CPU time of the calling thread in the call (which
// time the machine's other processes take is not in), each the maximum over ranks, in microseconds; and for
// small the median time of one protect() call.
//   mpiexec -n 2 build/perf/py_overhead big /tmp/ckpt-py-overhead 20
#include <mpi.h>

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ckpt/ckpt.hpp"

using namespace ckpt::bench;

namespace {
/// CPU time of the calling thread (time preempted by other processes is not in it).
double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

[[noreturn]] void fail(const std::string& what) { abort_job("py_overhead", what); }
}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (argc != 4) fail("usage: py_overhead big|small DIR REPEATS");
  const std::string mode = argv[1], dir = argv[2];
  const int repeats = std::atoi(argv[3]);
  if ((mode != "big" && mode != "small") || repeats < 1) fail("usage: py_overhead big|small DIR REPEATS");
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  {
    ckpt::Options o;  // the options the Python side passes as a dict (CKPT_* variables apply to both)
    o.dir = dir;
    o.fsync = false;
    o.keep = 2;
    ckpt::Runtime rt(MPI_COMM_WORLD, o);
    if (!rt.status().ok()) fail(rt.status().to_string());
    std::vector<std::vector<double>> arrays;
    const std::uint64_t big_n = (64ull << 20) / sizeof(double), small_n = 128;
    if (mode == "big") {
      arrays.emplace_back(big_n, 1.0 + rank);
      ckpt::Block b{{big_n * static_cast<std::uint64_t>(size)}, {big_n * static_cast<std::uint64_t>(rank)}, {big_n}};
      if (auto s = rt.protect("big", arrays[0].data(), ckpt::DType::f64, b); !s.ok()) fail(s.to_string());
    } else {
      arrays.assign(100, std::vector<double>(small_n, 1.0 + rank));
      std::vector<double> per_call;  // each protect() on its own: the median is robust to a pool growth
      for (int i = 0; i < 100; ++i) {
        const auto t0 = Clock::now();
        ckpt::Status s = rt.protect("small/" + std::to_string(i), arrays[i].data(), ckpt::DType::f64, {small_n});
        per_call.push_back(since(t0));
        if (!s.ok()) fail(s.to_string());
      }
      const double m = max_over_ranks(median(per_call));
      if (rank == 0) std::printf("cxx small protect_us_per_call %.3f\n", 1e6 * m);
    }
    for (int i = 0; i < repeats; ++i) {
      arrays[0][0] = i;
      MPI_Barrier(MPI_COMM_WORLD);
      const double c0 = thread_cpu_s();
      const auto t = Clock::now();
      ckpt::Ticket tk = rt.checkpoint(i + 1);
      const double wall = since(t), cpu = thread_cpu_s() - c0;
      if (auto s = tk.wait(); !s.ok()) fail(s.to_string());
      const double b = tk.stats().blocked_s;
      const double w = max_over_ranks(wall), blocked = max_over_ranks(b), outside = max_over_ranks(wall - b);
      const double c = max_over_ranks(cpu);
      if (rank == 0)
        std::printf("cxx %s wall_us %.3f blocked_us %.3f outside_us %.3f cpu_us %.3f\n", mode.c_str(), 1e6 * w,
                    1e6 * blocked, 1e6 * outside, 1e6 * c);
    }
    if (auto s = rt.close(); !s.ok()) fail(s.to_string());
  }
  MPI_Finalize();
  return 0;
}
