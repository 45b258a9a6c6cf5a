// The GPU device (gpu/cuda_device.cu) and the GPU-check helper (gpu/cuda_check.hpp), for the vendor ckpt
// was built with: CUDA, or HIP (the same source through gpu/gpu_runtime.hpp and gpu_test_util.hpp).
// Runs anywhere: the helper's Status/sticky classification, the application's pending error left
// alone (with a GPU only: without a driver the initialisation error sticks), and "no GPU -> unavailable
// -> host device".
// Needs a GPU (GTEST_SKIP() with the reason otherwise): memory-kind detection, stream ordering of a
// capture (copies after earlier kernels, later kernels after the copies, without host sync), fences
// waited on from another thread, device-side double buffering, and Runtime round trips with canary
// kernels (a slow kernel before checkpoint(), an overwriting kernel right after it, restart targets
// poisoned first) over the default, per-thread and a blocking stream, double buffering
// off/on/half/auto, max_in_flight 1/2/4, a 1 GiB checkpoint through a 4-chunk pool, managed, pinned
// and cudaMallocAsync memory, pageable staging, a graph-captured stream (rejected), an injected
// write failure followed by an exact restart, and restart(step, stream). Every round trip asserts
// cudaStreamQuery(stream) == cudaErrorNotReady right after checkpoint(): the slow kernel is still
// running, so a test cannot pass because the GPU happened to be idle.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device.hpp"
#include "gpu_test_util.hpp"
#include "test_util.hpp"

using namespace ckpt;
using ckpt::test::no_gpu_reason;
using detail::CudaDeviceConfig;
using detail::Device;

namespace {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

/// Spins for about `cycles` clock cycles, then writes a[i] = value + i: a slow producer, so a copy that
/// is not ordered after it reads stale data.
__global__ void slow_fill(double* a, std::size_t n, double value, long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) a[i] = value + i;
}

void fill(cudaStream_t s, double* a, std::size_t n, double value, long long cycles = 0) {
  slow_fill<<<64, 256, 0, s>>>(a, n, value, cycles);
}

constexpr long long kSlow = 200'000'000;  // ~0.1 s on a current GPU

Options options_for(const std::string& dir) {
  Options o = Options::defaults();  // the environment's CKPT_* variables are not ours to read
  o.dir = dir;
  o.fsync = false;
  o.chunk_bytes = 1 << 20;
  return o;
}

}  // namespace

// ---- anywhere ------------------------------------------------------------------------------------

TEST(CudaCheck, ErrorsBecomeStatusWithCallFileAndLine) {
  EXPECT_TRUE(CKPT_IMPL_CUDA_CHECK(cudaSuccess).ok());
  const int line = __LINE__ + 1;
  Status s = CKPT_IMPL_CUDA_CHECK(cudaErrorMemoryAllocation);
  EXPECT_EQ(s.code(), Code::io_error);
  EXPECT_NE(s.message().find("cudaErrorMemoryAllocation"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("test_cuda_device.cu:" + std::to_string(line)), std::string::npos) << s.message();
  EXPECT_EQ(CKPT_IMPL_CUDA_CHECK(cudaErrorNoDevice).code(), Code::unavailable);
  EXPECT_EQ(CKPT_IMPL_CUDA_CHECK(cudaErrorInsufficientDriver).code(), Code::unavailable);
  // A GPU that is there but busy or broken is not "no GPU": never a fall-back to the host device.
#if !CKPT_HAVE_HIP  // no HIP twin
  EXPECT_EQ(CKPT_IMPL_CUDA_CHECK(cudaErrorDevicesUnavailable).code(), Code::io_error);
#endif
  EXPECT_EQ(CKPT_IMPL_CUDA_CHECK(cudaErrorInitializationError).code(), Code::io_error);
}

TEST(CudaCheck, TheApplicationsPendingErrorIsLeftAlone) {
  // Without a driver every call, cudaGetLastError() included, keeps returning the initialisation
  // error: nothing to tell apart there.
  SKIP_WITHOUT_GPU();
  (void)cudaGetLastError();
  // The application has an unchecked error pending (any non-sticky one: cudaSetDevice(-1) gives
  // cudaErrorInvalidDevice with or without a GPU) ...
  ASSERT_NE(cudaSetDevice(-1), cudaSuccess);
  const cudaError_t pending = cudaPeekAtLastError();
  ASSERT_NE(pending, cudaSuccess);
  // ... then ckpt's own call fails: the application must still find its error afterwards.
  EXPECT_FALSE(CKPT_IMPL_CUDA_CHECK(cudaSetDevice(-2)).ok());
  EXPECT_NE(cudaGetLastError(), cudaSuccess) << "ckpt cleared the application's pending error";
  // With nothing pending, ckpt's error does not leak into the application's next cudaGetLastError().
  EXPECT_FALSE(CKPT_IMPL_CUDA_CHECK(cudaSetDevice(-2)).ok());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(CudaCheck, StickyErrorsAreClassified) {
  for (cudaError_t e : {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorECCUncorrectable, cudaErrorAssert})
    EXPECT_TRUE(detail::cuda_error_is_sticky(e)) << cudaGetErrorName(e);
#if !CKPT_HAVE_HIP  // CUDA codes without a HIP twin
  for (cudaError_t e : {cudaErrorHardwareStackError, cudaErrorIllegalInstruction, cudaErrorMisalignedAddress,
                        cudaErrorMpsClientTerminated})
    EXPECT_TRUE(detail::cuda_error_is_sticky(e)) << cudaGetErrorName(e);
#endif
  for (cudaError_t e : {cudaErrorMemoryAllocation, cudaErrorInvalidValue, cudaErrorNoDevice, cudaErrorNotReady})
    EXPECT_FALSE(detail::cuda_error_is_sticky(e)) << cudaGetErrorName(e);
}

TEST(CudaDevice, WithoutGpuTheRuntimeFallsBackToTheHostDevice) {
  auto d = detail::make_cuda_device();
  auto fallback = detail::make_default_device();
  ASSERT_TRUE(fallback.ok()) << fallback.status().to_string();
  if (no_gpu_reason().empty()) {
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    EXPECT_STREQ(d.value()->name(), detail::kGpuDeviceName);
    EXPECT_STREQ(fallback.value()->name(), detail::kGpuDeviceName);
  } else {
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), Code::unavailable) << d.status().to_string();
    EXPECT_NE(d.status().message().find(std::string(detail::kGpuVendor) + " device"), std::string::npos)
        << d.status().to_string();
    EXPECT_STREQ(fallback.value()->name(), "host");
  }
}

TEST(CudaDevice, DoubleBufferOnWithoutASpareIsAnErrorNotOff) {
  SKIP_WITHOUT_GPU();
  CudaDeviceConfig cfg;
  cfg.double_buffer = CudaDeviceConfig::DoubleBuffer::on;
  auto d = detail::make_cuda_device(cfg);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::invalid_argument) << d.status().to_string();
}

// ---- needs a GPU -----------------------------------------------------------------------------------

TEST(CudaDevice, ClassifiesMemoryKinds) {
  SKIP_WITHOUT_GPU();
  auto dev = detail::make_cuda_device();
  ASSERT_TRUE(dev.ok()) << dev.status().to_string();
  Device& d = *dev.value();
  void *dptr = nullptr, *pinned = nullptr, *managed = nullptr;
  CUDA_OK(cudaMalloc(&dptr, 4096));
  CUDA_OK(cudaMallocHost(&pinned, 4096));
  CUDA_OK(cudaMallocManaged(&managed, 4096));
  std::vector<char> pageable(4096);
  EXPECT_EQ(d.classify(dptr).value(), MemoryKind::device);
  EXPECT_EQ(d.classify(static_cast<char*>(dptr) + 100).value(), MemoryKind::device);
  EXPECT_EQ(d.classify(pinned).value(), MemoryKind::host_pinned);
  EXPECT_EQ(d.classify(managed).value(), MemoryKind::managed);
  EXPECT_EQ(d.classify(pageable.data()).value(), MemoryKind::host);
  auto st = d.alloc_staging(1 << 20);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_TRUE(st.value().locked);
  EXPECT_TRUE(st.value().pinned);
  EXPECT_EQ(d.classify(st.value().ptr).value(), MemoryKind::host_pinned);
  d.free_staging(st.value());
  CUDA_OK(cudaFree(dptr));
  CUDA_OK(cudaFreeHost(pinned));
  CUDA_OK(cudaFree(managed));
}

/// capture_begin / copy_to_host / fence / capture_end on a stream with a slow kernel before the capture
/// and an overwriting kernel after it; the fences are waited on from another thread (the flush thread's
/// role). Run with and without device-side double buffering.
class CudaCapture : public ::testing::TestWithParam<CudaDeviceConfig::DoubleBuffer> {};

TEST_P(CudaCapture, CopiesAreOrderedBetweenTheKernelsOfTheStream) {
  SKIP_WITHOUT_GPU();
  constexpr std::size_t n = 3 << 20;  // 24 MiB of doubles
  constexpr std::size_t chunk = 4 << 20;
  constexpr std::size_t bytes = n * sizeof(double);
  CudaDeviceConfig cfg;
  cfg.double_buffer = GetParam();
  cfg.spare_bytes = bytes;
  auto dev = detail::make_cuda_device(cfg);
  ASSERT_TRUE(dev.ok()) << dev.status().to_string();
  Device& d = *dev.value();
  auto st = d.alloc_staging(bytes);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  auto* staged = static_cast<std::uint8_t*>(st.value().ptr);
  ASSERT_TRUE(d.bind_thread().ok());  // the test thread plays the flush thread too

  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double* a = nullptr;
  CUDA_OK(cudaMalloc(&a, bytes));
  // Two rounds: in automatic mode the first goes straight D2H and grows the spare, the second uses it.
  for (int round = 0; round < 2; ++round) {
    const double v = 1000.0 * (round + 1);
    fill(s, a, n, v, kSlow);  // still running when the capture is enqueued
    ASSERT_TRUE(d.capture_begin(s).ok());
    std::vector<detail::Fence> fences;
    for (std::size_t off = 0; off < bytes; off += chunk) {
      const std::size_t len = std::min(chunk, bytes - off);
      ASSERT_TRUE(d.copy_to_host(staged + off, reinterpret_cast<std::uint8_t*>(a) + off, len, MemoryKind::device).ok());
      auto f = d.fence();
      ASSERT_TRUE(f.ok()) << f.status().to_string();
      fences.push_back(f.value());
    }
    ASSERT_TRUE(d.capture_end(s).ok());
    fill(s, a, n, -1.0);  // overwrites: must run after the copies, with no host synchronisation
    std::thread flusher([&] {
      for (auto f : fences) EXPECT_TRUE(d.wait(f).ok());
    });
    flusher.join();
    const double* got = reinterpret_cast<const double*>(staged);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) bad += got[i] != v + i;
    EXPECT_EQ(bad, 0u) << "round " << round << ": first value " << got[0];
    CUDA_OK(cudaStreamSynchronize(s));
    double last = 0;
    CUDA_OK(cudaMemcpy(&last, a + n - 1, sizeof last, cudaMemcpyDeviceToHost));
    EXPECT_EQ(last, -1.0 + (n - 1));
  }
  // Restart direction: pinned -> device, complete at restore_end().
  ASSERT_TRUE(d.restore_begin(s).ok());
  ASSERT_TRUE(d.copy_to_device(a, staged, bytes, MemoryKind::device).ok());
  ASSERT_TRUE(d.restore_end(s).ok());
  std::vector<double> back(n);
  CUDA_OK(cudaMemcpy(back.data(), a, bytes, cudaMemcpyDeviceToHost));
  EXPECT_EQ(0, std::memcmp(back.data(), staged, bytes));
  CUDA_OK(cudaFree(a));
  CUDA_OK(cudaStreamDestroy(s));
  d.free_staging(st.value());
}

INSTANTIATE_TEST_SUITE_P(DoubleBuffer, CudaCapture,
                         ::testing::Values(CudaDeviceConfig::DoubleBuffer::off, CudaDeviceConfig::DoubleBuffer::on,
                                           CudaDeviceConfig::DoubleBuffer::automatic));

TEST(CudaDevice, RuntimeRoundTripOfDeviceManagedAndHostRegions) {
  SKIP_WITHOUT_GPU();
  const std::string dir = ckpt::test::scratch_dir();
  constexpr std::size_t n = 5'000'000;  // 40 MB: dozens of chunks
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double *dev = nullptr, *man = nullptr;
  CUDA_OK(cudaMalloc(&dev, n * sizeof(double)));
  CUDA_OK(cudaMallocManaged(&man, 1000 * sizeof(double)));
  std::vector<double> host(777);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = 0.5 * i;
  std::int64_t step = 42;
  fill(s, dev, n, 7.0, kSlow);
  fill(s, man, 1000, 3.0);
  {
    Runtime rt(MPI_COMM_WORLD, options_for(dir));
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(rt.protect("dev", dev, DType::f64, {n}).ok());
    ASSERT_TRUE(rt.protect("managed", man, DType::f64, {1000}).ok());
    ASSERT_TRUE(rt.protect("host", host.data(), DType::f64, {host.size()}).ok());
    ASSERT_TRUE(rt.protect_scalar("step", &step).ok());
    Ticket tk = rt.checkpoint(1, s);
    // Overwrite everything at once: the host data on the host, the device data on the stream.
    fill(s, dev, n, -5.0);
    fill(s, man, 1000, -5.0);
    for (auto& x : host) x = -5.0;
    step = -5;
    Status st = tk.wait();
    ASSERT_TRUE(st.ok()) << st.to_string();
    CUDA_OK(cudaStreamSynchronize(s));
    EXPECT_EQ(man[999], -5.0 + 999);  // the overwrite did happen
    st = rt.restart(1);
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  std::vector<double> got(n);
  CUDA_OK(cudaMemcpy(got.data(), dev, n * sizeof(double), cudaMemcpyDeviceToHost));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) bad += got[i] != 7.0 + i;
  EXPECT_EQ(bad, 0u);
  for (std::size_t i = 0; i < 1000; ++i) ASSERT_EQ(man[i], 3.0 + i) << i;
  for (std::size_t i = 0; i < host.size(); ++i) ASSERT_EQ(host[i], 0.5 * i) << i;
  EXPECT_EQ(step, 42);
  CUDA_OK(cudaFree(dev));
  CUDA_OK(cudaFree(man));
  CUDA_OK(cudaStreamDestroy(s));
}

TEST(CudaDevice, DefaultStreamCheckpoint) {
  SKIP_WITHOUT_GPU();
  const std::string dir = ckpt::test::scratch_dir();
  constexpr std::size_t n = 1 << 20;
  double* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, n * sizeof(double)));
  fill(nullptr, dev, n, 11.0, kSlow);
  {
    Runtime rt(MPI_COMM_WORLD, options_for(dir));
    ASSERT_TRUE(rt.protect("dev", dev, DType::f64, {n}).ok());
    Ticket tk = rt.checkpoint(1);  // no stream: the legacy default stream
    fill(nullptr, dev, n, 0.0);
    ASSERT_TRUE(tk.wait().ok());
    ASSERT_TRUE(rt.restart(1).ok());
  }
  std::vector<double> got(n);
  CUDA_OK(cudaMemcpy(got.data(), dev, n * sizeof(double), cudaMemcpyDeviceToHost));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) bad += got[i] != 11.0 + i;
  EXPECT_EQ(bad, 0u);
  CUDA_OK(cudaFree(dev));
}

// ---- canary round trips through the Runtime (needs a GPU) -----------------------------------------

namespace {

enum class StreamKind { legacy, per_thread, blocking };

struct Canary {
  StreamKind stream = StreamKind::blocking;
  const char* double_buffer = "off";
  double spare_fraction = 0;  ///< gpu_spare_bytes as a fraction of the region (on: 1 = all, 0.5 = half)
  int max_in_flight = 1;
};

std::string canary_name(const ::testing::TestParamInfo<Canary>& info) {
  const Canary& c = info.param;
  const char* st = c.stream == StreamKind::legacy       ? "legacy"
                   : c.stream == StreamKind::per_thread ? "perthread"
                                                        : "blocking";
  std::string db = c.double_buffer;
  if (db == "on" && c.spare_fraction < 1) db = "half";
  return std::string(st) + "_" + db + "_inflight" + std::to_string(c.max_in_flight);
}

/// The stream of a case (nullptr, cudaStreamPerThread, or a new blocking stream) and its release.
struct TestStream {
  cudaStream_t s = nullptr;
  bool owned = false;
  explicit TestStream(StreamKind k) {
    if (k == StreamKind::per_thread) s = cudaStreamPerThread;
    if (k == StreamKind::blocking) {
      EXPECT_EQ(cudaStreamCreate(&s), cudaSuccess);  // blocking: synchronises with the legacy stream
      owned = true;
    }
  }
  ~TestStream() {
    if (owned) (void)cudaStreamDestroy(s);
  }
};

std::size_t count_bad(const double* dev, std::size_t n, double base) {
  std::vector<double> got(n);
  EXPECT_EQ(cudaMemcpy(got.data(), dev, n * sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) bad += got[i] != base + static_cast<double>(i);
  return bad;
}

}  // namespace

class CudaCanary : public ::testing::TestWithParam<Canary> {};

TEST_P(CudaCanary, CheckpointsHoldWhatTheSlowKernelWroteNotWhatTheNextKernelWrites) {
  SKIP_WITHOUT_GPU();
  const Canary c = GetParam();
  constexpr std::size_t n = 8 << 20;  // 64 MiB of doubles: 4 chunks of 16 MiB
  constexpr std::size_t bytes = n * sizeof(double);
  TestStream ts(c.stream);
  double* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, bytes));
  Options o = options_for(ckpt::test::scratch_dir());
  o.chunk_bytes = 16 << 20;
  o.gpu_double_buffer = *ckpt::parse_double_buffer(c.double_buffer);
  const auto spare = static_cast<std::uint64_t>(c.spare_fraction * bytes);
  o.gpu_spare_bytes = spare > 0 ? ckpt::AutoBytes(spare) : ckpt::AutoBytes();  // 0: auto's own cap
  o.max_in_flight = c.max_in_flight;
  constexpr int kSteps = 4;
  {
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(rt.protect("dev", dev, DType::f64, {n}).ok());
    std::vector<Ticket> tickets;
    for (int step = 1; step <= kSteps; ++step) {
      fill(ts.s, dev, n, 1000.0 * step, kSlow);  // slow producer: still running at checkpoint()
      tickets.push_back(rt.checkpoint(step, ts.s));
      // Not vacuous: the producer (and the copies ordered after it) are still pending on the stream.
      EXPECT_EQ(cudaStreamQuery(ts.s), cudaErrorNotReady) << "step " << step;
      fill(ts.s, dev, n, -1.0);  // canary: overwrites right away, must run after the copies
    }
    for (auto& t : tickets) ASSERT_TRUE(t.wait().ok()) << t.wait().to_string();
    for (int step = 1; step <= kSteps; ++step) {
      CUDA_OK(cudaMemsetAsync(dev, 0xff, bytes, ts.s));  // poison: restart must write every byte
      Status st = rt.restart(step, ts.s);
      ASSERT_TRUE(st.ok()) << st.to_string();
      CUDA_OK(cudaStreamSynchronize(ts.s));
      EXPECT_EQ(count_bad(dev, n, 1000.0 * step), 0u) << "step " << step;
    }
  }
  CUDA_OK(cudaFree(dev));
}

INSTANTIATE_TEST_SUITE_P(
    Streams, CudaCanary,
    ::testing::Values(Canary{StreamKind::legacy, "off", 0, 1}, Canary{StreamKind::per_thread, "off", 0, 1},
                      Canary{StreamKind::blocking, "off", 0, 1}, Canary{StreamKind::legacy, "on", 1, 1},
                      Canary{StreamKind::per_thread, "on", 1, 1}, Canary{StreamKind::blocking, "on", 1, 1},
                      Canary{StreamKind::legacy, "on", 0.5, 1}, Canary{StreamKind::per_thread, "on", 0.5, 1},
                      Canary{StreamKind::blocking, "on", 0.5, 1}, Canary{StreamKind::legacy, "auto", 0, 1},
                      Canary{StreamKind::per_thread, "auto", 0, 1}, Canary{StreamKind::blocking, "auto", 0, 1},
                      Canary{StreamKind::blocking, "off", 0, 2}, Canary{StreamKind::blocking, "off", 0, 4},
                      Canary{StreamKind::blocking, "on", 0.5, 2}, Canary{StreamKind::blocking, "auto", 0, 4}),
    canary_name);

TEST(CudaRuntime, OneGiBThroughAFourChunkPool) {
  SKIP_WITHOUT_GPU();
  constexpr std::size_t n = std::size_t{1} << 27;  // 1 GiB of doubles
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, n * sizeof(double)));
  Options o = options_for(ckpt::test::scratch_dir());
  o.chunk_bytes = 16 << 20;
  o.pool_bytes = 4 * *o.chunk_bytes;  // the capture streams: checkpoint() waits for chunks to be written
  {
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.protect("dev", dev, DType::f64, {n}).ok());
    fill(s, dev, n, 5.0, kSlow);
    Ticket t = rt.checkpoint(1, s);
    fill(s, dev, n, -1.0);
    ASSERT_TRUE(t.wait().ok()) << t.wait().to_string();
    EXPECT_EQ(t.stats().staging_bytes, 4u * *o.chunk_bytes);
    CUDA_OK(cudaMemsetAsync(dev, 0xff, n * sizeof(double), s));
    ASSERT_TRUE(rt.restart(1, s).ok());
    CUDA_OK(cudaStreamSynchronize(s));
  }
  EXPECT_EQ(count_bad(dev, n, 5.0), 0u);
  CUDA_OK(cudaFree(dev));
  CUDA_OK(cudaStreamDestroy(s));
}

TEST(CudaRuntime, ManagedPinnedAndStreamOrderedAllocations) {
  SKIP_WITHOUT_GPU();
  constexpr std::size_t n = 1 << 20;
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double *managed = nullptr, *pinned = nullptr, *pooled = nullptr;
  CUDA_OK(cudaMallocManaged(&managed, n * sizeof(double)));
  CUDA_OK(cudaMallocHost(&pinned, n * sizeof(double)));
  CUDA_OK(cudaMallocAsync(&pooled, n * sizeof(double), s));
  {
    Runtime rt(MPI_COMM_WORLD, options_for(ckpt::test::scratch_dir()));
    ASSERT_TRUE(rt.protect("managed", managed, DType::f64, {n}).ok());
    ASSERT_TRUE(rt.protect("pinned", pinned, DType::f64, {n}).ok());
    ASSERT_TRUE(rt.protect("pooled", pooled, DType::f64, {n}).ok());
    fill(s, managed, n, 1.0);
    fill(s, pinned, n, 2.0);
    fill(s, pooled, n, 3.0, kSlow);
    CUDA_OK(cudaStreamSynchronize(s));  // pinned host memory written by a kernel: the host syncs first
    fill(s, pooled, n, 3.0, kSlow);
    Ticket t = rt.checkpoint(1, s);
    EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
    fill(s, pooled, n, -1.0);
    fill(s, managed, n, -1.0);
    ASSERT_TRUE(t.wait().ok()) << t.wait().to_string();
    CUDA_OK(cudaStreamSynchronize(s));
    for (std::size_t i = 0; i < n; ++i) pinned[i] = -1.0;
    ASSERT_TRUE(rt.restart(1, s).ok());
    CUDA_OK(cudaStreamSynchronize(s));
  }
  EXPECT_EQ(count_bad(pooled, n, 3.0), 0u);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) bad += (managed[i] != 1.0 + i) + (pinned[i] != 2.0 + i);
  EXPECT_EQ(bad, 0u);
  CUDA_OK(cudaFreeAsync(pooled, s));
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaFree(managed));
  CUDA_OK(cudaFreeHost(pinned));
  CUDA_OK(cudaStreamDestroy(s));
}

TEST(CudaRuntime, PageableStagingIsCorrectAndReported) {
  SKIP_WITHOUT_GPU();
  detail::set_device_factory([](const CudaDeviceConfig& cfg) {
    CudaDeviceConfig c = cfg;
    c.pin_staging = false;  // as when pinning fails: pageable chunks, synchronous copies
    return detail::make_cuda_device(c);
  });
  constexpr std::size_t n = 4 << 20;
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, n * sizeof(double)));
  {
    Runtime rt(MPI_COMM_WORLD, options_for(ckpt::test::scratch_dir()));
    detail::set_device_factory(nullptr);
    ASSERT_TRUE(rt.protect("dev", dev, DType::f64, {n}).ok());
    fill(s, dev, n, 9.0, kSlow);
    Ticket t = rt.checkpoint(1, s);
    fill(s, dev, n, -1.0);
    ASSERT_TRUE(t.wait().ok()) << t.wait().to_string();
    EXPECT_GT(t.stats().staging_bytes, 0u);
    EXPECT_EQ(t.stats().staging_pinned_bytes, 0u) << "pageable staging must be visible in the stats";
    ASSERT_TRUE(rt.restart(1, s).ok());
  }
  EXPECT_EQ(count_bad(dev, n, 9.0), 0u);
  CUDA_OK(cudaFree(dev));
  CUDA_OK(cudaStreamDestroy(s));
}

TEST(CudaRuntime, AGraphCapturedStreamIsRejectedThenAFailedWriteThenExactRestarts) {
  SKIP_WITHOUT_GPU();
  constexpr std::size_t n = 2 << 20;
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, n * sizeof(double)));
  const std::string dir = ckpt::test::scratch_dir();
  {
    Runtime rt(MPI_COMM_WORLD, options_for(dir));
    ASSERT_TRUE(rt.protect("dev", dev, DType::f64, {n}).ok());
    fill(s, dev, n, 1.0, kSlow);
    ASSERT_TRUE(rt.checkpoint(1, s).wait().ok());
    // Graph capture: ckpt's copies would become graph nodes that never run.
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    Status st = rt.checkpoint(2, s).wait();
    EXPECT_NE(st.message().find("captured into a CUDA graph"), std::string::npos) << st.to_string();
    Status rs = rt.restart(1, s);
    EXPECT_EQ(rs.code(), Code::failed_precondition) << rs.to_string();
    cudaGraph_t g = nullptr;
    CUDA_OK(cudaStreamEndCapture(s, &g));
    if (g != nullptr) CUDA_OK(cudaGraphDestroy(g));
    // A write failure (the step's directory is taken by a file), then a good checkpoint.
    {
      std::FILE* f = std::fopen((dir + "/ckpt.3.tmp").c_str(), "w");
      if (f) std::fclose(f);
    }
    fill(s, dev, n, 3.0, kSlow);
    EXPECT_FALSE(rt.checkpoint(3, s).wait().ok());
    fill(s, dev, n, 4.0, kSlow);
    Ticket t4 = rt.checkpoint(4, s);
    EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
    fill(s, dev, n, -1.0);
    ASSERT_TRUE(t4.wait().ok()) << t4.wait().to_string();
    ASSERT_TRUE(rt.restart(4, s).ok());
    CUDA_OK(cudaStreamSynchronize(s));
    EXPECT_EQ(count_bad(dev, n, 4.0), 0u);
    ASSERT_TRUE(rt.restart(1, s).ok());
    CUDA_OK(cudaStreamSynchronize(s));
    EXPECT_EQ(count_bad(dev, n, 1.0), 0u);
  }
  CUDA_OK(cudaFree(dev));
  CUDA_OK(cudaStreamDestroy(s));
}
