// perf/host_path: the host path of ckpt against its bounds, measured in the same run.
//  - capture: time checkpoint() blocks vs a plain memcpy of the same bytes into pre-touched memory
//  - flush:   ckpt's flush thread (hash + pwrite + fdatasync) and time-to-durable vs a dd-like
//             sequential pwrite of the same bytes in chunk-sized writes + fdatasync
//  - read:    restart(step) of the last checkpoint vs a sequential pread of the same bytes in
//             chunk-sized pieces, both from a cold page cache: before each timed read every file of
//             the checkpoint directory (or the raw file) is fdatasync'ed and dropped with
//             posix_fadvise(DONTNEED); mincore() counts its resident pages before and after the drop,
//             to show that the drop works on this file system (a hypervisor's cache below the guest
//             is out of reach). Read times are the slowest rank's; a table after the write table and
//             CSV rows (--read-csv FILE).
// Repetitions are interleaved (ckpt, baseline, ckpt, ...) and the median is reported, because disk
// figures on shared machines are noisy. Output: a table on stdout and CSV rows (--csv FILE).
//
//   mpiexec -n 1 build/perf/host_path --sizes 64M,256M,1G --reps 5 --dir /tmp/ckpt-perf --csv results/host_path.csv
//           --read-csv results/host_path_read.csv
#include <dirent.h>
#include <fcntl.h>
#include <mpi.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ckpt/ckpt.hpp"

using namespace ckpt::bench;  // since, median, max_over_ranks, ...

namespace {

double time_memcpy(void* dst, const void* src, std::size_t n) {
  auto t = Clock::now();
  std::memcpy(dst, src, n);
  return since(t);
}

/// dd-like: sequential pwrite in `chunk` pieces, then fdatasync.
bool write_raw(const std::string& path, const char* src, std::size_t n, std::size_t chunk) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return false;
  for (std::size_t off = 0; off < n; off += chunk) {
    std::size_t len = std::min(chunk, n - off);
    if (::pwrite(fd, src + off, len, static_cast<off_t>(off)) != static_cast<ssize_t>(len)) {
      ::close(fd);
      return false;
    }
  }
  ::fdatasync(fd);
  ::close(fd);
  return true;
}

double time_raw_write(const std::string& path, const char* src, std::size_t n, std::size_t chunk) {
  auto t = Clock::now();
  if (!write_raw(path, src, n, chunk)) return -1;
  double s = since(t);
  ::unlink(path.c_str());
  return s;
}

/// The dd-like read: sequential pread in `chunk` pieces.
double time_raw_read(const std::string& path, char* dst, std::size_t n, std::size_t chunk) {
  auto t = Clock::now();
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return -1;
  for (std::size_t off = 0; off < n; off += chunk) {
    std::size_t len = std::min(chunk, n - off);
    if (::pread(fd, dst + off, len, static_cast<off_t>(off)) != static_cast<ssize_t>(len)) {
      ::close(fd);
      return -1;
    }
  }
  ::close(fd);
  return since(t);
}

/// Pages of a file in the page cache, before and after a drop.
struct Residency {
  std::uint64_t before = 0, after = 0;
};

std::uint64_t resident_pages(int fd, std::size_t len) {
  if (len == 0) return 0;
  void* p = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return 0;
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((len + page - 1) / page);
  std::uint64_t n = 0;
  if (::mincore(p, len, v.data()) == 0)
    for (unsigned char c : v) n += c & 1u;
  ::munmap(p, len);
  return n;
}

/// Writes `path` back and evicts it from the page cache (fdatasync + fadvise DONTNEED).
Residency drop_from_cache(const std::string& path) {
  Residency r;
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return r;
  struct stat st {};
  const std::size_t len = ::fstat(fd, &st) == 0 ? static_cast<std::size_t>(st.st_size) : 0;
  r.before = resident_pages(fd, len);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  r.after = resident_pages(fd, len);
  ::close(fd);
  return r;
}

/// drop_from_cache() of every regular file in `dir`, summed.
Residency drop_dir_from_cache(const std::string& dir) {
  Residency sum;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return sum;
  while (dirent* e = ::readdir(d)) {
    const std::string path = dir + "/" + e->d_name;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    Residency r = drop_from_cache(path);
    sum.before += r.before;
    sum.after += r.after;
  }
  ::closedir(d);
  return sum;
}

/// Medians of the cold reads of one size, for the read table.
struct ReadRow {
  std::uint64_t bytes = 0;
  double restart_s = 0, raw_s = 0;
  std::uint64_t resident_before = 0, resident_after = 0;  // pages, all dropped files, worst rep
};

/// Cold reads of the last checkpoint (restart) and of a raw file with the same bytes, interleaved.
ReadRow measure_reads(ckpt::Runtime& rt, const std::string& dir, std::int64_t step, const std::vector<double>& data,
                      std::vector<double>& scratch, std::size_t chunk, int reps, std::FILE* csv) {
  const std::size_t n = data.size() * sizeof(double);
  const std::string raw = dir + "/raw-read." + std::to_string(rt.rank());
  const std::string ckpt_dir = dir + "/ckpt." + std::to_string(step);
  if (!write_raw(raw, reinterpret_cast<const char*>(data.data()), n, chunk))
    std::fprintf(stderr, "host_path: cannot write %s\n", raw.c_str());
  ReadRow row;
  row.bytes = n;
  std::vector<double> rst, rd;
  for (int r = 0; r < reps; ++r) {
    const Residency c = rt.rank() == 0 ? drop_dir_from_cache(ckpt_dir) : Residency{};  // one page cache per node
    MPI_Barrier(MPI_COMM_WORLD);
    auto t = Clock::now();
    const ckpt::Status s = rt.restart(step);
    rst.push_back(max_over_ranks(since(t)));
    if (!s.ok()) std::fprintf(stderr, "restart: %s\n", s.to_string().c_str());
    const Residency w = drop_from_cache(raw);
    MPI_Barrier(MPI_COMM_WORLD);
    rd.push_back(max_over_ranks(time_raw_read(raw, reinterpret_cast<char*>(scratch.data()), n, chunk)));
    const std::uint64_t before = sum_over_ranks(c.before + w.before), after = sum_over_ranks(c.after + w.after);
    row.resident_before = std::max(row.resident_before, before);
    row.resident_after = std::max(row.resident_after, after);
    if (csv)
      std::fprintf(csv, "%d,%llu,%d,%.6f,%.6f,%llu,%llu\n", rt.size(), static_cast<unsigned long long>(n), r,
                   rst.back(), rd.back(), static_cast<unsigned long long>(before),
                   static_cast<unsigned long long>(after));
  }
  ::unlink(raw.c_str());
  row.restart_s = median(rst);
  row.raw_s = median(rd);
  return row;
}

void print_read_table(const std::vector<ReadRow>& rows, int ranks) {
  std::printf("\ncold reads (page cache dropped; slowest rank):\n%-6s %-10s %12s %12s %7s | %13s %13s\n", "ranks",
              "MiB/rank", "restart GB/s", "raw rd GB/s", "rst/raw", "cached before", "cached after");
  for (const ReadRow& r : rows) {
    const double gb = static_cast<double>(r.bytes) / 1e9;
    std::printf("%-6d %-10llu %12.3f %12.3f %7.2f | %13llu %13llu\n", ranks,
                static_cast<unsigned long long>(r.bytes >> 20), gb / r.restart_s, gb / r.raw_s, r.raw_s / r.restart_s,
                static_cast<unsigned long long>(r.resident_before), static_cast<unsigned long long>(r.resident_after));
  }
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
  std::string dir = "/tmp/ckpt-perf", csv, read_csv;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--sizes") {
      for (auto& b : split_list(v)) sizes.push_back(ckpt::parse_bytes(b).value());
    } else if (k == "--reps")
      reps = std::stoi(v);
    else if (k == "--dir")
      dir = v;
    else if (k == "--csv")
      csv = v;
    else if (k == "--read-csv")
      read_csv = v;
  }
  if (sizes.empty()) sizes = {64ull << 20, 256ull << 20};
  std::FILE* out = nullptr;
  if (rank == 0 && !csv.empty()) {
    out = std::fopen(csv.c_str(), "w");
    if (out)
      std::fprintf(
          out,
          "ranks,bytes_per_rank,rep,memcpy_s,blocked_s,ckpt_flush_s,ckpt_durable_s,ckpt_committed_s,raw_write_s\n");
  }
  std::FILE* read_out = rank == 0 && !read_csv.empty() ? std::fopen(read_csv.c_str(), "w") : nullptr;
  if (read_out)
    std::fprintf(
        read_out,
        "ranks,bytes_per_rank,rep,restart_s,raw_read_s,resident_pages_before_drop,resident_pages_after_drop\n");
  std::vector<ReadRow> read_rows;
  if (rank == 0)
    std::printf("%-6s %-10s %10s %10s %7s | %10s %10s %10s %7s %7s\n", "ranks", "MiB/rank", "memcpy ms", "blocked ms",
                "ratio", "raw GB/s", "flush GB/s", "durbl GB/s", "fl/raw", "du/raw");
  for (std::uint64_t bytes : sizes) {
    const std::size_t n = bytes / sizeof(double);
    std::vector<double> data(n), copy(n);
    for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<double>(i) * 1e-3 + rank;
    std::memset(copy.data(), 0, n * sizeof(double));  // pre-touch the memcpy target
    ckpt::Options o;                                  // defaults + CKPT_* (e.g. CKPT_TRACE to look inside)
    if (!o.error.ok()) {
      std::fprintf(stderr, "%s\n", o.error.to_string().c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    o.dir = dir + "/" + std::to_string(bytes);
    o.keep = 1;
    // The raw write and the reads go in ckpt's write pieces: chunk_bytes, or 16 MiB when it is auto (0)
    // (the auto chunk of states of 32 MiB and more).
    const std::size_t piece = o.chunk_bytes.value_or(std::size_t{16} << 20);
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
                                     n * sizeof(double), piece));
        if (out)
          std::fprintf(out, "%d,%llu,%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f\n", size, static_cast<unsigned long long>(bytes),
                       r, mc.back(), bl.back(), fl.back(), du.back(), cm.back(), raw.back());
      }
      read_rows.push_back(measure_reads(rt, o.dir, reps, data, copy, piece, reps, read_out));
    }
    if (rank == 0) {
      const double gb = static_cast<double>(bytes) / 1e9;
      std::printf("%-6d %-10llu %10.2f %10.2f %7.3f | %10.3f %10.3f %10.3f %7.2f %7.2f\n", size,
                  static_cast<unsigned long long>(bytes >> 20), median(mc) * 1e3, median(bl) * 1e3,
                  median(bl) / median(mc), gb / median(raw), gb / median(fl), gb / median(du), median(raw) / median(fl),
                  median(raw) / median(du));
      std::fflush(stdout);
    }
  }
  if (rank == 0) print_read_table(read_rows, size);
  if (out) std::fclose(out);
  if (read_out) std::fclose(read_out);
  MPI_Finalize();
  return 0;
}
