// perf/growth: how ckpt's time and memory grow with the number of variables and with the bytes per
// rank - the two ways an application's state gets big.
//   --vars 1,10,100,...   that many variables per rank, 16 f64 each (v/000123: a global 1-D array of
//                         16 x ranks elements, split over the ranks)
//   --locals 1,1000,...   that many local arrays per rank (v/000123: 16 f64 of this rank only, different
//                         on every rank, so the commit's uniform check sees vars x ranks blocks)
//   --bytes 16M,64M,...   one variable of that many bytes per rank
// Per setting, every figure the maximum over the ranks:
//   protect_s    all protect() calls of one rank
//   blocked_s, durable_s, committed_s   Ticket stats, median of --reps checkpoints after one warm-up
//   index_bytes  size of dir/ckpt.<step>/index
//   latest_s, restart_s   latest() and restart(step) on a fresh Runtime that re-registers every
//                variable (what an application does at start); `verified` = the data came back
//   rss_*        what ckpt added to the resident set (VmHWM at the end of a phase minus VmRSS at its
//                start, the application's data already allocated), for the write phase (protect +
//                checkpoints) and the restart phase apart, against the staging pool (Ticket stats
//                staging_bytes) + the index. The high-water mark is reset in this process before each
//                phase (malloc_trim, then "5" to /proc/self/clear_refs). Heap kept by the allocator from
//                an earlier setting can be reused without showing up: for exact figures run one
//                setting per process (e.g. --vars 100000 alone).
// Output: a table on stdout, progress of slow phases on stderr, CSV rows (--csv FILE).
//
//   mpiexec -n 4 build/perf/growth --vars 1,10,100,1000,10000,100000 --dir /tmp/ckpt-growth --csv results/growth.csv
//   mpiexec -n 4 build/perf/growth --bytes 16M,64M,256M --csv results/growth-bytes.csv
#include <malloc.h>
#include <mpi.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ckpt/ckpt.hpp"

using namespace ckpt::bench;  // since, median, max_over_ranks, ...

namespace {

[[noreturn]] void die(const std::string& what, const ckpt::Status& s) {
  std::fprintf(stderr, "growth: %s: %s\n", what.c_str(), s.to_string().c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

/// A field of /proc/self/status in bytes (VmRSS, VmHWM).
std::uint64_t proc_status_bytes(const std::string& key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.compare(0, key.size() + 1, key + ":") == 0) return std::stoull(line.substr(key.size() + 1)) * 1024;
  return 0;
}

/// Returns freed heap to the kernel and resets VmHWM to the current VmRSS (Linux >= 4.0).
bool reset_peak_rss() {
  ::malloc_trim(0);
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return f.good();
}

std::uint64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

/// One setting: `nvars` variables of `elems` f64 each on every rank.
struct Setting {
  std::string mode;  // "vars", "locals" or "bytes"
  std::uint64_t nvars = 0, elems = 0;
  std::uint64_t bytes() const { return nvars * elems * sizeof(double); }
  std::string label() const {
    return mode == "bytes" ? "bytes=" + std::to_string(bytes() >> 20) + "M" : mode + "=" + std::to_string(nvars);
  }
};

struct Figures {
  double protect_s = 0, blocked_s = 0, durable_s = 0, committed_s = 0, latest_s = 0, restart_s = 0;
  std::uint64_t index_bytes = 0, staging_bytes = 0, rss_base = 0, rss_added_write = 0, rss_added_restart = 0;
  bool verified = false;
};

/// Prints a phase on stderr (rank 0) when it took long enough to make a reader wonder.
void progress(const Setting& s, const char* phase, double seconds) {
  if (world_rank() == 0 && seconds >= 1.0) {
    std::fprintf(stderr, "[growth] %s: %s %.1f s\n", s.label().c_str(), phase, seconds);
    std::fflush(stderr);
  }
}

double value_of(std::uint64_t var, std::uint64_t i, int rank) {
  return static_cast<double>(var) + 1e-3 * static_cast<double>(i) + rank;
}

void fill(std::vector<double>& data, const Setting& s, int rank) {
  for (std::uint64_t v = 0; v < s.nvars; ++v)
    for (std::uint64_t i = 0; i < s.elems; ++i) data[v * s.elems + i] = value_of(v, i, rank);
}

bool check(const std::vector<double>& data, const Setting& s, int rank) {
  for (std::uint64_t v = 0; v < s.nvars; ++v)
    for (std::uint64_t i = 0; i < s.elems; ++i)
      if (data[v * s.elems + i] != value_of(v, i, rank)) return false;
  return true;
}

std::string var_name(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "v/%06llu", static_cast<unsigned long long>(v));
  return buf;
}

/// protect() of every variable; returns this rank's time.
double protect_all(ckpt::Runtime& rt, std::vector<double>& data, const Setting& s) {
  const std::uint64_t size = static_cast<std::uint64_t>(rt.size()), rank = static_cast<std::uint64_t>(rt.rank());
  std::vector<std::string> names(s.nvars);
  for (std::uint64_t v = 0; v < s.nvars; ++v) names[v] = var_name(v);  // not part of the timing
  MPI_Barrier(MPI_COMM_WORLD);
  auto t = Clock::now();
  for (std::uint64_t v = 0; v < s.nvars; ++v) {
    ckpt::Status st = s.mode == "locals" ? rt.protect(names[v], data.data() + v * s.elems, ckpt::DType::f64, {s.elems})
                                         : rt.protect(names[v], data.data() + v * s.elems, ckpt::DType::f64,
                                                      ckpt::Block{{s.elems * size}, {s.elems * rank}, {s.elems}});
    if (!st.ok()) die("protect", st);
  }
  return since(t);
}

ckpt::Options options_for(const std::string& dir) {
  ckpt::Options o;  // defaults + CKPT_* variables
  if (!o.error.ok()) die("options", o.error);
  o.dir = dir;
  o.keep = 1;
  return o;
}

/// Protect, one warm-up and `reps` measured checkpoints; fills the write-side figures.
void measure_write(const Setting& s, std::vector<double>& data, const std::string& dir, int reps, Figures& f) {
  ckpt::Runtime rt(MPI_COMM_WORLD, options_for(dir));
  if (!rt.status().ok()) die("runtime", rt.status());
  f.protect_s = max_over_ranks(protect_all(rt, data, s));
  progress(s, "protect", f.protect_s);
  std::vector<double> bl, du, cm;
  for (int r = 0; r <= reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    auto t = Clock::now();
    ckpt::Ticket tk = rt.checkpoint(r);
    ckpt::Status st = tk.wait();
    if (!st.ok()) die("checkpoint", st);
    progress(s, r == 0 ? "warm-up checkpoint" : "checkpoint", max_over_ranks(since(t)));
    if (r == 0) continue;  // the warm-up allocates and touches the staging pool
    const ckpt::CheckpointStats cs = tk.stats();
    bl.push_back(max_over_ranks(cs.blocked_s));
    du.push_back(max_over_ranks(cs.durable_s));
    cm.push_back(max_over_ranks(cs.committed_s));
    f.staging_bytes = max_over_ranks(cs.staging_bytes);
  }
  f.blocked_s = median(bl);
  f.durable_s = median(du);
  f.committed_s = median(cm);
  f.index_bytes = max_over_ranks(file_size(dir + "/ckpt." + std::to_string(reps) + "/index"));
}

/// A fresh Runtime, as at an application's start: re-register, latest(), restart(step), verify.
void measure_restart(const Setting& s, std::vector<double>& data, const std::string& dir, int step, Figures& f) {
  std::fill(data.begin(), data.end(), -1.0);
  ckpt::Runtime rt(MPI_COMM_WORLD, options_for(dir));
  if (!rt.status().ok()) die("runtime", rt.status());
  progress(s, "re-protect", max_over_ranks(protect_all(rt, data, s)));
  MPI_Barrier(MPI_COMM_WORLD);
  auto t = Clock::now();
  ckpt::Result<std::optional<std::int64_t>> found = rt.latest();
  f.latest_s = max_over_ranks(since(t));
  if (!found.ok()) die("latest", found.status());
  if (found.value() != step) die("latest", ckpt::Status(ckpt::Code::internal, "latest() did not find the last checkpoint"));
  MPI_Barrier(MPI_COMM_WORLD);
  t = Clock::now();
  ckpt::Status st = rt.restart(step);
  f.restart_s = max_over_ranks(since(t));
  if (!st.ok()) die("restart", st);
  progress(s, "restart", f.restart_s);
  int ok = check(data, s, rt.rank()) ? 1 : 0, all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  f.verified = all == 1;
}

/// Resident set of one phase: VmRSS at its start and what its peak added (each the max over ranks).
struct PhaseRss {
  std::uint64_t base = 0, added = 0;
};

/// Runs `phase` with a fresh high-water mark.
template <class Phase>
PhaseRss rss_of(Phase&& phase) {
  if (!reset_peak_rss() && world_rank() == 0) std::fprintf(stderr, "growth: cannot reset VmHWM\n");
  const std::uint64_t start = proc_status_bytes("VmRSS");
  phase();
  const std::uint64_t peak = proc_status_bytes("VmHWM");
  return {max_over_ranks(start), max_over_ranks(peak > start ? peak - start : 0)};
}

Figures run_setting(const Setting& s, const std::string& base_dir, int reps) {
  const int rank = world_rank();
  const std::string dir = base_dir + "/" + s.mode + "-" + std::to_string(s.nvars) + "x" + std::to_string(s.elems);
  std::vector<double> data(s.nvars * s.elems);
  fill(data, s, rank);
  Figures f;
  const PhaseRss w = rss_of([&] { measure_write(s, data, dir, reps, f); });
  f.rss_base = w.base;
  f.rss_added_write = w.added;
  f.rss_added_restart = rss_of([&] { measure_restart(s, data, dir, reps, f); }).added;
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::filesystem::remove_all(dir);
  return f;
}

void print_header(std::FILE* csv) {
  std::printf("%-5s %-5s %8s %9s | %10s %10s %10s %10s %10s | %10s %10s %10s %3s | %9s %9s %9s %11s\n", "ranks", "mode",
              "vars", "KiB/rank", "protect ms", "blocked ms", "durable ms", "commit ms", "index KiB", "latest ms",
              "restart ms", "rst/commit", "ok", "base MiB", "+wr MiB", "+rst MiB", "stg+idx MiB");
  if (csv)
    std::fprintf(
        csv,
        "mode,ranks,vars_per_rank,bytes_per_rank,reps,protect_s,blocked_s,durable_s,committed_s,index_bytes,"
        "latest_s,restart_s,verified,staging_bytes,rss_base_bytes,rss_added_write_bytes,rss_added_restart_bytes\n");
}

void print_row(std::FILE* csv, const Setting& s, int ranks, int reps, const Figures& f) {
  const double mib = 1.0 / (1 << 20);
  std::printf(
      "%-5d %-5s %8llu %9.1f | %10.2f %10.2f %10.2f %10.2f %10.1f | %10.2f %10.2f %10.2f %3s | %9.1f %9.1f %9.1f "
      "%11.1f\n",
      ranks, s.mode.c_str(), static_cast<unsigned long long>(s.nvars), static_cast<double>(s.bytes()) / 1024,
      f.protect_s * 1e3, f.blocked_s * 1e3, f.durable_s * 1e3, f.committed_s * 1e3,
      static_cast<double>(f.index_bytes) / 1024, f.latest_s * 1e3, f.restart_s * 1e3, f.restart_s / f.committed_s,
      f.verified ? "yes" : "NO", static_cast<double>(f.rss_base) * mib, static_cast<double>(f.rss_added_write) * mib,
      static_cast<double>(f.rss_added_restart) * mib, static_cast<double>(f.staging_bytes + f.index_bytes) * mib);
  std::fflush(stdout);
  if (csv) {
    std::fprintf(csv, "%s,%d,%llu,%llu,%d,%.6f,%.6f,%.6f,%.6f,%llu,%.6f,%.6f,%d,%llu,%llu,%llu,%llu\n", s.mode.c_str(),
                 ranks, static_cast<unsigned long long>(s.nvars), static_cast<unsigned long long>(s.bytes()), reps,
                 f.protect_s, f.blocked_s, f.durable_s, f.committed_s, static_cast<unsigned long long>(f.index_bytes),
                 f.latest_s, f.restart_s, f.verified ? 1 : 0, static_cast<unsigned long long>(f.staging_bytes),
                 static_cast<unsigned long long>(f.rss_base), static_cast<unsigned long long>(f.rss_added_write),
                 static_cast<unsigned long long>(f.rss_added_restart));
    std::fflush(csv);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<Setting> settings;
  int reps = 3;
  std::string dir = "/tmp/ckpt-growth", csv_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--vars") {
      for (auto& n : split_list(v)) settings.push_back({"vars", std::stoull(n), 16});
    } else if (k == "--locals") {
      for (auto& n : split_list(v)) settings.push_back({"locals", std::stoull(n), 16});
    } else if (k == "--bytes") {
      for (auto& b : split_list(v)) settings.push_back({"bytes", 1, ckpt::parse_bytes(b).value() / sizeof(double)});
    } else if (k == "--reps") {
      reps = std::stoi(v);
    } else if (k == "--dir") {
      dir = v;
    } else if (k == "--csv") {
      csv_path = v;
    } else {
      if (rank == 0) std::fprintf(stderr, "growth: unknown option %s\n", k.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  if (settings.empty()) settings = {{"vars", 1, 16}, {"vars", 1000, 16}, {"bytes", 1, (64ull << 20) / sizeof(double)}};
  std::FILE* csv = rank == 0 && !csv_path.empty() ? std::fopen(csv_path.c_str(), "w") : nullptr;
  if (rank == 0) print_header(csv);
  for (const Setting& s : settings) {
    if (rank == 0) std::fprintf(stderr, "[growth] %s: start\n", s.label().c_str());
    auto t = Clock::now();
    Figures f = run_setting(s, dir, reps);
    if (rank == 0) print_row(csv, s, size, reps, f);
    progress(s, "setting total", since(t));
  }
  if (csv) std::fclose(csv);
  MPI_Finalize();
  return 0;
}
