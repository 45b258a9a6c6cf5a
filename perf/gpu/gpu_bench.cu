// The GPU benchmark of issue 13: every figure in one run, each as a ratio to a bound measured in the
// same run on the same device (CUDA events for every GPU timing; no profiler needed).
//
//   peak     pinned D2H, H2D and D2D copy rates (cudaMemcpyAsync, best of 5)
//   capture  app-stream delay of checkpoint(step, stream) for each size, gpu_double_buffer off / on /
//            auto (null transport, so only the capture is measured): off vs bytes / D2H peak (goal
//            <= 1.1) and its D2H throughput vs the peak (goal >= 0.9); on / auto vs bytes / D2D peak +
//            50 us (goal <= 1.2); host time inside checkpoint() per 16 MiB chunk (goal <= 10 us)
//   overlap  a memory-bound kernel loop with a checkpoint every k iterations: posix transport vs the
//            null transport (goal <= 1.02) and vs no checkpoint
//   restart  restart(step, stream) of a checkpoint just written (page cache) vs H2D peak (goal >= 0.8)
//   shared   with several ranks on the GPU: aggregate capture throughput vs the single-rank D2H peak
//            measured first, alone (goal >= 0.9)
//
// Output: CSV rows (device,ranks,metric,mode,bytes,value,unit,bound,ratio,goal,pass) on stdout or into
// --csv FILE (rank 0); perf/gpu/table.py turns them into the markdown table of docs/performance.md.
// Built on the simulated device too (perf/gpu/run.sh --sim): its figures are memcpy's on this machine,
// not a GPU's; that run only shows that every step of the benchmark works.
//
//   gpu_bench [--sizes 1,4,16] [--dir DIR] [--csv FILE] [--quick] [--only peak,capture,overlap,restart,shared]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "ckpt/config.hpp"
#if !CKPT_HAVE_SIMGPU
#include <cuda_runtime.h>
#endif
#include "gpu/sim/launch.hpp"  // CKPT_LAUNCH; the simulated device's runtime in that build
#include "perf/bench_util.hpp"

namespace {

using ckpt::bench::Clock;
using ckpt::bench::since;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

#define BENCH_CUDA(call)                                                                                             \
  do {                                                                                                               \
    cudaError_t e_ = (call);                                                                                         \
    if (e_ != cudaSuccess) {                                                                                         \
      std::fprintf(stderr, "gpu_bench: %s failed: %s (%s:%d)\n", #call, cudaGetErrorString(e_), __FILE__, __LINE__); \
      MPI_Abort(MPI_COMM_WORLD, 2);                                                                                  \
    }                                                                                                                \
  } while (0)

struct Args {
  std::vector<double> sizes_gib{1, 4, 16};
  std::string dir = "/tmp/ckpt-gpu-bench";
  std::string csv;
  std::string only = "peak,capture,overlap,restart,shared";
  bool quick = false;
};

struct Row {
  std::string metric, mode;
  double bytes = 0, value = 0;
  std::string unit;
  double bound = 0, ratio = 0;
  std::string goal;  ///< e.g. "<=1.1"; empty: no goal
};

std::string g_device;
int g_ranks = 1;
std::vector<Row> g_rows;

bool meets(const Row& r) {
  if (r.goal.size() < 3) return true;
  const double g = std::atof(r.goal.c_str() + 2);
  return r.goal[0] == '<' ? r.ratio <= g : r.ratio >= g;
}

void add(Row r) {
  if (ckpt::bench::world_rank() == 0) g_rows.push_back(std::move(r));
}

/// Memory-bound kernel: a[i] = b[i] + s * c[i] over n doubles, `reps` times.
__global__ void triad(double* a, const double* b, const double* c, double s, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    a[i] = b[i] + s * c[i];
}

__global__ void init(double* a, std::size_t n, double v) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) a[i] = v + i;
}

/// Seconds of `f` (which enqueues on `s`), from CUDA events on `s`.
template <class F>
double gpu_seconds(cudaStream_t s, F f) {
  cudaEvent_t a, b;
  BENCH_CUDA(cudaEventCreate(&a));
  BENCH_CUDA(cudaEventCreate(&b));
  BENCH_CUDA(cudaEventRecord(a, s));
  f();
  BENCH_CUDA(cudaEventRecord(b, s));
  BENCH_CUDA(cudaEventSynchronize(b));
  float ms = 0;
  BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
  BENCH_CUDA(cudaEventDestroy(a));
  BENCH_CUDA(cudaEventDestroy(b));
  return ms / 1e3;
}

struct Peaks {
  double d2h = 0, h2d = 0, d2d = 0;  // bytes per second
};

Peaks measure_peaks(cudaStream_t s, std::size_t bytes) {
  void *dev = nullptr, *dev2 = nullptr, *host = nullptr;
  BENCH_CUDA(cudaMalloc(&dev, bytes));
  BENCH_CUDA(cudaMalloc(&dev2, bytes));
  BENCH_CUDA(cudaHostAlloc(&host, bytes, cudaHostAllocPortable));
  BENCH_CUDA(cudaMemsetAsync(dev, 1, bytes, s));
  auto best = [&](auto copy) {
    double t = 1e30;
    for (int i = 0; i < 5; ++i) t = std::min(t, gpu_seconds(s, copy));
    return static_cast<double>(bytes) / t;
  };
  Peaks p;
  p.d2h = best([&] { BENCH_CUDA(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s)); });
  p.h2d = best([&] { BENCH_CUDA(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s)); });
  p.d2d = best([&] { BENCH_CUDA(cudaMemcpyAsync(dev2, dev, bytes, cudaMemcpyDeviceToDevice, s)); });
  BENCH_CUDA(cudaFree(dev));
  BENCH_CUDA(cudaFree(dev2));
  BENCH_CUDA(cudaFreeHost(host));
  return p;
}

ckpt::Options base_options(const Args& a, const std::string& transport) {
  ckpt::Options o = ckpt::Options::defaults();
  o.dir = a.dir;
  o.transport = transport;
  o.fsync = false;
  o.chunk_bytes = 16 << 20;
  o.pool_max_fraction = 0.5;
  return o;
}

void bench_capture(const Args& a, const Peaks& pk, cudaStream_t s) {
  for (double gib : a.sizes_gib) {
    const std::size_t bytes = static_cast<std::size_t>(gib * kGiB);
    const std::size_t n = bytes / sizeof(double);
    double* dev = nullptr;
    BENCH_CUDA(cudaMalloc(&dev, bytes));
    CKPT_LAUNCH(init, 1024, 256, s)(dev, n, 1.0);
    for (const char* mode : {"off", "on", "auto"}) {
      ckpt::Options o = base_options(a, "null");
      o.gpu_double_buffer = *ckpt::parse_double_buffer(mode);
      o.gpu_spare_bytes = std::string(mode) == "on" ? ckpt::AutoBytes(bytes) : ckpt::AutoBytes();
      if (std::string(mode) == "auto") o.gpu_spare_bytes = bytes;  // cap: the whole region
      ckpt::Runtime rt(MPI_COMM_WORLD, o);
      if (!rt.status().ok() || !rt.protect("x", dev, ckpt::DType::f64, {n}).ok()) {
        std::fprintf(stderr, "gpu_bench: capture %s: %s\n", mode, rt.status().to_string().c_str());
        continue;
      }
      (void)rt.checkpoint(0, s).wait();  // warm-up: auto sizes its spare here
      BENCH_CUDA(cudaStreamSynchronize(s));
      std::vector<double> delay, host;
      for (int rep = 1; rep <= (a.quick ? 1 : 3); ++rep) {
        double host_s = 0;
        delay.push_back(gpu_seconds(s, [&] {
          const auto t0 = Clock::now();
          ckpt::Ticket t = rt.checkpoint(rep, s);
          host_s = since(t0);
          (void)t;
        }));
        host.push_back(host_s);
        ckpt::Status st = rt.wait_all();
        if (!st.ok()) std::fprintf(stderr, "gpu_bench: %s\n", st.to_string().c_str());
      }
      const double d = ckpt::bench::max_over_ranks(ckpt::bench::median(delay));
      const double h = ckpt::bench::max_over_ranks(ckpt::bench::median(host));
      const std::string m = mode;
      if (m == "off") {
        const double bound = bytes / pk.d2h;
        add({"app_stream_delay", m, double(bytes), d, "s", bound, d / bound, "<=1.1"});
        add({"capture_d2h", m, double(bytes), bytes / d / 1e9, "GB/s", pk.d2h / 1e9, (bytes / d) / pk.d2h, ">=0.9"});
      } else {
        const double bound = bytes / pk.d2d + 50e-6;
        add({"app_stream_delay", m, double(bytes), d, "s", bound, d / bound, "<=1.2"});
      }
      const double chunks = double(bytes) / double(16 << 20);
      add({"host_in_checkpoint_per_16MiB", m, double(bytes), h / chunks * 1e6, "us", 10, h / chunks * 1e6 / 10, "<=1"});
    }
    BENCH_CUDA(cudaFree(dev));
  }
}

void bench_overlap(const Args& a, cudaStream_t s) {
  const std::size_t n = (a.quick ? (64u << 20) : (512u << 20)) / sizeof(double);  // per array
  const int iters = a.quick ? 40 : 200, every = a.quick ? 10 : 20;
  double *x, *y, *z;
  BENCH_CUDA(cudaMalloc(&x, n * sizeof(double)));
  BENCH_CUDA(cudaMalloc(&y, n * sizeof(double)));
  BENCH_CUDA(cudaMalloc(&z, n * sizeof(double)));
  CKPT_LAUNCH(init, 1024, 256, s)(y, n, 1.0);
  CKPT_LAUNCH(init, 1024, 256, s)(z, n, 2.0);
  auto loop = [&](ckpt::Runtime* rt) {
    MPI_Barrier(MPI_COMM_WORLD);
    BENCH_CUDA(cudaStreamSynchronize(s));
    const auto t0 = Clock::now();
    for (int i = 1; i <= iters; ++i) {
      CKPT_LAUNCH(triad, 1024, 256, s)(x, y, z, 0.5, n);
      if (rt != nullptr && i % every == 0) (void)rt->checkpoint(i, s);
    }
    BENCH_CUDA(cudaStreamSynchronize(s));
    if (rt != nullptr) (void)rt->wait_all();
    return ckpt::bench::max_over_ranks(since(t0));
  };
  const double none = loop(nullptr);
  double with[2] = {0, 0};
  const char* transports[2] = {"null", "posix"};
  for (int k = 0; k < 2; ++k) {
    ckpt::Runtime rt(MPI_COMM_WORLD, base_options(a, transports[k]));
    (void)rt.protect("x", x, ckpt::DType::f64, {n});
    with[k] = loop(&rt);
  }
  add({"overlap_loop", "null_vs_none", 3.0 * n * 8, with[0], "s", none, with[0] / none, ""});
  add({"overlap_loop", "posix_vs_null", 3.0 * n * 8, with[1], "s", with[0], with[1] / with[0], "<=1.02"});
  BENCH_CUDA(cudaFree(x));
  BENCH_CUDA(cudaFree(y));
  BENCH_CUDA(cudaFree(z));
}

void bench_restart(const Args& a, const Peaks& pk, cudaStream_t s) {
  const std::size_t bytes = a.quick ? (256u << 20) : (std::size_t{4} << 30);
  const std::size_t n = bytes / sizeof(double);
  double* dev = nullptr;
  BENCH_CUDA(cudaMalloc(&dev, bytes));
  CKPT_LAUNCH(init, 1024, 256, s)(dev, n, 3.0);
  ckpt::Runtime rt(MPI_COMM_WORLD, base_options(a, "posix"));
  (void)rt.protect("x", dev, ckpt::DType::f64, {n});
  ckpt::Status st = rt.checkpoint(1, s).wait();
  if (!st.ok()) std::fprintf(stderr, "gpu_bench: restart: %s\n", st.to_string().c_str());
  (void)rt.restart(1, s);  // warm: the file is in the page cache afterwards
  std::vector<double> t;
  for (int rep = 0; rep < (a.quick ? 1 : 3); ++rep) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = Clock::now();
    st = rt.restart(1, s);
    t.push_back(ckpt::bench::max_over_ranks(since(t0)));
  }
  const double d = ckpt::bench::median(t);
  add({"restart_h2d", "cached", double(bytes), bytes / d / 1e9, "GB/s", pk.h2d / 1e9, (bytes / d) / pk.h2d, ">=0.8"});
  BENCH_CUDA(cudaFree(dev));
}

void bench_shared(const Args& a, const Peaks& pk, cudaStream_t s) {
  const std::size_t bytes = a.quick ? (256u << 20) : (std::size_t{2} << 30);
  const std::size_t n = bytes / sizeof(double);
  double* dev = nullptr;
  BENCH_CUDA(cudaMalloc(&dev, bytes));
  CKPT_LAUNCH(init, 1024, 256, s)(dev, n, 4.0);
  ckpt::Runtime rt(MPI_COMM_WORLD, base_options(a, "null"));
  (void)rt.protect("x", dev, ckpt::DType::f64, {n});
  (void)rt.checkpoint(0, s).wait();
  BENCH_CUDA(cudaStreamSynchronize(s));
  MPI_Barrier(MPI_COMM_WORLD);
  const double d = ckpt::bench::max_over_ranks(gpu_seconds(s, [&] { (void)rt.checkpoint(1, s); }));
  (void)rt.wait_all();
  const double total = double(bytes) * g_ranks;
  add({"shared_capture_d2h", std::to_string(g_ranks) + "_ranks", total, total / d / 1e9, "GB/s", pk.d2h / 1e9,
       (total / d) / pk.d2h, ">=0.9"});
  BENCH_CUDA(cudaFree(dev));
}

std::vector<double> parse_list(const std::string& s) {
  std::vector<double> v;
  for (std::size_t a = 0; a <= s.size();) {
    std::size_t b = s.find(',', a);
    if (b == std::string::npos) b = s.size();
    if (b > a) v.push_back(std::atof(s.substr(a, b - a).c_str()));
    a = b + 1;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (k == "--sizes")
      a.sizes_gib = parse_list(next());
    else if (k == "--dir")
      a.dir = next();
    else if (k == "--csv")
      a.csv = next();
    else if (k == "--only")
      a.only = next();
    else if (k == "--quick")
      a.quick = true;
    else {
      std::fprintf(stderr, "usage: gpu_bench [--sizes 1,4,16] [--dir DIR] [--csv FILE] [--quick] [--only LIST]\n");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  MPI_Comm_size(MPI_COMM_WORLD, &g_ranks);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    if (ckpt::bench::world_rank() == 0) std::fprintf(stderr, "gpu_bench: no CUDA device; nothing measured\n");
    MPI_Finalize();
    return 3;
  }
  BENCH_CUDA(cudaSetDevice(0));  // every rank on the first GPU: "ranks sharing a GPU"
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  g_device = prop.name;
  cudaStream_t s;
  BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto want = [&](const char* what) { return a.only.find(what) != std::string::npos; };

  // Peaks: rank 0 alone (the others wait), so that "shared" compares with one rank's peak.
  Peaks pk;
  if (ckpt::bench::world_rank() == 0) pk = measure_peaks(s, a.quick ? (256u << 20) : (std::size_t{1} << 30));
  MPI_Bcast(&pk, sizeof pk, MPI_BYTE, 0, MPI_COMM_WORLD);
  add({"peak_d2h", "pinned", 0, pk.d2h / 1e9, "GB/s", pk.d2h / 1e9, 1, ""});
  add({"peak_h2d", "pinned", 0, pk.h2d / 1e9, "GB/s", pk.h2d / 1e9, 1, ""});
  add({"peak_d2d", "device", 0, pk.d2d / 1e9, "GB/s", pk.d2d / 1e9, 1, ""});
  if (g_ranks == 1) {
    if (want("capture")) bench_capture(a, pk, s);
    if (want("overlap")) bench_overlap(a, s);
    if (want("restart")) bench_restart(a, pk, s);
  } else if (want("shared")) {
    bench_shared(a, pk, s);
  }
  if (ckpt::bench::world_rank() == 0) {
    std::FILE* f = a.csv.empty() ? stdout : std::fopen(a.csv.c_str(), "a");
    if (f == nullptr) f = stdout;
    for (const Row& r : g_rows)
      std::fprintf(f, "%s,%d,%s,%s,%.0f,%.6g,%s,%.6g,%.4f,%s,%s\n", g_device.c_str(), g_ranks, r.metric.c_str(),
                   r.mode.c_str(), r.bytes, r.value, r.unit.c_str(), r.bound, r.ratio, r.goal.c_str(),
                   r.goal.empty() ? "" : (meets(r) ? "yes" : "NO"));
    if (f != stdout) std::fclose(f);
  }
  BENCH_CUDA(cudaStreamDestroy(s));
  MPI_Finalize();
  return 0;
}
