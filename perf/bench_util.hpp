// Small helpers shared by the perf/ programs: timing, medians, reductions over MPI_COMM_WORLD and
// comma-separated option lists. Header-only; every program includes it once.
#ifndef CKPT_PERF_BENCH_UTIL_HPP
#define CKPT_PERF_BENCH_UTIL_HPP

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ckpt::bench {

using Clock = std::chrono::steady_clock;

/// Seconds since `t`.
inline double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

/// The median (upper median for an even count; 0 for none) - disk figures here are noisy.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline double max_over_ranks(double v) {
  double m = 0;
  MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}
inline std::uint64_t max_over_ranks(std::uint64_t v) {
  std::uint64_t m = 0;
  MPI_Allreduce(&v, &m, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return m;
}
inline std::uint64_t sum_over_ranks(std::uint64_t v) {
  std::uint64_t s = 0;
  MPI_Allreduce(&v, &s, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return s;
}

/// "a,b,c" -> {"a", "b", "c"} (option values such as --sizes 64M,256M).
inline std::vector<std::string> split_list(const std::string& v) {
  std::vector<std::string> out;
  for (std::size_t p = 0; p < v.size();) {
    std::size_t e = v.find(',', p);
    if (e == std::string::npos) e = v.size();
    out.push_back(v.substr(p, e - p));
    p = e + 1;
  }
  return out;
}

}  // namespace ckpt::bench

#endif  // CKPT_PERF_BENCH_UTIL_HPP
