// Helpers of the GPU tests: why there is no GPU (for GTEST_SKIP), and the skip itself.
#ifndef CKPT_TESTS_GPU_GPU_TEST_UTIL_HPP
#define CKPT_TESTS_GPU_GPU_TEST_UTIL_HPP

#include <cuda_runtime.h>

#include <string>

namespace ckpt::test {

/// Empty when a GPU is usable, otherwise why not.
inline std::string no_gpu_reason() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no usable CUDA device: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  }
  if (n == 0) return "no CUDA device is present";
  return "";
}

}  // namespace ckpt::test

/// Skips the test, with the reason, when there is no GPU.
#define SKIP_WITHOUT_GPU()                                \
  do {                                                    \
    const std::string why_ = ckpt::test::no_gpu_reason(); \
    if (!why_.empty()) GTEST_SKIP() << why_;              \
  } while (0)

#endif  // CKPT_TESTS_GPU_GPU_TEST_UTIL_HPP
