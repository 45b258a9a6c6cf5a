// perf/transports: the seeds' comparison for one transport configuration (chosen by CKPT_* variables,
// e.g. CKPT_TRANSPORT=rbio CKPT_RBIO_WRITERS=2). Every rank protects --bytes of a global array and
// takes --reps checkpoints with --compute-ms of computation between them. Rank 0 prints one CSV row:
//   label,ranks,bytes_per_rank,blocked_max_s,blocked_mean_s,durable_max_s,committed_max_s,
//   perceived_GBps,raw_GBps,files
// perceived = all bytes / slowest rank's time blocked in checkpoint(); raw = all bytes / time from
// entering checkpoint() to the commit (seed 004's two figures). Medians over the repetitions.
#include <dirent.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "ckpt/ckpt.hpp"

using namespace ckpt::bench;  // since, median, max_over_ranks, ...

namespace {
int count_files(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  int n = 0;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n;
}
}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::uint64_t bytes = 64ull << 20;
  int reps = 3, compute_ms = 200;
  std::string label = "run", dir = "/tmp/ckpt-perf-transports";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--bytes")
      bytes = ckpt::parse_bytes(v).value();
    else if (k == "--reps")
      reps = std::stoi(v);
    else if (k == "--compute-ms")
      compute_ms = std::stoi(v);
    else if (k == "--label")
      label = v;
    else if (k == "--dir")
      dir = v;
  }
  int rc = 0;
  {
    ckpt::Options o;  // CKPT_* variables pick the transport and its parameters
    o.dir = dir;
    o.keep = 1;
    ckpt::Runtime rt(MPI_COMM_WORLD, o);
    if (!rt.status().ok()) {
      if (rank == 0) std::fprintf(stderr, "%s: %s\n", label.c_str(), rt.status().to_string().c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const std::uint64_t n = bytes / sizeof(double);
    std::vector<double> data(n);
    for (std::uint64_t i = 0; i < n; ++i) data[i] = static_cast<double>(i + n * rank);
    rt.protect("field", data.data(), ckpt::DType::f64, ckpt::Block{{n * size}, {n * rank}, {n}});
    (void)rt.checkpoint(0).wait();  // warm-up: staging pool, files, communicators
    std::vector<double> bmax, bmean, dmax, cmax;
    for (int r = 1; r <= reps; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      ckpt::Ticket t = rt.checkpoint(r);
      std::this_thread::sleep_for(std::chrono::milliseconds(compute_ms));  // "compute" while it flushes
      ckpt::Status s = t.wait();
      if (!s.ok()) {
        if (rank == 0) std::fprintf(stderr, "%s: %s\n", label.c_str(), s.to_string().c_str());
        rc = 1;
      }
      auto st = t.stats();
      double v[3] = {st.blocked_s, st.durable_s, st.committed_s}, mx[3], sum = 0;
      MPI_Allreduce(v, mx, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      MPI_Allreduce(&st.blocked_s, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      bmax.push_back(mx[0]);
      bmean.push_back(sum / size);
      dmax.push_back(mx[1]);
      cmax.push_back(mx[2]);
    }
    if (rank == 0) {
      const double total = static_cast<double>(bytes) * size / 1e9;
      const int files = count_files(dir + "/ckpt." + std::to_string(reps)) - 1;  // minus the index
      std::printf("%s,%d,%llu,%.6f,%.6f,%.6f,%.6f,%.3f,%.3f,%d\n", label.c_str(), size,
                  static_cast<unsigned long long>(bytes), median(bmax), median(bmean), median(dmax), median(cmax),
                  total / median(bmax), total / median(cmax), files < 0 ? 0 : files);
    }
  }
  MPI_Finalize();
  return rc;
}
