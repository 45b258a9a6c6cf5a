// The CUDA device (gpu/cuda_device.cu) and the CUDA-check helper (gpu/cuda_check.hpp).
// Runs anywhere: the helper's Status/sticky classification and "no GPU -> unavailable -> host device".
// Needs a GPU (GTEST_SKIP() with the reason otherwise): memory-kind detection, stream ordering of a
// capture (copies after earlier kernels, later kernels after the copies, without host sync), fences
// waited on from another thread, device-side double buffering, and a Runtime round trip of device,
// managed and host regions: checkpoint(step, stream) -> overwrite on the stream -> restart -> compare.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ckpt/ckpt.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device.hpp"
#include "test_util.hpp"

using namespace ckpt;
using detail::CudaDeviceConfig;
using detail::Device;

namespace {

/// Empty when a GPU is usable, otherwise why not (for GTEST_SKIP).
std::string no_gpu_reason() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no usable CUDA device: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  }
  if (n == 0) return "no CUDA device is present";
  return "";
}

#define SKIP_WITHOUT_GPU()                    \
  do {                                        \
    const std::string why_ = no_gpu_reason(); \
    if (!why_.empty()) GTEST_SKIP() << why_;  \
  } while (0)

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
}

TEST(CudaCheck, StickyErrorsAreClassified) {
  for (cudaError_t e :
       {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorHardwareStackError, cudaErrorIllegalInstruction,
        cudaErrorMisalignedAddress, cudaErrorECCUncorrectable, cudaErrorAssert})
    EXPECT_TRUE(detail::cuda_error_is_sticky(e)) << cudaGetErrorName(e);
  for (cudaError_t e : {cudaErrorMemoryAllocation, cudaErrorInvalidValue, cudaErrorNoDevice, cudaErrorNotReady})
    EXPECT_FALSE(detail::cuda_error_is_sticky(e)) << cudaGetErrorName(e);
}

TEST(CudaDevice, WithoutGpuTheRuntimeFallsBackToTheHostDevice) {
  auto d = detail::make_cuda_device();
  auto fallback = detail::make_default_device();
  if (no_gpu_reason().empty()) {
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    EXPECT_STREQ(d.value()->name(), "cuda");
    EXPECT_STREQ(fallback->name(), "cuda");
  } else {
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), Code::unavailable) << d.status().to_string();
    EXPECT_NE(d.status().message().find("CUDA device"), std::string::npos) << d.status().to_string();
    EXPECT_STREQ(fallback->name(), "host");
  }
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
  EXPECT_EQ(d.classify(dptr), MemoryKind::device);
  EXPECT_EQ(d.classify(static_cast<char*>(dptr) + 100), MemoryKind::device);
  EXPECT_EQ(d.classify(pinned), MemoryKind::host_pinned);
  EXPECT_EQ(d.classify(managed), MemoryKind::managed);
  EXPECT_EQ(d.classify(pageable.data()), MemoryKind::host);
  auto st = d.alloc_staging(1 << 20);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_TRUE(st.value().locked);
  EXPECT_EQ(d.classify(st.value().ptr), MemoryKind::host_pinned);
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
  cfg.headroom_bytes = 0;
  auto dev = detail::make_cuda_device(cfg);
  ASSERT_TRUE(dev.ok()) << dev.status().to_string();
  Device& d = *dev.value();
  auto st = d.alloc_staging(bytes);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  auto* staged = static_cast<std::uint8_t*>(st.value().ptr);

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
  // Restart direction: pinned -> device, complete at synchronize().
  ASSERT_TRUE(d.copy_to_device(a, staged, bytes, MemoryKind::device).ok());
  ASSERT_TRUE(d.synchronize().ok());
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
