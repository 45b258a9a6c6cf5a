// The GPU device (gpu/cuda_device.cu) and the GPU-check helper (gpu/cuda_check.hpp), for the vendor ckpt
// was built with: CUDA, HIP (the same source through gpu/gpu_runtime.hpp and gpu_test_util.hpp) or the
// simulated device (gpu/sim/: a CPU runtime, kernels as host functions; docs/gpu.md), where the tests
// marked CKPT_HAVE_SIMGPU also use its controls (slowed-down copies, injected errors, two devices,
// contexts counted per thread).
// Runs anywhere: the helper's Status/sticky classification, the application's pending error left
// alone (with a GPU only: without a driver the initialisation error sticks), and "no GPU -> unavailable
// -> host device".
// Needs a GPU (GTEST_SKIP() with the reason otherwise): memory-kind detection, stream ordering of a
// capture (copies after earlier kernels, later kernels after the copies, without host sync), fences
// waited on from another thread, device-side double buffering, and Runtime round trips with canary
// kernels (a slow kernel before checkpoint(), an overwriting kernel right after it, restart targets
// poisoned first) over the default, per-thread and a blocking stream, double buffering
// off/on/half/auto, max_in_flight 1/2/4, captures back to back without a slow kernel between them, a
// checkpoint 16 times the staging pool, managed, pinned and cudaMallocAsync memory, pageable staging, a
// graph-captured stream (rejected), an injected write failure followed by an exact restart,
// restart(step, stream), and a chain of incremental checkpoints of device memory. Every canary round trip asserts cudaStreamQuery(stream) == cudaErrorNotReady
// right after checkpoint(): the slow kernel is still running, so a test cannot pass because the GPU
// happened to be idle.
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
using detail::DeviceConfig;
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
  CKPT_LAUNCH(slow_fill, 64, 256, s)(a, n, value, cycles);
}

constexpr long long kSlow = 200'000'000;  // ~0.1 s on a current GPU, 40 ms on the simulated device

/// The simulated device copies with memcpy on a few cores: its round trips move 4x fewer bytes, in as
/// many chunks.
#if CKPT_HAVE_SIMGPU
constexpr std::size_t kScale = 4;
#else
constexpr std::size_t kScale = 1;
#endif

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
  auto d = detail::make_gpu_device();
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
  DeviceConfig cfg;
  cfg.double_buffer = DeviceConfig::DoubleBuffer::on;
  auto d = detail::make_gpu_device(cfg);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::invalid_argument) << d.status().to_string();
}

// ---- needs a GPU -----------------------------------------------------------------------------------

TEST(CudaDevice, ClassifiesMemoryKinds) {
  SKIP_WITHOUT_GPU();
  auto dev = detail::make_gpu_device();
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

// Issue 13's defect 2, on two devices (the simulated device has two): device memory, the current device
// and the stream of another device than the Runtime's are refused, with what to do.
TEST(CudaDevice, TheCurrentDeviceAStreamOrMemoryOfAnotherDeviceIsRefused) {
  SKIP_WITHOUT_GPU();
  int count = 0;
  CUDA_OK(cudaGetDeviceCount(&count));
  if (count < 2) GTEST_SKIP() << "one GPU: no other device to tell apart";
  CUDA_OK(cudaSetDevice(1));
  cudaStream_t other = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  double* far = nullptr;
  CUDA_OK(cudaMalloc(&far, 4096));
  CUDA_OK(cudaSetDevice(0));
  cudaStream_t mine = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking));
  constexpr std::size_t n = 1 << 17;
  double* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, n * sizeof(double)));
  fill(mine, dev, n, 2.0);
  {
    Runtime rt(MPI_COMM_WORLD, options_for(ckpt::test::scratch_dir()));
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    Status p = rt.protect("far", far, DType::f64, {512});
    EXPECT_EQ(p.code(), Code::failed_precondition) << p.to_string();
    EXPECT_NE(p.message().find("device 1"), std::string::npos) << p.to_string();
    ASSERT_TRUE(rt.protect("dev", dev, DType::f64, {n}).ok());
    ASSERT_TRUE(rt.checkpoint(1, mine).wait().ok());
    Status c = rt.checkpoint(2, other).wait();
    Status r = rt.restart(1, other);
    if (detail::kGpuAsksStreamDevice) {
      EXPECT_EQ(c.code(), Code::failed_precondition) << c.to_string();
      EXPECT_NE(c.message().find("the stream belongs to CUDA device 1"), std::string::npos) << c.to_string();
      EXPECT_EQ(r.code(), Code::failed_precondition) << r.to_string();
    } else {  // cannot be told apart (gpu_runtime.hpp); the copies are still ordered by the events
      EXPECT_TRUE(c.ok()) << c.to_string();
      EXPECT_TRUE(r.ok()) << r.to_string();
    }
    CUDA_OK(cudaSetDevice(1));  // the application moved to another device after making the Runtime
    Status d = rt.checkpoint(3).wait();
    CUDA_OK(cudaSetDevice(0));
    EXPECT_EQ(d.code(), Code::failed_precondition) << d.to_string();
    EXPECT_NE(d.message().find("current CUDA device is 1"), std::string::npos) << d.to_string();
    ASSERT_TRUE(rt.restart(1, mine).ok());
  }
  CUDA_OK(cudaStreamSynchronize(mine));
  std::vector<double> got(n);
  CUDA_OK(cudaMemcpy(got.data(), dev, n * sizeof(double), cudaMemcpyDeviceToHost));
  EXPECT_EQ(got[n - 1], 2.0 + (n - 1));
  CUDA_OK(cudaFree(dev));
  CUDA_OK(cudaFree(far));
  CUDA_OK(cudaStreamDestroy(mine));
  CUDA_OK(cudaStreamDestroy(other));
}

#if CKPT_HAVE_SIMGPU
// Issue 32, defect 2: a runtime of CUDA 12.8 or newer on an older driver answers cudaStreamGetDevice
// with cudaErrorCallRequiresNewerDriver; that made every checkpoint with an explicit stream an io_error.
// The device then does not check the stream's device, and the error does not reach the application.
TEST(CudaDevice, ADriverThatCannotTellTheStreamsDeviceIsNoFailure) {
  ckpt::test::SimReset reset;
  constexpr std::size_t n = 1 << 16;
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, n * sizeof(double)));
  fill(s, dev, n, 5.0, kSlow);
  {
    Runtime rt(MPI_COMM_WORLD, options_for(ckpt::test::scratch_dir()));
    ASSERT_TRUE(rt.protect("dev", dev, DType::f64, {n}).ok());
    const long asked = ckpt::simgpu::calls("cudaStreamGetDevice");
    ckpt::simgpu::inject_error("cudaStreamGetDevice", 0, cudaErrorCallRequiresNewerDriver);
    ckpt::simgpu::inject_error("cudaStreamGetDevice", 0, cudaErrorCallRequiresNewerDriver);
    Ticket t = rt.checkpoint(1, s);
    fill(s, dev, n, -1.0);
    Status st = t.wait();
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "ckpt's refused query leaked into the application's last error";
    st = rt.restart(1, s);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(ckpt::simgpu::calls("cudaStreamGetDevice") - asked, detail::kGpuAsksStreamDevice ? 2 : 0);
  }
  CUDA_OK(cudaStreamSynchronize(s));
  std::vector<double> got(n);
  CUDA_OK(cudaMemcpy(got.data(), dev, n * sizeof(double), cudaMemcpyDeviceToHost));
  EXPECT_EQ(got[n - 1], 5.0 + (n - 1));
  CUDA_OK(cudaFree(dev));
  CUDA_OK(cudaStreamDestroy(s));
}
#endif

#if CKPT_HAVE_SIMGPU
// Issue 32, defect 5: a thread of the application that never chose a device (cudaGetDevice answers 0
// there) grows the staging pool and destroys a Runtime made on device 1. The device switches that
// thread to device 1 for those calls and must not "switch it back" to device 0, which would create a
// context on GPU 0 (the simulated device counts the threads that had a context on each device).
TEST(CudaDevice, AThreadWithoutADeviceGetsNoContextOnDevice0) {
  CUDA_OK(cudaSetDevice(1));
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  constexpr std::size_t n = 1 << 16;
  double *a = nullptr, *b = nullptr;
  CUDA_OK(cudaMalloc(&a, n * sizeof(double)));
  CUDA_OK(cudaMalloc(&b, 8 * n * sizeof(double)));
  fill(s, a, n, 1.0);
  Options o = options_for(ckpt::test::scratch_dir());
  o.chunk_bytes = std::nullopt;  // the auto pool: it grows when a larger region is protected
  auto rt = std::make_unique<Runtime>(MPI_COMM_WORLD, o);
  ASSERT_TRUE(rt->status().ok()) << rt->status().to_string();
  ASSERT_TRUE(rt->protect("a", a, DType::f64, {n}).ok());
  ASSERT_TRUE(rt->checkpoint(1, s).wait().ok());
  const int before = ckpt::simgpu::device_attachments(0);
  std::thread other([&] {
    ASSERT_FALSE(ckpt::simgpu::thread_has_device());
    const long allocs = ckpt::simgpu::calls("cudaHostAlloc");
    EXPECT_TRUE(rt->protect("b", b, DType::f64, {8 * n}).ok());  // staging allocated here
    EXPECT_GT(ckpt::simgpu::calls("cudaHostAlloc"), allocs);
    EXPECT_TRUE(rt->close().ok());
    rt.reset();  // staging freed, streams and events destroyed, here
  });
  other.join();
  EXPECT_EQ(ckpt::simgpu::device_attachments(0), before) << "a thread got a context on device 0";
  CUDA_OK(cudaFree(a));
  CUDA_OK(cudaFree(b));
  CUDA_OK(cudaStreamDestroy(s));
  CUDA_OK(cudaSetDevice(0));
}

// Issue 32, defect 5: a flush thread whose binding to the device failed does not wait on fences (its
// call would create a context on GPU 0); the checkpoint fails naming the binding and its chunks are
// retired, not reused with copies in flight - nor freed under them at teardown (the simulated device
// aborts when memory is freed under a queued copy; the D2H is slowed down so that it is still queued).
// With double buffering half on, some of the copies into the chunks are on the D2D stream.
class UnboundFlushThread : public ::testing::TestWithParam<const char*> {};

TEST_P(UnboundFlushThread, NeverWaitsAndItsChunksAreRetired) {
  ckpt::test::SimReset reset;
  ckpt::simgpu::set_delay_us(ckpt::simgpu::Op::d2h, 50'000);
  CUDA_OK(cudaSetDevice(1));
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  constexpr std::size_t n = 1 << 18;
  double* a = nullptr;
  CUDA_OK(cudaMalloc(&a, n * sizeof(double)));
  const int before = ckpt::simgpu::device_attachments(0);
  {
    // The next cudaSetDevice is the flush thread's bind_thread() (the application thread is on device 1).
    ckpt::simgpu::inject_error("cudaSetDevice", 0, cudaErrorDevicesUnavailable);
    Options o = options_for(ckpt::test::scratch_dir());
    o.chunk_bytes = 256 << 10;
    o.gpu_double_buffer = *ckpt::parse_double_buffer(GetParam());
    o.gpu_spare_bytes = n * sizeof(double) / 2;
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(rt.protect("a", a, DType::f64, {n}).ok());
    for (int step = 1; step <= 2; ++step) {
      fill(s, a, n, step, kSlow);
      Status st = rt.checkpoint(step, s).wait();
      EXPECT_NE(st.message().find("binding the flush thread"), std::string::npos) << st.to_string();
    }
  }
  EXPECT_EQ(ckpt::simgpu::device_attachments(0), before) << "the unbound flush thread made a device call";
  CUDA_OK(cudaFree(a));
  CUDA_OK(cudaStreamDestroy(s));
  CUDA_OK(cudaSetDevice(0));
}
INSTANTIATE_TEST_SUITE_P(DoubleBuffer, UnboundFlushThread, ::testing::Values("off", "on"));
#endif

/// capture_begin / copy_to_host / fence / capture_end on a stream with a slow kernel before the capture
/// and an overwriting kernel after it; the fences are waited on from another thread (the flush thread's
/// role). Run with and without device-side double buffering.
class CudaCapture : public ::testing::TestWithParam<DeviceConfig::DoubleBuffer> {};

TEST_P(CudaCapture, CopiesAreOrderedBetweenTheKernelsOfTheStream) {
  SKIP_WITHOUT_GPU();
  constexpr std::size_t n = 3 << 20;  // 24 MiB of doubles
  constexpr std::size_t chunk = 4 << 20;
  constexpr std::size_t bytes = n * sizeof(double);
  DeviceConfig cfg;
  cfg.double_buffer = GetParam();
  cfg.spare_bytes = bytes;
  auto dev = detail::make_gpu_device(cfg);
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
                         ::testing::Values(DeviceConfig::DoubleBuffer::off, DeviceConfig::DoubleBuffer::on,
                                           DeviceConfig::DoubleBuffer::automatic));

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

// Issue 35: a memory selection in device memory - the interior of a ghosted 3D block - is captured
// with 2D copies (one per plane and chunk piece, not one per row) ordered after the slow kernel that
// wrote it, stored as the packed box, and restarted into the box only: the ghosts keep what the
// application put there. Double buffering off, on (the whole box in the spare), on with a spare of a
// third of it (the rest straight D2H) and auto.
struct SelectionCase {
  const char* double_buffer;
  double spare_fraction;  ///< of the box's bytes; 0: the mode's own
};

class DeviceSelection : public ::testing::TestWithParam<SelectionCase> {};

TEST_P(DeviceSelection, GhostedBlockRoundTripsThroughPlanes) {
  SKIP_WITHOUT_GPU();
  const std::string dir = ckpt::test::scratch_dir();
  const std::uint64_t a0 = 64, a1 = 64, a2 = 72;  // allocation
  const std::uint64_t s0 = 2, s1 = 2, s2 = 4;     // box start
  const std::uint64_t c0 = 60, c1 = 60, c2 = 64;  // box: 1.8 MB, two 1 MiB chunks
  const std::size_t n = a0 * a1 * a2, box = c0 * c1 * c2;
  auto at = [&](std::uint64_t i, std::uint64_t j, std::uint64_t k) { return ((s0 + i) * a1 + s1 + j) * a2 + s2 + k; };
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, n * sizeof(double)));
  Options o = options_for(dir);
  o.gpu_double_buffer = *ckpt::parse_double_buffer(GetParam().double_buffer);
  if (GetParam().spare_fraction > 0)
    o.gpu_spare_bytes = ckpt::AutoBytes(static_cast<std::uint64_t>(GetParam().spare_fraction * box * sizeof(double)));
  {
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(rt.protect("u", dev, DType::f64, {c0, c1, c2}).ok());
    ASSERT_TRUE(rt.set_memory_selection("u", MemorySelection{{s0, s1, s2}, {a0, a1, a2}}).ok());
    fill(s, dev, n, 7.0, kSlow);  // u[i] = 7 + i over the whole allocation, slowly
#if CKPT_HAVE_SIMGPU
    const long planes_before = ckpt::simgpu::calls("cudaMemcpy2DAsync");
#endif
    Ticket tk = rt.checkpoint(1, s);
    EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady) << "the slow kernel ended before checkpoint() returned";
#if CKPT_HAVE_SIMGPU
    const long planes = ckpt::simgpu::calls("cudaMemcpy2DAsync") - planes_before;
    EXPECT_GE(planes, static_cast<long>(c0));       // a plane is one copy (two where a chunk ends in it)
    EXPECT_LE(planes, static_cast<long>(c0) + 2);   // never one per row
#endif
    fill(s, dev, n, -5.0);  // the application goes on writing: the checkpoint keeps what was there
    Status st = tk.wait();
    ASSERT_TRUE(st.ok()) << st.to_string();
    // Stored as the packed box.
    auto reader = Reader::open(dir);
    ASSERT_TRUE(reader.ok()) << reader.status().to_string();
    auto step = reader->open_step(1);
    ASSERT_TRUE(step.ok()) << step.status().to_string();
    std::vector<double> stored(box);
    st = step.value().read_rank("u", 0, stored.data(), box * sizeof(double));
    ASSERT_TRUE(st.ok()) << st.to_string();
    std::size_t bad = 0;
    for (std::uint64_t i = 0; i < c0; ++i)
      for (std::uint64_t j = 0; j < c1; ++j)
        for (std::uint64_t k = 0; k < c2; ++k) bad += stored[(i * c1 + j) * c2 + k] != 7.0 + at(i, j, k);
    EXPECT_EQ(bad, 0u) << "stored elements that are not the box's";
    // Restart into an allocation holding -1000 + i: the box becomes 7 + i, the ghosts stay.
    fill(s, dev, n, -1000.0);
    st = rt.restart(1, s);
    ASSERT_TRUE(st.ok()) << st.to_string();
    CUDA_OK(cudaStreamSynchronize(s));
  }
  std::vector<double> got(n);
  CUDA_OK(cudaMemcpy(got.data(), dev, n * sizeof(double), cudaMemcpyDeviceToHost));
  std::vector<char> in_box(n, 0);
  for (std::uint64_t i = 0; i < c0; ++i)
    for (std::uint64_t j = 0; j < c1; ++j)
      for (std::uint64_t k = 0; k < c2; ++k) in_box[at(i, j, k)] = 1;
  std::size_t bad_box = 0, bad_ghost = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (in_box[i])
      bad_box += got[i] != 7.0 + static_cast<double>(i);
    else
      bad_ghost += got[i] != -1000.0 + static_cast<double>(i);
  }
  EXPECT_EQ(bad_box, 0u);
  EXPECT_EQ(bad_ghost, 0u) << "restart wrote ghost cells";
  CUDA_OK(cudaFree(dev));
  CUDA_OK(cudaStreamDestroy(s));
}

INSTANTIATE_TEST_SUITE_P(DoubleBuffer, DeviceSelection,
                         ::testing::Values(SelectionCase{"off", 0}, SelectionCase{"on", 1.0}, SelectionCase{"on", 0.34},
                                           SelectionCase{"auto", 0}),
                         [](const ::testing::TestParamInfo<SelectionCase>& p) {
                           const bool small = p.param.spare_fraction > 0 && p.param.spare_fraction < 1;
                           return std::string(p.param.double_buffer) + (small ? "_small" : "");
                         });

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

/// Restarts `step` into `dev`, poisoned first (the restart must write every byte), on `s`: the number of
/// its `n` elements that are not base + i (all of them when the restart failed).
std::size_t bad_after_restart(Runtime& rt, std::int64_t step, cudaStream_t s, double* dev, std::size_t n,
                              double base) {
  EXPECT_EQ(cudaMemsetAsync(dev, 0xff, n * sizeof(double), s), cudaSuccess);
  const Status st = rt.restart(step, s);
  EXPECT_TRUE(st.ok()) << "restart(" << step << "): " << st.to_string();
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  return st.ok() ? count_bad(dev, n, base) : n;
}

constexpr int kCanarySteps = 4;

/// A canary case's options: chunks of `chunk` bytes for a region of `bytes`, the case's double
/// buffering and max_in_flight, every step kept (all are restarted).
Options canary_options(const Canary& c, std::size_t bytes, std::size_t chunk) {
  Options o = options_for(ckpt::test::scratch_dir());
  o.chunk_bytes = chunk;
  o.gpu_double_buffer = *ckpt::parse_double_buffer(c.double_buffer);
  const auto spare = static_cast<std::uint64_t>(c.spare_fraction * bytes);
  o.gpu_spare_bytes = spare > 0 ? ckpt::AutoBytes(spare) : ckpt::AutoBytes();  // 0: auto's own cap
  o.max_in_flight = c.max_in_flight;
  o.keep = kCanarySteps;
  return o;
}

/// Restarts every step (bad_after_restart) and checks that step k holds 1000 k + i.
void expect_every_step_restores(Runtime& rt, cudaStream_t s, double* dev, std::size_t n) {
  for (int step = 1; step <= kCanarySteps; ++step)
    EXPECT_EQ(bad_after_restart(rt, step, s, dev, n, 1000.0 * step), 0u) << "step " << step;
}

}  // namespace

class CudaCanary : public ::testing::TestWithParam<Canary> {};

TEST_P(CudaCanary, CheckpointsHoldWhatTheSlowKernelWroteNotWhatTheNextKernelWrites) {
  SKIP_WITHOUT_GPU();
  const Canary c = GetParam();
  constexpr std::size_t n = (8 << 20) / kScale;  // 64 MiB of doubles (16 simulated): 4 chunks
  constexpr std::size_t bytes = n * sizeof(double);
  TestStream ts(c.stream);
  double* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, bytes));
  {
    Runtime rt(MPI_COMM_WORLD, canary_options(c, bytes, (16 << 20) / kScale));
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(rt.protect("dev", dev, DType::f64, {n}).ok());
    std::vector<Ticket> tickets;
    for (int step = 1; step <= kCanarySteps; ++step) {
      // What checkpoint() would wait for (max_in_flight) is waited for first: the producer then starts
      // only when checkpoint() no longer blocks, and is still running when it returns.
      if (step > c.max_in_flight) ASSERT_TRUE(tickets[step - 1 - c.max_in_flight].wait().ok());
      fill(ts.s, dev, n, 1000.0 * step, kSlow);  // slow producer: still running at checkpoint()
      tickets.push_back(rt.checkpoint(step, ts.s));
      // Not vacuous: the producer (and the copies ordered after it) are still pending on the stream.
      EXPECT_EQ(cudaStreamQuery(ts.s), cudaErrorNotReady) << "step " << step;
      fill(ts.s, dev, n, -1.0);  // canary: overwrites right away, must run after the copies
    }
    for (auto& t : tickets) ASSERT_TRUE(t.wait().ok()) << t.wait().to_string();
    expect_every_step_restores(rt, ts.s, dev, n);
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

/// Captures back to back, with no slow producer between them (issue 32). The canary's slow producer
/// before every capture lets the previous capture's D2H out of the spare buffer finish before the next
/// capture's D2D into it, so a D2D that did not wait for spare_free went unnoticed there. Here each
/// capture follows the previous one at once, 4 in flight; on the simulated device every copy and kernel
/// is also slowed down (D2H most), which widens every window between the streams.
class BackToBack : public ::testing::TestWithParam<Canary> {};

TEST_P(BackToBack, EveryCheckpointHoldsItsOwnData) {
  SKIP_WITHOUT_GPU();
#if CKPT_HAVE_SIMGPU
  // Kernels (the poison before a restart among them) slower than an H2D copy, a capture's D2H copies
  // together slower than a kernel, a D2D copy slower than nothing.
  ckpt::test::SimReset reset;
  ckpt::simgpu::set_delay_us(ckpt::simgpu::Op::d2h, 20'000);
  ckpt::simgpu::set_delay_us(ckpt::simgpu::Op::h2d, 2'000);
  ckpt::simgpu::set_delay_us(ckpt::simgpu::Op::d2d, 5'000);
  ckpt::simgpu::set_delay_us(ckpt::simgpu::Op::kernel, 30'000);
#endif
  const Canary c = GetParam();
  constexpr std::size_t n = 2 << 20;  // 16 MiB of doubles: 4 chunks of 4 MiB
  constexpr std::size_t bytes = n * sizeof(double);
  TestStream ts(c.stream);
  double* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, bytes));
  {
    Runtime rt(MPI_COMM_WORLD, canary_options(c, bytes, 4 << 20));
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(rt.protect("dev", dev, DType::f64, {n}).ok());
    std::vector<Ticket> tickets;
    for (int step = 1; step <= kCanarySteps; ++step) {
      fill(ts.s, dev, n, 1000.0 * step);  // no slow producer: the previous capture's copies still run
      tickets.push_back(rt.checkpoint(step, ts.s));
    }
    fill(ts.s, dev, n, -1.0);
    for (auto& t : tickets) ASSERT_TRUE(t.wait().ok()) << t.wait().to_string();
    expect_every_step_restores(rt, ts.s, dev, n);
  }
  CUDA_OK(cudaFree(dev));
}

INSTANTIATE_TEST_SUITE_P(Streams, BackToBack,
                         ::testing::Values(Canary{StreamKind::blocking, "off", 0, 4},
                                           Canary{StreamKind::blocking, "on", 1, 4},
                                           Canary{StreamKind::blocking, "on", 0.5, 4},
                                           Canary{StreamKind::blocking, "auto", 0, 4},
                                           Canary{StreamKind::legacy, "on", 1, 4}),
                         canary_name);

TEST(CudaRuntime, ACheckpointSixteenTimesThePoolStreamsThroughIt) {
  SKIP_WITHOUT_GPU();
  constexpr std::size_t n = (std::size_t{1} << 27) / kScale;  // 1 GiB of doubles (256 MiB simulated)
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, n * sizeof(double)));
  Options o = options_for(ckpt::test::scratch_dir());
  o.chunk_bytes = (16 << 20) / kScale;
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

// Issue 36: incremental checkpoints of device memory. The capture copies the region D2H into staging and
// the flush thread hashes its pieces there, so a piece that a slow kernel is still writing when
// checkpoint() returns must be hashed as the kernel left it: the change is found, written and restored.
// A chain of four (full, then three that write only the pieces changed on the GPU since the one before),
// each restarted into poisoned device memory on the stream, bit for bit; the checkpoints that refer write
// their changed pieces only (Ticket stats: bytes_written).
TEST(CudaRuntime, IncrementalCheckpointsOfDeviceMemoryWriteOnlyChangedPiecesAndRestoreThem) {
  SKIP_WITHOUT_GPU();
  constexpr std::size_t piece = 64 << 10, per_piece = piece / sizeof(double), pieces = 32;
  constexpr std::size_t n = pieces * per_piece;  // 2 MiB of doubles
  const std::string dir = ckpt::test::scratch_dir();
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, n * sizeof(double)));
  Options o = options_for(dir);
  o.incremental = true;
  o.index_format = 2;
  o.incremental_piece_bytes = piece;
  o.incremental_full_every = 8;
  o.keep = 8;
  // Pieces [first, first + count) become value + i (i from the array's start), on the stream.
  auto change = [&](std::size_t first, std::size_t count, double value, long long cycles) {
    const std::size_t at = first * per_piece;
    CKPT_LAUNCH(slow_fill, 64, 256, s)(dev + at, count * per_piece, value + static_cast<double>(at), cycles);
  };
  const std::vector<std::vector<std::size_t>> changed = {{}, {5}, {0, 31}, {12, 13, 14}};  // per step, after 1.0 + i
  std::vector<std::vector<double>> stored;  // what each step holds
  std::vector<std::uint64_t> wrote;         // each step's bytes written (Ticket stats)
  {
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(rt.protect("dev", dev, DType::f64, {n}).ok());
    change(0, pieces, 1.0, 0);
    for (std::size_t k = 0; k < changed.size(); ++k) {
      const auto step = static_cast<std::int64_t>(k + 1);
      for (const std::size_t p : changed[k]) change(p, 1, 100.0 * step, kSlow);  // still running at checkpoint()
      Ticket t = rt.checkpoint(step, s);
      if (!changed[k].empty()) EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady) << "step " << step;
      change(0, pieces, -7.0, 0);  // overwritten on the stream right after: the capture must not see it
      ASSERT_TRUE(t.wait().ok()) << t.wait().to_string();
      wrote.push_back(t.stats().bytes_written);
      std::vector<double> at_step(n);
      for (std::size_t i = 0; i < n; ++i) at_step[i] = k == 0 ? 1.0 + static_cast<double>(i) : stored.back()[i];
      for (const std::size_t p : changed[k])
        for (std::size_t i = p * per_piece; i < (p + 1) * per_piece; ++i)
          at_step[i] = 100.0 * static_cast<double>(step) + static_cast<double>(i);
      stored.push_back(std::move(at_step));
      // The GPU back to what was checkpointed (not -7 + i), for the next step's changes to build on.
      CUDA_OK(cudaMemcpyAsync(dev, stored.back().data(), n * sizeof(double), cudaMemcpyHostToDevice, s));
      CUDA_OK(cudaStreamSynchronize(s));
    }
    EXPECT_GE(wrote[0], n * sizeof(double));
    for (std::size_t k = 1; k < changed.size(); ++k) {  // the changed pieces, a header and alignment
      EXPECT_GE(wrote[k], changed[k].size() * piece) << "step " << k + 1;
      EXPECT_LT(wrote[k], (changed[k].size() + 1) * piece) << "step " << k + 1 << ": more than its changed pieces";
    }
    for (std::int64_t step = 4; step >= 1; --step) {
      CUDA_OK(cudaMemsetAsync(dev, 0xff, n * sizeof(double), s));
      Status st = rt.restart(step, s);
      ASSERT_TRUE(st.ok()) << "restart(" << step << "): " << st.to_string();
      CUDA_OK(cudaStreamSynchronize(s));
      std::vector<double> got(n);
      CUDA_OK(cudaMemcpy(got.data(), dev, n * sizeof(double), cudaMemcpyDeviceToHost));
      std::size_t bad = 0;
      for (std::size_t i = 0; i < n; ++i) bad += got[i] != stored[static_cast<std::size_t>(step - 1)][i];
      EXPECT_EQ(bad, 0u) << "restart(" << step << ")";
    }
  }
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
  detail::set_device_factory([](const DeviceConfig& cfg) {
    DeviceConfig c = cfg;
    c.pin_staging = false;  // as when pinning fails: pageable chunks, synchronous copies
    return detail::make_gpu_device(c);
  });
  constexpr std::size_t n = 4 << 20;
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double *dev = nullptr, *more = nullptr;
  CUDA_OK(cudaMalloc(&dev, n * sizeof(double)));
  CUDA_OK(cudaMalloc(&more, n * sizeof(double)));
  fill(s, more, n, 4.0);
  // Issue 32, defect 6: the fall-back is said on stderr, once (rank 0 here), however many pieces of
  // staging memory are pageable: the pool grows again when the second region is protected.
  ::testing::internal::CaptureStderr();
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
    const std::size_t had = t.stats().staging_bytes;
    ASSERT_TRUE(rt.restart(1, s).ok());  // over the canary's -1
    CUDA_OK(cudaStreamSynchronize(s));
    EXPECT_EQ(count_bad(dev, n, 9.0), 0u);
    ASSERT_TRUE(rt.protect("more", more, DType::f64, {n}).ok());
    t = rt.checkpoint(2, s);
    ASSERT_TRUE(t.wait().ok()) << t.wait().to_string();
    EXPECT_GT(t.stats().staging_bytes, had) << "the pool did not grow: the second piece was not tested";
    fill(s, more, n, -1.0);
    ASSERT_TRUE(rt.restart(2, s).ok());
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  std::size_t said = 0;
  for (std::size_t at = err.find("staging memory could not be pinned"); at != std::string::npos;
       at = err.find("staging memory could not be pinned", at + 1))
    ++said;
  EXPECT_EQ(said, 1u) << err;
  EXPECT_NE(err.find("pinned staging disabled"), std::string::npos) << err;  // why
  EXPECT_EQ(count_bad(dev, n, 9.0), 0u);
  EXPECT_EQ(count_bad(more, n, 4.0), 0u);
  CUDA_OK(cudaFree(dev));
  CUDA_OK(cudaFree(more));
  CUDA_OK(cudaStreamDestroy(s));
}

#if CKPT_HAVE_SIMGPU
// Issue 32, defect 7: regions with a Source are sized inside checkpoint(); re-chunking there freed the
// staging pool (cudaFreeHost) and pinned it again on the application thread, seconds at 16 GiB. A
// device array behind a Source shrinks 64x and grows back, with 4 checkpoints in flight: no
// checkpoint() call frees or unregisters staging memory, and the last one restarts exactly.
TEST(CudaRuntime, ASourceThatShrinksAndGrowsFreesNoStagingInsideCheckpoint) {
  constexpr std::size_t n = 1 << 20;  // 8 MiB of doubles
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, n * sizeof(double)));
  std::uint64_t count = n;
  Options o = options_for(ckpt::test::scratch_dir());
  o.chunk_bytes = std::nullopt;  // the auto pool: its chunks follow the state
  o.max_in_flight = 4;
  auto frees = [] { return ckpt::simgpu::calls("cudaFreeHost") + ckpt::simgpu::calls("cudaHostUnregister"); };
  {
    Runtime rt(MPI_COMM_WORLD, o);
    Source src;
    src.locate = [&] { return Place{dev, {count}}; };
    ASSERT_TRUE(rt.protect("dev", DType::f64, src).ok());
    int step = 0;
    for (std::uint64_t c : {n, n / 64, n / 64, n, n}) {
      count = c;
      fill(s, dev, c, 10.0 * ++step);
      const long before = frees();
      Ticket t = rt.checkpoint(step, s);
      EXPECT_EQ(frees(), before) << "checkpoint " << step << " (" << c << " elements) freed staging memory";
      ASSERT_TRUE(t.wait().ok()) << t.wait().to_string();
    }
    EXPECT_EQ(bad_after_restart(rt, step, s, dev, n, 10.0 * step), 0u);
  }
  CUDA_OK(cudaFree(dev));
  CUDA_OK(cudaStreamDestroy(s));
}
#endif

#if CKPT_HAVE_SIMGPU
// Issue 32, defect 1: on_busy coalesce, back-to-back checkpoint() calls. The one that supersedes the
// capture waiting to be launched gave that capture's chunks back on the application thread, after
// waiting for their D2H: a whole D2H per call (the simulated device makes every D2H copy take 0.3 s).
// Now the reclaim thread gives them back: no call waits for a D2H, and the last checkpoint is exact.
class CoalesceBackToBack : public ::testing::TestWithParam<const char*> {};

TEST_P(CoalesceBackToBack, NoCheckpointCallWaitsForASupersededCapturesD2H) {
  ckpt::test::SimReset reset;
  constexpr long kD2HUs = 300'000;
  ckpt::simgpu::set_delay_us(ckpt::simgpu::Op::d2h, kD2HUs);
  constexpr std::size_t n = 1 << 20;  // 8 MiB: one chunk
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, n * sizeof(double)));
  Options o = options_for(ckpt::test::scratch_dir());
  o.on_busy = Options::OnBusy::coalesce;
  o.chunk_bytes = n * sizeof(double);
  o.pool_bytes = 4 * *o.chunk_bytes;  // room for a third capture while two wait for their D2H
  o.gpu_double_buffer = *ckpt::parse_double_buffer(GetParam());
  o.gpu_spare_bytes = n * sizeof(double);
  {
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(rt.protect("dev", dev, DType::f64, {n}).ok());
    std::vector<Ticket> tickets;
    for (int step = 1; step <= 3; ++step) {
      fill(s, dev, n, 100.0 * step);
      tickets.push_back(rt.checkpoint(step, s));
      // One of the three supersedes a capture whose D2H is still queued (0.3 s and more away).
      EXPECT_LT(tickets.back().stats().blocked_s, 0.5 * kD2HUs / 1e6) << "checkpoint(" << step << ")";
    }
    int superseded = 0;
    for (auto& t : tickets) {
      Status st = t.wait();
      if (st.code() == Code::superseded) ++superseded;
      else EXPECT_TRUE(st.ok()) << st.to_string();
    }
    EXPECT_GE(superseded, 1) << "no capture was superseded: the test checked nothing";
    EXPECT_TRUE(tickets.back().wait().ok());
    ckpt::simgpu::set_delay_us(ckpt::simgpu::Op::d2h, 0);
    EXPECT_EQ(bad_after_restart(rt, 3, s, dev, n, 300.0), 0u);
  }
  CUDA_OK(cudaFree(dev));
  CUDA_OK(cudaStreamDestroy(s));
}
INSTANTIATE_TEST_SUITE_P(DoubleBuffer, CoalesceBackToBack, ::testing::Values("off", "on"));
#endif

#if CKPT_HAVE_SIMGPU
// What the device does without what it would like: no GPU at all (the simulated device reports none:
// unavailable, the host device instead), no memory pools (automatic double buffering stays direct), no
// room for the automatic spare (its allocation fails: direct, the cap halved, the smaller spare used).
// Every checkpoint exact.
TEST(CudaDevice, WithoutADeviceMemoryPoolsOrRoomForTheSpare) {
  {
    ckpt::test::SimReset reset;
    ckpt::simgpu::set_device_count(0);
    auto d = detail::make_gpu_device();
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), Code::unavailable) << d.status().to_string();
    auto fallback = detail::make_default_device();
    ASSERT_TRUE(fallback.ok()) << fallback.status().to_string();
    EXPECT_STREQ(fallback.value()->name(), "host");
  }
  constexpr std::size_t n = 1 << 18, bytes = n * sizeof(double);
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, bytes));
  for (const bool pools : {false, true}) {
    ckpt::test::SimReset reset;
    ckpt::simgpu::set_memory_pools_supported(pools);
    // With pools: less free device memory than the spare wants (the region), so its allocation fails.
    if (pools) ckpt::simgpu::set_device_memory(bytes + bytes / 2);
    Options o = options_for(ckpt::test::scratch_dir() + (pools ? "/full" : "/nopools"));
    o.gpu_double_buffer = std::nullopt;  // auto
    o.gpu_spare_bytes = bytes;
    o.keep = 3;
    const long spares = ckpt::simgpu::calls("cudaMallocAsync");
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.status().ok()) << rt.status().to_string();
    ASSERT_TRUE(rt.protect("dev", dev, DType::f64, {n}).ok());
    for (int step = 1; step <= 3; ++step) {
      fill(s, dev, n, 1000.0 * step, kSlow);
      Ticket t = rt.checkpoint(step, s);
      fill(s, dev, n, -1.0);
      ASSERT_TRUE(t.wait().ok()) << t.wait().to_string();
    }
    // Without pools the spare is never asked for. Without room for the region's size it is asked for
    // that (which fails), then for the halved cap, which fits: then half the region goes through it.
    EXPECT_EQ(ckpt::simgpu::calls("cudaMallocAsync") - spares, pools ? 2 : 0);
    for (int step = 1; step <= 3; ++step)
      EXPECT_EQ(bad_after_restart(rt, step, s, dev, n, 1000.0 * step), 0u) << "step " << step;
  }
  CUDA_OK(cudaFree(dev));
  CUDA_OK(cudaStreamDestroy(s));
}

#endif

#if CKPT_HAVE_SIMGPU
// restart() returns once its H2D copies landed: its two bounce chunks go back to the pool then, and the
// next checkpoint gets them first (the pool is LIFO) and copies host regions into them at once. Every
// H2D copy takes 50 ms here, so a restart that returned earlier has its last copy read the next
// checkpoint's host data.
TEST(CudaRuntime, ACheckpointRightAfterARestartDoesNotOverwriteItsCopies) {
  ckpt::test::SimReset reset;
  ckpt::simgpu::set_delay_us(ckpt::simgpu::Op::h2d, 50'000);
  constexpr std::size_t n = 1 << 17;  // 1 MiB of doubles per region: one bounce piece each
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, n * sizeof(double)));
  std::vector<double> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = -3.0 - static_cast<double>(i);
  fill(s, dev, n, 7.0);
  {
    Options o = options_for(ckpt::test::scratch_dir());
    o.chunk_bytes = n * sizeof(double);
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.protect("host", host.data(), DType::f64, {n}).ok());
    ASSERT_TRUE(rt.protect("dev", dev, DType::f64, {n}).ok());
    ASSERT_TRUE(rt.checkpoint(1, s).wait().ok());
    CUDA_OK(cudaMemsetAsync(dev, 0xff, n * sizeof(double), s));
    ASSERT_TRUE(rt.restart(1, s).ok());
    Ticket t = rt.checkpoint(2, s);  // copies the host region into the chunks the restart read through
    CUDA_OK(cudaStreamSynchronize(s));
    EXPECT_EQ(count_bad(dev, n, 7.0), 0u) << "the restart's copies read the next checkpoint's data";
    ASSERT_TRUE(t.wait().ok()) << t.wait().to_string();
  }
  CUDA_OK(cudaFree(dev));
  CUDA_OK(cudaStreamDestroy(s));
}

// An optional region is restored into host memory first and copied into place only once every rank
// verified the step (issue 31, part 5): that H2D is the restart's last copy, and it must have landed
// when restart() returns. The H2D takes 50 ms here; the check right after restart() reads the device
// memory at once. (The copy is from pageable memory, which CUDA - and the simulated device - complete
// before cudaMemcpyAsync returns; the test keeps that promise if the shadow ever becomes pinned.)
TEST(CudaRuntime, AnOptionalDeviceRegionIsInPlaceWhenRestartReturns) {
  ckpt::test::SimReset reset;
  ckpt::simgpu::set_delay_us(ckpt::simgpu::Op::h2d, 50'000);
  constexpr std::size_t n = 1 << 17;
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, n * sizeof(double)));
  fill(s, dev, n, 7.0);
  {
    Options o = options_for(ckpt::test::scratch_dir());
    o.chunk_bytes = n * sizeof(double);
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.protect("dev", dev, DType::f64, {n}).ok());
    ASSERT_TRUE(rt.set_optional("dev").ok());
    ASSERT_TRUE(rt.checkpoint(1, s).wait().ok());
    CUDA_OK(cudaMemsetAsync(dev, 0xff, n * sizeof(double), s));
    CUDA_OK(cudaStreamSynchronize(s));
    ASSERT_TRUE(rt.restart(1, s).ok());
    EXPECT_EQ(count_bad(dev, n, 7.0), 0u) << "restart() returned before the optional region was in place";
  }
  CUDA_OK(cudaFree(dev));
  CUDA_OK(cudaStreamDestroy(s));
}

// A fence that cannot be taken (its cudaEventRecord fails, injected): the checkpoint fails, and the
// copies into the chunk are drained (Device::synchronize) before the chunk goes back to the pool. The
// D2H takes 0.1 s here; the restart right after reads the stored checkpoint through that chunk (LIFO),
// so a D2H still in flight would land in the restart's data. Double buffering on with a spare smaller
// than the region: the D2H runs on the D2D stream. When the drain fails too (injected), the chunk is
// retired, never handed out again, and its memory is freed at teardown only after the copy landed (the
// simulated device aborts when memory is freed under a queued copy).
struct FenceCase {
  const char* double_buffer;
  bool drain_fails;
};

class FailedFence : public ::testing::TestWithParam<FenceCase> {};

TEST_P(FailedFence, TheChunksCopiesAreDrainedBeforeItIsReusedOrFreed) {
  ckpt::test::SimReset reset;
  ckpt::simgpu::set_delay_us(ckpt::simgpu::Op::d2h, 100'000);
  constexpr std::size_t n = 1 << 17;
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, n * sizeof(double)));
  Options o = options_for(ckpt::test::scratch_dir());
  o.chunk_bytes = n * sizeof(double);
  o.gpu_double_buffer = *ckpt::parse_double_buffer(GetParam().double_buffer);
  o.gpu_spare_bytes = n * sizeof(double) / 2;
  {
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.protect("dev", dev, DType::f64, {n}).ok());
    fill(s, dev, n, 1.0);
    ASSERT_TRUE(rt.checkpoint(1, s).wait().ok());
    fill(s, dev, n, 2.0);
    // The capture records m_start on the stream first, then the fence's event (direct), or the event
    // that joins the D2D stream into the copy stream (double buffering): the second record fails.
    ckpt::simgpu::inject_error("cudaEventRecord", 1, cudaErrorMemoryAllocation);
    if (GetParam().drain_fails) {
      // The next stream synchronisation is the drain's (Device::synchronize); the next record after the
      // failed one is capture_end's, which would otherwise join the D2D stream into the copy stream.
      ckpt::simgpu::inject_error("cudaStreamSynchronize", 0, cudaErrorMemoryAllocation);
      ckpt::simgpu::inject_error("cudaEventRecord", 0, cudaErrorMemoryAllocation);
    }
    Status st = rt.checkpoint(2, s).wait();
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("cudaEventRecord"), std::string::npos) << st.to_string();
    if (!GetParam().drain_fails) {
      EXPECT_EQ(bad_after_restart(rt, 1, s, dev, n, 1.0), 0u) << "the failed checkpoint's copy landed in the restart's data";
    }
  }  // drain_fails: the Runtime goes at once, its pool with the retired chunk, the D2H still queued
  if (GetParam().drain_fails) {
    Runtime rt(MPI_COMM_WORLD, o);
    ASSERT_TRUE(rt.protect("dev", dev, DType::f64, {n}).ok());
    EXPECT_EQ(bad_after_restart(rt, 1, s, dev, n, 1.0), 0u);
  }
  CUDA_OK(cudaFree(dev));
  CUDA_OK(cudaStreamDestroy(s));
}
INSTANTIATE_TEST_SUITE_P(DoubleBuffer, FailedFence,
                         ::testing::Values(FenceCase{"off", false}, FenceCase{"on", false}, FenceCase{"off", true},
                                           FenceCase{"on", true}));

// A capture abandoned halfway (no fence, no capture_end), then the device destroyed: its destructor
// drains both streams first, so that nothing of the device is in flight afterwards - neither the D2H
// into the caller's buffer (freed right after: the simulated device aborts when memory is freed under a
// queued copy) nor, with automatic double buffering, the D2D into the spare, which the destructor frees
// in the copy stream's order.
class AbandonedCapture : public ::testing::TestWithParam<DeviceConfig::DoubleBuffer> {};

TEST_P(AbandonedCapture, IsDrainedWhenTheDeviceIsDestroyed) {
  ckpt::test::SimReset reset;
  constexpr std::size_t n = 1 << 17, bytes = n * sizeof(double);
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double* a = nullptr;
  CUDA_OK(cudaMalloc(&a, bytes));
  void* staged = nullptr;
  CUDA_OK(cudaHostAlloc(&staged, bytes, cudaHostAllocPortable));
  fill(s, a, n, 1.0);
  {
    DeviceConfig cfg;
    cfg.double_buffer = GetParam();
    auto dev = detail::make_gpu_device(cfg);
    ASSERT_TRUE(dev.ok()) << dev.status().to_string();
    Device& d = *dev.value();
    // A whole capture first: in automatic mode it sizes the spare, which the second one copies into.
    ASSERT_TRUE(d.capture_begin(s).ok());
    ASSERT_TRUE(d.copy_to_host(staged, a, bytes, MemoryKind::device).ok());
    auto f = d.fence();
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(d.capture_end(s).ok());
    ASSERT_TRUE(d.wait(f.value()).ok());
    ckpt::simgpu::set_delay_us(ckpt::simgpu::Op::d2h, 100'000);
    ckpt::simgpu::set_delay_us(ckpt::simgpu::Op::d2d, 100'000);
    ASSERT_TRUE(d.capture_begin(s).ok());
    ASSERT_TRUE(d.copy_to_host(staged, a, bytes, MemoryKind::device).ok());
  }  // abandoned: destroyed with the copy enqueued
  CUDA_OK(cudaFreeHost(staged));
  CUDA_OK(cudaFree(a));
  CUDA_OK(cudaStreamDestroy(s));
}
INSTANTIATE_TEST_SUITE_P(DoubleBuffer, AbandonedCapture,
                         ::testing::Values(DeviceConfig::DoubleBuffer::off,
                                           DeviceConfig::DoubleBuffer::automatic));
#endif

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
