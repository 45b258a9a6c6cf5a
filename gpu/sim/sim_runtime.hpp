/// \file sim_runtime.hpp
/// The simulated device (CKPT_ENABLE_SIMGPU; a test back end, never chosen at run time): a CPU
/// implementation of the part of the CUDA runtime API that ckpt and its GPU tests call, so that the
/// unmodified gpu/cuda_device.cu compiles against it (gpu/gpu_runtime.hpp includes this header instead
/// of cuda_runtime.h) and runs, with its streams, events and copies, on a machine without a GPU.
///
/// What it models (docs/gpu.md, "The simulated device", says what it does not):
///   - two devices (set_device_count), a current device per thread (none until the thread picks one
///     or makes a call that needs a context: then device 0, as CUDA), contexts counted per thread;
///   - streams: one worker thread each, running its operations in order; the legacy default stream
///     per device synchronises with the blocking streams of its device (both ways); the per-thread
///     default stream is a blocking stream per thread and device; cudaStreamDestroy returns at once and
///     the work already enqueued still runs;
///   - events: every record is a new generation (the stream and position of that record); a wait or a
///     synchronize takes the generation current when it is called, as CUDA does;
///   - memory: device memory is host memory registered as device memory of the current device; pinned
///     host memory (cudaHostAlloc, cudaHostRegister); copies check their kind against where the memory
///     is and stay inside allocations; a copy from or to pageable host memory is synchronous; freed
///     device memory is poisoned and kept aside for a while, so a late copy reads garbage;
///   - graph capture state (a captured stream records nothing that runs), pointer attributes, device
///     attributes, the per-thread last error.
/// For tests: a fixed delay per copy kind and per kernel (it runs before the copy reads its source and
/// writes its destination, which widens every race window), an injected error for the n-th next call
/// of a runtime function, and a check that no memory is freed or unregistered while a queued copy
/// still reads or writes it (a violation aborts with what was freed and which copy).
#ifndef CKPT_GPU_SIM_SIM_RUNTIME_HPP
#define CKPT_GPU_SIM_SIM_RUNTIME_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#define CKPT_SIM_API __attribute__((visibility("default")))

/// The runtime version the simulated device claims (CUDA 13.0): gpu_runtime.hpp's version guards see it.
#ifndef CUDART_VERSION
#define CUDART_VERSION 13000
#endif

// ---- types and constants (the values are CUDA 13's) -------------------------------------------------
enum cudaError_t : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidPitchValue = 12,
  cudaErrorStubLibrary = 34,
  cudaErrorInsufficientDriver = 35,
  cudaErrorCallRequiresNewerDriver = 36,
  cudaErrorDevicesUnavailable = 46,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorECCUncorrectable = 214,
  cudaErrorContained = 226,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchTimeout = 702,
  cudaErrorAssert = 710,
  cudaErrorHostMemoryAlreadyRegistered = 712,
  cudaErrorHostMemoryNotRegistered = 713,
  cudaErrorHardwareStackError = 714,
  cudaErrorIllegalInstruction = 715,
  cudaErrorMisalignedAddress = 716,
  cudaErrorInvalidAddressSpace = 717,
  cudaErrorInvalidPc = 718,
  cudaErrorLaunchFailure = 719,
  cudaErrorTensorMemoryLeak = 721,
  cudaErrorNotSupported = 801,
  cudaErrorMpsClientTerminated = 810,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureIsolation = 905,
  cudaErrorStreamCaptureImplicit = 906,
  cudaErrorExternalDevice = 911,
  cudaErrorIllegalState = 401,
  cudaErrorUnknown = 999,
};

struct CUstream_st;  // defined by the simulated runtime
struct CUevent_st;
struct CUgraph_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;
using cudaGraph_t = CUgraph_st*;

#define cudaStreamLegacy (reinterpret_cast<cudaStream_t>(0x1))
#define cudaStreamPerThread (reinterpret_cast<cudaStream_t>(0x2))
constexpr unsigned cudaStreamDefault = 0x0;
constexpr unsigned cudaStreamNonBlocking = 0x1;
constexpr unsigned cudaEventDefault = 0x0;
constexpr unsigned cudaEventBlockingSync = 0x1;
constexpr unsigned cudaEventDisableTiming = 0x2;
constexpr unsigned cudaHostAllocDefault = 0x0;
constexpr unsigned cudaHostAllocPortable = 0x1;
constexpr unsigned cudaHostRegisterDefault = 0x0;
constexpr unsigned cudaHostRegisterPortable = 0x1;

enum cudaMemcpyKind : int {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaMemoryType : int {
  cudaMemoryTypeUnregistered = 0,
  cudaMemoryTypeHost = 1,
  cudaMemoryTypeDevice = 2,
  cudaMemoryTypeManaged = 3,
};
struct cudaPointerAttributes {
  cudaMemoryType type;
  int device;
  void* devicePointer;
  void* hostPointer;
};
enum cudaStreamCaptureStatus : int {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};
enum cudaStreamCaptureMode : int {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
enum cudaDeviceAttr : int {
  cudaDevAttrMaxPitch = 11,
  cudaDevAttrMemoryPoolsSupported = 115,
};
enum cudaDriverEntryPointQueryResult : int {
  cudaDriverEntryPointSuccess = 0,
  cudaDriverEntryPointSymbolNotFound = 1,
  cudaDriverEntryPointVersionNotSufficent = 2,
};
constexpr unsigned long long cudaEnableDefault = 0x0;
struct cudaDeviceProp {
  char name[256];
  std::size_t totalGlobalMem;
  std::size_t memPitch;
};

// ---- calls ------------------------------------------------------------------------------------------
extern "C" {
CKPT_SIM_API const char* cudaGetErrorName(cudaError_t e);
CKPT_SIM_API const char* cudaGetErrorString(cudaError_t e);
CKPT_SIM_API cudaError_t cudaGetLastError();
CKPT_SIM_API cudaError_t cudaPeekAtLastError();

CKPT_SIM_API cudaError_t cudaGetDeviceCount(int* count);
CKPT_SIM_API cudaError_t cudaGetDevice(int* device);
CKPT_SIM_API cudaError_t cudaSetDevice(int device);
CKPT_SIM_API cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
CKPT_SIM_API cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
CKPT_SIM_API cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes);
CKPT_SIM_API cudaError_t cudaDeviceSynchronize();
CKPT_SIM_API cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned cuda_version,
                                                          unsigned long long flags,
                                                          cudaDriverEntryPointQueryResult* status);

CKPT_SIM_API cudaError_t cudaStreamCreate(cudaStream_t* s);
CKPT_SIM_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags);
CKPT_SIM_API cudaError_t cudaStreamDestroy(cudaStream_t s);
CKPT_SIM_API cudaError_t cudaStreamSynchronize(cudaStream_t s);
CKPT_SIM_API cudaError_t cudaStreamQuery(cudaStream_t s);
CKPT_SIM_API cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
CKPT_SIM_API cudaError_t cudaStreamGetDevice(cudaStream_t s, int* device);
CKPT_SIM_API cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status);
CKPT_SIM_API cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
CKPT_SIM_API cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph);
CKPT_SIM_API cudaError_t cudaGraphDestroy(cudaGraph_t g);

CKPT_SIM_API cudaError_t cudaEventCreate(cudaEvent_t* e);
CKPT_SIM_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags);
CKPT_SIM_API cudaError_t cudaEventDestroy(cudaEvent_t e);
CKPT_SIM_API cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
CKPT_SIM_API cudaError_t cudaEventSynchronize(cudaEvent_t e);
CKPT_SIM_API cudaError_t cudaEventQuery(cudaEvent_t e);
CKPT_SIM_API cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

CKPT_SIM_API cudaError_t cudaMalloc(void** p, std::size_t bytes);
CKPT_SIM_API cudaError_t cudaMallocManaged(void** p, std::size_t bytes, unsigned flags);
CKPT_SIM_API cudaError_t cudaFree(void* p);
CKPT_SIM_API cudaError_t cudaMallocAsync(void** p, std::size_t bytes, cudaStream_t s);
CKPT_SIM_API cudaError_t cudaFreeAsync(void* p, cudaStream_t s);
CKPT_SIM_API cudaError_t cudaHostAlloc(void** p, std::size_t bytes, unsigned flags);
CKPT_SIM_API cudaError_t cudaMallocHost(void** p, std::size_t bytes);
CKPT_SIM_API cudaError_t cudaFreeHost(void* p);
CKPT_SIM_API cudaError_t cudaHostRegister(void* p, std::size_t bytes, unsigned flags);
CKPT_SIM_API cudaError_t cudaHostUnregister(void* p);
CKPT_SIM_API cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* p);

CKPT_SIM_API cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind,
                                         cudaStream_t s);
CKPT_SIM_API cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind);
CKPT_SIM_API cudaError_t cudaMemcpy2DAsync(void* dst, std::size_t dpitch, const void* src, std::size_t spitch,
                                           std::size_t width, std::size_t height, cudaMemcpyKind kind,
                                           cudaStream_t s);
CKPT_SIM_API cudaError_t cudaMemsetAsync(void* p, int value, std::size_t n, cudaStream_t s);
CKPT_SIM_API cudaError_t cudaMemset(void* p, int value, std::size_t n);
}  // extern "C"

// Typed pointers, as cuda_runtime.h's C++ overloads take them.
constexpr unsigned cudaMemAttachGlobal = 0x1;
template <class T>
cudaError_t cudaMalloc(T** p, std::size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}
template <class T>
cudaError_t cudaMallocManaged(T** p, std::size_t bytes, unsigned flags = cudaMemAttachGlobal) {
  return cudaMallocManaged(reinterpret_cast<void**>(p), bytes, flags);
}
template <class T>
cudaError_t cudaMallocAsync(T** p, std::size_t bytes, cudaStream_t s) {
  return cudaMallocAsync(reinterpret_cast<void**>(p), bytes, s);
}
template <class T>
cudaError_t cudaMallocHost(T** p, std::size_t bytes) {
  return cudaMallocHost(reinterpret_cast<void**>(p), bytes);
}
template <class T>
cudaError_t cudaHostAlloc(T** p, std::size_t bytes, unsigned flags) {
  return cudaHostAlloc(reinterpret_cast<void**>(p), bytes, flags);
}

// ---- the simulated device's controls (tests only) ---------------------------------------------------
namespace ckpt::simgpu {

/// What an injected delay applies to.
enum class Op : std::uint8_t { h2d, d2h, d2d, kernel };

/// Delays every later operation of kind `op` by `us` microseconds, on its stream's worker, before the
/// operation reads or writes memory. 0 removes the delay.
CKPT_SIM_API void set_delay_us(Op op, long us);
/// The (`after` + 1)-th call from now of the runtime function `call` (e.g. "cudaMemcpyAsync"), on any
/// thread, returns `error` and does nothing else. Several injections queue per function.
CKPT_SIM_API void inject_error(const std::string& call, int after, cudaError_t error);
/// Devices cudaGetDeviceCount reports (2; 0: cudaErrorNoDevice, as on a machine without a GPU).
CKPT_SIM_API void set_device_count(int n);
/// The pitch limit of 2D copies (cudaDevAttrMaxPitch; 2^31 - 1 bytes, as on current NVIDIA GPUs).
CKPT_SIM_API void set_max_pitch(std::size_t bytes);
/// Whether the devices support memory pools (cudaMallocAsync; default true).
CKPT_SIM_API void set_memory_pools_supported(bool yes);
/// Device memory each device reports (cudaMemGetInfo's total; default 1 GiB: nothing is reserved).
CKPT_SIM_API void set_device_memory(std::size_t bytes);
/// Back to the defaults above, no delays and no injected errors (the devices' state is kept).
CKPT_SIM_API void reset();
/// Threads that have had a current context on `device` (CUDA creates the device's primary context for
/// the first): made current by cudaSetDevice, or by the first call that needed one on a thread that
/// had none (device 0).
CKPT_SIM_API int device_attachments(int device);
/// Whether the calling thread has a current device (a context): cuCtxGetCurrent's answer.
CKPT_SIM_API bool thread_has_device();
/// Calls of `call` so far (every thread).
CKPT_SIM_API long calls(const std::string& call);
/// Enqueues `fn` on `stream` as a kernel: it runs on the stream's worker, after the kernel delay.
CKPT_SIM_API cudaError_t launch(cudaStream_t stream, std::function<void()> fn);
/// Nanoseconds on a monotonic clock (the kernels' clock64() counts them).
CKPT_SIM_API long long now_ns();

/// The mutation check (tests/gpu/mutants.sh): the mutant named by the environment variable
/// SIMGPU_MUTANT (empty: none), and whether the wait `call_text` made in `function` (its
/// __PRETTY_FUNCTION__) is the one that mutant removes. Counts the waits it removed.
CKPT_SIM_API bool mutant_skips(const char* function, const char* call_text);
/// Names of the mutants, with the function and the call each removes.
struct Mutant {
  const char* name;
  const char* function;  ///< a substring of the enclosing function's __PRETTY_FUNCTION__
  const char* call;      ///< the call's text as the preprocessor spells it
};
CKPT_SIM_API const std::vector<Mutant>& mutants();

}  // namespace ckpt::simgpu

#endif  // CKPT_GPU_SIM_SIM_RUNTIME_HPP
