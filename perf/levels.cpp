// perf/levels: what the node-local level buys (issue 19) - a checkpoint committed to node-local
// storage first and drained in the background, against the same checkpoint written straight to a
// global directory that is slower than the local one, as a shared parallel file system is per node.
//
// P ranks, --ranks-per-node n (one machine simulates P/n nodes; each node's local directory is
// <local>/<mode>/node<k>), --bytes of f64 state per rank, one checkpoint per round; modes
// interleaved round by round, round 0 a warm-up, medians over --reps rounds of the maxima over ranks:
//
//  raw-local        pwrite + fdatasync of the same bytes into <local> (a dd-like bound for the level)
//  raw-global       the same into <global>
//  global           a Runtime writing straight to <global>/global (posix, fsync): blocked, committed
//  local            local_dir = <local>/local, dir = <global>/local, drain_every 1: blocked, locally
//                   complete (Ticket::wait), drained (wait_all)
//  local-partner    the same with redundancy partner (CKPT_REDUNDANCY; the row says "unavailable" in
//                   a build without it)
//  local-xor        the same with redundancy xor (xor_group 4: all P/n nodes in one group when <= 7)
//
// The global directory's slowness comes from perf/slowfs.c (LD_PRELOAD) with SLOWFS_UNDER=<global>
// and SLOWFS_MBPS per process; without it both directories run at the disk's speed. Reported per
// mode: blocked (s), to locally complete (s), to global (s), and the ratios of the latter two to the
// raw bound of their directory.
//
//   mpiexec -n 4 -x LD_PRELOAD=build/perf/libslowfs.so -x SLOWFS_UNDER=/tmp/ckpt-levels-global
//           -x SLOWFS_MBPS=100 build/perf/levels --bytes 32M --ranks-per-node 2 --reps 5
//           --local /dev/shm/ckpt-levels-local --global /tmp/ckpt-levels-global --csv results/levels.csv
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ckpt/ckpt.hpp"

using namespace ckpt::bench;

namespace {

[[noreturn]] void fail(const std::string& what) { abort_job("levels", what); }

struct Args {
  std::uint64_t bytes = 32ull << 20;
  int reps = 5, ranks_per_node = 2;
  std::string local = "/dev/shm/ckpt-levels-local", global = "/tmp/ckpt-levels-global", csv;
};

Args parse_args(int argc, char** argv) {
  Args a;
  parse_options(
      argc, argv, "--bytes, --reps, --ranks-per-node, --local, --global, --csv",
      [&](const std::string& k, const std::string& v) {
        if (k == "--bytes")
          a.bytes = f64_bytes_option(k, v, fail);
        else if (k == "--reps")
          a.reps = positive_option(k, v, fail);
        else if (k == "--ranks-per-node")
          a.ranks_per_node = positive_option(k, v, fail);
        else if (k == "--local")
          a.local = v;
        else if (k == "--global")
          a.global = v;
        else if (k == "--csv")
          a.csv = v;
        else
          return false;
        return true;
      },
      fail);
  return a;
}

/// pwrite + fdatasync of `n` bytes into `path`; seconds.
double raw_write(const std::string& path, const std::vector<double>& data) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = Clock::now();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create " + path);
  const auto* p = reinterpret_cast<const char*>(data.data());
  std::size_t left = data.size() * sizeof(double), off = 0;
  while (left > 0) {
    const std::size_t piece = std::min<std::size_t>(left, 8u << 20);  // as the pipeline's chunks
    const ssize_t w = ::pwrite(fd, p + off, piece, static_cast<off_t>(off));
    if (w <= 0) fail("write " + path);
    off += static_cast<std::size_t>(w);
    left -= static_cast<std::size_t>(w);
  }
  if (::fdatasync(fd) != 0) fail("fdatasync " + path);
  ::close(fd);
  return max_over_ranks(since(t0));
}

struct Mode {
  std::string name;
  std::unique_ptr<ckpt::Runtime> rt;  // null for the raw bounds and unavailable modes
  std::string unavailable;
  std::vector<double> blocked, local, global;
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const Args a = parse_args(argc, argv);
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int rank = world_rank();
  if (size % a.ranks_per_node != 0) fail("the rank count must be a multiple of --ranks-per-node");
  if (rank == 0) {
    for (const auto& d : {a.local, a.global}) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
      if (auto e = make_dir(d); !e.empty()) fail(e);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  std::vector<double> state(a.bytes / sizeof(double));
  const char* mbps = std::getenv("SLOWFS_MBPS");

  std::vector<Mode> modes;
  for (const char* n : {"raw-local", "raw-global", "global", "local", "local-partner", "local-xor"}) {
    modes.emplace_back();
    modes.back().name = n;
  }
  for (auto& m : modes) {
    if (m.name.rfind("raw-", 0) == 0) continue;
    if (m.name == "local-partner") ::setenv("CKPT_REDUNDANCY", "partner", 1);
    if (m.name == "local-xor") ::setenv("CKPT_REDUNDANCY", "xor", 1);
    ckpt::Options o;  // defaults, then CKPT_* variables
    ::unsetenv("CKPT_REDUNDANCY");
    if (!o.error.ok()) {
      m.unavailable = o.error.message();
      continue;
    }
    o.transport = "posix";
    o.keep = 2;
    o.fsync = true;
    o.dir = a.global + "/" + m.name;
    if (m.name != "global") {
      o.local_dir = a.local + "/" + m.name;
      o.ranks_per_node = a.ranks_per_node;
      o.drain_every = 1;
    }
    m.rt = std::make_unique<ckpt::Runtime>(MPI_COMM_WORLD, o);
    if (!m.rt->status().ok()) {
      m.unavailable = m.rt->status().to_string();
      m.rt.reset();
      continue;
    }
    if (!m.rt->protect("state", state.data(), ckpt::DType::f64, ckpt::Dims{state.size()}).ok())
      fail("protect: " + m.name);
  }

  for (int round = 0; round <= a.reps; ++round) {
    for (auto& m : modes) {
      for (std::size_t i = 0; i < state.size(); ++i) state[i] = static_cast<double>(round * 7 + rank) + 1e-9 * i;
      double blocked = 0, local = 0, global = 0;
      if (m.name == "raw-local" || m.name == "raw-global") {
        const std::string dir = m.name == "raw-local" ? a.local : a.global;
        local = global = raw_write(dir + "/raw." + std::to_string(rank), state);
      } else if (m.rt) {
        MPI_Barrier(MPI_COMM_WORLD);
        const auto t0 = Clock::now();
        ckpt::Ticket tk = m.rt->checkpoint(round);
        blocked = max_over_ranks(tk.stats().blocked_s);
        ckpt::Status s = tk.wait();
        local = max_over_ranks(since(t0));
        if (!s.ok()) fail(m.name + ": checkpoint: " + s.to_string());
        s = m.rt->wait_all();  // with local_dir: the drain to the global directory too
        global = max_over_ranks(since(t0));
        if (!s.ok()) fail(m.name + ": wait_all: " + s.to_string());
      } else {
        continue;
      }
      if (round == 0) continue;  // warm-up
      m.blocked.push_back(blocked);
      m.local.push_back(local);
      m.global.push_back(global);
    }
  }
  for (auto& m : modes)
    if (m.rt && !m.rt->close().ok()) fail("close: " + m.name);

  if (rank == 0) {
    const double raw_local = median(modes[0].local), raw_global = median(modes[1].global);
    std::printf(
        "levels: %d ranks as %d nodes, %.1f MiB per rank, global throttled to %s MB/s per process, "
        "%d rounds (medians of the maxima over ranks)\n",
        size, size / a.ranks_per_node, static_cast<double>(a.bytes) / (1 << 20), mbps ? mbps : "(none)", a.reps);
    std::printf("%-14s %12s %16s %12s %14s %14s\n", "mode", "blocked (s)", "locally (s)", "global (s)", "local / raw",
                "global / raw");
    FILE* csv = a.csv.empty() ? nullptr : std::fopen(a.csv.c_str(), "w");
    if (!a.csv.empty() && csv == nullptr) fail("cannot write " + a.csv);
    if (csv)
      std::fprintf(csv,
                   "mode,ranks,ranks_per_node,bytes_per_rank,slowfs_mbps,blocked_s,local_s,global_s,"
                   "raw_local_s,raw_global_s\n");
    for (auto& m : modes) {
      if (!m.unavailable.empty()) {
        std::printf("%-14s unavailable: %s\n", m.name.c_str(), m.unavailable.c_str());
        continue;
      }
      const double b = median(m.blocked), l = median(m.local), g = median(m.global);
      std::printf("%-14s %12.4f %16.4f %12.4f %14.2f %14.2f\n", m.name.c_str(), b, l, g, l / raw_local, g / raw_global);
      if (csv)
        std::fprintf(csv, "%s,%d,%d,%llu,%s,%.6f,%.6f,%.6f,%.6f,%.6f\n", m.name.c_str(), size, a.ranks_per_node,
                     static_cast<unsigned long long>(a.bytes), mbps ? mbps : "0", b, l, g, raw_local, raw_global);
    }
    if (csv) std::fclose(csv);
    std::error_code ec;
    std::filesystem::remove_all(a.local, ec);
    std::filesystem::remove_all(a.global, ec);
  }
  MPI_Finalize();
  return 0;
}
