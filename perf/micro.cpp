// perf/micro: Google Benchmark micro-benchmarks of the pieces a checkpoint is made of, each next to
// the bound it should reach, all reported in bytes/s:
//  - BM_Memcpy/<MiB>       memcpy into pre-touched memory: the bound of the capture copy
//  - BM_Capture/<MiB>      the time checkpoint() blocks (null transport: the whole pipeline runs, nothing
//                          reaches the disk), timed from the Ticket's blocked_s; compare with BM_Memcpy
//  - BM_Digest/<MiB>       XXH3-64 throughput of libxxhash's plain function (SSE2 on x86-64): the baseline
//  - BM_Hash64/<MiB>       the same hash as the library computes it (base/hash: the dispatching function
//                          where libxxhash has one, AVX2/AVX-512 at run time); 1 MiB stays in cache
//  - BM_MinMax/<MiB>       min/max of f64 values, the statistics the digest thread keeps per block
//  - BM_DirectWrite/<MiB>/<pages>  an O_DIRECT pwrite + fdatasync of a staging buffer to a file in /tmp,
//                          as the write thread does; pages 0: 4 KiB pages (MADV_NOHUGEPAGE), 1: the
//                          staging pool's (map_direct_buffer: 2 MiB pages where THP allows). The CPU
//                          column is the point: pinning 512x fewer pages for the device's DMA. The label
//                          says how much of the buffer the kernel backed with huge pages
//  - BM_IndexEncode/<vars> and BM_IndexDecode/<vars>: the runtime's index codec (format v1) on an index
//                          of one rank with one block per 1-D f64 variable; decode validates everything
//  - BM_NvtxRange          one ckpt NVTX range (gpu/nvtx.hpp: push + pop, as each trace span makes) next to
//                          BM_NvtxBaseline, the same loop without it. Without a tool attached the two
//                          should be within a nanosecond or two; run once more with an NVTX tool, e.g.
//                          NVTX_INJECTION64_PATH=build/tests/trace/libnvtx_record.so NVTXREC_DIR=/tmp,
//                          for the cost with one (that library records every range under a mutex)
// Times and rates are wall-clock (names end in /real_time; BM_Capture's in /manual_time), like
// blocked_s. Sizes are in MiB; the 4 GiB cases need 8 GiB of memory and run only when a filter names
// them: --benchmark_filter='BM_(Memcpy|Capture)/4096'. One rank (the Runtime needs MPI_THREAD_MULTIPLE):
//
//   mpiexec -n 1 build/perf/micro --benchmark_out=results/micro.csv --benchmark_out_format=csv
#include <fcntl.h>
#include <mpi.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/format.hpp"
#include "base/hash.hpp"
#include "base/posix_io.hpp"
#include "ckpt/ckpt.hpp"
#include "gpu/nvtx.hpp"

namespace {

constexpr std::size_t kMiB = 1ull << 20;

/// A buffer of `n` bytes whose pages are all touched (no page faults inside a timed copy).
std::unique_ptr<char[]> touched(std::size_t n, int fill) {
  std::unique_ptr<char[]> p(new char[n]);
  std::memset(p.get(), fill, n);
  return p;
}

std::size_t bytes_of(const benchmark::State& state) { return static_cast<std::size_t>(state.range(0)) * kMiB; }

void BM_Memcpy(benchmark::State& state) {
  const std::size_t n = bytes_of(state);
  auto src = touched(n, 1), dst = touched(n, 0);
  for (auto _ : state) {
    std::memcpy(dst.get(), src.get(), n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n));
}

/// Checkpoint directory of this process; the null transport writes no data, but the Runtime creates it.
std::string scratch_dir() { return "/tmp/ckpt-micro." + std::to_string(::getpid()); }

void BM_Capture(benchmark::State& state) {
  const std::size_t n = bytes_of(state) / sizeof(double);
  std::vector<double> data(n);
  for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<double>(i);
  ckpt::Options o;  // defaults + CKPT_*
  o.transport = "null";
  o.dir = scratch_dir();
  o.keep = 1;
  ckpt::Runtime rt(MPI_COMM_WORLD, o);
  ckpt::Status s = rt.status().ok() ? rt.protect("data", data.data(), ckpt::DType::f64, ckpt::Shape{n}) : rt.status();
  if (s.ok()) s = rt.checkpoint(0).wait();  // warm-up: the first checkpoint allocates the staging pool
  if (!s.ok()) {
    state.SkipWithError(s.to_string().c_str());
    return;
  }
  std::int64_t step = 1;
  for (auto _ : state) {
    ckpt::Ticket t = rt.checkpoint(step++);
    state.SetIterationTime(t.stats().blocked_s);  // blocked_s is final once checkpoint() returns
    s = t.wait();                                 // the flush runs outside the timed part
    if (!s.ok()) {
      state.SkipWithError(s.to_string().c_str());
      break;
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(n * sizeof(double)));
}

void BM_Digest(benchmark::State& state) {
  const std::size_t n = bytes_of(state);
  auto src = touched(n, 7);
  for (auto _ : state) benchmark::DoNotOptimize(XXH3_64bits(src.get(), n));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n));
}

void BM_Hash64(benchmark::State& state) {
  const std::size_t n = bytes_of(state);
  auto src = touched(n, 7);
  for (auto _ : state) benchmark::DoNotOptimize(ckpt::detail::hash64(src.get(), n));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n));
}

void BM_MinMax(benchmark::State& state) {
  const std::size_t n = bytes_of(state);
  auto src = touched(n, 7);
  for (auto _ : state) {
    ckpt::detail::MinMax m(ckpt::DType::f64);
    m.update(src.get(), n);
    benchmark::DoNotOptimize(m.min_bits());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n));
}

/// An index of one rank holding one block of each of `nvars` 1-D f64 variables of 1024 elements.
ckpt::detail::Index make_index(std::size_t nvars) {
  using namespace ckpt::detail;
  constexpr std::uint64_t kElems = 1024, kBlock = kElems * sizeof(double);
  Index idx;
  idx.step = 1;
  idx.nranks = 1;
  idx.ckpt_id = 0x1234;
  idx.created_unix = 1.7e9;
  idx.transport = "posix";
  idx.attrs = {{"ckpt_version", ckpt::version()}};
  idx.files = {{"data.0", 0, 4096 + nvars * kBlock}};
  idx.rank_file = {0};
  for (std::size_t v = 0; v < nvars; ++v) {
    VarRecord var;
    var.name = "vars/v" + std::to_string(v);
    var.dtype = ckpt::DType::f64;
    var.kind = RegionKind::global;
    var.ndim = 1;
    var.global = {kElems};
    idx.vars.push_back(var);
    BlockRecord b;
    b.var = static_cast<std::uint32_t>(v);
    b.offset = 4096 + v * kBlock;
    b.length = kBlock;
    b.start = {0};
    b.count = {kElems};
    b.has_stats = true;
    b.checksum = v;
    idx.blocks.push_back(b);
  }
  return idx;
}

void BM_IndexEncode(benchmark::State& state) {
  const auto idx = make_index(static_cast<std::size_t>(state.range(0)));
  std::size_t bytes = 0;
  for (auto _ : state) {
    auto enc = ckpt::detail::encode_index(idx);
    bytes = enc.size();
    benchmark::DoNotOptimize(enc.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(bytes));
  state.SetLabel(std::to_string(bytes) + " B index");
}

void BM_IndexDecode(benchmark::State& state) {
  const auto enc = ckpt::detail::encode_index(make_index(static_cast<std::size_t>(state.range(0))));
  for (auto _ : state) {
    auto idx = ckpt::detail::decode_index(enc.data(), enc.size());
    if (!idx.ok()) {
      state.SkipWithError(idx.status().to_string().c_str());
      break;
    }
    benchmark::DoNotOptimize(idx.value().blocks.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(enc.size()));
  state.SetLabel(std::to_string(enc.size()) + " B index");
}

}  // namespace

void BM_NvtxBaseline(benchmark::State& state) {
  std::int64_t step = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(step);
    ++step;
    benchmark::ClobberMemory();
  }
}

void BM_NvtxRange(benchmark::State& state) {
  std::int64_t step = 0;
  for (auto _ : state) {
    ckpt::detail::NvtxRange r("ckpt:write", step);
    benchmark::DoNotOptimize(step);
    ++step;
    benchmark::ClobberMemory();
  }
}

/// AnonHugePages of the mapping that holds `p` (/proc/self/smaps), in KiB; -1 when not found.
long huge_kib_of(const void* p) {
  std::FILE* f = std::fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[512];
  bool inside = false;
  long kib = -1;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  while (std::fgets(line, sizeof line, f)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && std::strchr(line, '-') < std::strchr(line, ' '))
      inside = a >= lo && a < hi;
    else if (inside && std::sscanf(line, "AnonHugePages: %ld kB", &kib) == 1)
      break;
  }
  std::fclose(f);
  return kib;
}

void BM_DirectWrite(benchmark::State& state) {
  const std::size_t n = bytes_of(state);
  const bool staging = state.range(1) != 0;
  void* p = nullptr;
  if (staging) {
    p = ckpt::detail::map_direct_buffer(n);
  } else {
    p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) p = nullptr;
#ifdef MADV_NOHUGEPAGE
    if (p) (void)::madvise(p, n, MADV_NOHUGEPAGE);
#endif
  }
  if (!p) {
    state.SkipWithError("mmap failed");
    return;
  }
  std::memset(p, 3, n);
  std::error_code ec;
  std::filesystem::create_directories(scratch_dir(), ec);
  // The write thread's own path: a file, its O_DIRECT descriptor (open_direct), pwrite_direct.
  const std::string path = scratch_dir() + "/direct.bin";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const int dfd = fd >= 0 ? ckpt::detail::open_direct(path) : -1;
  if (dfd < 0) {
    state.SkipWithError(("O_DIRECT open of " + path + ": " + std::strerror(errno)).c_str());
  } else {
    for (auto _ : state) {
      ckpt::Status s = ckpt::detail::pwrite_direct(dfd, fd, p, n, 0, path);
      if (s.ok() && ::fdatasync(fd) != 0) s = ckpt::detail::errno_status("fdatasync " + path);
      if (!s.ok()) {
        state.SkipWithError(s.to_string().c_str());
        break;
      }
    }
    ::close(dfd);
  }
  if (fd >= 0) ::close(fd);
  ::unlink(path.c_str());
  state.SetLabel((staging ? "staging pages, " : "4 KiB pages, ") + std::to_string(huge_kib_of(p) / 1024) + " MiB huge");
  ::munmap(p, n);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n));
}

BENCHMARK(BM_Memcpy)->Arg(64)->Arg(256)->Arg(1024)->Arg(4096)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Capture)->Arg(64)->Arg(256)->Arg(1024)->Arg(4096)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Digest)->Arg(1)->Arg(64)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Hash64)->Arg(1)->Arg(64)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MinMax)->Arg(1)->Arg(64)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DirectWrite)->ArgsProduct({{16, 64}, {0, 1}})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_IndexEncode)->Arg(1)->Arg(100)->Arg(10000)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_IndexDecode)->Arg(1)->Arg(100)->Arg(10000)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NvtxBaseline)->UseRealTime()->Unit(benchmark::kNanosecond);
BENCHMARK(BM_NvtxRange)->UseRealTime()->Unit(benchmark::kNanosecond);

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "micro: MPI_Init_thread failed\n");
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    MPI_Finalize();
    return 1;
  }
  // Without a filter, everything but the 4 GiB cases.
  if (benchmark::GetBenchmarkFilter().empty()) benchmark::SetBenchmarkFilter("-/4096(/|$)");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::error_code ec;
  std::filesystem::remove_all(scratch_dir(), ec);
  MPI_Finalize();
  return 0;
}
