// perf/host_path: the host path of ckpt against its bounds, measured in the same run.
//  - capture: time checkpoint() blocks vs a plain memcpy of the same bytes into pre-touched memory
//  - flush:   ckpt's flush thread (hash + pwrite + fdatasync) and time-to-durable vs a dd-like
//             sequential pwrite of the same bytes in chunk-sized writes + fdatasync
// Repetitions are interleaved (ckpt, baseline, ckpt, ...) and the median is reported, because disk
// figures on shared machines are noisy. Output: a table on stdout and CSV rows (--csv FILE).
//
//   mpiexec -n 1 build/perf/host_path --sizes 64M,256M,1G --reps 5 --dir /tmp/ckpt-perf --csv results/host_path.csv
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "ckpt/ckpt.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double time_memcpy(void* dst, const void* src, std::size_t n) {
  auto t = Clock::now();
  std::memcpy(dst, src, n);
  return since(t);
}

/// dd-like: sequential pwrite in `chunk` pieces, then fdatasync.
double time_raw_write(const std::string& path, const char* src, std::size_t n, std::size_t chunk) {
  auto t = Clock::now();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return -1;
  for (std::size_t off = 0; off < n; off += chunk) {
    std::size_t len = std::min(chunk, n - off);
    if (::pwrite(fd, src + off, len, static_cast<off_t>(off)) != static_cast<ssize_t>(len)) {
      ::close(fd);
      return -1;
    }
  }
  ::fdatasync(fd);
  ::close(fd);
  double s = since(t);
  ::unlink(path.c_str());
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<std::uint64_t> sizes;
  int reps = 5;
  std::string dir = "/tmp/ckpt-perf", csv;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--sizes") {
      std::size_t p = 0;
      while (p < v.size()) {
        std::size_t e = v.find(',', p);
        if (e == std::string::npos) e = v.size();
        sizes.push_back(ckpt::parse_bytes(v.substr(p, e - p)).value());
        p = e + 1;
      }
    } else if (k == "--reps") reps = std::stoi(v);
    else if (k == "--dir") dir = v;
    else if (k == "--csv") csv = v;
  }
  if (sizes.empty()) sizes = {64ull << 20, 256ull << 20};
  std::FILE* out = nullptr;
  if (rank == 0 && !csv.empty()) {
    out = std::fopen(csv.c_str(), "w");
    if (out) std::fprintf(out, "ranks,bytes_per_rank,rep,memcpy_s,blocked_s,ckpt_flush_s,ckpt_durable_s,ckpt_committed_s,raw_write_s\n");
  }
  if (rank == 0)
    std::printf("%-6s %-10s %10s %10s %7s | %10s %10s %10s %7s %7s\n", "ranks", "MiB/rank", "memcpy ms", "blocked ms",
                "ratio", "raw GB/s", "flush GB/s", "durbl GB/s", "fl/raw", "du/raw");
  for (std::uint64_t bytes : sizes) {
    const std::size_t n = bytes / sizeof(double);
    std::vector<double> data(n), copy(n);
    for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<double>(i) * 1e-3 + rank;
    std::memset(copy.data(), 0, n * sizeof(double));  // pre-touch the memcpy target
    ckpt::Options o;  // defaults + CKPT_* (e.g. CKPT_TRACE to look inside)
    if (!o.error.ok()) {
      std::fprintf(stderr, "%s\n", o.error.to_string().c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    o.dir = dir + "/" + std::to_string(bytes);
    o.keep = 1;
    std::vector<double> mc, bl, fl, du, cm, raw;
    {
      ckpt::Runtime rt(MPI_COMM_WORLD, o);
      if (!rt.status().ok()) {
        std::fprintf(stderr, "%s\n", rt.status().to_string().c_str());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      rt.protect("data", data.data(), ckpt::DType::f64, ckpt::Block{{n * size}, {n * rank}, {n}});
      (void)rt.checkpoint(0).wait();  // warm-up: allocates and touches the staging pool once
      for (int r = 0; r < reps; ++r) {
        MPI_Barrier(MPI_COMM_WORLD);
        mc.push_back(time_memcpy(copy.data(), data.data(), n * sizeof(double)));
        MPI_Barrier(MPI_COMM_WORLD);
        ckpt::Ticket t = rt.checkpoint(r + 1);
        ckpt::Status s = t.wait();
        if (!s.ok()) std::fprintf(stderr, "checkpoint: %s\n", s.to_string().c_str());
        auto st = t.stats();
        bl.push_back(st.blocked_s);
        fl.push_back(st.flush_s);
        du.push_back(st.durable_s);
        cm.push_back(st.committed_s);
        MPI_Barrier(MPI_COMM_WORLD);
        raw.push_back(time_raw_write(o.dir + "/raw." + std::to_string(rank), reinterpret_cast<const char*>(data.data()),
                                     n * sizeof(double), o.chunk_bytes));
        if (out)
          std::fprintf(out, "%d,%llu,%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f\n", size, static_cast<unsigned long long>(bytes), r,
                       mc.back(), bl.back(), fl.back(), du.back(), cm.back(), raw.back());
      }
    }
    if (rank == 0) {
      const double gb = static_cast<double>(bytes) / 1e9;
      std::printf("%-6d %-10llu %10.2f %10.2f %7.3f | %10.3f %10.3f %10.3f %7.2f %7.2f\n", size,
                  static_cast<unsigned long long>(bytes >> 20), median(mc) * 1e3, median(bl) * 1e3,
                  median(bl) / median(mc), gb / median(raw), gb / median(fl), gb / median(du),
                  median(raw) / median(fl), median(raw) / median(du));
      std::fflush(stdout);
    }
  }
  if (out) std::fclose(out);
  MPI_Finalize();
  return 0;
}
