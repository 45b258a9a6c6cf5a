/// \file cuda_check.hpp
/// The one GPU-check macro of ckpt (private to gpu/ and the GPU tests). Every CUDA runtime call in ckpt
/// goes through CKPT_IMPL_CUDA_CHECK, so no return code is dropped; in a HIP build the same calls are
/// HIP calls (gpu_runtime.hpp maps the names) and the same rules hold:
///   - a *sticky* error (the context is corrupt: illegal address, launch failure, ECC, ...) aborts the
///     process with the call, file and line -- no later CUDA call can succeed, and carrying on would
///     write garbage into a checkpoint;
///   - any other error becomes a ckpt::Status naming the call, file and line (Code::unavailable when
///     there is no GPU to use at all -- no driver, a stub driver, no device -- and Code::io_error
///     otherwise, so that a GPU that is there but fails is never mistaken for "no GPU"), which the
///     caller returns.
/// The application's pending error (cudaGetLastError) is left alone: an error of ckpt's own call is
/// cleared from the thread's last-error slot only when nothing was pending before the call.
/// The sticky and "no GPU" lists are per vendor: HIP has no twin of several CUDA codes (see docs/gpu.md).
#ifndef CKPT_GPU_CUDA_CHECK_HPP
#define CKPT_GPU_CUDA_CHECK_HPP

#include <cstdio>
#include <cstdlib>
#include <string>

#include "ckpt/status.hpp"
#include "gpu/gpu_runtime.hpp"

namespace ckpt::detail {

/// True for errors after which the GPU context is unusable for the rest of the process.
inline bool cuda_error_is_sticky(cudaError_t e) noexcept {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
#if !CKPT_HAVE_HIP  // CUDA codes without a HIP twin
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorExternalDevice:
    case cudaErrorMpsClientTerminated:  // the MPS server ended this client: the context is gone
#if CUDART_VERSION >= 12080             // added during CUDA 12
    case cudaErrorContained:
    case cudaErrorTensorMemoryLeak:
#endif
#endif
      return true;
    default: return false;
  }
}

/// Errors that mean "there is no GPU to use here" (not "the GPU failed"): the only ones under which
/// ckpt may fall back to the host device.
inline bool cuda_error_is_unavailable(cudaError_t e) noexcept {
  switch (e) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
#if !CKPT_HAVE_HIP
    case cudaErrorStubLibrary:  // the driver stub of a machine without the real driver
#endif
      return true;
    default: return false;
  }
}

/// Target of CKPT_IMPL_CUDA_CHECK; see the file comment. `pending` is the thread's last error before
/// the call.
inline Status cuda_check(cudaError_t e, cudaError_t pending, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return Status::OK();
  const std::string what = std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                           cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  if (cuda_error_is_sticky(e)) {
    std::fprintf(stderr, "ckpt: fatal %s error, the GPU context is unusable: %s\n", kGpuVendor, what.c_str());
    std::fflush(stderr);
    std::abort();
  }
  // Ours, not the application's: it must not surface in the application's next cudaGetLastError().
  if (pending == cudaSuccess) (void)cudaGetLastError();
  return Status(cuda_error_is_unavailable(e) ? Code::unavailable : Code::io_error, what);
}

}  // namespace ckpt::detail

/// Evaluates the CUDA (or, in a HIP build, HIP) runtime call `call` once and yields a ckpt::Status (aborts on a sticky
/// error). The lambda fixes the order: the pending error is read before the call.
#define CKPT_IMPL_CUDA_CHECK(call)                                                        \
  ([&]() -> ::ckpt::Status {                                                              \
    const cudaError_t ckpt_pending_ = cudaPeekAtLastError();                              \
    const cudaError_t ckpt_e_ = (call);                                                   \
    return ::ckpt::detail::cuda_check(ckpt_e_, ckpt_pending_, #call, __FILE__, __LINE__); \
  }())

#endif  // CKPT_GPU_CUDA_CHECK_HPP
