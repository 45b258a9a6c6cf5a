// Helpers of the GPU tests: the vendor runtime (CUDA, HIP through gpu/gpu_runtime.hpp plus the
// test-only names below, or the simulated device), kernel launches (gpu/sim/launch.hpp), why there is
// no GPU (for GTEST_SKIP), and the skip itself. The tests are written once, in CUDA spelling, and built
// for whichever vendor ckpt was built with.
#ifndef CKPT_TESTS_GPU_GPU_TEST_UTIL_HPP
#define CKPT_TESTS_GPU_GPU_TEST_UTIL_HPP

#include "ckpt/config.hpp"

#if CKPT_HAVE_HIP
#include <hip/hip_runtime.h>  // kernels: compiled by hipcc (tests/gpu/CMakeLists.txt)
#elif !CKPT_HAVE_SIMGPU
#include <cuda_runtime.h>
#endif

#include <string>

#include "gpu/gpu_runtime.hpp"
#include "gpu/sim/launch.hpp"

#if CKPT_HAVE_HIP
// Names only the tests use (the library's are in gpu/gpu_runtime.hpp).
#define cudaGraph_t hipGraph_t
#define cudaGraphDestroy hipGraphDestroy
#define cudaStreamBeginCapture hipStreamBeginCapture
#define cudaStreamEndCapture hipStreamEndCapture
#define cudaStreamCaptureModeThreadLocal hipStreamCaptureModeThreadLocal
#define cudaStreamCreate hipStreamCreate
#define cudaStreamQuery hipStreamQuery
#define cudaMemcpy hipMemcpy
#define cudaMemset hipMemset
#define cudaMemsetAsync hipMemsetAsync
#define cudaMallocManaged hipMallocManaged
#define cudaMallocHost(ptr, bytes) hipHostMalloc((ptr), (bytes), hipHostMallocDefault)
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaErrorInvalidDevice hipErrorInvalidDevice
#define cudaErrorInitializationError hipErrorNotInitialized
#endif

namespace ckpt::test {

/// Empty when a GPU is usable, otherwise why not.
inline std::string no_gpu_reason() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no usable ") + ckpt::detail::kGpuVendor + " device: " + cudaGetErrorName(e) + " (" +
           cudaGetErrorString(e) + ")";
  }
  if (n == 0) return std::string("no ") + ckpt::detail::kGpuVendor + " device is present";
  return "";
}

}  // namespace ckpt::test

#if CKPT_HAVE_SIMGPU
namespace ckpt::test {
/// Puts the simulated device's delays and injected errors back to none when the test ends, however.
struct SimReset {
  SimReset() = default;
  SimReset(const SimReset&) = delete;
  SimReset& operator=(const SimReset&) = delete;
  ~SimReset() { ckpt::simgpu::reset(); }
};
}  // namespace ckpt::test
#endif

/// Skips the test, with the reason, when there is no GPU.
#define SKIP_WITHOUT_GPU()                                \
  do {                                                    \
    const std::string why_ = ckpt::test::no_gpu_reason(); \
    if (!why_.empty()) GTEST_SKIP() << why_;              \
  } while (0)

#endif  // CKPT_TESTS_GPU_GPU_TEST_UTIL_HPP
