// Small helpers shared by the perf/ programs: timing, medians, reductions over MPI_COMM_WORLD and
// comma-separated option lists. Header-only; every program includes it once.
#ifndef CKPT_PERF_BENCH_UTIL_HPP
#define CKPT_PERF_BENCH_UTIL_HPP

#include <dirent.h>
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "ckpt/options.hpp"

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

/// "<program>: rank R: <what>" on stderr, then the whole job stops (each program's fail()).
[[noreturn]] inline void abort_job(const char* program, const std::string& what) {
  std::fprintf(stderr, "%s: rank %d: %s\n", program, world_rank(), what.c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
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

/// fsync of a file or directory; false when it could not be opened or synced.
inline bool fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

/// fsync of every regular file in `dir`, then of `dir` and its parent (what a writer that does not
/// sync itself, like ADIOS2, needs to be durable); the path that failed, empty on success.
inline std::string fsync_tree(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return dir;
  std::string bad;
  while (dirent* e = ::readdir(d))
    if (e->d_type == DT_REG && bad.empty() && !fsync_path(dir + "/" + e->d_name)) bad = dir + "/" + e->d_name;
  ::closedir(d);
  if (bad.empty() && !fsync_path(dir)) bad = dir;
  const std::string parent = std::filesystem::path(dir).parent_path().string();
  if (bad.empty() && !fsync_path(parent)) bad = parent;
  return bad;
}

/// Creates `dir` and its parents; the error, empty on success.
inline std::string make_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  return ec ? "cannot create " + dir + ": " + ec.message() : std::string();
}

/// The command line of a benchmark: "--key value" pairs. `set(key, value)` stores one, returning false
/// for a key it does not know; `fail` (which must not return) gets the message for that, for a key
/// without a value, and for the values the readers below refuse.
using FailFn = std::function<void(const std::string&)>;
inline void parse_options(int argc, char** argv, const std::string& known,
                          const std::function<bool(const std::string&, const std::string&)>& set, const FailFn& fail) {
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 >= argc) fail("option " + k + " needs a value");
    if (!set(k, argv[i + 1])) fail("unknown option " + k + " (known: " + known + ")");
  }
}
/// A byte count (1M, 64K, ...) rounded down to whole f64 elements, at least one.
inline std::uint64_t f64_bytes_option(const std::string& k, const std::string& v, const FailFn& fail) {
  auto b = ckpt::parse_bytes(v);
  if (!b.ok() || b.value() < sizeof(double)) fail(k + ": not a byte count of at least 8: " + v);
  return b.value() / sizeof(double) * sizeof(double);
}
/// An integer of at least 1.
inline int positive_option(const std::string& k, const std::string& v, const FailFn& fail) {
  const int n = std::atoi(v.c_str());
  if (n < 1) fail(k + " must be at least 1");
  return n;
}

}  // namespace ckpt::bench

#endif  // CKPT_PERF_BENCH_UTIL_HPP
