/// \file gpu_runtime.hpp
/// The GPU vendor seam (private to gpu/ and the GPU tests): one header that makes the CUDA runtime API
/// names ckpt uses mean the CUDA runtime (CKPT_HAVE_CUDA), the HIP runtime (CKPT_HAVE_HIP) or the
/// simulated device, a CPU runtime for tests (CKPT_HAVE_SIMGPU, gpu/sim/sim_runtime.hpp), so that
/// gpu/cuda_device.cu is the one device implementation of all three. ckpt's source keeps the CUDA
/// spelling; under HIP each name below is one `#define` to its HIP twin (the approach of hipify's
/// runtime headers and of llama.cpp's vendors/hip.h). Only the names ckpt's library uses are mapped:
/// a new CUDA call in cuda_device.cu fails to compile in the HIP build until it is added here, where
/// its HIP twin is checked.
///
/// What does not map one to one is a function in ckpt::detail with one body per vendor (the table of
/// differences is in docs/gpu.md):
///   - gpu_memory_type(): cudaPointerAttributes::type vs hipPointerAttribute_t::memoryType/isManaged;
///   - gpu_is_default_stream(): CUDA has the legacy and per-thread handles, HIP nullptr and per-thread;
///   - gpu_stream_device(): cudaStreamGetDevice, which came with CUDA 12.8 (runtime and driver); HIP has
///     hipStreamGetDevice only from ROCm 5.x on (checked at configure time:
///     CKPT_IMPL_HIP_HAS_STREAM_GET_DEVICE) -- without it (an older toolkit or driver, or
///     CKPT_IMPL_NO_STREAM_GET_DEVICE) a stream of another device cannot be detected and the stream is
///     taken to be on the current device;
///   - gpu_thread_device(): whether the calling thread has a current device at all (CUDA: a current
///     context, cuCtxGetCurrent through the runtime's driver entry point);
///   - gpu_name_stream(): NVTX names CUDA streams; roctx cannot name streams (no-op on HIP);
///   - the sticky and "no GPU" error lists (cuda_check.hpp).
///
/// No public header includes this one (house style 2): HIP's headers reach only gpu/ and the GPU tests.
#ifndef CKPT_GPU_GPU_RUNTIME_HPP
#define CKPT_GPU_GPU_RUNTIME_HPP

#include <cstdint>

#include "ckpt/config.hpp"

#if CKPT_HAVE_HIP + CKPT_HAVE_CUDA + CKPT_HAVE_SIMGPU > 1
#error "ckpt builds one GPU vendor at a time (CKPT_ENABLE_CUDA, CKPT_ENABLE_HIP, CKPT_ENABLE_SIMGPU)"
#endif

#if CKPT_HAVE_HIP
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1  // host-only code compiled by the host compiler (hip::host sets it too)
#endif
#include <hip/hip_runtime_api.h>

// ---- types and constants --------------------------------------------------------------------------
#define cudaError_t hipError_t
#define cudaStream_t hipStream_t
#define cudaEvent_t hipEvent_t
#define cudaPointerAttributes hipPointerAttribute_t
#define cudaStreamCaptureStatus hipStreamCaptureStatus
#define cudaStreamCaptureStatusNone hipStreamCaptureStatusNone
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamPerThread hipStreamPerThread
#define cudaEventDisableTiming hipEventDisableTiming
#define cudaEventBlockingSync hipEventBlockingSync
#define cudaDevAttrMemoryPoolsSupported hipDeviceAttributeMemoryPoolsSupported
#define cudaDevAttrMaxPitch hipDeviceAttributeMaxPitch
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyKind hipMemcpyKind
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaHostAllocPortable hipHostMallocPortable
#define cudaHostRegisterPortable hipHostRegisterPortable
// ---- error codes ----------------------------------------------------------------------------------
#define cudaSuccess hipSuccess
#define cudaErrorInvalidValue hipErrorInvalidValue
#define cudaErrorNotReady hipErrorNotReady
#define cudaErrorNoDevice hipErrorNoDevice
#define cudaErrorInsufficientDriver hipErrorInsufficientDriver
#define cudaErrorStreamCaptureImplicit hipErrorStreamCaptureImplicit
#define cudaErrorIllegalAddress hipErrorIllegalAddress
#define cudaErrorLaunchFailure hipErrorLaunchFailure
#define cudaErrorLaunchTimeout hipErrorLaunchTimeOut
#define cudaErrorAssert hipErrorAssert
#define cudaErrorECCUncorrectable hipErrorECCNotCorrectable
// ---- calls ----------------------------------------------------------------------------------------
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaGetDevice hipGetDevice
#define cudaSetDevice hipSetDevice
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaMemGetInfo hipMemGetInfo
#define cudaGetLastError hipGetLastError
#define cudaPeekAtLastError hipPeekAtLastError
#define cudaGetErrorName hipGetErrorName
#define cudaGetErrorString hipGetErrorString
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamWaitEvent hipStreamWaitEvent
#define cudaStreamIsCapturing hipStreamIsCapturing
#define cudaEventCreateWithFlags hipEventCreateWithFlags
#define cudaEventDestroy hipEventDestroy
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMallocAsync hipMallocAsync
#define cudaFreeAsync hipFreeAsync
#define cudaHostAlloc hipHostMalloc  // cudaHostAlloc's flags are hipHostMalloc's
#define cudaFreeHost hipHostFree
#define cudaHostRegister hipHostRegister
#define cudaHostUnregister hipHostUnregister
#define cudaPointerGetAttributes hipPointerGetAttributes
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpy2DAsync hipMemcpy2DAsync

#elif CKPT_HAVE_SIMGPU
#include "gpu/sim/sim_runtime.hpp"  // the CUDA names themselves, on the CPU
// The mutation check (tests/gpu/mutants.sh): each wait of the device goes through the simulated
// device, which removes the one the environment variable SIMGPU_MUTANT names (none when unset).
#define cudaStreamWaitEvent(...)                                                                      \
  (::ckpt::simgpu::mutant_skips(__PRETTY_FUNCTION__, "cudaStreamWaitEvent(" #__VA_ARGS__ ")") ? cudaSuccess \
                                                                                          : ::cudaStreamWaitEvent(__VA_ARGS__))
#define cudaEventSynchronize(...)                                                                      \
  (::ckpt::simgpu::mutant_skips(__PRETTY_FUNCTION__, "cudaEventSynchronize(" #__VA_ARGS__ ")") ? cudaSuccess \
                                                                                           : ::cudaEventSynchronize(__VA_ARGS__))
#define cudaStreamSynchronize(...)                                                                      \
  (::ckpt::simgpu::mutant_skips(__PRETTY_FUNCTION__, "cudaStreamSynchronize(" #__VA_ARGS__ ")") ? cudaSuccess \
                                                                                            : ::cudaStreamSynchronize(__VA_ARGS__))

#else  // CUDA
#include <cuda_runtime.h>
#if CKPT_HAVE_NVTX
#include <nvtx3/nvToolsExtCudaRt.h>
#endif
#if CUDART_VERSION < 12000
#error "ckpt's CUDA device needs CUDA 12.0 or newer (docs/gpu.md)"
#endif
#endif

namespace ckpt::detail {

#if CKPT_HAVE_HIP
inline constexpr const char* kGpuVendor = "HIP";      ///< for messages: "HIP device 0"
inline constexpr const char* kGpuDeviceName = "hip";  ///< Device::name()
#elif CKPT_HAVE_SIMGPU
inline constexpr const char* kGpuVendor = "simulated CUDA";
inline constexpr const char* kGpuDeviceName = "simgpu";
#else
inline constexpr const char* kGpuVendor = "CUDA";
inline constexpr const char* kGpuDeviceName = "cuda";
#endif

/// Where a pointer lives, from the vendor's pointer attributes.
enum class GpuMemoryType : std::uint8_t { host_unregistered, host_pinned, device, managed };

inline GpuMemoryType gpu_memory_type(const cudaPointerAttributes& a) {
#if CKPT_HAVE_HIP
  // HIP 5 reports managed memory through isManaged (memoryType says where it is now); HIP 6 renamed
  // memoryType to type, like CUDA's field.
  if (a.isManaged != 0) return GpuMemoryType::managed;
#if HIP_VERSION_MAJOR >= 6
  const hipMemoryType t = a.type;
#else
  const hipMemoryType t = a.memoryType;
#endif
  switch (t) {
    case hipMemoryTypeDevice: return GpuMemoryType::device;
    case hipMemoryTypeHost: return GpuMemoryType::host_pinned;
    default: return GpuMemoryType::host_unregistered;
  }
#else
  switch (a.type) {
    case cudaMemoryTypeDevice: return GpuMemoryType::device;
    case cudaMemoryTypeManaged: return GpuMemoryType::managed;
    case cudaMemoryTypeHost: return GpuMemoryType::host_pinned;
    default: return GpuMemoryType::host_unregistered;
  }
#endif
}

/// True for the handles that mean "the current device's default stream".
inline bool gpu_is_default_stream(cudaStream_t s) {
#if CKPT_HAVE_HIP
  return s == nullptr || s == hipStreamPerThread;
#else
  return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread;
#endif
}

/// Whether gpu_stream_device() asks the stream's device (false: the fallback below, which cannot tell a
/// stream of another device).
#if (CKPT_HAVE_HIP && defined(CKPT_IMPL_HIP_HAS_STREAM_GET_DEVICE) || !CKPT_HAVE_HIP && CUDART_VERSION >= 12080) && \
    !defined(CKPT_IMPL_NO_STREAM_GET_DEVICE)
inline constexpr bool kGpuAsksStreamDevice = true;
#else
inline constexpr bool kGpuAsksStreamDevice = false;
#endif

/// The device `s` was created on. Without cudaStreamGetDevice (HIP without hipStreamGetDevice, a CUDA
/// toolkit before 12.8, a driver older than the toolkit, or CKPT_IMPL_NO_STREAM_GET_DEVICE): the calling
/// thread's current device, so the check that the stream belongs to the Runtime's device cannot fail
/// (see the file comment).
inline cudaError_t gpu_stream_device(cudaStream_t s, int* device) {
#if CKPT_HAVE_HIP && defined(CKPT_IMPL_HIP_HAS_STREAM_GET_DEVICE) && !defined(CKPT_IMPL_NO_STREAM_GET_DEVICE)
  return hipStreamGetDevice(s, device);
#elif !CKPT_HAVE_HIP && CUDART_VERSION >= 12080 && !defined(CKPT_IMPL_NO_STREAM_GET_DEVICE)
  // A runtime of 12.8+ on an older driver refuses the call: that is not a failure of the checkpoint.
  const cudaError_t pending = cudaPeekAtLastError();
  const cudaError_t e = cudaStreamGetDevice(s, device);
  if (e != cudaErrorCallRequiresNewerDriver && e != cudaErrorNotSupported) return e;
  if (pending == cudaSuccess) (void)cudaGetLastError();  // ours: not the application's next error
  return cudaGetDevice(device);  // a driver older than 12.8 under a 12.8+ runtime: not checked
#else
  (void)s;
  return cudaGetDevice(device);
#endif
}

/// The calling thread's current device, or -1 when the thread has none yet. CUDA makes device 0 current
/// (creating its context) at the first call that needs a context, and cudaGetDevice answers 0 on such a
/// thread too: only the driver's cuCtxGetCurrent tells "none". HIP starts every device at hipInit, so
/// there a device switch creates nothing and the answer is hipGetDevice's.
inline cudaError_t gpu_thread_device(int* device) {
#if CKPT_HAVE_HIP
  return hipGetDevice(device);
#else
  using CtxGetCurrent = int (*)(void**);  // CUresult cuCtxGetCurrent(CUcontext*), without cuda.h
  static const CtxGetCurrent get_current = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t pending = cudaPeekAtLastError();
#if CUDART_VERSION >= 12050
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &found);
#else
    const cudaError_t e = cudaGetDriverEntryPoint("cuCtxGetCurrent", &fn, cudaEnableDefault, &found);
#endif
    if (e != cudaSuccess && pending == cudaSuccess) (void)cudaGetLastError();
    return e == cudaSuccess && found == cudaDriverEntryPointSuccess ? reinterpret_cast<CtxGetCurrent>(fn) : nullptr;
  }();
  void* ctx = nullptr;
  if (get_current != nullptr && get_current(&ctx) == 0 && ctx == nullptr) {
    *device = -1;
    return cudaSuccess;
  }
  return cudaGetDevice(device);  // a context is current (or the driver could not say): its device
#endif
}

/// Names one of ckpt's streams in the profiler's timeline (NVTX on CUDA; nothing on HIP: roctx has no
/// stream names).
inline void gpu_name_stream(cudaStream_t s, const char* name) {
#if CKPT_HAVE_CUDA && CKPT_HAVE_NVTX
  nvtxNameCudaStreamA(s, name);
#else
  (void)s;
  (void)name;
#endif
}

}  // namespace ckpt::detail

#endif  // CKPT_GPU_GPU_RUNTIME_HPP
